//! The queue behind an event channel: the events not yet read, without
//! bound (the kernel's connection manager queues without bound too; a
//! poster never blocks), and a descriptor that is readable exactly while
//! the queue holds an event, as a channel's `fd` must be for programs
//! that `poll` it.
//!
//! The descriptor is one end of a socket pair holding at most one octet:
//! the queue's readiness token, sent when the first event is queued and
//! taken when the last leaves, both under the queue's lock. A socket, not
//! a pipe, so that the token can be taken with `MSG_DONTWAIT` whatever
//! the application did to the descriptor's flags, and waited for with a
//! blocking `MSG_PEEK` that behaves as the kernel's `read()` on the
//! connection manager's descriptor: a cancellation point, interrupted by
//! a signal (`EINTR`) unless the signal was installed with `SA_RESTART`.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, MutexGuard};

use super::events::{Event, Liveness};

/// A channel's queue of events and its readiness descriptor.
///
/// A child of `fork` shares the queue's sockets with its parent but not
/// its events (its copy of the memory): in the child, a queue its parent
/// made ([`EventQueue::is_foreign`]) never touches the sockets, so the
/// child can neither take the parent's readiness token nor shut the
/// parent's channel down.
pub struct EventQueue {
    state: Mutex<State>,
    /// The fork generation the queue was made in
    /// ([`uwarp::fork_generation`]).
    generation: u64,
    /// The end applications wait on (the channel's `fd`).
    readable: OwnedFd,
    /// The end the token is sent from.
    token: OwnedFd,
}

struct State {
    events: VecDeque<Box<Event>>,
    /// The channel was destroyed: events are dropped, not queued.
    closed: bool,
}

impl EventQueue {
    /// A new, empty queue, or the `errno` of the failure.
    pub fn new() -> Result<EventQueue, i32> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is valid for the two descriptors socketpair
        // writes.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        // SAFETY: both descriptors are open and owned by nothing else.
        let (readable, token) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(EventQueue {
            state: Mutex::new(State {
                events: VecDeque::new(),
                closed: false,
            }),
            generation: uwarp::fork_generation(),
            readable,
            token,
        })
    }

    /// The descriptor that is readable while an event is queued.
    pub fn fd(&self) -> RawFd {
        self.readable.as_raw_fd()
    }

    /// Whether the queue was made by the parent of this process (a child
    /// of `fork`): its events are the parent's, not to be taken here.
    pub fn is_foreign(&self) -> bool {
        self.generation != uwarp::fork_generation()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event` (dropped if the channel is closed).
    pub fn post(&self, event: Box<Event>) {
        let mut state = self.state();
        if state.closed || self.is_foreign() {
            return;
        }
        if state.events.is_empty() {
            self.send_token();
        }
        state.events.push_back(event);
    }

    /// Takes the next event, `None` when the queue holds none.
    pub fn take(&self) -> Option<Box<Event>> {
        if self.is_foreign() {
            return None;
        }
        let mut state = self.state();
        let taken = state.events.pop_front();
        if taken.is_some() && state.events.is_empty() {
            self.take_token();
        }
        taken
    }

    /// Takes out every queued event about the id whose liveness is
    /// `about`, for the caller to drop or move (a destroyed id's unread
    /// events; a migrated id's).
    pub fn remove_about(&self, about: &std::sync::Arc<Liveness>) -> Vec<Box<Event>> {
        let mut state = self.state();
        if self.is_foreign() {
            return Vec::new();
        }
        let before = state.events.len();
        let (removed, kept): (Vec<_>, Vec<_>) = state
            .events
            .drain(..)
            .partition(|event| event.is_about(about));
        state.events = kept.into();
        if before > 0 && state.events.is_empty() {
            self.take_token();
        }
        removed
    }

    /// Closes the queue: its events are dropped, later ones too, and a
    /// thread waiting on its descriptor wakes to find the end of the
    /// stream (the descriptors stay open, so their numbers are not reused
    /// under such a thread, until the queue itself is dropped).
    pub fn close(&self) {
        let foreign = self.is_foreign();
        let events = {
            let mut state = self.state();
            state.closed = true;
            if !state.events.is_empty() && !foreign {
                self.take_token();
            }
            std::mem::take(&mut state.events)
        };
        if !foreign {
            // SAFETY: shuts down this queue's own socket.
            unsafe { libc::shutdown(self.token.as_raw_fd(), libc::SHUT_RDWR) };
        }
        drop(events);
    }

    fn send_token(&self) {
        let octet = 1u8;
        // SAFETY: sends one octet from a local; the socket is this
        // queue's. The socket holds far more than the one octet it ever
        // carries, so this does not block.
        unsafe {
            libc::send(
                self.token.as_raw_fd(),
                (&raw const octet).cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
    }

    fn take_token(&self) {
        let mut octet = 0u8;
        // SAFETY: receives at most one octet into a local, without
        // waiting, from this queue's own socket.
        unsafe {
            libc::recv(
                self.readable.as_raw_fd(),
                (&raw mut octet).cast(),
                1,
                libc::MSG_DONTWAIT,
            )
        };
    }
}

/// What [`wait_readable`] found.
const WAIT_READY: i32 = 0;

/// What a [`Take`] answers when nothing is queued yet: the caller waits
/// on the descriptor it wrote, and asks again.
pub const TAKE_NOTHING: i32 = 1;

/// A look at a queue for what a waiting verb wants: its answer (0, or -1
/// with `errno` set), or [`TAKE_NOTHING`] with the queue's descriptor
/// written to `fd`. `args` are the verb's own.
pub type Take = unsafe extern "C" fn(args: *mut core::ffi::c_void, fd: *mut RawFd) -> i32;

/// Asks `take` until it answers, waiting on the descriptor it names in
/// between (`wait_readable`): how every waiting verb of the connection
/// manager waits. Its only calls are `extern "C"` ones, so a thread
/// cancelled while it waits unwinds through it as through C.
///
/// # Safety
///
/// `args` is what `take` expects.
pub unsafe extern "C" fn take_or_wait(take: Take, args: *mut core::ffi::c_void) -> i32 {
    loop {
        let mut fd: RawFd = -1;
        // SAFETY: the caller's promise; `fd` is a local.
        let taken = unsafe { take(args, &raw mut fd) };
        if taken != TAKE_NOTHING {
            return taken;
        }
        if wait_readable(fd) != WAIT_READY {
            return -1;
        }
    }
}

/// Waits until `fd`, a queue's descriptor, is readable, as the kernel's
/// `read()` on the connection manager's descriptor waits: 0 once an event
/// may be queued; -1 with `errno` `EAGAIN` at once when the application
/// made the descriptor non-blocking and nothing is queued, `EINTR` when a
/// signal without `SA_RESTART` interrupts the wait. A queue closed under
/// the waiting thread (a channel destroyed while another thread reads it,
/// as rping does on its way out) leaves the thread blocked, as the
/// kernel's descriptor does, until a signal interrupts it.
///
/// It calls only `extern "C"` functions, so a thread cancelled while it
/// waits unwinds through it as through C (see
/// [`wait_record`](crate::export::wait_record)).
extern "C" fn wait_readable(fd: RawFd) -> i32 {
    let mut octet = 0u8;
    // SAFETY: peeks at most one octet into a local.
    let got = unsafe { libc::recv(fd, (&raw mut octet).cast(), 1, libc::MSG_PEEK) };
    if got == 1 {
        return WAIT_READY;
    }
    if got == 0 {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
        return crate::export::fail(libc::EINTR);
    }
    -1
}
