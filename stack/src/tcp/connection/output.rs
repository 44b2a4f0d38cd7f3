//! Building segments: SYN and SYN-ACK with their options (RFC 9293
//! section 3.5, RFC 7323 sections 2-3, RFC 2018 section 2), lost segments
//! resent on their original boundaries (RFC 5044 A.1, RFC 6675 NextSeg),
//! new data cut at record boundaries within the congestion and peer
//! windows (RFC 5681; without SACK, with limited transmit's room, RFC
//! 3042) and Nagle's rule (RFC 9293 section 3.7.4), tail
//! loss probes (RFC 8985 section 7.3, in `probe.rs`), pure ACKs with SACK
//! blocks, window probes and resets.

use super::{Connection, State};
use crate::tcp::recovery::limited_transmit::LimitedTransmit;
use crate::tcp::segment::{bare_header, Segment};
use crate::tcp::send::flight::{NextSeg, Sent};
use crate::tcp::send::queue::SplitPermit;
use crate::tcp::seq::Seq;
use crate::tcp::timers::time::Instant;
use crate::tcp::timers::timer::TimerKind;
use core::ops::Range;
use smoltcp::wire::{TcpControl, TcpRepr, TcpTimestampRepr};

/// Octets of a SACK option beside the blocks: kind, length and padding.
const SACK_OPTION_BASE: usize = 4;
const SACK_BLOCK_LEN: usize = 8;
/// The largest window field.
const MAX_WINDOW_FIELD: u64 = u16::MAX as u64;

impl Connection {
    /// The next segment to send, or `None` when there is nothing to send
    /// now. Call until `None` after every input, timer and send call.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment<'_>> {
        let (header, data) = self.plan(now)?;
        self.stats.segments_sent += 1;
        Some(Segment {
            src: self.local.addr,
            dst: self.remote.addr,
            header,
            payload: self.send.payload(data),
        })
    }

    fn plan(&mut self, now: Instant) -> Option<(TcpRepr<'static>, Range<u64>)> {
        if let Some((seq, ack)) = self.pending_rst.take() {
            let rst = bare_header(
                self.local.port,
                self.remote.port,
                TcpControl::Rst,
                seq,
                ack,
                0,
            );
            return Some((rst, 0..0));
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.send_syn => {
                return Some((self.syn(now), 0..0));
            }
            State::SynSent => return None,
            _ => {}
        }
        if self.dup_acks_owed > 0 {
            self.dup_acks_owed -= 1;
            return Some(self.pure_ack(now));
        }
        if let Some(planned) = self.plan_retransmission(now) {
            return Some(planned);
        }
        if let Some(planned) = self.plan_frto_new_data(now) {
            return Some(planned);
        }
        if self.send_tail_probe {
            self.send_tail_probe = false;
            if let Some(planned) = self.plan_tail_probe(now) {
                return Some(planned);
            }
        }
        if let Some(planned) = self.plan_new_data(now, false) {
            return Some(planned);
        }
        if self.sack_recovery_has_room() {
            if let Some(rule) = self.flight.mark_next_unsacked(!self.rescued) {
                self.rescued |= rule == NextSeg::Rescue;
                return self.plan_retransmission(now);
            }
        }
        if self.send_probe {
            self.send_probe = false;
            let seq = self.seq_of(self.una_seqpos()) - 1;
            return Some((self.header(now, TcpControl::None, seq, 0), 0..0));
        }
        if self.send_ack {
            return Some(self.pure_ack(now));
        }
        None
    }

    /// An ACK without data at SND.NXT.
    fn pure_ack(&mut self, now: Instant) -> (TcpRepr<'static>, Range<u64>) {
        let seq = if self.state == State::SynReceived {
            self.iss + 1
        } else {
            self.seq_of(self.nxt_seqpos())
        };
        (self.header(now, TcpControl::None, seq, 0), 0..0)
    }

    /// Our timestamp clock (RFC 7323 section 5.4), offset by the ISN.
    pub(super) fn timestamp_now(&self, now: Instant) -> u32 {
        let ticks = now.micros() / self.config.timestamp_tick.micros().max(1);
        (ticks as u32).wrapping_add(self.iss.0)
    }

    /// Our timestamp and the echo of TS.Recent (RFC 7323 section 3), when
    /// timestamps are in use.
    fn timestamp_option(&self, now: Instant) -> Option<TcpTimestampRepr> {
        self.opts.timestamps.then(|| TcpTimestampRepr {
            tsval: self.timestamp_now(now),
            tsecr: self.ts_recent.map_or(0, |(recent, _)| recent),
        })
    }

    /// SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), with our options; in
    /// SYN-RECEIVED only those the peer offered.
    fn syn(&mut self, now: Instant) -> TcpRepr<'static> {
        let active = self.state == State::SynSent;
        let ack = (!active).then(|| self.rcv_nxt());
        let window = self
            .recv
            .advertise(self.emss() as u64)
            .min(MAX_WINDOW_FIELD) as u16;
        let mut syn = bare_header(
            self.local.port,
            self.remote.port,
            TcpControl::Syn,
            self.iss,
            ack,
            window,
        );
        syn.max_seg_size = Some(self.local_mss);
        syn.window_scale = self.opts.scaling.then_some(self.opts.rcv_scale);
        syn.sack_permitted = self.opts.sack;
        syn.timestamp = self.timestamp_option(now);
        self.send_syn = false;
        self.send_ack = false;
        self.syn_transmissions += 1;
        self.syn_sent_at = now;
        if let Some(ack) = ack {
            self.last_ack_sent = ack;
        }
        self.timers.set(TimerKind::Retransmit, now + self.rtt.rto());
        syn
    }

    /// A header acknowledging RCV.NXT with our window, timestamp and, when
    /// they fit beside `payload_len` octets, SACK blocks. Sending it
    /// satisfies any pending ACK.
    fn header(
        &mut self,
        now: Instant,
        control: TcpControl,
        seq: Seq,
        payload_len: usize,
    ) -> TcpRepr<'static> {
        let ack = self.rcv_nxt();
        let window = self.recv.advertise(self.emss() as u64);
        let field = (window >> self.opts.rcv_scale).min(MAX_WINDOW_FIELD) as u16;
        let mut header = bare_header(
            self.local.port,
            self.remote.port,
            control,
            seq,
            Some(ack),
            field,
        );
        header.timestamp = self.timestamp_option(now);
        if self.opts.sack && self.recv.has_sack_blocks() {
            let room = self.emss().saturating_sub(payload_len + SACK_OPTION_BASE) / SACK_BLOCK_LEN;
            let base = self.irs + 1;
            for (slot, block) in header
                .sack_ranges
                .iter_mut()
                .zip(self.recv.sack_blocks().into_iter().flatten())
                .take(room)
            {
                *slot = Some(((base + block.start as u32).0, (base + block.end as u32).0));
            }
            if room > 0 && self.recv.duplicate_reported() {
                self.stats.dsacks_sent += 1;
            }
        }
        self.last_ack_sent = ack;
        self.send_ack = false;
        self.unacked_segments = 0;
        self.timers.cancel(TimerKind::DelayedAck);
        header
    }

    /// A data or FIN segment header for `sent`.
    pub(super) fn data_header(
        &mut self,
        now: Instant,
        sent: &Sent,
        last: bool,
    ) -> TcpRepr<'static> {
        let control = if sent.fin {
            TcpControl::Fin
        } else if last {
            TcpControl::Psh
        } else {
            TcpControl::None
        };
        self.last_data_sent = now;
        let len = (sent.end - sent.start) as usize;
        if len > 0 && !self.send.is_boundary(sent.start) {
            self.stats.unaligned_segments += 1;
        }
        self.header(now, control, self.seq_of(sent.start), len)
    }

    /// In SACK recovery with room for a segment in the congestion window
    /// (RFC 6675 section 5 step C), on a path that has not shown
    /// reordering: NextSeg rules 3 and 4 resend segments no SACKs show
    /// lost, a guess that reordering makes wrong.
    fn sack_recovery_has_room(&self) -> bool {
        self.opts.sack
            && !self.reordering.seen()
            && self.recover.is_some()
            && u64::from(self.cc.cwnd()) >= self.flight.pipe() + self.emss() as u64
    }

    /// Octets from SND.NXT the peer's window still takes.
    pub(super) fn window_room(&self) -> u64 {
        (self.send.head() + self.snd_wnd).saturating_sub(self.snd_nxt)
    }

    /// Whether new data may go out in this state.
    pub(super) fn sends_new_data(&self) -> bool {
        !self.fin_sent && self.sends_data()
    }

    /// Whether the state is one in which data (new or resent) goes out.
    pub(super) fn sends_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }

    /// The oldest segment deemed lost, resent on its original boundaries
    /// unless the EMSS shrank below it.
    pub(super) fn plan_retransmission(
        &mut self,
        now: Instant,
    ) -> Option<(TcpRepr<'static>, Range<u64>)> {
        if matches!(self.state, State::TimeWait | State::SynReceived) {
            return None;
        }
        let index = self.flight.first_lost()?;
        let emss = self.emss() as u64;
        let pipe = self.flight.pipe();
        let lost = self.flight.get(index)?;
        // The oldest segment goes at once (fast retransmit, RFC 5681 section
        // 3.2 step 2; RFC 6675 section 5 step 4.3); others wait for room.
        if index > 0 && pipe > 0 && pipe + lost.seq_len().min(emss) > u64::from(self.cc.cwnd()) {
            return None;
        }
        if lost.end - lost.start > emss {
            let start = lost.start;
            if let Some(cut) = self.send.cut(start, emss, emss, SplitPermit::EmssOnly) {
                self.stats.records_split += u64::from(cut.splits_record);
                self.flight.split(index, start + cut.len);
            }
        }
        self.flight.resent(index, now);
        let sent = self.flight.get(index)?.clone();
        if let Some(episode) = &mut self.episode {
            episode.resent(sent.start..sent.end);
        }
        self.stats.retransmissions += 1;
        self.timers
            .set_if_idle(TimerKind::Retransmit, now + self.rtt.rto());
        let header = self.data_header(now, &sent, false);
        Some((header, sent.start..sent.end))
    }

    /// New data from SND.NXT: whole records packed up to the EMSS within
    /// the peer's and the congestion window, then the FIN. A `forced`
    /// segment, a tail loss probe (RFC 8985 section 7.3) or a new segment
    /// of F-RTO's step 2b (RFC 5682), is one segment whatever the
    /// congestion window and Nagle say; other new data arms the probe
    /// timer.
    pub(super) fn plan_new_data(
        &mut self,
        now: Instant,
        forced: bool,
    ) -> Option<(TcpRepr<'static>, Range<u64>)> {
        if !self.sends_new_data() {
            return None;
        }
        let end = self.send.end();
        let fin = self.fin_queued;
        if self.snd_nxt == end && !fin {
            return None;
        }
        let mut len = 0;
        if self.snd_nxt < end {
            if self.flight.is_empty() {
                let idle = now.saturating_since(self.last_data_sent);
                self.cc.resume(now, idle, self.rtt.rto());
            }
            let emss = self.emss() as u64;
            let window_room = self.window_room();
            let (cwnd, pipe) = (u64::from(self.cc.cwnd()), self.flight.pipe());
            if !forced && cwnd.saturating_sub(pipe) < emss {
                self.cwnd_full_until = self.snd_nxt;
            }
            let cwnd_room = if forced {
                emss
            } else {
                (cwnd + self.limited_transmit_room(emss)).saturating_sub(pipe)
            };
            let room = emss.min(window_room).min(cwnd_room);
            let permit = if self.force_split && self.flight.is_empty() {
                SplitPermit::Window
            } else {
                SplitPermit::EmssOnly
            };
            let Some(cut) = self.send.cut(self.snd_nxt, room, emss, permit) else {
                if self.flight.is_empty() {
                    self.arm_persist(now);
                }
                return None;
            };
            let all = self.snd_nxt + cut.len == end;
            if !forced && self.nagle && cut.len < emss && all && !fin && !self.flight.is_empty() {
                return None;
            }
            self.stats.records_split += u64::from(cut.splits_record);
            self.force_split = false;
            if !forced {
                self.limited_transmit.sent(pipe, cut.len, cwnd);
            }
            len = cut.len;
        }
        let sent = Sent {
            start: self.snd_nxt,
            end: self.snd_nxt + len,
            fin: fin && self.snd_nxt + len == end,
            sent_at: now,
            transmissions: 1,
            order: 0,
            sacked: false,
            lost: false,
        };
        self.snd_nxt = sent.end;
        self.fin_sent = sent.fin;
        self.flight.push(sent.clone());
        self.timers.cancel(TimerKind::Persist);
        self.timers
            .set_if_idle(TimerKind::Retransmit, now + self.rtt.rto());
        let header = self.data_header(now, &sent, sent.end == end);
        if !forced {
            self.arm_tail_probe(now);
        }
        Some((header, sent.start..sent.end))
    }

    /// The room limited transmit adds to the congestion window (RFC 3042,
    /// see [`LimitedTransmit`]): without SACK, and not in a recovery or
    /// the recovery from a timeout, one `emss` for each of the first two
    /// duplicate ACKs.
    fn limited_transmit_room(&self, emss: u64) -> u64 {
        if self.opts.sack || !self.may_enter_recovery() {
            return 0;
        }
        LimitedTransmit::room(self.dupacks, emss)
    }

    /// Starts the persist timer with exponential backoff (RFC 9293
    /// section 3.8.6.1).
    fn arm_persist(&mut self, now: Instant) {
        let interval = self.persist_interval();
        self.timers.set_if_idle(TimerKind::Persist, now + interval);
    }
}
