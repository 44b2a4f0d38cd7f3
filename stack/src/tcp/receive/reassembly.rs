//! The bounded reassembly buffer (RFC 5044 A.5.2): octets the consumer
//! declined to place, in order or not, held by stream position until the
//! application reads them.
//!
//! It is a ring covering positions `[base, base + capacity)`; `base` never
//! passes the receiver's left edge nor the oldest octet held, so whatever
//! the window lets in has a slot. Whenever it holds nothing, the next
//! octet stored goes to the ring's start (its `origin` moves to `base`),
//! so a connection that needs the buffer now and then keeps reusing its
//! first pages rather than touching, and keeping resident, all of them.

use crate::tcp::receive::ranges::RangeSet;
use crate::tcp::ring_block::RingBlock;

/// Declined octets by stream position.
#[derive(Debug)]
pub struct Reassembly {
    ring: RingBlock,
    base: u64,
    /// The position whose slot is the ring's start; at most `base`.
    origin: u64,
    held: RangeSet,
}

impl Reassembly {
    /// An empty buffer of `capacity` octets holding at most `max_ranges`
    /// separate runs.
    pub fn new(capacity: usize, max_ranges: usize) -> Self {
        Reassembly {
            ring: RingBlock::new(capacity),
            base: 0,
            origin: 0,
            held: RangeSet::new(max_ranges),
        }
    }

    /// Octets the buffer can hold.
    pub fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// The first position the buffer cannot hold.
    pub fn limit(&self) -> u64 {
        self.base + self.ring.len() as u64
    }

    /// Stores `data` at `pos` (at or after the left edge); returns how many
    /// leading octets fit.
    pub fn store(&mut self, pos: u64, data: &[u8]) -> usize {
        if pos < self.base {
            return 0;
        }
        let fits = (self.limit().saturating_sub(pos) as usize).min(data.len());
        if self.held.is_empty() {
            self.origin = self.base;
        }
        if fits == 0 || !self.held.insert(pos..pos + fits as u64) {
            return 0;
        }
        let cap = self.ring.len();
        let at = self.index(pos);
        let first = fits.min(cap - at);
        let ring = self.ring.as_mut_slice();
        ring[at..at + first].copy_from_slice(&data[..first]);
        ring[..fits - first].copy_from_slice(&data[first..fits]);
        fits
    }

    /// The oldest run of held octets below `left_edge`, as one contiguous
    /// slice (a run that wraps the ring comes in two calls).
    pub fn readable(&self, left_edge: u64) -> Option<(u64, &[u8])> {
        let run = self.held.first()?;
        if run.start >= left_edge {
            return None;
        }
        let cap = self.ring.len();
        let at = self.index(run.start);
        let len = ((run.end.min(left_edge) - run.start) as usize).min(cap - at);
        Some((run.start, &self.ring.as_slice()[at..at + len]))
    }

    /// The slot of `pos`, a position at or after `origin`.
    fn index(&self, pos: u64) -> usize {
        ((pos - self.origin) % self.ring.len() as u64) as usize
    }

    /// Forgets everything held below `pos` and moves the ring forward.
    pub fn release(&mut self, pos: u64, left_edge: u64) {
        self.held.remove_below(pos.min(left_edge));
        self.settle(left_edge);
    }

    /// Moves `base` up to the oldest held octet or the left edge.
    pub fn settle(&mut self, left_edge: u64) {
        let oldest = self
            .held
            .first()
            .map_or(left_edge, |r| r.start.min(left_edge));
        self.base = self.base.max(oldest);
    }

    /// Drops whatever is held and gives the ring's memory back, keeping
    /// one octet. Only for a connection that will receive no more data
    /// and whose application reads no more (TIME-WAIT, after its end):
    /// later octets would find no room.
    pub fn free_ring(&mut self) {
        self.held.remove_below(u64::MAX);
        self.ring = RingBlock::new(1);
        self.origin = self.base;
    }

    /// Octets held below `left_edge`, ready to read.
    pub fn ready(&self, left_edge: u64) -> usize {
        self.held
            .iter()
            .take_while(|r| r.start < left_edge)
            .map(|r| (r.end.min(left_edge) - r.start) as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_out_of_order_and_reads_in_order() {
        let mut buf = Reassembly::new(8, 4);
        assert_eq!(buf.store(4, &[4, 5, 6]), 3);
        assert_eq!(buf.readable(0), None);
        assert_eq!(buf.store(0, &[0, 1, 2, 3]), 4);
        assert_eq!(buf.readable(7), Some((0, &[0, 1, 2, 3, 4, 5, 6][..])));
        buf.release(5, 7);
        assert_eq!(buf.ready(7), 2);
        // Positions up to 13 fit now; the ring wraps.
        assert_eq!(buf.store(7, &[7, 8, 9, 10, 11, 12, 13, 14]), 6);
        assert_eq!(buf.readable(13), Some((5, &[5, 6, 7][..])));
    }

    #[test]
    fn an_empty_buffer_stores_from_the_rings_start_again() {
        let mut buf = Reassembly::new(8, 4);
        let start = buf.ring.as_ptr() as usize;
        assert_eq!(buf.store(0, &[0, 1, 2]), 3);
        buf.release(3, 3);
        // Empty: position 3 goes to the ring's start, and the next 8
        // positions all fit without wrapping.
        assert_eq!(buf.store(5, &[5, 6, 7, 8, 9, 10]), 6);
        assert_eq!(buf.store(3, &[3, 4]), 2);
        let (pos, run) = buf.readable(11).unwrap();
        assert_eq!((pos, run), (3, &[3, 4, 5, 6, 7, 8, 9, 10][..]));
        assert_eq!(run.as_ptr() as usize, start);
        // Something still held: no move.
        buf.release(9, 11);
        assert_eq!(buf.store(11, &[11, 12]), 2);
        assert_eq!(buf.readable(13), Some((9, &[9, 10][..])));
        buf.release(11, 13);
        assert_eq!(buf.readable(13), Some((11, &[11, 12][..])));
        assert_eq!(buf.ring.as_slice()[..2], [11, 12]);
    }
}
