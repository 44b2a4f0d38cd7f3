//! What the kernel knows of one of its interfaces that a uwarp port on it
//! needs: index, MAC address, first IPv4 address with its prefix, MTU and
//! the default gateway through it. So that a user names the interface
//! and nothing else.

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;

use crate::net::parse_mac;

/// An interface as the kernel has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInterface {
    /// Its name, e.g. `eth1`.
    pub name: String,
    /// Its index.
    pub index: u32,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its first IPv4 address and that address's prefix length.
    pub ipv4: (Ipv4Addr, u8),
    /// Its MTU.
    pub mtu: u32,
    /// The gateway of the default route through it, if there is one.
    pub gateway: Option<Ipv4Addr>,
}

impl KernelInterface {
    /// The interface named `name`; an error that says what is missing
    /// (no such interface, no IPv4 address).
    pub fn named(name: &str) -> io::Result<KernelInterface> {
        let c_name = CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
        // SAFETY: a NUL-terminated name; 0 means there is none.
        let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no network interface {name}"),
            ));
        }
        let sys = format!("/sys/class/net/{name}");
        let mac = parse_mac(std::fs::read_to_string(format!("{sys}/address"))?.trim())
            .map(|mac| mac.0)
            .ok_or_else(|| io::Error::other(format!("{name} has no Ethernet address")))?;
        let mtu = std::fs::read_to_string(format!("{sys}/mtu"))?
            .trim()
            .parse()
            .map_err(|_| io::Error::other(format!("{name}'s MTU does not read")))?;
        let ipv4 = first_ipv4(name)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{name} has no IPv4 address"),
            )
        })?;
        let gateway = default_gateway(&std::fs::read_to_string("/proc/net/route")?, name);
        Ok(KernelInterface {
            name: name.to_owned(),
            index,
            mac,
            ipv4,
            mtu,
            gateway,
        })
    }
}

/// The first IPv4 address of interface `name` and its prefix length.
fn first_ipv4(name: &str) -> io::Result<Option<(Ipv4Addr, u8)>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a valid place for the list's head.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: a node of the list getifaddrs made, freed only below.
        let ifa = unsafe { &*entry };
        entry = ifa.ifa_next;
        // SAFETY: getifaddrs gives every node a NUL-terminated name.
        let ifa_name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if ifa.ifa_addr.is_null()
            || ifa.ifa_netmask.is_null()
            || ifa_name.to_bytes() != name.as_bytes()
        {
            continue;
        }
        // SAFETY: a sockaddr of the family it says.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET addresses and masks are sockaddr_in.
        let (addr, mask) = unsafe {
            (
                *ifa.ifa_addr.cast::<libc::sockaddr_in>(),
                *ifa.ifa_netmask.cast::<libc::sockaddr_in>(),
            )
        };
        let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        let prefix = u32::from_be(mask.sin_addr.s_addr).count_ones() as u8;
        found = Some((ip, prefix));
        break;
    }
    // SAFETY: the list getifaddrs made; no reference into it remains.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// The gateway of the default route through `iface` in `routes`, the
/// text of `/proc/net/route` (hex fields in the machine's order).
fn default_gateway(routes: &str, iface: &str) -> Option<Ipv4Addr> {
    /// RTF_UP | RTF_GATEWAY.
    const UP_GATEWAY: u32 = 0x3;
    routes.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| fields.get(i).and_then(|f| u32::from_str_radix(f, 16).ok());
        let (destination, gateway, flags, mask) = (hex(1)?, hex(2)?, hex(3)?, hex(7)?);
        let default = *fields.first()? == iface && destination == 0 && mask == 0;
        (default && flags & UP_GATEWAY == UP_GATEWAY)
            // The address's octets in memory order, printed as a number.
            .then(|| Ipv4Addr::from(gateway.to_ne_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_through_the_interface_gives_the_gateway() {
        let gateway = Ipv4Addr::new(10, 0, 0, 1);
        let hex = u32::from_ne_bytes(gateway.octets());
        let routes = format!(
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t{hex:08X}\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
             eth1\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        );
        assert_eq!(default_gateway(&routes, "eth0"), Some(gateway));
        assert_eq!(default_gateway(&routes, "eth1"), None);
        assert_eq!(default_gateway(&routes, "eth2"), None);
    }

    #[test]
    fn loopback_is_found_with_its_address() {
        let lo = KernelInterface::named("lo").unwrap();
        assert_eq!(lo.ipv4, (Ipv4Addr::LOCALHOST, 8));
        assert!(lo.index > 0);
        assert_eq!(lo.mac, [0; 6]);
        assert!(KernelInterface::named("uwarp-none0")
            .unwrap_err()
            .to_string()
            .contains("no network interface uwarp-none0"));
    }
}
