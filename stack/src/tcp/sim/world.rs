//! The simulated world: two connections (or a connection and a
//! listener), their applications, the link, an off-path attacker, and the
//! virtual clock that jumps from one deadline to the next.

use super::app::App;
use super::link::Link;
use super::rng::SimRng;
use super::scenario::Scenario;
use super::{Report, SimError};
use crate::tcp::connection::{Connection, Endpoint, Event, State};
use crate::tcp::isn::IsnGenerator;
use crate::tcp::listener::{ListenOutcome, Listener};
use crate::tcp::receive::receiver::WindowPolicy;
use crate::tcp::segment::{bare_header, Segment};
use crate::tcp::seq::Seq;
use crate::tcp::timers::time::{Duration, Instant};
use crate::wire::tcp::parse;
use smoltcp::wire::{Ipv4Address, TcpControl};

/// The longest a run may take in virtual time.
const TIME_LIMIT: Duration = Duration::from_secs(900);
/// Loop iterations after which a run is declared stuck.
const STEP_LIMIT: u64 = 2_000_000;

/// What one side put on the wire.
#[derive(Debug, Default)]
struct Observed {
    isn: Option<Seq>,
    /// The sequence number after the last segment sent.
    next: Option<Seq>,
    /// Data segments that started inside a record.
    misaligned: u64,
}

impl Observed {
    /// Notes the ISN and where data segments start.
    fn note(&mut self, app: &App, segment: &Segment<'_>) {
        let seq = segment.seq();
        self.next = Some(seq + (segment.header.segment_len() + segment.payload.len()) as u32);
        if segment.header.control == TcpControl::Syn {
            self.isn = Some(seq);
            return;
        }
        if segment.payload.is_empty() || !app.records {
            return;
        }
        if let Some(isn) = self.isn {
            let start = seq.diff(isn + 1) as u64;
            if !app.record_starts.contains(&start) {
                self.misaligned += 1;
            }
        }
    }
}

/// The simulated world.
pub(super) struct World {
    scenario: Scenario,
    rng: SimRng,
    now: Instant,
    client: Connection,
    server: Option<Connection>,
    listener: Listener,
    apps: [App; 2],
    links: [Link; 2],
    observed: [Observed; 2],
    segments: u64,
    injected: u32,
    /// When every octet had reached its application.
    delivered: Option<Instant>,
}

const CLIENT: usize = 0;
const SERVER: usize = 1;
const CLIENT_PORT: u16 = 40000;
const SERVER_PORT: u16 = 5000;

impl World {
    pub(super) fn new(scenario: &Scenario) -> Self {
        let mut rng = SimRng::new(scenario.seed);
        let client_ep = Endpoint::new(Ipv4Address::new(10, 0, 0, 1), CLIENT_PORT);
        let server_ep = Endpoint::new(Ipv4Address::new(10, 0, 0, 2), SERVER_PORT);
        let isn = Seq(rng.next_u64() as u32);
        let client = Connection::connect(
            scenario.client.clone(),
            client_ep,
            server_ep,
            isn,
            Instant(0),
        );
        let mut secret = [0; 16];
        secret[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        secret[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        let listener = Listener::new(
            server_ep,
            scenario.server.clone(),
            IsnGenerator::new(secret),
            4,
        );
        let server = scenario.simultaneous_open.then(|| {
            let isn = Seq(rng.next_u64() as u32);
            Connection::connect(
                scenario.server.clone(),
                server_ep,
                client_ep,
                isn,
                Instant(0),
            )
        });
        World {
            apps: [
                App::new(CLIENT as u8, scenario.client_bytes, scenario),
                App::new(SERVER as u8, scenario.server_bytes, scenario),
            ],
            links: [
                Link::new(scenario.link.clone(), client_ep.addr, server_ep.addr),
                Link::new(scenario.link.clone(), server_ep.addr, client_ep.addr),
            ],
            scenario: scenario.clone(),
            rng,
            now: Instant(0),
            client,
            server,
            listener,
            observed: [Observed::default(), Observed::default()],
            segments: 0,
            injected: 0,
            delivered: None,
        }
    }

    fn deliver(&mut self, to: usize, bytes: &[u8]) -> Result<(), SimError> {
        let link = &self.links[1 - to];
        let repr = parse(link.src, link.dst, bytes)
            .map_err(|e| SimError(format!("undecodable segment on the link: {e:?}")))?;
        let now = self.now;
        if to == SERVER && self.server.is_none() {
            match self.listener.on_segment(now, link.src, link.dst, &repr) {
                ListenOutcome::Accepted(mut conn) => {
                    if let Some(window) = self.scenario.fixed_window {
                        conn.set_window_policy(WindowPolicy::Fixed(window));
                    }
                    self.server = Some(*conn);
                }
                ListenOutcome::Reset(rst) => {
                    let bytes = rst.to_bytes();
                    self.links[SERVER].send(now, bytes, &mut self.rng);
                }
                ListenOutcome::Dropped | ListenOutcome::Ignored => {}
            }
            return Ok(());
        }
        let app = &mut self.apps[to];
        let conn = if to == CLIENT {
            &mut self.client
        } else {
            match self.server.as_mut() {
                Some(conn) => conn,
                None => return Ok(()),
            }
        };
        conn.on_segment(now, &repr, &mut app.checker);
        Ok(())
    }

    fn step_side(&mut self, side: usize) {
        let now = self.now;
        let World {
            client,
            server,
            apps,
            rng,
            scenario,
            ..
        } = self;
        let conn = if side == CLIENT {
            client
        } else {
            match server.as_mut() {
                Some(conn) => conn,
                None => return,
            }
        };
        let app = &mut apps[side];
        if conn.poll_at().is_some_and(|at| at <= now) {
            conn.on_timer(now);
        }
        while let Some(event) = conn.poll_event() {
            app.events.push(event);
        }
        if side == CLIENT {
            if let Some((after, mss)) = scenario.mss_drop {
                if now >= Instant(0) + after {
                    conn.set_mss(mss);
                }
            }
        }
        if !matches!(conn.state(), State::SynSent | State::SynReceived) {
            app.write(conn, rng);
        }
        match scenario.read_rate {
            None => app.read(conn, u64::MAX),
            Some(rate) if now >= app.next_read => {
                app.read(conn, rate);
                app.next_read = now + Duration::from_millis(1);
            }
            Some(_) => {}
        }
        let mut out = Vec::new();
        while let Some(segment) = conn.poll_transmit(now) {
            self.observed[side].note(&self.apps[side], &segment);
            out.push(segment.to_bytes());
        }
        for bytes in out {
            self.segments += 1;
            self.links[side].send(now, bytes, &mut self.rng);
        }
    }

    /// Now and then, a segment from an off-path attacker who knows the
    /// addresses and ports, always with an unacceptable acknowledgment
    /// number (RFC 5961). Resets are blind (random sequence numbers: an
    /// exact guess of RCV.NXT legitimately resets); SYNs, FINs and data
    /// half the time land inside the window.
    fn inject(&mut self) -> Result<(), SimError> {
        let past_handshake = |conn: Option<&Connection>| {
            conn.is_some_and(|c| {
                !matches!(
                    c.state(),
                    State::Closed | State::SynSent | State::SynReceived
                )
            })
        };
        if self.injected >= self.scenario.injections
            || !past_handshake(Some(&self.client))
            || !past_handshake(self.server.as_ref())
            || !self.rng.chance(0.2)
        {
            return Ok(());
        }
        self.injected += 1;
        let to = self.rng.between(0, 1) as usize;
        let (src_port, dst_port) = if to == SERVER {
            (CLIENT_PORT, SERVER_PORT)
        } else {
            (SERVER_PORT, CLIENT_PORT)
        };
        let control = [
            TcpControl::Rst,
            TcpControl::Syn,
            TcpControl::Fin,
            TcpControl::None,
        ][self.rng.between(0, 3) as usize];
        let guessed = self.observed[1 - to]
            .next
            .filter(|_| control != TcpControl::Rst && self.rng.chance(0.5));
        let seq = match guessed {
            Some(next) => next + self.rng.between(1, 2000) as u32,
            None => Seq(self.rng.next_u64() as u32),
        };
        let ack = match self.observed[to].next {
            Some(next) => next + (1 << 30) + self.rng.between(0, 1 << 20) as u32,
            None => Seq(self.rng.next_u64() as u32),
        };
        let payload = vec![0xEE; self.rng.between(0, 64) as usize];
        let window = self.rng.next_u64() as u16;
        let header = bare_header(src_port, dst_port, control, seq, Some(ack), window);
        let bytes = self.links[1 - to].build(header, &payload);
        self.deliver(to, &bytes)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let mut next = [
            self.links[0].next_at(),
            self.links[1].next_at(),
            self.client.poll_at(),
            self.server.as_ref().and_then(Connection::poll_at),
        ]
        .into_iter()
        .flatten()
        .min();
        if self.scenario.read_rate.is_some() {
            let pending = |side: usize, conn: Option<&Connection>| {
                conn.is_some_and(|c| c.received_len() > 0)
                    .then_some(self.apps[side].next_read)
            };
            for wake in [
                pending(CLIENT, Some(&self.client)),
                pending(SERVER, self.server.as_ref()),
            ]
            .into_iter()
            .flatten()
            {
                next = Some(next.map_or(wake, |n| n.min(wake)));
            }
        }
        if let Some((after, _)) = self.scenario.mss_drop {
            let at = Instant(0) + after;
            if at > self.now {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next.map(|n| n.max(self.now))
    }

    fn finished(&self) -> bool {
        self.client.is_closed() && self.server.as_ref().is_some_and(Connection::is_closed)
    }

    /// Runs until both connections are closed, or fails.
    pub(super) fn run(&mut self) -> Result<(), SimError> {
        for step in 0.. {
            if step > STEP_LIMIT {
                return Err(SimError("step limit reached".into()));
            }
            for to in [SERVER, CLIENT] {
                for bytes in self.links[1 - to].take_due(self.now) {
                    self.deliver(to, &bytes)?;
                    if self.scenario.poll_each_segment {
                        self.step_side(to);
                    }
                }
            }
            self.inject()?;
            self.step_side(CLIENT);
            self.step_side(SERVER);
            if self.delivered.is_none() && (0..2).all(|side| self.complete(side)) {
                self.delivered = Some(self.now);
            }
            if self.finished() {
                return Ok(());
            }
            let Some(next) = self.next_wakeup() else {
                return Err(SimError(format!(
                    "stalled at {:?}: client {:?}, server {:?}",
                    self.now,
                    self.client.state(),
                    self.server.as_ref().map(Connection::state)
                )));
            };
            if next.saturating_since(Instant(0)) > TIME_LIMIT {
                return Err(SimError(format!(
                    "time limit: client {:?} sent {}, server {:?}",
                    self.client.state(),
                    self.apps[CLIENT].pushed,
                    self.server.as_ref().map(Connection::state)
                )));
            }
            self.now = next;
        }
        Ok(())
    }

    /// Checks the outcome of a finished run.
    /// What the run produced.
    pub(super) fn report(&self) -> Report {
        Report {
            elapsed: self.now.saturating_since(Instant(0)),
            delivered: self
                .delivered
                .unwrap_or(self.now)
                .saturating_since(Instant(0)),
            client: *self.client.stats(),
            server: self.server.as_ref().map(|c| *c.stats()).unwrap_or_default(),
            misaligned: self.observed.iter().map(|o| o.misaligned).sum(),
            segments: self.segments,
            injected: self.injected,
            reordering: [
                self.client.reordering(),
                self.server.as_ref().map_or(0, Connection::reordering),
            ],
        }
    }

    /// Whether `side`'s application has the peer's whole stream.
    fn complete(&self, side: usize) -> bool {
        let peer_total = self.apps[1 - side].total;
        peer_total == 0 || self.apps[side].checker.covered.first() == Some(0..peer_total)
    }

    pub(super) fn verify(&self) -> Result<(), SimError> {
        for (side, app) in self.apps.iter().enumerate() {
            let checker = &app.checker;
            if !self.complete(side) {
                return Err(SimError(format!(
                    "side {side} received {:?} of {}",
                    checker.covered.first(),
                    self.apps[1 - side].total
                )));
            }
            if checker.corrupt > 0 {
                return Err(SimError(format!(
                    "side {side}: {} corrupt octets",
                    checker.corrupt
                )));
            }
            let stats = if side == CLIENT {
                *self.client.stats()
            } else {
                self.server.as_ref().map(|c| *c.stats()).unwrap_or_default()
            };
            if checker.duplicates > 0 && stats.declined_dropped == 0 {
                return Err(SimError(format!(
                    "side {side}: {} octets handed over twice",
                    checker.duplicates
                )));
            }
            let clean = app.events.contains(&Event::Closed)
                && !app
                    .events
                    .iter()
                    .any(|e| matches!(e, Event::Reset | Event::TimedOut));
            if !clean {
                return Err(SimError(format!(
                    "side {side} did not close cleanly: {:?}",
                    app.events
                )));
            }
        }
        Ok(())
    }
}
