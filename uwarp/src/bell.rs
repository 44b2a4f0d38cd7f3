//! [`Bell`]: an `eventfd(2)` that wakes a thread sleeping in `poll(2)`.
//!
//! The socket transport's control thread sleeps on its sockets. The
//! application's commands reach it through a channel that no descriptor
//! signals, so whoever sends one also rings the thread's bell, which
//! it polls with its sockets.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// An eventfd that is readable from its first ring until the sleeper
/// silences it.
#[derive(Debug)]
pub(crate) struct Bell(OwnedFd);

impl Bell {
    /// A silent bell (close-on-exec, non-blocking).
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and nothing else owns it.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the bell readable. A ring that finds the counter full
    /// (`EAGAIN`, after 2^64 - 2 rings nobody heard) changes nothing: the
    /// bell is readable already.
    pub(crate) fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 octets of `one`, as eventfd(2) asks.
        unsafe { libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    /// Makes the bell silent again (reads the counter back to zero). The
    /// sleeper silences it before it looks for work, so a ring that comes
    /// after the look wakes its next sleep.
    pub(crate) fn silence(&self) {
        let mut count: u64 = 0;
        // SAFETY: reads 8 octets into `count`; on a silent bell the read
        // fails with `EAGAIN` and writes nothing.
        unsafe { libc::read(self.0.as_raw_fd(), (&raw mut count).cast(), 8) };
    }
}

impl AsFd for Bell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(bell: &Bell) -> bool {
        let mut pfd = libc::pollfd {
            fd: bell.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, as the count says.
        unsafe { libc::poll(&raw mut pfd, 1, 0) == 1 }
    }

    #[test]
    fn a_ring_stays_readable_until_silenced() {
        let bell = Bell::new().unwrap();
        assert!(!readable(&bell));
        bell.ring();
        bell.ring();
        assert!(readable(&bell));
        bell.silence();
        assert!(!readable(&bell));
        bell.silence();
        assert!(!readable(&bell));
        bell.ring();
        assert!(readable(&bell));
    }
}
