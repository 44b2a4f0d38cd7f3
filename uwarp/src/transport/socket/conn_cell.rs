//! [`ConnCell`]: a connection of the socket transport that the dataplane
//! thread and the application's threads both run, one at a time.
//!
//! With only the dataplane thread running connections, every message
//! crossed two threads on each side: the application posted, the
//! dataplane thread sent; the dataplane thread read and placed, the
//! application polled. A ping-pong kept four threads busy (two
//! applications polling, two dataplane threads), and on a machine with
//! fewer CPUs than that each hand-over waited for a CPU. A kernel TCP
//! program reads and writes its socket on its own thread, and so can an
//! application of this transport that waits by spinning on its queues
//! (polls them empty over and over, [`application_runs`]): the dataplane
//! thread leaves it the sockets of the connections feeding those queues
//! ([`ConnCell::application_reads`]), and then
//!
//! - a post runs the connection's round at once on the posting thread
//!   ([`ConnCell::run_posted`], through the queue pair's `Wakeup`), so
//!   what was posted is written before the post returns;
//! - a poll that finds a completion queue empty runs the rounds of the
//!   connections feeding it whose sockets have octets (`cq_feed.rs`);
//! - the dataplane thread neither reads those sockets nor wakes for
//!   their octets, so it takes no CPU from the application for them. It
//!   still runs the rounds it finds free for the rest (octets waiting for
//!   room, the kernel's counters, the timers, posts a request asks it
//!   for), without reading or taking posts.
//!
//! The dataplane thread takes the sockets back once the polls stop for a
//! [`WINDOW`], or find completions most of the time (the application is
//! the bottleneck of a stream of messages), or at once when the
//! application says it sleeps (it arms the queue, or waits in
//! `poll_blocking`). An application that waits for events (tgtd, rping),
//! or is busy with a stream, keeps the dataplane thread's shape: its
//! thread handles completions while the dataplane thread moves the
//! octets, in parallel.
//!
//! Whoever runs a round holds the connection's lock, and nobody waits
//! for it: a thread that finds it held asks the holder for one more round
//! and leaves, and the holder runs it (an application thread) or runs its
//! next round without parking (the dataplane thread). So what was posted
//! while the connection was held is not left until a parked dataplane
//! thread's timeout, and no application thread ever blocks on the
//! dataplane or on another application thread here. The dataplane thread
//! waits for the lock only while the device closes.

use std::cell::RefCell;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::{Duration, Instant};

use super::conn::{Conn, RX_CHUNK};
use super::cq_feed::{CqFeed, PollCounts};
use super::idle::Interest;
use super::readiness::Readiness;
use crate::bell::Bell;
use crate::fork;
use crate::qp::QpShared;
use crate::transport::wakeup::Wakeup;

/// How often the dataplane thread weighs what the application did with
/// a connection's queues, and so about the longest an application that
/// stopped polling without saying so (to compute, say) leaves what
/// arrives unread, beside the dataplane thread's park.
const WINDOW: Duration = Duration::from_micros(100);

/// Polls of a connection's queues that find them empty within a
/// [`WINDOW`], with no sleep, after which the dataplane thread leaves the
/// socket to the application: one that polls until empty and then waits
/// for an event polls once or twice between sleeps; one that waits by
/// spinning polls thousands of times.
const SPINNING_POLLS: u64 = 64;

/// Whether the application runs a connection itself after a window in
/// which it did (`left`) or did not, and polled its queues as `window`
/// counts: not after a sleep; else, to start, it waited by spinning (at
/// least [`SPINNING_POLLS`] empty polls), and to go on, it still polls;
/// either way at least [`EMPTY_PER_HIT`] empty polls per poll that found
/// completions. An application that finds completions at most polls is
/// the bottleneck of a stream of messages: the dataplane thread then
/// reads and places while the application handles what arrived, in
/// parallel.
fn application_runs(left: bool, window: PollCounts) -> bool {
    let enough = if left { 1 } else { SPINNING_POLLS };
    window.sleeps == 0 && window.empty >= enough && window.hits * EMPTY_PER_HIT <= window.empty
}

/// At least this many empty polls per poll that found completions, for
/// an application that waits by spinning.
const EMPTY_PER_HIT: u64 = 4;

thread_local! {
    /// The buffer an application thread reads its connections' sockets
    /// into, made at its first read.
    static RX: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A connection, shared by the dataplane thread (which holds the only
/// strong reference) and the application's threads (weak ones, in the
/// queue pair's wake-up and in its completion queues' feeds).
pub(crate) struct ConnCell {
    conn: Mutex<Conn>,
    /// The connection's socket, open as long as the connection is.
    fd: RawFd,
    /// Its queue pair's state the application shares.
    qp: Arc<QpShared>,
    /// A thread asked for a round while another held the connection.
    requested: AtomicBool,
    /// An application thread's round left the connection needing the
    /// dataplane thread's (see [`ConnCell::has_news`]).
    stirred: AtomicBool,
    /// Itself, as its feeds hold it.
    me: Weak<ConnCell>,
    /// The feeds' polls (summed) at the last post that ran a round.
    polls_at_post: AtomicU64,
    /// The dataplane thread leaves the socket to the application's
    /// threads, which run the connection's posts and reads.
    left: AtomicBool,
    /// Posts were held back for the next poll ([`ConnCell::run_posted`]),
    /// or octets wait for room in the socket, and its feeds hold it for
    /// that.
    unsent: AtomicBool,
    /// The feeds of its completion queues (one if both are the same
    /// queue).
    feeds: Vec<Arc<CqFeed>>,
    /// The fork generation of the process the connection runs in: in a
    /// child of `fork`, the parent's socket is closed (its number may be
    /// another descriptor's by now), so the child runs nothing.
    generation: u64,
}

/// The dataplane thread's record of what the application did with a
/// connection's queues.
#[derive(Debug)]
pub(super) struct PollWatch {
    /// The counts when the current window began.
    since: PollCounts,
    /// When it began.
    began: Instant,
}

impl Default for PollWatch {
    fn default() -> Self {
        PollWatch {
            since: PollCounts::default(),
            began: Instant::now(),
        }
    }
}

impl PollWatch {
    /// When the current window ends, and the polls are weighed again.
    pub(super) fn window_ends(&self) -> Instant {
        self.began + WINDOW
    }
}

impl ConnCell {
    /// Shares `conn`, and has the application's threads run it from now
    /// on: its queue pair's posts, and polls of its completion queues that
    /// find them empty. `bell` is the dataplane thread's.
    pub(super) fn share(conn: Conn, bell: &Arc<Bell>) -> Arc<Self> {
        let qp = conn.qp().shared.clone();
        let fd = conn.fd();
        let (send_cq, recv_cq) = (&qp.init.send_cq.shared, &qp.init.recv_cq.shared);
        let mut queues = vec![send_cq];
        if !Arc::ptr_eq(send_cq, recv_cq) {
            queues.push(recv_cq);
        }
        let feeds = queues
            .into_iter()
            .filter_map(|cq| CqFeed::of(cq, bell))
            .collect::<Vec<_>>();
        let cell = Arc::new_cyclic(|weak: &Weak<ConnCell>| {
            feeds.iter().for_each(|feed| feed.add(fd, weak.clone()));
            ConnCell {
                conn: Mutex::new(conn),
                fd,
                qp: qp.clone(),
                requested: AtomicBool::new(false),
                stirred: AtomicBool::new(false),
                me: weak.clone(),
                polls_at_post: AtomicU64::new(u64::MAX),
                left: AtomicBool::new(false),
                unsent: AtomicBool::new(false),
                feeds,
                generation: fork::generation(),
            }
        });
        // A queue pair connects once, so its wake-up is unset.
        let _ = qp.wakeup.set(Wakeup::Socket(Arc::downgrade(&cell)));
        cell
    }

    /// The connection, waiting for a thread that runs it (the dataplane
    /// thread only, as the device closes).
    pub(super) fn lock(&self) -> MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection, unless another thread runs it now.
    pub(super) fn try_lock(&self) -> Option<MutexGuard<'_, Conn>> {
        match self.conn.try_lock() {
            Ok(conn) => Some(conn),
            // A round that panicked left nothing half-done that a later
            // round minds: the engine's state is whole between calls.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Whether the connection may need a round now, though its last one
    /// left it quiet: the application posted, a thread asked for a
    /// round, the socket has octets (as `readiness` last looked), or the
    /// application polled or slept since `watch`'s window began (to be
    /// weighed when it ends), or an application thread's round left it
    /// needing this thread.
    pub(super) fn has_news(&self, readiness: &Readiness, watch: &PollWatch) -> bool {
        self.qp.posted.load(Ordering::Acquire)
            || self.requested.load(Ordering::Acquire)
            || self.stirred.load(Ordering::Acquire)
            // SAFETY: the socket is open as long as this cell (see
            // `interest`).
            || readiness.is_readable(unsafe { BorrowedFd::borrow_raw(self.fd) })
            || self.counts() != watch.since
    }

    /// Takes the news that an application thread's round left the
    /// connection needing the dataplane thread (octets wait for room, a
    /// close is under way), answered by the round about to run.
    pub(super) fn take_stirred(&self) {
        if self.stirred.load(Ordering::Relaxed) {
            self.stirred.store(false, Ordering::Release);
        }
    }

    /// Whether posts or octets wait for the feeds' next poll.
    pub(super) fn has_unsent(&self) -> bool {
        self.unsent.load(Ordering::Acquire)
    }

    /// What a parked dataplane thread waits for on the socket; nothing
    /// while an application thread runs the connection.
    pub(super) fn interest(&self) -> Option<Interest<'_>> {
        let (readable, writable) = self.try_lock()?.waits_for();
        // SAFETY: the socket is closed when the `Conn` drops, which is
        // when this cell drops, and `&self` keeps the cell alive for the
        // borrow's lifetime.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        Some(Interest {
            fd,
            readable,
            writable,
        })
    }

    /// Whether the application's threads run the connection themselves,
    /// as `watch` (the dataplane thread's record) finds at `now`. The
    /// answer changes at the end of a [`WINDOW`] of polls, or at once
    /// when the application says it sleeps ([`application_runs`]). Tells
    /// the connection and its feeds.
    pub(super) fn application_reads(&self, watch: &mut PollWatch, now: Instant) -> bool {
        let left = self.left.load(Ordering::Relaxed);
        let in_window = now.saturating_duration_since(watch.began) < WINDOW;
        if in_window && !left {
            // An idle connection costs one comparison a round.
            return false;
        }
        let counts = self.counts();
        let window = counts - watch.since;
        if in_window && window.sleeps == 0 {
            return left;
        }
        watch.since = counts;
        watch.began = now;
        // The feeds look at the socket before it is left to them (a feed
        // whose epoll set cannot be made keeps it with this thread).
        let reads = application_runs(left, window) && {
            self.feeds.iter().for_each(|feed| feed.spins());
            self.feeds.iter().all(|feed| feed.usable())
        };
        if reads != left {
            self.left.store(reads, Ordering::SeqCst);
            // Pairs with the swap and load of `run_posted`'s post: a post
            // that found the connection not left to the application is
            // taken by this round, which reads the posts after this.
            fence(Ordering::SeqCst);
        }
        reads
    }

    /// What the application did with the connection's queues so far.
    fn counts(&self) -> PollCounts {
        self.feeds
            .iter()
            .map(|feed| feed.counts())
            .fold(PollCounts::default(), |sum, counts| sum + counts)
    }

    /// Whether the dataplane thread leaves the socket to the
    /// application's threads.
    pub(super) fn is_left_to_application(&self) -> bool {
        self.left.load(Ordering::Acquire)
    }

    /// The application posted work or asked for a close. While the
    /// connection is left to the application's threads, runs its round
    /// on the posting thread, so what was posted is written to the socket
    /// before the post returns (unless another thread runs the connection
    /// now: then that one runs it); otherwise the dataplane thread takes
    /// the posts at its next round.
    ///
    /// Only the first post after a poll of the connection's queues found
    /// them empty does: posts that follow it with no such poll between
    /// (a chain of work requests, a Write and the Send announcing it, a
    /// stream of Writes whose completions the application takes as they
    /// come) wait for the next such poll, for the application's sleep,
    /// or for the dataplane thread, and are written together then.
    /// Writing each one at once cost a system call per work request, and
    /// on loopback the peer's receive path too, for every TCP segment.
    pub(crate) fn run_posted(&self) {
        if self.generation != fork::generation() {
            return;
        }
        // The post was flagged (a sequentially consistent swap) before
        // this load: see `application_reads`.
        if !self.left.load(Ordering::SeqCst) {
            // The dataplane thread runs it, and takes the posts at its
            // next round.
            return;
        }
        let polls = self.counts().empty;
        if self.polls_at_post.swap(polls, Ordering::Relaxed) != polls {
            self.run_on_application();
        } else {
            self.hold_unsent();
        }
    }

    /// Has the next poll of its queues that finds them empty (or the
    /// application's sleep) run the connection: it has posts or octets
    /// that wait to be sent.
    fn hold_unsent(&self) {
        if !self.unsent.swap(true, Ordering::AcqRel) {
            self.feeds
                .iter()
                .for_each(|feed| feed.hold_unsent(self.me.clone()));
        }
    }

    /// Rounds on this application thread until nobody asks for one, if
    /// the connection is free; whether anything happened. A thread that
    /// finds the connection held asks its holder for one more round
    /// (`requested`) and leaves: the holder runs it before it lets go, or
    /// right after.
    pub(super) fn run_on_application(&self) -> bool {
        if self.generation != fork::generation() {
            return false;
        }
        // This round takes what was posted and held back; a post after
        // this holds its work back anew.
        self.unsent.swap(false, Ordering::AcqRel);
        self.requested.store(true, Ordering::SeqCst);
        // Pairs with the fence in `let_go`: either the holder sees the
        // request once it let go, or this thread finds the lock free.
        fence(Ordering::SeqCst);
        // A thread whose locals are being torn down runs nothing; the
        // dataplane thread takes the request.
        let ran = RX.try_with(|rx| {
            let Ok(mut rx) = rx.try_borrow_mut() else {
                return false;
            };
            if rx.is_empty() {
                rx.resize(RX_CHUNK, 0);
            }
            let mut busy = false;
            while let Some(mut conn) = self.try_lock() {
                while self.requested.swap(false, Ordering::SeqCst) {
                    busy |= conn.run_on_application(&mut rx);
                }
                // Octets the socket had no room for are tried again at
                // the next poll, not left to a dataplane thread that
                // would have to wake for them.
                if conn.has_unwritten() {
                    self.hold_unsent();
                }
                // One left needing more than posts and reads (octets
                // waiting for room, a close under way) is visited by the
                // dataplane thread, though its last round found it quiet.
                if conn.quiet_until().is_none() {
                    self.stirred.store(true, Ordering::Release);
                }
                if !self.let_go(conn) {
                    break;
                }
            }
            busy
        });
        ran.unwrap_or(false)
    }

    /// Takes the request for a round, which the holder of the connection
    /// (the dataplane thread, about to run its round) answers now;
    /// whether there was one.
    pub(super) fn take_request(&self) -> bool {
        // A look first: most rounds find none, and a load keeps the line
        // shared.
        self.requested.load(Ordering::Relaxed) && self.requested.swap(false, Ordering::SeqCst)
    }

    /// Lets go of the connection; whether another thread asked for a
    /// round while it was held, which the caller then runs (or makes sure
    /// it runs soon).
    pub(super) fn let_go(&self, conn: MutexGuard<'_, Conn>) -> bool {
        drop(conn);
        // Pairs with the fence in `run_on_application`: the unlock is
        // ordered before the look at the request.
        fence(Ordering::SeqCst);
        self.requested.load(Ordering::SeqCst)
    }
}

/// The socket leaves its feeds before the connection closes it.
impl Drop for ConnCell {
    fn drop(&mut self) {
        self.feeds.iter().for_each(|feed| feed.remove(self.fd));
    }
}

impl std::fmt::Debug for ConnCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnCell").field("fd", &self.fd).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(empty: u64, hits: u64, sleeps: u64) -> PollCounts {
        PollCounts {
            empty,
            hits,
            sleeps,
        }
    }

    #[test]
    fn an_application_that_spins_waiting_runs_its_connection() {
        assert!(application_runs(false, window(5000, 3, 0)));
        assert!(application_runs(false, window(SPINNING_POLLS, 0, 0)));
        // It keeps it while it polls at all, a completion now and then.
        assert!(application_runs(true, window(2, 0, 0)));
        assert!(application_runs(true, window(400, 100, 0)));
    }

    #[test]
    fn one_that_waits_for_events_or_is_busy_with_a_stream_does_not() {
        // Polls until empty, then sleeps until the next event (tgtd).
        assert!(!application_runs(false, window(3, 40, 3)));
        assert!(!application_runs(true, window(5000, 3, 1)));
        // Too few polls to tell.
        assert!(!application_runs(false, window(SPINNING_POLLS - 1, 0, 0)));
        // Finds completions at most polls: the bottleneck of a stream.
        assert!(!application_runs(false, window(1000, 400, 0)));
        assert!(!application_runs(true, window(100, 26, 0)));
        // Stopped polling (computing, say).
        assert!(!application_runs(true, window(0, 0, 0)));
    }
}
