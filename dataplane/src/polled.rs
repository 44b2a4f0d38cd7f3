//! Queues a spinning consumer polls: [`Polled::take`] looks before it
//! pops.
//!
//! crossbeam's `pop` on an empty `ArrayQueue` or `SegQueue` runs a
//! sequentially consistent fence before it gives up (so that an empty
//! answer is linearizable), an `mfence` on x86: tens of cycles, paid by
//! every idle turn of a poll loop, several times over. `is_empty` reads
//! the head and the tail only. A consumer that polls again anyway loses
//! nothing by an item pushed between the look and the pop: it takes it at
//! its next turn. One that must not miss an item at a given point (after
//! a doorbell it waited for, say) still sees it, since the acquire that
//! observed the doorbell orders the producer's push before the look.

use crossbeam_queue::{ArrayQueue, SegQueue};

/// A queue with a pop for polling consumers.
pub trait Polled<T> {
    /// Takes the oldest item, if the queue looks non-empty.
    fn take(&self) -> Option<T>;
}

impl<T> Polled<T> for ArrayQueue<T> {
    fn take(&self) -> Option<T> {
        if self.is_empty() {
            None
        } else {
            self.pop()
        }
    }
}

impl<T> Polled<T> for SegQueue<T> {
    fn take(&self) -> Option<T> {
        if self.is_empty() {
            None
        } else {
            self.pop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_gives_items_in_order_then_none() {
        let array = ArrayQueue::new(4);
        let segments = SegQueue::new();
        for n in 1..=3 {
            array.push(n).unwrap();
            segments.push(n);
        }
        for n in 1..=3 {
            assert_eq!(array.take(), Some(n));
            assert_eq!(segments.take(), Some(n));
        }
        assert_eq!(array.take(), None);
        assert_eq!(segments.take(), None);
    }
}
