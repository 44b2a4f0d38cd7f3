//! The depth of a work queue: how many work requests may be outstanding
//! on a queue pair's send or receive queue (`max_send_wr`, `max_recv_wr`)
//! or on a shared receive queue (`max_wr`), and how many are.
//!
//! As in the kernel's providers, posting beyond the depth fails with
//! `ENOMEM` and posts nothing. A work request holds its slot from its post
//! until its completion is about to become visible in its completion
//! queue (freed just before the push, so that an application that polls
//! the completion and posts again at once finds the slot free; taken back
//! if the push finds the queue full). A successful unsignaled send, which
//! makes no completion, frees its slot once it has completed, as on Linux
//! siw (a hardware provider frees it only when a later signaled
//! completion is polled). A queue's memory is so bounded by its depth:
//! a chain of work requests that loops back on itself stops with `ENOMEM`.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

/// The slots of one work queue.
#[derive(Debug)]
pub(crate) struct Slots {
    depth: usize,
    taken: AtomicUsize,
}

impl Slots {
    /// A queue of `depth` slots, none taken.
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            depth,
            taken: AtomicUsize::new(0),
        }
    }

    /// How many work requests the queue holds at most.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// How many are outstanding.
    pub(crate) fn taken(&self) -> usize {
        self.taken.load(Ordering::Acquire)
    }

    /// Takes a slot for a work request being posted; the kernel's verbs'
    /// `ENOMEM` when every slot is taken.
    pub(crate) fn take(&self) -> Result<(), Error> {
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < self.depth).then_some(taken + 1)
            })
            .map(drop)
            .map_err(|_| queue_full())
    }

    /// Frees `count` slots: their work requests completed, and their
    /// completion (if they make one) is being pushed to its queue.
    pub(crate) fn free(&self, count: usize) {
        if count > 0 {
            self.taken.fetch_sub(count, Ordering::AcqRel);
        }
    }

    /// Takes back `count` slots just freed, whatever the depth: the
    /// completion that freed them found its queue full and waits.
    pub(crate) fn take_back(&self, count: usize) {
        self.taken.fetch_add(count, Ordering::AcqRel);
    }
}

/// What a post to a full work queue fails with: `ENOMEM`, the kernel's
/// verbs' answer (`ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`).
pub(crate) fn queue_full() -> Error {
    Error::Io(io::Error::from_raw_os_error(libc::ENOMEM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_takes_as_many_as_its_depth_then_refuses_with_enomem() {
        let slots = Slots::new(2);
        slots.take().unwrap();
        slots.take().unwrap();
        let Err(Error::Io(full)) = slots.take() else {
            panic!("a third request fits a queue of two");
        };
        assert_eq!(full.raw_os_error(), Some(libc::ENOMEM));
        slots.free(1);
        slots.take().unwrap();
        assert_eq!(slots.taken(), 2);
    }

    #[test]
    fn slots_taken_back_count_even_beyond_the_depth() {
        let slots = Slots::new(1);
        slots.take().unwrap();
        slots.free(1);
        // A post slipped in between the free and the failed push.
        slots.take().unwrap();
        slots.take_back(1);
        assert_eq!(slots.taken(), 2);
        assert!(slots.take().is_err());
        slots.free(2);
        assert_eq!(slots.taken(), 0);
    }
}
