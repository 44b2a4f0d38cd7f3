//! Work a queue pair's handle completes itself: once no link will take
//! the work in its rings (its connection ended and the link is gone, or
//! it entered Error before it ever connected), every work request there,
//! and every one posted later, completes at once with
//! `IBV_WC_WR_FLUSH_ERR` and its `wr_id`, as the kernel's verbs flush a
//! queue pair in Error: sends on the send completion queue, receives on
//! the receive one, each queue in posting order, signaled or not.
//!
//! Posting threads, the dataplane thread that drops the link and a
//! polling thread resuming a stalled flush may flush at once: one lock
//! makes each request's pop and push one step, so no request completes
//! twice or out of order. A completion that finds its queue full waits
//! in the handle (holding its request's slot) until a poll finds the
//! queue empty and resumes the flush. A destroyed queue pair's work is
//! dropped instead.

use std::sync::Arc;

use uwarp_stack::rdmap::CqKind;
use uwarp_stack::verbs::{WcOpcode, WcStatus, WorkCompletion};

use crate::cq::Resume;
use crate::qp::QpShared;

/// Flush completions that found their queue full, one per queue (the
/// flush of that queue stops there).
#[derive(Debug, Default)]
pub(crate) struct Unpushed {
    send: Option<WorkCompletion>,
    recv: Option<WorkCompletion>,
}

impl QpShared {
    /// Completes everything in the rings as flushed, as far as the
    /// completion queues have room (see the module documentation).
    pub(crate) fn flush_rings(self: &Arc<Self>) {
        let mut unpushed = self.unpushed.lock().unwrap_or_else(|e| e.into_inner());
        if self.destroyed.load(std::sync::atomic::Ordering::Acquire) {
            *unpushed = Unpushed::default();
            while self.sends.pop().is_some() {}
            while self.recvs.pop().is_some() {}
            return;
        }
        self.flush_queue(CqKind::Recv, &mut unpushed.recv);
        self.flush_queue(CqKind::Send, &mut unpushed.send);
        drop(unpushed);
        self.init.send_cq.shared.wake_waiters();
        self.init.recv_cq.shared.wake_waiters();
    }

    /// Flushes the ring of `kind` into its completion queue, starting with
    /// the completion `waiting` that found the queue full last time;
    /// leaves there the one that finds it full now.
    fn flush_queue(self: &Arc<Self>, kind: CqKind, waiting: &mut Option<WorkCompletion>) {
        let (cq, slots) = match kind {
            CqKind::Send => (&self.init.send_cq.shared, &self.send_slots),
            CqKind::Recv => (&self.init.recv_cq.shared, &self.recv_slots),
        };
        while let Some(wc) = waiting.take().or_else(|| self.next_flushed(kind)) {
            let Err(wc) = cq.push_freeing(wc, slots) else {
                continue;
            };
            let resume: Arc<dyn Resume> = self.clone();
            cq.resume_when_room(Arc::downgrade(&resume));
            // A poll that emptied the queue before the line above resumed
            // nobody: look once more.
            if let Err(wc) = cq.push_freeing(wc, slots) {
                *waiting = Some(wc);
                return;
            }
        }
    }

    /// The flush completion of the next work request in the ring of
    /// `kind`.
    fn next_flushed(&self, kind: CqKind) -> Option<WorkCompletion> {
        let (wr_id, opcode) = match kind {
            CqKind::Send => self.sends.pop().map(|wr| (wr.wr_id, wr.op.wc_opcode()))?,
            CqKind::Recv => self.recvs.pop().map(|wr| (wr.wr_id, WcOpcode::Recv))?,
        };
        let mut wc = WorkCompletion::new(wr_id, opcode, WcStatus::WrFlushError);
        wc.qp_num = self.num;
        Some(wc)
    }
}

/// A poll made room: the flush goes on.
impl Resume for QpShared {
    fn resume(self: Arc<Self>) {
        self.flush_rings();
    }
}

#[cfg(test)]
mod tests {
    use uwarp_stack::mem::PdId;
    use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr};

    use super::*;
    use crate::cq::CompletionQueue;
    use crate::driver::Driver;
    use crate::qp::{QpInit, QueuePair};

    /// A queue pair never connected, on its own send and receive queues
    /// of `depth` entries, `max_send_wr` 1 and `max_recv_wr` 5.
    fn unconnected(depth: usize) -> (QueuePair, CompletionQueue, CompletionQueue) {
        let send_cq = CompletionQueue::new(depth, Driver::default(), None);
        let recv_cq = CompletionQueue::new(depth, Driver::default(), None);
        let init = QpInit {
            recv_cq: recv_cq.clone(),
            max_send_wr: 1,
            max_recv_wr: 5,
            ..QpInit::new(&send_cq)
        };
        let qp = QueuePair::new(PdId::from_raw(1), init, Driver::default());
        (qp, send_cq, recv_cq)
    }

    fn recv(wr_id: u64) -> RecvWr {
        RecvWr {
            wr_id,
            sgl: Vec::new(),
        }
    }

    fn send(wr_id: u64) -> SendWr {
        SendWr::new(wr_id, SendOp::Send, Payload::Inline(vec![1; 4]))
    }

    /// Everything queued now, as (wr_id, opcode, status).
    fn drain(cq: &CompletionQueue) -> Vec<(u64, WcOpcode, WcStatus)> {
        std::iter::from_fn(|| cq.poll_one())
            .map(|wc| (wc.wr_id, wc.opcode, wc.status))
            .collect()
    }

    fn flushed(
        ids: impl IntoIterator<Item = u64>,
        opcode: WcOpcode,
    ) -> Vec<(u64, WcOpcode, WcStatus)> {
        ids.into_iter()
            .map(|id| (id, opcode, WcStatus::WrFlushError))
            .collect()
    }

    #[test]
    fn work_posted_before_a_connection_flushes_when_the_queue_pair_enters_error() {
        let (qp, send_cq, recv_cq) = unconnected(16);
        for id in 1..=5 {
            qp.post_recv(recv(id)).unwrap();
        }
        qp.post_send(send(9)).unwrap();
        assert!(
            drain(&recv_cq).is_empty(),
            "the work waits for a connection"
        );
        assert_eq!(qp.outstanding(), (1, 5));
        qp.abort();
        assert_eq!(qp.state(), uwarp_stack::verbs::QpState::Error);
        assert_eq!(drain(&recv_cq), flushed(1..=5, WcOpcode::Recv));
        assert_eq!(drain(&send_cq), flushed([9], WcOpcode::Send));
        assert_eq!(
            qp.outstanding(),
            (0, 0),
            "flushed requests free their slots"
        );
        // Later posts flush at once, on their own queues.
        qp.post_send(send(10)).unwrap();
        qp.post_recv(recv(11)).unwrap();
        assert_eq!(drain(&send_cq), flushed([10], WcOpcode::Send));
        assert_eq!(drain(&recv_cq), flushed([11], WcOpcode::Recv));
        let wc = qp.post_recv(recv(12)).map(|()| recv_cq.poll_one().unwrap());
        assert_eq!(wc.unwrap().qp_num, qp.num());
    }

    /// A queue pair with five receives posted, moved to Error with room
    /// for two completions in its receive queue.
    fn flushed_into_a_full_queue() -> (QueuePair, CompletionQueue) {
        let (qp, _send_cq, recv_cq) = unconnected(2);
        for id in 1..=5 {
            qp.post_recv(recv(id)).unwrap();
        }
        qp.abort();
        (qp, recv_cq)
    }

    #[test]
    fn a_full_completion_queue_holds_the_flush_until_a_poll_makes_room() {
        let (qp, recv_cq) = flushed_into_a_full_queue();
        // Two fit; the other three keep their slots.
        assert_eq!(qp.outstanding(), (0, 3));
        assert!(qp.post_recv(recv(6)).is_ok());
        assert!(qp.post_recv(recv(7)).is_ok());
        let Err(crate::Error::Io(full)) = qp.post_recv(recv(8)) else {
            panic!("a sixth receive outstanding fits a queue of five");
        };
        assert_eq!(full.raw_os_error(), Some(libc::ENOMEM));
        // Polling makes room, and the flush goes on from where it stopped.
        let mut seen = Vec::new();
        while let Some(wc) = recv_cq.poll_one() {
            seen.push(wc.wr_id);
        }
        assert_eq!(seen, (1..=7).collect::<Vec<_>>());
        assert_eq!(qp.outstanding(), (0, 0));
    }

    #[test]
    fn a_destroyed_queue_pair_pushes_nothing_more() {
        let (qp, recv_cq) = flushed_into_a_full_queue();
        qp.destroy();
        // What was in the queue stays; what waited for room goes.
        assert_eq!(drain(&recv_cq), flushed([1, 2], WcOpcode::Recv));
        assert!(drain(&recv_cq).is_empty());
        assert!(
            qp.post_recv(recv(6)).is_err(),
            "posts to a destroyed queue pair fail"
        );
    }

    #[test]
    fn a_child_of_fork_leaves_a_parents_queue_pair_alone() {
        let cq = CompletionQueue::new(4, Driver::default(), None);
        let qp = QueuePair::new(PdId::from_raw(1), QpInit::new(&cq), Driver::of_the_parent());
        qp.abort();
        assert_eq!(qp.state(), uwarp_stack::verbs::QpState::Idle);
        // A batch of completions the parent's dataplane had open when the
        // process forked stays open in the child for ever.
        let shared = qp.shared.clone();
        let (done, destroyed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _open = shared.deliveries();
            qp.destroy();
            let _ = done.send(());
        });
        let waited = destroyed.recv_timeout(std::time::Duration::from_secs(10));
        assert!(waited.is_ok(), "destroy waited for the parent's dataplane");
    }

    #[test]
    fn destroying_a_queue_pair_never_connected_drops_its_work() {
        let (qp, send_cq, recv_cq) = unconnected(16);
        qp.post_recv(recv(1)).unwrap();
        qp.post_send(send(2)).unwrap();
        qp.destroy();
        assert!(drain(&recv_cq).is_empty() && drain(&send_cq).is_empty());
    }
}
