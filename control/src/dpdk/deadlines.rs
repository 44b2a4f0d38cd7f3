//! The queue of connection deadlines a core keeps, so that it runs the
//! timers of the connections that are due without scanning the others
//! (each connection reports its next deadline, RFC 9293 section 3.8's
//! timers, through `Connection::poll_at`).
//!
//! Entries are lazy: a connection whose deadline moved later is found
//! early, runs no timer, and is queued again at its new deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use uwarp_dataplane::net::FourTuple;
use uwarp_stack::tcp::Instant;

/// Connections by the time their timers are next due.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, FourTuple)>>,
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
                self.heap.push(Reverse((at, tuple)));
                *scheduled = Some(at);
            }
        }
    }

    /// Moves every connection due at `now` into `out`.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Vec<FourTuple>) {
        while let Some(Reverse((at, tuple))) = self.heap.peek().copied() {
            if at > now {
                break;
            }
            self.heap.pop();
            out.push(tuple);
        }
    }
}
