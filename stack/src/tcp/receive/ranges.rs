//! A bounded set of disjoint half-open `u64` ranges.
//!
//! The receiver uses it for out-of-order data (RFC 9293 section 3.10.7.4,
//! the source of RFC 2018 SACK blocks) and the reassembly buffer for the
//! octets it holds. The bound keeps a peer that sends one octet every other
//! position from growing the set without limit.

use core::ops::Range;

/// Sorted, disjoint, non-adjacent ranges, at most `limit` of them.
#[derive(Debug, Clone)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
    limit: usize,
}

impl RangeSet {
    /// An empty set that holds at most `limit` separate ranges.
    pub fn new(limit: usize) -> Self {
        RangeSet {
            ranges: Vec::new(),
            limit: limit.max(1),
        }
    }

    /// The ranges in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Range<u64>> {
        self.ranges.iter()
    }

    /// No range at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The lowest range.
    pub fn first(&self) -> Option<Range<u64>> {
        self.ranges.first().cloned()
    }

    /// The range holding `pos`.
    pub fn containing(&self, pos: u64) -> Option<Range<u64>> {
        let i = self.ranges.partition_point(|r| r.end <= pos);
        self.ranges.get(i).filter(|r| r.start <= pos).cloned()
    }

    /// The first part of `range` already in the set.
    pub fn first_overlap(&self, range: &Range<u64>) -> Option<Range<u64>> {
        let i = self.ranges.partition_point(|r| r.end <= range.start);
        let held = self.ranges.get(i)?;
        let overlap = held.start.max(range.start)..held.end.min(range.end);
        (!overlap.is_empty()).then_some(overlap)
    }

    /// Whether adding `range` keeps the set within its limit.
    pub fn can_insert(&self, range: &Range<u64>) -> bool {
        let first = self.ranges.partition_point(|r| r.end < range.start);
        let last = self.ranges.partition_point(|r| r.start <= range.end);
        last > first || self.ranges.len() < self.limit
    }

    /// Adds `range`, merging it with any range it touches. Returns false,
    /// and changes nothing, when that would exceed the limit.
    pub fn insert(&mut self, range: Range<u64>) -> bool {
        if range.is_empty() {
            return true;
        }
        if !self.can_insert(&range) {
            return false;
        }
        let first = self.ranges.partition_point(|r| r.end < range.start);
        let last = self.ranges.partition_point(|r| r.start <= range.end);
        let mut merged = range;
        if let Some(low) = self.ranges.get(first).filter(|_| last > first) {
            merged.start = merged.start.min(low.start);
            merged.end = merged.end.max(self.ranges[last - 1].end);
        }
        self.ranges.splice(first..last, core::iter::once(merged));
        true
    }

    /// Removes every position below `pos`.
    pub fn remove_below(&mut self, pos: u64) {
        let whole = self.ranges.partition_point(|r| r.end <= pos);
        self.ranges.drain(..whole);
        if let Some(first) = self.ranges.first_mut() {
            first.start = first.start.max(pos);
        }
    }

    /// The first part of `from..end` not in the set.
    pub fn next_gap(&self, from: u64, end: u64) -> Option<Range<u64>> {
        let mut cursor = from;
        let first = self.ranges.partition_point(|r| r.end <= from);
        for held in self.ranges[first..].iter() {
            if held.start > cursor || cursor >= end {
                break;
            }
            cursor = held.end;
        }
        let stop = self.ranges[first..]
            .iter()
            .find(|r| r.start > cursor)
            .map_or(end, |r| r.start.min(end));
        (cursor < stop).then_some(cursor..stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_gaps_complement() {
        let mut set = RangeSet::new(8);
        assert!(set.insert(10..20));
        assert!(set.insert(30..40));
        assert!(set.insert(20..25));
        assert_eq!(
            set.iter().cloned().collect::<Vec<_>>(),
            vec![10..25, 30..40]
        );
        assert_eq!(set.next_gap(0, 50), Some(0..10));
        assert_eq!(set.next_gap(10, 50), Some(25..30));
        assert_eq!(set.next_gap(12, 28), Some(25..28));
        assert_eq!(set.next_gap(31, 50), Some(40..50));
        assert_eq!(set.next_gap(31, 40), None);
        assert!(set.insert(5..45));
        assert_eq!(set.iter().cloned().collect::<Vec<_>>(), vec![5..45]);
        set.remove_below(12);
        assert_eq!(set.first(), Some(12..45));
        assert_eq!(set.containing(44), Some(12..45));
        assert_eq!(set.containing(45), None);
        assert_eq!(set.first_overlap(&(0..100)), Some(12..45));
        assert_eq!(set.first_overlap(&(20..30)), Some(20..30));
        assert_eq!(set.first_overlap(&(45..50)), None);
        assert_eq!(set.first_overlap(&(0..12)), None);
    }

    #[test]
    fn limit_refuses_new_ranges_but_allows_merges() {
        let mut set = RangeSet::new(2);
        assert!(set.insert(0..1));
        assert!(set.insert(2..3));
        assert!(!set.insert(4..5));
        assert!(set.insert(1..2));
        assert!(set.insert(4..5));
    }
}
