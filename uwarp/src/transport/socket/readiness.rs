//! [`Readiness`]: which of the dataplane's sockets have something to
//! read, from one `epoll(7)` instance, so that a round reads only those.
//!
//! Reading every socket each round costs a system call per connection,
//! idle or not: with hundreds of connections open, each round (and so
//! each hand-over of a new connection, and each small message's turn)
//! took as long as hundreds of empty reads. The epoll set is
//! level-triggered: a socket that still holds octets after its round's
//! read is reported again at the next.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// How many ready sockets one look takes in (more wait for the next).
const EVENTS: usize = 1024;

/// An epoll set of the dataplane's sockets, and the ones the last look
/// found readable.
#[derive(Debug)]
pub(crate) struct Readiness {
    epoll: OwnedFd,
    events: Vec<libc::epoll_event>,
    readable: HashSet<RawFd>,
}

impl Readiness {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1(2) takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` was just made and nothing else owns it.
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS],
            readable: HashSet::new(),
        })
    }

    /// Watches `socket` for octets, the end of its stream, or an error.
    pub(crate) fn watch(&self, socket: BorrowedFd<'_>) -> io::Result<()> {
        self.control(
            libc::EPOLL_CTL_ADD,
            socket,
            libc::EPOLLIN | libc::EPOLLRDHUP,
        )
    }

    /// Stops watching `socket` (its stream ended, or it is about to be
    /// closed); a socket not watched is left alone.
    pub(crate) fn forget(&self, socket: BorrowedFd<'_>) {
        let _ = self.control(libc::EPOLL_CTL_DEL, socket, 0);
    }

    fn control(
        &self,
        op: libc::c_int,
        socket: BorrowedFd<'_>,
        events: libc::c_int,
    ) -> io::Result<()> {
        let fd = socket.as_raw_fd();
        let mut event = libc::epoll_event {
            events: events as u32,
            u64: fd as u64,
        };
        // SAFETY: both descriptors are open; `event` is live for the call
        // (the kernel ignores it for EPOLL_CTL_DEL).
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &raw mut event) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Looks, without waiting, which watched sockets are readable (or at
    /// their end, or in error): [`is_readable`](Self::is_readable) answers
    /// from this look until the next.
    pub(crate) fn look(&mut self) {
        self.readable.clear();
        // SAFETY: `events` holds `EVENTS` entries for the kernel to fill;
        // a zero timeout returns at once.
        let ready = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                EVENTS as libc::c_int,
                0,
            )
        };
        // An error (a signal) finds nothing ready: the next look sees it.
        let ready = usize::try_from(ready).unwrap_or(0);
        self.readable
            .extend(self.events[..ready].iter().map(|event| event.u64 as RawFd));
    }

    /// The sockets the last look found readable.
    pub(crate) fn readable(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.readable.iter().copied()
    }

    /// Whether the last look found `socket` readable.
    pub(crate) fn is_readable(&self, socket: BorrowedFd<'_>) -> bool {
        self.readable.contains(&socket.as_raw_fd())
    }
}

/// The epoll instance itself, readable while any watched socket is: a
/// parked thread waits on it in place of every socket.
impl AsFd for Readiness {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::socket::loopback_pair as pair;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};

    /// Looks until `socket` is readable (loopback delivers at once, but
    /// the test does not rely on it), at most a second.
    fn readable_soon(readiness: &mut Readiness, socket: &TcpStream) -> bool {
        for _ in 0..1000 {
            readiness.look();
            if readiness.is_readable(socket.as_fd()) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn only_sockets_with_octets_are_readable_until_read() {
        let (quiet, _quiet_peer) = pair();
        let (busy, mut busy_peer) = pair();
        let mut readiness = Readiness::new().unwrap();
        readiness.watch(quiet.as_fd()).unwrap();
        readiness.watch(busy.as_fd()).unwrap();
        readiness.look();
        assert!(!readiness.is_readable(quiet.as_fd()));
        assert!(!readiness.is_readable(busy.as_fd()));
        busy_peer.write_all(b"abcd").unwrap();
        assert!(readable_soon(&mut readiness, &busy));
        assert!(!readiness.is_readable(quiet.as_fd()));
        // Level-triggered: still readable until read.
        readiness.look();
        assert!(readiness.is_readable(busy.as_fd()));
        let mut octets = [0u8; 4];
        (&busy).read_exact(&mut octets).unwrap();
        readiness.look();
        assert!(!readiness.is_readable(busy.as_fd()));
    }

    #[test]
    fn the_end_of_a_stream_is_readable_and_a_forgotten_socket_is_not() {
        let (near, far) = pair();
        let mut readiness = Readiness::new().unwrap();
        readiness.watch(near.as_fd()).unwrap();
        far.shutdown(Shutdown::Write).unwrap();
        assert!(readable_soon(&mut readiness, &near));
        readiness.forget(near.as_fd());
        readiness.look();
        assert!(!readiness.is_readable(near.as_fd()));
    }
}
