//! Protection domains (RFC 5041 section 8.2, RFC 5040 section 7's "STag
//! not associated with RDMAP stream"): every STag and every stream belongs
//! to one, and a stream may only use the STags of its own.

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

/// A protection domain handle. Two handles are the same domain exactly when
/// they are equal.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdId(u32);

impl PdId {
    /// The handle with this number, for code that stores PDs as integers.
    /// [`ProtectionDomains::allocate`] is how distinct ones are made.
    pub const fn from_raw(raw: u32) -> PdId {
        PdId(raw)
    }

    /// The handle's number.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

impl fmt::Debug for PdId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PdId({})", self.0)
    }
}

/// Hands out distinct [`PdId`]s; shareable between threads.
#[derive(Debug)]
pub struct ProtectionDomains {
    next: AtomicU32,
}

impl ProtectionDomains {
    /// An allocator whose first domain is `PdId(1)`.
    pub const fn new() -> Self {
        Self {
            next: AtomicU32::new(1),
        }
    }

    /// A domain no earlier call returned, or `None` once the 32-bit space
    /// is used up (domains are not recycled).
    pub fn allocate(&self) -> Option<PdId> {
        self.next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .ok()
            .map(PdId)
    }
}

impl Default for ProtectionDomains {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocated_domains_are_distinct() {
        let pds = ProtectionDomains::new();
        let a = pds.allocate().unwrap();
        let b = pds.allocate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a, PdId::from_raw(1));
        assert_eq!(b.raw(), 2);
    }

    #[test]
    fn allocation_stops_instead_of_wrapping() {
        let pds = ProtectionDomains {
            next: AtomicU32::new(u32::MAX - 1),
        };
        assert_eq!(pds.allocate(), Some(PdId(u32::MAX - 1)));
        assert_eq!(pds.allocate(), None);
        assert_eq!(pds.allocate(), None);
    }
}
