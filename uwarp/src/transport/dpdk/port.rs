//! Which DPDK port a device runs on ([`DpdkPort`]), named the way the
//! EAL names ports, and the virtual links this process can make for
//! itself ([`VirtualLink`]): nothing of DPDK's own types shows, and the
//! port is claimed only when the device opens.

use std::fmt;
use std::sync::{Arc, Mutex};

use uwarp_dataplane::{Device as Port, Eal};

use super::eal;
use crate::error::Error;

/// The DPDK port a device on the DPDK transport runs on.
#[derive(Clone, Debug)]
pub enum DpdkPort {
    /// A virtual device created when the device opens and removed when it
    /// closes (so a process may open it again later), in the EAL's
    /// `--vdev` syntax: the driver instance's name, then its arguments
    /// after a comma, e.g. `net_af_packet0,iface=uw0` or
    /// `net_tap0,iface=uwtap0`.
    Vdev(String),
    /// A port the EAL already has, by the name DPDK gives it: a `--vdev`
    /// given in the EAL arguments ([`DpdkConfig::eal`](crate::DpdkConfig::eal)),
    /// e.g. `net_memif0`, or the PCI address of a NIC allowed with `-a`,
    /// e.g. `0000:03:00.0`.
    Named(String),
    /// One end of a [`VirtualLink`] made by this process.
    Link(LinkEnd),
}

impl DpdkPort {
    /// The port of the first `--vdev` (its driver instance, e.g.
    /// `net_tap0`) or `-a`/`--allow` (its PCI address) among the EAL
    /// arguments `eal`, as a [`DpdkPort::Named`]; `None` if they name
    /// no device.
    pub fn first_in_eal(eal: &[String]) -> Option<DpdkPort> {
        first_device(eal).map(DpdkPort::Named)
    }

    /// Creates or claims the port on the running `eal`.
    pub(crate) fn open(&self, eal: &'static Eal) -> Result<Port, Error> {
        match self {
            DpdkPort::Vdev(vdev) => {
                let (name, args) = vdev.split_once(',').unwrap_or((vdev, ""));
                Port::create_vdev(eal, name, args).map_err(|e| {
                    Error::DpdkSetup(format!(
                        "cannot create the DPDK virtual device {name} ({vdev:?}): {e}"
                    ))
                })
            }
            DpdkPort::Named(name) => Port::by_name(eal, name)
                .map_err(|e| Error::DpdkSetup(format!("no DPDK port {name}: {e}"))),
            DpdkPort::Link(end) => end.take().ok_or_else(|| {
                Error::DpdkSetup(format!(
                    "the virtual link end {} carries a device already",
                    end.name
                ))
            }),
        }
    }
}

/// The name of the port of the first `--vdev` or `-a`/`--allow` among
/// `eal`.
fn first_device(eal: &[String]) -> Option<String> {
    let mut args = eal.iter();
    while let Some(arg) = args.next() {
        let value = ["--vdev", "-a", "--allow"].iter().find_map(|option| {
            match arg.strip_prefix(option)? {
                "" => args.clone().next().map(String::as_str),
                rest => rest.strip_prefix('='),
            }
        });
        if let Some(value) = value {
            return value.split(',').next().map(str::to_owned);
        }
    }
    None
}

/// A virtual link in this process: two net_ring ports wired to each
/// other, what one end transmits the other receives. No NIC, no
/// hugepages, no root; frames pass as pointers and never leave memory.
/// [`VirtualLink::pair`] makes one and gives its two ends.
#[derive(Debug)]
pub struct VirtualLink {
    _private: (),
}

impl VirtualLink {
    /// Makes a link with `queues` queue pairs at each end (1 to 16; a
    /// device on an end has a queue pair per dataplane core,
    /// `HostConfig::dataplane_cores`) and rings of `ring_size` slots (a
    /// power of two) each way, and gives its two ends, each for one
    /// device ([`DpdkPort::Link`]). Starts this process's EAL if it is not
    /// running yet, as a device with no EAL arguments does
    /// ([`DpdkConfig::eal`](crate::DpdkConfig::eal) `None`).
    pub fn pair(queues: u16, ring_size: u32) -> Result<(LinkEnd, LinkEnd), Error> {
        let eal = eal::start(None)?;
        let (a, b) = uwarp_dataplane::ring_pair(eal, queues, ring_size)?;
        Ok((LinkEnd::new(a), LinkEnd::new(b)))
    }
}

/// One end of a [`VirtualLink`]: a port for one device. Clones share the
/// end; the first device opened on it takes it, and it goes when that
/// device closes (the link's rings go once both ends have).
#[derive(Clone)]
pub struct LinkEnd {
    /// The port's name, for messages.
    name: String,
    /// The port until a device takes it.
    port: Arc<Mutex<Option<Port>>>,
}

impl LinkEnd {
    fn new(port: Port) -> Self {
        LinkEnd {
            name: port.name().unwrap_or_else(|_| "?".to_owned()),
            port: Arc::new(Mutex::new(Some(port))),
        }
    }

    /// The port, unless a device took it already.
    fn take(&self) -> Option<Port> {
        self.port
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// The dataplane's port of this end, for a peer below the API (the
    /// tests' bare TCP hosts); `None` if a device took it already. Only
    /// with the `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn into_port(self) -> Option<Port> {
        self.take()
    }
}

impl fmt::Debug for LinkEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let taken = self
            .port
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_none();
        f.debug_struct("LinkEnd")
            .field("name", &self.name)
            .field("taken", &taken)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_port_name_comes_from_the_first_device() {
        assert_eq!(
            first_device(&args(&["--vdev", "net_tap0,iface=x", "--vdev=net_ring1"])),
            Some("net_tap0".into())
        );
        assert_eq!(
            first_device(&args(&["-l", "0", "--vdev=net_memif0,role=server"])),
            Some("net_memif0".into())
        );
        assert_eq!(
            first_device(&args(&["-a", "0000:00:07.0", "--vdev", "net_ring0"])),
            Some("0000:00:07.0".into())
        );
        assert_eq!(first_device(&args(&["--no-pci"])), None);
    }
}
