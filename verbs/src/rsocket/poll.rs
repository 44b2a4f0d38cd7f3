//! `rpoll` and `rselect` over a mix of rsockets and ordinary descriptors,
//! with rdma-core's readiness (`rs_poll_rs`): a connected rsocket is
//! readable with data queued or at end of file, writable with room to
//! send, `POLLHUP` once disconnected and `POLLERR` after an error; a
//! listening one is readable with a connection to accept. Waiting sleeps
//! in `poll(2)` on the ordinary descriptors and on each rsocket's
//! completion channel (armed) or accept pipe.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::data;
use super::stream::{state, Rsocket};
use super::table;
use crate::export::set_errno;

/// How long one `poll(2)` sleeps at most before every rsocket is looked
/// at again (rdma-core's `wake_up_interval`).
const WAKE_UP_INTERVAL: Duration = Duration::from_millis(500);

/// How often `rpoll` looks at a socket still connecting (its library
/// thread raises no event on the descriptor when it is done).
const CONNECT_CHECK_INTERVAL: Duration = Duration::from_millis(5);

/// Whether `fd` is an rsocket whose non-blocking connect is under way.
fn connecting(fd: i32) -> bool {
    table::lookup(fd).is_some_and(|socket| socket.lock().state == state::OPENING)
}

/// `rs_poll_rs` without waiting: the `revents` of `socket` for `events`.
fn readiness(socket: &Rsocket, events: i16) -> i16 {
    let listening = socket
        .listening
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(listening) = listening {
        let mut pollfd = libc::pollfd {
            fd: listening.accept_read.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pollfd, 1, 0) };
        return pollfd.revents;
    }
    let bits = socket.lock().state;
    if bits & (state::CONNECTED | state::DISCONNECTED | state::ERROR) != 0 {
        return data::readiness(socket, events);
    }
    if bits == state::CONNECT_ERROR {
        connect_failure_to_errno(socket);
        return (events & (libc::POLLIN | libc::POLLOUT)) | libc::POLLERR;
    }
    0
}

/// Sets `errno` to why the non-blocking connect of `socket` failed, while
/// `SO_ERROR` has not yet been read: rdma-core's `rpoll` runs the connect
/// itself (`rs_do_connect`), and the call that finds it failed returns
/// with `errno` as the failure left it (`ECONNREFUSED`, `ETIMEDOUT`).
/// Programs print it: rstream's `perror("rpoll")` after `POLLERR` says
/// "Connection refused", not the `EINPROGRESS` of its `rconnect`.
fn connect_failure_to_errno(socket: &Rsocket) {
    let err = socket.lock().err;
    if err != 0 {
        set_errno(err);
    }
}

/// One look at every entry, setting its `revents`: how many are ready.
fn check(fds: &mut [libc::pollfd]) -> i32 {
    let mut ready = 0;
    for entry in fds.iter_mut() {
        entry.revents = match table::lookup(entry.fd) {
            Some(socket) => readiness(&socket, entry.events),
            None => {
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(entry, 1, 0) };
                entry.revents
            }
        };
        if entry.revents != 0 {
            ready += 1;
        }
    }
    ready
}

/// The descriptor `poll(2)` sleeps on for entry `entry`: an rsocket's
/// accept pipe or armed completion channel, or the entry itself.
fn sleeper(entry: &libc::pollfd) -> libc::pollfd {
    let Some(socket) = table::lookup(entry.fd) else {
        return libc::pollfd {
            revents: 0,
            ..*entry
        };
    };
    let listening = socket
        .listening
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let fd = match listening {
        Some(listening) => listening.accept_read.as_raw_fd(),
        None => {
            if let Some(conn) = socket.lock().conn.as_ref() {
                conn.cq.req_notify(false);
            }
            socket.fd()
        }
    };
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `rpoll`: `poll(2)` whose entries may be rsockets; `timeout` in
/// milliseconds, negative for none.
pub fn rpoll(fds: &mut [libc::pollfd], timeout: i32) -> Result<i32, i32> {
    let start = Instant::now();
    loop {
        let ready = check(fds);
        if ready > 0 || timeout == 0 {
            return Ok(ready);
        }
        let mut sleep = if fds.iter().any(|entry| connecting(entry.fd)) {
            CONNECT_CHECK_INTERVAL
        } else {
            WAKE_UP_INTERVAL
        };
        if timeout > 0 {
            let limit = Duration::from_millis(timeout as u64);
            let spent = start.elapsed();
            if spent >= limit {
                return Ok(0);
            }
            sleep = sleep.min(limit - spent);
        }
        let mut sleepers: Vec<libc::pollfd> = fds.iter().map(sleeper).collect();
        // SAFETY: `sleepers` is valid for its length.
        let got = unsafe {
            libc::poll(
                sleepers.as_mut_ptr(),
                sleepers.len() as libc::nfds_t,
                sleep.as_millis().max(1) as i32,
            )
        };
        if got < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINTR));
        }
        for (entry, sleeper) in fds.iter().zip(&sleepers) {
            if sleeper.revents != 0 {
                if let Some(socket) = table::lookup(entry.fd) {
                    socket.drain_channel();
                }
            }
        }
    }
}

/// `rselect`: `select(2)` as `rpoll` over the descriptors of the sets.
///
/// # Safety
///
/// Each set is NULL or a valid `fd_set`; `nfds` at most `FD_SETSIZE`.
pub unsafe fn rselect(
    nfds: i32,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: Option<Duration>,
) -> Result<i32, i32> {
    let nfds = nfds.clamp(0, libc::FD_SETSIZE as i32);
    // SAFETY: the caller promises each set is NULL or valid.
    let is_set =
        |set: *mut libc::fd_set, fd: i32| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
    let mut fds = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        if is_set(read, fd) {
            events |= libc::POLLIN;
        }
        if is_set(write, fd) {
            events |= libc::POLLOUT;
        }
        if is_set(except, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    let millis = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    let ready = rpoll(&mut fds, millis)?;
    for set in [read, write, except] {
        if !set.is_null() {
            // SAFETY: a valid set, by the caller's promise.
            unsafe { libc::FD_ZERO(set) };
        }
    }
    if ready == 0 {
        return Ok(0);
    }
    let mut count = 0;
    for entry in &fds {
        let marks = [
            (read, libc::POLLIN | libc::POLLHUP | libc::POLLERR),
            (write, libc::POLLOUT | libc::POLLERR),
            (except, libc::POLLPRI),
        ];
        for (set, mask) in marks {
            if !set.is_null() && entry.revents & mask != 0 && entry.events & mask != 0 {
                // SAFETY: a valid set; `fd` below FD_SETSIZE.
                unsafe { libc::FD_SET(entry.fd, set) };
                count += 1;
            }
        }
    }
    Ok(count)
}
