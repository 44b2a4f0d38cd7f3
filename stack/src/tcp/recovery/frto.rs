//! F-RTO (RFC 5682): whether a retransmission timeout was spurious,
//! found out before the whole flight is resent.
//!
//! A timeout with nothing reported lost (no fast recovery, nothing SACKed)
//! may only mean that the path or the peer stalled for longer than the
//! RTO, as when a polling thread is descheduled for a few milliseconds.
//! Resending the flight (go-back-N) then sends every segment twice. F-RTO
//! resends only the first unacknowledged segment (step 1) and reads the
//! ACKs that follow:
//!
//! - step 2: the first ACK that advances SND.UNA cannot tell the
//!   retransmission's ACK from the original's; if some of the flight sent
//!   before the timeout is still unacknowledged, up to two new segments go
//!   out instead of retransmissions (the connection sends them, whatever
//!   the congestion window says);
//! - step 3: if the next ACK acknowledges, cumulatively or in a SACK block
//!   (the SACK-enhanced variant of section 3), a segment sent before the
//!   timeout and never resent, that segment arrived late rather than being
//!   lost: the timeout was spurious. A duplicate ACK, or one advancing
//!   over resent data only, shows a hole: recovery goes on as after any
//!   timeout. Other ACKs (window updates, D-SACKs) are waited past.
//!
//! Without SACK the same steps make the basic algorithm of section 2
//! (only cumulative ACKs report originals).
//!
//! Where F-RTO has no verdict, because the first ACK acknowledges all that
//! was sent before the timeout (one ACK for a whole stalled flight, or a
//! flight of one segment), the timestamp echo decides when timestamps are
//! in use: an echo older than the first retransmission's timestamp comes
//! from the original (RFC 3522's Eifel detection). That is sound here, and
//! not for fast retransmits (see [`crate::tcp::recovery::spurious`]), because an RTO
//! retransmission leaves at least one RTO, 5 ms or more, after the segment
//! it repeats was sent: many ticks of the 1 ms timestamp clock. Nothing
//! can be missing behind such an ACK, so the echo never hides a loss that
//! F-RTO would have found.
//!
//! A spurious timeout is undone with the response of RFC 4015 section 3
//! (as RFC 5682 section 4 suggests), the one spurious fast recoveries get:
//! see [`crate::tcp::recovery::congestion::Congestion::undo`].

use crate::tcp::recovery::congestion::Congestion;

/// New segments step 2b sends at most.
const NEW_SEGMENTS: u8 = 2;

/// Where F-RTO stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Step 2: the first unacknowledged segment was resent; waiting for an
    /// ACK that advances SND.UNA.
    Resent,
    /// Step 3: `sent` new segments went out; the next ACK decides.
    NewData { sent: u8 },
}

/// What an ACK showed, as the connection saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckSeen {
    /// SND.UNA after the ACK, as a sequence position.
    pub una: u64,
    /// The ACK advanced SND.UNA.
    pub advanced: bool,
    /// The ACK counts as a duplicate ACK (RFC 5681 section 2, without a
    /// D-SACK: RFC 6675 section 2).
    pub duplicate: bool,
    /// The ACK acknowledged, cumulatively or in a SACK block, a segment
    /// sent before the timeout, never resent and not reported before.
    pub original_reported: bool,
    /// The ACK's timestamp echo is older than the first retransmission's
    /// timestamp (RFC 3522).
    pub echo_predates: bool,
}

/// What to do after an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing decided; keep waiting.
    Wait,
    /// Step 2b: send new segments; the next ACK decides.
    SendNew,
    /// The timeout was spurious: undo it.
    Spurious,
    /// No sign of a spurious timeout: recover as after any timeout.
    Conventional,
}

/// One timeout whose verdict is not known yet.
#[derive(Debug, Clone)]
pub struct Frto {
    /// The congestion state before the first timeout.
    prior: Congestion,
    /// SND.NXT (a sequence position) at the last timeout: "recover".
    recover: u64,
    /// Our timestamp when the first retransmission went out, with
    /// timestamps in use (RetransmitTS of RFC 3522).
    retransmit_ts: Option<u32>,
    /// Timeouts since the first, that one included.
    timeouts: u64,
    step: Step,
}

impl Frto {
    /// Step 1: a timeout with congestion state `prior` before it, SND.NXT at
    /// `recover`, the first segment resent at timestamp `retransmit_ts`.
    pub fn new(prior: Congestion, recover: u64, retransmit_ts: Option<u32>) -> Self {
        Frto {
            prior,
            recover,
            retransmit_ts,
            timeouts: 1,
            step: Step::Resent,
        }
    }

    /// Another timeout before a verdict: step 1 again with SND.NXT now at
    /// `recover`, keeping the state before the first timeout and the first
    /// retransmission's timestamp.
    pub fn restart(&mut self, recover: u64) {
        self.timeouts += 1;
        self.recover = recover;
        self.step = Step::Resent;
    }

    /// SND.NXT at the last timeout: segments below it were sent before.
    pub fn recover(&self) -> u64 {
        self.recover
    }

    /// The congestion state before the first timeout.
    pub fn prior(&self) -> &Congestion {
        &self.prior
    }

    /// Our timestamp when the first retransmission went out.
    pub fn retransmit_ts(&self) -> Option<u32> {
        self.retransmit_ts
    }

    /// The timeouts the verdict is on: the first and those before it.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// In step 3: the next ACK's reports of original segments decide.
    pub fn deciding(&self) -> bool {
        matches!(self.step, Step::NewData { .. })
    }

    /// Step 2b allows another new segment now.
    pub fn wants_new_data(&self) -> bool {
        matches!(self.step, Step::NewData { sent } if sent < NEW_SEGMENTS)
    }

    /// A new segment of step 2b went out.
    pub fn new_data_sent(&mut self) {
        if let Step::NewData { sent } = &mut self.step {
            *sent += 1;
        }
    }

    /// Step 2b has sent nothing yet.
    pub fn nothing_new_sent(&self) -> bool {
        self.step == Step::NewData { sent: 0 }
    }

    /// The verdict of an ACK (steps 2 and 3).
    pub fn on_ack(&mut self, ack: &AckSeen) -> Outcome {
        match self.step {
            Step::Resent if !ack.advanced => Outcome::Wait,
            // Step 2a: everything sent before the timeout is acknowledged,
            // and only the echo can tell whether the original arrived.
            Step::Resent if ack.una >= self.recover && ack.echo_predates => Outcome::Spurious,
            Step::Resent if ack.una >= self.recover => Outcome::Conventional,
            Step::Resent => {
                self.step = Step::NewData { sent: 0 };
                Outcome::SendNew
            }
            Step::NewData { .. } if ack.original_reported => Outcome::Spurious,
            Step::NewData { .. } if ack.advanced || ack.duplicate => Outcome::Conventional,
            Step::NewData { .. } => Outcome::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::recovery::congestion::CongestionControl;

    fn timed_out(retransmit_ts: Option<u32>) -> Frto {
        let prior = Congestion::new(CongestionControl::NewReno, 1000, 10);
        Frto::new(prior, 10_000, retransmit_ts)
    }

    fn advancing_to(una: u64) -> AckSeen {
        AckSeen {
            una,
            advanced: true,
            ..AckSeen::default()
        }
    }

    #[test]
    fn two_acks_of_originals_make_a_spurious_timeout() {
        let mut frto = timed_out(None);
        let stale = AckSeen {
            una: 0,
            duplicate: true,
            ..AckSeen::default()
        };
        assert_eq!(frto.on_ack(&stale), Outcome::Wait, "step 2 waits");
        assert_eq!(frto.on_ack(&advancing_to(2000)), Outcome::SendNew);
        assert!(frto.deciding() && frto.nothing_new_sent());
        for _ in 0..NEW_SEGMENTS {
            assert!(frto.wants_new_data());
            frto.new_data_sent();
        }
        assert!(!frto.wants_new_data() && !frto.nothing_new_sent());
        let window_update = AckSeen {
            una: 2000,
            ..AckSeen::default()
        };
        assert_eq!(frto.on_ack(&window_update), Outcome::Wait);
        let original = AckSeen {
            original_reported: true,
            ..advancing_to(4000)
        };
        assert_eq!(frto.on_ack(&original), Outcome::Spurious);
    }

    #[test]
    fn a_duplicate_or_resent_data_only_in_step_three_is_a_real_loss() {
        for ack in [
            AckSeen {
                una: 2000,
                duplicate: true,
                ..AckSeen::default()
            },
            advancing_to(2500),
        ] {
            let mut frto = timed_out(Some(7));
            frto.on_ack(&advancing_to(2000));
            assert_eq!(frto.on_ack(&ack), Outcome::Conventional, "{ack:?}");
        }
    }

    #[test]
    fn an_ack_of_everything_in_step_two_is_decided_by_the_echo_alone() {
        let mut frto = timed_out(Some(7));
        let old_echo = AckSeen {
            echo_predates: true,
            ..advancing_to(10_000)
        };
        assert_eq!(frto.on_ack(&old_echo), Outcome::Spurious);
        let mut frto = timed_out(Some(7));
        assert_eq!(frto.on_ack(&advancing_to(10_000)), Outcome::Conventional);
        // Below "recover" the echo proves only the first segment arrived:
        // F-RTO's step 3 decides.
        let mut frto = timed_out(Some(7));
        let partial = AckSeen {
            echo_predates: true,
            ..advancing_to(2000)
        };
        assert_eq!(frto.on_ack(&partial), Outcome::SendNew);
    }

    #[test]
    fn a_new_timeout_goes_back_to_step_two_and_keeps_the_first_state() {
        let mut frto = timed_out(Some(7));
        frto.on_ack(&advancing_to(2000));
        frto.restart(12_000);
        assert!(!frto.deciding());
        assert_eq!(frto.timeouts(), 2);
        assert_eq!(frto.recover(), 12_000);
        assert_eq!(frto.retransmit_ts(), Some(7));
        assert_eq!(frto.prior().cwnd(), 10_000);
        assert_eq!(frto.on_ack(&advancing_to(11_000)), Outcome::SendNew);
    }
}
