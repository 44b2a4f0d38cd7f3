//! Tail loss probes (RFC 8985 section 7; see [`crate::tcp::recovery::tail_probe`]):
//! when the probe timer is armed (section 7.2), what goes out when it
//! fires (section 7.3: one new segment if the peer's window allows,
//! else the last segment whole, whatever the congestion window), and
//! what the ACKs say of it (section 7.4).

use super::Connection;
use crate::tcp::recovery::tail_probe::{probe_timeout, TailProbe, Verdict};
use crate::tcp::timers::time::Instant;
use crate::tcp::timers::timer::TimerKind;
use core::ops::Range;
use smoltcp::wire::TcpRepr;

impl Connection {
    /// Section 7.2's conditions: probes on, SACK in use, data in flight, an RTT
    /// measured, no probe unanswered, and the scoreboard clean: not in
    /// fast recovery nor in the recovery after a timeout (which includes
    /// a timeout F-RTO is still judging), nothing deemed lost, nothing
    /// SACKed (SACKs already drive loss detection).
    fn may_probe(&self) -> bool {
        self.opts.sack
            && self.config.tail_loss_probes
            && self.tail_probe.is_none()
            && self.may_enter_recovery()
            && !self.flight.is_empty()
            && self.flight.sacked() == 0
            && self.flight.first_lost().is_none()
            && self.rtt.srtt().is_some()
            && self.sends_data()
    }

    /// (Re)arms the probe timer after new data went out or new data was
    /// acknowledged; not when the retransmission timer fires first.
    pub(super) fn arm_tail_probe(&mut self, now: Instant) {
        let srtt = self.rtt.srtt().filter(|_| self.may_probe());
        let at = srtt.map(|srtt| now + probe_timeout(srtt, self.flight.len() == 1));
        match (at, self.timers.deadline(TimerKind::Retransmit)) {
            (Some(at), Some(rto)) if at < rto => self.timers.set(TimerKind::TailProbe, at),
            _ => self.timers.cancel(TimerKind::TailProbe),
        }
    }

    /// The probe timer fired: a probe goes out at the next poll, if the
    /// conditions still hold.
    pub(super) fn on_tail_probe_timeout(&mut self) {
        self.send_tail_probe = self.may_probe();
    }

    /// The probe (section 7.3): one new segment if there is one and the
    /// peer's window takes it, else the last segment in flight again,
    /// whole (none when the EMSS shrank below it: the RTO handles that).
    /// The retransmission timer restarts from it.
    pub(super) fn plan_tail_probe(
        &mut self,
        now: Instant,
    ) -> Option<(TcpRepr<'static>, Range<u64>)> {
        let (planned, retransmission) = match self.plan_new_data(now, true) {
            Some(planned) => (planned, false),
            None => (self.resend_last(now)?, true),
        };
        self.tail_probe = Some(TailProbe {
            data: planned.1.clone(),
            end: self.nxt_seqpos(),
            retransmission,
        });
        self.stats.tail_loss_probes += 1;
        self.timers.set(TimerKind::Retransmit, now + self.rtt.rto());
        Some(planned)
    }

    /// The last segment in flight, resent on its boundaries.
    fn resend_last(&mut self, now: Instant) -> Option<(TcpRepr<'static>, Range<u64>)> {
        let index = self.flight.len().checked_sub(1)?;
        let last = self.flight.get(index)?;
        if last.end - last.start > self.emss() as u64 {
            return None;
        }
        self.flight.resent(index, now);
        let sent = self.flight.get(index)?.clone();
        self.stats.retransmissions += 1;
        let header = self.data_header(now, &sent, true);
        Some((header, sent.start..sent.end))
    }

    /// What an ACK (with `dsack`, its D-SACK block) says of the probe
    /// (section 7.4): SACKed above holes, or reported as a duplicate (its
    /// original arrived), it shows them lost and fast recovery starts
    /// (RACK's inference, section 6.2, with the probe as the segment
    /// delivered); a retransmission that repaired a loss costs the window
    /// cut of a recovery.
    pub(super) fn on_tail_probe_ack(&mut self, dsack: Option<&Range<u64>>) {
        let Some(probe) = &self.tail_probe else {
            return;
        };
        let delivered = probe.reported_twice(dsack);
        if self.may_enter_recovery()
            && self
                .flight
                .mark_lost_below_probe(probe.data.start, delivered)
        {
            self.tail_probe = None;
            self.enter_recovery();
            return;
        }
        match probe.on_ack(self.una_seqpos(), dsack) {
            Verdict::Open => {}
            Verdict::Over => self.tail_probe = None,
            Verdict::Repaired => {
                self.tail_probe = None;
                let flight = self.flight_size();
                self.cc.enter_recovery(flight, true);
                self.cc.exit_recovery(flight);
            }
        }
    }
}
