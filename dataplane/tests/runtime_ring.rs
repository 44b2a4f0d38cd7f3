//! The runtime on a net_ring pair: uwarp's cores on port A, the test
//! playing the peer on port B with hand-made frames.
//!
//! Stepped from the test thread: the gratuitous ARP, ARP and ICMP answered
//! through the control core, a SYN for an unknown flow handed to the
//! control core, which hands the flow to the dataplane core with the
//! packet that raced the hand-over, later segments going straight to the
//! flow, and hostile frames counted and dropped. On threads: 10,000 pings
//! answered, a quiet control core napping between polls and still
//! answering, and a clean shutdown returning every mbuf.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{address, NoFlows, Recorder};
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    Icmpv4Packet, Icmpv4Repr, Ipv4Address, Ipv4Packet, TcpControl,
};
use uwarp_dataplane::net::test_frames::{arp_request, echo_request_between, tcp_frame};
use uwarp_dataplane::net::{InterfaceConfig, TcpMeta};
use uwarp_dataplane::runtime::{
    assemble, start_port, Command, ControlContext, ControlHandler, Placement, Runtime, Stepper,
};
use uwarp_dataplane::{ring_pair, Eal, EalConfig, Mbuf, Mempool, Port, PortConfig, Queues};

const UWARP_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const UWARP_IP: [u8; 4] = [10, 79, 0, 2];
const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);
const PEER_IP: Ipv4Address = Ipv4Address::new(10, 79, 0, 1);

fn eal() -> &'static Eal {
    Eal::init(&EalConfig::virtual_devices(Vec::<String>::new())).expect("EAL")
}

fn uwarp() -> (EthernetAddress, Ipv4Address) {
    (EthernetAddress(UWARP_MAC), Ipv4Address::from(UWARP_IP))
}

/// uwarp's port A (one dataplane core) and the peer's port B, whose two
/// receive queues get what A's dataplane (0) and control (1) cores send.
fn ports(pool: &Arc<Mempool>) -> (Port, Queues, Port, Queues) {
    let (a, b) = ring_pair(eal(), 2, 1024).expect("ring pair");
    let (port_a, queues_a) = start_port(eal(), a, 1, pool).expect("port A");
    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let (port_b, queues_b) = started(b, &config, pool);
    (port_a, queues_a, port_b, queues_b)
}

/// Starts `device` with `config` and takes its queues.
fn started(
    device: uwarp_dataplane::Device,
    config: &PortConfig,
    pool: &Arc<Mempool>,
) -> (Port, Queues) {
    let mut port =
        Port::configure(eal(), device, config, std::slice::from_ref(pool)).expect("port");
    port.start().expect("start");
    let queues = port.take_queues().expect("queues");
    (port, queues)
}

/// A peer's endpoint and ours: MAC, IPv4 address, TCP port.
type Endpoints = (
    (EthernetAddress, Ipv4Address, u16),
    (EthernetAddress, Ipv4Address, u16),
);

/// Sends the peer's SYN of a flow on port B (sequence number 100) and
/// steps the cores until the control core handed it to dataplane core 0.
fn open_flow(
    cores: &mut Stepper<HandOver, Recorder>,
    queues_b: &mut Queues,
    pool: &Mempool,
    now: Instant,
) -> Endpoints {
    let peer = (PEER_MAC, PEER_IP, 40000);
    let us = (uwarp().0, uwarp().1, 4791);
    send(
        queues_b,
        pool,
        &[tcp_frame(peer, us, TcpControl::Syn, 100, b"")],
    );
    cores.step(now);
    cores.step(now);
    (peer, us)
}

fn send(queues: &mut Queues, pool: &Mempool, frames: &[Vec<u8>]) {
    let mut out: Vec<Mbuf> = frames
        .iter()
        .map(|f| Mbuf::from_slice(pool, f).expect("mbuf"))
        .collect();
    while !out.is_empty() {
        queues.tx[0].tx_burst(&mut out);
    }
}

fn receive(queues: &mut Queues) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for rx in &mut queues.rx {
        rx.rx_burst(&mut got, 32);
    }
    got.iter().map(Mbuf::to_vec).collect()
}

/// Hands every flow whose SYN reaches it to dataplane core 0, with the
/// SYN itself: the packet that raced the hand-over.
#[derive(Default)]
struct HandOver {
    flows: u32,
}

impl ControlHandler for HandOver {
    type Flow = u32;

    fn on_tcp(
        &mut self,
        _: Instant,
        meta: &TcpMeta,
        frame: Mbuf,
        ctx: &mut ControlContext<'_, u32>,
    ) {
        if meta.syn {
            self.flows += 1;
            ctx.send_command(0, Command::AddFlow(meta.tuple, self.flows))
                .expect("room for the command");
            ctx.send_command(0, Command::Packet(frame))
                .expect("room for the packet");
        }
    }
}

#[test]
fn stepped_cores_answer_arp_and_icmp_and_hand_flows_over() {
    let pool = common::pool(eal(), "stepped", 2047);
    let (port_a, queues_a, port_b, mut queues_b) = ports(&pool);
    let config = InterfaceConfig::new(address(UWARP_MAC, UWARP_IP));
    let (control, dataplanes) = assemble(
        config,
        queues_a,
        std::slice::from_ref(&pool),
        HandOver::default(),
        vec![Recorder::default()],
    )
    .expect("cores");
    let mut cores = Stepper::new(control, dataplanes);
    let now = Instant::now();

    // Start: a gratuitous ARP from the control core.
    cores.step(now);
    let got = receive(&mut queues_b);
    assert_eq!(got.len(), 1, "one gratuitous ARP");
    let frame = EthernetFrame::new_checked(&got[0][..]).unwrap();
    assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
    let arp = ArpRepr::parse(&ArpPacket::new_checked(frame.payload()).unwrap()).unwrap();
    let ArpRepr::EthernetIpv4 {
        source_protocol_addr,
        target_protocol_addr,
        ..
    } = arp
    else {
        panic!("{arp:?}")
    };
    assert_eq!(
        (source_protocol_addr, target_protocol_addr),
        (uwarp().1, uwarp().1)
    );

    // ARP and ICMP, answered by the control core on its own queue.
    send(
        &mut queues_b,
        &pool,
        &[arp_request(PEER_MAC, PEER_IP, uwarp().1)],
    );
    cores.step(now);
    let got = receive(&mut queues_b);
    assert_eq!(got.len(), 1);
    let frame = EthernetFrame::new_checked(&got[0][..]).unwrap();
    let arp = ArpRepr::parse(&ArpPacket::new_checked(frame.payload()).unwrap()).unwrap();
    match arp {
        ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            target_hardware_addr,
            ..
        } => {
            assert_eq!(operation, ArpOperation::Reply);
            assert_eq!(source_hardware_addr, uwarp().0);
            assert_eq!(target_hardware_addr, PEER_MAC);
        }
        other => panic!("{other:?}"),
    }
    send(
        &mut queues_b,
        &pool,
        &[echo_request_between(
            (PEER_MAC, PEER_IP),
            uwarp(),
            9,
            5,
            b"abc",
        )],
    );
    cores.step(now);
    let got = receive(&mut queues_b);
    assert_eq!(got.len(), 1);
    let frame = EthernetFrame::new_checked(&got[0][..]).unwrap();
    assert_eq!(frame.ethertype(), EthernetProtocol::Ipv4);
    let ip = Ipv4Packet::new_checked(frame.payload()).unwrap();
    assert!(ip.verify_checksum());
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    let reply = Icmpv4Repr::parse(&icmp, &Default::default()).unwrap();
    assert_eq!(
        reply,
        Icmpv4Repr::EchoReply {
            ident: 9,
            seq_no: 5,
            data: b"abc"
        }
    );

    // A SYN of an unknown flow: control core, hand-over, then the flow.
    let (peer, us) = open_flow(&mut cores, &mut queues_b, &pool, now);
    assert_eq!(cores.control.counters().tcp_to_handler, 1);
    send(
        &mut queues_b,
        &pool,
        &[tcp_frame(peer, us, TcpControl::None, 101, b"data")],
    );
    cores.step(now);
    let dp = &cores.dataplanes[0];
    assert_eq!(dp.counters().to_flows, 2, "the raced SYN and the data");
    assert_eq!(
        cores.control.counters().tcp_to_handler,
        1,
        "data went straight to the flow"
    );
    let segments = &dp.handler().segments;
    assert_eq!(segments.len(), 2);
    assert_eq!(segments[0].0, 1);
    assert!(segments[1].1.ends_with(b"data"));

    // Hostile frames: counted by reason, never a panic, nothing answered.
    let good = tcp_frame(peer, us, TcpControl::None, 105, b"more");
    let mut bad_checksum = good.clone();
    bad_checksum[24] ^= 0xff;
    let mut fragment = good.clone();
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut fragment[14..]);
        ip.set_more_frags(true);
        ip.fill_checksum();
    }
    let mut wrong_type = good.clone();
    wrong_type[12..14].copy_from_slice(&[0x88, 0xb5]);
    let runt = good[..10].to_vec();
    send(
        &mut queues_b,
        &pool,
        &[bad_checksum, fragment, wrong_type, runt],
    );
    cores.step(now);
    assert!(receive(&mut queues_b).is_empty());
    let net = &cores.dataplanes[0].counters().net;
    assert_eq!(net.ipv4_bad_checksum, 1, "{net:?}");
    assert_eq!(net.ipv4_fragment, 1, "{net:?}");
    assert_eq!(net.unknown_ether_type, 1, "{net:?}");
    assert_eq!(net.runt, 1, "{net:?}");
    assert_eq!(cores.dataplanes[0].counters().to_flows, 2);

    let stopped = cores.shutdown();
    assert_eq!(stopped.dropped_at_shutdown, 0);
    drop(stopped);
    drop((port_a, port_b, queues_b));
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}

fn threaded_pings(placement: &Placement, name: &str) {
    let pool = common::pool(eal(), name, 4095);
    let (port_a, queues_a, port_b, mut queues_b) = ports(&pool);
    let config = InterfaceConfig::new(address(UWARP_MAC, UWARP_IP));
    let (control, dataplanes) = assemble(
        config,
        queues_a,
        std::slice::from_ref(&pool),
        common::Pinger::default(),
        vec![NoFlows],
    )
    .expect("cores");
    let runtime = Runtime::spawn(eal(), control, dataplanes, placement).expect("spawn");

    const PINGS: u16 = 10_000;
    let mut answered = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next = 0u16;
    while answered.len() < usize::from(PINGS) && Instant::now() < deadline {
        // Up to 64 in flight.
        let window: Vec<Vec<u8>> = (next..PINGS.min(next + 64))
            .map(|seq| echo_request_between((PEER_MAC, PEER_IP), uwarp(), 9, seq, b"ping"))
            .collect();
        next += window.len() as u16;
        send(&mut queues_b, &pool, &window);
        let wait = Instant::now() + Duration::from_millis(200);
        while Instant::now() < wait {
            for frame in receive(&mut queues_b) {
                let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
                if eth.ethertype() != EthernetProtocol::Ipv4 {
                    continue;
                }
                let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
                let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
                if let Ok(Icmpv4Repr::EchoReply { seq_no, .. }) =
                    Icmpv4Repr::parse(&icmp, &Default::default())
                {
                    answered.insert(seq_no);
                }
            }
            if answered.len() == usize::from(next) {
                break;
            }
        }
    }
    let stopped = runtime.shutdown();
    assert_eq!(answered.len(), usize::from(PINGS), "every ping answered");
    assert_eq!(
        stopped.control.iface().counters().icmp_echo_replied,
        u64::from(PINGS)
    );
    drop(stopped);
    drop((port_a, port_b, queues_b));
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}

#[test]
fn threaded_cores_answer_ten_thousand_pings_unpinned() {
    threaded_pings(&Placement::Unpinned, "unpinned");
}

#[test]
fn threaded_cores_answer_ten_thousand_pings_pinned() {
    let cpus = core_affinity::get_core_ids().unwrap_or_default();
    let last = cpus.last().map_or(0, |c| c.id);
    let placement = Placement::Pinned {
        control: cpus.first().map_or(0, |c| c.id),
        dataplanes: vec![last],
    };
    threaded_pings(&placement, "pinned");
}

/// Counts the control core's polls.
struct PollCounter {
    polls: Arc<AtomicU64>,
}

impl ControlHandler for PollCounter {
    type Flow = ();

    fn poll(&mut self, _: Instant, _: &mut ControlContext<'_, ()>) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }
}

/// A control core on a thread that has had nothing to do for a while naps
/// between polls instead of spinning (it would take a CPU from the
/// dataplane cores and the application), and a frame reaching it then is
/// still answered.
#[test]
fn a_quiet_control_core_naps_and_still_answers_a_ping() {
    let pool = common::pool(eal(), "quiet", 1023);
    let (port_a, queues_a, port_b, mut queues_b) = ports(&pool);
    let config = InterfaceConfig::new(address(UWARP_MAC, UWARP_IP));
    let polls = Arc::new(AtomicU64::new(0));
    let handler = PollCounter {
        polls: Arc::clone(&polls),
    };
    let (control, dataplanes) = assemble(
        config,
        queues_a,
        std::slice::from_ref(&pool),
        handler,
        vec![NoFlows],
    )
    .expect("cores");
    let runtime = Runtime::spawn(eal(), control, dataplanes, &Placement::Unpinned).expect("spawn");

    std::thread::sleep(Duration::from_millis(100));
    let before = polls.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    let quiet_polls = polls.load(Ordering::Relaxed) - before;
    // Naps of 1 ms allow about 300; a spinning core polls millions of
    // times, even sharing its CPU with every other test.
    assert!(
        quiet_polls < 3_000,
        "a quiet control core naps: {quiet_polls} polls in 300 ms"
    );

    let ping = echo_request_between((PEER_MAC, PEER_IP), uwarp(), 9, 1, b"ping");
    send(&mut queues_b, &pool, &[ping]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut answered = false;
    while !answered && Instant::now() < deadline {
        answered = receive(&mut queues_b).iter().any(|frame| {
            let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
            eth.ethertype() == EthernetProtocol::Ipv4
                && Ipv4Packet::new_checked(eth.payload())
                    .is_ok_and(|ip| ip.next_header() == smoltcp::wire::IpProtocol::Icmp)
        });
    }
    let stopped = runtime.shutdown();
    assert!(answered, "the napping control core answered the ping");
    assert_eq!(stopped.control.iface().counters().icmp_echo_replied, 1);
    drop(stopped);
    drop((port_a, port_b, queues_b));
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}

/// A memory link's verified frame in two segments is taken as it lies
/// when its head is exactly the headers (a payload sent by reference),
/// and gathered and delivered whole when the head holds payload octets
/// too (a zero-copy segment that ends inside its run of registered
/// memory). Regression (issue 6): the second was dropped as truncated.
#[test]
fn chained_frames_are_delivered_whole_however_their_head_ends() {
    let pool = common::pool(eal(), "chained", 2047);
    let (a, b) = ring_pair(eal(), 1, 1024).expect("ring pair");
    let trusting = PortConfig {
        memory_link_offloads: true,
        ..PortConfig::default()
    };
    let (port_a, queues_a) = started(a, &trusting, &pool);
    let (port_b, mut queues_b) = started(b, &PortConfig::default(), &pool);
    let config = InterfaceConfig::new(address(UWARP_MAC, UWARP_IP));
    let slice = std::slice::from_ref(&pool);
    let (control, dataplanes) = assemble(
        config,
        queues_a,
        slice,
        HandOver::default(),
        vec![Recorder::default()],
    )
    .expect("cores");
    let mut cores = Stepper::new(control, dataplanes);
    let now = Instant::now();
    let (peer, us) = open_flow(&mut cores, &mut queues_b, &pool, now);

    let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let headers = 14 + 20 + 20;
    let frames: Vec<Vec<u8>> = [101, 1101]
        .map(|seq| tcp_frame(peer, us, TcpControl::None, seq, &payload))
        .into();
    // The first cut right after its headers, the second 16 octets later.
    let mut out: Vec<Mbuf> = frames
        .iter()
        .zip([headers, headers + 16])
        .map(|(frame, cut)| {
            let mut head = Mbuf::from_slice(&pool, &frame[..cut]).unwrap();
            let tail = Mbuf::from_slice(&pool, &frame[cut..]).unwrap();
            head.chain(tail).unwrap();
            // As a memory link's sender marks it: the receiver trusts it.
            head.offload_tcp_checksums(14, 20);
            head
        })
        .collect();
    while !out.is_empty() {
        queues_b.tx[0].tx_burst(&mut out);
    }
    cores.step(now);

    let dp = &cores.dataplanes[0];
    assert_eq!(dp.counters().net.tcp_truncated, 0, "{:?}", dp.counters());
    assert_eq!(dp.counters().gathered, 1, "only the second was gathered");
    let segments = &dp.handler().segments;
    assert_eq!(segments.len(), 3, "the SYN and both frames");
    for (frame, (_, segment)) in frames.iter().zip(&segments[1..]) {
        assert_eq!(segment, &frame[34..], "the whole segment");
    }
    drop(cores.shutdown());
    drop((port_a, port_b, queues_b));
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}
