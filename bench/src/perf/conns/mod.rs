//! `uwarp-perf conns`: many established connections on one dataplane
//! core, and what each costs. For each connection count of a sweep, two
//! uwarp devices in this process (a net_ring pair, one dataplane core
//! each, cores stepped inline) set up that many iWARP connections (TCP
//! plus MPA revision 2 with a Write RTR), move small RDMA Writes or Sends
//! round-robin over all of them, check every message landed where it
//! belongs, and close them all. It reports:
//!
//! - setup time per connection (connections made one after another);
//! - resident memory per connection, after setup and after each
//!   connection has carried traffic (both ends, so two connection states
//!   each);
//! - the data phase's cost: nanoseconds per frame the cores handled and
//!   per message, and messages per second, after a warm-up round of one
//!   message per connection. One thread runs both ends in that phase, so
//!   its cost is the stack's per-packet work with nothing else in
//!   between; `measured_phase` is the function to count instructions in
//!   (`valgrind --tool=callgrind --collect-atstart=no
//!   --toggle-collect='*measured_phase*'`), which needs no quiet machine;
//! - what one poll of both ends costs once every connection is quiet
//!   (`idle_phase`, for instruction counts likewise).
//!
//! Once the connections are up it says so on stderr and, when asked,
//! keeps polling for a while before the data phase: a profiler attached
//! then (`callgrind_control -i on` under `valgrind --instr-atstart=no`,
//! which runs the long set-up uninstrumented) sees the whole data phase.
//!
//! The modules:
//!
//! - `pair.rs`: the two devices, and the process's resident memory;
//! - `setup.rs`: each end's resources, connecting and closing them all;
//! - `traffic.rs`: the data phase and the check of every message;
//! - `idle.rs`: the idle polls;
//! - `report.rs`: the table and the JSON.

mod idle;
mod pair;
mod report;
mod setup;
mod traffic;

use std::time::Duration;

use idle::{idle, poll_for};
use pair::{resident, Pair};
use setup::{close_all, connect_all, End};
use traffic::{receives_per_qp, Traffic};

use super::transport::pin;
use super::Op;
use crate::tcp::pattern;

pub use report::{to_json, to_text};

/// The pattern seed of the client's messages.
const SEED: u64 = 0x636f6e6e73;

/// Completion queue entries beyond what a run can have queued at once.
const CQ_SPARE: usize = 64;

/// Polls of both ends in the idle phase.
const IDLE_POLLS: usize = 10_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct ConnsRun {
    /// Connection counts, one run each.
    pub counts: Vec<usize>,
    /// Messages in the measured phase (after one per connection to warm
    /// up).
    pub messages: usize,
    /// Octets per message.
    pub size: usize,
    /// RDMA Write or Send.
    pub op: Op,
    /// Messages on their way at once, over all connections.
    pub window: usize,
    /// Octets of every connection's TCP send queue, and of its
    /// reassembly buffer.
    pub buffer: usize,
    /// Ask for MPA CRCs.
    pub crc: bool,
    /// How long to keep polling once every connection is up, before the
    /// data phase: time to attach a profiler.
    pub pause: Duration,
}

/// What one connection count measured.
#[derive(Debug, Clone)]
pub struct ConnsResult {
    /// Connections.
    pub connections: usize,
    /// Setting them all up.
    pub setup: Duration,
    /// Resident memory per connection once all were set up, in octets.
    pub resident_setup: i64,
    /// Resident memory per connection once each carried a message.
    pub resident_traffic: i64,
    /// Resident memory per connection after the measured phase: what the
    /// rings kept of the traffic.
    pub resident_measured: i64,
    /// The measured phase.
    pub measured: Phase,
    /// How long one poll of both ends takes once every connection is
    /// quiet.
    pub idle_poll: Duration,
    /// Closing them all.
    pub close: Duration,
}

/// What a data phase did.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// Messages moved.
    pub messages: usize,
    /// Frames (and commands) both devices' cores handled.
    pub frames: u64,
    /// How long it took.
    pub elapsed: Duration,
}

/// Runs every connection count of `run`, in order, each on a thread of
/// its own pinned to the first CPU (the server accepts on the second
/// during setup).
pub fn run(run: &ConnsRun) -> Result<Vec<ConnsResult>, String> {
    if run.op == Op::Read {
        return Err("conns moves Writes or Sends, not Reads".into());
    }
    if run.size == 0 || run.window == 0 || run.counts.contains(&0) {
        return Err("size, window and every connection count must be positive".into());
    }
    run.counts
        .iter()
        .map(|&count| {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        pin(0);
                        run_count(run, count).map_err(|e| format!("{count} connections: {e}"))
                    })
                    .join()
                    .unwrap_or_else(|_| Err("the run's thread panicked".into()))
            })
        })
        .collect()
}

fn run_count(run: &ConnsRun, count: usize) -> Result<ConnsResult, String> {
    let pair = Pair::open(run.buffer)?;
    let total = count + run.messages;
    let len = total
        .checked_mul(run.size)
        .ok_or("the messages do not fit in memory")?;
    let mut client = End::new(&pair.client, len, run.window + CQ_SPARE)?;
    let flushed = match run.op {
        Op::Send => count * receives_per_qp(run.window, count),
        _ => 0,
    };
    let mut server = End::new(&pair.server, len, run.window + flushed + CQ_SPARE)?;
    client
        .region
        .buffer()
        .write_at(0, &pattern(len, SEED))
        .map_err(|e| e.to_string())?;
    let before = resident();
    client.create_qps(&pair.client, count);
    server.create_qps(&pair.server, count);
    let setup = connect_all(&pair, &client, &server, run.crc)?;
    // Setting up thousands takes seconds: say so before the data phase
    // (this also tells a profiler attached from outside when to start).
    eprintln!(
        "conns: {count} connections up in {:.2} s",
        setup.as_secs_f64()
    );
    poll_for(&pair, run.pause);
    let resident_setup = per_connection(resident(), before, count);
    let mut traffic = Traffic::new(&pair, &client, &server, run.op, run.size, run.window)?;
    traffic.run_to(count)?;
    let resident_traffic = per_connection(resident(), before, count);
    let measured = measured_phase(&mut traffic, total)?;
    let resident_measured = per_connection(resident(), before, count);
    traffic.verify(total)?;
    let idle_poll = idle(&pair, IDLE_POLLS)? / IDLE_POLLS as u32;
    let close = close_all(&pair, &client, &server)?;
    Ok(ConnsResult {
        connections: count,
        setup,
        resident_setup,
        resident_traffic,
        resident_measured,
        measured,
        idle_poll,
        close,
    })
}

/// The measured phase: every message up to `end`, round-robin. A
/// function of its own so that instruction counts can be limited to it.
#[inline(never)]
fn measured_phase(traffic: &mut Traffic<'_>, end: usize) -> Result<Phase, String> {
    traffic.run_to(end)
}

fn per_connection(now: u64, before: u64, count: usize) -> i64 {
    (now as i64 - before as i64) / count as i64
}
