//! What the dataplane thread does after a round in which nothing
//! happened: give the CPU away at once, spin a bounded time, then park
//! until one of its sockets has something or a short timeout passes.
//!
//! The thread shares the machine with the application threads it serves.
//! After it placed a message, the application thread that must see it
//! (and post the answer) may be waiting for this very CPU: each idle
//! round therefore yields it (`sched_yield`), so that thread runs at once
//! rather than when the scheduler next preempts a thread that never
//! sleeps. After [`SPIN`] without work the thread parks in `ppoll(2)` on
//! its sockets: octets arriving wake it at once; work the application
//! posts (lock-free rings that no descriptor signals) is picked up when
//! the [`PARK`] timeout ends.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

/// How long the thread polls, yielding between rounds, before it parks.
const SPIN: Duration = Duration::from_micros(500);
/// The longest one park lasts (plus the kernel's timer slack, 50 us by
/// default): about the most a work request posted to an idle device
/// waits before the thread sees it.
const PARK: Duration = Duration::from_micros(100);

/// A descriptor the parked thread waits on (a socket, or the epoll set
/// of them), and for what.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interest<'a> {
    pub(crate) fd: BorrowedFd<'a>,
    /// Wake when octets (or the end of the stream) arrive.
    pub(crate) readable: bool,
    /// Wake when the socket takes more octets.
    pub(crate) writable: bool,
}

/// The idle back-off of one polling thread.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    /// When the current run of idle rounds began.
    since: Option<Instant>,
    /// Reused between parks.
    fds: Vec<libc::pollfd>,
}

impl Idle {
    /// Called after every round, with whether it did anything and the
    /// sockets a park would wait on.
    pub(crate) fn after_round<'a>(
        &mut self,
        busy: bool,
        interests: impl Iterator<Item = Interest<'a>>,
    ) {
        if busy {
            self.since = None;
            return;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() < SPIN {
            std::thread::yield_now();
        } else {
            self.park(interests);
        }
    }

    /// Waits until a socket is ready as asked, or [`PARK`] passes;
    /// returns how many are ready (0 after the timeout or a signal).
    fn park<'a>(&mut self, interests: impl Iterator<Item = Interest<'a>>) -> usize {
        self.fds.clear();
        // A socket waited on for nothing is left out: a reset one would
        // report POLLHUP at once.
        self.fds.extend(interests.filter_map(|interest| {
            let mut events = 0;
            if interest.readable {
                events |= libc::POLLIN;
            }
            if interest.writable {
                events |= libc::POLLOUT;
            }
            (events != 0).then(|| libc::pollfd {
                fd: interest.fd.as_raw_fd(),
                events,
                revents: 0,
            })
        }));
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: PARK.as_nanos() as libc::c_long,
        };
        // SAFETY: `fds` holds `len` initialised pollfds naming
        // descriptors the caller's borrows keep open for the call; the timespec is live; a null
        // signal mask leaves the thread's own.
        let ready = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        // An error (a signal) is a wake-up like any other: the next round
        // looks again.
        usize::try_from(ready).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::socket::loopback_pair as pair;
    use std::io::Write;
    use std::net::{Shutdown, TcpStream};
    use std::os::fd::AsFd;

    fn interest(stream: &TcpStream, readable: bool, writable: bool) -> Interest<'_> {
        Interest {
            fd: stream.as_fd(),
            readable,
            writable,
        }
    }

    #[test]
    fn octets_waiting_end_a_park() {
        let (near, mut far) = pair();
        far.write_all(b"x").unwrap();
        let mut idle = Idle::default();
        // Readiness is level-triggered: the octet is there before the park.
        assert_eq!(idle.park(std::iter::once(interest(&near, true, false))), 1);
        // Room to write is there at once too.
        assert_eq!(idle.park(std::iter::once(interest(&far, false, true))), 1);
    }

    #[test]
    fn a_socket_waited_on_for_nothing_does_not_end_a_park() {
        // A reset socket reports POLLHUP whatever is asked: left out, it
        // cannot turn the park into a spin.
        let (near, _far) = pair();
        near.shutdown(Shutdown::Both).unwrap();
        let mut idle = Idle::default();
        let started = Instant::now();
        assert_eq!(idle.park(std::iter::once(interest(&near, false, false))), 0);
        assert!(started.elapsed() >= PARK);
    }

    #[test]
    fn a_busy_round_starts_the_spin_again() {
        let mut idle = Idle::default();
        idle.after_round(false, std::iter::empty());
        assert!(idle.since.is_some());
        idle.after_round(true, std::iter::empty());
        assert!(idle.since.is_none());
    }
}
