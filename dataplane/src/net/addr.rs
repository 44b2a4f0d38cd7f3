//! The interface's addresses and the 4-tuple naming a TCP connection.
//!
//! Implements next-hop selection (RFC 1122 §3.3.1.1: on-link destinations
//! directly, everything else through the default gateway) and the source
//! address rules of RFC 1122 §3.2.1.3 (a datagram from an unspecified,
//! broadcast, multicast or loopback address, or from one of our own
//! addresses, is discarded).

use smoltcp::wire::{EthernetAddress, Ipv4Address};

use super::vlan::Vlan;

/// The Ethernet and IPv4 configuration of one interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceAddress {
    /// Our MAC address.
    pub mac: EthernetAddress,
    /// Our IPv4 address.
    pub ip: Ipv4Address,
    /// The length of the subnet prefix of `ip` (0..=32; larger values act as 32).
    pub prefix_len: u8,
    /// The default gateway for off-link destinations, if any.
    pub gateway: Option<Ipv4Address>,
    /// The IEEE 802.1Q VLAN the interface is on: only frames tagged with
    /// its id are ours, and every frame we send carries its tag. `None`
    /// (untagged): tagged frames are dropped.
    pub vlan: Option<Vlan>,
}

impl InterfaceAddress {
    /// The subnet mask, as a host-order integer.
    fn netmask(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            len => u32::MAX << (32 - u32::from(len.min(32))),
        }
    }

    /// Whether `ip` is in our subnet (on-link).
    pub fn is_local_subnet(&self, ip: Ipv4Address) -> bool {
        let mask = self.netmask();
        u32::from(ip) & mask == u32::from(self.ip) & mask
    }

    /// Whether `ip` is the limited broadcast address or our subnet's
    /// directed broadcast address (RFC 919, RFC 922; /31 and /32 subnets
    /// have none, RFC 3021).
    pub fn is_broadcast(&self, ip: Ipv4Address) -> bool {
        let mask = self.netmask();
        ip.is_broadcast()
            || (self.prefix_len < 31
                && self.is_local_subnet(ip)
                && u32::from(ip) | mask == u32::MAX)
    }

    /// Whether `ip` can be a peer's address: unicast, not loopback, not
    /// ours (RFC 1122 §3.2.1.3). Datagrams from any other source are
    /// dropped, ARP senders with any other address are not learned, and no
    /// other address is resolved.
    pub fn is_valid_peer(&self, ip: Ipv4Address) -> bool {
        !(ip.is_unspecified()
            || ip.is_multicast()
            || ip.is_loopback()
            || self.is_broadcast(ip)
            || ip == self.ip)
    }

    /// The neighbour a datagram for `dst` is sent to: `dst` itself when it
    /// is on-link, else the gateway; `None` for an off-link destination
    /// without a gateway.
    pub fn next_hop(&self, dst: Ipv4Address) -> Option<Ipv4Address> {
        if self.is_local_subnet(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }
}

/// A TCP connection as seen from this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FourTuple {
    /// Our address (the segment's destination on receive).
    pub local_ip: Ipv4Address,
    /// Our port.
    pub local_port: u16,
    /// The peer's address (the segment's source on receive).
    pub remote_ip: Ipv4Address,
    /// The peer's port.
    pub remote_port: u16,
}

/// A MAC address written as six colon-separated hex octets
/// (`02:00:00:00:00:01`, as `/sys/class/net/IFACE/address` and users
/// write them); `None` for anything else.
pub fn parse_mac(text: &str) -> Option<EthernetAddress> {
    let octets: Vec<u8> = text
        .split(':')
        .map(|part| u8::from_str_radix(part, 16).ok())
        .collect::<Option<_>>()?;
    Some(EthernetAddress(octets.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(prefix_len: u8, gateway: Option<Ipv4Address>) -> InterfaceAddress {
        InterfaceAddress {
            mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            ip: Ipv4Address::new(10, 0, 0, 2),
            prefix_len,
            gateway,
            vlan: None,
        }
    }

    #[test]
    fn subnet_membership_follows_the_prefix() {
        let addr = address(24, None);
        assert!(addr.is_local_subnet(Ipv4Address::new(10, 0, 0, 200)));
        assert!(!addr.is_local_subnet(Ipv4Address::new(10, 0, 1, 2)));
        assert!(address(0, None).is_local_subnet(Ipv4Address::new(192, 168, 1, 1)));
        let host = address(32, None);
        assert!(host.is_local_subnet(Ipv4Address::new(10, 0, 0, 2)));
        assert!(!host.is_local_subnet(Ipv4Address::new(10, 0, 0, 3)));
        // Out-of-range prefixes act as /32 instead of overflowing the shift.
        assert_eq!(address(200, None).netmask(), u32::MAX);
    }

    #[test]
    fn next_hop_is_the_destination_on_link_else_the_gateway() {
        let gateway = Ipv4Address::new(10, 0, 0, 1);
        let on_link = Ipv4Address::new(10, 0, 0, 9);
        let off_link = Ipv4Address::new(8, 8, 8, 8);
        assert_eq!(address(24, Some(gateway)).next_hop(on_link), Some(on_link));
        assert_eq!(address(24, Some(gateway)).next_hop(off_link), Some(gateway));
        assert_eq!(address(24, None).next_hop(off_link), None);
    }

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:00:0a:0b:0c:ff"),
            Some(EthernetAddress([2, 0, 10, 11, 12, 255]))
        );
        assert_eq!(parse_mac("02:00"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:00"), None);
    }

    #[test]
    fn broadcast_and_invalid_peers_are_recognised() {
        let addr = address(24, None);
        assert!(addr.is_broadcast(Ipv4Address::BROADCAST));
        assert!(addr.is_broadcast(Ipv4Address::new(10, 0, 0, 255)));
        assert!(!addr.is_broadcast(Ipv4Address::new(10, 0, 1, 255)));
        assert!(!address(31, None).is_broadcast(Ipv4Address::new(10, 0, 0, 3)));
        for invalid in [
            Ipv4Address::UNSPECIFIED,
            Ipv4Address::BROADCAST,
            Ipv4Address::new(10, 0, 0, 255),
            Ipv4Address::new(224, 0, 0, 1),
            Ipv4Address::new(127, 0, 0, 1),
            addr.ip,
        ] {
            assert!(!addr.is_valid_peer(invalid), "{invalid}");
        }
        assert!(addr.is_valid_peer(Ipv4Address::new(10, 0, 0, 3)));
        assert!(addr.is_valid_peer(Ipv4Address::new(8, 8, 8, 8)));
    }
}
