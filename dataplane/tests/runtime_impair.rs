//! The impairment stage on a net_ring pair: uwarp's cores on port A, the
//! test pinging them from port B.
//!
//! Stepped from the test thread in simulated time (each step 100 µs
//! later than the one before, however fast the machine): receive loss
//! answers about four pings in five until switched off at run time,
//! duplication on either side duplicates replies, reordering reorders
//! them and loses none, delays hold them for as long as set, the control
//! core's own queue is impaired as well, and frames held at shutdown are
//! freed. On threads: the switch flipped from the test thread while the
//! cores run. Every test ends with every mbuf back in its pool.

mod common;

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{address, NoFlows, Pinger};
use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp_dataplane::net::test_frames::{echo_reply_seq, echo_request_between};
use uwarp_dataplane::net::InterfaceConfig;
use uwarp_dataplane::runtime::{
    assemble, start_port, ControlCore, ControlTx, DataplaneCore, ImpairCounters, ImpairSwitch,
    Impairment, Placement, Runtime, Stepper,
};
use uwarp_dataplane::{ring_pair, Eal, EalConfig, Mbuf, Mempool, Port, PortConfig, Queues};

const UWARP_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x1a];
const UWARP_IP: [u8; 4] = [10, 79, 1, 2];
const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x1b]);
const PEER_IP: Ipv4Address = Ipv4Address::new(10, 79, 1, 1);

/// Simulated time between two steps.
const STEP: Duration = Duration::from_micros(100);

/// Steps after which [`Rig::run`] gives up waiting for the cores to idle.
const MAX_STEPS: u32 = 100_000;

/// Echo requests sent at once, one receive burst.
const CHUNK: u16 = 32;

fn eal() -> &'static Eal {
    Eal::init(&EalConfig::virtual_devices(Vec::<String>::new())).expect("EAL")
}

fn impairment(rx: &str, tx: &str) -> Impairment {
    Impairment {
        rx: rx.parse().expect("receive impairment"),
        tx: tx.parse().expect("transmit impairment"),
    }
}

/// uwarp's port A with its cores (one dataplane core) and the peer's
/// port B.
struct Parts {
    pool: Arc<Mempool>,
    ports: (Port, Port),
    peer: Queues,
    control: ControlCore<Pinger>,
    dataplanes: Vec<DataplaneCore<NoFlows>>,
}

impl Parts {
    /// The control core sends on a transmit queue of its own when
    /// `control_queue`, through the dataplane core otherwise.
    fn new(name: &str, control_queue: bool) -> Self {
        let queues = 1 + u16::from(control_queue);
        let pool = common::pool(eal(), name, 2047);
        let (a, b) = ring_pair(eal(), queues, 1024).expect("ring pair");
        let (port_a, queues_a) = start_port(eal(), a, 1, &pool).expect("port A");
        assert_eq!(queues_a.tx.len(), usize::from(queues));
        let config = PortConfig {
            rx_queues: queues,
            tx_queues: queues,
            ..PortConfig::default()
        };
        let mut port_b =
            Port::configure(eal(), b, &config, std::slice::from_ref(&pool)).expect("B");
        port_b.start().expect("start B");
        let peer = port_b.take_queues().expect("queues of B");
        let (control, dataplanes) = assemble(
            InterfaceConfig::new(address(UWARP_MAC, UWARP_IP)),
            queues_a,
            std::slice::from_ref(&pool),
            Pinger::default(),
            vec![NoFlows],
        )
        .expect("cores");
        Parts {
            pool,
            ports: (port_a, port_b),
            peer,
            control,
            dataplanes,
        }
    }
}

/// Sends echo requests numbered `seqs` from the peer.
fn send_pings(peer: &mut Queues, pool: &Mempool, seqs: Range<u16>) {
    let us = (EthernetAddress(UWARP_MAC), Ipv4Address::from(UWARP_IP));
    let mut out: Vec<Mbuf> = seqs
        .map(|seq| echo_request_between((PEER_MAC, PEER_IP), us, 9, seq, b"impaired"))
        .map(|frame| Mbuf::from_slice(pool, &frame).expect("mbuf"))
        .collect();
    while !out.is_empty() {
        peer.tx[0].tx_burst(&mut out);
    }
}

/// The sequence numbers of the echo replies the peer received since the
/// last call, in order of arrival.
fn replies(peer: &mut Queues) -> Vec<u16> {
    let mut got = Vec::new();
    for rx in &mut peer.rx {
        while rx.rx_burst(&mut got, 32) > 0 {}
    }
    got.iter()
        .filter_map(|frame| echo_reply_seq(frame.data()))
        .collect()
}

/// How many times each of `seqs` is in `replies`.
fn times_answered(replies: &[u16], seqs: Range<u16>) -> Vec<usize> {
    seqs.map(|seq| replies.iter().filter(|&&r| r == seq).count())
        .collect()
}

/// Adds the peer's replies to `answered` until it holds `want` (or 30
/// seconds passed: the assertions that follow tell what is missing).
fn wait_for_replies(peer: &mut Queues, answered: &mut Vec<u16>, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while answered.len() < want && Instant::now() < deadline {
        answered.extend(replies(peer));
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The cores stepped in simulated time.
struct Rig {
    cores: Stepper<Pinger, NoFlows>,
    pool: Arc<Mempool>,
    ports: (Port, Port),
    peer: Queues,
    now: Instant,
}

impl Rig {
    /// Started: the gratuitous ARP is sent and gone, the impairment off.
    fn new(name: &str, control_queue: bool) -> Self {
        let parts = Parts::new(name, control_queue);
        let mut rig = Rig {
            cores: Stepper::new(parts.control, parts.dataplanes),
            pool: parts.pool,
            ports: parts.ports,
            peer: parts.peer,
            now: Instant::now(),
        };
        // The first step sends the gratuitous ARP, the next ones (through
        // the dataplane core) put it on the wire.
        rig.step();
        rig.run();
        assert!(rig.replies().is_empty());
        rig
    }

    fn set(&self, rx: &str, tx: &str) {
        self.cores.dataplanes[0]
            .impairment()
            .set(impairment(rx, tx));
    }

    /// The dataplane core's impairment counters: (receive, transmit).
    fn counters(&self) -> (ImpairCounters, ImpairCounters) {
        self.cores.dataplanes[0].impair_counters()
    }

    fn step(&mut self) -> usize {
        let work = self.cores.step(self.now);
        self.now += STEP;
        work
    }

    /// Steps until a step finds no work; returns the simulated time.
    fn run(&mut self) -> Duration {
        let start = self.now;
        for _ in 0..MAX_STEPS {
            if self.step() == 0 {
                return self.now - start;
            }
        }
        panic!("the cores were still busy after {MAX_STEPS} steps");
    }

    fn replies(&mut self) -> Vec<u16> {
        replies(&mut self.peer)
    }

    /// Pings `seqs`, a chunk at a time, running the cores after each;
    /// returns the replies in order of arrival.
    fn ping(&mut self, seqs: Range<u16>) -> Vec<u16> {
        let mut got = Vec::new();
        for first in seqs.clone().step_by(usize::from(CHUNK)) {
            let chunk = first..seqs.end.min(first + CHUNK);
            send_pings(&mut self.peer, &self.pool, chunk);
            self.run();
            got.extend(self.replies());
        }
        got
    }

    /// Shuts the cores down and checks every mbuf went back to the pool;
    /// returns how many were dropped at shutdown.
    fn finish(self) -> usize {
        let stopped = self.cores.shutdown();
        let dropped = stopped.dropped_at_shutdown;
        drop(stopped);
        drop((self.ports, self.peer));
        assert_eq!(self.pool.in_use(), 0, "every mbuf is back in the pool");
        dropped
    }
}

#[test]
fn receive_loss_answers_about_four_in_five_until_switched_off() {
    let mut rig = Rig::new("impair_loss", false);
    rig.set("loss=0.2,seed=11", "off");
    let answered = rig.ping(0..1000);
    assert!(
        (600..=950).contains(&answered.len()),
        "{} of 1000 answered",
        answered.len()
    );
    let (rx, tx) = rig.counters();
    assert_eq!(rx.passed + rx.dropped, 1000, "{rx:?}");
    assert_eq!(rx.passed, answered.len() as u64, "{rx:?}");
    assert_eq!(tx, ImpairCounters::default(), "the transmit side is off");
    assert!(times_answered(&answered, 0..1000).iter().all(|&n| n <= 1));

    rig.set("off", "off");
    let answered = rig.ping(1000..1200);
    assert_eq!(answered, (1000..1200).collect::<Vec<_>>(), "all answered");
    assert_eq!(rig.counters().0.dropped, rx.dropped, "nothing lost since");
    assert_eq!(
        rig.cores.control.iface().counters().icmp_echo_replied,
        rx.passed + 200
    );
    assert_eq!(rig.finish(), 0);
}

#[test]
fn duplication_on_either_side_duplicates_replies() {
    let mut rig = Rig::new("impair_dup", false);
    rig.set("dup=0.5,seed=5", "off");
    let answered = rig.ping(0..320);
    let rx = rig.counters().0;
    // 160 expected, standard deviation about 9.
    assert!((110..=210).contains(&rx.duplicated), "{rx:?}");
    assert_eq!(answered.len() as u64, 320 + rx.duplicated, "{rx:?}");
    let times = times_answered(&answered, 0..320);
    assert!(times.iter().all(|&n| n == 1 || n == 2), "{times:?}");
    assert_eq!(rx.duplicate_failed, 0);

    rig.set("off", "dup=1");
    let answered = rig.ping(320..384);
    assert_eq!(times_answered(&answered, 320..384), vec![2; 64]);
    let tx = rig.counters().1;
    assert_eq!((tx.duplicated, tx.passed), (64, 128), "{tx:?}");
    assert_eq!(rig.finish(), 0);
}

#[test]
fn reordering_reorders_replies_and_loses_none() {
    let mut rig = Rig::new("impair_reorder", false);
    rig.set("reorder=0.3,seed=3", "off");
    let answered = rig.ping(0..320);
    assert_eq!(times_answered(&answered, 0..320), vec![1; 320]);
    assert!(answered.windows(2).any(|w| w[0] > w[1]), "{answered:?}");
    let rx = rig.counters().0;
    assert!(rx.reordered > 0, "{rx:?}");
    assert_eq!(rx.passed, 320, "{rx:?}");
    assert_eq!(rig.finish(), 0);
}

#[test]
fn delays_hold_replies_for_as_long_as_set() {
    let mut rig = Rig::new("impair_delay", false);
    send_pings(&mut rig.peer, &rig.pool, 0..1);
    let undelayed = rig.run();
    assert_eq!(rig.replies(), [0]);
    assert!(undelayed < Duration::from_millis(1), "{undelayed:?}");

    rig.set("delay=5ms", "delay=3ms");
    send_pings(&mut rig.peer, &rig.pool, 1..2);
    // The cores count held frames as work: stepping until idle waits
    // for the reply.
    let delayed = rig.run();
    assert_eq!(rig.replies(), [1]);
    let both = Duration::from_millis(8);
    assert!(
        delayed >= both && delayed < both + Duration::from_millis(1),
        "{delayed:?}"
    );

    // A constant delay keeps the order.
    assert_eq!(rig.ping(2..2 + CHUNK), (2..2 + CHUNK).collect::<Vec<_>>());
    let (rx, tx) = rig.counters();
    assert_eq!((rx.delayed, tx.delayed), (33, 33), "{rx:?} {tx:?}");

    rig.set("off", "off");
    send_pings(&mut rig.peer, &rig.pool, 100..101);
    assert!(rig.run() < Duration::from_millis(1));
    assert_eq!(rig.replies(), [100]);
    assert_eq!(rig.finish(), 0);
}

#[test]
fn frames_held_at_shutdown_are_freed_and_counted() {
    let mut rig = Rig::new("impair_held", false);
    rig.set("off", "delay=1s");
    send_pings(&mut rig.peer, &rig.pool, 0..5);
    for _ in 0..3 {
        assert!(rig.step() > 0, "held replies are pending work");
    }
    rig.set("delay=1s", "delay=1s");
    send_pings(&mut rig.peer, &rig.pool, 5..15);
    for _ in 0..3 {
        rig.step();
    }
    assert!(rig.replies().is_empty());
    let (rx, tx) = rig.counters();
    assert_eq!((rx.delayed, tx.delayed), (10, 5), "{rx:?} {tx:?}");
    assert_eq!(rig.finish(), 15);
}

#[test]
fn the_control_cores_own_queue_is_impaired_too() {
    let mut rig = Rig::new("impair_ctlq", true);
    rig.set("off", "dup=1");
    let answered = rig.ping(0..32);
    assert_eq!(times_answered(&answered, 0..32), vec![2; 32]);
    let ControlTx::Queue(batch) = rig.cores.control.tx() else {
        panic!("the control core has a queue of its own");
    };
    assert_eq!(batch.impair_counters().duplicated, 32);
    assert_eq!(
        rig.counters().1.duplicated,
        0,
        "the dataplane core sent none"
    );
    assert_eq!(rig.finish(), 0);
}

#[test]
fn the_switch_flips_from_another_thread_while_the_cores_run() {
    let Parts {
        pool,
        ports,
        mut peer,
        control,
        dataplanes,
    } = Parts::new("impair_threads", false);
    let switch: Arc<ImpairSwitch> = Arc::clone(dataplanes[0].impairment());
    let runtime = Runtime::spawn(eal(), control, dataplanes, &Placement::Unpinned).expect("spawn");

    let mut answered = Vec::new();
    switch.set(impairment("dup=1,seed=9", "off"));
    send_pings(&mut peer, &pool, 0..64);
    wait_for_replies(&mut peer, &mut answered, 128);
    let first = answered.clone();
    switch.set(Impairment::default());
    send_pings(&mut peer, &pool, 64..128);
    wait_for_replies(&mut peer, &mut answered, 192);
    let stopped = runtime.shutdown();
    answered.extend(replies(&mut peer));

    assert_eq!(times_answered(&first, 0..64), vec![2; 64]);
    assert_eq!(times_answered(&answered, 64..128), vec![1; 64]);
    assert_eq!(answered.len(), 192, "nothing duplicated once switched off");
    assert_eq!(stopped.dataplanes[0].impair_counters().0.duplicated, 64);
    drop(stopped);
    drop((ports, peer));
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}
