//! The kernel TCP socket calls std does not expose: an active open on a
//! socket registered before it connects ([`connect`]), a listener whose
//! IPv6 socket takes IPv6 connections only when asked ([`listen`]), the
//! current MSS
//! (MPA's EMSS, RFC 5044 section 4.1, from which the MULPDU follows), the
//! retransmission count of `TCP_INFO`, and an abortive close (SO_LINGER
//! with a zero timeout sends an RST).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::descriptors::Registered;

/// Opens a TCP connection to `addr`, waiting at most `timeout` (as
/// `TcpStream::connect_timeout`), on a socket registered from the moment
/// it exists (a child forked while the connect waits closes its copy);
/// the stream blocks, as `connect_timeout`'s does.
pub fn connect(addr: &SocketAddr, timeout: Duration) -> io::Result<Registered<TcpStream>> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let stream = Registered::make(|| {
        let kind = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: socket(2) takes no pointers.
        let fd = unsafe { libc::socket(family, kind, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and nothing else owns it.
        Ok(TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    })?;
    let (address, len) = crate::sockaddr::c_sockaddr(*addr);
    // SAFETY: `address` holds a socket address of `len` octets for the
    // socket's family.
    let rc = unsafe { libc::connect(stream.as_raw_fd(), (&raw const address).cast(), len) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(err);
        }
        wait_connected(&stream, timeout)?;
    }
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// A listening socket on `addr`, as std's `TcpListener::bind` makes one
/// (`SO_REUSEADDR`, a backlog of 128, close-on-exec), with `IPV6_V6ONLY`
/// set to `af_only` on an IPv6 address when it says (`None`: the
/// system's default). An IPv6 listener that takes IPv4 connections too
/// shares their port space, so it cannot bind a port an IPv4 listener
/// holds (`EADDRINUSE`), as with the kernel's connection manager.
pub fn listen(addr: &SocketAddr, af_only: Option<bool>) -> io::Result<TcpListener> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made and nothing else owns it.
    let listener = TcpListener::from(unsafe { OwnedFd::from_raw_fd(fd) });
    set_int_option(&listener, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if let (SocketAddr::V6(_), Some(only)) = (addr, af_only) {
        set_int_option(
            &listener,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            only.into(),
        )?;
    }
    let (address, len) = crate::sockaddr::c_sockaddr(*addr);
    // SAFETY: `address` holds a socket address of `len` octets for the
    // socket's family.
    if unsafe { libc::bind(listener.as_raw_fd(), (&raw const address).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen(2) on the socket this function owns.
    if unsafe { libc::listen(listener.as_raw_fd(), 128) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// Sets the integer socket option `name` at `level` on `socket`.
fn set_int_option(socket: &impl AsRawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option's value is an int, passed with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout` for the non-blocking connect of `stream` to
/// end; its outcome (`SO_ERROR`).
fn wait_connected(stream: &TcpStream, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        let mut ready = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `ready` is one live pollfd.
        match unsafe { libc::poll(&mut ready, 1, ms) } {
            1 => return stream.take_error()?.map_or(Ok(()), Err),
            0 => {}
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// The MSS the kernel uses on `stream`, or 1460 if it will not say.
pub fn emss(stream: &TcpStream) -> usize {
    match tcp_option::<libc::c_int>(stream, libc::TCP_MAXSEG) {
        Some(mss) if mss > 0 => mss as usize,
        _ => 1460,
    }
}

/// Segments the kernel has resent on `stream` (`tcpi_total_retrans` of
/// `TCP_INFO`), if it will say.
pub fn total_retransmissions(stream: &TcpStream) -> Option<u64> {
    tcp_option::<libc::tcp_info>(stream, libc::TCP_INFO).map(|info| info.tcpi_total_retrans.into())
}

/// The `IPPROTO_TCP` option `name` of `stream`, read into a `T` (a plain C
/// struct or integer, valid for any bit pattern), if the kernel filled
/// at least part of it (older kernels fill a shorter `tcp_info`; the
/// rest stays zero).
fn tcp_option<T: Copy>(stream: &TcpStream, name: libc::c_int) -> Option<T> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the pointers name a zeroed `T` and its length, as
    // getsockopt(2) requires; the kernel writes at most `len` octets.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            name,
            value.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SAFETY: `T` is valid zeroed (the callers' types are plain C data),
    // and the kernel wrote only valid values over part of it.
    (rc == 0 && len > 0).then(|| unsafe { value.assume_init() })
}

/// Makes the next close of `stream` send an RST instead of a FIN.
pub fn set_abortive_close(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the pointer names a live `linger` of the given length, as
    // setsockopt(2) requires for SO_LINGER. A failure leaves a FIN close.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn connect_reaches_a_listener_and_is_refused_by_a_closed_port() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let stream = connect(&address, Duration::from_secs(5)).unwrap();
        let (peer, _) = listener.accept().unwrap();
        assert_eq!(stream.local_addr().unwrap(), peer.peer_addr().unwrap());
        drop(listener);
        let refused = connect(&address, Duration::from_secs(5)).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::ECONNREFUSED));
    }

    #[test]
    fn connect_over_ipv6_reaches_a_listener() {
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            return; // no IPv6 loopback here
        };
        let stream = connect(&listener.local_addr().unwrap(), Duration::from_secs(5)).unwrap();
        let (peer, _) = listener.accept().unwrap();
        assert_eq!(stream.local_addr().unwrap(), peer.peer_addr().unwrap());
    }

    #[test]
    fn a_loopback_connection_reports_its_mss_and_no_retransmissions() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _peer = listener.accept().unwrap();
        assert!(emss(&stream) > 0);
        assert_eq!(total_retransmissions(&stream), Some(0));
    }
}
