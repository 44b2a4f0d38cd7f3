//! Completion channels (`ibv_comp_channel`): a file descriptor that
//! becomes readable when an armed completion queue attached to it raises
//! its event (RFC 5040 section 5.1's Solicited Event included), so an
//! application can sleep in `poll`, `epoll` or a blocking read, as with a
//! kernel driver's channel.
//!
//! The descriptor is the read end of a pipe; each event is one 8-octet
//! record, the token of the queue that raised it. A pipe gives the
//! kernel's `read()` semantics for free: a blocking read sleeps until an
//! event comes, `O_NONBLOCK` answers `EAGAIN`, a signal without
//! `SA_RESTART` answers `EINTR`, and a thread blocked in it can be
//! cancelled. Reads and writes of 8 octets are atomic (at most
//! `PIPE_BUF`), so records never tear.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::Error;

/// The size of one event record.
const RECORD: usize = size_of::<u64>();

/// The pipe capacity asked for: room for 128 Ki unread events (Linux
/// grants it to unprivileged processes up to `/proc/sys/fs/pipe-max-size`,
/// 1 MiB by default; a refusal leaves the default 64 KiB).
const PIPE_CAPACITY: libc::c_int = 1 << 20;

/// A completion channel. Clone the handle to share it; the descriptor
/// closes with the last handle (and the last queue attached to it).
#[derive(Debug, Clone)]
pub struct CompletionChannel {
    pub(crate) shared: Arc<ChannelShared>,
}

/// The pipe, shared by the channel's handles and its queues.
#[derive(Debug)]
pub(crate) struct ChannelShared {
    read: OwnedFd,
    write: OwnedFd,
    /// Events that found the pipe full and were dropped.
    lost: AtomicUsize,
}

impl CompletionChannel {
    /// A new channel (`ibv_create_comp_channel`); its descriptor blocks
    /// until made non-blocking (`fcntl(fd, F_SETFL, O_NONBLOCK)`).
    pub fn new() -> Result<Self, Error> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is valid for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: pipe2 succeeded, so both are open descriptors this
        // function alone owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor owned above. The write end never
        // blocks: a core raising an event must not wait for the reader.
        unsafe {
            libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
            libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_CAPACITY);
        }
        Ok(Self {
            shared: Arc::new(ChannelShared {
                read,
                write,
                lost: AtomicUsize::new(0),
            }),
        })
    }

    /// Takes the next event (`ibv_get_cq_event`): the token of the queue
    /// that raised it. Blocks while there is none, unless the descriptor
    /// is non-blocking (then `WouldBlock`); a signal whose handler has no
    /// `SA_RESTART` interrupts it (`Interrupted`).
    pub fn get_event(&self) -> io::Result<u64> {
        read_event(self.shared.read.as_raw_fd())
    }

    /// How many events were dropped because the pipe was full (each one
    /// an armed queue whose event nobody read: 128 Ki of them).
    pub fn lost_events(&self) -> usize {
        self.shared.lost.load(Ordering::Relaxed)
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.read.as_fd()
    }
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.read.as_raw_fd()
    }
}

impl ChannelShared {
    /// Raises an event for the queue `token` names; never blocks.
    pub(crate) fn notify(&self, token: u64) {
        let record = token.to_ne_bytes();
        // SAFETY: writes the 8 octets of `record` to the pipe's write end,
        // which this structure owns and keeps open.
        let written =
            unsafe { libc::write(self.write.as_raw_fd(), record.as_ptr().cast(), RECORD) };
        if written != RECORD as isize {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Reads one event record from `fd` with one `read()`: the record, or the
/// error `read()` gave.
fn read_event(fd: RawFd) -> io::Result<u64> {
    let mut record = [0u8; RECORD];
    // SAFETY: `record` is valid for RECORD octets of writes.
    let got = unsafe { libc::read(fd, record.as_mut_ptr().cast(), RECORD) };
    match got {
        n if n == RECORD as isize => Ok(u64::from_ne_bytes(record)),
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a torn event record",
        )),
    }
}
