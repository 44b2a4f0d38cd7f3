//! TCP sequence numbers and their modulo-2^32 comparisons (RFC 9293
//! section 3.4).
//!
//! The engine keeps every offset inside a connection as a `u64` stream
//! position (the first data octet after the SYN is position 0), which never
//! wraps; sequence numbers appear only at the wire boundary, where a
//! signed [`Seq::diff`] from a known anchor gives the position.

use core::ops::{Add, Sub};
use smoltcp::wire::TcpSeqNumber;

/// A sequence number compared in modulo-2^32 arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// `self` comes strictly before `other`.
    pub const fn lt(self, other: Seq) -> bool {
        (self.0.wrapping_sub(other.0) as i32) < 0
    }

    /// `self` comes before or is `other`.
    pub const fn le(self, other: Seq) -> bool {
        (self.0.wrapping_sub(other.0) as i32) <= 0
    }

    /// `self` comes strictly after `other`.
    pub const fn gt(self, other: Seq) -> bool {
        other.lt(self)
    }

    /// `self` comes after or is `other`.
    pub const fn ge(self, other: Seq) -> bool {
        other.le(self)
    }

    /// The signed distance from `other` to `self`.
    pub const fn diff(self, other: Seq) -> i64 {
        self.0.wrapping_sub(other.0) as i32 as i64
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    fn add(self, rhs: u32) -> Seq {
        Seq(self.0.wrapping_add(rhs))
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    fn sub(self, rhs: u32) -> Seq {
        Seq(self.0.wrapping_sub(rhs))
    }
}

impl From<TcpSeqNumber> for Seq {
    fn from(value: TcpSeqNumber) -> Seq {
        Seq(value.0 as u32)
    }
}

impl From<Seq> for TcpSeqNumber {
    fn from(value: Seq) -> TcpSeqNumber {
        TcpSeqNumber(value.0 as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_wrap() {
        let a = Seq(u32::MAX - 1);
        let b = Seq(3);
        assert!(a.lt(b) && a.le(b) && b.gt(a) && b.ge(a));
        assert_eq!(b.diff(a), 5);
        assert_eq!((a + 5).0, 3);
    }
}
