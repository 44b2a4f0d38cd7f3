//! Timer expiries: retransmission (RFC 6298 section 5 with RFC 5681's
//! loss window, RFC 6675 section 5.1's recovery point, RFC 9293 section
//! 3.8.3's give-up threshold and F-RTO's first step, RFC 5682, in
//! `frto.rs`), delayed ACK, persist (zero-window
//! probes and the RFC 5044 A.1 window exception),
//! keep-alive (RFC 9293 section 3.8.4), the FIN-WAIT-2 timeout (beyond RFC
//! 9293 section 3.10.7.4, like Linux's `tcp_fin_timeout`), the end of
//! TIME-WAIT, the tail loss probe (RFC 8985 section 7, `probe.rs`) and
//! the linger after a close ([`Connection::set_linger`]).

use super::{Connection, Event, State};
use crate::tcp::recovery::congestion::Congestion;
use crate::tcp::recovery::spurious::Episode;
use crate::tcp::timers::time::{Duration, Instant};
use crate::tcp::timers::timer::TimerKind;

impl Connection {
    /// Handles every timer due at `now`; then call
    /// [`Connection::poll_transmit`].
    pub fn on_timer(&mut self, now: Instant) {
        while let Some(kind) = self.timers.take_expired(now) {
            match kind {
                TimerKind::Retransmit => self.on_retransmit_timeout(now),
                TimerKind::DelayedAck => self.send_ack = true,
                TimerKind::Persist => self.on_persist_timeout(now),
                TimerKind::KeepAlive => self.on_keep_alive_timeout(now),
                TimerKind::FinWait2 => self.on_fin_wait2_timeout(now),
                TimerKind::TimeWait => self.terminate(None),
                TimerKind::TailProbe => self.on_tail_probe_timeout(),
                TimerKind::Linger => self.reset(Some(Event::TimedOut)),
            }
        }
    }

    fn on_retransmit_timeout(&mut self, now: Instant) {
        match self.state {
            State::SynSent | State::SynReceived => {
                if self.syn_transmissions > self.config.max_syn_retransmits {
                    self.terminate(Some(Event::TimedOut));
                } else {
                    self.rtt.back_off();
                    self.send_syn = true;
                }
            }
            State::Closed | State::TimeWait => {}
            _ if self.flight.is_empty() => {}
            _ => {
                self.retries += 1;
                if self.retries > self.config.max_retransmits {
                    self.terminate(Some(Event::TimedOut));
                    return;
                }
                self.stats.timeouts += 1;
                let prior = self.cc.clone();
                self.cc.on_timeout(self.flight_size());
                self.note_timeout_episode(&prior);
                self.tail_probe = None;
                // Outside recovery, a threshold that held back a fast
                // retransmit the default would have made is dropped.
                let fast_recovery = self.recover.is_some();
                if !fast_recovery {
                    self.reordering.timed_out(self.flight.sacked());
                }
                self.mark_timed_out(now, prior, fast_recovery);
                self.recover = None;
                self.timeout_recover = Some(self.nxt_seqpos());
                self.dupacks = 0;
                self.rtt.back_off();
                self.timers.set(TimerKind::Retransmit, now + self.rtt.rto());
            }
        }
    }

    /// A timeout with congestion state `prior` before it, whose
    /// retransmissions D-SACKs may show needless (RFC 3708; SACK only):
    /// one before the recovery from the last timeout ended joins its
    /// episode, any other starts one, replacing a fast recovery's (no
    /// undo of a fast recovery after a timeout).
    fn note_timeout_episode(&mut self, prior: &Congestion) {
        self.episode = match self.episode.take() {
            Some(mut episode) if self.timeout_recover.is_some() => {
                episode.timed_out_again();
                Some(episode)
            }
            _ => self
                .opts
                .sack
                .then(|| Episode::timed_out(prior.clone(), self.flight.len())),
        };
    }

    /// Nothing is in flight and the window is closed, or below the next
    /// record: probe a zero window, split the record otherwise.
    fn on_persist_timeout(&mut self, now: Instant) {
        if !self.flight.is_empty() || self.snd_nxt >= self.send.end() {
            return;
        }
        if self.snd_wnd == 0 {
            self.send_probe = true;
            self.stats.window_probes += 1;
            self.persist_probes += 1;
            let interval = self.persist_interval();
            self.timers.set(TimerKind::Persist, now + interval);
        } else {
            self.force_split = true;
        }
    }

    /// The RTO doubled for each unanswered probe, up to the maximum.
    pub(super) fn persist_interval(&self) -> Duration {
        let mut interval = self.rtt.rto();
        for _ in 0..self.persist_probes.min(16) {
            interval = interval.doubled();
        }
        interval.min(self.config.rto_max)
    }

    /// The peer stayed silent in FIN-WAIT-2 for the configured time: reset
    /// and report a time-out. A segment from it pushes the deadline back.
    /// (Leaving FIN-WAIT-2 clears the timers, so the state needs no check.)
    fn on_fin_wait2_timeout(&mut self, now: Instant) {
        let Some(timeout) = self.config.fin_wait2_timeout else {
            return;
        };
        let quiet_until = self.last_heard + timeout;
        if now < quiet_until {
            self.timers.set(TimerKind::FinWait2, quiet_until);
        } else {
            self.reset(Some(Event::TimedOut));
        }
    }

    fn on_keep_alive_timeout(&mut self, now: Instant) {
        let Some(keep_alive) = self.config.keep_alive else {
            return;
        };
        if !matches!(self.state, State::Established | State::CloseWait) {
            return;
        }
        let quiet_since = self.last_heard + keep_alive.idle;
        if self.keepalive_sent == 0 && now < quiet_since {
            self.timers.set(TimerKind::KeepAlive, quiet_since);
            return;
        }
        if self.keepalive_sent >= keep_alive.probes {
            self.terminate(Some(Event::TimedOut));
            return;
        }
        self.keepalive_sent += 1;
        self.stats.keepalive_probes += 1;
        self.send_probe = true;
        self.timers
            .set(TimerKind::KeepAlive, now + keep_alive.interval);
    }
}
