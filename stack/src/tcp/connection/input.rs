//! Segment arrival (RFC 9293 section 3.10.7) with the protections of RFC
//! 5961 (sections 3-5: RST and SYN challenge ACKs, the ACK range check)
//! and RFC 7323 (PAWS, TS.Recent), ACK processing with RFC 5681 duplicate
//! ACKs (with RFC 5827 early retransmit, in `early_retransmit.rs`), RFC
//! 6582 NewReno recovery (with section 4.1's ACK heuristic after
//! a timeout) and RFC 6675 SACK loss marking with a
//! learned duplicate threshold, D-SACKs sent for duplicates and read to
//! undo spurious recoveries and timeouts (RFC 2883, RFC 3708, RFC 4015),
//! F-RTO's verdicts on timeouts (RFC 5682, in `frto.rs`), and the
//! hand-off of text to the consumer.

use super::{Connection, Event, Negotiated, State};
use crate::tcp::receive::receiver::Consumer;
use crate::tcp::recovery::congestion::Congestion;
use crate::tcp::recovery::limited_transmit::LimitedTransmit;
use crate::tcp::recovery::spurious::{dsack_block, Episode};
use crate::tcp::seq::Seq;
use crate::tcp::timers::time::{Duration, Instant};
use crate::tcp::timers::timer::TimerKind;
use core::ops::Range;
use smoltcp::wire::{TcpControl, TcpRepr};

/// Duplicate ACKs kept owed at most; more add nothing to fast retransmit.
const MAX_DUP_ACKS_OWED: u32 = 8;

/// RFC 7323 section 5.5: TS.Recent older than this is invalid.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

impl Connection {
    /// Records the peer's SYN: its ISN, options and window.
    pub(super) fn accept_syn(&mut self, now: Instant, syn: &TcpRepr<'_>) {
        self.irs = syn.seq_number.into();
        self.opts = Negotiated::agree(&self.config, syn);
        self.snd_wnd = u64::from(syn.window_len);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = self.irs;
        self.snd_wl2 = syn.ack_number.map_or(self.iss, Seq::from);
        self.ts_recent = syn.timestamp.map(|ts| (ts.tsval, now));
        self.last_ack_sent = self.irs + 1;
        // The initial window counts segments of the negotiated size.
        self.cc = Congestion::new(
            self.config.congestion,
            self.emss() as u32,
            self.config.initial_window,
        );
    }

    /// Our SYN was acknowledged.
    fn syn_acknowledged(&mut self, now: Instant, seg: &TcpRepr<'_>) {
        self.syn_acked = true;
        if self.syn_transmissions == 1 {
            self.rtt.sample(now.saturating_since(self.syn_sent_at));
        } else {
            self.sample_timestamp_echo(now, seg);
        }
        self.timers.cancel(TimerKind::Retransmit);
        self.state = if self.fin_queued {
            State::FinWait1
        } else {
            State::Established
        };
        self.half_open = None;
        self.events.push_back(Event::Established);
        if let Some(keep_alive) = self.config.keep_alive {
            self.timers.set(TimerKind::KeepAlive, now + keep_alive.idle);
        }
    }

    /// RFC 9293 section 3.10.7.3.
    pub(super) fn on_syn_sent<C: Consumer + ?Sized>(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        consumer: &mut C,
    ) {
        let ack = seg.ack_number.map(Seq::from);
        let ack_ok = ack.map(|ack| ack == self.iss + 1);
        if ack_ok == Some(false) {
            if seg.control != TcpControl::Rst {
                self.pending_rst = ack.map(|ack| (ack, None));
            }
            return;
        }
        if seg.control == TcpControl::Rst {
            if ack_ok == Some(true) {
                self.terminate(Some(Event::Reset));
            }
            return;
        }
        if seg.control != TcpControl::Syn {
            return;
        }
        self.accept_syn(now, seg);
        self.last_heard = now;
        if ack_ok == Some(true) {
            self.syn_acknowledged(now, seg);
            self.send_ack = true;
            if !seg.payload.is_empty() {
                self.process_text(now, self.irs + 1, seg.payload, false, consumer);
            }
        } else {
            self.state = State::SynReceived;
            self.send_syn = true;
        }
    }

    /// RFC 9293 section 3.10.7.4, for SYN-RECEIVED and every later state.
    pub(super) fn on_synchronized<C: Consumer + ?Sized>(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        consumer: &mut C,
    ) {
        let mut seq = Seq::from(seg.seq_number);
        let mut syn = seg.control == TcpControl::Syn;
        let rst = seg.control == TcpControl::Rst;
        let fin = seg.control == TcpControl::Fin;
        let ack = seg.ack_number.map(Seq::from);

        if self.state == State::SynReceived && syn && seq == self.irs {
            if ack != Some(self.iss + 1) {
                // The peer's SYN again: our SYN-ACK was lost. The next one
                // echoes this SYN's timestamp (RFC 7323 section 4.3: its
                // SEG.SEQ is below Last.ACK.sent), or the peer would take
                // the time since its first SYN for a round trip.
                self.update_ts_recent(now, seq, seg);
                self.send_syn = true;
                return;
            }
            // A SYN-ACK after a simultaneous open: its ACK completes ours.
            seq = seq + 1;
            syn = false;
        }
        if self.paws_rejects(now, seg) && !self.disordered_ack(seq, ack, seg) {
            self.stats.paws_rejected += 1;
            if !rst {
                // A copy of data already received, reported as Linux does.
                self.send_ack = true;
                self.note_old_duplicate(seq, seg.payload.len());
            }
            return;
        }
        let len = seg.payload.len() + usize::from(syn) + usize::from(fin);
        if !self.acceptable(seq, len) {
            self.stats.unacceptable += 1;
            if !rst && !syn && self.recent_duplicate(seq, len, ack) {
                self.update_ts_recent(now, seq, seg);
            }
            self.send_ack |= !rst;
            if !rst {
                self.note_old_duplicate(seq, seg.payload.len());
            }
            if self.state == State::TimeWait && fin {
                self.timers
                    .set(TimerKind::TimeWait, now + self.config.time_wait);
            }
            return;
        }
        if rst {
            if seq == self.rcv_nxt() {
                self.terminate(Some(Event::Reset));
            } else {
                self.challenge_ack(now);
            }
            return;
        }
        if syn {
            self.challenge_ack(now);
            return;
        }
        let Some(ack) = ack else {
            return;
        };
        if self.state == State::SynReceived {
            if ack != self.iss + 1 {
                self.pending_rst = Some((ack, None));
                return;
            }
            self.syn_acknowledged(now, seg);
            self.snd_wnd = self.peer_window(seg);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
        }
        if !self.process_ack(now, seq, ack, seg) {
            return;
        }
        self.last_heard = now;
        self.keepalive_sent = 0;
        self.update_ts_recent(now, seq, seg);
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) && (!seg.payload.is_empty() || fin)
        {
            self.process_text(now, seq, seg.payload, fin, consumer);
        }
    }

    /// The window `seg` advertises; never scaled in a SYN (RFC 7323
    /// section 2.2), as in the SYN-ACK of a simultaneous open.
    fn peer_window(&self, seg: &TcpRepr<'_>) -> u64 {
        let window = u64::from(seg.window_len);
        if seg.control == TcpControl::Syn {
            window
        } else {
            window << self.opts.snd_scale
        }
    }

    /// RFC 7323 section 5.3 R1: a timestamp older than TS.Recent.
    fn paws_rejects(&mut self, now: Instant, seg: &TcpRepr<'_>) -> bool {
        if !self.opts.timestamps || seg.control == TcpControl::Rst {
            return false;
        }
        let (Some(ts), Some((recent, at))) = (seg.timestamp, self.ts_recent) else {
            return false;
        };
        if (ts.tsval.wrapping_sub(recent) as i32) >= 0 {
            return false;
        }
        if now.saturating_since(at) > PAWS_IDLE {
            self.ts_recent = None;
            return false;
        }
        true
    }

    /// A pure ACK that PAWS would reject only because a later segment of
    /// the peer overtook it (RFC 7323 section 5.3 drops it; Linux's
    /// `tcp_disordered_ack` keeps it): it is at RCV.NXT, acknowledges
    /// SND.UNA, would not change the send window, and its timestamp is at
    /// most one RTO behind TS.Recent. Such an ACK can carry the D-SACK
    /// that shows a recovery spurious; it cannot be an old duplicate of
    /// wrapped sequence space, which is what PAWS guards against.
    fn disordered_ack(&self, seq: Seq, ack: Option<Seq>, seg: &TcpRepr<'_>) -> bool {
        let (Some(ts), Some((recent, _))) = (seg.timestamp, self.ts_recent) else {
            return false;
        };
        let slack = self.rtt.rto().micros() / self.config.timestamp_tick.micros().max(1);
        seg.payload.is_empty()
            && seg.control == TcpControl::None
            && seq == self.rcv_nxt()
            && ack == Some(self.seq_of(self.una_seqpos()))
            && !self.snd_wl1.lt(seq)
            && self.peer_window(seg) == self.snd_wnd
            && u64::from(recent.wrapping_sub(ts.tsval)) <= slack
    }

    /// RFC 7323 section 4.3: TS.Recent follows segments that do not leave
    /// a gap before Last.ACK.sent.
    fn update_ts_recent(&mut self, now: Instant, seq: Seq, seg: &TcpRepr<'_>) {
        let Some(ts) = seg.timestamp.filter(|_| self.opts.timestamps) else {
            return;
        };
        let newer = self
            .ts_recent
            .is_none_or(|(recent, _)| (ts.tsval.wrapping_sub(recent) as i32) >= 0);
        if newer && seq.le(self.last_ack_sent) {
            self.ts_recent = Some((ts.tsval, now));
        }
    }

    /// Whether an unacceptable segment is a copy of data (or a FIN) that
    /// we acknowledged, resent because that ACK was lost: it ends at or
    /// below Last.ACK.sent, less than one receive window below it, and
    /// acknowledges something [`Connection::ack_in_range`] accepts. Its
    /// timestamp is the one to echo (RFC 7323 section 4.3 rule 2 and
    /// Appendix D, which update TS.Recent before the acceptability test),
    /// so the ACK it draws measures a round trip, not the time since the
    /// first copy. A copy of data not acknowledged yet is left out: the
    /// ACK echoes the earliest unacknowledged segment (section 4.3 case
    /// A), which is what shows a timeout spurious (RFC 3522). A blind
    /// attacker moving TS.Recent ahead (for PAWS to drop everything)
    /// must still guess a window of sequence space and a valid ACK.
    fn recent_duplicate(&self, seq: Seq, len: usize, ack: Option<Seq>) -> bool {
        let end = seq + len as u32;
        let wnd = self.recv.window().min(u64::from(u32::MAX / 2)) as u32;
        len > 0
            && end.le(self.last_ack_sent)
            && (self.last_ack_sent - wnd).lt(end)
            && ack.is_some_and(|ack| self.ack_in_range(ack))
    }

    /// The segment acceptability test of RFC 9293 section 3.10.7.4, with
    /// its allowance for ACKs at RCV.NXT when the window is zero.
    fn acceptable(&self, seq: Seq, len: usize) -> bool {
        let nxt = self.rcv_nxt();
        let wnd = self.recv.window().min(u64::from(u32::MAX / 2)) as u32;
        let in_window = |s: Seq| nxt.le(s) && s.lt(nxt + wnd);
        match (len, wnd) {
            (_, 0) => seq == nxt,
            (0, _) => in_window(seq),
            _ => in_window(seq) || in_window(seq + (len as u32 - 1)),
        }
    }

    /// RFC 5961 section 7: challenge ACKs, at most a configured number per
    /// second.
    fn challenge_ack(&mut self, now: Instant) {
        let (start, count) = &mut self.challenge_window;
        if now.saturating_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *count = 0;
        }
        if *count < self.config.challenge_ack_limit {
            *count += 1;
            self.send_ack = true;
            self.stats.challenge_acks += 1;
        }
    }

    /// The ACK field (RFC 9293 section 3.10.7.4 fifth check, RFC 5961
    /// section 5.2). Returns false when the segment is to be dropped.
    fn process_ack(&mut self, now: Instant, seq: Seq, ack: Seq, seg: &TcpRepr<'_>) -> bool {
        if !self.ack_in_range(ack) {
            self.stats.unacceptable += 1;
            self.send_ack = true;
            return false;
        }
        let una = self.una_seqpos();
        let advance = ack.diff(self.seq_of(una));
        if advance < 0 {
            // Overtaken by a later ACK: its SACK blocks are old news, but
            // not a D-SACK.
            if let Some(block) = self.dsack_in(ack, seg) {
                self.on_dsack(&block);
            }
            return true;
        }
        let mut window_changed = false;
        if self.snd_wl1.lt(seq) || (self.snd_wl1 == seq && self.snd_wl2.le(ack)) {
            let wnd = self.peer_window(seg);
            window_changed = wnd != self.snd_wnd;
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            if window_changed {
                self.persist_probes = 0;
                self.timers.cancel(TimerKind::Persist);
            }
        }
        // The cumulative ACK first: a hole it fills counts as displaced
        // only by segments SACKed in earlier ACKs.
        let ack_pos = una + advance as u64;
        let originals = self.frto_originals();
        if advance > 0 {
            self.on_new_ack(now, ack_pos, seg);
        }
        let dsack = self.dsack_in(ack, seg);
        if self.opts.sack {
            self.apply_sack(seg, dsack.is_some());
        }
        // RFC 6675 section 2: an ACK reporting a duplicate tells of no new
        // arrival, so it is no duplicate ACK.
        let duplicate = advance == 0
            && !self.flight.is_empty()
            && seg.payload.is_empty()
            && seg.control.len() == 0
            && !window_changed
            && dsack.is_none();
        if duplicate {
            self.on_dup_ack();
        }
        if let Some(block) = &dsack {
            self.on_dsack(block);
        }
        self.on_frto_ack(seg, advance > 0, duplicate, originals);
        // While F-RTO judges a timeout, only the timeout resends.
        if self.opts.sack
            && self.frto.is_none()
            && self.flight.mark_lost_by_sack(self.loss_threshold())
            && self.may_enter_recovery()
        {
            self.fast_retransmit();
        }
        self.on_tail_probe_ack(dsack.as_ref());
        if advance > 0 {
            self.arm_tail_probe(now);
        }
        true
    }

    /// RFC 5961 section 5.2: an acceptable ACK lies within
    /// SND.UNA - MAX.SND.WND ..= SND.NXT.
    fn ack_in_range(&self, ack: Seq) -> bool {
        let una = self.una_seqpos();
        let advance = ack.diff(self.seq_of(una));
        advance <= (self.nxt_seqpos() - una) as i64 && advance >= -(self.max_snd_wnd as i64)
    }

    /// Marks segments the peer reports in SACK blocks (RFC 2018 section 5;
    /// blocks outside SND.UNA..SND.NXT are ignored), past the first when
    /// it is a D-SACK.
    fn apply_sack(&mut self, seg: &TcpRepr<'_>, dsack: bool) {
        let una = self.una_seqpos();
        let anchor = self.seq_of(una);
        let nxt = self.nxt_seqpos() as i64 - una as i64;
        for (left, right) in seg.sack_ranges.iter().flatten().skip(usize::from(dsack)) {
            let start = Seq(*left).diff(anchor);
            let end = Seq(*right).diff(anchor);
            if 0 < start && start < end && end <= nxt {
                self.flight.apply_sack(una + start as u64..una + end as u64);
            }
        }
    }

    /// The D-SACK block of an ACK acknowledging `ack` (RFC 2883 section
    /// 4), as stream positions, when SACK is in use and the block lies
    /// within what was sent.
    fn dsack_in(&self, ack: Seq, seg: &TcpRepr<'_>) -> Option<Range<u64>> {
        if !self.opts.sack {
            return None;
        }
        let (left, right) = dsack_block(&seg.sack_ranges, ack)?;
        let una = self.una_seqpos();
        let anchor = self.seq_of(una);
        let start = una.checked_add_signed(left.diff(anchor))?;
        let end = una.checked_add_signed(right.diff(anchor))?;
        (end <= self.nxt_seqpos()).then_some(start..end)
    }

    /// The peer received `block` twice: if it was a retransmission of the
    /// current episode, one fewer is left to prove the recovery spurious.
    fn on_dsack(&mut self, block: &Range<u64>) {
        self.stats.dsacks_received += 1;
        if let Some(episode) = &mut self.episode {
            episode.duplicate(block);
        }
        self.undo_if_spurious();
    }

    /// Once out of recovery (fast, or after a timeout), undoes the last
    /// one if every retransmission it made came back as a duplicate (RFC
    /// 3708 section 3, RFC 4015 section 3), and learns the displacement
    /// that misled it.
    pub(super) fn undo_if_spurious(&mut self) {
        if !self.may_enter_recovery() || !self.episode.as_ref().is_some_and(Episode::spurious) {
            return;
        }
        let Some(episode) = self.episode.take() else {
            return;
        };
        self.cc.undo(episode.prior(), self.flight_size());
        self.reordering.observed(episode.displacement());
        match episode.timeouts() {
            0 => self.stats.spurious_recoveries += 1,
            timeouts => self.stats.spurious_timeouts += timeouts,
        }
    }

    /// New data acknowledged up to `ack_pos`.
    fn on_new_ack(&mut self, now: Instant, ack_pos: u64, seg: &TcpRepr<'_>) {
        let cwnd_limited = self.send.head() < self.cwnd_full_until;
        let acked = self.flight.acknowledge(ack_pos);
        self.ack_heuristic.advanced(acked.octets);
        self.reordering.observed(acked.displaced);
        if let Some(episode) = &mut self.episode {
            episode.displaced(acked.displaced_if_spurious);
            if acked.resent {
                episode.acknowledged_resent();
            }
        }
        let data_end = self.send.end();
        self.send.release(ack_pos.min(data_end));
        if self.fin_sent && ack_pos > data_end {
            self.fin_acked = true;
        }
        if let Some(sent_at) = acked.rtt_from {
            self.rtt.sample(now.saturating_since(sent_at));
        } else if !self.sample_timestamp_echo(now, seg) && self.rtt.srtt().is_none() {
            // Without timestamps, after a resent SYN and with every ACK
            // covering a resent hole, Karn's rule would never allow a
            // sample, and the 1 s initial RTO would back off for good: a
            // sample that may be too long starts the estimate.
            if let Some(sent_at) = acked.rtt_bound_from {
                self.rtt.sample(now.saturating_since(sent_at));
            }
        }
        self.retries = 0;
        if self.timeout_recover.is_some_and(|point| ack_pos >= point) {
            self.timeout_recover = None;
            self.undo_if_spurious();
        }
        let acked_octets = acked.octets.min(u64::from(u32::MAX)) as u32;
        match self.recover {
            Some(recover) if ack_pos >= recover => {
                self.cc.exit_recovery(self.flight_size());
                self.recover = None;
                self.undo_if_spurious();
            }
            Some(_) if !self.opts.sack => {
                // NewReno resends the next hole at once.
                self.cc.partial_ack(acked_octets);
                self.flight.mark_first_lost_on_partial_ack(acked.last_sent);
            }
            Some(_) => {
                // With SACK the scoreboard decides, but a hole never resent
                // with SACKed data above it goes at once, unless the path
                // reorders: then it may be a segment still on its way.
                if self.flight.sacked() > 0 && !self.reordering.seen() {
                    self.flight.mark_first_lost(false);
                }
            }
            None => {
                let srtt = self.rtt.srtt().unwrap_or_default();
                self.cc.on_ack(now, acked_octets, srtt, cwnd_limited);
            }
        }
        self.dupacks = 0;
        self.limited_transmit = LimitedTransmit::default();
        if self.flight.is_empty() {
            self.timers.cancel(TimerKind::Retransmit);
        } else {
            self.timers.set(TimerKind::Retransmit, now + self.rtt.rto());
        }
        if self.fin_acked {
            match self.state {
                State::FinWait1 => self.enter_fin_wait2(now),
                State::Closing => self.enter_time_wait(now),
                State::LastAck => self.terminate(Some(Event::Closed)),
                _ => {}
            }
        }
    }

    /// An RTT sample from the echoed timestamp (RFC 7323 section 4), which
    /// stays valid when the acknowledged segment was resent; returns
    /// whether there was one.
    fn sample_timestamp_echo(&mut self, now: Instant, seg: &TcpRepr<'_>) -> bool {
        let Some(echo) = seg
            .timestamp
            .filter(|ts| self.opts.timestamps && ts.tsecr != 0)
        else {
            return false;
        };
        let ticks = self.timestamp_now(now).wrapping_sub(echo.tsecr);
        self.rtt.sample(Duration(
            u64::from(ticks) * self.config.timestamp_tick.micros(),
        ));
        true
    }

    /// A duplicate ACK (RFC 5681 section 3.2), against the threshold of
    /// [`Connection::loss_threshold`].
    fn on_dup_ack(&mut self) {
        self.dupacks += 1;
        if self.recover.is_some() {
            if !self.opts.sack {
                self.cc.inflate();
            }
        } else if self.dupacks as usize >= self.loss_threshold() {
            if self.may_enter_recovery() {
                self.fast_retransmit();
            } else if self.lost_again_after_timeout() {
                self.enter_recovery_after_timeout();
            }
        }
    }

    /// Without SACK, after a timeout and before SND.UNA reaches the data
    /// sent before it: whether duplicate ACKs show a retransmission of
    /// the go-back-N lost (RFC 6582 section 4.1's ACK heuristic), not
    /// copies of segments the receiver held. F-RTO, still judging the
    /// timeout, resent only the first segment: no go-back-N yet.
    fn lost_again_after_timeout(&self) -> bool {
        !self.opts.sack
            && self.recover.is_none()
            && self.frto.is_none()
            && self.timeout_recover.is_some()
            && self
                .ack_heuristic
                .indicates_loss(self.cc.cwnd(), self.emss() as u32)
    }

    /// Whether a loss found now may start a fast recovery: not during
    /// one, nor while F-RTO judges a timeout, nor before everything sent
    /// before the last timeout is acknowledged (RFC 6675 section 5.1, RFC
    /// 6582 section 3.2 steps 2 and 4: the timeout's recovery resends it,
    /// and duplicates of what it resent needlessly are no sign of loss).
    pub(super) fn may_enter_recovery(&self) -> bool {
        self.recover.is_none() && self.frto.is_none() && self.timeout_recover.is_none()
    }

    /// [`Connection::enter_recovery`] on a loss the duplicate threshold
    /// showed, counted as an early retransmit when the threshold was
    /// early retransmit's (RFC 5827).
    fn fast_retransmit(&mut self) {
        if self.early_threshold().is_some() {
            self.stats.early_retransmits += 1;
        }
        self.enter_recovery();
    }

    /// Fast retransmit and the start of fast recovery, a new episode that
    /// D-SACKs may show spurious (SACK only: without it no D-SACK comes).
    pub(super) fn enter_recovery(&mut self) {
        // RFC 5681 section 3.2 step 2: without limited transmit's segments.
        self.start_recovery(self.limited_transmit.flight_without(self.flight_size()));
        self.flight.mark_first_lost(false);
    }

    /// [`Connection::enter_recovery`] when a retransmission of the
    /// go-back-N after a timeout was lost (see
    /// [`Connection::lost_again_after_timeout`]). The hole was resent
    /// already, and goes again. FlightSize (RFC 5681 equation 4) is what
    /// the go-back-N has resent: the segments it has not reached are not
    /// in the network (a sender moving SND.NXT back to SND.UNA at the
    /// timeout counts the same); counting them would set the window to
    /// half of them, a burst.
    fn enter_recovery_after_timeout(&mut self) {
        let in_network = self.flight.pipe().min(u64::from(u32::MAX)) as u32;
        self.start_recovery(in_network);
        self.flight.mark_first_lost(true);
    }

    /// The congestion response and `recover` of a fast recovery, with
    /// `flight` octets of FlightSize.
    fn start_recovery(&mut self, flight: u32) {
        self.recover = Some(self.nxt_seqpos());
        self.rescued = false;
        self.episode = self.opts.sack.then(|| Episode::new(self.cc.clone()));
        self.cc.enter_recovery(flight, self.opts.sack);
        self.stats.fast_recoveries += 1;
    }

    /// Segment text and FIN (RFC 9293 section 3.10.7.4, seventh and eighth
    /// steps), with the ACK policy of RFC 5681 section 4.2.
    fn process_text<C: Consumer + ?Sized>(
        &mut self,
        now: Instant,
        seq: Seq,
        payload: &[u8],
        fin: bool,
        consumer: &mut C,
    ) {
        let left = self.recv.next_position();
        let offset = seq.diff(self.rcv_nxt());
        let skip = offset.min(0).unsigned_abs() as usize;
        let data = payload.get(skip..).unwrap_or_default();
        let pos = left.saturating_add_signed(offset.max(0));
        let had_fin = self.recv.fin_received();
        // The part below RCV.NXT came before; it is the first duplicate.
        let start = left.saturating_add_signed(offset);
        let below = start..(start + payload.len() as u64).min(self.recv.left_edge());
        let arrival = self.recv.receive(pos, data, fin, consumer);
        match arrival.duplicate {
            _ if skip > 0 => self.report_duplicate(below),
            Some(duplicate) => self.report_duplicate(duplicate),
            None => {}
        }
        self.stats.duplicate_octets +=
            payload.len() as u64 - arrival.new - arrival.declined_dropped;
        self.stats.declined_dropped += arrival.declined_dropped;
        let filled_gap = arrival.advanced && self.recv.left_edge() > pos + data.len() as u64;
        if arrival.advanced {
            // Duplicate ACKs still owed were for the old RCV.NXT: sent
            // now, at the new one, they would report as out of order
            // data that arrived in order (a burst taken in before
            // answering). This segment's own ACK tells the sender.
            self.dup_acks_owed = 0;
        }
        if !data.is_empty() && !arrival.advanced {
            self.dup_acks_owed = (self.dup_acks_owed + 1).min(MAX_DUP_ACKS_OWED);
        } else if arrival.out_of_order || filled_gap || arrival.new < payload.len() as u64 || fin {
            self.send_ack = true;
        } else {
            self.unacked_segments += 1;
            if self.unacked_segments >= 2 {
                self.send_ack = true;
            } else {
                self.timers
                    .set_if_idle(TimerKind::DelayedAck, now + self.config.ack_delay);
            }
        }
        if !had_fin && self.recv.fin_received() {
            self.on_peer_fin(now);
        }
    }

    /// An unacceptable segment: data wholly below RCV.NXT (a spurious
    /// retransmission, or a copy the network made) is a duplicate to
    /// report; anything else is not.
    fn note_old_duplicate(&mut self, seq: Seq, len: usize) {
        let offset = seq.diff(self.rcv_nxt());
        let Ok(len) = i64::try_from(len) else {
            return;
        };
        if len > 0 && offset + len <= 0 {
            let left = self.recv.next_position();
            let (Some(start), Some(end)) = (
                left.checked_add_signed(offset),
                left.checked_add_signed(offset + len),
            ) else {
                return;
            };
            self.report_duplicate(start..end.min(self.recv.left_edge()));
        }
    }

    /// Octets at `range` arrived twice: the next ACK says so in a D-SACK
    /// block (RFC 2883), if SACK is in use.
    fn report_duplicate(&mut self, range: Range<u64>) {
        if self.opts.sack && !range.is_empty() {
            self.recv.report_duplicate(range);
        }
    }

    /// The peer's FIN arrived in order.
    fn on_peer_fin(&mut self, now: Instant) {
        self.events.push_back(Event::PeerClosed);
        self.send_ack = true;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// Our FIN is acknowledged: FIN-WAIT-2 until the peer's FIN, or until
    /// the peer stays silent for the configured timeout.
    fn enter_fin_wait2(&mut self, now: Instant) {
        self.state = State::FinWait2;
        if let Some(timeout) = self.config.fin_wait2_timeout {
            self.timers.set(TimerKind::FinWait2, now + timeout);
        }
    }

    /// Both FINs are acknowledged: TIME-WAIT for 2 MSL.
    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.clear();
        self.timers
            .set(TimerKind::TimeWait, now + self.config.time_wait);
        self.half_open = None;
        self.events.push_back(Event::Closed);
    }
}
