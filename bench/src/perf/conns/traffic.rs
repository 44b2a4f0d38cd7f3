//! The data phase of a `conns` run: small messages (RDMA Writes, or
//! Sends into posted receives) spread round-robin over every queue pair,
//! message `j` on queue pair `j % n` from the client's region at offset
//! `j × size` to the server's at the same offset, so that every message
//! of every queue pair lands somewhere of its own and can be checked.
//!
//! One thread runs both ends: it posts while fewer than `window` messages
//! are on their way (posted and not yet placed at the server, as the
//! server's queue pair counters say), steps both devices' cores, and
//! takes the completions it knows are there. It never polls an empty
//! completion queue, which would run a device's cores behind its back, so
//! the frames the cores report are every frame of the phase. A Send is
//! posted only when its receive is (the bench plays both ends, so it
//! knows), since iWARP has no receiver-not-ready retry (RFC 5040 section
//! 7.1: a Send finding no receive ends the stream).

use std::time::Instant;

use uwarp::{
    CompletionQueue, Payload, QueuePair, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

use super::pair::Pair;
use super::setup::End;
use super::Phase;
use crate::perf::endpoint::STALL;
use crate::perf::Op;

/// Steps without any message placed before the phase checks the clock
/// for a stall.
const CHECK_EVERY: u32 = 1024;

/// The data phase's state: what was posted, placed and taken.
pub(super) struct Traffic<'a> {
    pair: &'a Pair,
    client: &'a End,
    server: &'a End,
    op: Op,
    size: usize,
    window: usize,
    /// Messages posted so far (message `j` on queue pair `j % n`).
    posted: usize,
    /// Every message before this one is placed at the server.
    placed: usize,
    /// Completions taken from the client's queue and the server's.
    client_taken: usize,
    server_taken: usize,
    /// Receives posted on each server queue pair (Sends only).
    receives: Vec<usize>,
    completions: Vec<WorkCompletion>,
}

impl<'a> Traffic<'a> {
    /// The data phase between connected ends; for Sends, each server
    /// queue pair gets the receives of its first messages.
    pub(super) fn new(
        pair: &'a Pair,
        client: &'a End,
        server: &'a End,
        op: Op,
        size: usize,
        window: usize,
    ) -> Result<Self, String> {
        let n = server.qps.len();
        let mut traffic = Traffic {
            pair,
            client,
            server,
            op,
            size,
            window,
            posted: 0,
            placed: 0,
            client_taken: 0,
            server_taken: 0,
            receives: vec![0; n],
            completions: Vec::with_capacity(window),
        };
        if op == Op::Send {
            for qp in 0..n {
                for _ in 0..receives_per_qp(window, n) {
                    traffic.post_recv(qp)?;
                }
            }
        }
        Ok(traffic)
    }

    /// Moves messages until every message before `end` is placed.
    pub(super) fn run_to(&mut self, end: usize) -> Result<Phase, String> {
        let start = Instant::now();
        let first = self.placed;
        let mut frames = 0u64;
        let mut idle = 0u32;
        while self.placed < end {
            while self.posted < end
                && self.posted - self.placed < self.window
                && self.has_receive(self.posted)
            {
                self.post(self.posted)?;
                self.posted += 1;
            }
            frames += self.pair.step() as u64;
            let before = self.placed;
            self.advance()?;
            idle = if self.placed == before { idle + 1 } else { 0 };
            if idle >= CHECK_EVERY {
                idle = 0;
                if start.elapsed() > STALL {
                    return Err(format!("message {} was never placed", self.placed));
                }
            }
        }
        Ok(Phase {
            messages: end - first,
            frames,
            elapsed: start.elapsed(),
        })
    }

    fn qps(&self) -> usize {
        self.client.qps.len()
    }

    /// Whether message `j` can go: always for a Write; for a Send, when
    /// its receive is posted.
    fn has_receive(&self, j: usize) -> bool {
        self.op == Op::Write || self.receives[j % self.qps()] > j / self.qps()
    }

    fn post(&self, j: usize) -> Result<(), String> {
        let offset = j * self.size;
        let sink = &self.server.region;
        let op = match self.op {
            Op::Send => SendOp::Send,
            _ => SendOp::Write {
                remote_addr: sink.addr() + offset as u64,
                rkey: sink.rkey(),
            },
        };
        let source = self.client.region.sge(offset, self.size as u32);
        let wr = SendWr::new(j as u64, op, Payload::Sgl(vec![source]));
        qp_of(&self.client.qps, j)
            .post_send(wr)
            .map_err(|e| format!("message {j}: {e}"))
    }

    /// Posts the next receive of server queue pair `qp`: the one its next
    /// Send fills, at that message's offset.
    fn post_recv(&mut self, qp: usize) -> Result<(), String> {
        let j = qp + self.receives[qp] * self.qps();
        let wr = RecvWr {
            wr_id: j as u64,
            sgl: vec![self.server.region.sge(j * self.size, self.size as u32)],
        };
        self.receives[qp] += 1;
        self.server.qps[qp]
            .post_recv(wr)
            .map_err(|e| format!("receive {j}: {e}"))
    }

    /// Whether message `j` is placed: its queue pair has placed every
    /// octet of its messages up to `j` (a stream places in order).
    fn is_placed(&self, j: usize) -> bool {
        let n = self.qps();
        let octets = ((j / n + 1) * self.size) as u64;
        qp_of(&self.server.qps, j).counters().bytes_placed >= octets
    }

    /// Moves the placed frontier on and takes the completions it proves
    /// are queued: a Write or Send completes at the client when handed to
    /// TCP, before it can be placed; a Send completes its receive at the
    /// server as it is placed.
    fn advance(&mut self) -> Result<(), String> {
        while self.placed < self.posted && self.is_placed(self.placed) {
            self.placed += 1;
        }
        let due = self.placed - self.client_taken;
        self.client_taken += take(&self.client.cq, due, &mut self.completions)?;
        for wc in self.completions.drain(..) {
            let opcode = match self.op {
                Op::Send => WcOpcode::Send,
                _ => WcOpcode::Write,
            };
            check(&wc, opcode)?;
        }
        if self.op != Op::Send {
            return Ok(());
        }
        let due = self.placed - self.server_taken;
        self.server_taken += take(&self.server.cq, due, &mut self.completions)?;
        let completions = std::mem::take(&mut self.completions);
        for wc in &completions {
            check(wc, WcOpcode::Recv)?;
            if wc.byte_len as usize != self.size {
                return Err(format!("receive {} got {} octets", wc.wr_id, wc.byte_len));
            }
            self.post_recv(wc.wr_id as usize % self.qps())?;
        }
        self.completions = completions;
        self.completions.clear();
        Ok(())
    }

    /// Checks that the server's region holds every message up to
    /// `end`, each where it belongs, as the client's region has it.
    pub(super) fn verify(&self, end: usize) -> Result<(), String> {
        let len = end * self.size;
        let mut sent = vec![0u8; len];
        let mut landed = vec![0u8; len];
        self.client
            .region
            .buffer()
            .read_at(0, &mut sent)
            .and_then(|()| self.server.region.buffer().read_at(0, &mut landed))
            .map_err(|e| e.to_string())?;
        match sent.iter().zip(&landed).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(at) => {
                let j = at / self.size;
                Err(format!(
                    "message {j} (queue pair {}) differs at octet {}",
                    j % self.qps(),
                    at % self.size
                ))
            }
        }
    }
}

/// Receives each server queue pair keeps posted for Sends: room for its
/// share of the window and one more.
pub(super) fn receives_per_qp(window: usize, qps: usize) -> usize {
    window.div_ceil(qps) + 1
}

fn qp_of(qps: &[QueuePair], j: usize) -> &QueuePair {
    &qps[j % qps.len()]
}

/// Takes `due` completions, which `cq` is known to hold (so polling it
/// never runs the device's cores); an error if it held fewer.
fn take(cq: &CompletionQueue, due: usize, out: &mut Vec<WorkCompletion>) -> Result<usize, String> {
    if due == 0 {
        return Ok(0);
    }
    match cq.poll(out, due) {
        taken if taken == due => Ok(taken),
        taken => Err(format!(
            "{due} completions were due, the queue held {taken}"
        )),
    }
}

fn check(wc: &WorkCompletion, opcode: WcOpcode) -> Result<(), String> {
    if wc.status != WcStatus::Success || wc.opcode != opcode {
        return Err(format!(
            "message {}: {:?} {:?}, not a successful {opcode:?}",
            wc.wr_id, wc.opcode, wc.status
        ));
    }
    Ok(())
}
