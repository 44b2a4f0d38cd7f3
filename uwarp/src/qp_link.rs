//! [`QpLink`]: a queue pair's engine joined to the application's handle,
//! as every transport's dataplane runs it: work requests from the
//! application's lock-free rings into the engine (RFC 5040 section 5's
//! send and receive queues), completions out to the completion queues in
//! order (a full queue keeps them for later), events and the state back
//! to the handle. Each completion pushed frees its work request's slot
//! (`slots.rs`); a destroyed queue pair's completions are dropped. Once
//! the link is dropped (its connection ended), the handle completes what
//! is posted later itself, flushed (`qp_flush.rs`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use uwarp_dataplane::polled::Polled;
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
    /// The queue pair ended before its connection came up (moved to Error
    /// or destroyed during the setup): the link takes none of its work,
    /// pushes nothing, and resets the connection.
    detached: bool,
    /// Completions that found their queue full.
    backlog: VecDeque<(CqKind, WorkCompletion)>,
    /// The engine's count of completed unsignaled sends whose slots are
    /// freed.
    unsignaled_freed: u64,
    /// What the transport below the engine counted, as last told.
    transport: TransportCounters,
}

impl QpLink {
    /// Joins `engine` to `qp` and marks the queue pair connected; a queue
    /// pair that ended while its connection was set up has the connection
    /// reset instead (the peer sees it end).
    pub(crate) fn new(mut engine: QpEngine, qp: QueuePair) -> Self {
        let detached = !qp.shared.link();
        if detached {
            engine.abort();
        }
        qp.shared.set_state(engine.state());
        qp.shared.connected.store(true, Ordering::Release);
        QpLink {
            engine,
            qp,
            detached,
            backlog: VecDeque::new(),
            unsignaled_freed: 0,
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
        if self.detached {
            return false;
        }
        let shared = &self.qp.shared;
        // Read before it is cleared: a swap would take the cache line,
        // which the application reads on every post, on every drive.
        // Work this read misses is not lost: on the DPDK transport its
        // post either rang the doorbell or found it armed, and either way
        // a drive that answers the doorbell (`Doorbell::answered`) before
        // reading this flag follows. On the socket transport the
        // dataplane thread reads it at every round of a connection it
        // runs; once it leaves the connection to the application, a post
        // runs a round itself, or asks the thread that holds the
        // connection for one, or waits in the feed for the next poll
        // (`transport/socket/conn_cell.rs`).
        if !(shared.posted.load(Ordering::Acquire) && shared.posted.swap(false, Ordering::AcqRel)) {
            return false;
        }
        let mut busy = false;
        if shared.abort.swap(false, Ordering::AcqRel) {
            if shared.destroyed.load(Ordering::SeqCst) {
                let disconnecting = shared.disconnect.swap(false, Ordering::AcqRel);
                self.engine.detach(disconnecting);
            } else {
                self.engine.abort();
            }
            busy = true;
        }
        while let Some(wr) = shared.recvs.take() {
            self.engine.post_recv(wr);
            busy = true;
        }
        while let Some(wr) = shared.sends.take() {
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
        busy |= self.push_completions();
        self.free_unsignaled();
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

    /// Pushes the engine's completions to their queues, in order, after
    /// those that found their queue full before; keeps them again from
    /// the first that finds its queue full. Those of a destroyed (or
    /// detached) queue pair are dropped. Returns whether there were any.
    fn push_completions(&mut self) -> bool {
        let mut next = self
            .backlog
            .pop_front()
            .or_else(|| self.engine.poll_completion());
        if next.is_none() {
            return false;
        }
        let batch = self.qp.shared.deliveries();
        let live = batch.live() && !self.detached;
        while let Some((kind, wc)) = next {
            if !live {
                discard(&self.qp, kind);
            } else {
                if kind == CqKind::Send {
                    // Unsignaled sends before this one are done: their
                    // slots are free before it shows.
                    free_unsignaled(&self.engine, &mut self.unsignaled_freed, &self.qp);
                }
                if let Err(wc) = push(&self.qp, kind, wc) {
                    self.backlog.push_front((kind, wc));
                    break;
                }
            }
            next = self
                .backlog
                .pop_front()
                .or_else(|| self.engine.poll_completion());
        }
        true
    }

    /// Frees the slots of the unsignaled sends completed since last time.
    fn free_unsignaled(&mut self) {
        free_unsignaled(&self.engine, &mut self.unsignaled_freed, &self.qp);
    }
}

/// The link is gone: the handle flushes whatever is posted from now on,
/// and whatever a post left in the rings after the engine's last look.
impl Drop for QpLink {
    fn drop(&mut self) {
        if !self.detached {
            self.qp.shared.unlink();
        }
    }
}

/// Frees the slots of the unsignaled sends `engine` completed beyond the
/// `freed` of them already (counted on).
fn free_unsignaled(engine: &QpEngine, freed: &mut u64, qp: &QueuePair) {
    let completed = engine.unsignaled_sends_completed();
    qp.shared
        .send_slots
        .free(usize::try_from(completed - *freed).unwrap_or(usize::MAX));
    *freed = completed;
}

/// Pushes `wc` to its queue, freeing its work request's slot (of the
/// receive queue, or of the SRQ the receive came from); hands it back if
/// the queue is full.
fn push(qp: &QueuePair, kind: CqKind, mut wc: WorkCompletion) -> Result<(), WorkCompletion> {
    let shared = &qp.shared;
    wc.qp_num = shared.num;
    let init = &shared.init;
    match (kind, &init.srq) {
        (CqKind::Send, _) => init.send_cq.shared.push_freeing(wc, &shared.send_slots),
        (CqKind::Recv, None) => init.recv_cq.shared.push_freeing(wc, &shared.recv_slots),
        (CqKind::Recv, Some(srq)) => init.recv_cq.shared.push_freeing(wc, &srq.slots),
    }
}

/// Drops a completion of a destroyed queue pair. A receive it took from
/// an SRQ gives the SRQ its slot back: the SRQ lives on.
fn discard(qp: &QueuePair, kind: CqKind) {
    if let (CqKind::Recv, Some(srq)) = (kind, &qp.shared.init.srq) {
        srq.slots.free(1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uwarp_stack::mem::{PdId, StagTable};
    use uwarp_stack::mpa::Negotiated;
    use uwarp_stack::rdmap::{EngineConfig, LlpClose, Role};
    use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr, WcStatus};
    use uwarp_stack::wire::mpa::Revision;

    use super::*;
    use crate::cq::CompletionQueue;
    use crate::driver::Driver;
    use crate::qp::QpInit;

    /// A queue pair on one completion queue of 16 entries, linked.
    fn link() -> (QueuePair, QpLink) {
        let cq = CompletionQueue::new(16, Driver::default(), None);
        link_on(QpInit::new(&cq))
    }

    /// A queue pair made of `init`, linked.
    fn link_on(init: QpInit) -> (QueuePair, QpLink) {
        let qp = QueuePair::new(PdId::from_raw(1), init, Driver::default());
        (qp.clone(), QpLink::new(engine(), qp))
    }

    fn engine() -> QpEngine {
        let pd = PdId::from_raw(1);
        QpEngine::new(EngineConfig {
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
            // Small: nothing is registered, and Miri fills 65536 slots
            // (the default) for seconds.
            table: Arc::new(StagTable::new(16).unwrap()),
            srq: None,
        })
    }

    fn recv(wr_id: u64) -> RecvWr {
        RecvWr {
            wr_id,
            sgl: Vec::new(),
        }
    }

    fn unsignaled(wr_id: u64) -> SendWr {
        SendWr {
            signaled: false,
            ..SendWr::new(wr_id, SendOp::Send, Payload::Inline(vec![7; 4]))
        }
    }

    /// The (wr_id, status) of everything in `cq` now.
    fn drain(cq: &CompletionQueue) -> Vec<(u64, WcStatus)> {
        std::iter::from_fn(|| cq.poll_one())
            .map(|wc| (wc.wr_id, wc.status))
            .collect()
    }

    /// The stream ends: the engine flushes, the link reports and goes.
    fn end(mut link: QpLink) {
        link.take_work();
        link.engine.abort();
        link.report();
    }

    #[test]
    fn work_posted_after_the_link_is_gone_completes_flushed() {
        let (qp, link) = link();
        qp.post_recv(recv(1)).unwrap();
        end(link);
        qp.post_recv(recv(2)).unwrap();
        qp.post_send(unsignaled(3)).unwrap();
        let cq = &qp.shared.init.send_cq;
        let flushed = WcStatus::WrFlushError;
        assert_eq!(drain(cq), [(1, flushed), (2, flushed), (3, flushed)]);
        assert_eq!(qp.outstanding(), (0, 0));
    }

    #[test]
    fn a_post_racing_the_end_of_the_link_completes_once_and_in_order() {
        // Fewer under Miri, which checks each interleaving it runs for
        // data races (its scheduler preempts at random points).
        const POSTS: u64 = if cfg!(miri) { 30 } else { 300 };
        for _ in 0..if cfg!(miri) { 4 } else { 100 } {
            let cq = CompletionQueue::new(POSTS as usize, Driver::default(), None);
            let (qp, mut link) = link_on(QpInit::new(&cq));
            let poster = qp.clone();
            let posting = std::thread::spawn(move || {
                for id in 0..POSTS {
                    poster.post_recv(recv(id)).unwrap();
                }
            });
            while qp.outstanding().1 < POSTS as usize / 3 {
                link.take_work();
                std::hint::spin_loop();
            }
            end(link);
            posting.join().unwrap();
            let ids: Vec<u64> = drain(&cq).into_iter().map(|(id, _)| id).collect();
            assert_eq!(ids, (0..POSTS).collect::<Vec<_>>());
        }
    }

    #[test]
    fn nothing_of_a_destroyed_queue_pair_reaches_its_queue_afterwards() {
        let cq = CompletionQueue::new(1, Driver::default(), None);
        let (qp, mut link) = link_on(QpInit::new(&cq));
        for id in 1..=3 {
            qp.post_recv(recv(id)).unwrap();
        }
        link.take_work();
        link.engine.abort();
        link.report();
        assert!(link.has_backlog(), "two flushed receives wait for room");
        qp.destroy();
        assert_eq!(drain(&cq), [(1, WcStatus::WrFlushError)]);
        link.report();
        drop(link);
        assert!(drain(&cq).is_empty());
    }

    #[test]
    fn a_send_frees_its_slot_before_its_completion_shows_and_unsignaled_ones_once_done() {
        let cq = CompletionQueue::new(16, Driver::default(), None);
        let init = QpInit {
            max_send_wr: 2,
            ..QpInit::new(&cq)
        };
        let (qp, mut link) = link_on(init);
        qp.post_send(unsignaled(1)).unwrap();
        qp.post_send(unsignaled(2)).unwrap();
        assert!(qp.post_send(unsignaled(3)).is_err(), "two at most");
        link.take_work();
        let mut stream = Vec::new();
        link.engine.poll_transmit(&mut stream, 1 << 16);
        link.report();
        assert_eq!(
            qp.outstanding().0,
            0,
            "done unsignaled sends free their slots"
        );
        let signaled = SendWr::new(4, SendOp::Send, Payload::Inline(vec![7; 4]));
        qp.post_send(signaled).unwrap();
        link.take_work();
        link.engine.poll_transmit(&mut stream, 1 << 16);
        link.report();
        assert_eq!(drain(&cq), [(4, WcStatus::Success)]);
        assert_eq!(qp.outstanding().0, 0);
    }

    #[test]
    fn a_link_made_for_a_queue_pair_that_ended_resets_and_takes_nothing() {
        let cq = CompletionQueue::new(16, Driver::default(), None);
        let qp = QueuePair::new(PdId::from_raw(1), QpInit::new(&cq), Driver::default());
        qp.post_recv(recv(1)).unwrap();
        qp.abort();
        let mut link = QpLink::new(engine(), qp.clone());
        assert_eq!(link.engine.llp_close(), Some(LlpClose::Abortive));
        qp.post_recv(recv(2)).unwrap();
        assert!(!link.take_work());
        link.report();
        drop(link);
        let flushed = WcStatus::WrFlushError;
        assert_eq!(drain(&cq), [(1, flushed), (2, flushed)]);
        assert_eq!(qp.state(), uwarp_stack::verbs::QpState::Error);
    }

    #[test]
    fn a_drive_takes_what_was_posted_since_the_last_and_only_that() {
        let (qp, mut link) = link();
        assert!(!link.take_work(), "nothing posted");
        qp.post_recv(recv(1)).unwrap();
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
