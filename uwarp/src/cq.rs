//! Completion queues (`ibv_cq`): filled by the dataplane, polled by the
//! application without system calls, with the RDMAC verbs' arming for the
//! next completion or the next solicited one (RFC 5040 section 5.1's
//! Solicited Event) when the application wants to sleep instead of poll.

use std::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use uwarp_dataplane::polled::Polled;
use uwarp_stack::verbs::{WcStatus, WorkCompletion};

use crate::channel::ChannelShared;
use crate::driver::Driver;
use crate::slots::Slots;

const DISARMED: u8 = 0;
const ARMED_ANY: u8 = 1;
const ARMED_SOLICITED: u8 = 2;

/// A completion queue; clone the handle to share it between queue pairs.
///
/// On a DPDK device whose cores run inline ([`crate::CoreThreads::Inline`]),
/// polling an empty queue runs the device's cores once, and the waiting
/// calls run them while they wait: the application's polling loop is the
/// stack's. On the socket transport, an application that spins on the
/// queue reads and writes the sockets of the connections feeding it on
/// its own thread (ARCHITECTURE.md, `transport/socket/`).
#[derive(Debug, Clone)]
pub struct CompletionQueue {
    pub(crate) shared: Arc<CqShared>,
    driver: Driver,
}

#[derive(Debug)]
pub(crate) struct CqShared {
    entries: ArrayQueue<WorkCompletion>,
    overflowed: AtomicUsize,
    arm: AtomicU8,
    /// Whether the last event was raised by arming, for completions
    /// already queued (see [`CompletionQueue::channel_event_due`]).
    raised_at_arm: AtomicBool,
    /// Events raised by arming and not yet taken; its lock also orders
    /// `arrived` against the waiters' last look at the queue.
    events: Mutex<u64>,
    wake: Condvar,
    /// Threads in [`CompletionQueue::poll_blocking`].
    waiters: AtomicUsize,
    arrived: Condvar,
    /// The channel its events also go to, with the queue's token there.
    channel: Option<(Arc<ChannelShared>, u64)>,
    /// Producers that found the queue full and go on once a poll finds it
    /// empty ([`CqShared::resume_when_room`]).
    stalled: Mutex<Vec<Weak<dyn Resume>>>,
    /// Whether `stalled` may hold any, read by every poll of an empty
    /// queue.
    any_stalled: AtomicBool,
    /// The connections feeding the queue that a polling thread runs
    /// itself ([`Drive`]), once a transport that has them set it.
    feed: OnceLock<Arc<dyn Drive>>,
}

/// Connections feeding a completion queue that an application thread may
/// run itself, instead of waiting for the thread that runs them: the
/// socket transport's (`transport::socket::cq_feed`). A poll that finds
/// the queue empty runs those with something to read once, so a
/// busy-polling application reads its sockets and places what arrived
/// on its own thread, as a kernel TCP application does, with no hand-off
/// between threads.
pub(crate) trait Drive: Send + Sync + std::fmt::Debug {
    /// Runs the connections that have something to read, unless another
    /// thread polling the queue does so now; returns whether anything
    /// happened.
    fn drive(&self) -> bool;

    /// A poll found completions in the queue.
    fn hit(&self);

    /// The application stops polling to sleep until the queue has
    /// something (it armed it, or waits in `poll_blocking`): whoever else
    /// runs the connections must read them from now on.
    fn sleeps(&self);

    /// Itself, for the transport that made it to see its own type.
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}

/// A producer of completions with no thread of its own to retry a push
/// that found its queue full: a queue pair's handle flushing the work its
/// connection will never take (`QpShared::flush_rings`). The next poll
/// that finds the queue empty resumes it, on the polling thread.
pub(crate) trait Resume: Send + Sync + std::fmt::Debug {
    /// Pushes what waits, as far as there is room.
    fn resume(self: Arc<Self>);
}

impl CqShared {
    /// Wakes the threads waiting in [`CompletionQueue::poll_blocking`]; the
    /// dataplane calls it once after each batch of pushes.
    pub(crate) fn wake_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.events.lock().unwrap_or_else(|e| e.into_inner());
            self.arrived.notify_all();
        }
    }

    /// Has `producer` resumed by the next poll that finds the queue empty.
    /// A producer calls it after a push failed, and then tries the push
    /// once more: a poll that emptied the queue before this call resumed
    /// nobody, and then the push finds room.
    pub(crate) fn resume_when_room(&self, producer: Weak<dyn Resume>) {
        let mut stalled = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
        stalled.push(producer);
        self.any_stalled.store(true, Ordering::Relaxed);
        drop(stalled);
        // Pairs with the fence in `resume_stalled`: either the producer's
        // next push sees the room the poll made, or the poll sees it
        // waiting (each side's store could otherwise wait in its store
        // buffer while it loads, as in `push`).
        fence(Ordering::SeqCst);
    }

    /// The queue's [`Drive`], made by `make` if it has none yet.
    pub(crate) fn feed(&self, make: impl FnOnce() -> Arc<dyn Drive>) -> Arc<dyn Drive> {
        self.feed.get_or_init(make).clone()
    }

    /// Runs the connections feeding the queue that have something to
    /// read ([`Drive::drive`]); returns whether anything happened.
    fn drive_connections(&self) -> bool {
        self.feed.get().is_some_and(|feed| feed.drive())
    }

    /// Tells the connections feeding the queue that a poll found
    /// completions ([`Drive::hit`]).
    fn connections_hit(&self) {
        if let Some(feed) = self.feed.get() {
            feed.hit();
        }
    }

    /// Tells the connections feeding the queue that the application
    /// sleeps until the queue has something ([`Drive::sleeps`]).
    fn connections_sleep(&self) {
        if let Some(feed) = self.feed.get() {
            feed.sleeps();
        }
    }

    /// Takes the oldest completion; with none, resumes the producers that
    /// found the queue full and looks again.
    fn pop(&self) -> Option<WorkCompletion> {
        self.entries.take().or_else(|| {
            self.resume_stalled();
            self.entries.take()
        })
    }

    /// Resumes the producers that found the queue full (a poll found it
    /// empty).
    fn resume_stalled(&self) {
        fence(Ordering::SeqCst);
        if !self.any_stalled.load(Ordering::Relaxed) {
            return;
        }
        let stalled = {
            let mut stalled = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
            self.any_stalled.store(false, Ordering::Relaxed);
            std::mem::take(&mut *stalled)
        };
        for producer in stalled.iter().filter_map(Weak::upgrade) {
            producer.resume();
        }
    }

    /// Adds the completion of a work request holding a slot of `slots`
    /// ([`push`](Self::push)): the slot is freed first, so that an
    /// application that polls the completion and posts at once finds it
    /// free, and taken back if the queue is full.
    pub(crate) fn push_freeing(
        &self,
        wc: WorkCompletion,
        slots: &Slots,
    ) -> Result<(), WorkCompletion> {
        slots.free(1);
        self.push(wc).inspect_err(|_| slots.take_back(1))
    }

    /// Adds a completion, raising an event if the queue is armed for it.
    /// A full queue hands the completion back (the dataplane keeps it, in
    /// order, and counts the miss in `overflowed`).
    pub(crate) fn push(&self, wc: WorkCompletion) -> Result<(), WorkCompletion> {
        self.entries.push(wc).inspect_err(|_| {
            self.overflowed.fetch_add(1, Ordering::Relaxed);
        })?;
        // Pairs with the fence in `req_notify`: either this load sees the
        // arm, or the application's poll after arming sees the entry. With
        // acquire/release alone both could miss (each side's store waiting
        // in its store buffer while it loads), and the event would be lost
        // with the completion unseen: the application sleeps for ever.
        fence(Ordering::SeqCst);
        let arm = self.arm.load(Ordering::Acquire);
        let wanted = match arm {
            ARMED_ANY => true,
            ARMED_SOLICITED => wc.solicited || wc.status != WcStatus::Success,
            _ => false,
        };
        if wanted {
            self.raise(arm, false);
        }
        Ok(())
    }

    /// Raises the event of the arm `arm` if it still holds (whoever
    /// disarms it raises it: one event per arm); `at_arm` when arming
    /// raises it, for completions already queued.
    fn raise(&self, arm: u8, at_arm: bool) {
        if self
            .arm
            .compare_exchange(arm, DISARMED, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.raised_at_arm.store(at_arm, Ordering::Release);
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        *events += 1;
        self.wake.notify_all();
        drop(events);
        if let Some((channel, token)) = &self.channel {
            channel.notify(*token);
        }
    }
}

impl CompletionQueue {
    /// A queue holding up to `depth` completions, on a device whose cores
    /// `driver` runs; its events also go to `channel`, as `token`.
    pub(crate) fn new(
        depth: usize,
        driver: Driver,
        channel: Option<(Arc<ChannelShared>, u64)>,
    ) -> Self {
        Self {
            driver,
            shared: Arc::new(CqShared {
                entries: ArrayQueue::new(depth.max(1)),
                overflowed: AtomicUsize::new(0),
                arm: AtomicU8::new(DISARMED),
                raised_at_arm: AtomicBool::new(false),
                events: Mutex::new(0),
                wake: Condvar::new(),
                waiters: AtomicUsize::new(0),
                arrived: Condvar::new(),
                channel,
                stalled: Mutex::new(Vec::new()),
                any_stalled: AtomicBool::new(false),
                feed: OnceLock::new(),
            }),
        }
    }

    /// Takes up to `max` completions, oldest first, appending them to `out`;
    /// returns how many it took.
    pub fn poll(&self, out: &mut Vec<WorkCompletion>, max: usize) -> usize {
        if self.shared.entries.is_empty() {
            self.run_empty();
        }
        let mut taken = 0;
        while taken < max {
            let Some(wc) = self.shared.pop() else {
                break;
            };
            out.push(wc);
            taken += 1;
        }
        if taken > 0 {
            self.shared.connections_hit();
        }
        taken
    }

    /// Takes the oldest completion.
    pub fn poll_one(&self) -> Option<WorkCompletion> {
        let found = self.shared.pop().or_else(|| {
            self.run_empty();
            self.shared.entries.take()
        });
        if found.is_some() {
            self.shared.connections_hit();
        }
        found
    }

    /// What a poll that finds the queue empty does: runs the connections
    /// feeding it on this thread ([`Drive`]), and, when they had nothing,
    /// what the device's driver does for an empty poll (steps inline
    /// cores, or now and then yields the CPU to the cores' threads). In a
    /// child of `fork` the parent's connections are left alone.
    fn run_empty(&self) {
        let drove = self.driver.ensure_in_its_process().is_ok() && self.shared.drive_connections();
        if !drove {
            self.driver.empty_poll();
        }
    }

    /// Arms the queue: the next completion (or, with `solicited_only`, the
    /// next solicited or failed one) raises one event for
    /// [`wait_event`](Self::wait_event), and on the queue's
    /// [`CompletionChannel`](crate::CompletionChannel) if it has one
    /// (`ibv_req_notify_cq`).
    ///
    /// Armed for any completion while completions are still queued, it
    /// raises its event at once, as Mellanox's RNICs do (their arm names
    /// the consumer index, and entries past it fire): an application that
    /// arms after a poll that left completions behind is woken for them
    /// instead of sleeping until one more arrives. Debian's perftest 4.5
    /// polls 16 at a time and then waits for an event with more queued
    /// (fixed upstream by perftest commit 14955fe, "Fix BW tests stuck
    /// pending completion event"). An application that polls after arming,
    /// as the verbs ask, sees one spurious event at most. Arming for
    /// solicited completions waits for the next one, queued ones aside.
    pub fn req_notify(&self, solicited_only: bool) {
        let arm = if solicited_only {
            ARMED_SOLICITED
        } else {
            ARMED_ANY
        };
        self.shared.connections_sleep();
        self.shared.arm.store(arm, Ordering::Release);
        // See `CqShared::push`: orders the arm before the application's
        // next poll, and before the look at the queue below.
        fence(Ordering::SeqCst);
        if arm == ARMED_ANY && !self.shared.entries.is_empty() {
            self.shared.raise(arm, true);
        }
    }

    /// Whether an event of this queue just read from its
    /// [`CompletionChannel`](crate::CompletionChannel) is still due, for a
    /// reader that hands events on (`ibv_get_cq_event`). An event that
    /// arming raised for completions already queued, read after the
    /// application polled them all, is withdrawn and the queue armed
    /// again, as if arming had found the queue empty: the application
    /// took what it was raised for. An application that arms, polls
    /// everything and then waits for the next event (fio's rdma engine)
    /// would otherwise wake for nothing, and fio then loses count of the
    /// events it must acknowledge.
    pub fn channel_event_due(&self) -> bool {
        if !self.shared.raised_at_arm.swap(false, Ordering::AcqRel)
            || !self.shared.entries.is_empty()
        {
            return true;
        }
        self.req_notify(false);
        false
    }

    /// Waits up to `timeout` for an event raised since the last call and
    /// consumes it (`ibv_get_cq_event`); `false` on timeout.
    pub fn wait_event(&self, timeout: Duration) -> bool {
        if self.driver.is_inline() {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let mut events = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
                if *events > 0 {
                    *events -= 1;
                    return true;
                }
                drop(events);
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                self.driver.progress();
            }
        }
        let events = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
        let (mut events, _) = self
            .shared
            .wake
            .wait_timeout_while(events, timeout, |count| *count == 0)
            .unwrap_or_else(|e| e.into_inner());
        if *events == 0 {
            return false;
        }
        *events -= 1;
        true
    }

    /// Waits until a completion arrives or `timeout` passes, sleeping on a
    /// condition variable the dataplane signals once per batch of
    /// completions (no CPU spent, and no timer granularity added to the
    /// wait).
    pub fn poll_blocking(&self, timeout: Duration) -> Option<WorkCompletion> {
        if let Some(wc) = self.poll_one() {
            return Some(wc);
        }
        if self.driver.is_inline() {
            // One clock read a turn, for the deadline and the cores.
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let now = std::time::Instant::now();
                if now >= deadline {
                    return None;
                }
                self.driver.progress_at(now);
                if let Some(wc) = self.shared.pop() {
                    return Some(wc);
                }
            }
        }
        let shared = &self.shared;
        let deadline = std::time::Instant::now() + timeout;
        shared.connections_sleep();
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = shared.events.lock().unwrap_or_else(|e| e.into_inner());
        let found = loop {
            // Checked under the lock: a push after this check notifies
            // only once this thread is waiting. Nothing that pushes runs
            // under it (the queue's connections, the stalled producers a
            // poll resumes): a push takes this lock to wake the waiters.
            if let Some(wc) = shared.entries.take() {
                break Some(wc);
            }
            drop(guard);
            shared.resume_stalled();
            guard = shared.events.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(wc) = shared.entries.take() {
                break Some(wc);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                break None;
            }
            guard = shared
                .arrived
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(guard);
        shared.waiters.fetch_sub(1, Ordering::SeqCst);
        found
    }

    /// How many times a completion found the queue full; the dataplane
    /// keeps it and delivers it once the application has polled room.
    pub fn overflowed(&self) -> usize {
        self.shared.overflowed.load(Ordering::Relaxed)
    }
}
