//! The roles of `uwarp-perf tcp`, each a [`TcpApp`] running on the core
//! that owns its connection: `source` sends a pattern of N octets then
//! closes, `sink` takes everything until the peer closes, `echo` sends
//! back everything it receives. Each hashes (SHA-256) what it sent and
//! what it received, so both ends of a transfer can be compared.
//!
//! `source` and `sink` take in-order data in place, as the engine offers
//! it (RFC 5044 A.3's hand-off), and read only what arrived out of order
//! from the engine's reassembly buffer; `echo` reads everything from the
//! buffer, so the peer's window closes while the echo waits for room to
//! send.

use std::time::Instant as WallInstant;

use crossbeam_channel::Sender;
use sha2::{Digest, Sha256};
use uwarp_dataplane::tcp::{End, TcpApp};
use uwarp_stack::tcp::{Connection, Consumer, Disposition, Event, Instant, Stats};

/// What a connection does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Takes everything until the peer closes.
    Sink,
    /// Sends N octets, then closes (and takes what comes back).
    Source,
    /// Sends back what it receives; closes when the peer has.
    Echo,
}

impl Role {
    /// The role's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Sink => "sink",
            Role::Source => "source",
            Role::Echo => "echo",
        }
    }
}

/// Octets in the repeating block a source sends: a prime, so a segment
/// delivered at the wrong offset changes the hash.
const BLOCK_LEN: usize = 65_521;

/// Largest chunk the echo moves at once.
const ECHO_CHUNK: usize = 64 * 1024;

/// How one connection went.
#[derive(Clone, Debug)]
pub struct Report {
    /// The role.
    pub role: Role,
    /// How it ended.
    pub end: End,
    /// Octets sent (accepted by the engine).
    pub sent: u64,
    /// Octets received.
    pub received: u64,
    /// SHA-256 of the octets sent.
    pub sent_sha256: [u8; 32],
    /// SHA-256 of the octets received.
    pub received_sha256: [u8; 32],
    /// From the connection's establishment to its end, in seconds.
    pub seconds: f64,
    /// The engine's counters.
    pub stats: Stats,
}

/// The block a source repeats: pseudo-random octets (xorshift), fixed so
/// runs can be compared.
pub fn pattern_block() -> Vec<u8> {
    pattern(BLOCK_LEN, 1)
}

/// `len` pseudo-random octets (xorshift) from `seed`: the same for the
/// same seed, and each a prefix of the longer ones.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state: u64 = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// One connection's role.
pub struct RoleApp {
    role: Role,
    remaining: u64,
    block: std::sync::Arc<Vec<u8>>,
    sent: u64,
    received: u64,
    sent_hash: Sha256,
    received_hash: Sha256,
    started: Option<WallInstant>,
    closed: bool,
    scratch: Vec<u8>,
    report: Sender<Report>,
}

impl RoleApp {
    /// A connection in `role` (a source sends `bytes` octets of `block`),
    /// reporting to `report` when it ends.
    pub fn new(
        role: Role,
        bytes: u64,
        block: std::sync::Arc<Vec<u8>>,
        report: Sender<Report>,
    ) -> Self {
        RoleApp {
            role,
            remaining: if role == Role::Source { bytes } else { 0 },
            block,
            sent: 0,
            received: 0,
            sent_hash: Sha256::new(),
            received_hash: Sha256::new(),
            started: None,
            closed: false,
            scratch: Vec::new(),
            report,
        }
    }

    fn take(&mut self, data: &[u8]) {
        self.received_hash.update(data);
        self.received += data.len() as u64;
    }

    fn sent(&mut self, data: &[u8]) {
        self.sent_hash.update(data);
        self.sent += data.len() as u64;
    }

    /// Reads what the engine holds, in order; the echo sends it back as
    /// room allows.
    fn read_held(&mut self, conn: &mut Connection) {
        loop {
            let room = match self.role {
                Role::Echo => conn.send_capacity().min(ECHO_CHUNK),
                Role::Sink | Role::Source => usize::MAX,
            };
            let Some((pos, data)) = conn.received() else {
                break;
            };
            // Everything below `received` was taken in place already.
            let skip = self.received.saturating_sub(pos).min(data.len() as u64) as usize;
            let n = (data.len() - skip).min(room);
            if n == 0 && skip == 0 {
                break;
            }
            self.scratch.clear();
            self.scratch.extend_from_slice(&data[skip..skip + n]);
            conn.release_received(pos + (skip + n) as u64);
            let chunk = std::mem::take(&mut self.scratch);
            self.take(&chunk);
            if self.role == Role::Echo {
                let accepted = conn.send(&chunk);
                debug_assert_eq!(accepted, chunk.len(), "the echo sends within capacity");
                self.sent(&chunk[..accepted]);
            }
            self.scratch = chunk;
        }
    }

    fn send_pattern(&mut self, conn: &mut Connection) {
        let block = std::sync::Arc::clone(&self.block);
        while self.remaining > 0 {
            let offset = (self.sent % BLOCK_LEN as u64) as usize;
            let len = (BLOCK_LEN - offset).min(self.remaining.min(usize::MAX as u64) as usize);
            let accepted = conn.send(&block[offset..offset + len]);
            if accepted == 0 {
                break;
            }
            self.sent(&block[offset..offset + accepted]);
            self.remaining -= accepted as u64;
        }
    }
}

impl Consumer for RoleApp {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        // In place only when nothing is held before it.
        if self.role != Role::Echo && in_order && pos == self.received {
            self.take(data);
            Disposition::Consumed
        } else {
            Disposition::Keep
        }
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

impl TcpApp for RoleApp {
    fn on_event(&mut self, _now: Instant, event: Event, _conn: &mut Connection) {
        if event == Event::Established {
            self.started = Some(WallInstant::now());
        }
    }

    fn drive(&mut self, _now: Instant, conn: &mut Connection) {
        self.read_held(conn);
        // A source sends once the connection is established, so that a
        // refused connection reports nothing sent.
        if self.role == Role::Source && self.started.is_some() {
            self.send_pattern(conn);
        }
        let done_sending = match self.role {
            Role::Source => self.remaining == 0,
            Role::Sink | Role::Echo => conn.peer_closed() && conn.received_len() == 0,
        };
        if done_sending && !self.closed {
            self.closed = true;
            conn.close();
        }
    }

    fn on_end(&mut self, end: End, stats: &Stats) {
        let seconds = self
            .started
            .map_or(0.0, |started| started.elapsed().as_secs_f64());
        let report = Report {
            role: self.role,
            end,
            sent: self.sent,
            received: self.received,
            sent_sha256: self.sent_hash.clone().finalize().into(),
            received_sha256: self.received_hash.clone().finalize().into(),
            seconds,
            stats: *stats,
        };
        let _ = self.report.send(report);
    }
}
