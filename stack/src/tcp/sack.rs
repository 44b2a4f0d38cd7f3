//! The receiver's SACK blocks (RFC 2018 section 4): the block holding the
//! most recently received out-of-order segment comes first, then the
//! blocks reported most recently, then the highest others, up to three
//! (the room left beside a timestamp option).

use super::ranges::RangeSet;
use core::ops::Range;

/// Blocks one option carries.
pub const MAX_BLOCKS: usize = 3;

/// Recent out-of-order arrivals, newest first.
#[derive(Debug, Clone, Default)]
pub struct SackHistory {
    recent: [Option<u64>; MAX_BLOCKS],
}

impl SackHistory {
    /// Notes an out-of-order arrival at `pos`.
    pub fn arrived(&mut self, pos: u64) {
        self.recent.rotate_right(1);
        self.recent[0] = Some(pos);
    }

    /// The blocks to report for `ooo`, the out-of-order data held beyond
    /// the left edge.
    pub fn blocks(&self, ooo: &RangeSet) -> [Option<Range<u64>>; MAX_BLOCKS] {
        let mut blocks: [Option<Range<u64>>; MAX_BLOCKS] = Default::default();
        let recent = self
            .recent
            .iter()
            .flatten()
            .filter_map(|&pos| ooo.containing(pos));
        let candidates = recent.chain(ooo.iter().rev().cloned());
        let mut filled = 0;
        for block in candidates {
            if filled == MAX_BLOCKS {
                break;
            }
            if !blocks[..filled].contains(&Some(block.clone())) {
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
}
