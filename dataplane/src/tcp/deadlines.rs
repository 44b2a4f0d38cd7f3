//! The timers of the connections a core holds: each connection reports its
//! next deadline (RFC 9293 section 3.8's timers, through
//! `Connection::poll_at`) and sits in a timing wheel slot, so a core runs
//! the timers that are due without scanning the others.
//!
//! Entries are lazy: a connection whose deadline moved later is found
//! early, runs no timer, and is queued again at its new deadline. A
//! deadline that moved earlier gets an entry of its own and leaves the
//! later one behind; only the entry at the flow's queued deadline (its
//! `scheduled`) is live, so the ones left behind expire without running
//! anything and without queueing the flow again.

use crate::net::FourTuple;
use uwarp_stack::tcp::{Duration, Instant, TimerWheel};

/// The wheel's resolution: finer than any TCP timer needs (delayed ACKs
/// wait 1 ms, the RTO is at least 5 ms by default).
const TICK: Duration = Duration::from_micros(100);

/// Slots: one revolution covers about 400 ms; later deadlines wait in
/// their slot for their round.
const SLOTS: usize = 4096;

/// Connections by the time their timers are next due.
#[derive(Debug)]
pub struct Deadlines {
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
    pub fn schedule(
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

    /// Moves the entries due at `now` into `out`; a caller acts on an entry
    /// only when [`Due::claim`] says it is the flow's live one.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<Due>) {
        self.wheel
            .expire(now, |tuple, at| out.push(Due { tuple, at }));
    }
}

/// An expired entry: a connection and the deadline it was queued at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The connection.
    pub tuple: FourTuple,
    /// The deadline of the entry.
    at: Instant,
}

impl Due {
    /// Whether this is the live entry of a flow whose queued deadline is
    /// `*scheduled`; if so the flow has no entry left and `*scheduled`
    /// becomes `None`, so its next deadline is queued. An entry left
    /// behind by an earlier deadline claims nothing: the flow is still
    /// queued at that deadline, or ran it already.
    pub fn claim(&self, scheduled: &mut Option<Instant>) -> bool {
        let live = *scheduled == Some(self.at);
        if live {
            *scheduled = None;
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;

    const FLOW: FourTuple = FourTuple {
        local_ip: Ipv4Address::new(10, 0, 0, 1),
        local_port: 4791,
        remote_ip: Ipv4Address::new(10, 0, 0, 2),
        remote_port: 50000,
    };

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// Expires at `now` and claims for a flow whose record is `scheduled`;
    /// returns how many entries were live.
    fn fire(deadlines: &mut Deadlines, now: Instant, scheduled: &mut Option<Instant>) -> usize {
        let mut due = Vec::new();
        deadlines.expire(now, &mut due);
        due.iter().filter(|entry| entry.claim(scheduled)).count()
    }

    #[test]
    fn an_entry_left_behind_runs_nothing() {
        let mut deadlines = Deadlines::default();
        let mut scheduled = None;
        deadlines.schedule(FLOW, Some(at(10)), &mut scheduled);
        // The deadline moves earlier: a second entry, the first left behind.
        deadlines.schedule(FLOW, Some(at(5)), &mut scheduled);
        assert_eq!(scheduled, Some(at(5)));
        assert_eq!(fire(&mut deadlines, at(5), &mut scheduled), 1);
        assert_eq!(scheduled, None);
        // The flow ran its timer and queues its next deadline.
        deadlines.schedule(FLOW, Some(at(20)), &mut scheduled);
        assert_eq!(
            fire(&mut deadlines, at(10), &mut scheduled),
            0,
            "left behind"
        );
        assert_eq!(scheduled, Some(at(20)), "still queued at its deadline");
        assert_eq!(fire(&mut deadlines, at(20), &mut scheduled), 1);
        assert_eq!(deadlines.wheel.len(), 0);
    }

    /// Regression: every expired entry used to clear the flow's record, so
    /// an entry left behind queued the flow a second time, and the copies
    /// multiplied while the connection ran: a bulk transfer on the DPDK
    /// loopback kept hundreds of entries for its one flow and grew by
    /// about 20 MB a second.
    #[test]
    fn a_flow_keeps_at_most_two_entries() {
        let mut deadlines = Deadlines::default();
        let mut scheduled = None;
        for round in 0..1000u64 {
            let now = round * 10;
            // Armed later, then earlier (the RTO, then a tail loss probe).
            deadlines.schedule(FLOW, Some(at(now + 8)), &mut scheduled);
            deadlines.schedule(FLOW, Some(at(now + 3)), &mut scheduled);
            assert!(
                deadlines.wheel.len() <= 2,
                "round {round}: {}",
                deadlines.wheel.len()
            );
            assert_eq!(fire(&mut deadlines, at(now + 3), &mut scheduled), 1);
            // The flow's deadline moved: the entry at now + 8 claims nothing.
            deadlines.schedule(FLOW, Some(at(now + 9)), &mut scheduled);
            assert_eq!(fire(&mut deadlines, at(now + 8), &mut scheduled), 0);
            assert_eq!(fire(&mut deadlines, at(now + 9), &mut scheduled), 1);
        }
        assert_eq!(deadlines.wheel.len(), 0);
    }
}
