//! The measuring loops, in the spirit of perftest, on one
//! [`Endpoint`] each: the client's side of a bandwidth or latency run and
//! the server's side that answers it. `uwarp-perf loopback` runs both
//! sides in one process, the two-host modes one in each.
//!
//! - [`bandwidth`]: `tx_depth` Writes, Reads or Sends outstanding on each
//!   queue pair, posted round-robin, until `-n` completed or `-D` passed.
//!   Sends also wait for the server's credits: a Send finding no receive
//!   would be a protocol error, not a slow measurement.
//! - [`absorb_sends`]: the server's side of Send bandwidth: every arrival
//!   counted and checked for length, its receive posted again, a credit
//!   sent back for every half window.
//! - [`ping`] and [`echo`]: a Write ping-pong (each side watching its
//!   sink for the peer's stamp, like `ib_write_lat`), a Send ping-pong,
//!   or RDMA Reads one at a time.

use std::time::Instant;

use hdrhistogram::Histogram;

use super::endpoint::{Endpoint, Event, StallWatch, STALL};
use super::progress::Progress;
use super::protocol::{Control, Stop, Summary};
use super::report::Latency;
use super::{Mode, Op};

/// Whether a run that started at `start` posts another message after
/// `posted`.
fn more(stop: Stop, posted: u64, start: Instant) -> bool {
    match stop {
        Stop::Iters(total) => posted < total,
        Stop::Duration(length) => start.elapsed() < length,
    }
}

fn unexpected(event: Event) -> String {
    format!("unexpected during the run: {event:?}")
}

/// The client's bandwidth run of `size`-octet `op`s, starting with
/// `credits` Sends allowed on each queue pair. It returns once every
/// message completed and queue pair 0 has a credit left for the
/// [`Control::End`] that follows.
pub fn bandwidth(
    ep: &mut Endpoint<'_>,
    op: Op,
    size: usize,
    stop: Stop,
    tx_depth: usize,
    credits: u64,
    progress: &mut Progress,
) -> Result<Summary, String> {
    let qps = ep.qps();
    let limited = op == Op::Send;
    let mut outstanding = vec![0usize; qps];
    let mut sent = vec![0u64; qps];
    let mut allowed = vec![credits; qps];
    let (mut posted, mut completed, mut next) = (0u64, 0u64, 0usize);
    let start = Instant::now();
    loop {
        while more(stop, posted, start)
            && outstanding[next] < tx_depth
            && (!limited || sent[next] < allowed[next])
        {
            ep.post(next, op, size, true)?;
            outstanding[next] += 1;
            sent[next] += 1;
            posted += 1;
            next = (next + 1) % qps;
        }
        if completed == posted && !more(stop, posted, start) {
            break;
        }
        match ep.next()? {
            Event::Sent { qp } => {
                outstanding[qp] -= 1;
                completed += 1;
                progress.update(completed);
            }
            Event::Control(Control::Credit { qp, total }) => {
                let qp = usize::from(qp);
                allowed[qp] = allowed[qp].max(total);
            }
            other => return Err(unexpected(other)),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    while limited && sent[0] >= allowed[0] {
        match ep.next()? {
            Event::Control(Control::Credit { qp: 0, total }) => allowed[0] = allowed[0].max(total),
            Event::Control(Control::Credit { .. }) => {}
            other => return Err(unexpected(other)),
        }
    }
    Ok(Summary {
        seconds,
        counts: sent,
        latency: None,
    })
}

/// The server's side of Send bandwidth: takes the client's `size`-octet
/// Sends until its [`Control::End`] has come and every queue pair has
/// received the count it names; returns what the client measured.
pub fn absorb_sends(ep: &mut Endpoint<'_>, size: usize) -> Result<Summary, String> {
    let window = ep.receives() as u64;
    let half = (window / 2).max(1);
    let mut consumed = vec![0u64; ep.qps()];
    let mut arrived = vec![0u64; ep.qps()];
    let mut end: Option<Summary> = None;
    loop {
        if let Some(summary) = &end {
            if summary.counts.len() != arrived.len() {
                return Err(format!(
                    "the client counted {} queue pairs, not {}",
                    summary.counts.len(),
                    arrived.len()
                ));
            }
            if arrived
                .iter()
                .zip(&summary.counts)
                .all(|(got, sent)| got >= sent)
            {
                break;
            }
        }
        let qp = match ep.next()? {
            Event::Arrived { qp, len } => {
                if len as usize != size {
                    return Err(format!("a Send of {len} octets arrived, not {size}"));
                }
                arrived[qp] += 1;
                qp
            }
            Event::Control(Control::End(summary)) if end.is_none() => {
                end = Some(summary);
                0
            }
            other => return Err(unexpected(other)),
        };
        // Every receive consumed was posted again: tell the client.
        consumed[qp] += 1;
        if end.is_none() && consumed[qp] % half == 0 {
            let total = window + consumed[qp];
            ep.send_control(&Control::Credit {
                qp: qp as u8,
                total,
            })?;
        }
    }
    let summary = end.expect("the loop ends after the End");
    if arrived != summary.counts {
        return Err(format!(
            "the client sent {:?} Sends per queue pair, {:?} arrived",
            summary.counts, arrived
        ));
    }
    Ok(summary)
}

/// Waits for the next event, spinning (a latency loop must not sleep).
fn spin(ep: &mut Endpoint<'_>) -> Result<Event, String> {
    let mut watch = StallWatch::start();
    loop {
        if let Some(event) = ep.try_next()? {
            return Ok(event);
        }
        if watch.stalled() {
            return Err(format!(
                "no answer for {} s: the run stalled",
                STALL.as_secs()
            ));
        }
        ep.idle();
    }
}

/// Memory reads of a spinning side (`--spin`) between two polls of its
/// completion queue while it waits for a stamp: it reads memory as
/// perftest's latency loops do, which never call the library there.
const STAMP_READS_PER_POLL: u32 = 4096;

/// Waits until the sink holds the stamp of `round` (`None`), or an
/// event comes first (the event).
fn await_stamp(ep: &mut Endpoint<'_>, size: usize, round: u64) -> Result<Option<Event>, String> {
    let mut watch = StallWatch::start();
    let reads_per_poll = if ep.spins() { STAMP_READS_PER_POLL } else { 1 };
    let mut reads = 0;
    while !ep.sink_stamped(size, round)? {
        reads += 1;
        if reads < reads_per_poll {
            continue;
        }
        reads = 0;
        if let Some(event) = ep.try_next()? {
            return Ok(Some(event));
        }
        if watch.stalled() {
            return Err(format!("round {round} never arrived: the run stalled"));
        }
        ep.idle();
    }
    Ok(None)
}

/// Checks that a Send of `len` octets that arrived in round `round` has
/// the run's size and the round's stamp.
fn check_send(ep: &Endpoint<'_>, len: u32, size: usize, round: u64) -> Result<(), String> {
    if len as usize == size && ep.sink_stamped(size, round)? {
        Ok(())
    } else {
        Err(format!(
            "round {round}: a Send of {len} octets arrived without the round's stamp"
        ))
    }
}

/// Sends the answer of `round`: the source stamped, by Write or Send,
/// unsignaled.
fn stamped(ep: &Endpoint<'_>, op: Op, size: usize, round: u64) -> Result<(), String> {
    ep.stamp_source(size, round)?;
    ep.post(0, op, size, false)
}

/// The client's latency run of `size`-octet messages.
pub fn ping(
    ep: &mut Endpoint<'_>,
    mode: Mode,
    size: usize,
    stop: Stop,
    progress: &mut Progress,
) -> Result<Summary, String> {
    let mut histogram = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let per_sample = mode.round_trips_per_sample();
    let start = Instant::now();
    let mut round = 0u64;
    while more(stop, round, start) {
        round += 1;
        let sent = Instant::now();
        match mode.op {
            Op::Write => {
                stamped(ep, Op::Write, size, round)?;
                if let Some(event) = await_stamp(ep, size, round)? {
                    return Err(unexpected(event));
                }
            }
            Op::Send => {
                stamped(ep, Op::Send, size, round)?;
                match spin(ep)? {
                    Event::Arrived { len, .. } => check_send(ep, len, size, round)?,
                    other => return Err(unexpected(other)),
                }
            }
            Op::Read => {
                ep.post(0, Op::Read, size, true)?;
                match spin(ep)? {
                    Event::Sent { .. } => {}
                    other => return Err(unexpected(other)),
                }
            }
        }
        let _ = histogram.record(sent.elapsed().as_nanos() as u64 / per_sample);
        progress.update(round);
    }
    Ok(Summary {
        seconds: start.elapsed().as_secs_f64(),
        counts: vec![round],
        latency: Some(Latency::from_histogram(&histogram)),
    })
}

/// The server's side of a Write or Send ping-pong: answers each round
/// until the client's [`Control::End`]; returns the rounds answered and
/// what the client measured.
pub fn echo(ep: &mut Endpoint<'_>, op: Op, size: usize) -> Result<(u64, Summary), String> {
    let mut round = 0u64;
    loop {
        let next = round + 1;
        let event = match op {
            Op::Write => await_stamp(ep, size, next)?,
            _ => Some(spin(ep)?),
        };
        match event {
            None => {}
            Some(Event::Arrived { len, .. }) => check_send(ep, len, size, next)?,
            Some(Event::Control(Control::End(summary))) => return Ok((round, summary)),
            Some(other) => return Err(unexpected(other)),
        }
        stamped(ep, op, size, next)?;
        round = next;
    }
}
