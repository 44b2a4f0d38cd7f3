//! The receiver's SACK blocks (RFC 2018 section 4): the block holding the
//! most recently received out-of-order segment comes first, then the
//! blocks reported most recently, then the highest others, up to three
//! (the room left beside a timestamp option).
//!
//! A segment that brought octets already received puts a D-SACK block
//! before them (RFC 2883 section 4): the first duplicate run of that
//! segment, reported once, followed by the out-of-order block holding it
//! when there is one. Senders use it to find retransmissions that were
//! not needed (see [`crate::tcp::recovery::spurious`]).

use crate::tcp::receive::ranges::RangeSet;
use core::ops::Range;

/// Blocks one option carries.
pub const MAX_BLOCKS: usize = 3;

/// Recent out-of-order arrivals, newest first, and the duplicate to
/// report.
#[derive(Debug, Clone, Default)]
pub struct SackHistory {
    recent: [Option<u64>; MAX_BLOCKS],
    duplicate: Option<Range<u64>>,
}

impl SackHistory {
    /// Notes an out-of-order arrival at `pos`.
    pub fn arrived(&mut self, pos: u64) {
        self.recent.rotate_right(1);
        self.recent[0] = Some(pos);
    }

    /// Notes that the latest segment brought `range` again; it goes in
    /// the next SACK option, replacing a duplicate not yet reported.
    pub fn duplicate(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.duplicate = Some(range);
        }
    }

    /// The SACK blocks went out, the D-SACK block first if there was one
    /// (returns whether): each duplicate is reported once (RFC 2883
    /// section 4, rule 2).
    pub fn duplicate_reported(&mut self) -> bool {
        self.duplicate.take().is_some()
    }

    /// Whether there is any block to report for `ooo`: data held out of
    /// order, or a duplicate. Nearly every segment has none, and asking
    /// first spares it building the array of [`SackHistory::blocks`].
    pub fn any(&self, ooo: &RangeSet) -> bool {
        self.duplicate.is_some() || !ooo.is_empty()
    }

    /// The blocks to report for `ooo`, the out-of-order data held beyond
    /// the left edge.
    pub fn blocks(&self, ooo: &RangeSet) -> [Option<Range<u64>>; MAX_BLOCKS] {
        let mut blocks: [Option<Range<u64>>; MAX_BLOCKS] = Default::default();
        // The D-SACK block stands apart: the block holding it may repeat
        // it exactly (rule 4 wants it there all the same).
        let first = usize::from(self.duplicate.is_some());
        blocks[0].clone_from(&self.duplicate);
        let holding = self
            .duplicate
            .as_ref()
            .and_then(|d| ooo.containing(d.start));
        let recent = self
            .recent
            .iter()
            .flatten()
            .filter_map(|&pos| ooo.containing(pos));
        let candidates = holding
            .into_iter()
            .chain(recent)
            .chain(ooo.iter().rev().cloned());
        let mut filled = first;
        for block in candidates {
            if filled == MAX_BLOCKS {
                break;
            }
            if !blocks[first..filled].contains(&Some(block.clone())) {
                blocks[filled] = Some(block);
                filled += 1;
            }
        }
        blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_block_first() {
        let mut ooo = RangeSet::new(8);
        for range in [10..20, 30..40, 50..60, 70..80] {
            ooo.insert(range);
        }
        let mut history = SackHistory::default();
        history.arrived(35);
        history.arrived(12);
        let blocks = history.blocks(&ooo);
        assert_eq!(blocks, [Some(10..20), Some(30..40), Some(70..80)]);
    }

    #[test]
    fn in_order_data_has_no_blocks_but_a_duplicate_still_gets_one() {
        let ooo = RangeSet::new(8);
        let mut history = SackHistory::default();
        assert!(!history.any(&ooo));
        assert_eq!(history.blocks(&ooo), [None, None, None]);
        history.duplicate(5..9);
        assert!(history.any(&ooo));
        assert_eq!(history.blocks(&ooo), [Some(5..9), None, None]);
    }

    #[test]
    fn a_duplicate_comes_first_then_the_block_holding_it() {
        let mut ooo = RangeSet::new(8);
        for range in [10..20, 30..40, 50..60] {
            ooo.insert(range);
        }
        let mut history = SackHistory::default();
        history.arrived(55);
        history.duplicate(32..36);
        assert_eq!(
            history.blocks(&ooo),
            [Some(32..36), Some(30..40), Some(50..60)]
        );
        // Below the left edge: no block holds it.
        history.duplicate(0..5);
        assert_eq!(
            history.blocks(&ooo),
            [Some(0..5), Some(50..60), Some(30..40)]
        );
        assert!(history.duplicate_reported());
        assert!(!history.duplicate_reported());
        assert_eq!(
            history.blocks(&ooo),
            [Some(50..60), Some(30..40), Some(10..20)]
        );
        history.duplicate(7..7);
        assert_eq!(history.blocks(&ooo)[0], Some(50..60), "nothing to report");
        // A whole block again: it is both the D-SACK and the block after.
        history.duplicate(50..60);
        assert_eq!(
            history.blocks(&ooo),
            [Some(50..60), Some(50..60), Some(30..40)]
        );
    }
}
