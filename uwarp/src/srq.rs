//! Shared receive queues (`ibv_srq`): receives posted once and taken by
//! whichever of its queue pairs gets a Send first (the RDMAC verbs' SRQ
//! over RFC 5040 section 5's receive queue), at most `max_wr` of them
//! outstanding.

use std::sync::Arc;

use uwarp_stack::rdmap;
use uwarp_stack::verbs::RecvWr;

use crate::error::Error;
use crate::slots::Slots;

/// A shared receive queue. Cheap to clone; every clone is the same queue.
#[derive(Debug, Clone)]
pub struct SharedReceiveQueue {
    /// The receives, as the queue pairs' engines take them.
    pub(crate) queue: Arc<rdmap::SharedReceiveQueue>,
    /// Its depth: a receive holds its slot until its completion, on the
    /// receive completion queue of the queue pair that took it.
    pub(crate) slots: Arc<Slots>,
}

impl SharedReceiveQueue {
    /// An empty queue holding at most `max_wr` receives.
    pub(crate) fn new(max_wr: usize) -> Self {
        Self {
            queue: Arc::new(rdmap::SharedReceiveQueue::new()),
            slots: Arc::new(Slots::new(max_wr)),
        }
    }

    /// Posts a receive (`ibv_post_srq_recv`); `ENOMEM` when `max_wr`
    /// receives are outstanding (posted and not yet completed).
    pub fn post(&self, wr: RecvWr) -> Result<(), Error> {
        self.slots.take()?;
        self.queue.post(wr);
        Ok(())
    }

    /// How many receives it holds at most.
    pub fn max_wr(&self) -> usize {
        self.slots.depth()
    }

    /// How many receives are outstanding: posted, or taken by a queue
    /// pair and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.slots.taken()
    }
}
