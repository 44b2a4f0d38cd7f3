//! The kernel TCP socket options std does not expose: the current MSS
//! (MPA's EMSS, RFC 5044 section 4.1, from which the MULPDU follows), the
//! retransmission count of `TCP_INFO`, and an abortive close (SO_LINGER
//! with a zero timeout sends an RST).

use std::net::TcpStream;
use std::os::fd::AsRawFd;

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
    fn a_loopback_connection_reports_its_mss_and_no_retransmissions() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _peer = listener.accept().unwrap();
        assert!(emss(&stream) > 0);
        assert_eq!(total_retransmissions(&stream), Some(0));
    }
}
