//! Queue pairs (`ibv_qp`): the application's handle on one RDMAP stream.
//! Work requests go into lock-free rings that the dataplane drains into
//! the stream's engine; the state and events come back the same way.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use crossbeam_queue::SegQueue;
use uwarp_stack::mem::PdId;
use uwarp_stack::rdmap::{QpEvent, SharedReceiveQueue};
use uwarp_stack::verbs::{Payload, QpState, RecvWr, SendOp, SendWr};

use crate::counters::{CounterCells, QpCounters};
use crate::cq::CompletionQueue;
use crate::driver::Driver;
use crate::error::Error;
use crate::transport::wakeup::Wakeup;

/// Limits a queue pair enforces when work is posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Most scatter/gather elements in one send work request.
    pub max_send_sge: usize,
    /// Most scatter/gather elements in one receive work request.
    pub max_recv_sge: usize,
    /// Most octets of inline data in one send work request.
    pub max_inline_data: usize,
}

impl Default for QpCaps {
    fn default() -> Self {
        Self {
            max_send_sge: 16,
            max_recv_sge: 16,
            max_inline_data: 256,
        }
    }
}

/// What a queue pair is made of (`ibv_qp_init_attr`).
#[derive(Debug, Clone)]
pub struct QpInit {
    /// Where send completions go.
    pub send_cq: CompletionQueue,
    /// Where receive completions go.
    pub recv_cq: CompletionQueue,
    /// Take receives from this shared receive queue.
    pub srq: Option<Arc<SharedReceiveQueue>>,
    /// Posting limits.
    pub caps: QpCaps,
}

impl QpInit {
    /// One completion queue for both directions, no SRQ, default limits.
    pub fn new(cq: &CompletionQueue) -> Self {
        Self {
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
            srq: None,
            caps: QpCaps::default(),
        }
    }
}

/// What the dataplane shares with the application for one queue pair.
#[derive(Debug)]
pub(crate) struct QpShared {
    /// The queue pair's number, unique in the process.
    pub(crate) num: u32,
    pub(crate) pd: PdId,
    pub(crate) init: QpInit,
    pub(crate) sends: SegQueue<SendWr>,
    pub(crate) recvs: SegQueue<RecvWr>,
    state: AtomicU8,
    pub(crate) connected: AtomicBool,
    pub(crate) disconnect: AtomicBool,
    pub(crate) abort: AtomicBool,
    /// Set after the application posts work or asks for a close; the
    /// dataplane clears it before it takes the work, so a connection that
    /// was only sent an ACK does not read its queues' cache lines.
    pub(crate) posted: AtomicBool,
    events_tx: Sender<QpEvent>,
    events_rx: Receiver<QpEvent>,
    /// How to wake the core that runs the stream, once it runs on one (the
    /// DPDK transport's dataplane core); the socket transport polls every
    /// queue pair instead.
    pub(crate) wakeup: OnceLock<Wakeup>,
    /// What the stream has carried, as its dataplane publishes it.
    pub(crate) counters: CounterCells,
}

impl QpShared {
    pub(crate) fn set_state(&self, state: QpState) {
        self.state.store(encode(state), Ordering::Release);
    }

    pub(crate) fn state(&self) -> QpState {
        decode(self.state.load(Ordering::Acquire))
    }

    /// Tells the dataplane that the application posted work or asked for
    /// a close.
    ///
    /// The flag is set with a sequentially consistent swap, not a store,
    /// because the wake-up is read next: a store could still wait in this
    /// thread's store buffer while that read runs (x86 lets a load pass an
    /// older store). While the connection is being handed to its
    /// dataplane core, which sets the wake-up (its doorbell), answers it
    /// (a sequentially consistent swap) and then reads the flag, the
    /// application could otherwise find no wake-up and the core no work:
    /// posted and never sent until some segment or timer drove the flow.
    fn notify(&self) {
        self.posted.swap(true, Ordering::SeqCst);
        if let Some(wakeup) = self.wakeup.get() {
            wakeup.wake();
        }
    }

    pub(crate) fn event(&self, event: QpEvent) {
        // The receiver lives as long as this struct.
        let _ = self.events_tx.send(event);
    }
}

fn encode(state: QpState) -> u8 {
    match state {
        QpState::Idle => 0,
        QpState::Rts => 1,
        QpState::Closing => 2,
        QpState::Terminate => 3,
        QpState::Error => 4,
    }
}

fn decode(value: u8) -> QpState {
    match value {
        0 => QpState::Idle,
        1 => QpState::Rts,
        2 => QpState::Closing,
        3 => QpState::Terminate,
        _ => QpState::Error,
    }
}

/// A queue pair. Cheap to clone; every clone is the same queue pair.
#[derive(Debug, Clone)]
pub struct QueuePair {
    pub(crate) shared: Arc<QpShared>,
    pub(crate) driver: Driver,
}

impl QueuePair {
    pub(crate) fn new(pd: PdId, init: QpInit, driver: Driver) -> Self {
        /// The next queue pair's number (0 is never one, as with verbs
        /// devices, where it names the special QP0).
        static NEXT_NUM: AtomicU32 = AtomicU32::new(1);
        let (events_tx, events_rx) = crossbeam_channel::unbounded();
        Self {
            shared: Arc::new(QpShared {
                num: NEXT_NUM.fetch_add(1, Ordering::Relaxed),
                pd,
                init,
                sends: SegQueue::new(),
                recvs: SegQueue::new(),
                state: AtomicU8::new(encode(QpState::Idle)),
                connected: AtomicBool::new(false),
                disconnect: AtomicBool::new(false),
                abort: AtomicBool::new(false),
                posted: AtomicBool::new(false),
                events_tx,
                events_rx,
                wakeup: OnceLock::new(),
                counters: CounterCells::default(),
            }),
            driver,
        }
    }

    /// The queue pair's number (`ibv_qp.qp_num`): unique in the process,
    /// and the `qp_num` of its completions.
    pub fn num(&self) -> u32 {
        self.shared.num
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.shared.state()
    }

    /// What the stream has carried since it connected: FPDUs, placement
    /// in and out of order, reassembly, splits, CRC errors, Terminates
    /// (all 0 before it connects).
    pub fn counters(&self) -> QpCounters {
        self.shared.counters.snapshot()
    }

    /// Posts a send work request. Requests posted before the connection is
    /// established wait for it; in Terminate or Error they complete as
    /// flushed. Malformed requests are refused here, and every request in
    /// a child of `fork` (the queue pair's device is its parent's).
    pub fn post_send(&self, wr: SendWr) -> Result<(), Error> {
        self.driver.ensure_in_its_process()?;
        let caps = self.shared.init.caps;
        match &wr.payload {
            Payload::Sgl(sgl) if sgl.len() > caps.max_send_sge => {
                return Err(Error::InvalidArgument("more SGEs than max_send_sge"));
            }
            Payload::Inline(data) if data.len() > caps.max_inline_data => {
                return Err(Error::InvalidArgument("inline data over max_inline_data"));
            }
            Payload::Sgl(sgl) if matches!(wr.op, SendOp::Read { .. }) && sgl.len() > 1 => {
                return Err(Error::InvalidArgument("an RDMA Read has one sink SGE"));
            }
            Payload::Inline(_) if matches!(wr.op, SendOp::Read { .. }) => {
                return Err(Error::InvalidArgument("an RDMA Read cannot be inline"));
            }
            _ => {}
        }
        if wr.payload.len() > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument("a message is at most 4 GiB - 1"));
        }
        self.shared.sends.push(wr);
        self.shared.notify();
        Ok(())
    }

    /// Posts a receive work request (refused when the queue pair uses a
    /// shared receive queue, and in a child of `fork`).
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), Error> {
        self.driver.ensure_in_its_process()?;
        if self.shared.init.srq.is_some() {
            return Err(Error::WrongState("the queue pair receives from an SRQ"));
        }
        if wr.sgl.len() > self.shared.init.caps.max_recv_sge {
            return Err(Error::InvalidArgument("more SGEs than max_recv_sge"));
        }
        self.shared.recvs.push(wr);
        self.shared.notify();
        Ok(())
    }

    /// The next event (Terminate sent or received, disconnected), waiting
    /// up to `timeout`.
    pub fn next_event(&self, timeout: Duration) -> Option<QpEvent> {
        self.shared.events_rx.recv_timeout(timeout).ok()
    }

    /// The Terminate this queue pair sent or received, if one is among
    /// its queued events (those before it are taken and dropped). Events
    /// are reported before the completions of the same round, so after a
    /// flushed completion the Terminate that caused it is already queued.
    pub fn take_terminate(&self) -> Option<QpEvent> {
        std::iter::from_fn(|| self.next_event(Duration::ZERO)).find(|event| {
            matches!(
                event,
                QpEvent::TerminateSent(_) | QpEvent::TerminateReceived(_)
            )
        })
    }

    /// Graceful close (`rdma_disconnect`): posted work is sent, then the
    /// connection closes; a [`QpEvent::Disconnected`] follows.
    pub fn disconnect(&self) {
        self.shared.disconnect.store(true, Ordering::Release);
        self.shared.notify();
    }

    /// Abortive close: outstanding work is flushed and the connection is
    /// reset.
    pub fn abort(&self) {
        self.shared.abort.store(true, Ordering::Release);
        self.shared.notify();
    }

    /// Waits up to `timeout` for the queue pair to reach Error (after a
    /// disconnect or a Terminate); returns whether it did.
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while self.state() != QpState::Error {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            if self.driver.progress() == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        true
    }
}
