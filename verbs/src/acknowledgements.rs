//! Counting the events a queue has handed to the application and the
//! acknowledgements it has given back, so that destroying the queue waits
//! for the last acknowledgement, as rdma-core's `ibv_destroy_cq` and
//! `ibv_destroy_qp` do (the application may still be looking at an event
//! naming the queue; `ibv_ack_cq_events` and `ibv_ack_async_event` say it
//! no longer is).

use std::sync::{Condvar, Mutex, MutexGuard};

/// Events returned to the application for one queue, and how many of
/// them it has acknowledged.
#[derive(Default)]
pub struct Acknowledgements {
    counts: Mutex<Counts>,
    acknowledged: Condvar,
}

#[derive(Default)]
struct Counts {
    returned: u64,
    acknowledged: u64,
}

impl Acknowledgements {
    /// One more event was returned to the application.
    pub fn returned(&self) {
        self.counts().returned += 1;
    }

    /// The application acknowledged `events` more events.
    pub fn acknowledge(&self, events: u64) {
        self.counts().acknowledged += events;
        self.acknowledged.notify_all();
    }

    /// Waits until every event returned has been acknowledged.
    pub fn wait_for_all(&self) {
        let counts = self.counts();
        drop(
            self.acknowledged
                .wait_while(counts, |c| c.acknowledged < c.returned)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn waiting_ends_at_the_last_acknowledgement() {
        let acks = Arc::new(Acknowledgements::default());
        acks.wait_for_all(); // nothing returned: no wait
        acks.returned();
        acks.returned();
        acks.acknowledge(1);
        let waiter = {
            let acks = acks.clone();
            std::thread::spawn(move || acks.wait_for_all())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "one event is still unacknowledged");
        acks.acknowledge(1);
        waiter.join().expect("the waiter ends");
    }
}
