//! The two ends of a `conns` run: two uwarp devices joined by a net_ring
//! pair (no NIC, no hugepages), their cores inline, so they run only
//! when the thread using each end steps them; and the resident memory of
//! this process, which is where every connection's state lives.

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::{CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig, VirtualLink};

/// The server end's address.
pub(super) const SERVER_IP: Ipv4Address = Ipv4Address::new(10, 98, 0, 1);
/// The client end's address.
const CLIENT_IP: Ipv4Address = Ipv4Address::new(10, 98, 0, 2);

/// Descriptors of each ring of the link.
const RING_SIZE: u32 = 4096;

/// Two devices on one virtual link.
pub(super) struct Pair {
    /// The listening end.
    pub(super) server: Device,
    /// The connecting end.
    pub(super) client: Device,
}

impl Pair {
    /// Opens both ends; every connection's TCP send queue and reassembly
    /// buffer hold `buffer` octets each.
    pub(super) fn open(buffer: usize) -> Result<Self, String> {
        let (a, b) = VirtualLink::pair(1, RING_SIZE).map_err(|e| format!("net_ring pair: {e}"))?;
        let open = |end, ip: Ipv4Address| {
            let mut host = HostConfig::new(ip, 24);
            let [.., last] = ip.octets();
            host.mac = Some(EthernetAddress([0x02, 0, 0, 0x98, 0, last]));
            host.tcp.send_buffer = buffer;
            host.tcp.recv_buffer = buffer;
            let dpdk = DpdkConfig::new(DpdkPort::Link(end), host, CoreThreads::Inline);
            Device::open(DeviceConfig::dpdk(dpdk))
                .map_err(|e| format!("the DPDK device at {ip}: {e}"))
        };
        Ok(Pair {
            server: open(a, SERVER_IP)?,
            client: open(b, CLIENT_IP)?,
        })
    }

    /// Runs both ends' cores once; returns the frames (and commands) they
    /// handled.
    pub(super) fn step(&self) -> usize {
        self.client.progress() + self.server.progress()
    }
}

/// This process's resident memory in octets, after giving the allocator's
/// free memory back to the system (so memory freed by an earlier run is
/// not counted, nor reused unseen).
pub(super) fn resident() -> u64 {
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe { libc::malloc_trim(0) };
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}
