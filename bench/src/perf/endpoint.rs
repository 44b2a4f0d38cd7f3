//! One side of a run: its queue pairs, their completion queue, its
//! memory region, the peer's region, and the control channel of
//! [`super::protocol`].
//!
//! The region is laid out as the protocol's [`Region`] says: the sink
//! (where the peer's Writes, this side's Reads and every received Send
//! land: every receive is posted for the whole sink, as perftest does),
//! the source (this side's pattern, which Writes and Sends carry and the
//! peer's Reads read), then the mailbox. Receives are posted again as
//! soon as they complete, so each queue pair always has the same number
//! outstanding.

use std::time::{Duration, Instant};

use uwarp::{
    Access, CompletionQueue, Device, MemoryRegion, Payload, QpCaps, QpCounters, QpInit, QpState,
    QueuePair, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion,
};

use super::protocol::{mailbox_slots, Control, Region, SLOT};
use super::Op;
use crate::tcp::pattern;

/// How long a side waits for anything before it declares the run stuck.
pub const STALL: Duration = Duration::from_secs(20);

/// The [`STALL`] deadline of a spinning wait, read from the clock only
/// once every [`StallWatch::POLLS_PER_LOOK`] polls: a clock read costs
/// about as much as an idle poll of the library, and a measuring loop
/// that read it at every turn would add its own cost to the latency it
/// measures (perftest's loops read no clock while they wait).
pub struct StallWatch {
    deadline: Instant,
    polls: u32,
}

impl StallWatch {
    const POLLS_PER_LOOK: u32 = 1024;

    /// Starts the [`STALL`] clock now.
    pub fn start() -> Self {
        StallWatch {
            deadline: Instant::now() + STALL,
            polls: 0,
        }
    }

    /// Counts one poll; whether the deadline passed (seen at most
    /// [`Self::POLLS_PER_LOOK`] polls late).
    pub fn stalled(&mut self) -> bool {
        self.polls += 1;
        if self.polls < Self::POLLS_PER_LOOK {
            return false;
        }
        self.polls = 0;
        Instant::now() >= self.deadline
    }
}

/// The pattern seed of the client's source.
pub const CLIENT_SEED: u64 = 0x636c69656e74;
/// The pattern seed of the server's source.
pub const SERVER_SEED: u64 = 0x736572766572;

/// Work request identifiers: the kind in the high octet, the queue pair
/// in the low one.
const DATA: u64 = 1 << 56;
const RECV: u64 = 2 << 56;
const CONTROL: u64 = 3 << 56;
const KIND: u64 = 0xFF << 56;

/// What one of a side's completions means.
#[derive(Debug)]
pub enum Event {
    /// A signaled Write, Read or Send of queue pair `qp` completed.
    Sent {
        /// The queue pair.
        qp: usize,
    },
    /// A Send of the run arrived on queue pair `qp`.
    Arrived {
        /// The queue pair.
        qp: usize,
        /// Its length.
        len: u32,
    },
    /// A control message arrived (on queue pair 0).
    Control(Control),
}

/// How a side's resources are sized.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Queue pairs.
    pub qps: usize,
    /// The largest message.
    pub max: usize,
    /// Receives kept posted on each queue pair.
    pub receives: usize,
    /// Signaled work requests outstanding on each queue pair at most.
    pub sends: usize,
    /// Messages up to this long are posted inline.
    pub inline: usize,
}

impl Shape {
    /// Completion queue entries: room for every completion the queue
    /// pairs can have at once, every posted receive flushed at the close
    /// included. (A full queue makes the transport hold completions back
    /// until the application polls, and a closing side stops polling.)
    fn cq_depth(&self) -> usize {
        self.qps * (self.receives + self.sends) + 64
    }
}

/// One side's resources before its queue pairs connect.
pub struct Resources<'d> {
    device: &'d Device,
    cq: CompletionQueue,
    /// The queue pairs, to connect or accept.
    pub qps: Vec<QueuePair>,
    region: MemoryRegion,
    shape: Shape,
}

impl<'d> Resources<'d> {
    /// Allocates the region and the queue pairs, and posts every receive
    /// (the first control message may arrive as soon as a queue pair is
    /// connected).
    pub fn new(device: &'d Device, shape: Shape) -> Result<Self, String> {
        let pd = device.alloc_pd().map_err(|e| e.to_string())?;
        let cq = device.create_cq(shape.cq_depth());
        let caps = QpCaps {
            max_inline_data: shape.inline.max(SLOT),
            ..QpCaps::default()
        };
        let qps: Vec<QueuePair> = (0..shape.qps)
            .map(|_| {
                device.create_qp(
                    &pd,
                    QpInit {
                        caps,
                        ..QpInit::new(&cq)
                    },
                )
            })
            .collect();
        let len = 2 * shape.max + mailbox_slots(shape.qps) * SLOT;
        let region = pd
            .alloc_mr(len, Access::ALL)
            .map_err(|e| format!("cannot register {len} octets: {e}"))?;
        let resources = Resources {
            device,
            cq,
            qps,
            region,
            shape,
        };
        for qp in 0..shape.qps {
            for _ in 0..shape.receives {
                resources.post_recv(qp)?;
            }
        }
        Ok(resources)
    }

    /// This side's region, for the peer.
    pub fn region(&self) -> Region {
        Region {
            addr: self.region.addr(),
            rkey: self.region.rkey(),
            max: self.shape.max as u64,
        }
    }

    fn post_recv(&self, qp: usize) -> Result<(), String> {
        let wr = RecvWr {
            wr_id: RECV | qp as u64,
            sgl: vec![self.region.sge(0, self.shape.max as u32)],
        };
        self.qps[qp].post_recv(wr).map_err(|e| e.to_string())
    }

    /// The side, connected to a peer whose region is `remote`, waiting
    /// as `waiting` says.
    pub fn connected(self, remote: Region, waiting: Waiting) -> Endpoint<'d> {
        Endpoint {
            slots: mailbox_slots(self.shape.qps),
            resources: self,
            remote,
            waiting,
            sent: 0,
            received: 0,
            closed: false,
        }
    }
}

/// How a side's measuring thread waits for the next event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// It runs the device's cores (inline), so waiting spins through them.
    Inline,
    /// The cores have threads: it sleeps until a completion for the
    /// bandwidth loops, and yields its CPU between polls in the latency
    /// loops' spins.
    Yield,
    /// The cores have threads, and it spins without yielding, polling the
    /// completion queue or the memory a Write lands in, as perftest's
    /// loops do (`--spin`): the shape of a verbs application.
    Spin,
}

impl Waiting {
    /// How a side waits whose thread runs the device's cores (`inline`),
    /// or, when they have threads, that spins (`spin`, `--spin`) or not.
    pub fn of(inline: bool, spin: bool) -> Waiting {
        match (inline, spin) {
            (true, _) => Waiting::Inline,
            (false, false) => Waiting::Yield,
            (false, true) => Waiting::Spin,
        }
    }
}

/// One side of a connected run.
pub struct Endpoint<'d> {
    resources: Resources<'d>,
    remote: Region,
    waiting: Waiting,
    slots: usize,
    /// Control messages sent and received.
    sent: u32,
    received: u32,
    closed: bool,
}

impl Endpoint<'_> {
    /// Queue pairs.
    pub fn qps(&self) -> usize {
        self.resources.qps.len()
    }

    /// What this side's queue pairs carried, together.
    pub fn counters(&self) -> QpCounters {
        let qps = self.resources.qps.iter();
        qps.map(QueuePair::counters)
            .fold(QpCounters::default(), |a, b| a + b)
    }

    /// Receives kept posted on each queue pair.
    pub fn receives(&self) -> usize {
        self.resources.shape.receives
    }

    /// Sends a control message to the peer: a Write into its mailbox and
    /// the doorbell behind it.
    pub fn send_control(&mut self, message: &Control) -> Result<(), String> {
        self.sent = self.sent.wrapping_add(1);
        let slot = self.sent as usize % self.slots;
        let write = SendOp::Write {
            remote_addr: self.remote.slot(slot),
            rkey: self.remote.rkey,
        };
        let write = SendWr {
            signaled: false,
            ..SendWr::new(CONTROL, write, Payload::Inline(message.encode(self.sent)))
        };
        let doorbell = SendWr {
            signaled: false,
            solicited: true,
            ..SendWr::new(CONTROL, SendOp::Send, Payload::Inline(Vec::new()))
        };
        let qp = &self.resources.qps[0];
        qp.post_send(write)
            .and_then(|()| qp.post_send(doorbell))
            .map_err(|e| format!("cannot send a control message: {e}"))
    }

    /// Posts one message of the run on queue pair `qp`: a Write of the
    /// source into the peer's sink, a Read of the peer's source into the
    /// sink, or a Send of the source; signaled or not.
    pub fn post(&self, qp: usize, op: Op, size: usize, signaled: bool) -> Result<(), String> {
        let region = &self.resources.region;
        let max = self.resources.shape.max;
        let source = region.sge(max, size as u32);
        let inline = || -> Result<Payload, String> {
            if op != Op::Read && size <= self.resources.shape.inline {
                let mut data = vec![0u8; size];
                region
                    .buffer()
                    .read_at(max, &mut data)
                    .map_err(|e| e.to_string())?;
                Ok(Payload::Inline(data))
            } else {
                Ok(Payload::Sgl(vec![source]))
            }
        };
        let (op, payload) = match op {
            Op::Write => (
                SendOp::Write {
                    remote_addr: self.remote.addr,
                    rkey: self.remote.rkey,
                },
                inline()?,
            ),
            Op::Read => (
                SendOp::Read {
                    remote_addr: self.remote.source(),
                    rkey: self.remote.rkey,
                },
                Payload::Sgl(vec![region.sge(0, size as u32)]),
            ),
            Op::Send => (SendOp::Send, inline()?),
        };
        let wr = SendWr {
            signaled,
            ..SendWr::new(DATA | qp as u64, op, payload)
        };
        self.resources.qps[qp]
            .post_send(wr)
            .map_err(|e| e.to_string())
    }

    /// The next event. The run has stalled when [`STALL`] passes with no
    /// completion and no FPDU sent or received on any queue pair: a
    /// server waiting out a long run of one-sided Writes or Reads sees no
    /// completion until the client's End, only FPDUs moving.
    pub fn next(&mut self) -> Result<Event, String> {
        let mut carried = self.fpdus_carried();
        loop {
            let wc = match self.waiting {
                Waiting::Spin => self.spin_for_completion(),
                Waiting::Inline | Waiting::Yield => self.resources.cq.poll_blocking(STALL),
            };
            if let Some(wc) = wc {
                return self.event(wc);
            }
            let now = self.fpdus_carried();
            if now == carried {
                return Err(format!(
                    "nothing happened for {} s: the run stalled; this side's queue pairs: {:?}",
                    STALL.as_secs(),
                    self.counters()
                ));
            }
            carried = now;
        }
    }

    /// Polls for a completion for up to [`STALL`].
    fn spin_for_completion(&self) -> Option<WorkCompletion> {
        let mut watch = StallWatch::start();
        loop {
            if let Some(wc) = self.resources.cq.poll_one() {
                return Some(wc);
            }
            if watch.stalled() {
                return None;
            }
        }
    }

    /// FPDUs sent and received on every queue pair so far.
    fn fpdus_carried(&self) -> u64 {
        let counters = self.counters();
        counters.fpdus_sent + counters.fpdus_received
    }

    /// The next event if there is one now (running the cores once, for a
    /// side that runs them).
    pub fn try_next(&mut self) -> Result<Option<Event>, String> {
        match self.resources.cq.poll_one() {
            Some(wc) => self.event(wc).map(Some),
            None => Ok(None),
        }
    }

    /// The next control message other than a credit, which the caller
    /// no longer needs.
    pub fn control(&mut self) -> Result<Control, String> {
        loop {
            match self.next()? {
                Event::Control(Control::Credit { .. }) => {}
                Event::Control(message) => return Ok(message),
                other => return Err(format!("expected a control message, got {other:?}")),
            }
        }
    }

    fn event(&mut self, wc: WorkCompletion) -> Result<Event, String> {
        let qp = (wc.wr_id & 0xFF) as usize;
        if wc.status != WcStatus::Success {
            return Err(self.failure(&wc));
        }
        match wc.wr_id & KIND {
            RECV => {
                self.resources.post_recv(qp)?;
                if !wc.solicited {
                    return Ok(Event::Arrived {
                        qp,
                        len: wc.byte_len,
                    });
                }
                if qp != 0 || wc.byte_len != 0 {
                    return Err(format!(
                        "a doorbell of {} octets on queue pair {qp}",
                        wc.byte_len
                    ));
                }
                self.read_control().map(Event::Control)
            }
            _ => Ok(Event::Sent { qp }),
        }
    }

    /// The control message of the doorbell that just rang.
    fn read_control(&mut self) -> Result<Control, String> {
        self.received = self.received.wrapping_add(1);
        let slot = self.received as usize % self.slots;
        let mut bytes = [0u8; SLOT];
        let at = 2 * self.resources.shape.max + slot * SLOT;
        self.resources
            .region
            .buffer()
            .read_at(at, &mut bytes)
            .map_err(|e| e.to_string())?;
        let (seq, message) = Control::decode(&bytes)?;
        if seq != self.received {
            return Err(format!(
                "control message {} was overwritten by {seq} before it was read",
                self.received
            ));
        }
        Ok(message)
    }

    /// Why a work request failed, in words.
    fn failure(&self, wc: &WorkCompletion) -> String {
        if wc.status != WcStatus::WrFlushError {
            return format!("a work request failed: {:?} ({:?})", wc.status, wc.opcode);
        }
        let terminate = self
            .resources
            .qps
            .iter()
            .find_map(QueuePair::take_terminate);
        match terminate {
            Some(event) => format!("the connection was terminated: {event:?}"),
            None => "the peer closed the connection".into(),
        }
    }

    /// Writes `size` octets of the pattern of `seed` at the start of the
    /// source (a latency run's stamps overwrite its end; this puts the
    /// pattern back).
    pub fn fill_source(&self, size: usize, seed: u64) -> Result<(), String> {
        self.write(self.resources.shape.max, &pattern(size, seed))
    }

    /// Zeroes the first `size` octets of the sink.
    pub fn clear_sink(&self, size: usize) -> Result<(), String> {
        self.write(0, &vec![0u8; size])
    }

    /// Whether the first `len` octets of the sink are the pattern of
    /// `seed`; if not, where they first differ.
    pub fn check_sink(&self, len: usize, seed: u64) -> Result<Option<usize>, String> {
        let got = self.read(0, len)?;
        Ok(got
            .iter()
            .zip(pattern(len, seed))
            .position(|(a, b)| *a != b))
    }

    /// The stamp of `round` written at the end of the source's first
    /// `size` octets.
    pub fn stamp_source(&self, size: usize, round: u64) -> Result<(), String> {
        let tail = stamp(round, size);
        self.write(self.resources.shape.max + size - tail.len(), &tail)
    }

    /// Whether the end of the sink's first `size` octets holds the stamp
    /// of `round` (read without allocating: latency loops spin on it).
    pub fn sink_stamped(&self, size: usize, round: u64) -> Result<bool, String> {
        let width = stamp_len(size);
        let mut seen = [0u8; 8];
        self.resources
            .region
            .buffer()
            .read_at(size - width, &mut seen[..width])
            .map_err(|e| e.to_string())?;
        Ok(seen[..width] == round.to_le_bytes()[..width])
    }

    fn write(&self, at: usize, data: &[u8]) -> Result<(), String> {
        self.resources
            .region
            .buffer()
            .write_at(at, data)
            .map_err(|e| e.to_string())
    }

    fn read(&self, at: usize, len: usize) -> Result<Vec<u8>, String> {
        let mut data = vec![0u8; len];
        self.resources
            .region
            .buffer()
            .read_at(at, &mut data)
            .map_err(|e| e.to_string())?;
        Ok(data)
    }

    /// Whether this side spins as perftest does (`--spin`).
    pub fn spins(&self) -> bool {
        self.waiting == Waiting::Spin
    }

    /// Lets other threads run between two polls, on a side that yields
    /// (a side that runs its cores ran them in the poll; one that spins
    /// goes on).
    pub fn idle(&self) {
        if self.waiting == Waiting::Yield {
            std::thread::yield_now();
        }
    }

    /// Closes the connections: the client disconnects (`initiate`), the
    /// server waits for that; either gives up after a few seconds. The
    /// receives the close flushes are taken off the completion queue.
    pub fn close(mut self, initiate: bool) {
        let qps = &self.resources.qps;
        if initiate {
            qps.iter().for_each(QueuePair::disconnect);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while qps.iter().any(|qp| qp.state() != QpState::Error) && Instant::now() < deadline {
            if self.resources.cq.poll_one().is_none() {
                self.idle();
            }
        }
        qps.iter()
            .filter(|qp| qp.state() != QpState::Error)
            .for_each(QueuePair::disconnect);
        while self.resources.cq.poll_one().is_some() {}
        self.closed = true;
    }
}

impl Drop for Endpoint<'_> {
    /// A run that failed resets its connections, so the peer hears of it
    /// at once (on a side that runs its cores, only if they run again).
    fn drop(&mut self) {
        if !self.closed {
            for qp in &self.resources.qps {
                if qp.state() != QpState::Error {
                    qp.abort();
                }
            }
            self.resources.device.progress();
        }
    }
}

/// The round number the last octets of a latency message carry (one
/// octet for a 1-octet message, up to eight).
fn stamp(round: u64, size: usize) -> Vec<u8> {
    round.to_le_bytes()[..stamp_len(size)].to_vec()
}

/// Octets of a `size`-octet message its stamp takes.
pub fn stamp_len(size: usize) -> usize {
    size.clamp(1, 8)
}
