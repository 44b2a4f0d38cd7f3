//! A device on a kernel interface's queue, beside the kernel's own stack
//! ([`DpdkConfig::beside_kernel`]): DPDK's af_xdp driver on queue 0 of
//! the interface, with uwarp's XDP program steering uwarp's ports to it
//! ([`uwarp_dataplane::af_xdp`]).

use uwarp_control::HostConfig;
use uwarp_dataplane::af_xdp::{KernelInterface, SteeringObject};

use super::cores::{CoreThreads, DpdkConfig};
use super::port::DpdkPort;
use crate::error::Error;

impl DpdkConfig {
    /// A device on queue 0 of the kernel's interface `iface`, beside the
    /// kernel: on the interface's first IPv4 address, its MAC address and
    /// the gateway of its default route, as the kernel has them. The
    /// kernel keeps everything on the interface that is not uwarp's (ARP,
    /// ICMP, its own connections and ports); uwarp's listeners and
    /// connections take ports the kernel then holds for it. The cores run
    /// on `threads`; the EAL is the virtual devices' one
    /// ([`DpdkConfig::eal`] `None`).
    ///
    /// An error when the interface is not there or has no IPv4 address.
    /// Opening the device needs `CAP_NET_ADMIN` and `CAP_BPF` (root),
    /// and fails when another XDP program is attached to the interface.
    pub fn beside_kernel(iface: &str, threads: CoreThreads) -> Result<DpdkConfig, Error> {
        let kernel = KernelInterface::named(iface)
            .map_err(|e| Error::DpdkSetup(format!("AF_XDP beside the kernel: {e}")))?;
        let object = SteeringObject::of_process().map_err(|e| {
            Error::DpdkSetup(format!(
                "AF_XDP beside the kernel: cannot write the XDP program: {e}"
            ))
        })?;
        let (ip, prefix_len) = kernel.ipv4;
        let mut host = HostConfig::new(ip, prefix_len);
        host.gateway = kernel.gateway;
        host.beside_kernel = Some(kernel.index);
        // The driver's instance is named after the interface, so that two
        // interfaces' devices never share a name.
        let port = DpdkPort::Vdev(object.vdev(&format!("net_af_xdp_{iface}"), iface));
        Ok(DpdkConfig::new(port, host, threads))
    }
}
