//! `rsetsockopt`, `rgetsockopt` and `rfcntl` for stream rsockets, as
//! rdma-core answers them: the sizes of `SOL_RDMA` and the socket
//! buffers apply to the connection made later (`EINVAL` once it is being
//! made), the TCP options a reliable connection has no use for are
//! accepted, and what rdma-core does not know is `ENOTSUP`.

use std::time::Duration;

use super::keepalive;
use super::stream::{state, Inner, SNDLOWAT};
use super::wire::{scale_to_value, value_to_scale};

/// `SOL_RDMA` of `<rdma/rsocket.h>`.
pub const SOL_RDMA: i32 = 0x10000;
/// `RDMA_SQSIZE`.
const RDMA_SQSIZE: i32 = 0;
/// `RDMA_RQSIZE`.
const RDMA_RQSIZE: i32 = 1;
/// `RDMA_INLINE`.
const RDMA_INLINE: i32 = 2;
/// `RDMA_IOMAPSIZE`.
const RDMA_IOMAPSIZE: i32 = 3;
/// `RS_QP_MAX_SIZE`.
const QP_MAX_SIZE: u32 = super::stream::QP_MAX_SIZE;

/// Sets the option bit `name` of `bits` (`1 << optname`) to `on`.
fn set_bit(bits: &mut u64, name: i32, on: bool) {
    let bit = 1u64 << (name & 63);
    if on {
        *bits |= bit;
    } else {
        *bits &= !bit;
    }
}

/// Whether the bit `name` of `bits` is set.
fn bit(bits: u64, name: i32) -> i32 {
    i32::from(bits & (1u64 << (name & 63)) != 0)
}

/// The keepalive interval of a socket whose keepalive is on.
pub fn keepalive_every(inner: &Inner) -> Option<Duration> {
    (bit(inner.option_bits.socket, libc::SO_KEEPALIVE) != 0)
        .then(|| Duration::from_secs(u64::from(inner.keepalive_secs.max(1))))
}

/// `rsetsockopt` with the option's value read as an `int` (`value`) or,
/// for `SO_LINGER`, its `l_onoff` (the first `int` too). `Some` interval
/// when the call turned keepalive on or changed its interval while on:
/// the socket is to be (re)scheduled ([`keepalive::schedule`]).
pub fn set(inner: &mut Inner, level: i32, name: i32, value: i32) -> Result<Option<Duration>, i32> {
    let unconnected = inner.conn.is_none();
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
            let was_on = keepalive_every(inner).is_some();
            set_bit(&mut inner.option_bits.socket, name, value != 0);
            if inner.keepalive_secs == 0 && value != 0 {
                inner.keepalive_secs = keepalive::default_secs();
            }
            return Ok(keepalive_every(inner).filter(|_| !was_on));
        }
        (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_OOBINLINE) => {
            set_bit(&mut inner.option_bits.socket, name, value != 0);
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            // Inverted, as rdma-core keeps it: linger is on by default.
            set_bit(&mut inner.option_bits.socket, name, value == 0);
        }
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            if unconnected {
                inner.sizes.rbuf_size = (value as u32) << 1;
            }
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            if unconnected {
                inner.sizes.sbuf_size = ((value as u32) << 1).max(SNDLOWAT << 1);
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
            set_bit(&mut inner.option_bits.tcp, name, value != 0);
        }
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_MAXSEG | libc::TCP_CONGESTION,
        ) => {}
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) if value <= 0 => return Err(libc::EINVAL),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => {
            inner.keepalive_secs = value as u32;
            return Ok(keepalive_every(inner));
        }
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => {
            inner.af_only = Some(value != 0);
            set_bit(&mut inner.option_bits.ipv6, name, value != 0);
        }
        (SOL_RDMA, _) if inner.state & (state::OPENING | state::CONNECTED) != 0 || !unconnected => {
            return Err(libc::EINVAL);
        }
        (SOL_RDMA, RDMA_SQSIZE) => inner.sizes.sq_size = (value as u32).min(QP_MAX_SIZE),
        (SOL_RDMA, RDMA_RQSIZE) => inner.sizes.rq_size = (value as u32).min(QP_MAX_SIZE),
        (SOL_RDMA, RDMA_INLINE) => inner.sizes.sq_inline = (value as u32).min(QP_MAX_SIZE),
        (SOL_RDMA, RDMA_IOMAPSIZE) => {
            inner.sizes.iomap_size = scale_to_value(value_to_scale(value.max(0) as u32))
        }
        _ => return Err(libc::ENOTSUP),
    }
    Ok(None)
}

/// `rgetsockopt`: the option's value as an `int`, or for `SO_LINGER` the
/// `(l_onoff, l_linger)` pair.
pub fn get(inner: &mut Inner, level: i32, name: i32) -> Result<(i32, Option<i32>), i32> {
    let value = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_KEEPALIVE | libc::SO_OOBINLINE) => {
            bit(inner.option_bits.socket, name)
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            return Ok((1 - bit(inner.option_bits.socket, name), Some(0)));
        }
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => inner.sizes.rbuf_size as i32,
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => inner.sizes.sbuf_size as i32,
        (libc::SOL_SOCKET, libc::SO_ERROR) => std::mem::take(&mut inner.err),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => bit(inner.option_bits.tcp, name),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_CONGESTION) => 1,
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => inner.keepalive_secs as i32,
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => 2048,
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => bit(inner.option_bits.ipv6, name),
        (SOL_RDMA, RDMA_SQSIZE) => inner.sizes.sq_size as i32,
        (SOL_RDMA, RDMA_RQSIZE) => inner.sizes.rq_size as i32,
        (SOL_RDMA, RDMA_INLINE) => inner.sizes.sq_inline as i32,
        (SOL_RDMA, RDMA_IOMAPSIZE) => inner.sizes.iomap_size as i32,
        _ => return Err(libc::ENOTSUP),
    };
    Ok((value, None))
}

/// `rfcntl`: `F_GETFL`, `F_SETFL`, `F_GETFD`, `F_SETFD`; `ENOTSUP` for the
/// rest.
pub fn fcntl(inner: &mut Inner, cmd: i32, arg: i32) -> Result<i32, i32> {
    match cmd {
        libc::F_GETFL => Ok(inner.fs_flags),
        libc::F_SETFL => {
            inner.fs_flags = arg;
            Ok(0)
        }
        libc::F_GETFD => Ok(inner.fd_flags),
        libc::F_SETFD => {
            inner.fd_flags = arg;
            Ok(0)
        }
        _ => Err(libc::ENOTSUP),
    }
}
