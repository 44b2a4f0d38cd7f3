//! The two transports a perf run can measure, each as a pair of ends
//! that connect to each other inside this process:
//!
//! - `dpdk`: two uwarp devices on uwarp's TCP over DPDK, joined by a
//!   net_ring pair (a virtual link: no NIC, no hugepages), their cores
//!   stepped inline by the thread that uses each end, so the server end
//!   and the client end each take one CPU, pinned when there are two;
//! - `socket`: one device of the kernel-socket transport (its control and
//!   dataplane threads) with both ends connected over loopback TCP.
//!
//! The DPDK link can be given an MTU (jumbo frames, as RDMA fabrics
//! usually run) and an impairment stage on each end's receive path
//! ([`LinkOptions`]); the kernel's loopback has neither.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use smoltcp::wire::{
    EthernetAddress, Ipv4Address, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, TCP_HEADER_LEN,
};
use uwarp::HostReport;
use uwarp::{
    CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig, LinkEnd, VirtualLink,
    ZERO_COPY_FROM,
};
use uwarp_dataplane::runtime::ImpairConfig;
use uwarp_dataplane::MempoolConfig;

use super::Waiting;

/// Which transport carries a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// uwarp's TCP on DPDK poll-mode cores.
    Dpdk,
    /// The kernel's TCP sockets.
    Socket,
}

impl Transport {
    /// The transport's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Dpdk => "dpdk",
            Self::Socket => "socket",
        }
    }
}

/// The server end's address on the DPDK link.
const SERVER_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 1);
/// The client end's address on the DPDK link.
const CLIENT_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 2);

/// Ethernet's MTU, the DPDK link's unless told otherwise.
pub const ETHERNET_MTU: u16 = 1500;

/// IPv4 and TCP headers without options: the MSS is the MTU less these.
const IP_TCP_HEADERS: usize = IPV4_HEADER_LEN + TCP_HEADER_LEN;

/// How long both DPDK ends find no work before they close: longer than
/// the delayed ACK (1 ms).
const QUIET: Duration = Duration::from_millis(10);

/// The longest the ends are stepped before they close.
const SETTLE_FOR: Duration = Duration::from_secs(1);

/// Octets an mbuf keeps in front of the frame (`RTE_PKTMBUF_HEADROOM`).
const MBUF_HEADROOM: u32 = 128;

/// How the DPDK link of a run is set up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkOptions {
    /// The IP MTU of the link: TCP's MSS is 40 octets less, and each mbuf
    /// holds a whole frame.
    pub mtu: u16,
    /// What each end's port does to the frames it receives.
    pub impair_rx: ImpairConfig,
    /// Dataplane cores of each end, each polling a queue of the net_ring
    /// pair (which does not spread flows: each arrives on the queue its
    /// sender used).
    pub cores: u16,
    /// Send TCP payloads by reference to the send queue instead of copying
    /// them into mbufs (`HostConfig::payloads_by_reference`).
    pub payloads_by_reference: bool,
    /// Send FPDU payloads of at least this many octets from the
    /// application's memory, not from a copy in the send queue
    /// (`DpdkConfig::zero_copy_from`, whose default is this one's).
    pub zero_copy_from: Option<usize>,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            mtu: ETHERNET_MTU,
            impair_rx: ImpairConfig::default(),
            cores: 1,
            payloads_by_reference: false,
            zero_copy_from: Some(ZERO_COPY_FROM),
        }
    }
}

/// Why a run with no DPDK transport refuses the link's options.
pub const DPDK_LINK_OPTIONS: &str =
    "--mtu, --impair-rx, --cores, --payloads-by-reference and --zero-copy-from \
     need the dpdk transport";

impl LinkOptions {
    /// Refuses an MTU out of range, and a link setting for a run with no
    /// DPDK transport in it (the kernel's loopback keeps its own MTU and
    /// has no impairment stage; `compare` applies them to its DPDK run).
    pub fn check(&self, transports: &[Transport]) -> Result<(), String> {
        if !transports.contains(&Transport::Dpdk) && *self != LinkOptions::default() {
            return Err(DPDK_LINK_OPTIONS.into());
        }
        if self.cores == 0 {
            return Err("--cores: give at least 1".into());
        }
        if !(576..=9000).contains(&self.mtu) {
            return Err(format!("--mtu {}: give 576 to 9000", self.mtu));
        }
        Ok(())
    }

    /// Shapes `host` for this link: the MSS from the MTU, mbufs that hold
    /// a whole frame (as many as fit the default pool's memory), and the
    /// receive impairment, the cores, and how payloads go out.
    fn apply(&self, host: &mut HostConfig) {
        // The MTU is at least 576 (`check`): more than the headers.
        host.tcp.mss = self.mtu - IP_TCP_HEADERS as u16;
        let frame = u32::from(self.mtu) + ETHERNET_HEADER_LEN as u32;
        let data_room = (MBUF_HEADROOM + frame).max(u32::from(host.mempool.data_room));
        // At most 9000 + 14 + 128 octets: fits the u16.
        host.mempool.data_room = data_room as u16;
        // The mbuf memory of a pool of the default shape, which a pool of
        // larger mbufs keeps to.
        let default = MempoolConfig::default();
        let budget = default.capacity * u32::from(default.data_room);
        let count = (budget / data_room).min(host.mempool.capacity + 1);
        // 2^q - 1 mbufs use a pool's memory best.
        host.mempool.capacity = (count + 1).next_power_of_two() / 2 - 1;
        host.mempool.cache_size = host.mempool.cache_size.min(host.mempool.capacity * 2 / 3);
        host.impairment.rx = self.impair_rx;
        host.dataplane_cores = self.cores;
        host.payloads_by_reference = self.payloads_by_reference;
    }
}

/// What each end's cores counted, on the DPDK transport.
#[derive(Debug, Clone)]
pub struct HostReports {
    /// The client's.
    pub client: HostReport,
    /// The server's.
    pub server: HostReport,
}

/// The ends of one run.
pub struct Ends {
    /// The transport.
    pub transport: Transport,
    /// The server's device.
    pub server: Device,
    /// The client's device (for `socket`, a second handle is not needed:
    /// the server's device serves both ends).
    client: Option<Device>,
    /// Where the server listens.
    pub listen: String,
}

impl Ends {
    /// Opens the ends of `transport`, a DPDK link set up as `link` says
    /// (checked with [`LinkOptions::check`]).
    pub fn open(transport: Transport, link: &LinkOptions) -> Result<Self, String> {
        match transport {
            Transport::Dpdk => {
                let (a, b) = VirtualLink::pair(link.cores, 4096)
                    .map_err(|e| format!("net_ring pair: {e}"))?;
                let server = dpdk_device(a, SERVER_IP, 1, link)?;
                let client = dpdk_device(b, CLIENT_IP, 2, link)?;
                Ok(Ends {
                    transport,
                    server,
                    client: Some(client),
                    listen: format!("{SERVER_IP}:0"),
                })
            }
            Transport::Socket => Ok(Ends {
                transport,
                server: Device::open(DeviceConfig::default()).map_err(|e| e.to_string())?,
                client: None,
                listen: "127.0.0.1:0".into(),
            }),
        }
    }

    /// The client's device.
    pub fn client(&self) -> &Device {
        self.client.as_ref().unwrap_or(&self.server)
    }

    /// Closes both ends' devices; on the DPDK transport, returns what
    /// each one's cores counted. Inline cores are first stepped until
    /// neither finds work for [`QUIET`] (at most [`SETTLE_FOR`]), so the
    /// frames still on the link (the last ACKs) are received and the
    /// mbufs dropped at shutdown are those a run really left behind.
    pub fn close(self) -> Option<HostReports> {
        if self.inline() {
            self.settle();
        }
        let client = self.client.and_then(Device::close);
        let server = self.server.close();
        Some(HostReports {
            client: client?,
            server: server?,
        })
    }

    /// Steps both ends' cores until neither finds work for [`QUIET`], or
    /// for [`SETTLE_FOR`] at most. It stops only after a pass that found
    /// nothing: a thread descheduled just after a busy pass must not take
    /// that time for quiet.
    fn settle(&self) {
        let start = Instant::now();
        let mut idle_since = start;
        loop {
            if self.server.progress() + self.client().progress() > 0 {
                idle_since = Instant::now();
            } else if idle_since.elapsed() >= QUIET || start.elapsed() >= SETTLE_FOR {
                return;
            }
        }
    }

    /// Whether each end's thread runs its device's cores (so the server
    /// end needs a thread of its own even when it only waits).
    pub fn inline(&self) -> bool {
        self.transport == Transport::Dpdk
    }

    /// How each end's measuring thread waits: through its cores (inline),
    /// or yielding to the cores' threads.
    pub fn waiting(&self) -> Waiting {
        Waiting::of(self.inline(), false)
    }
}

fn dpdk_device(
    end: LinkEnd,
    ip: Ipv4Address,
    last: u8,
    link: &LinkOptions,
) -> Result<Device, String> {
    let mut host = HostConfig::new(ip, 24);
    host.mac = Some(EthernetAddress([0x02, 0, 0, 0x99, 0, last]));
    // Both ends are ours, in this process: checksums as a NIC with offload
    // (and the kernel's loopback, the socket transport's link) leave them.
    host.memory_link_offloads = true;
    link.apply(&mut host);
    let mut dpdk = DpdkConfig::new(DpdkPort::Link(end), host, CoreThreads::Inline);
    dpdk.zero_copy_from = link.zero_copy_from;
    Device::open(DeviceConfig::dpdk(dpdk)).map_err(|e| format!("the DPDK device: {e}"))
}

/// The CPUs this process could use when it first asked. A thread
/// inherits its creator's mask, so the list is taken once, before any
/// thread was pinned.
pub(crate) fn cpus() -> &'static [core_affinity::CoreId] {
    static CPUS: OnceLock<Vec<core_affinity::CoreId>> = OnceLock::new();
    CPUS.get_or_init(|| core_affinity::get_core_ids().unwrap_or_default())
}

/// Pins the calling thread to CPU `index` of [`cpus`], when there are at
/// least two, so the two ends of a DPDK run do not share one.
pub fn pin(index: usize) {
    let cpus = cpus();
    if cpus.len() >= 2 {
        core_affinity::set_for_current(cpus[index % cpus.len()]);
    }
}
