//! F-RTO on a connection (RFC 5682; see [`crate::tcp::recovery::frto`]): what a
//! retransmission timeout marks for resending (step 1), what each ACK
//! says until the verdict (steps 2 and 3), the new segments of step 2b,
//! and the undo of a spurious timeout (section 4, with RFC 4015's
//! response).

use super::Connection;
use crate::tcp::recovery::congestion::Congestion;
use crate::tcp::recovery::frto::{AckSeen, Frto, Outcome};
use crate::tcp::timers::time::Instant;
use core::ops::Range;
use smoltcp::wire::TcpRepr;

impl Connection {
    /// The retransmission timer expired with congestion state `prior`
    /// before it (`fast_recovery`: during one): step 1 resends the first
    /// unacknowledged segment only, or, where F-RTO does not apply,
    /// everything not SACKed is to be resent (RFC 6675 section 5.1;
    /// go-back-N without SACK). F-RTO applies when it is
    /// on and nothing was reported lost: no fast recovery, nothing SACKed
    /// (holes the receiver reported), nothing still to be resent from an
    /// earlier timeout. A timeout before the verdict on the last one
    /// starts again from step 1.
    pub(super) fn mark_timed_out(&mut self, now: Instant, prior: Congestion, fast_recovery: bool) {
        let recover = self.nxt_seqpos();
        let frto = match self.frto.take() {
            Some(mut frto) => {
                frto.restart(recover);
                Some(frto)
            }
            None if self.config.frto
                && !fast_recovery
                && self.flight.sacked() == 0
                && self.flight.first_lost().is_none() =>
            {
                let stamp = self.opts.timestamps.then(|| self.timestamp_now(now));
                Some(Frto::new(prior, recover, stamp))
            }
            None => None,
        };
        match frto {
            Some(frto) if self.flight.mark_first_lost(true) => self.frto = Some(frto),
            _ => self.flight.mark_lost_on_timeout(),
        }
    }

    /// Before an ACK is processed: in step 3, the originals not reported
    /// yet, to tell whether the ACK reports one.
    pub(super) fn frto_originals(&self) -> Option<usize> {
        let frto = self.frto.as_ref().filter(|frto| frto.deciding())?;
        Some(self.flight.unreported_originals(frto.recover()))
    }

    /// What an ACK (`seg`, which `advanced` SND.UNA or was a `duplicate`)
    /// says of the timeout; `originals` is [`Connection::frto_originals`]
    /// from before it.
    pub(super) fn on_frto_ack(
        &mut self,
        seg: &TcpRepr<'_>,
        advanced: bool,
        duplicate: bool,
        originals: Option<usize>,
    ) {
        let Some(frto) = &self.frto else {
            return;
        };
        let echo_predates = match (frto.retransmit_ts(), seg.timestamp) {
            (Some(resent), Some(ts)) => ts.tsecr != 0 && (ts.tsecr.wrapping_sub(resent) as i32) < 0,
            _ => false,
        };
        let ack = AckSeen {
            una: self.una_seqpos(),
            advanced,
            duplicate,
            original_reported: originals
                .is_some_and(|before| self.flight.unreported_originals(frto.recover()) < before),
            echo_predates,
        };
        let outcome = self.frto.as_mut().map(|frto| frto.on_ack(&ack));
        match outcome {
            Some(Outcome::Spurious) => self.undo_timeout(),
            Some(Outcome::Conventional) => self.recover_from_timeout(),
            Some(Outcome::Wait | Outcome::SendNew) | None => {}
        }
    }

    /// Step 2b: up to two new segments, whatever the congestion window
    /// says. When none can go (nothing new queued, the peer's window
    /// full), no verdict can come: recovery goes on as after any timeout,
    /// starting with the first retransmission.
    pub(super) fn plan_frto_new_data(
        &mut self,
        now: Instant,
    ) -> Option<(TcpRepr<'static>, Range<u64>)> {
        if !self.frto.as_ref().is_some_and(Frto::wants_new_data) {
            return None;
        }
        if let Some(planned) = self.plan_new_data(now, true) {
            if let Some(frto) = &mut self.frto {
                frto.new_data_sent();
            }
            return Some(planned);
        }
        if self.frto.as_ref().is_some_and(Frto::nothing_new_sent) {
            self.recover_from_timeout();
            return self.plan_retransmission(now);
        }
        None
    }

    /// The timeout was spurious: the congestion state before it comes
    /// back (RFC 4015 section 3, as for a spurious fast recovery), and
    /// the flight, never marked lost, is not resent. The timeout's
    /// episode goes: no D-SACK is to undo it again.
    fn undo_timeout(&mut self) {
        if let Some(frto) = self.frto.take() {
            self.timeout_recover = None;
            self.episode = None;
            self.cc.undo(frto.prior(), self.flight_size());
            self.stats.spurious_timeouts += frto.timeouts();
        }
    }

    /// No sign of a spurious timeout: what was sent before it is resent,
    /// as after any timeout, unless D-SACKs already showed the
    /// retransmission needless (see [`Connection::undo_if_spurious`]).
    fn recover_from_timeout(&mut self) {
        if let Some(frto) = self.frto.take() {
            self.flight.mark_lost_below(frto.recover());
            self.undo_if_spurious();
        }
    }
}
