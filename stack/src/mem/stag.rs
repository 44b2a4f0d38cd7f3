//! The Steering Tag (RFC 5041 sections 2.3 and 4.2, RFC 5040 section 4.1):
//! the 32-bit name of a Tagged Buffer that the data sink advertises and the
//! data source puts in every tagged DDP header.
//!
//! uwarp splits it as the verbs do: the high 24 bits index the STag table
//! and are chosen by uwarp, unpredictably (RFC 5042 asks that STags be hard
//! to guess); the low 8 bits are the consumer key, chosen by the consumer so
//! that a re-registered slot answers to a different STag.

use core::fmt;

/// Number of bits of the table index.
pub const INDEX_BITS: u32 = 24;

/// The largest table index plus one: the most slots a table can have.
pub const INDEX_LIMIT: u32 = 1 << INDEX_BITS;

/// A Steering Tag: `index << 8 | key`.
///
/// Any 32-bit value is a well-formed STag on the wire; whether it names a
/// valid region is the [`StagTable`](super::StagTable)'s business. STag 0
/// (index 0) is never handed out by uwarp.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(pub u32);

impl Stag {
    /// The STag with this table index and consumer key, or `None` if the
    /// index does not fit in 24 bits.
    pub const fn from_parts(index: u32, key: u8) -> Option<Stag> {
        if index < INDEX_LIMIT {
            Some(Stag(index << 8 | key as u32))
        } else {
            None
        }
    }

    /// The 24-bit table index (the high bits).
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The 8-bit consumer key (the low octet).
    pub const fn key(self) -> u8 {
        self.0 as u8
    }

    /// The raw 32-bit value, as carried on the wire.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

impl fmt::Debug for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stag({:#08x}, key {:#04x})", self.index(), self.key())
    }
}

impl fmt::Display for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip() {
        let stag = Stag::from_parts(0xAB_CDEF, 0x42).unwrap();
        assert_eq!(stag.raw(), 0xABCD_EF42);
        assert_eq!(stag.index(), 0xAB_CDEF);
        assert_eq!(stag.key(), 0x42);
        assert_eq!(Stag(0xFFFF_FFFF).index(), INDEX_LIMIT - 1);
        assert_eq!(
            Stag::from_parts(INDEX_LIMIT - 1, 0xFF),
            Some(Stag(u32::MAX))
        );
        assert_eq!(Stag::from_parts(INDEX_LIMIT, 0), None);
        assert_eq!(Stag::from_parts(0, 0), Some(Stag(0)));
    }

    #[test]
    fn formatting() {
        let stag = Stag::from_parts(1, 0x0A).unwrap();
        assert_eq!(stag.to_string(), "0x0000010a");
        assert_eq!(format!("{stag:?}"), "Stag(0x000001, key 0x0a)");
    }
}
