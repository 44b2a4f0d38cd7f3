//! The reordering a sender has seen on its path, in segments, and the
//! duplicate threshold it sets: RFC 6675's DupThresh made adaptive, the
//! way Linux's `tp->reordering` is.
//!
//! A segment that arrives after `d` segments sent later than it is
//! "displaced by `d`". With the fixed DupThresh of 3 every displacement of
//! 3 or more is taken for a loss: a spurious fast retransmit and a
//! window cut. The sender measures displacement where it is certain (a
//! hole at the front of the flight acknowledged without ever having been
//! resent, while `d` later segments were SACKed) or confirmed (a resent
//! hole whose retransmission a D-SACK then reports as a duplicate, see
//! [`crate::tcp::recovery::spurious`]), and raises the threshold to `d + 1`, so that
//! reordering as deep as the path showed no longer looks like loss.
//!
//! The threshold only grows, up to [`MAX_REORDERING`], except after a
//! retransmission timeout that fired outside recovery while the default
//! threshold would have detected the loss: then it returns to
//! [`DUP_THRESH`] (as Linux does in `tcp_enter_loss`), so a path whose
//! reordering went away, or a threshold a hostile receiver talked up,
//! costs at most one timeout.
//!
//! Early retransmit (RFC 5827) lowers the threshold for a flight of two
//! or three segments to one below its size. Its reordering mitigation
//! (section 4, the first option: off once shown spurious, as Linux did)
//! is [`Reordering::early_threshold`]: off for flights whose threshold
//! the deepest displacement seen, by either measure, would have reached.
//! That one is never forgotten, as early retransmit has no timeout to
//! undo it by.

/// RFC 6675's DupThresh, the threshold before any reordering is seen.
pub const DUP_THRESH: usize = 3;

/// The highest the threshold goes. Deep enough for link-layer and
/// multipath reordering of a few tens of segments; beyond it a window of
/// fewer segments could never see enough SACKs to detect a loss without a
/// timeout.
pub const MAX_REORDERING: usize = 32;

/// The learned duplicate threshold of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reordering {
    threshold: usize,
    /// The deepest displacement observed, 0 before any.
    deepest: usize,
}

impl Default for Reordering {
    fn default() -> Self {
        Reordering {
            threshold: DUP_THRESH,
            deepest: 0,
        }
    }
}

impl Reordering {
    /// SACKed segments above a hole (or duplicate ACKs) that make it lost.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Whether the path has shown reordering the default threshold could
    /// take for loss.
    pub fn seen(&self) -> bool {
        self.threshold > DUP_THRESH
    }

    /// A segment arrived displaced by `displacement` segments; returns
    /// whether the threshold rose.
    pub fn observed(&mut self, displacement: usize) -> bool {
        self.deepest = self.deepest.max(displacement);
        let wanted = displacement.saturating_add(1).min(MAX_REORDERING);
        let raised = wanted > self.threshold;
        self.threshold = self.threshold.max(wanted);
        raised
    }

    /// Early retransmit's threshold (RFC 5827 section 3.1, segment-based:
    /// ER_thresh, one below the `outstanding` segments) for a flight that
    /// no new data can follow, if it is below DupThresh and above every
    /// displacement seen (section 4's mitigation); `None` otherwise.
    pub fn early_threshold(&self, outstanding: usize) -> Option<usize> {
        let threshold = outstanding.checked_sub(1)?;
        (threshold > self.deepest && threshold < DUP_THRESH).then_some(threshold)
    }

    /// A retransmission timeout fired outside recovery with `sacked`
    /// segments SACKed: if the default threshold would have called the
    /// loss without it, the learned one was too high and is forgotten.
    pub fn timed_out(&mut self, sacked: usize) {
        if sacked >= DUP_THRESH {
            self.threshold = DUP_THRESH;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rises_to_one_above_the_displacement_and_is_capped() {
        let mut reordering = Reordering::default();
        assert!(!reordering.observed(1));
        assert!(!reordering.observed(2));
        assert_eq!(reordering.threshold(), DUP_THRESH);
        assert!(!reordering.seen());
        assert!(reordering.observed(3));
        assert!(reordering.seen());
        assert_eq!(reordering.threshold(), 4);
        assert!(!reordering.observed(2), "it never falls on smaller ones");
        assert!(reordering.observed(usize::MAX));
        assert_eq!(reordering.threshold(), MAX_REORDERING);
    }

    #[test]
    fn early_threshold_is_for_two_or_three_segments_deeper_than_seen() {
        let mut reordering = Reordering::default();
        let early = |r: &Reordering| (0..6).map(|n| r.early_threshold(n)).collect::<Vec<_>>();
        assert_eq!(
            early(&reordering),
            [None, None, Some(1), Some(2), None, None]
        );
        reordering.observed(1);
        assert_eq!(early(&reordering), [None, None, None, Some(2), None, None]);
        reordering.observed(9);
        reordering.timed_out(3);
        assert_eq!(early(&reordering), [None; 6], "never forgotten");
    }

    #[test]
    fn a_timeout_the_default_would_have_avoided_resets_it() {
        let mut reordering = Reordering::default();
        reordering.observed(9);
        reordering.timed_out(2);
        assert_eq!(reordering.threshold(), 10, "too few SACKs: no evidence");
        reordering.timed_out(3);
        assert_eq!(reordering.threshold(), DUP_THRESH);
    }
}
