//! Shared helpers of the `tcp_*` engine tests: two connections wired back
//! to back, a recording consumer and segment builders, and bulk transfers
//! on the simulator.
//!
//! Each test file uses a different subset of these helpers.

#![allow(dead_code)]

use smoltcp::wire::{Ipv4Address, TcpControl, TcpRepr, TcpTimestampRepr};
use uwarp_stack::tcp::sim::{run, LinkConfig, Report, Scenario};
use uwarp_stack::tcp::{
    bare_header, parse, Config, CongestionControl, Connection, Duration, Endpoint, Event, Instant,
    IsnGenerator, ListenOutcome, Listener, Payload, Segment, Seq,
};

pub const A: Endpoint = Endpoint::new(Ipv4Address::new(10, 0, 0, 1), 1000);
pub const B: Endpoint = Endpoint::new(Ipv4Address::new(10, 0, 0, 2), 2000);
pub const A_ISN: Seq = Seq(0xFFFF_FF00);

pub use uwarp_stack::tcp::sim::Recorder;

/// A segment's bytes as one side sent them.
#[derive(Debug, Clone)]
pub struct Wire {
    pub from_a: bool,
    pub bytes: Vec<u8>,
}

impl Wire {
    pub fn repr(&self) -> TcpRepr<'_> {
        let (src, dst) = if self.from_a { (A, B) } else { (B, A) };
        parse(src.addr, dst.addr, &self.bytes).expect("the engine emits valid segments")
    }

    /// Whether `other` is the same segment: sequence number and payload
    /// (a retransmission of this one, say).
    pub fn same_segment(&self, other: &Wire) -> bool {
        let (a, b) = (self.repr(), other.repr());
        a.seq_number == b.seq_number && a.payload == b.payload
    }

    pub fn payload_len(&self) -> usize {
        self.repr().payload.len()
    }
}

/// Everything `conn` wants to send now.
pub fn drain(conn: &mut Connection, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(segment) = conn.poll_transmit(now) {
        out.push(segment.to_bytes());
    }
    out
}

/// The default settings with a short TIME-WAIT.
pub fn config() -> Config {
    Config {
        time_wait: Duration::from_millis(100),
        ..Config::default()
    }
}

/// The test settings with Nagle off (TCP_NODELAY).
pub fn no_nagle() -> Config {
    Config {
        nagle: false,
        ..config()
    }
}

/// A connected pair whose A sends at once (Nagle off) to a B whose
/// receive buffer holds only `recv_buffer` octets: the peer's window
/// closes when B does not read.
pub fn pair_with_small_receiver(recv_buffer: usize) -> Pair {
    let small = Config {
        recv_buffer,
        ..config()
    };
    Pair::connected(no_nagle(), small)
}

/// Two connections and the time.
pub struct Pair {
    pub now: Instant,
    pub a: Connection,
    pub b: Connection,
    pub a_rx: Recorder,
    pub b_rx: Recorder,
    /// Every segment that crossed, in order.
    pub log: Vec<Wire>,
}

impl Pair {
    /// A connects to a listener at B; the handshake completes.
    pub fn connected(a_config: Config, b_config: Config) -> Pair {
        let now = Instant(1_000);
        let mut a = Connection::connect(a_config, A, B, A_ISN, now);
        let syn = drain(&mut a, now).remove(0);
        let mut listener = Listener::new(B, b_config, IsnGenerator::new([1; 16]), 8);
        let repr = parse(A.addr, B.addr, &syn).expect("valid SYN");
        let ListenOutcome::Accepted(b) = listener.on_segment(now, A.addr, B.addr, &repr) else {
            panic!("listener refused the SYN");
        };
        let mut pair = Pair {
            now,
            a,
            b: *b,
            a_rx: Recorder::default(),
            b_rx: Recorder::default(),
            log: vec![Wire {
                from_a: true,
                bytes: syn,
            }],
        };
        pair.exchange();
        assert_eq!(pair.a.poll_event(), Some(Event::Established));
        assert_eq!(pair.b.poll_event(), Some(Event::Established));
        pair
    }

    pub fn deliver(&mut self, wire: &Wire) {
        let now = self.now;
        let repr = wire.repr();
        if wire.from_a {
            self.b.on_segment(now, &repr, &mut self.b_rx);
        } else {
            self.a.on_segment(now, &repr, &mut self.a_rx);
        }
    }

    /// What A (or B) sends now, logged, not delivered.
    pub fn take(&mut self, from_a: bool) -> Vec<Wire> {
        let now = self.now;
        let conn = if from_a { &mut self.a } else { &mut self.b };
        let wires: Vec<Wire> = drain(conn, now)
            .into_iter()
            .map(|bytes| Wire { from_a, bytes })
            .collect();
        self.log.extend(wires.iter().cloned());
        wires
    }

    /// Delivers segments both ways until neither side has anything to send.
    pub fn exchange(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for from_a in [true, false] {
                for wire in self.take(from_a) {
                    moved = true;
                    self.deliver(&wire);
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the exchange never settled");
    }

    /// Moves time forward and runs both sides' timers.
    pub fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        let now = self.now;
        self.a.on_timer(now);
        self.b.on_timer(now);
    }

    /// Runs timers and exchanges until both sides are idle or `limit`
    /// passes.
    pub fn settle(&mut self, limit: Duration) {
        let end = self.now + limit;
        loop {
            self.exchange();
            let next = [self.a.poll_at(), self.b.poll_at()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(at) if at <= end => {
                    self.now = self.now.max(at);
                    let now = self.now;
                    self.a.on_timer(now);
                    self.b.on_timer(now);
                }
                _ => return,
            }
        }
    }

    pub fn events(conn: &mut Connection) -> Vec<Event> {
        std::iter::from_fn(|| conn.poll_event()).collect()
    }
}

/// A segment from B to A built by hand (an attacker or a test peer).
pub fn forged(control: TcpControl, seq: Seq, ack: Option<Seq>, payload: &[u8]) -> Vec<u8> {
    let header = bare_header(B.port, A.port, control, seq, ack, 65535);
    Segment {
        src: B.addr,
        dst: A.addr,
        header,
        payload: Payload::of(payload),
    }
    .to_bytes()
}

/// `bytes`, a segment from B to A, with the timestamp option `tsval`
/// (echoing nothing) instead of its own.
pub fn retimed(bytes: &[u8], tsval: u32) -> Vec<u8> {
    let repr = parse(B.addr, A.addr, bytes).expect("a valid segment");
    Segment {
        src: B.addr,
        dst: A.addr,
        header: TcpRepr {
            payload: &[],
            timestamp: Some(TcpTimestampRepr::new(tsval, 0)),
            ..repr
        },
        payload: Payload::of(repr.payload),
    }
    .to_bytes()
}

/// B's next sequence number as A expects it: B sends one octet, which A
/// acknowledges.
pub fn b_next(pair: &mut Pair) -> Seq {
    pair.b.send(b"x");
    let wire = pair.take(false).remove(0);
    let seq = Seq::from(wire.repr().seq_number);
    pair.deliver(&wire);
    pair.exchange();
    seq + 1
}

/// Gives `bytes`, a segment forged as from B, to A; returns what A sends.
pub fn inject(pair: &mut Pair, bytes: &[u8]) -> Vec<Wire> {
    let repr = parse(B.addr, A.addr, bytes).expect("forged segments are valid");
    let now = pair.now;
    pair.a.on_segment(now, &repr, &mut pair.a_rx);
    pair.take(true)
}

/// The octets `0..len` of a test stream.
pub fn stream(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The stream a recording consumer was offered, each offer at its
/// position.
pub fn reassembled(recorder: &Recorder) -> Vec<u8> {
    let mut out = Vec::new();
    for (pos, data, _) in &recorder.offered {
        let start = *pos as usize;
        if out.len() < start + data.len() {
            out.resize(start + data.len(), 0);
        }
        out[start..start + data.len()].copy_from_slice(data);
    }
    out
}

/// A fast recovery caused by reordering: A sends ten segments, B gets the
/// second after the next three, A retransmits it and cuts its window;
/// then everything else arrives and the recovery ends. Returns the
/// retransmission (still on its way to B) and A's window before the cut.
pub struct Spurious {
    pub pair: Pair,
    pub retransmission: Wire,
    pub cwnd_before: u32,
}

/// Delivers `wire` to B and B's answers to A; returns what A sends.
pub fn through(pair: &mut Pair, wire: &Wire) -> Vec<Wire> {
    pair.deliver(wire);
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    pair.take(true)
}

pub fn spurious_recovery() -> Spurious {
    let mut pair = Pair::connected(no_nagle(), config());
    pair.a.send(&stream(10 * pair.a.emss()));
    let burst = pair.take(true);
    assert_eq!(burst.len(), 10);
    let mut pending: Vec<Wire> = Vec::new();
    for i in [0, 2, 3] {
        pending.extend(through(&mut pair, &burst[i]));
    }
    let cwnd_before = pair.a.cwnd();
    pending.extend(through(&mut pair, &burst[4]));
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    assert!(pair.a.cwnd() < cwnd_before, "the window was cut");
    let hole = burst[1].repr().seq_number;
    let at = pending
        .iter()
        .position(|w| w.repr().seq_number == hole && w.payload_len() > 0)
        .expect("the hole was resent");
    let retransmission = pending.remove(at);
    // The original, the rest of the burst and what followed, in order.
    pending.splice(0..0, burst[5..].iter().cloned());
    pending.insert(0, burst[1].clone());
    while !pending.is_empty() {
        let wire = pending.remove(0);
        pending.extend(through(&mut pair, &wire));
    }
    // B's delayed ACK for the last segment.
    pair.settle(Duration::from_millis(2));
    assert_eq!(pair.a.send_queue_len(), 0, "everything acknowledged");
    // Regression: each partial ACK of the recovery used to mark the next
    // segment lost, SACKed or not, resending all that was in flight.
    assert_eq!(pair.a.stats().retransmissions, 1);
    Spurious {
        pair,
        retransmission,
        cwnd_before,
    }
}

/// Runs the timers until A's retransmission timer expired `timeouts`
/// times; B's delayed ACKs reach A, and all A sends meanwhile (tail loss
/// probes, then the timeout's retransmissions) is returned, not
/// delivered.
pub fn time_out(pair: &mut Pair, timeouts: u64) -> Vec<Wire> {
    let mut sent = Vec::new();
    while pair.a.stats().timeouts < timeouts {
        let at = [pair.a.poll_at(), pair.b.poll_at()]
            .into_iter()
            .flatten()
            .min();
        pair.advance(at.expect("the RTO runs").saturating_since(pair.now));
        for ack in pair.take(false) {
            pair.deliver(&ack);
        }
        sent.extend(pair.take(true));
    }
    sent
}

/// A pure ACK like `last` (from B), with `blocks` as its SACK option and
/// its timestamp `later` ticks later.
pub fn ack_like(last: &Wire, blocks: [Option<(u32, u32)>; 3], later: u32) -> Vec<u8> {
    let repr = last.repr();
    let mut header = bare_header(
        B.port,
        A.port,
        TcpControl::None,
        Seq::from(repr.seq_number) + repr.payload.len() as u32,
        repr.ack_number.map(Seq::from),
        repr.window_len,
    );
    header.timestamp = repr.timestamp.map(|mut ts| {
        ts.tsval = ts.tsval.wrapping_add(later);
        ts
    });
    header.sack_ranges = blocks;
    Segment {
        src: B.addr,
        dst: A.addr,
        header,
        payload: Default::default(),
    }
    .to_bytes()
}

/// Octets the client sends in each run.
pub const BULK: u64 = 20_000_000;

/// A bulk transfer of [`BULK`] octets from the client over a 1 Gbit/s
/// link with 20 us of delay each way and `impair` applied on top.
pub fn bulk(seed: u64, congestion: CongestionControl, impair: LinkConfig) -> Scenario {
    let mut scenario = Scenario::random(seed);
    scenario.link = LinkConfig {
        delay: Duration::from_micros(20),
        bandwidth: 1_000_000_000,
        ..impair
    };
    // TIME-WAIT outlasts a few retransmissions of the last FIN.
    let config = Config {
        congestion,
        time_wait: Duration::from_millis(100),
        ..Config::default()
    };
    scenario.client = config.clone();
    scenario.server = config;
    scenario.client_bytes = BULK;
    scenario.server_bytes = 0;
    scenario.records = true;
    scenario.read_rate = None;
    scenario.consume = 1.0;
    scenario.mss_drop = None;
    scenario.simultaneous_open = false;
    scenario.fixed_window = None;
    scenario.injections = 0;
    scenario.poll_each_segment = true;
    scenario
}

/// Plays `scenario` on the simulator; panics with its seed on failure.
pub fn played(scenario: &Scenario) -> Report {
    run(scenario).unwrap_or_else(|e| panic!("seed {}: {}", scenario.seed, e.0))
}
