//! The two kernel TCP socket options std does not expose: the current MSS
//! (MPA's EMSS, RFC 5044 section 4.1, from which the MULPDU follows) and
//! an abortive close (SO_LINGER with a zero timeout sends an RST).

use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// The MSS the kernel uses on `stream`, or 1460 if it will not say.
pub fn emss(stream: &TcpStream) -> usize {
    let mut mss: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointers name a live c_int and its length, as
    // getsockopt(2) requires for TCP_MAXSEG.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut mss as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 && mss > 0 {
        mss as usize
    } else {
        1460
    }
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
