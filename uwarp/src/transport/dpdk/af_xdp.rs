//! A device on an interface the kernel keeps, beside the kernel's own
//! stack ([`DpdkConfig::beside_kernel`]): DPDK's af_xdp driver on queue 0
//! of the interface, with uwarp's XDP program steering uwarp's ports to
//! it ([`uwarp_dataplane::af_xdp`]); or, where the interface's service
//! (`uwarpd`) runs, a net_memif link from it, which the service feeds
//! with this process's frames so that several processes share the
//! interface ([`uwarp_dataplane::af_xdp::service`]).

use std::os::unix::net::UnixStream;

use uwarp_control::{BesideKernel, HostConfig};
use uwarp_dataplane::af_xdp::service::{link_socket, service_socket};
use uwarp_dataplane::af_xdp::{KernelInterface, SteeringObject};

use super::cores::{CoreThreads, DpdkConfig};
use super::port::DpdkPort;
use crate::error::Error;

impl DpdkConfig {
    /// A device on the kernel's interface `iface`, beside the kernel: on
    /// the interface's first IPv4 address, its MAC address and the
    /// gateway of its default route, as the kernel has them. The kernel
    /// keeps everything on the interface that is not uwarp's (ARP, ICMP,
    /// its own connections and ports); uwarp's listeners and connections
    /// take ports the kernel then holds for it. The cores run on
    /// `threads`.
    ///
    /// Where the interface's service (`uwarpd --iface IFACE`) runs, the
    /// device's port is a net_memif link from it (the EAL then gets a
    /// file prefix of this process's own, as net_memif needs), and any
    /// number of processes share the interface. Otherwise the port is
    /// the interface's queue 0 through AF_XDP (the EAL is the virtual
    /// devices' one), for this process alone.
    ///
    /// An error when the interface is not there or has no IPv4 address.
    /// Opening the device needs root (`CAP_NET_ADMIN`, `CAP_BPF`; the
    /// service's socket), and without the service it fails when another
    /// process runs on the interface.
    pub fn beside_kernel(iface: &str, threads: CoreThreads) -> Result<DpdkConfig, Error> {
        let failed = |e: std::io::Error| Error::DpdkSetup(format!("beside the kernel: {e}"));
        let kernel = KernelInterface::named(iface).map_err(failed)?;
        // A service runs where its socket takes a connection (a file left
        // by a dead one does not).
        let service = service_socket(kernel.index).map_err(failed)?;
        let through_service = UnixStream::connect(service).is_ok();
        let (ip, prefix_len) = kernel.ipv4;
        let mut host = HostConfig::new(ip, prefix_len);
        host.gateway = kernel.gateway;
        host.beside_kernel = Some(BesideKernel {
            ifindex: kernel.index,
            through_service,
        });
        if through_service {
            let link = link_socket(kernel.index, std::process::id()).map_err(failed)?;
            let mac = kernel.mac.map(|octet| format!("{octet:02x}")).join(":");
            // The link carries the interface's MAC address: the frames
            // this process sends leave the interface as its own.
            let port = DpdkPort::Vdev(format!(
                "net_memif_uwarpd,role=client,socket={},socket-abstract=no,mac={mac}",
                link.display()
            ));
            let mut config = DpdkConfig::new(port, host, threads);
            config.eal = Some(Vec::new());
            return Ok(config);
        }
        let object = SteeringObject::of_process().map_err(failed)?;
        // The driver's instance is named after the interface, so that two
        // interfaces' devices never share a name.
        let port = DpdkPort::Vdev(object.vdev(&format!("net_af_xdp_{iface}"), iface));
        Ok(DpdkConfig::new(port, host, threads))
    }
}
