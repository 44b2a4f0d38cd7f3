//! Spurious fast retransmits and retransmission timeouts, found with
//! D-SACK and undone.
//!
//! - [`dsack_block`]: which SACK block of an ACK is a D-SACK, the
//!   sender's side of RFC 2883 section 4 (the receiver's is in
//!   [`crate::tcp::receive::sack`]).
//! - [`Episode`]: the retransmissions of one fast recovery, or of the
//!   timeouts of one loss, counted down by the D-SACKs that report them
//!   as duplicates (RFC 3708 section 3, with D-SACKs matched to the
//!   retransmitted ranges rather than counted). When every
//!   retransmission came back as a duplicate, or the recovery ended
//!   before any was sent (the ACK that filled its hole came in the same
//!   burst as those that started it), the original segments had all
//!   arrived: the recovery answered reordering or a delay, not loss,
//!   and the connection restores the congestion state kept here (the
//!   response of RFC 4015 section 3.2, see
//!   [`crate::tcp::recovery::congestion::Congestion::undo`]).
//!
//! Only D-SACKs are trusted, not timestamps (RFC 3522's Eifel detection):
//! with a timestamp clock of 1 ms a retransmission and the original it
//! duplicates carry the same value on any datacenter path.
//!
//! A network that duplicates a retransmission whose original was lost
//! makes a recovery look spurious (RFC 3708 section 4 discusses it); the
//! worst that does is one window not reduced. A receiver lying with
//! D-SACKs gains no more than one that lies with ACKs (RFC 3708 section
//! 5): blocks are believed only for ranges this episode resent, each
//! once.

use crate::tcp::recovery::congestion::Congestion;
use crate::tcp::seq::Seq;
use core::ops::Range;
use std::collections::VecDeque;

/// Retransmissions of one fast recovery tracked at most: an episode with
/// more was not one displaced segment, and is never undone. A timeout
/// may resend every segment in flight once, and tracks that many more.
const MAX_TRACKED: usize = 8;

/// The D-SACK block of an ACK acknowledging `ack`, as sequence numbers
/// `(left, right)`, if its first SACK block is one (RFC 2883 section 4):
/// a block at or below the cumulative acknowledgment, or inside the
/// second block. Empty or inverted blocks are none.
pub fn dsack_block(blocks: &[Option<(u32, u32)>], ack: Seq) -> Option<(Seq, Seq)> {
    let (left, right) = blocks.first().copied().flatten()?;
    let (left, right) = (Seq(left), Seq(right));
    if !left.lt(right) {
        return None;
    }
    let below_ack = right.le(ack);
    let inside_second = blocks
        .get(1)
        .copied()
        .flatten()
        .is_some_and(|(l2, r2)| Seq(l2).le(left) && right.le(Seq(r2)));
    (below_ack || inside_second).then_some((left, right))
}

/// One fast recovery, or the timeouts of one loss: the congestion state
/// before its reduction, and its retransmissions no D-SACK has reported
/// yet.
#[derive(Debug, Clone)]
pub struct Episode {
    prior: Congestion,
    /// Data ranges resent and not yet reported duplicate, oldest first.
    pending: VecDeque<Range<u64>>,
    /// Retransmissions tracked at most.
    limit: usize,
    /// Retransmission timeouts in the episode; none in a fast recovery.
    timeouts: u64,
    /// Something was resent.
    resent: bool,
    /// Data resent before the episode was acknowledged during it, before
    /// the episode resent anything: that retransmission, not a late
    /// original, may have filled the hole. Never undo.
    earlier_repair: bool,
    /// A retransmission could not be tracked: never undo.
    untracked: bool,
    /// The largest displacement of a resent hole acknowledged while
    /// later segments were SACKed (see [`crate::tcp::recovery::reordering`]).
    displacement: usize,
}

impl Episode {
    /// A fast recovery entered with congestion state `prior` (before the
    /// cut).
    pub fn new(prior: Congestion) -> Self {
        Episode {
            prior,
            pending: VecDeque::new(),
            limit: MAX_TRACKED,
            timeouts: 0,
            resent: false,
            earlier_repair: false,
            untracked: false,
            displacement: 0,
        }
    }

    /// A retransmission timeout with congestion state `prior` before it
    /// and `in_flight` segments to resend at most.
    pub fn timed_out(prior: Congestion, in_flight: usize) -> Self {
        Episode {
            limit: in_flight.saturating_add(MAX_TRACKED),
            timeouts: 1,
            ..Episode::new(prior)
        }
    }

    /// Another timeout before the recovery from the first ended: shown
    /// needless, they are undone together.
    pub fn timed_out_again(&mut self) {
        self.timeouts += 1;
    }

    /// The retransmission timeouts in the episode.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// The data range `range` was resent. One without data (a FIN) can
    /// never be reported, so the episode can never be shown spurious.
    pub fn resent(&mut self, range: Range<u64>) {
        self.resent = true;
        if range.is_empty() || self.pending.len() >= self.limit {
            self.untracked = true;
        } else {
            self.pending.push_back(range);
        }
    }

    /// A D-SACK reported `block` (stream positions) received twice: one
    /// pending retransmission it covers was a duplicate. Returns whether
    /// it matched one.
    pub fn duplicate(&mut self, block: &Range<u64>) -> bool {
        let covered = self
            .pending
            .iter()
            .position(|r| block.start <= r.start && r.end <= block.end);
        if let Some(index) = covered {
            self.pending.remove(index);
        }
        covered.is_some()
    }

    /// A resent hole was acknowledged with `displacement` later segments
    /// SACKed: if its retransmission proves spurious, the original was
    /// displaced by that much.
    pub fn displaced(&mut self, displacement: usize) {
        self.displacement = self.displacement.max(displacement);
    }

    /// A cumulative ACK during the episode covered data that had been
    /// sent more than once (by the episode itself, once it resent
    /// something, as far as can be told).
    pub fn acknowledged_resent(&mut self) {
        self.earlier_repair |= !self.resent;
    }

    /// Every retransmission came back as a duplicate (none made counts),
    /// and no earlier one repaired a hole before the first. Asked once
    /// the recovery ended: then every original had arrived.
    pub fn spurious(&self) -> bool {
        !self.earlier_repair && !self.untracked && self.pending.is_empty()
    }

    /// The congestion state before the reduction.
    pub fn prior(&self) -> &Congestion {
        &self.prior
    }

    /// The displacement that made the recovery spurious, 0 if unknown.
    pub fn displacement(&self) -> usize {
        self.displacement
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::recovery::congestion::CongestionControl;

    #[test]
    fn first_block_below_the_ack_or_inside_the_second_is_a_dsack() {
        let ack = Seq(1000);
        let below = [Some((500, 600)), Some((1200, 1300)), None];
        assert_eq!(dsack_block(&below, ack), Some((Seq(500), Seq(600))));
        let inside = [Some((1200, 1250)), Some((1200, 1300)), None];
        assert_eq!(dsack_block(&inside, ack), Some((Seq(1200), Seq(1250))));
        let plain = [Some((1200, 1300)), Some((1400, 1500)), None];
        assert_eq!(dsack_block(&plain, ack), None);
        let straddling = [Some((900, 1100)), None, None];
        assert_eq!(dsack_block(&straddling, ack), None);
        let inverted = [Some((600, 500)), None, None];
        assert_eq!(dsack_block(&inverted, ack), None);
        assert_eq!(dsack_block(&[None, None, None], ack), None);
        // Across the sequence wrap.
        let wrapped = [Some((u32::MAX - 10, 5)), None, None];
        assert_eq!(
            dsack_block(&wrapped, Seq(100)),
            Some((Seq(u32::MAX - 10), Seq(5)))
        );
    }

    #[test]
    fn spurious_once_every_retransmission_is_reported_once() {
        let mut episode = Episode::new(Congestion::new(CongestionControl::NewReno, 1000, 10));
        assert!(episode.spurious(), "nothing resent: nothing was lost");
        let mut repaired = episode.clone();
        repaired.acknowledged_resent();
        assert!(!repaired.spurious(), "a hole resent before filled");
        episode.resent(1000..2000);
        episode.resent(5000..6000);
        assert!(!episode.duplicate(&(1000..1500)), "partial cover");
        assert!(episode.duplicate(&(1000..2000)));
        assert!(!episode.duplicate(&(1000..2000)), "each once");
        assert!(!episode.spurious());
        assert!(episode.duplicate(&(4000..7000)));
        assert!(episode.spurious());
        episode.displaced(3);
        episode.displaced(2);
        assert_eq!(episode.displacement(), 3);
    }

    #[test]
    fn a_timeout_tracks_its_flight_and_counts_the_timeouts_it_joins() {
        let prior = Congestion::new(CongestionControl::NewReno, 1000, 10);
        let flight = MAX_TRACKED as u64 * 4;
        let mut episode = Episode::timed_out(prior, flight as usize);
        // The first segment resent at each of two timeouts, then the
        // rest of the flight.
        episode.resent(0..1000);
        episode.timed_out_again();
        assert_eq!(episode.timeouts(), 2);
        for i in 0..flight {
            episode.resent(i * 1000..i * 1000 + 1000);
        }
        for i in 0..flight {
            assert!(episode.duplicate(&(i * 1000..i * 1000 + 1000)));
        }
        assert!(!episode.spurious(), "one copy of the first not reported");
        assert!(episode.duplicate(&(0..1000)));
        assert!(episode.spurious());
    }

    #[test]
    fn untracked_retransmissions_forbid_the_undo() {
        let prior = Congestion::new(CongestionControl::NewReno, 1000, 10);
        let mut fin = Episode::new(prior.clone());
        fin.resent(7000..7000);
        assert!(!fin.spurious());
        let mut many = Episode::new(prior);
        for i in 0..=MAX_TRACKED as u64 {
            many.resent(i * 1000..i * 1000 + 1000);
        }
        for i in 0..=MAX_TRACKED as u64 {
            many.duplicate(&(i * 1000..i * 1000 + 1000));
        }
        assert!(!many.spurious());
    }
}
