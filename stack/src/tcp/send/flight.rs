//! Segments in flight: their original boundaries, kept so retransmissions
//! resend the same segments (RFC 5044 A.1), and the SACK scoreboard of
//! RFC 6675 (sections 2-5: IsLost, the pipe, the next segment to resend),
//! with the duplicate threshold of IsLost given by the caller (see
//! [`crate::tcp::recovery::reordering`]), and the displacement of holes the cumulative
//! ACK fills measured on the way.
//!
//! Positions are the sender's stream positions; a FIN occupies the
//! position just after the last data octet.

use crate::tcp::timers::time::Instant;
use core::ops::Range;
use std::collections::VecDeque;

/// One segment as it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// First data position.
    pub start: u64,
    /// End of the data (exclusive).
    pub end: u64,
    /// The segment carries the FIN after its data.
    pub fin: bool,
    /// When it was last sent.
    pub sent_at: Instant,
    /// How often it was sent.
    pub transmissions: u32,
    /// Where its last transmission stands among all those of the flight,
    /// counting from 1; [`Flight::push`] and [`Flight::resent`] set it.
    /// Unlike `sent_at` it orders transmissions of the same instant.
    pub order: u64,
    /// The receiver reported it in a SACK block.
    pub sacked: bool,
    /// Deemed lost and not resent since.
    pub lost: bool,
}

impl Sent {
    /// The end in sequence space, the FIN included.
    pub fn seq_end(&self) -> u64 {
        self.end + u64::from(self.fin)
    }

    /// Sequence space the segment occupies.
    pub fn seq_len(&self) -> u64 {
        self.seq_end() - self.start
    }
}

/// Which RFC 6675 NextSeg rule picked a segment to resend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSeg {
    /// Rule 3: unsacked below the highest sacked segment.
    BelowSack,
    /// Rule 4: the rescue retransmission, once per recovery.
    Rescue,
}

/// What a cumulative ACK took out of the flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acked {
    /// Sequence space acknowledged.
    pub octets: u64,
    /// The send time of the newest fully acknowledged segment, when no
    /// segment this ACK covers was ever resent or deemed lost (Karn's
    /// rule: the ACK may answer a retransmission).
    pub rtt_from: Option<Instant>,
    /// The send time of the newest fully acknowledged segment when it
    /// was sent only once and not SACKed before, whatever else the ACK
    /// covers: the ACK came at least a round trip after that one
    /// transmission, perhaps much later (a resent hole below it held the
    /// ACK back), so this bounds the RTT from above. For a first estimate
    /// only, where there is none ([`Acked::rtt_from`] is the sample).
    pub rtt_bound_from: Option<Instant>,
    /// The most segments SACKed above a hole, never resent, that this
    /// ACK filled: its original arrived displaced by that many.
    pub displaced: usize,
    /// The same for holes that were resent: the displacement if their
    /// retransmission proves spurious, a loss otherwise.
    pub displaced_if_spurious: usize,
    /// The latest [`Sent::order`] of the segments fully acknowledged.
    pub last_sent: Option<u64>,
    /// Some octet acknowledged had been sent more than once.
    pub resent: bool,
}

/// A segment's share of the running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    pipe: u64,
    lost: usize,
    sacked: usize,
}

impl Tally {
    fn of(sent: &Sent) -> Tally {
        Tally {
            pipe: if sent.sacked || sent.lost {
                0
            } else {
                sent.seq_len()
            },
            lost: usize::from(sent.lost),
            sacked: usize::from(sent.sacked),
        }
    }

    fn add(&mut self, other: Tally) {
        self.pipe += other.pipe;
        self.lost += other.lost;
        self.sacked += other.sacked;
    }

    fn sub(&mut self, other: Tally) {
        self.pipe -= other.pipe;
        self.lost -= other.lost;
        self.sacked -= other.sacked;
    }
}

/// The ordered list of segments sent and not yet acknowledged, with the
/// pipe and the counts of lost and sacked segments kept up to date so that
/// the common questions cost nothing per packet.
#[derive(Debug, Clone, Default)]
pub struct Flight {
    segments: VecDeque<Sent>,
    totals: Tally,
    /// Transmissions so far, new or resent.
    transmissions: u64,
}

impl Flight {
    /// Nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Records a newly sent segment.
    pub fn push(&mut self, mut sent: Sent) {
        self.transmissions += 1;
        sent.order = self.transmissions;
        self.totals.add(Tally::of(&sent));
        self.segments.push_back(sent);
    }

    /// Changes the segment at `index` with `change`, keeping the totals.
    fn update(&mut self, index: usize, change: impl FnOnce(&mut Sent)) {
        let Some(sent) = self.segments.get_mut(index) else {
            return;
        };
        let before = Tally::of(sent);
        change(sent);
        let after = Tally::of(sent);
        self.totals.sub(before);
        self.totals.add(after);
    }

    /// Removes what `ack` (a sequence position) covers; a segment
    /// acknowledged in part keeps its unacknowledged tail.
    pub fn acknowledge(&mut self, ack: u64) -> Acked {
        let mut acked = Acked::default();
        let mut ambiguous = false;
        while let Some(front) = self.segments.front() {
            if front.seq_end() <= ack {
                if !front.sacked {
                    // Every SACKed segment lies above the front.
                    let above = self.totals.sacked;
                    if front.transmissions == 1 {
                        acked.displaced = acked.displaced.max(above);
                    } else {
                        acked.displaced_if_spurious = acked.displaced_if_spurious.max(above);
                    }
                }
                acked.octets += front.seq_len();
                acked.resent |= front.transmissions > 1;
                ambiguous |= front.transmissions > 1 || front.lost;
                acked.rtt_from = Some(front.sent_at);
                acked.last_sent = acked.last_sent.max(Some(front.order));
                let once = front.transmissions == 1 && !front.sacked;
                acked.rtt_bound_from = once.then_some(front.sent_at);
                self.totals.sub(Tally::of(front));
                self.segments.pop_front();
            } else {
                if ack > front.start {
                    let cut = ack.min(front.end);
                    acked.octets += cut - front.start;
                    acked.resent |= front.transmissions > 1;
                    self.update(0, |sent| sent.start = cut);
                }
                break;
            }
        }
        if ambiguous {
            acked.rtt_from = None;
        }
        acked
    }

    /// Marks segments wholly inside a SACK block; returns whether any was
    /// newly marked. A segment carrying data and the FIN counts as inside
    /// when its data is: blocks report data (RFC 2018 section 3), and
    /// receivers such as ours end them before the FIN, which travelled in
    /// the same segment. A FIN alone is never inside one.
    pub fn apply_sack(&mut self, block: Range<u64>) -> bool {
        let mut marked = false;
        let first = self
            .segments
            .partition_point(|s| s.seq_end() <= block.start);
        for index in first..self.segments.len() {
            let sent = &self.segments[index];
            if sent.start >= block.end {
                break;
            }
            let end = if sent.end > sent.start {
                sent.end
            } else {
                sent.seq_end()
            };
            if !sent.sacked && sent.start >= block.start && end <= block.end {
                self.update(index, |sent| {
                    sent.sacked = true;
                    sent.lost = false;
                });
                marked = true;
            }
        }
        marked
    }

    /// RFC 6675 IsLost for every segment, with DupThresh `threshold`:
    /// marks as lost each unsacked segment with at least `threshold`
    /// sacked segments after it that has not been resent since it was
    /// deemed lost. Returns whether the oldest segment is now lost.
    pub fn mark_lost_by_sack(&mut self, threshold: usize) -> bool {
        if self.totals.sacked >= threshold {
            let mut sacked_after = 0;
            for index in (0..self.segments.len()).rev() {
                let sent = &self.segments[index];
                if sent.sacked {
                    sacked_after += 1;
                } else if sacked_after >= threshold && sent.transmissions == 1 && !sent.lost {
                    self.update(index, |sent| sent.lost = true);
                }
            }
        }
        self.segments.front().is_some_and(|s| s.lost)
    }

    /// Marks the oldest segment lost (fast retransmit, NewReno partial
    /// ACK), unless it was already resent and `again` is false; returns
    /// whether it did.
    pub fn mark_first_lost(&mut self, again: bool) -> bool {
        match self.segments.front() {
            Some(front) if !front.sacked && (again || front.transmissions == 1) => {
                self.update(0, |sent| sent.lost = true);
                true
            }
            _ => false,
        }
    }

    /// NewReno's partial ACK (RFC 6582 section 3.2 step 5): the oldest
    /// segment is resent, unless it was last sent after every segment
    /// the ACK covered (`last_sent`, see [`Acked::last_sent`]): then the
    /// receiver sent the ACK before that transmission could arrive, and
    /// it is still on its way, as a go-back-N retransmission after a
    /// timeout is. Returns whether it was marked lost.
    pub fn mark_first_lost_on_partial_ack(&mut self, last_sent: Option<u64>) -> bool {
        let in_flight = self
            .segments
            .front()
            .zip(last_sent)
            .is_some_and(|(front, last)| front.order > last);
        !in_flight && self.mark_first_lost(true)
    }

    /// RFC 6675 NextSeg rules 3 and 4, for when nothing is deemed lost and
    /// no new data may go: the oldest segment sent once below the highest
    /// sacked one, or else, if `rescue` allows, the newest unsacked segment
    /// when it was sent only once (the tail a loss left without SACKs
    /// above it). Marks it lost and says which rule chose it.
    pub fn mark_next_unsacked(&mut self, rescue: bool) -> Option<NextSeg> {
        if self.totals.lost > 0 || self.totals.sacked == 0 {
            return None;
        }
        let highest_sacked = self.segments.iter().rposition(|s| s.sacked);
        let below = highest_sacked.and_then(|highest| {
            self.segments
                .iter()
                .take(highest)
                .position(|s| !s.sacked && s.transmissions == 1)
        });
        let (index, rule) = match below {
            Some(index) => (index, NextSeg::BelowSack),
            None if rescue => {
                let newest = self.segments.iter().rposition(|s| !s.sacked)?;
                if self.segments[newest].transmissions > 1 {
                    return None;
                }
                (newest, NextSeg::Rescue)
            }
            None => return None,
        };
        self.update(index, |sent| sent.lost = true);
        Some(rule)
    }

    /// RACK's inference (RFC 8985 section 6.2) for a tail loss probe
    /// starting at data position `probe`: once the receiver has it
    /// (SACKed, or `delivered` as a D-SACK showed), the segments below it
    /// that it has not reported and that were last sent before it (at
    /// least a probe timeout earlier) are lost, not displaced. Marks
    /// them; returns whether any was newly marked.
    pub fn mark_lost_below_probe(&mut self, probe: u64, delivered: bool) -> bool {
        let Some(index) = self.segments.iter().position(|s| s.start == probe) else {
            return false;
        };
        let sent = &self.segments[index];
        if !sent.sacked && !delivered {
            return false;
        }
        let probed_at = sent.sent_at;
        let mut marked = false;
        for below in 0..index {
            let sent = &self.segments[below];
            if !sent.sacked && !sent.lost && sent.sent_at < probed_at {
                self.update(below, |sent| sent.lost = true);
                marked = true;
            }
        }
        marked
    }

    /// The retransmission timer expired: every segment not SACKed is to
    /// be resent (RFC 6675 section 5.1). The SACK marks stay, as section
    /// 5.1 allows where reneging is detected (RFC 2018 section 8 lets a
    /// receiver discard what it SACKed): a receiver that still holds a
    /// SACKed segment acknowledges past it once everything below has
    /// arrived, so a SACKed segment at SND.UNA shows that the receiver
    /// discarded it. Then every mark goes and the whole flight is resent.
    pub fn mark_lost_on_timeout(&mut self) {
        let reneged = self.segments.front().is_some_and(|s| s.sacked);
        let mut totals = Tally::default();
        for sent in self.segments.iter_mut() {
            sent.sacked &= !reneged;
            sent.lost = !sent.sacked;
            totals.add(Tally::of(sent));
        }
        self.totals = totals;
    }

    /// After a timeout F-RTO did not find spurious (RFC 5682 step 3a):
    /// every segment starting below `end`, the data sent before
    /// the timeout, is to be resent unless SACKed, as after any timeout
    /// (see [`Flight::mark_lost_on_timeout`]).
    pub fn mark_lost_below(&mut self, end: u64) {
        for index in 0..self.segments.len() {
            let sent = &self.segments[index];
            if sent.start >= end {
                break;
            }
            if !sent.sacked && !sent.lost {
                self.update(index, |sent| sent.lost = true);
            }
        }
    }

    /// Segments starting below `end` that were sent once and are not
    /// SACKed: the originals whose acknowledgment shows a timeout spurious
    /// (RFC 5682 section 3.1 step 3b).
    pub fn unreported_originals(&self, end: u64) -> usize {
        self.segments
            .iter()
            .take_while(|sent| sent.start < end)
            .filter(|sent| sent.transmissions == 1 && !sent.sacked)
            .count()
    }

    /// Segments in flight.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// Segments the receiver reported in SACK blocks.
    pub fn sacked(&self) -> usize {
        self.totals.sacked
    }

    /// RFC 6675's pipe: sequence space believed to be in the network.
    pub fn pipe(&self) -> u64 {
        debug_assert_eq!(
            self.totals.pipe,
            self.segments.iter().map(|s| Tally::of(s).pipe).sum::<u64>()
        );
        self.totals.pipe
    }

    /// The oldest segment deemed lost (RFC 6675 NextSeg rule 1).
    pub fn first_lost(&self) -> Option<usize> {
        if self.totals.lost == 0 {
            return None;
        }
        self.segments.iter().position(|s| s.lost)
    }

    /// The segment at `index`.
    pub fn get(&self, index: usize) -> Option<&Sent> {
        self.segments.get(index)
    }

    /// Cuts the segment at `index` in two at data position `at`, both
    /// halves keeping its flags; used when the EMSS shrank below it.
    pub fn split(&mut self, index: usize, at: u64) {
        let Some(sent) = self.segments.get(index) else {
            return;
        };
        if at <= sent.start || at >= sent.end {
            return;
        }
        let mut tail = sent.clone();
        tail.start = at;
        self.update(index, |sent| {
            sent.end = at;
            sent.fin = false;
        });
        self.totals.add(Tally::of(&tail));
        self.segments.insert(index + 1, tail);
    }

    /// Records the retransmission of the segment at `index`.
    pub fn resent(&mut self, index: usize, now: Instant) {
        self.transmissions += 1;
        let order = self.transmissions;
        self.update(index, |sent| {
            sent.order = order;
            sent.lost = false;
            sent.transmissions += 1;
            sent.sent_at = now;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(start: u64, end: u64) -> Sent {
        Sent {
            start,
            end,
            fin: false,
            sent_at: Instant(start),
            transmissions: 1,
            order: 0,
            sacked: false,
            lost: false,
        }
    }

    /// `count` segments of 100 octets, sent once.
    fn flight_of(count: u64) -> Flight {
        let mut flight = Flight::default();
        for i in 0..count {
            flight.push(sent(i * 100, i * 100 + 100));
        }
        flight
    }

    #[test]
    fn ack_sack_loss_and_pipe() {
        let mut flight = flight_of(6);
        assert_eq!(flight.pipe(), 600);
        assert!(flight.apply_sack(200..500));
        assert!(!flight.mark_lost_by_sack(4), "three SACKed above");
        assert!(flight.mark_lost_by_sack(3));
        assert_eq!(flight.first_lost(), Some(0));
        assert_eq!(flight.get(1).map(|s| s.lost), Some(true));
        assert_eq!(flight.pipe(), 100);
        flight.resent(0, Instant(1000));
        let acked = flight.acknowledge(150);
        assert_eq!(acked.octets, 150);
        assert_eq!(acked.rtt_from, None);
        assert_eq!(flight.get(0).map(|s| s.start), Some(150));
        flight.split(0, 175);
        assert_eq!(flight.get(1).map(|s| (s.start, s.end)), Some((175, 200)));
        // Rule 3 finds nothing while a segment is lost.
        assert_eq!(flight.mark_next_unsacked(true), None);
    }

    /// An ACK covering a resent hole gives no sample, but its newest
    /// segment, sent once, bounds the RTT from above; a SACKed or resent
    /// newest segment does not.
    #[test]
    fn a_resent_hole_leaves_an_upper_bound_from_the_newest_segment() {
        let mut flight = flight_of(6);
        flight.mark_first_lost(false);
        flight.resent(0, Instant(1000));
        let acked = flight.acknowledge(200);
        assert_eq!(
            (acked.rtt_from, acked.rtt_bound_from),
            (None, Some(Instant(100)))
        );
        flight.apply_sack(300..400);
        flight.resent(0, Instant(2000));
        assert_eq!(flight.acknowledge(400).rtt_bound_from, None);
        flight.resent(1, Instant(3000));
        assert_eq!(flight.acknowledge(600).rtt_bound_from, None);
    }

    #[test]
    fn a_partial_ack_resends_the_oldest_segment_unless_it_left_after_the_acked_ones() {
        let mut flight = flight_of(6);
        // Segment 0 resent (the seventh transmission) and acknowledged: 1
        // was sent before it.
        flight.resent(0, Instant(1000));
        let acked = flight.acknowledge(100);
        assert_eq!(acked.last_sent, Some(7));
        assert!(flight.mark_first_lost_on_partial_ack(acked.last_sent));
        // 1 resent, then 2 at the same instant: the ACK for 1 left the
        // receiver before 2 could arrive.
        flight.resent(0, Instant(2000));
        flight.resent(1, Instant(2000));
        let acked = flight.acknowledge(200);
        assert!(!flight.mark_first_lost_on_partial_ack(acked.last_sent));
        assert_eq!(flight.first_lost(), None);
        // Nothing wholly acknowledged: nothing to compare, resent.
        let acked = flight.acknowledge(250);
        assert_eq!(acked.last_sent, None);
        assert!(flight.mark_first_lost_on_partial_ack(acked.last_sent));
    }

    #[test]
    fn filled_holes_report_their_displacement() {
        let mut flight = flight_of(8);
        // Segments 1-3 and 5 arrived before 0 and 4.
        flight.apply_sack(100..400);
        flight.apply_sack(500..600);
        assert_eq!(flight.sacked(), 4);
        flight.mark_lost_by_sack(3);
        flight.resent(0, Instant(1000));
        // 0's original (or its retransmission) arrives: four SACKed above.
        let acked = flight.acknowledge(400);
        assert_eq!((acked.displaced, acked.displaced_if_spurious), (0, 4));
        // 4 was never resent: one SACKed segment arrived before it.
        let acked = flight.acknowledge(600);
        assert_eq!((acked.displaced, acked.displaced_if_spurious), (1, 0));
        // In order: no displacement.
        let acked = flight.acknowledge(800);
        assert_eq!((acked.displaced, acked.displaced_if_spurious), (0, 0));
    }

    #[test]
    fn after_a_real_timeout_what_was_sent_before_it_is_lost() {
        let mut flight = flight_of(6);
        flight.mark_first_lost(true);
        flight.resent(0, Instant(1000));
        assert_eq!(flight.unreported_originals(400), 3);
        flight.apply_sack(200..300);
        assert_eq!(flight.unreported_originals(400), 2);
        flight.mark_lost_below(400);
        // The SACKed segment and those sent after the timeout are not.
        let lost: Vec<bool> = (0..6).map(|i| flight.get(i).unwrap().lost).collect();
        assert_eq!(lost, [true, true, false, true, false, false]);
        assert_eq!(flight.pipe(), 200);
    }

    #[test]
    fn a_timeout_keeps_sack_marks_unless_the_receiver_reneged() {
        let mut flight = flight_of(6);
        flight.apply_sack(200..400);
        flight.mark_lost_on_timeout();
        let lost: Vec<bool> = (0..6).map(|i| flight.get(i).unwrap().lost).collect();
        assert_eq!(lost, [true, true, false, false, true, true]);
        assert_eq!((flight.sacked(), flight.pipe()), (2, 0));
        // The cumulative ACK stops at a SACKed segment: the receiver
        // discarded it, and every mark goes.
        flight.acknowledge(200);
        flight.mark_lost_on_timeout();
        assert_eq!(flight.sacked(), 0);
        assert_eq!(flight.first_lost(), Some(0));
        assert!((0..4).all(|i| flight.get(i).unwrap().lost));
        assert_eq!(flight.pipe(), 0);
    }

    #[test]
    fn a_block_ending_before_the_fin_covers_the_segment_carrying_it() {
        let mut flight = Flight::default();
        flight.push(sent(0, 100));
        flight.push(Sent {
            fin: true,
            ..sent(100, 200)
        });
        assert!(flight.apply_sack(100..200));
        assert_eq!(flight.sacked(), 1);
        assert_eq!(flight.pipe(), 100);
        // A bare FIN needs a block holding its sequence number.
        let mut flight = Flight::default();
        flight.push(Sent {
            fin: true,
            ..sent(100, 100)
        });
        assert!(!flight.apply_sack(50..100));
        assert!(flight.apply_sack(50..101));
    }

    #[test]
    fn rules_three_and_four_pick_unsacked_segments() {
        let mut flight = flight_of(5);
        flight.apply_sack(100..200);
        assert_eq!(flight.mark_next_unsacked(false), Some(NextSeg::BelowSack));
        assert_eq!(flight.first_lost(), Some(0));
        flight.resent(0, Instant(9));
        assert_eq!(
            flight.mark_next_unsacked(false),
            None,
            "nothing below the SACK"
        );
        assert_eq!(flight.mark_next_unsacked(true), Some(NextSeg::Rescue));
        assert_eq!(flight.first_lost(), Some(4));
    }
}
