//! Access rights of a registered region (RFC 5041 section 7.1 check 2:
//! "the STag has an associated buffer that allows Placement"; RFC 5040
//! section 7's "access rights violation"; the access controls of RFC 5042).
//!
//! Local read access is always granted: the consumer owns the memory.
//! Everything else is asked for at registration and checked on every use.

use core::fmt;
use core::ops::{BitOr, BitOrAssign};

/// A set of access rights, bitflags-style.
///
/// ```
/// use uwarp_stack::mem::Access;
/// let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
/// assert!(rw.contains(Access::REMOTE_WRITE));
/// assert!(!rw.contains(Access::LOCAL_WRITE));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights beyond local read.
    pub const NONE: Access = Access(0);
    /// The local consumer may write the region (receive buffers, the sink
    /// of a local copy).
    pub const LOCAL_WRITE: Access = Access(0x01);
    /// The peer may read the region with an RDMA Read (RFC 5040 section
    /// 5.2: the Data Source of a Read Request).
    pub const REMOTE_READ: Access = Access(0x02);
    /// The peer may place into the region with an RDMA Write or as the
    /// Data Sink of an RDMA Read Response (RFC 5040 sections 5.1, 5.2).
    pub const REMOTE_WRITE: Access = Access(0x04);
    /// Every right this type knows.
    pub const ALL: Access = Access(0x07);

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The set with these bits, or `None` if an unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<Access> {
        if bits & !Self::ALL.0 == 0 {
            Some(Access(bits))
        } else {
            None
        }
    }

    /// The set with these bits, unknown ones dropped.
    pub const fn from_bits_truncate(bits: u8) -> Access {
        Access(bits & Self::ALL.0)
    }

    /// Whether every right in `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no right is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The union of the two sets.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl BitOr for Access {
    type Output = Access;

    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        *self = self.union(rhs);
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Access, &str); 3] = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
        ];
        if self.is_empty() {
            return f.write_str("Access(NONE)");
        }
        f.write_str("Access(")?;
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_and_union() {
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        assert!(rw.contains(Access::REMOTE_READ));
        assert!(rw.contains(Access::REMOTE_WRITE));
        assert!(rw.contains(Access::NONE));
        assert!(!rw.contains(Access::LOCAL_WRITE));
        assert!(!rw.contains(Access::ALL));
        let mut all = rw;
        all |= Access::LOCAL_WRITE;
        assert_eq!(all, Access::ALL);
        assert!(Access::NONE.is_empty());
    }

    #[test]
    fn bits_round_trip() {
        for bits in 0..=u8::MAX {
            match Access::from_bits(bits) {
                Some(access) => assert_eq!(access.bits(), bits),
                None => assert_ne!(bits & !0x07, 0),
            }
            assert_eq!(Access::from_bits_truncate(bits).bits(), bits & 0x07);
        }
    }

    #[test]
    fn debug_names_the_flags() {
        assert_eq!(format!("{:?}", Access::NONE), "Access(NONE)");
        assert_eq!(
            format!("{:?}", Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            "Access(LOCAL_WRITE | REMOTE_WRITE)"
        );
    }
}
