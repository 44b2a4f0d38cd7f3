//! [`Doorbell`]: how a thread outside the dataplane (an application
//! posting work requests) asks the core that owns a flow to drive it.
//!
//! A dataplane core drives a flow when a segment or a timer concerns it;
//! work the application posts on its own thread concerns neither. Ringing
//! queues the flow's 4-tuple on its core's lock-free queue, once until
//! the core picks it up, so the queue never holds a flow twice and a poll
//! costs nothing more while no doorbell rang.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::net::FourTuple;
use crossbeam_queue::SegQueue;

/// The flows whose doorbells rang, in the order they rang.
pub(crate) type Rung = SegQueue<FourTuple>;

/// One flow's doorbell. Cheap to clone; every clone rings the same flow.
#[derive(Clone, Debug)]
pub struct Doorbell {
    tuple: FourTuple,
    armed: Arc<AtomicBool>,
    rung: Arc<Rung>,
}

impl Doorbell {
    /// The doorbell of the flow `tuple` on the core that reads `rung`.
    pub fn new(tuple: FourTuple, rung: Arc<Rung>) -> Self {
        Doorbell {
            tuple,
            armed: Arc::new(AtomicBool::new(false)),
            rung,
        }
    }

    /// Asks the core to drive the flow at its next poll. Called after
    /// the work is posted. Sequentially consistent, as the core's answer
    /// is: of a ring and an answer that race, one sees the other, so the
    /// work is never left with no drive to take it.
    pub fn ring(&self) {
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.rung.push(self.tuple);
        }
    }

    /// Whether the doorbell rang and the core has not taken the flow off
    /// its queue yet: the application posted work the flow has not seen.
    /// (The core's queue is looked at first: it is shared by every flow of
    /// the core, so an empty one answers without touching this flow's
    /// own flag.)
    pub(crate) fn is_pending(&self) -> bool {
        !self.rung.is_empty() && self.armed.load(Ordering::Acquire)
    }

    /// The core is about to drive the flow (for its doorbell, or for
    /// input or a timer): the next ring queues it again. Called before the
    /// flow is driven, so work posted while it is driven rings anew.
    ///
    /// A swap, not a store: the drive then reads whether work was posted,
    /// and a plain store could still wait in this core's store buffer
    /// while that read runs (x86 lets a load pass an older store). An
    /// application posting at that moment would find the doorbell still
    /// armed and not ring, and the drive would not see its work: posted
    /// and never sent. With both this and [`ring`](Self::ring)
    /// sequentially consistent, one of them sees the other.
    pub fn answered(&self) {
        self.armed.swap(false, Ordering::SeqCst);
    }

    /// Rung and not yet answered. A queue entry whose doorbell is not
    /// armed was answered by another drive of the flow since it rang.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;

    #[test]
    fn rings_queue_a_flow_once_until_answered() {
        let rung = Arc::new(Rung::new());
        let tuple = FourTuple {
            local_ip: Ipv4Address::new(10, 0, 0, 1),
            local_port: 1,
            remote_ip: Ipv4Address::new(10, 0, 0, 2),
            remote_port: 2,
        };
        let bell = Doorbell::new(tuple, Arc::clone(&rung));
        assert!(!bell.is_pending());
        bell.ring();
        bell.clone().ring();
        assert_eq!(rung.len(), 1);
        assert!(bell.is_pending());
        assert_eq!(rung.pop(), Some(tuple));
        assert!(!bell.is_pending(), "taken off the queue");
        assert!(bell.is_armed(), "until answered");
        bell.answered();
        assert!(!bell.is_armed());
        bell.ring();
        assert_eq!(rung.len(), 1);
        assert!(bell.is_pending());
    }
}
