//! The socket transport's sockets, closed in a child of `fork(2)`.
//!
//! Linux has no close-on-fork flag: a child inherits a copy of every
//! socket the transport's threads hold (listening, connecting, in their
//! MPA startup phase, established), and while the child lives its copy
//! keeps the socket open after the parent closed its own: a listener the
//! parent destroyed still completes TCP handshakes (a client waits for
//! an MPA Reply until it times out instead of being refused), a
//! connection the parent closed sends no FIN. The threads that use them
//! are not in the child, so nothing there needs them.
//!
//! Every socket the transport makes is therefore [`Registered`] the
//! moment it is made, and [`close_in_child`], run by the fork handler in
//! the child (`crate::fork`), closes them all. The registry is a bitmap of
//! descriptor numbers in static memory: registering and leaving it are
//! one atomic operation each, and the child handler needs nothing but
//! loads, stores and `close(2)`, all async-signal-safe. Descriptors from
//! [`TRACKED`] up (above the kernel's default `nr_open`) are not
//! registered, and stay open in a child as before.
//!
//! Making or closing a socket and forking exclude each other: the fork
//! handler run before `fork` ([`hold_creations`]) waits until the sockets
//! being made are registered and those being closed are closed, and
//! holds new ones back until `fork` returns, so no socket of the
//! transport reaches a child without being in the registry, and none is
//! both in the registry and closed.

use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Descriptor numbers the registry holds: 0 to 1 Mi - 1 (128 KiB of
/// static memory, untouched pages of which cost nothing).
const TRACKED: usize = 1 << 20;

/// One bit per descriptor number below [`TRACKED`]: set while the
/// transport owns that descriptor.
static REGISTERED: [AtomicU64; TRACKED / 64] = [const { AtomicU64::new(0) }; TRACKED / 64];

/// How many sockets are being made or closed now, plus [`FORKING`] while
/// a thread is forking.
static CHANGES: AtomicUsize = AtomicUsize::new(0);

/// The bit of [`CHANGES`] a forking thread holds.
const FORKING: usize = 1 << (usize::BITS - 1);

/// A socket of the transport, in the registry from the moment it was
/// made until it is closed (when it is dropped), so that a child of
/// `fork` closes its copy at once.
#[derive(Debug)]
pub(crate) struct Registered<T: AsRawFd>(std::mem::ManuallyDrop<T>);

impl<T: AsRawFd> Registered<T> {
    /// Makes a socket with `make` (a call that returns a new descriptor,
    /// such as `TcpListener::bind` or `accept`) and registers it, with
    /// forks held back meanwhile.
    pub(crate) fn make(make: impl FnOnce() -> io::Result<T>) -> io::Result<Self> {
        let _change = Change::begin();
        let made = make()?;
        mark(made.as_raw_fd(), true);
        Ok(Self(std::mem::ManuallyDrop::new(made)))
    }
}

impl<T: AsRawFd> Deref for Registered<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: AsRawFd> DerefMut for Registered<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: AsRawFd> Drop for Registered<T> {
    /// Leaves the registry, then closes (before the number can be reused
    /// by another socket being registered), with forks held back.
    fn drop(&mut self) {
        let _change = Change::begin();
        mark(self.0.as_raw_fd(), false);
        // SAFETY: dropped once, here; `self.0` is not used again.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
    }
}

/// A socket being made or closed: forks wait until it ends.
struct Change;

impl Change {
    /// Counts a change, once no thread is forking.
    fn begin() -> Self {
        loop {
            let now = CHANGES.load(Ordering::Acquire);
            if now & FORKING == 0
                && CHANGES
                    .compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return Change;
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for Change {
    fn drop(&mut self) {
        CHANGES.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Sets or clears the registry's bit for `fd`.
fn mark(fd: RawFd, owned: bool) {
    let Some(number) = usize::try_from(fd).ok().filter(|&n| n < TRACKED) else {
        return;
    };
    let (word, bit) = (&REGISTERED[number / 64], 1u64 << (number % 64));
    if owned {
        word.fetch_or(bit, Ordering::AcqRel);
    } else {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Before `fork`, in the forking thread: takes the forking bit (after
/// any other thread's fork), then waits for the sockets being made or
/// closed to be done. New ones wait until [`release_creations`] (in the
/// parent) or [`close_in_child`] (in the child).
pub(crate) fn hold_creations() {
    while CHANGES
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            (now & FORKING == 0).then_some(now | FORKING)
        })
        .is_err()
    {
        std::thread::yield_now();
    }
    while CHANGES.load(Ordering::Acquire) != FORKING {
        std::thread::yield_now();
    }
}

/// After `fork`, in the parent: lets sockets be made and closed again.
pub(crate) fn release_creations() {
    CHANGES.fetch_and(!FORKING, Ordering::AcqRel);
}

/// After `fork`, in the child (async-signal-safe: loads, stores and
/// `close(2)`): closes every registered socket, which the parent's
/// threads own and no thread of the child uses, and empties the
/// registry; sockets may be made again.
pub(crate) fn close_in_child() {
    for (index, word) in REGISTERED.iter().enumerate() {
        let mut owned = word.swap(0, Ordering::AcqRel);
        while owned != 0 {
            let fd = index * 64 + owned.trailing_zeros() as usize;
            owned &= owned - 1;
            // SAFETY: `fd` is a socket the transport's threads own in the
            // parent; in the child those threads do not exist, and the
            // values that own the descriptor are never dropped here (only
            // those threads could drop them), so nothing uses or closes it
            // again. `fd` is below TRACKED, so it fits a c_int.
            unsafe { libc::close(fd as libc::c_int) };
        }
    }
    CHANGES.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn is_registered(fd: RawFd) -> bool {
        let number = usize::try_from(fd).unwrap();
        REGISTERED[number / 64].load(Ordering::Acquire) & (1 << (number % 64)) != 0
    }

    /// A descriptor number no test opens (real ones would be reused by
    /// tests running at the same time), dropped without closing anything.
    #[derive(Debug)]
    struct Numbered(RawFd);

    impl AsRawFd for Numbered {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }

    #[test]
    fn a_descriptor_is_registered_while_it_lives() {
        let made = Registered::make(|| Ok(Numbered(900_001))).unwrap();
        assert!(is_registered(900_001));
        drop(made);
        assert!(!is_registered(900_001));
    }

    #[test]
    fn a_descriptor_past_the_bitmap_is_made_untracked() {
        let fd = RawFd::try_from(TRACKED).unwrap();
        let made = Registered::make(|| Ok(Numbered(fd))).unwrap();
        assert_eq!(made.as_raw_fd(), fd);
    }

    #[test]
    fn a_failed_creation_lets_forks_go() {
        let failed = Registered::<Numbered>::make(|| Err(io::ErrorKind::AddrInUse.into()));
        assert!(failed.is_err());
        hold_creations();
        release_creations();
    }

    #[test]
    fn a_child_of_fork_has_none_of_the_registered_sockets() {
        let listener = Registered::make(|| TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap();
        let fd = listener.as_raw_fd();
        crate::fork::watch();
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child calls only fcntl(2), write(2) and _exit(2),
        // async-signal-safe, before it exits.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            // SAFETY: asks whether `fd` is open, tells the parent, exits
            // without running the parent's exit handlers.
            unsafe {
                let open = [u8::from(libc::fcntl(fd, libc::F_GETFD) != -1)];
                libc::write(pipe[1], open.as_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        let mut open = [2u8];
        // SAFETY: reads one octet into `open`, reaps the child, closes
        // the pipe, all owned here.
        unsafe {
            assert_eq!(libc::read(pipe[0], open.as_mut_ptr().cast(), 1), 1);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        assert_eq!(open, [0], "the child closed its copy");
        assert!(is_registered(fd), "the parent's is still registered");
        drop(listener);
        assert!(TcpStream::connect(address).is_err(), "the port is closed");
    }
}
