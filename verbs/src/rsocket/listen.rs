//! Listening rsockets (`rlisten`, `raccept`): a library thread takes the
//! listener's connection requests and accepts each as rdma-core's
//! `rs_accept` does on its `listen_svc` thread, then queues the new socket
//! and writes one octet to the accept pipe, whose read end `raccept`
//! reads (blocking unless `O_NONBLOCK`) and `rpoll` polls.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use uwarp::{Error, ListenOptions, Listener};

use super::stream::{self, Inner, Rsocket};
use crate::export::errno_of;
use crate::provider;

/// How long the accepting thread waits for a request before it looks
/// whether the socket was closed.
const REQUEST_WAIT: Duration = Duration::from_millis(200);

/// A listening socket's listener, accept pipe and queue of accepted
/// sockets.
#[derive(Debug)]
pub struct Listening {
    listener: Listener,
    /// The read end: readable while an accepted socket waits.
    pub accept_read: OwnedFd,
    accept_write: OwnedFd,
    accepted: Mutex<VecDeque<Rsocket>>,
    closed: AtomicBool,
}

impl Listening {
    /// The listener's address.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.listener.local_addr()
    }

    /// Takes the next accepted socket (`raccept`): waits for one unless
    /// `nonblock` (then `EAGAIN`).
    pub fn take(&self, nonblock: bool) -> Result<Rsocket, i32> {
        let flags = if nonblock { libc::MSG_DONTWAIT } else { 0 };
        let mut octet = 0u8;
        // SAFETY: one writable octet; the descriptor is the pipe's.
        let got = unsafe {
            libc::recv(
                self.accept_read.as_raw_fd(),
                (&raw mut octet).cast(),
                1,
                flags,
            )
        };
        if got != 1 {
            return Err(if got == 0 {
                libc::EBADF
            } else {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO)
            });
        }
        let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        accepted.pop_front().ok_or(libc::EAGAIN)
    }

    /// Stops listening: the thread ends, requests are refused, and the
    /// connections accepted but never taken by `raccept` are closed (their
    /// peers see end of file).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.listener.stop();
        let unclaimed =
            std::mem::take(&mut *self.accepted.lock().unwrap_or_else(|e| e.into_inner()));
        for socket in unclaimed {
            if let Some(conn) = socket.lock().conn.take() {
                stream::release(conn);
            }
        }
    }
}

/// `rlisten`: listens on the socket's bound address (any address and a
/// port the system picks if unbound) and starts the accepting thread.
pub fn listen(socket: &Arc<Rsocket>, inner: &Inner) -> Result<Arc<Listening>, i32> {
    let device = provider::device()?;
    let addr = inner
        .local
        .unwrap_or_else(|| stream::any_address(inner.family));
    let options = ListenOptions {
        af_only: inner.af_only,
    };
    let listener = device
        .listen_with(addr, options)
        .map_err(|e| errno_of(&e))?;
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for the two descriptors socketpair writes.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE));
    }
    // SAFETY: socketpair succeeded: two open descriptors owned here alone.
    let (accept_read, accept_write) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let listening = Arc::new(Listening {
        listener,
        accept_read,
        accept_write,
        accepted: Mutex::new(VecDeque::new()),
        closed: AtomicBool::new(false),
    });
    let worker = listening.clone();
    let owner = Arc::downgrade(socket);
    provider::spawn("uwarp-raccept", move || accept_loop(&worker, &owner))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
    Ok(listening)
}

/// What an accepted socket inherits from its listener `owner` now
/// (`rs_alloc` of rdma-core: options set after `rlisten` count); `None`
/// once the listener is gone.
fn template_of(owner: &Weak<Rsocket>) -> Option<Inner> {
    let owner = owner.upgrade()?;
    let inner = owner.lock();
    Some(Inner {
        family: inner.family,
        sizes: inner.sizes,
        fd_flags: inner.fd_flags,
        option_bits: inner.option_bits,
        keepalive_secs: inner.keepalive_secs,
        ..Inner::default()
    })
}

/// The accepting thread: each request becomes a connected socket in the
/// queue, until the socket is closed or the device goes.
fn accept_loop(listening: &Listening, owner: &Weak<Rsocket>) {
    while !listening.closed.load(Ordering::Acquire) {
        match listening.listener.get_request(REQUEST_WAIT) {
            Ok(request) => {
                let Some(template) = template_of(owner) else {
                    return;
                };
                let Some(socket) = stream::accept(request, &template) else {
                    continue;
                };
                listening
                    .accepted
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(socket);
                let octet = 1u8;
                // SAFETY: one readable octet; the descriptor is the pipe's.
                unsafe {
                    libc::send(
                        listening.accept_write.as_raw_fd(),
                        (&raw const octet).cast(),
                        1,
                        libc::MSG_NOSIGNAL,
                    )
                };
            }
            Err(Error::Timeout) => {}
            Err(_) => return,
        }
    }
}
