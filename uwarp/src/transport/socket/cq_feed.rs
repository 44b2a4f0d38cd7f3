//! [`CqFeed`]: the socket transport's connections feeding one completion
//! queue, as a poll of that queue that finds it empty runs them
//! (`cq::Drive`).
//!
//! A poll runs the connections whose posts wait to be sent, and, once the
//! dataplane thread left sockets of the feed to the application
//! (`ConnCell::application_reads`), looks which of those have octets (one
//! `epoll_wait`, a [`Readiness`] set of its own, however many connections
//! feed the queue) and runs their rounds, on the polling thread. The
//! feed counts the polls and the times the application said it would
//! sleep, from which the dataplane thread learns whether an application
//! spins on the queue.

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError, Weak};

use super::conn_cell::ConnCell;
use super::readiness::Readiness;
use crate::bell::Bell;
use crate::cq::{CqShared, Drive};
use crate::fork;

/// What an application did with a queue (or a connection's queues,
/// summed): polls that found it empty and those that found completions,
/// and the times it said it would sleep.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct PollCounts {
    pub(super) empty: u64,
    pub(super) hits: u64,
    pub(super) sleeps: u64,
}

impl std::ops::Add for PollCounts {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        PollCounts {
            empty: self.empty + other.empty,
            hits: self.hits + other.hits,
            sleeps: self.sleeps + other.sleeps,
        }
    }
}

impl std::ops::Sub for PollCounts {
    type Output = Self;

    fn sub(self, earlier: Self) -> Self {
        PollCounts {
            empty: self.empty.wrapping_sub(earlier.empty),
            hits: self.hits.wrapping_sub(earlier.hits),
            sleeps: self.sleeps.wrapping_sub(earlier.sleeps),
        }
    }
}

/// The connections feeding one completion queue.
#[derive(Debug)]
pub(crate) struct CqFeed {
    members: Mutex<Members>,
    /// Polls that found the queue empty and looked at the sockets.
    polls: AtomicU64,
    /// Polls that found the queue holding completions.
    hits: AtomicU64,
    /// Times the application said it would sleep after polling.
    sleeps: AtomicU64,
    /// The dataplane thread left sockets of the feed to the application
    /// since it last said it sleeps.
    spinning: AtomicBool,
    /// No epoll set could be made, or take a socket: the application
    /// never runs the feed's connections.
    broken: AtomicBool,
    /// Connections whose posts wait to be sent by the next poll that
    /// finds the queue empty, or by the application's sleep.
    unsent: Mutex<Vec<Weak<ConnCell>>>,
    /// Whether `unsent` may hold any.
    any_unsent: AtomicBool,
    /// The dataplane thread's bell, rung when the application sleeps
    /// while it has sockets of the feed: a parked dataplane thread takes
    /// them back at once.
    bell: Arc<Bell>,
    /// The fork generation of the process the connections run in: a
    /// child of `fork` runs none of them.
    generation: u64,
}

/// The feed's sockets and their connections, by descriptor.
#[derive(Debug)]
struct Members {
    /// The epoll set of their sockets, made when the dataplane thread
    /// first leaves one to the application: a queue whose application
    /// never spins (most of those an event-driven server makes, one per
    /// connection) costs no descriptor or system call for it.
    readiness: Option<Readiness>,
    by_fd: HashMap<RawFd, Weak<ConnCell>>,
}

impl CqFeed {
    /// The feed of `cq`, made at its first connection on this
    /// transport; `None` if the queue has another transport's [`Drive`]
    /// (none has one).
    pub(super) fn of(cq: &CqShared, bell: &Arc<Bell>) -> Option<Arc<CqFeed>> {
        let drive = cq.feed(|| {
            let members = Members {
                readiness: None,
                by_fd: HashMap::new(),
            };
            Arc::new(CqFeed {
                members: Mutex::new(members),
                polls: AtomicU64::new(0),
                hits: AtomicU64::new(0),
                sleeps: AtomicU64::new(0),
                spinning: AtomicBool::new(false),
                broken: AtomicBool::new(false),
                unsent: Mutex::new(Vec::new()),
                any_unsent: AtomicBool::new(false),
                bell: bell.clone(),
                generation: fork::generation(),
            })
        });
        drive.as_any_arc().downcast::<CqFeed>().ok()
    }

    /// Adds `cell`, whose socket is `fd`.
    pub(super) fn add(&self, fd: RawFd, cell: Weak<ConnCell>) {
        let mut members = self.lock();
        members.by_fd.insert(fd, cell);
        if let Some(readiness) = &members.readiness {
            // SAFETY: the caller's connection holds `fd` open, and
            // removes it here before it closes it.
            if readiness
                .watch(unsafe { BorrowedFd::borrow_raw(fd) })
                .is_err()
            {
                self.broken.store(true, Ordering::Release);
            }
        }
    }

    /// Removes the connection whose socket is `fd`, before it closes.
    pub(super) fn remove(&self, fd: RawFd) {
        let mut members = self.lock();
        if members.by_fd.remove(&fd).is_some() {
            if let Some(readiness) = &members.readiness {
                // SAFETY: the socket is still open (its connection
                // removes it before closing it).
                readiness.forget(unsafe { BorrowedFd::borrow_raw(fd) });
            }
        }
    }

    /// Whether the application may run the feed's connections: its
    /// epoll set, once made, holds every socket.
    pub(super) fn usable(&self) -> bool {
        !self.broken.load(Ordering::Acquire)
    }

    /// What the application did with the queue so far.
    pub(super) fn counts(&self) -> PollCounts {
        PollCounts {
            empty: self.polls.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Acquire),
        }
    }

    /// The dataplane thread leaves sockets of the feed to the
    /// application's polls: polls look at them from now on, until the
    /// application says it sleeps.
    pub(super) fn spins(&self) {
        if self.spinning.load(Ordering::Relaxed) {
            return;
        }
        let mut members = self.lock();
        if members.readiness.is_none() {
            let made = Readiness::new().ok().filter(|readiness| {
                members.by_fd.keys().all(|&fd| {
                    // SAFETY: every member's connection holds its socket
                    // open until it removes it here.
                    readiness
                        .watch(unsafe { BorrowedFd::borrow_raw(fd) })
                        .is_ok()
                })
            });
            if made.is_none() {
                self.broken.store(true, Ordering::Release);
                return;
            }
            members.readiness = made;
        }
        self.spinning.store(true, Ordering::Release);
    }

    /// Has the next poll that finds the queue empty (or the
    /// application's sleep) run `cell`, whose posts wait to be sent.
    pub(super) fn hold_unsent(&self, cell: Weak<ConnCell>) {
        self.unsent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cell);
        self.any_unsent.store(true, Ordering::Release);
    }

    /// The connections whose posts wait to be sent.
    fn take_unsent(&self) -> Vec<Arc<ConnCell>> {
        if !self.any_unsent.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        let unsent = std::mem::take(&mut *self.unsent.lock().unwrap_or_else(|e| e.into_inner()));
        unsent.iter().filter_map(Weak::upgrade).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drive for CqFeed {
    fn drive(&self) -> bool {
        if self.generation != fork::generation() {
            return false;
        }
        self.polls.fetch_add(1, Ordering::Relaxed);
        let mut ready = self.take_unsent();
        if self.spinning.load(Ordering::Acquire) {
            // Another thread polling the queue looks now: it runs them.
            let mut members = match self.members.try_lock() {
                Ok(members) => members,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return run(&ready),
            };
            let members = &mut *members;
            if let Some(readiness) = &mut members.readiness {
                readiness.look();
                ready.extend(
                    readiness
                        .readable()
                        .filter_map(|fd| members.by_fd.get(&fd)?.upgrade()),
                );
            }
        }
        // With the set let go, since dropping a connection's last
        // reference removes it from the set (a connection that ended, or
        // one below that the dataplane thread runs, dropped here).
        ready.retain(|cell| cell.is_left_to_application() || cell.has_unsent());
        run(&ready)
    }

    fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    fn sleeps(&self) {
        if self.generation != fork::generation() {
            return;
        }
        // What was posted and held back goes out before the application
        // sleeps.
        run(&self.take_unsent());
        self.sleeps.fetch_add(1, Ordering::Release);
        if self.spinning.swap(false, Ordering::AcqRel) {
            self.bell.ring();
        }
    }

    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// Runs each of `cells` once on this application thread; whether
/// anything happened.
fn run(cells: &[Arc<ConnCell>]) -> bool {
    cells
        .iter()
        .fold(false, |busy, cell| cell.run_on_application() | busy)
}
