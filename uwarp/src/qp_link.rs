//! [`QpLink`]: a queue pair's engine joined to the application's handle,
//! as every transport's dataplane runs it: work requests from the
//! application's lock-free rings into the engine (RFC 5040 section 5's
//! send and receive queues), completions out to the completion queues in
//! order (a full queue keeps them for later), events and the state back
//! to the handle.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use uwarp_stack::rdmap::{CqKind, QpEngine};
use uwarp_stack::verbs::WorkCompletion;

use crate::counters::{QpCounters, TransportCounters};
use crate::qp::QueuePair;

/// How long a peer has to close its side of the stream after ours closed
/// (after a Terminate, say) before every transport resets the
/// connection, so the queue pair reaches Error and its resources are
/// freed.
pub(crate) const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// One established queue pair on a dataplane.
pub(crate) struct QpLink {
    pub(crate) engine: QpEngine,
    qp: QueuePair,
    /// Completions that found their queue full.
    backlog: VecDeque<(CqKind, WorkCompletion)>,
    /// What the transport below the engine counted, as last told.
    transport: TransportCounters,
}

impl QpLink {
    /// Joins `engine` to `qp` and marks the queue pair connected.
    pub(crate) fn new(engine: QpEngine, qp: QueuePair) -> Self {
        qp.shared.set_state(engine.state());
        qp.shared.connected.store(true, Ordering::Release);
        QpLink {
            engine,
            qp,
            backlog: VecDeque::new(),
            transport: TransportCounters::default(),
        }
    }

    /// The application's handle.
    pub(crate) fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// Whether completions wait for room in their queue.
    pub(crate) fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// Moves what the application posted (aborts, receives, sends, a
    /// disconnect) into the engine; returns whether there was any.
    pub(crate) fn take_work(&mut self) -> bool {
        let shared = &self.qp.shared;
        // Read before it is cleared: a swap would take the cache line,
        // which the application reads on every post, on every drive.
        // Work this read misses is not lost: on the DPDK transport its
        // post either rang the doorbell or found it armed, and either way
        // a drive that answers the doorbell (`Doorbell::answered`) before
        // reading this flag follows; the socket transport reads it at
        // every poll.
        if !(shared.posted.load(Ordering::Acquire) && shared.posted.swap(false, Ordering::AcqRel)) {
            return false;
        }
        let mut busy = false;
        if shared.abort.swap(false, Ordering::AcqRel) {
            self.engine.abort();
            busy = true;
        }
        while let Some(wr) = shared.recvs.pop() {
            self.engine.post_recv(wr);
            busy = true;
        }
        while let Some(wr) = shared.sends.pop() {
            self.engine.post_send(wr);
            busy = true;
        }
        if shared.disconnect.swap(false, Ordering::AcqRel) {
            self.engine.disconnect();
            busy = true;
        }
        busy
    }

    /// Takes the transport's counters, published with the engine's at the
    /// next [`report`](Self::report).
    pub(crate) fn set_transport_counters(&mut self, transport: TransportCounters) {
        self.transport = transport;
    }

    /// Gives the application the engine's events, completions, state and
    /// counters, and wakes its waiters; returns whether there was anything.
    pub(crate) fn report(&mut self) -> bool {
        let mut busy = false;
        while let Some(event) = self.engine.poll_event() {
            self.qp.shared.event(event);
            busy = true;
        }
        // Completions that found their queue full go first, in order.
        while let Some(&(kind, wc)) = self.backlog.front() {
            if self.deliver(kind, wc).is_err() {
                break;
            }
            self.backlog.pop_front();
            busy = true;
        }
        while self.backlog.is_empty() {
            let Some((kind, wc)) = self.engine.poll_completion() else {
                break;
            };
            busy = true;
            if self.deliver(kind, wc).is_err() {
                self.backlog.push_back((kind, wc));
                break;
            }
        }
        self.qp.shared.set_state(self.engine.state());
        let counters = QpCounters::merge(self.engine.counters(), self.transport);
        self.qp.shared.counters.publish(counters);
        if busy {
            let init = &self.qp.shared.init;
            init.send_cq.shared.wake_waiters();
            init.recv_cq.shared.wake_waiters();
        }
        busy
    }

    fn deliver(&self, kind: CqKind, mut wc: WorkCompletion) -> Result<(), WorkCompletion> {
        wc.qp_num = self.qp.shared.num;
        let init = &self.qp.shared.init;
        let cq = match kind {
            CqKind::Send => &init.send_cq,
            CqKind::Recv => &init.recv_cq,
        };
        cq.shared.push(wc)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uwarp_stack::mem::{PdId, StagTable};
    use uwarp_stack::mpa::Negotiated;
    use uwarp_stack::rdmap::{EngineConfig, Role};
    use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr};
    use uwarp_stack::wire::mpa::Revision;

    use super::*;
    use crate::cq::CompletionQueue;
    use crate::driver::Driver;
    use crate::qp::QpInit;

    fn link() -> (QueuePair, QpLink) {
        let cq = CompletionQueue::new(16, Driver::default(), None);
        let pd = PdId::from_raw(1);
        let qp = QueuePair::new(pd, QpInit::new(&cq), Driver::default());
        let engine = QpEngine::new(EngineConfig {
            negotiated: Negotiated {
                revision: Revision::Enhanced,
                crc: true,
                markers_tx: false,
                markers_rx: false,
                ird: 8,
                ord: 8,
                peer_ird: Some(8),
                peer_ord: Some(8),
                rtr: None,
            },
            role: Role::Initiator,
            mulpdu: 1024,
            pd,
            table: Arc::new(StagTable::default()),
            srq: None,
        });
        (qp.clone(), QpLink::new(engine, qp))
    }

    #[test]
    fn a_drive_takes_what_was_posted_since_the_last_and_only_that() {
        let (qp, mut link) = link();
        assert!(!link.take_work(), "nothing posted");
        qp.post_recv(RecvWr {
            wr_id: 1,
            sgl: Vec::new(),
        })
        .unwrap();
        assert!(link.take_work());
        assert!(!link.take_work(), "taken once");
        let send = SendWr::new(2, SendOp::Send, Payload::Inline(vec![7; 4]));
        qp.post_send(send).unwrap();
        assert!(link.take_work());
        let mut stream = Vec::new();
        assert!(
            link.engine.poll_transmit(&mut stream, 1) > 0,
            "the Send went in"
        );
        // A close asked for is work too.
        qp.disconnect();
        assert!(link.take_work());
        assert!(!link.take_work());
    }
}
