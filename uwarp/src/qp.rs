//! Queue pairs (`ibv_qp`): the application's handle on one RDMAP stream.
//! Work requests go into lock-free rings that the dataplane drains into
//! the stream's engine; the state and events come back the same way.
//!
//! Who takes the work in the rings changes once in each direction: until
//! the connection is up it waits there; a dataplane's link
//! ([`QpLink`](crate::qp_link::QpLink)) takes it while the stream runs;
//! once the link is gone (the connection ended), or if the queue pair
//! entered Error before it connected, the handle flushes it itself
//! (`qp_flush.rs`). Every work request so completes, as the kernel's
//! verbs promise: in Error, with `IBV_WC_WR_FLUSH_ERR`. Destroying a
//! queue pair stops all of it: nothing of it reaches a completion queue
//! once [`QueuePair::destroy`] returns.

use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use crossbeam_queue::SegQueue;
use uwarp_stack::mem::PdId;
use uwarp_stack::rdmap::QpEvent;
use uwarp_stack::verbs::{Payload, QpState, RecvWr, SendOp, SendWr};

use crate::counters::{CounterCells, QpCounters};
use crate::cq::CompletionQueue;
use crate::driver::Driver;
use crate::error::Error;
use crate::qp_flush::Unpushed;
use crate::slots::Slots;
use crate::srq::SharedReceiveQueue;
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
    pub srq: Option<SharedReceiveQueue>,
    /// Posting limits.
    pub caps: QpCaps,
    /// Most send work requests outstanding (`max_send_wr`): posted and
    /// not yet completed; a post beyond fails with `ENOMEM` (see
    /// `slots.rs` for when a request frees its slot).
    pub max_send_wr: usize,
    /// Most receive work requests outstanding (`max_recv_wr`), likewise.
    pub max_recv_wr: usize,
}

impl QpInit {
    /// One completion queue for both directions, no SRQ, default limits,
    /// and no limit on the work requests outstanding (the application
    /// bounds them itself).
    pub fn new(cq: &CompletionQueue) -> Self {
        Self {
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
            srq: None,
            caps: QpCaps::default(),
            max_send_wr: usize::MAX,
            max_recv_wr: usize::MAX,
        }
    }
}

/// The work in the rings waits for a connection.
const AWAITING: u8 = 0;
/// A dataplane's link takes the work in the rings.
const LINKED: u8 = 1;
/// No link will take the work again: the handle flushes it.
const ENDED: u8 = 2;

/// What the dataplane shares with the application for one queue pair.
#[derive(Debug)]
pub(crate) struct QpShared {
    /// The queue pair's number, unique in the process.
    pub(crate) num: u32,
    pub(crate) pd: PdId,
    pub(crate) init: QpInit,
    pub(crate) sends: SegQueue<SendWr>,
    pub(crate) recvs: SegQueue<RecvWr>,
    /// The send queue's depth.
    pub(crate) send_slots: Slots,
    /// The receive queue's depth (unused with an SRQ, which has its own).
    pub(crate) recv_slots: Slots,
    state: AtomicU8,
    /// Who takes the work in the rings: [`AWAITING`], [`LINKED`] or
    /// [`ENDED`].
    taker: AtomicU8,
    /// Set by [`QueuePair::destroy`]: nothing more of the queue pair goes
    /// to a completion queue.
    pub(crate) destroyed: AtomicBool,
    /// A link is pushing completions (see [`QpShared::deliveries`]).
    delivering: AtomicBool,
    /// Flush completions the handle could not push yet (`qp_flush.rs`).
    pub(crate) unpushed: Mutex<Unpushed>,
    pub(crate) connected: AtomicBool,
    pub(crate) disconnect: AtomicBool,
    pub(crate) abort: AtomicBool,
    /// Set after the application posts work or asks for a close; the
    /// dataplane clears it before it takes the work, so a connection that
    /// was only sent an ACK does not read its queues' cache lines.
    pub(crate) posted: AtomicBool,
    events_tx: Sender<QpEvent>,
    events_rx: Receiver<QpEvent>,
    /// How to have the stream run once it runs somewhere: the DPDK
    /// transport's dataplane core's doorbell, or the socket transport's
    /// connection, which a post runs on the posting thread while the
    /// application spins on its queues.
    pub(crate) wakeup: OnceLock<Wakeup>,
    /// What the stream has carried, as its dataplane publishes it.
    pub(crate) counters: CounterCells,
}

thread_local! {
    /// The queue pairs posted to inside this thread's [`post_together`],
    /// woken when it ends; `None` outside one.
    static HELD: RefCell<Option<Vec<Arc<QpShared>>>> = const { RefCell::new(None) };
}

/// Runs `body`, holding back the wake-up of every queue pair it posts to
/// (or closes) on this thread until it returns: each is woken once then,
/// so that its stream takes the work together. Work posted together
/// should be sent together: a chain of work requests (`ibv_post_send`),
/// a Write and the Send that announces it. On the socket transport each
/// wake-up writes to the socket at once, a system call and a TCP segment
/// of its own. A call inside another is part of the outer one.
///
/// `body` must not wait for the work it posts to complete: that work may
/// not start before `body` returns.
pub fn post_together<R>(body: impl FnOnce() -> R) -> R {
    // A thread whose locals are being torn down holds nothing back.
    let outermost = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        held.is_none() && {
            *held = Some(Vec::new());
            true
        }
    }) == Ok(true);
    if !outermost {
        return body();
    }
    /// Wakes what was held, even when `body` unwinds.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            let held = HELD.try_with(|held| held.borrow_mut().take());
            held.ok()
                .flatten()
                .into_iter()
                .flatten()
                .for_each(|qp| qp.wake());
        }
    }
    let _release = Release;
    body()
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
    ///
    /// Inside [`post_together`] the wake-up waits for its end.
    fn notify(self: &Arc<Self>) {
        self.posted.swap(true, Ordering::SeqCst);
        // A thread whose locals are being torn down holds nothing.
        let held = HELD.try_with(|held| match held.borrow_mut().as_mut() {
            Some(queue_pairs) => {
                if !queue_pairs.iter().any(|qp| Arc::ptr_eq(qp, self)) {
                    queue_pairs.push(self.clone());
                }
                true
            }
            None => false,
        });
        if held != Ok(true) {
            self.wake();
        }
    }

    /// Has the stream run: the wake-up, once the queue pair has one.
    fn wake(&self) {
        if let Some(wakeup) = self.wakeup.get() {
            wakeup.wake();
        }
    }

    pub(crate) fn event(&self, event: QpEvent) {
        // The receiver lives as long as this struct.
        let _ = self.events_tx.send(event);
    }

    /// The receives of the SRQ the queue pair takes its receives from, as
    /// its engine takes them.
    pub(crate) fn engine_srq(&self) -> Option<Arc<uwarp_stack::rdmap::SharedReceiveQueue>> {
        self.init.srq.as_ref().map(|srq| srq.queue.clone())
    }

    /// Hands the work in the rings to a link being made for the queue
    /// pair; `false` if the queue pair ended before it connected (it was
    /// moved to Error, or destroyed, during its connection's setup): the
    /// link must then take none of it and reset the connection.
    pub(crate) fn link(&self) -> bool {
        self.taker
            .compare_exchange(AWAITING, LINKED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// The link is gone: the handle flushes what is in the rings now and
    /// whatever is posted later.
    pub(crate) fn unlink(self: &Arc<Self>) {
        self.set_state(QpState::Error);
        self.taker.store(ENDED, Ordering::SeqCst);
        // Pairs with the fence in `posted_work`: a post either sees the
        // link gone and flushes, or its request is in the rings the flush
        // below empties.
        fence(Ordering::SeqCst);
        self.flush_rings();
    }

    /// Moves a queue pair that never connected to Error, flushing what is
    /// in its rings (`ibv_modify_qp` to `IBV_QPS_ERR`, a failed or
    /// rejected connection); `false` if it is connected or ended already.
    pub(crate) fn end_unlinked(self: &Arc<Self>) -> bool {
        if self
            .taker
            .compare_exchange(AWAITING, ENDED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        self.set_state(QpState::Error);
        fence(Ordering::SeqCst);
        self.flush_rings();
        true
    }

    /// A work request went into a ring: the link takes it (woken), or,
    /// with the link gone, the handle flushes it at once.
    fn posted_work(self: &Arc<Self>) {
        // Pairs with the fence in `unlink`.
        fence(Ordering::SeqCst);
        if self.taker.load(Ordering::Relaxed) == ENDED {
            self.flush_rings();
        } else {
            self.notify();
        }
    }

    /// Opens a batch of completions a link pushes; the batch holds until
    /// the returned guard drops. [`QueuePair::destroy`] waits for an open
    /// batch, and a batch opened after destruction pushes nothing
    /// ([`Deliveries::live`]).
    pub(crate) fn deliveries(&self) -> Deliveries<'_> {
        self.delivering.store(true, Ordering::SeqCst);
        Deliveries {
            shared: self,
            live: !self.destroyed.load(Ordering::SeqCst),
        }
    }

    /// Marks the queue pair destroyed and waits until no link is pushing
    /// its completions: after this returns none reaches a queue.
    fn stop_deliveries(&self) {
        // Sequentially consistent, like `deliveries`: either the link's
        // batch sees the queue pair destroyed, or this sees the batch.
        self.destroyed.store(true, Ordering::SeqCst);
        while self.delivering.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
}

/// A batch of completions a link pushes (see [`QpShared::deliveries`]).
pub(crate) struct Deliveries<'a> {
    shared: &'a QpShared,
    live: bool,
}

impl Deliveries<'_> {
    /// Whether the queue pair lives: its completions may be pushed.
    pub(crate) fn live(&self) -> bool {
        self.live
    }
}

impl Drop for Deliveries<'_> {
    fn drop(&mut self) {
        self.shared.delivering.store(false, Ordering::Release);
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
                sends: SegQueue::new(),
                recvs: SegQueue::new(),
                send_slots: Slots::new(init.max_send_wr),
                recv_slots: Slots::new(init.max_recv_wr),
                state: AtomicU8::new(encode(QpState::Idle)),
                taker: AtomicU8::new(AWAITING),
                destroyed: AtomicBool::new(false),
                delivering: AtomicBool::new(false),
                unpushed: Mutex::new(Unpushed::default()),
                connected: AtomicBool::new(false),
                disconnect: AtomicBool::new(false),
                abort: AtomicBool::new(false),
                posted: AtomicBool::new(false),
                events_tx,
                events_rx,
                wakeup: OnceLock::new(),
                counters: CounterCells::default(),
                init,
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
    /// flushed. Malformed requests are refused here, `ENOMEM` answers a
    /// post beyond [`QpInit::max_send_wr`] outstanding, and every request
    /// in a child of `fork` is refused (the queue pair's device is its
    /// parent's).
    pub fn post_send(&self, wr: SendWr) -> Result<(), Error> {
        self.driver.ensure_in_its_process()?;
        self.check_live()?;
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
        self.shared.send_slots.take()?;
        self.shared.sends.push(wr);
        self.shared.posted_work();
        Ok(())
    }

    /// Posts a receive work request (refused when the queue pair uses a
    /// shared receive queue, and in a child of `fork`); `ENOMEM` beyond
    /// [`QpInit::max_recv_wr`] outstanding.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), Error> {
        self.driver.ensure_in_its_process()?;
        self.check_live()?;
        if self.shared.init.srq.is_some() {
            return Err(Error::WrongState("the queue pair receives from an SRQ"));
        }
        if wr.sgl.len() > self.shared.init.caps.max_recv_sge {
            return Err(Error::InvalidArgument("more SGEs than max_recv_sge"));
        }
        self.shared.recv_slots.take()?;
        self.shared.recvs.push(wr);
        self.shared.posted_work();
        Ok(())
    }

    /// Refuses work for a destroyed queue pair.
    fn check_live(&self) -> Result<(), Error> {
        if self.shared.destroyed.load(Ordering::Relaxed) {
            return Err(Error::WrongState("the queue pair is destroyed"));
        }
        Ok(())
    }

    /// How many send and receive work requests are outstanding: posted,
    /// and their completions not yet pushed to their queues (receives on
    /// an SRQ count there, not here).
    pub fn outstanding(&self) -> (usize, usize) {
        let shared = &self.shared;
        (shared.send_slots.taken(), shared.recv_slots.taken())
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

    /// Abortive close (`ibv_modify_qp` to `IBV_QPS_ERR`): outstanding work
    /// is flushed and the connection is reset. A queue pair not connected
    /// yet enters Error at once and its work is flushed now; a connection
    /// still being set up for it is reset once it comes up. In a child of
    /// `fork` it does nothing to a parent's queue pair.
    pub fn abort(&self) {
        if !self.in_its_process() || self.shared.end_unlinked() {
            return;
        }
        self.shared.abort.store(true, Ordering::Release);
        self.shared.notify();
    }

    /// Its connection failed or was rejected before it came up: a queue
    /// pair not connected enters Error, its work flushed, as the kernel's
    /// iWARP connection manager leaves it. A connected one is left alone.
    pub(crate) fn connection_failed(&self) {
        if self.in_its_process() {
            self.shared.end_unlinked();
        }
    }

    /// Whether this is the process the queue pair's device was opened in.
    /// In a child of `fork`, a parent's queue pair is the parent's: the
    /// child leaves its work and its connection alone (and waits for no
    /// thread or lock the parent held when it forked).
    fn in_its_process(&self) -> bool {
        self.driver.ensure_in_its_process().is_ok()
    }

    /// Destroys the queue pair (`ibv_destroy_qp`): a connection being set
    /// up or established is reset (the peer sees it end), work still
    /// outstanding is dropped; one the application disconnected first
    /// (`rdma_disconnect`, then `rdma_destroy_qp`) closes gracefully
    /// instead, its FIN after what it sent, as the kernel's does
    /// (`QpEngine::detach`). Once this returns nothing of the queue
    /// pair reaches a completion queue: no completion waiting for room in
    /// a full queue, no flush of the reset. Completions already in a
    /// queue stay there. Later posts fail; the handle's other calls
    /// still answer. In a child of `fork` it does nothing to a parent's
    /// queue pair.
    pub fn destroy(&self) {
        if !self.in_its_process() {
            return;
        }
        self.shared.stop_deliveries();
        self.abort();
        // The handle's flushes are over (a flush under way holds the lock)
        // and push nothing more; what waited for room goes.
        let mut unpushed = self
            .shared
            .unpushed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *unpushed = Unpushed::default();
    }

    /// Whether the application destroyed it.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.shared.destroyed.load(Ordering::SeqCst)
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
