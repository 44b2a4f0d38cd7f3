//! The idle phase of a `conns` run: every connection established and
//! quiet, both ends polled with nothing to receive and nothing to send.
//! What one such poll costs is what every poll pays besides its packets
//! (timers, doorbells, the control core), so it must not grow with the
//! number of connections.

use std::time::{Duration, Instant};

use super::pair::Pair;
use crate::perf::endpoint::STALL;

/// Polls in a row that found no frame before the connections count as
/// quiet (the last delayed ACKs have gone out)...
const QUIET_POLLS: usize = 1000;
/// ...and at least this long after the traffic (the timers it armed,
/// retransmission timers included, have run out).
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Waits for the connections to go quiet, then polls both ends `polls`
/// times; returns how long those polls took.
pub(super) fn idle(pair: &Pair, polls: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let mut quiet = 0;
    while quiet < QUIET_POLLS || start.elapsed() < QUIET_FOR {
        quiet = if pair.step() == 0 { quiet + 1 } else { 0 };
        if start.elapsed() > STALL {
            return Err("the connections never went quiet".into());
        }
    }
    Ok(idle_phase(pair, polls))
}

/// Polls both ends for `span`, whatever they have to do.
pub(super) fn poll_for(pair: &Pair, span: Duration) {
    let start = Instant::now();
    while start.elapsed() < span {
        pair.step();
    }
}

/// The idle polls. A function of its own so that instruction counts can
/// be limited to it.
#[inline(never)]
fn idle_phase(pair: &Pair, polls: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..polls {
        pair.step();
    }
    start.elapsed()
}
