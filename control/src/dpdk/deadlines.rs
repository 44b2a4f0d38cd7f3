//! The timers of the connections a core holds: each connection reports its
//! next deadline (RFC 9293 section 3.8's timers, through
//! `Connection::poll_at`) and sits in a timing wheel slot, so a core runs
//! the timers that are due without scanning the others.
//!
//! Entries are lazy: a connection whose deadline moved later is found
//! early, runs no timer, and is queued again at its new deadline.

use uwarp_dataplane::net::FourTuple;
use uwarp_stack::tcp::{Duration, Instant, TimerWheel};

/// The wheel's resolution: finer than any TCP timer needs (delayed ACKs
/// wait 1 ms, the RTO is at least 5 ms by default).
const TICK: Duration = Duration::from_micros(100);

/// Slots: one revolution covers about 400 ms; later deadlines wait in
/// their slot for their round.
const SLOTS: usize = 4096;

/// Connections by the time their timers are next due.
#[derive(Debug)]
pub(crate) struct Deadlines {
    wheel: TimerWheel<FourTuple>,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            wheel: TimerWheel::new(TICK, SLOTS),
        }
    }
}

impl Deadlines {
    /// Queues `tuple` at `at` unless it is already queued at `*scheduled`
    /// or earlier; `scheduled` is the flow's own record of that.
    pub(crate) fn schedule(
        &mut self,
        tuple: FourTuple,
        at: Option<Instant>,
        scheduled: &mut Option<Instant>,
    ) {
        if let Some(at) = at {
            if scheduled.is_none_or(|queued| at < queued) {
                self.wheel.schedule(tuple, at);
                *scheduled = Some(at);
            }
        }
    }

    /// Moves every connection due at `now` into `out`.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Vec<FourTuple>) {
        self.wheel.expire(now, out);
    }
}
