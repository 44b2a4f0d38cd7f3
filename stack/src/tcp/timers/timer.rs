//! A connection's timers: retransmission (RFC 6298 section 5), delayed ACK
//! (RFC 9293 section 3.8.6.3), persist (zero-window probing, RFC 9293
//! section 3.8.6.1), keep-alive (section 3.8.4), the FIN-WAIT-2 timeout
//! (section 3.10.7.4 sets none; Linux's `tcp_fin_timeout`), TIME-WAIT
//! (section 3.6.1), the tail loss probe (RFC 8985 section 7) and the
//! linger an application may set after its close (like `SO_LINGER`'s
//! timeout, ended by a reset).
//!
//! Each connection holds one deadline per kind and reports the earliest
//! through `poll_at`, so a dataplane keeps each connection in a timing
//! wheel slot ([`crate::tcp::timers::wheel::TimerWheel`]) and never scans connections.

use crate::tcp::timers::time::Instant;

/// The timers a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// Retransmission of a SYN, FIN or data.
    Retransmit,
    /// An ACK held back.
    DelayedAck,
    /// Probing a window that is closed or below one record.
    Persist,
    /// Probing an idle peer.
    KeepAlive,
    /// The end of TIME-WAIT.
    TimeWait,
    /// Waiting too long in FIN-WAIT-2 for the peer's FIN.
    FinWait2,
    /// A tail loss probe (RFC 8985 section 7).
    TailProbe,
    /// The end of the time the application gave the close to finish.
    Linger,
}

const KINDS: [TimerKind; 8] = [
    TimerKind::Retransmit,
    TimerKind::DelayedAck,
    TimerKind::Persist,
    TimerKind::KeepAlive,
    TimerKind::TimeWait,
    TimerKind::FinWait2,
    TimerKind::TailProbe,
    TimerKind::Linger,
];

/// One optional deadline per timer kind.
#[derive(Debug, Clone, Default)]
pub struct Timers {
    deadlines: [Option<Instant>; KINDS.len()],
}

impl Timers {
    fn slot(kind: TimerKind) -> usize {
        kind as usize
    }

    /// Arms `kind` to fire at `at`.
    pub fn set(&mut self, kind: TimerKind, at: Instant) {
        self.deadlines[Self::slot(kind)] = Some(at);
    }

    /// Arms `kind` unless it is already running.
    pub fn set_if_idle(&mut self, kind: TimerKind, at: Instant) {
        self.deadlines[Self::slot(kind)].get_or_insert(at);
    }

    /// When `kind` fires, if it is running.
    pub fn deadline(&self, kind: TimerKind) -> Option<Instant> {
        self.deadlines[Self::slot(kind)]
    }

    /// Stops `kind`.
    pub fn cancel(&mut self, kind: TimerKind) {
        self.deadlines[Self::slot(kind)] = None;
    }

    /// Stops every timer.
    pub fn clear(&mut self) {
        self.deadlines = Default::default();
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Stops and returns the first timer due at `now`, if any.
    pub fn take_expired(&mut self, now: Instant) -> Option<TimerKind> {
        let kind = KINDS
            .into_iter()
            .find(|&kind| self.deadlines[Self::slot(kind)].is_some_and(|at| at <= now))?;
        self.cancel(kind);
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_and_expiry() {
        let mut timers = Timers::default();
        timers.set(TimerKind::Persist, Instant(50));
        timers.set(TimerKind::DelayedAck, Instant(20));
        timers.set_if_idle(TimerKind::DelayedAck, Instant(90));
        assert_eq!(timers.next(), Some(Instant(20)));
        assert_eq!(
            timers.take_expired(Instant(60)),
            Some(TimerKind::DelayedAck)
        );
        assert_eq!(timers.take_expired(Instant(60)), Some(TimerKind::Persist));
        assert_eq!(timers.take_expired(Instant(60)), None);
        assert_eq!(timers.next(), None);
    }
}
