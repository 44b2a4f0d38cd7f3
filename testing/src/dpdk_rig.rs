//! uwarp's TCP on DPDK, stepped from the test thread over a net_ring pair,
//! facing a peer the test plays with hand-made frames.
//!
//! Port A carries uwarp: the control core runs [`TcpSetup`] (listeners,
//! handshakes), one dataplane core runs [`TcpCore`] (the connections), both
//! polled by a [`Stepper`] at simulated instants the test advances. Port B
//! is the peer's wire: the test injects Ethernet frames on B's transmit
//! queue and reads what uwarp sent from B's two receive queues (the
//! dataplane core's and the control core's transmit queues).
//!
//! Every connection's application is a [`TestApp`]: it records what the
//! engine hands it (data with its stream position, the left edge, events,
//! how it ended, the connection's counters after each input) into an
//! [`AppLog`] the test reads, sends what the test put in its outbox, and
//! never echoes, nor closes unless the test asks it to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol,
    Ipv4Address, Ipv4Packet, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber, TcpTimestampRepr,
};
use uwarp::{
    CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig, TransportConfig,
    VirtualLink,
};
use uwarp_control::TcpHost;
use uwarp_control::{SetupCounters, TcpRequests, TcpSetup};
use uwarp_dataplane::net::test_frames::ipv4_between;
use uwarp_dataplane::net::{FourTuple, InterfaceAddress, InterfaceConfig, NetCounters};
use uwarp_dataplane::runtime::{start_port, DataplaneCounters, Stepper};
use uwarp_dataplane::tcp::{Clock, Doorbell, End, TcpApp, TcpCore, TcpCoreCounters};
use uwarp_dataplane::{
    ring_pair, Eal, EalConfig, Mbuf, Mempool, MempoolConfig, Port, PortConfig, Queues,
};
use uwarp_stack::tcp::{
    Config, Connection, Consumer, Disposition, Endpoint, Event, Instant as TcpInstant, State, Stats,
};

/// uwarp's MAC address.
pub const UWARP_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0x77, 0, 0x0a]);
/// uwarp's IPv4 address, in 10.88.0.0/16.
pub const UWARP_IP: Ipv4Address = Ipv4Address::new(10, 88, 0, 2);
/// The subnet prefix length of uwarp's address.
pub const PREFIX_LEN: u8 = 16;
/// The peer's MAC address.
pub const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0x77, 0, 0x0b]);
/// The peer's IPv4 address.
pub const PEER_IP: Ipv4Address = Ipv4Address::new(10, 88, 0, 1);
/// The port uwarp listens on.
pub const LISTEN_PORT: u16 = 5000;

/// Simulated time between two steps.
pub const STEP: Duration = Duration::from_micros(100);
/// Steps [`Rig::settle`] runs: 3 ms, past the 1 ms delayed ACK.
pub const SETTLE_STEPS: usize = 30;

/// The one EAL of this test process, shared by every test in it.
pub fn eal() -> &'static Eal {
    static EAL: OnceLock<&'static Eal> = OnceLock::new();
    EAL.get_or_init(|| Eal::init(&EalConfig::virtual_devices(Vec::<String>::new())).expect("EAL"))
}

/// Two iWARP devices joined by a [`VirtualLink`] (a net_ring pair) of
/// `ring_size` descriptors: 10.`subnet`.0.1 (the first) and
/// 10.`subnet`.0.2, with MACs of the same numbers, their cores placed as
/// `threads` says, each device's settings changed by `tune` before it
/// opens.
pub fn device_pair(
    subnet: u8,
    ring_size: u32,
    threads: CoreThreads,
    tune: impl Fn(&mut DpdkConfig),
) -> (Device, Device) {
    let (a, b) = VirtualLink::pair(1, ring_size).expect("a virtual link");
    let open = |end, last: u8| {
        let host = host_config(subnet, last, |_| {});
        let mut dpdk = DpdkConfig::new(DpdkPort::Link(end), host, threads);
        tune(&mut dpdk);
        Device::open(DeviceConfig::dpdk(dpdk)).expect("a DPDK device")
    };
    (open(a, 1), open(b, 2))
}

/// An iWARP device opened with `config` on the DPDK transport at
/// 10.`subnet`.0.1, its cores on threads, and beside it on a
/// [`VirtualLink`] a bare TCP host at 10.`subnet`.0.2 (uwarp's TCP on
/// DPDK, no MPA) whose connections run [`TestApp`]s: a peer the test
/// plays by hand. Both hosts' settings are changed by `tune` before they
/// start.
pub fn device_beside_tcp_host(
    subnet: u8,
    config: DeviceConfig,
    tune: impl Fn(&mut HostConfig),
) -> (Device, TcpHost<TestApp>) {
    let (a, b) = VirtualLink::pair(1, 1024).expect("a virtual link");
    let b = b.into_port().expect("the link's second port");
    let host = host_config(subnet, 1, &tune);
    let dpdk = DpdkConfig::new(DpdkPort::Link(a), host, CoreThreads::Spawned);
    let config = DeviceConfig {
        transport: TransportConfig::Dpdk(dpdk),
        ..config
    };
    let device = Device::open(config).expect("a DPDK device");
    let host = TcpHost::start(eal(), b, host_config(subnet, 2, &tune)).expect("a TCP host");
    (device, host)
}

/// The settings of the host at 10.`subnet`.0.`last` (a MAC of the same
/// numbers), changed by `tune`.
fn host_config(subnet: u8, last: u8, tune: impl Fn(&mut HostConfig)) -> HostConfig {
    let mut host = HostConfig::new(Ipv4Address::new(10, subnet, 0, last), 24);
    host.mac = Some(EthernetAddress([2, 0, 0, subnet, 0, last]));
    tune(&mut host);
    host
}

/// The TCP settings of the tests: the defaults, with buffers small enough
/// for a thousand half-open connections, and a minimum RTO (200 ms) long
/// enough that no data is resent within one exchange of the test (3 ms
/// of simulated time).
pub fn test_config() -> Config {
    Config {
        send_buffer: 64 * 1024,
        recv_buffer: 32 * 1024,
        rto_min: uwarp_stack::tcp::Duration::from_millis(200),
        ..Config::default()
    }
}

/// What one connection's application saw.
#[derive(Debug, Default)]
pub struct AppLog {
    /// Every piece of data the engine handed over: (stream position,
    /// octets, in order).
    pub data: Vec<(u64, Vec<u8>, bool)>,
    /// The last left edge reported (everything before it arrived).
    pub left_edge: u64,
    /// Engine events, in order.
    pub events: Vec<Event>,
    /// How the connection ended, once it did.
    pub end: Option<End>,
    /// The connection's counters after its last input (or at its end).
    pub stats: Stats,
    /// The connection's state after its last input.
    pub state: Option<State>,
    /// Data to send, taken as the send queue has room.
    pub outbox: Vec<u8>,
    /// Keep what arrives unread from now on, so the receive window
    /// closes (a peer that stopped reading).
    pub hold: bool,
    /// Close the connection once this many octets of the stream arrived
    /// (a peer that reads the first frame and hangs up).
    pub close_after: Option<u64>,
    /// Times the core drove the application.
    pub drives: usize,
    /// The connection's doorbell, once it runs on a dataplane core.
    pub doorbell: Option<Doorbell>,
}

impl AppLog {
    /// Octets delivered, counting every delivery.
    pub fn delivered(&self) -> usize {
        self.data.iter().map(|(_, d, _)| d.len()).sum()
    }

    /// Whether two deliveries covered the same stream position.
    pub fn has_overlap(&self) -> bool {
        let mut ranges: Vec<(u64, u64)> = self
            .data
            .iter()
            .map(|(pos, d, _)| (*pos, pos + d.len() as u64))
            .collect();
        ranges.sort_unstable();
        ranges.windows(2).any(|w| w[1].0 < w[0].1)
    }

    /// The stream from position 0 up to the left edge, assembled from the
    /// deliveries.
    pub fn stream(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.left_edge as usize];
        for (pos, data, _) in &self.data {
            for (i, byte) in data.iter().enumerate() {
                if let Some(slot) = out.get_mut(*pos as usize + i) {
                    *slot = *byte;
                }
            }
        }
        out
    }
}

/// A shared [`AppLog`].
pub type Log = Arc<Mutex<AppLog>>;

/// Locks a log (a panicking test poisons nothing the others use).
pub fn lock(log: &Log) -> MutexGuard<'_, AppLog> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits up to `wait` until `done` holds for `log`; fails naming `what`.
pub fn wait_for_log(log: &Log, wait: Duration, what: &str, done: impl Fn(&AppLog) -> bool) {
    let deadline = Instant::now() + wait;
    while !done(&lock(log)) {
        assert!(Instant::now() < deadline, "{what} in time");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The stream `log`'s connection received until its peer closed (within
/// `wait`); fails if the connection ended first.
pub fn stream_until_closed(log: &Log, wait: Duration) -> Vec<u8> {
    wait_for_log(log, wait, "the peer's close", |log| {
        assert!(log.end.is_none(), "the connection ended: {:?}", log.end);
        log.events.contains(&Event::PeerClosed)
    });
    lock(log).stream()
}

/// Small pools: the tests of one binary run side by side in the EAL's
/// 256 MiB.
pub fn small_pool(host: &mut HostConfig) {
    host.mempool.capacity = 2047;
}

/// The application of every connection: records, sends its outbox,
/// closes only as its log's `close_after` says.
pub struct TestApp {
    log: Log,
}

impl TestApp {
    /// An application recording into `log` (and sending its outbox).
    pub fn new(log: Log) -> Self {
        TestApp { log }
    }
}

impl Consumer for TestApp {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        let mut log = lock(&self.log);
        if log.hold {
            return Disposition::Keep;
        }
        log.data.push((pos, data.to_vec(), in_order));
        Disposition::Consumed
    }

    fn on_left_edge(&mut self, left_edge: u64) {
        lock(&self.log).left_edge = left_edge;
    }
}

impl TcpApp for TestApp {
    fn on_event(&mut self, _now: TcpInstant, event: Event, _conn: &mut Connection) {
        lock(&self.log).events.push(event);
    }

    fn drive(&mut self, _now: TcpInstant, conn: &mut Connection) {
        let mut log = lock(&self.log);
        log.drives += 1;
        if !log.outbox.is_empty() {
            let taken = conn.send(&log.outbox);
            log.outbox.drain(..taken);
        }
        if log
            .close_after
            .is_some_and(|octets| log.left_edge >= octets)
        {
            conn.close();
        }
        log.stats = *conn.stats();
        log.state = Some(conn.state());
    }

    fn on_dataplane(&mut self, doorbell: Doorbell) {
        lock(&self.log).doorbell = Some(doorbell);
    }

    fn on_end(&mut self, end: End, stats: &Stats) {
        let mut log = lock(&self.log);
        log.end = Some(end);
        log.stats = *stats;
    }
}

/// The logs of every connection a listener accepted, by peer endpoint.
pub type Apps = Arc<Mutex<HashMap<(Ipv4Address, u16), Log>>>;

/// A new log for the connection accepted from `remote`, kept in `apps`.
pub fn accepted_log(apps: &Apps, remote: Endpoint) -> Log {
    let log = Log::default();
    apps.lock()
        .expect("apps")
        .insert((remote.addr, remote.port), Arc::clone(&log));
    log
}

/// Listens on `port` of `host`: each connection it accepts runs a
/// [`TestApp`] logging into `apps`.
pub fn listen_logging(host: &TcpHost<TestApp>, port: u16, apps: &Apps) {
    let apps = Arc::clone(apps);
    host.listen(port, move |remote: Endpoint| {
        TestApp::new(accepted_log(&apps, remote))
    })
    .expect("listening");
}

/// What the cores counted, at shutdown.
#[derive(Debug, Clone)]
pub struct Report {
    /// The control core's TCP.
    pub setup: SetupCounters,
    /// The dataplane core's TCP.
    pub core: TcpCoreCounters,
    /// The dataplane core's receive path (its `net` has the classify drops).
    pub dataplane: DataplaneCounters,
    /// The control core's interface.
    pub iface: NetCounters,
    /// Mbufs dropped unsent at shutdown.
    pub dropped_at_shutdown: usize,
}

/// uwarp on port A, stepped; the peer's queues on port B.
pub struct Rig {
    /// uwarp's cores.
    pub cores: Stepper<TcpSetup<TestApp>, TcpCore<TestApp>>,
    /// Listen and connect requests to the control core.
    pub requests: TcpRequests<TestApp>,
    /// Each accepted connection's log.
    pub apps: Apps,
    /// Data every new connection's application sends once it can.
    pub greeting: Arc<Mutex<Vec<u8>>>,
    /// The simulated time of the next step.
    pub now: Instant,
    /// The peer's side of the wire.
    pub peer: Queues,
    pool: Arc<Mempool>,
    ports: (Port, Port),
}

impl Rig {
    /// uwarp at [`UWARP_IP`] with `config`, started (its gratuitous ARP
    /// sent), the peer's MAC learnt from the peer's ARP request (answered),
    /// and listening on [`LISTEN_PORT`]. `name` names the mbuf pool
    /// (unique in the process, at most 16 characters).
    pub fn new(name: &str, config: Config) -> Rig {
        let pool_config = MempoolConfig {
            capacity: 16383,
            cache_size: 64,
            ..MempoolConfig::default()
        };
        let pool = Arc::new(
            Mempool::new(eal(), &format!("tw_{name}"), &pool_config, None).expect("mempool"),
        );
        let (a, b) = ring_pair(eal(), 2, 4096).expect("ring pair");
        let (port_a, queues_a) = start_port(eal(), a, 1, &pool).expect("port A");
        assert_eq!(
            queues_a.tx.len(),
            2,
            "the control core has a queue of its own"
        );
        let port_config = PortConfig {
            rx_queues: 2,
            tx_queues: 2,
            ..PortConfig::default()
        };
        let mut port_b =
            Port::configure(eal(), b, &port_config, std::slice::from_ref(&pool)).expect("B");
        port_b.start().expect("start B");
        let peer = port_b.take_queues().expect("queues of B");

        let clock = Clock::start();
        let (setup, requests) = TcpSetup::new(clock, config, [0x5a; 16]);
        let dataplane = setup.dataplane_handler();
        let address = InterfaceAddress {
            mac: UWARP_MAC,
            ip: UWARP_IP,
            prefix_len: PREFIX_LEN,
            gateway: None,
            vlan: None,
        };
        let (control, dataplanes) = uwarp_dataplane::runtime::assemble(
            InterfaceConfig::new(address),
            queues_a,
            std::slice::from_ref(&pool),
            setup,
            vec![dataplane],
        )
        .expect("cores");
        let mut rig = Rig {
            cores: Stepper::new(control, dataplanes),
            requests,
            apps: Apps::default(),
            greeting: Arc::default(),
            now: Instant::now(),
            peer,
            pool,
            ports: (port_a, port_b),
        };

        // The gratuitous ARP.
        let out = rig.settle();
        assert!(
            out.iter().any(|f| arp_of(f).is_some()),
            "a gratuitous ARP on start"
        );
        // The peer asks for uwarp's MAC: uwarp answers and learns the peer's.
        let out = rig.exchange(&[arp_request(PEER_MAC, PEER_IP, UWARP_IP)]);
        let reply = out.iter().filter_map(|f| arp_of(f)).find(|arp| {
            matches!(
                arp,
                ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Reply,
                    ..
                }
            )
        });
        let Some(ArpRepr::EthernetIpv4 {
            source_hardware_addr,
            target_hardware_addr,
            ..
        }) = reply
        else {
            panic!("no ARP reply: {out:?}")
        };
        assert_eq!(
            (source_hardware_addr, target_hardware_addr),
            (UWARP_MAC, PEER_MAC)
        );
        assert_eq!(
            rig.cores.control.iface().neighbor(PEER_IP),
            Some(PEER_MAC),
            "uwarp learnt the peer from its request"
        );
        rig.listen(LISTEN_PORT);
        rig
    }

    /// Listens on `port`; each connection gets a [`TestApp`] logging into
    /// [`Rig::apps`].
    pub fn listen(&mut self, port: u16) {
        let apps = Arc::clone(&self.apps);
        let greeting = Arc::clone(&self.greeting);
        let answer = self
            .requests
            .listen(port, move |remote: Endpoint| {
                let log = accepted_log(&apps, remote);
                lock(&log).outbox = greeting.lock().expect("greeting").clone();
                TestApp { log }
            })
            .expect("listen request");
        self.step();
        answer
            .try_recv()
            .expect("the control core served the request")
            .expect("listening");
    }

    /// The log of the connection accepted from `ip:port`.
    pub fn app(&self, ip: Ipv4Address, port: u16) -> Option<Log> {
        self.apps.lock().expect("apps").get(&(ip, port)).cloned()
    }

    /// One step of every core at the current simulated time; returns the
    /// work done.
    pub fn step(&mut self) -> usize {
        let work = self.cores.step(self.now);
        self.now += STEP;
        work
    }

    /// Puts `frames` on the wire to uwarp.
    pub fn inject(&mut self, frames: &[Vec<u8>]) {
        let mut out: Vec<Mbuf> = frames
            .iter()
            .map(|f| Mbuf::from_slice(&self.pool, f).expect("mbuf"))
            .collect();
        while !out.is_empty() {
            self.peer.tx[0].tx_burst(&mut out);
        }
    }

    /// Every frame uwarp sent since the last call.
    pub fn collect(&mut self) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for rx in &mut self.peer.rx {
            while rx.rx_burst(&mut got, 32) > 0 {}
        }
        got.iter().map(Mbuf::to_vec).collect()
    }

    /// Runs [`SETTLE_STEPS`] steps; returns what uwarp sent meanwhile.
    pub fn settle(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..SETTLE_STEPS {
            self.step();
            out.extend(self.collect());
        }
        out
    }

    /// Injects `frames`, settles, returns what uwarp sent.
    pub fn exchange(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        self.inject(frames);
        self.settle()
    }

    /// Steps until a step finds no work (at most `max` steps), handing
    /// each frame uwarp sent to `seen`.
    pub fn drain(&mut self, max: usize, mut seen: impl FnMut(&[u8])) {
        for _ in 0..max {
            let work = self.step();
            for frame in self.collect() {
                seen(&frame);
            }
            if work == 0 {
                return;
            }
        }
        panic!("the cores were still busy after {max} steps");
    }

    /// Advances simulated time by `span` in steps of `step`, handing each
    /// frame uwarp sent to `seen`.
    pub fn advance(&mut self, span: Duration, step: Duration, mut seen: impl FnMut(&[u8])) {
        let end = self.now + span;
        while self.now < end {
            self.cores.step(self.now);
            self.now += step;
            for frame in self.collect() {
                seen(&frame);
            }
        }
    }

    /// The TCP segments of what uwarp sent to `peer`'s port.
    pub fn segments_to(frames: &[Vec<u8>], port: u16) -> Vec<Seg> {
        frames
            .iter()
            .filter_map(|f| Seg::parse(f))
            .filter(|s| s.dst_port == port)
            .collect()
    }

    /// The flows the dataplane core holds.
    pub fn flows(&self) -> usize {
        self.cores.dataplanes[0].flows().len()
    }

    /// The dataplane core's TCP counters.
    pub fn core_counters(&self) -> TcpCoreCounters {
        self.cores.dataplanes[0].handler().counters().clone()
    }

    /// The dataplane core's classify drops.
    pub fn net(&self) -> NetCounters {
        self.cores.dataplanes[0].counters().net.clone()
    }

    /// The control core's TCP counters.
    pub fn setup_counters(&self) -> SetupCounters {
        self.cores.control.handler().counters().clone()
    }

    /// The first half of `peer`'s handshake: its SYN, uwarp's SYN-ACK
    /// (checked: it acknowledges the SYN, from the listening port), which
    /// the peer takes. Returns the SYN-ACK; uwarp is in SYN-RECEIVED.
    pub fn half_open(&mut self, peer: &mut Peer) -> Seg {
        let out = self.exchange(&[peer.syn()]);
        let segs = Rig::segments_to(&out, peer.port);
        let synack = segs
            .iter()
            .find(|s| s.control == TcpControl::Syn)
            .unwrap_or_else(|| panic!("no SYN-ACK for {}: {segs:?}", peer.port))
            .clone();
        assert_eq!(synack.ack, Some(peer.iss.wrapping_add(1)), "{synack:?}");
        assert_eq!(synack.src_port, peer.dst_port);
        peer.on_synack(&synack);
        synack
    }

    /// The three-way handshake of `peer` (its SYN, uwarp's SYN-ACK, its
    /// ACK), checked; returns the connection's log. Any data uwarp sent
    /// right away (its greeting) is returned too.
    pub fn connect(&mut self, peer: &mut Peer) -> (Log, Vec<Seg>) {
        self.half_open(peer);
        let ack = peer.segment(TcpControl::None, peer.snd_nxt, Some(peer.rcv_nxt), b"");
        let out = self.exchange(&[ack]);
        let segs = Rig::segments_to(&out, peer.port);
        for seg in &segs {
            peer.learn(seg);
        }
        let log = self
            .app(peer.ip, peer.port)
            .expect("the listener made an application");
        assert!(
            lock(&log).events.contains(&Event::Established),
            "established: {:?}",
            lock(&log)
        );
        (log, segs)
    }

    /// Stops the cores, checks every mbuf went back to the pool and
    /// returns what they counted.
    pub fn finish(self) -> Report {
        let Rig {
            cores,
            requests,
            pool,
            ports,
            peer,
            ..
        } = self;
        let stopped = cores.shutdown();
        let report = Report {
            setup: stopped.control.handler().counters().clone(),
            core: stopped.dataplanes[0].handler().counters().clone(),
            dataplane: stopped.dataplanes[0].counters().clone(),
            iface: stopped.control.iface().counters().clone(),
            dropped_at_shutdown: stopped.dropped_at_shutdown,
        };
        drop(stopped);
        drop(requests);
        drop((ports, peer));
        assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
        report
    }
}

/// A TCP segment uwarp sent, with its checksums verified.
#[derive(Clone, PartialEq, Eq)]
pub struct Seg {
    /// The Ethernet source.
    pub eth_src: EthernetAddress,
    /// The Ethernet destination.
    pub eth_dst: EthernetAddress,
    /// The IPv4 source.
    pub ip_src: Ipv4Address,
    /// The IPv4 destination.
    pub ip_dst: Ipv4Address,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// SYN, FIN, RST, PSH or none.
    pub control: TcpControl,
    /// SEG.SEQ.
    pub seq: u32,
    /// SEG.ACK, when the ACK flag is set.
    pub ack: Option<u32>,
    /// The window field.
    pub window: u16,
    /// The window scale option.
    pub window_scale: Option<u8>,
    /// The MSS option.
    pub mss: Option<u16>,
    /// The SACK-permitted option.
    pub sack_permitted: bool,
    /// The timestamps option: (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// The data.
    pub payload: Vec<u8>,
}

impl Seg {
    /// The TCP segment in `frame`, if it is one; panics on a bad checksum
    /// (uwarp never sends one).
    pub fn parse(frame: &[u8]) -> Option<Seg> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != EthernetProtocol::Ipv4 {
            return None;
        }
        let ip = Ipv4Packet::new_checked(eth.payload()).expect("uwarp sends valid IPv4");
        assert!(ip.verify_checksum(), "uwarp's IPv4 checksum");
        if ip.next_header() != IpProtocol::Tcp {
            return None;
        }
        let tcp = TcpPacket::new_checked(ip.payload()).expect("uwarp sends valid TCP");
        let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
        assert!(tcp.verify_checksum(&src, &dst), "uwarp's TCP checksum");
        let repr = TcpRepr::parse(&tcp, &src, &dst, &ChecksumCapabilities::default())
            .expect("uwarp sends parsable TCP");
        Some(Seg {
            eth_src: eth.src_addr(),
            eth_dst: eth.dst_addr(),
            ip_src: ip.src_addr(),
            ip_dst: ip.dst_addr(),
            src_port: repr.src_port,
            dst_port: repr.dst_port,
            control: repr.control,
            seq: repr.seq_number.0 as u32,
            ack: repr.ack_number.map(|a| a.0 as u32),
            window: repr.window_len,
            window_scale: repr.window_scale,
            mss: repr.max_seg_size,
            sack_permitted: repr.sack_permitted,
            timestamp: repr.timestamp.map(|t| (t.tsval, t.tsecr)),
            payload: repr.payload.to_vec(),
        })
    }

    /// SEG.LEN: data plus SYN and FIN.
    pub fn len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(matches!(self.control, TcpControl::Syn | TcpControl::Fin))
    }

    /// Whether it has no data and no SYN/FIN.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An ACK without data, SYN, FIN or RST.
    pub fn is_pure_ack(&self) -> bool {
        self.ack.is_some()
            && self.payload.is_empty()
            && matches!(self.control, TcpControl::None | TcpControl::Psh)
    }
}

/// Headers and the payload's length (payloads can be long).
impl std::fmt::Debug for Seg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{} > {} {}:{} > {}:{} {:?} seq={:#x} ack={:?} win={} len={}",
            self.eth_src,
            self.eth_dst,
            self.ip_src,
            self.src_port,
            self.ip_dst,
            self.dst_port,
            self.control,
            self.seq,
            self.ack.map(|a| format!("{a:#x}")),
            self.window,
            self.payload.len()
        )?;
        if let Some(shift) = self.window_scale {
            write!(f, " ws={shift}")?;
        }
        if let Some(mss) = self.mss {
            write!(f, " mss={mss}")?;
        }
        if self.sack_permitted {
            write!(f, " sackok")?;
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            write!(f, " ts={tsval}/{tsecr}")?;
        }
        write!(f, "]")
    }
}

/// The ARP message in `frame`, if it is one.
pub fn arp_of(frame: &[u8]) -> Option<ArpRepr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Arp {
        return None;
    }
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()
}

pub use uwarp_dataplane::net::test_frames::arp_request;

/// An Ethernet frame from `src` to `dst` carrying an IPv4 datagram with
/// `tcp` (any octets) as its TCP payload; valid IPv4 header and checksum,
/// padded to the Ethernet minimum.
pub fn ipv4_frame(
    src: (EthernetAddress, Ipv4Address),
    dst: (EthernetAddress, Ipv4Address),
    tcp: &[u8],
) -> Vec<u8> {
    ipv4_between(src, dst, IpProtocol::Tcp, tcp.len(), |buf| {
        buf.copy_from_slice(tcp)
    })
}

/// The octets of `repr` sent from `src` to `dst`, checksum filled.
pub fn tcp_bytes(src: Ipv4Address, dst: Ipv4Address, repr: &TcpRepr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut packet = TcpPacket::new_unchecked(&mut buf[..]);
    repr.emit(
        &mut packet,
        &src.into(),
        &dst.into(),
        &ChecksumCapabilities::default(),
    );
    buf
}

/// Recomputes the TCP checksum of `tcp` (at least 18 octets) sent from
/// `src` to `dst`.
pub fn fill_tcp_checksum(src: Ipv4Address, dst: Ipv4Address, tcp: &mut [u8]) {
    TcpPacket::new_unchecked(tcp).fill_checksum(&src.into(), &dst.into());
}

/// TCP flag bits (RFC 9293 section 3.1).
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// A TCP header written by hand: `options` as given (padded with zeros
/// to a multiple of four), the data offset as computed unless
/// `data_offset` (in 32-bit words) overrides it, checksum filled.
#[allow(clippy::too_many_arguments)]
pub fn raw_tcp(
    src: (Ipv4Address, u16),
    dst: (Ipv4Address, u16),
    seq: u32,
    ack: u32,
    flag_bits: u8,
    window: u16,
    options: &[u8],
    data_offset: Option<u8>,
    payload: &[u8],
) -> Vec<u8> {
    let options_len = options.len().div_ceil(4) * 4;
    let header_len = 20 + options_len;
    let mut buf = vec![0u8; header_len + payload.len()];
    buf[0..2].copy_from_slice(&src.1.to_be_bytes());
    buf[2..4].copy_from_slice(&dst.1.to_be_bytes());
    buf[4..8].copy_from_slice(&seq.to_be_bytes());
    buf[8..12].copy_from_slice(&ack.to_be_bytes());
    let words = data_offset.unwrap_or((header_len / 4) as u8);
    buf[12] = words << 4;
    buf[13] = flag_bits;
    buf[14..16].copy_from_slice(&window.to_be_bytes());
    buf[20..20 + options.len()].copy_from_slice(options);
    buf[header_len..].copy_from_slice(payload);
    fill_tcp_checksum(src.0, dst.0, &mut buf);
    buf
}

/// The TCP options a peer offers in its SYN.
#[derive(Clone, Copy, Debug, Default)]
pub struct Offer {
    /// Window scale shift.
    pub window_scale: Option<u8>,
    /// SACK-permitted.
    pub sack: bool,
    /// Timestamps.
    pub timestamps: bool,
}

/// The peer's side of one connection, kept by the test.
#[derive(Clone, Debug)]
pub struct Peer {
    /// The peer's MAC address.
    pub mac: EthernetAddress,
    /// The peer's address.
    pub ip: Ipv4Address,
    /// The peer's port.
    pub port: u16,
    /// uwarp's port.
    pub dst_port: u16,
    /// The peer's ISN.
    pub iss: u32,
    /// The peer's SND.NXT: the sequence number of its next octet.
    pub snd_nxt: u32,
    /// The peer's RCV.NXT: what it acknowledges (uwarp's next octet).
    pub rcv_nxt: u32,
    /// uwarp's ISN.
    pub uwarp_iss: u32,
    /// The window field the peer sends.
    pub window: u16,
    /// What the peer's SYN offers.
    pub offer: Offer,
    /// Timestamps in use on the connection.
    pub timestamps: bool,
    /// The shift of uwarp's window fields (0 without scaling).
    pub uwarp_scale: u8,
    /// uwarp's last window, scaled.
    pub uwarp_window: u32,
    /// The peer's timestamp clock.
    pub ts_clock: u32,
    /// The last TSval uwarp sent (echoed as TSecr).
    pub ts_recent: u32,
}

impl Peer {
    /// The peer at [`PEER_IP`]:`port` towards uwarp's [`LISTEN_PORT`],
    /// ISN `iss`, offering only the MSS.
    pub fn new(port: u16, iss: u32) -> Peer {
        Peer {
            mac: PEER_MAC,
            ip: PEER_IP,
            port,
            dst_port: LISTEN_PORT,
            iss,
            snd_nxt: iss,
            rcv_nxt: 0,
            uwarp_iss: 0,
            window: 65535,
            offer: Offer::default(),
            timestamps: false,
            uwarp_scale: 0,
            uwarp_window: 0,
            ts_clock: 1000,
            ts_recent: 0,
        }
    }

    /// The connection's 4-tuple from uwarp's side.
    pub fn tuple(&self) -> FourTuple {
        FourTuple {
            local_ip: UWARP_IP,
            local_port: self.dst_port,
            remote_ip: self.ip,
            remote_port: self.port,
        }
    }

    /// A segment with `control`, `seq` and `ack` (and the timestamp
    /// option when in use) around `payload`, as an Ethernet frame.
    pub fn segment(
        &mut self,
        control: TcpControl,
        seq: u32,
        ack: Option<u32>,
        payload: &[u8],
    ) -> Vec<u8> {
        self.segment_with(control, seq, ack, payload, |_| {})
    }

    /// [`Peer::segment`] with `edit` applied to the header before it is
    /// written.
    pub fn segment_with(
        &mut self,
        control: TcpControl,
        seq: u32,
        ack: Option<u32>,
        payload: &[u8],
        edit: impl FnOnce(&mut TcpRepr<'_>),
    ) -> Vec<u8> {
        let mut repr = TcpRepr {
            src_port: self.port,
            dst_port: self.dst_port,
            control,
            seq_number: TcpSeqNumber(seq as i32),
            ack_number: ack.map(|a| TcpSeqNumber(a as i32)),
            window_len: self.window,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload,
        };
        if self.timestamps {
            repr.timestamp = Some(self.next_timestamp());
        }
        edit(&mut repr);
        self.frame(&tcp_bytes(self.ip, UWARP_IP, &repr))
    }

    /// The peer's next timestamp option.
    pub fn next_timestamp(&mut self) -> TcpTimestampRepr {
        self.ts_clock = self.ts_clock.wrapping_add(1);
        TcpTimestampRepr::new(self.ts_clock, self.ts_recent)
    }

    /// `tcp` (any octets) in an IPv4 frame from the peer to uwarp.
    pub fn frame(&self, tcp: &[u8]) -> Vec<u8> {
        ipv4_frame((self.mac, self.ip), (UWARP_MAC, UWARP_IP), tcp)
    }

    /// The peer's SYN with its offer (and an MSS of 1460).
    pub fn syn(&mut self) -> Vec<u8> {
        let offer = self.offer;
        let iss = self.iss;
        self.snd_nxt = iss.wrapping_add(1);
        let ts = offer.timestamps.then(|| self.next_timestamp());
        self.segment_with(TcpControl::Syn, iss, None, b"", |repr| {
            repr.max_seg_size = Some(1460);
            repr.window_scale = offer.window_scale;
            repr.sack_permitted = offer.sack;
            repr.timestamp = ts;
        })
    }

    /// Takes uwarp's SYN-ACK.
    pub fn on_synack(&mut self, synack: &Seg) {
        self.uwarp_iss = synack.seq;
        self.rcv_nxt = synack.seq.wrapping_add(1);
        self.timestamps = self.offer.timestamps && synack.timestamp.is_some();
        self.uwarp_scale = match (self.offer.window_scale, synack.window_scale) {
            (Some(_), Some(shift)) => shift,
            _ => 0,
        };
        self.uwarp_window = u32::from(synack.window);
        if let Some((tsval, _)) = synack.timestamp {
            self.ts_recent = tsval;
        }
    }

    /// Takes a segment uwarp sent: its window, timestamp, and the data it
    /// carried (the peer's RCV.NXT follows it when in order).
    pub fn learn(&mut self, seg: &Seg) {
        if seg.control != TcpControl::Syn {
            self.uwarp_window = u32::from(seg.window) << self.uwarp_scale;
        }
        if let Some((tsval, _)) = seg.timestamp {
            self.ts_recent = tsval;
        }
        if seg.seq == self.rcv_nxt {
            self.rcv_nxt = self.rcv_nxt.wrapping_add(seg.len());
        }
    }

    /// The next data segment in order (PSH, acknowledging RCV.NXT);
    /// SND.NXT moves past it.
    pub fn data(&mut self, payload: &[u8]) -> Vec<u8> {
        let seq = self.snd_nxt;
        self.snd_nxt = seq.wrapping_add(payload.len() as u32);
        self.segment(TcpControl::Psh, seq, Some(self.rcv_nxt), payload)
    }
}
