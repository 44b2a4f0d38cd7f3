//! The rsocket API's C entry points, exported at `RDMACM_1.0` as rdma-core
//! 44's librdmacm exports them. Each runs in [`guard`] and answers -1
//! with `errno` on failure (`riowrite`: `(size_t)-1`), never a panic.
//! Datagram rsockets are `ENOSYS`: rdma-core builds them on unreliable
//! datagram queue pairs, which iWARP does not have.

use core::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

use super::stream::{self, state, Rsocket, Sizes};
use super::{data, iomap, keepalive, listen, options, poll, table};
use crate::cm::addrinfo::from_sockaddr_len;
use crate::export::{guard, set_errno, symbol_versions};
use crate::provider;

/// How long `rclose` waits for the sends outstanding and the peer's
/// acknowledgement of the disconnect message.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Runs an entry point's body: its value, or `failed` with `errno` set.
fn answer<T: Copy>(failed: T, body: impl FnOnce() -> Result<T, i32>) -> T {
    guard(failed, || {
        body().unwrap_or_else(|errno| {
            set_errno(errno);
            failed
        })
    })
}

/// The rsocket of `fd`, or `EBADF`.
fn socket_of(fd: c_int) -> Result<Arc<Rsocket>, i32> {
    table::lookup(fd).ok_or(libc::EBADF)
}

/// Writes `addr` into the caller's `(addr, addrlen)` as `getsockname`
/// does: truncated to `*addrlen`, which is set to the full length.
///
/// # Safety
///
/// `addr` is NULL or writable for `*addrlen` octets; `addrlen` is NULL or
/// valid.
unsafe fn copy_addr(
    found: std::net::SocketAddr,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) {
    if addr.is_null() || addrlen.is_null() {
        return;
    }
    let (storage, len) = uwarp::c_sockaddr(found);
    // SAFETY: the caller promises both are valid.
    unsafe {
        let room = (*addrlen).min(len) as usize;
        core::ptr::copy_nonoverlapping((&raw const storage).cast::<u8>(), addr.cast::<u8>(), room);
        *addrlen = len;
    }
}

/// Whether the calling thread is one of uwarp's own (its transport's
/// control and dataplane threads, the libraries' threads: all named
/// `uwarp-*`). Under `LD_PRELOAD=librspreload.so` every `socket()` of the
/// process comes here first, the kernel TCP sockets of uwarp's socket
/// transport included; those must stay kernel sockets (the preload
/// library makes one when `rsocket` fails), or the first listen would
/// wait for itself.
fn on_uwarps_own_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|name| name.starts_with("uwarp-"))
}

/// `rsocket`: a stream socket of `AF_INET` or `AF_INET6` (`SOCK_NONBLOCK`
/// and `SOCK_CLOEXEC` taken); datagram sockets are `ENOSYS`, other
/// families and protocols `ENOTSUP` as rdma-core answers, and so is a
/// call from uwarp's own threads (see `on_uwarps_own_thread`).
#[no_mangle]
pub extern "C" fn rsocket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    answer(-1, || {
        if on_uwarps_own_thread() {
            return Err(libc::ENOTSUP);
        }
        let socket_type = kind & !(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
        if domain != libc::AF_INET && domain != libc::AF_INET6 {
            return Err(libc::ENOTSUP);
        }
        match socket_type {
            libc::SOCK_STREAM if protocol == 0 || protocol == libc::IPPROTO_TCP => {}
            libc::SOCK_DGRAM if protocol == 0 || protocol == libc::IPPROTO_UDP => {
                return Err(libc::ENOSYS)
            }
            _ => return Err(libc::ENOTSUP),
        }
        let socket = Rsocket::new(domain, Sizes::default())?;
        {
            let mut inner = socket.lock();
            if kind & libc::SOCK_NONBLOCK != 0 {
                inner.fs_flags = libc::O_NONBLOCK;
            }
            if kind & libc::SOCK_CLOEXEC != 0 {
                inner.fd_flags = libc::FD_CLOEXEC;
            }
        }
        Ok(table::insert(Arc::new(socket)))
    })
}

/// `rbind`: the address `rlisten` listens on (`rconnect` chooses its own).
///
/// # Safety
///
/// `addr` is valid for `addrlen` octets.
#[no_mangle]
pub unsafe extern "C" fn rbind(
    fd: c_int,
    addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        // SAFETY: the caller promises `addr` is valid for `addrlen`.
        let local = unsafe { from_sockaddr_len(addr, addrlen) }.ok_or(libc::EINVAL)?;
        let mut inner = socket.lock();
        if inner.state != state::INIT {
            return Err(libc::EINVAL);
        }
        inner.local = Some(local);
        inner.state = state::BOUND;
        Ok(0)
    })
}

/// `rlisten`: starts taking connections (0 again on a listening socket).
#[no_mangle]
pub extern "C" fn rlisten(fd: c_int, _backlog: c_int) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        let mut inner = socket.lock();
        if inner.state == state::LISTENING {
            return Ok(0);
        }
        if inner.state & !state::BOUND != 0 {
            return Err(libc::EINVAL);
        }
        let listening = listen::listen(&socket, &inner)?;
        inner.local = Some(listening.local_addr());
        inner.state = state::LISTENING;
        *socket.listening.lock().unwrap_or_else(|e| e.into_inner()) = Some(listening);
        Ok(0)
    })
}

/// `raccept`: the next connection, as a new rsocket with the listener's
/// sizes and flags (`O_NONBLOCK` included, as rdma-core's); `EAGAIN` on a
/// non-blocking listener with none waiting, `EBADF` if `fd` does not
/// listen.
///
/// # Safety
///
/// `addr` is NULL or writable for `*addrlen` octets; `addrlen` is NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn raccept(
    fd: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        let listening = socket
            .listening
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let listening = listening.ok_or(libc::EBADF)?;
        let (fs_flags, fd_flags) = {
            let inner = socket.lock();
            (inner.fs_flags, inner.fd_flags)
        };
        let accepted = listening.take(fs_flags & libc::O_NONBLOCK != 0)?;
        let peer = {
            let mut inner = accepted.lock();
            inner.fs_flags = fs_flags;
            inner.fd_flags = fd_flags;
            inner.peer
        };
        if let Some(peer) = peer {
            // SAFETY: forwarded from the caller.
            unsafe { copy_addr(peer, addr, addrlen) };
        }
        let keepalive = options::keepalive_every(&accepted.lock());
        let accepted = Arc::new(accepted);
        let fd = table::insert(Arc::clone(&accepted));
        if let Some(every) = keepalive {
            keepalive::schedule(&accepted, every);
        }
        Ok(fd)
    })
}

/// `rconnect`: connects and exchanges the rsocket conn data. A blocking
/// socket returns once connected; an `O_NONBLOCK` one answers
/// `EINPROGRESS` at once and connects on a library thread, `rpoll`
/// reporting `POLLOUT` (or `POLLERR`, with `SO_ERROR` set) at the end, as
/// rdma-core's. `EINPROGRESS` again while it connects, `EISCONN` once
/// connected. A failure leaves the socket in `rs_connect_error`.
///
/// # Safety
///
/// `addr` is valid for `addrlen` octets.
#[no_mangle]
pub unsafe extern "C" fn rconnect(
    fd: c_int,
    addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        // SAFETY: the caller promises `addr` is valid for `addrlen`.
        let peer = unsafe { from_sockaddr_len(addr, addrlen) }.ok_or(libc::EINVAL)?;
        let (sizes, nonblock) = {
            let mut inner = socket.lock();
            match inner.state {
                state::OPENING => return Err(libc::EINPROGRESS),
                bits if bits & state::CONNECTED != 0 => return Err(libc::EISCONN),
                state::INIT | state::BOUND => {}
                _ => return Err(libc::EINVAL),
            }
            inner.state = state::OPENING;
            (inner.sizes, inner.nonblocking(0))
        };
        if !nonblock {
            stream::finish_connect(&socket, stream::connect(sizes, &socket.channel, peer))?;
            return Ok(0);
        }
        let worker = socket.clone();
        let connecting = move || {
            let outcome = stream::connect(sizes, &worker.channel, peer);
            let _ = stream::finish_connect(&worker, outcome);
        };
        if let Err(err) = provider::spawn("uwarp-rconnect", connecting) {
            let errno = err.raw_os_error().unwrap_or(libc::EAGAIN);
            return stream::finish_connect(&socket, Err(errno)).map(|()| 0);
        }
        Err(libc::EINPROGRESS)
    })
}

/// `rshutdown`: `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`, told to the peer.
#[no_mangle]
pub extern "C" fn rshutdown(fd: c_int, how: c_int) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        data::shutdown(&socket, how, CLOSE_WAIT)?;
        Ok(0)
    })
}

/// `rclose`: a graceful disconnect (the peer reads what was sent, then
/// end of file), and the socket's resources freed. `-1` with `EBADF` for
/// a descriptor that is no rsocket.
#[no_mangle]
pub extern "C" fn rclose(fd: c_int) -> c_int {
    answer(-1, || {
        let socket = table::remove(fd).ok_or(libc::EBADF)?;
        {
            // A connect under way on a library thread finds the socket
            // closed and releases what it made.
            let mut inner = socket.lock();
            if inner.state == state::OPENING {
                inner.state = state::CONNECT_ERROR;
            }
        }
        if let Some(listening) = socket
            .listening
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            listening.close();
        }
        let _ = data::shutdown(&socket, libc::SHUT_RDWR, CLOSE_WAIT);
        let conn = socket.lock().conn.take();
        if let Some(conn) = conn {
            stream::release(conn);
        }
        Ok(0)
    })
}

/// The buffers of an `iovec` array, for reading into.
///
/// # Safety
///
/// `iov` is valid for `iovcnt` entries, each valid for writes.
unsafe fn iov_mut<'a>(iov: *const libc::iovec, iovcnt: c_int) -> Result<Vec<&'a mut [u8]>, i32> {
    if iovcnt < 0 || (iov.is_null() && iovcnt > 0) {
        return Err(libc::EINVAL);
    }
    let mut out = Vec::with_capacity(iovcnt as usize);
    for index in 0..iovcnt as usize {
        // SAFETY: the caller promises `iovcnt` valid entries.
        let entry = unsafe { *iov.add(index) };
        if entry.iov_len > 0 {
            // SAFETY: the caller promises each buffer is writable.
            out.push(unsafe {
                core::slice::from_raw_parts_mut(entry.iov_base.cast::<u8>(), entry.iov_len)
            });
        }
    }
    Ok(out)
}

/// The buffers of an `iovec` array, for sending.
///
/// # Safety
///
/// `iov` is valid for `iovcnt` entries, each valid for reads.
unsafe fn iov_ref<'a>(iov: *const libc::iovec, iovcnt: c_int) -> Result<Vec<&'a [u8]>, i32> {
    // SAFETY: forwarded.
    let buffers = unsafe { iov_mut(iov, iovcnt) }?;
    Ok(buffers.into_iter().map(|b| &*b).collect())
}

/// The one buffer of `rrecv` and its kin.
///
/// # Safety
///
/// `buf` is valid for writes of `len` octets (or `len` is 0).
unsafe fn one_mut<'a>(buf: *mut c_void, len: usize) -> Vec<&'a mut [u8]> {
    if len == 0 || buf.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller promises it.
    vec![unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }]
}

/// The one buffer of `rsend` and its kin.
///
/// # Safety
///
/// `buf` is valid for reads of `len` octets (or `len` is 0).
unsafe fn one_ref<'a>(buf: *const c_void, len: usize) -> Vec<&'a [u8]> {
    if len == 0 || buf.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller promises it.
    vec![unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }]
}

/// Receives from `fd` into the buffers `buffers` makes (once `fd` is
/// known to be an rsocket).
fn receive<'a>(
    fd: c_int,
    buffers: impl FnOnce() -> Result<Vec<&'a mut [u8]>, i32>,
    flags: c_int,
) -> isize {
    answer(-1, || {
        let socket = socket_of(fd)?;
        Ok(data::recv(&socket, &mut buffers()?, flags)? as isize)
    })
}

/// Sends on `fd` the buffers `buffers` makes.
fn transmit<'a>(
    fd: c_int,
    buffers: impl FnOnce() -> Result<Vec<&'a [u8]>, i32>,
    flags: c_int,
) -> isize {
    answer(-1, || {
        let socket = socket_of(fd)?;
        Ok(data::send(&socket, &buffers()?, flags)? as isize)
    })
}

/// The `iovec` array of a message: `ENOTSUP` with control data, as
/// rdma-core's `rrecvmsg` and `rsendmsg` answer.
///
/// # Safety
///
/// `msg` is NULL or a valid `msghdr`.
unsafe fn message_iov(msg: *const libc::msghdr) -> Result<(*const libc::iovec, c_int), i32> {
    // SAFETY: the caller promises NULL or a valid msghdr.
    let msg = unsafe { msg.as_ref() }.ok_or(libc::EFAULT)?;
    if !msg.msg_control.is_null() && msg.msg_controllen > 0 {
        return Err(libc::ENOTSUP);
    }
    Ok((msg.msg_iov, msg.msg_iovlen as c_int))
}

/// `rrecv`: what has arrived, up to `len` octets; 0 at end of file;
/// `EAGAIN` when non-blocking with nothing queued.
///
/// # Safety
///
/// `buf` is valid for writes of `len` octets.
#[no_mangle]
pub unsafe extern "C" fn rrecv(fd: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    // SAFETY: forwarded from the caller.
    receive(fd, || Ok(unsafe { one_mut(buf, len) }), flags)
}

/// `rrecvfrom`: `rrecv`, with the peer's address (a stream socket's).
///
/// # Safety
///
/// As `rrecv`'s; `src` is NULL or writable for `*srclen` octets,
/// `srclen` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rrecvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    src: *mut libc::sockaddr,
    srclen: *mut libc::socklen_t,
) -> isize {
    // SAFETY: forwarded from the caller.
    let got = receive(fd, || Ok(unsafe { one_mut(buf, len) }), flags);
    if got > 0 {
        // SAFETY: forwarded from the caller.
        unsafe { rgetpeername(fd, src, srclen) };
    }
    got
}

/// `rrecvmsg`: into the message's `iovec`s; control data is `ENOTSUP`.
///
/// # Safety
///
/// `msg` is a valid `msghdr` whose buffers are writable.
#[no_mangle]
pub unsafe extern "C" fn rrecvmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    // SAFETY: the caller promises a valid msghdr and writable iovecs.
    receive(
        fd,
        || unsafe { message_iov(msg).and_then(|(iov, count)| iov_mut(iov, count)) },
        flags,
    )
}

/// `rread`: `rrecv` with no flags.
///
/// # Safety
///
/// As `rrecv`'s.
#[no_mangle]
pub unsafe extern "C" fn rread(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: forwarded from the caller.
    receive(fd, || Ok(unsafe { one_mut(buf, count) }), 0)
}

/// `rreadv`: into several buffers.
///
/// # Safety
///
/// `iov` is valid for `iovcnt` writable entries.
#[no_mangle]
pub unsafe extern "C" fn rreadv(fd: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    // SAFETY: forwarded from the caller.
    receive(fd, || unsafe { iov_mut(iov, iovcnt) }, 0)
}

/// `rsend`: up to `len` octets; how many were taken (fewer when a
/// non-blocking socket fills); `EAGAIN` if none, `ECONNRESET` once the
/// connection can no longer send.
///
/// # Safety
///
/// `buf` is valid for reads of `len` octets.
#[no_mangle]
pub unsafe extern "C" fn rsend(fd: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize {
    // SAFETY: forwarded from the caller.
    transmit(fd, || Ok(unsafe { one_ref(buf, len) }), flags)
}

/// `rsendto`: a stream socket ignores the address, as rdma-core's.
///
/// # Safety
///
/// As `rsend`'s.
#[no_mangle]
pub unsafe extern "C" fn rsendto(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    _dest: *const libc::sockaddr,
    _destlen: libc::socklen_t,
) -> isize {
    // SAFETY: forwarded from the caller.
    transmit(fd, || Ok(unsafe { one_ref(buf, len) }), flags)
}

/// `rsendmsg`: the message's `iovec`s; control data is `ENOTSUP`.
///
/// # Safety
///
/// `msg` is a valid `msghdr` whose buffers are readable.
#[no_mangle]
pub unsafe extern "C" fn rsendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    // SAFETY: the caller promises a valid msghdr and readable iovecs.
    transmit(
        fd,
        || unsafe { message_iov(msg).and_then(|(iov, count)| iov_ref(iov, count)) },
        flags,
    )
}

/// `rwrite`: `rsend` with no flags.
///
/// # Safety
///
/// As `rsend`'s.
#[no_mangle]
pub unsafe extern "C" fn rwrite(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: forwarded from the caller.
    transmit(fd, || Ok(unsafe { one_ref(buf, count) }), 0)
}

/// `rwritev`: several buffers, in order.
///
/// # Safety
///
/// `iov` is valid for `iovcnt` readable entries.
#[no_mangle]
pub unsafe extern "C" fn rwritev(fd: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    // SAFETY: forwarded from the caller.
    transmit(fd, || unsafe { iov_ref(iov, iovcnt) }, 0)
}

/// `rpoll`: `poll(2)` over rsockets and ordinary descriptors.
///
/// # Safety
///
/// `fds` is valid for `nfds` entries.
#[no_mangle]
pub unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    answer(-1, || {
        if fds.is_null() && nfds > 0 {
            return Err(libc::EFAULT);
        }
        let entries: &mut [libc::pollfd] = if nfds == 0 {
            &mut []
        } else {
            // SAFETY: the caller promises `nfds` entries.
            unsafe { core::slice::from_raw_parts_mut(fds, nfds as usize) }
        };
        poll::rpoll(entries, timeout)
    })
}

/// `rselect`: `select(2)` over rsockets and ordinary descriptors.
///
/// # Safety
///
/// Each set is NULL or valid; `timeout` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    answer(-1, || {
        // SAFETY: the caller promises NULL or a valid timeval.
        let limit = unsafe { timeout.as_ref() }.map(|t| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        });
        // SAFETY: forwarded from the caller.
        unsafe { poll::rselect(nfds, read, write, except, limit) }
    })
}

/// `rgetpeername`: the peer's address; `ENOTCONN` before a connection.
///
/// # Safety
///
/// `addr` is NULL or writable for `*addrlen` octets; `addrlen` is NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn rgetpeername(
    fd: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let peer = socket_of(fd)?.lock().peer.ok_or(libc::ENOTCONN)?;
        // SAFETY: forwarded from the caller.
        unsafe { copy_addr(peer, addr, addrlen) };
        Ok(0)
    })
}

/// `rgetsockname`: the local address (the unspecified address of the
/// socket's family before `rbind` or a connection).
///
/// # Safety
///
/// `addr` is NULL or writable for `*addrlen` octets; `addrlen` is NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn rgetsockname(
    fd: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let inner_socket = socket_of(fd)?;
        let inner = inner_socket.lock();
        let local = inner
            .local
            .unwrap_or_else(|| stream::any_address(inner.family));
        // SAFETY: forwarded from the caller.
        unsafe { copy_addr(local, addr, addrlen) };
        Ok(0)
    })
}

/// `rsetsockopt` ([`options::set`]); an `optval` shorter than an `int`
/// is `EINVAL`.
///
/// # Safety
///
/// `optval` is valid for `optlen` octets.
#[no_mangle]
pub unsafe extern "C" fn rsetsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    optval: *const c_void,
    optlen: libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        if optval.is_null() || (optlen as usize) < size_of::<c_int>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller promises `optlen` (at least an int) octets.
        let value = unsafe { optval.cast::<c_int>().read_unaligned() };
        let every = options::set(&mut socket.lock(), level, name, value)?;
        if let Some(every) = every {
            keepalive::schedule(&socket, every);
        }
        Ok(0)
    })
}

/// `rgetsockopt` ([`options::get`]): an `int` (a `struct linger` for
/// `SO_LINGER`), truncated to `*optlen`.
///
/// # Safety
///
/// `optval` is writable for `*optlen` octets; `optlen` is valid.
#[no_mangle]
pub unsafe extern "C" fn rgetsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    optval: *mut c_void,
    optlen: *mut libc::socklen_t,
) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        if optval.is_null() || optlen.is_null() {
            return Err(libc::EFAULT);
        }
        let (value, linger) = options::get(&mut socket.lock(), level, name)?;
        let mut bytes = value.to_ne_bytes().to_vec();
        if let Some(linger) = linger {
            bytes.extend_from_slice(&linger.to_ne_bytes());
        }
        // SAFETY: the caller promises `*optlen` writable octets.
        unsafe {
            let room = (*optlen as usize).min(bytes.len());
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), optval.cast::<u8>(), room);
            *optlen = bytes.len() as libc::socklen_t;
        }
        Ok(0)
    })
}

/// `rfcntl(fd, cmd, ...)`: `F_GETFL`, `F_SETFL`, `F_GETFD`, `F_SETFD`
/// ([`options::fcntl`]).
///
/// C declares it variadic; stable Rust cannot define such a function.
/// On x86-64 (the System V ABI) a variadic call passes its first integer
/// arguments in the same registers as a fixed one, so the optional `int`
/// argument is read as a third parameter; commands that take none leave
/// it unread.
#[no_mangle]
pub extern "C" fn rfcntl(fd: c_int, cmd: c_int, arg: c_int) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        let answer = options::fcntl(&mut socket.lock(), cmd, arg);
        answer
    })
}

/// `riomap` ([`iomap::map`]): the offset of the mapping.
///
/// # Safety
///
/// `buf` is valid for `len` octets until `riounmap` or `rclose`; the
/// program reads what the peer writes there through raw pointers only.
#[no_mangle]
pub unsafe extern "C" fn riomap(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    prot: c_int,
    _flags: c_int,
    offset: libc::off_t,
) -> libc::off_t {
    answer(-1, || {
        let socket = socket_of(fd)?;
        // SAFETY: forwarded from the caller.
        unsafe { iomap::map(&socket, buf.cast(), len, prot, offset) }
    })
}

/// `riounmap` ([`iomap::unmap`]).
#[no_mangle]
pub extern "C" fn riounmap(fd: c_int, buf: *mut c_void, len: usize) -> c_int {
    answer(-1, || {
        let socket = socket_of(fd)?;
        iomap::unmap(&socket, buf.cast(), len)?;
        Ok(0)
    })
}

/// `riowrite` ([`iomap::write`]): the count written, `(size_t)-1` with
/// `errno` when none was.
///
/// # Safety
///
/// `buf` is valid for reads of `count` octets.
#[no_mangle]
pub unsafe extern "C" fn riowrite(
    fd: c_int,
    buf: *const c_void,
    count: usize,
    offset: libc::off_t,
    flags: c_int,
) -> usize {
    answer(usize::MAX, || {
        let socket = socket_of(fd)?;
        // SAFETY: forwarded from the caller.
        let data = unsafe { one_ref(buf, count) };
        iomap::write(&socket, data.first().copied().unwrap_or(&[]), offset, flags)
    })
}

symbol_versions! {
    rsocket => "RDMACM_1.0",
    rbind => "RDMACM_1.0",
    rlisten => "RDMACM_1.0",
    raccept => "RDMACM_1.0",
    rconnect => "RDMACM_1.0",
    rshutdown => "RDMACM_1.0",
    rclose => "RDMACM_1.0",
    rrecv => "RDMACM_1.0",
    rrecvfrom => "RDMACM_1.0",
    rrecvmsg => "RDMACM_1.0",
    rread => "RDMACM_1.0",
    rreadv => "RDMACM_1.0",
    rsend => "RDMACM_1.0",
    rsendto => "RDMACM_1.0",
    rsendmsg => "RDMACM_1.0",
    rwrite => "RDMACM_1.0",
    rwritev => "RDMACM_1.0",
    rpoll => "RDMACM_1.0",
    rselect => "RDMACM_1.0",
    rgetpeername => "RDMACM_1.0",
    rgetsockname => "RDMACM_1.0",
    rsetsockopt => "RDMACM_1.0",
    rgetsockopt => "RDMACM_1.0",
    rfcntl => "RDMACM_1.0",
    riomap => "RDMACM_1.0",
    riounmap => "RDMACM_1.0",
    riowrite => "RDMACM_1.0",
}
