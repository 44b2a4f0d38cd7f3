//! What a registration describes: a range of a [`MemoryBuffer`] exposed as
//! the Tagged Offsets `[base_to, base_to + len)` (RFC 5041 sections 2.3 and
//! 4.2: the TO names an octet of the Tagged Buffer), and the bounds checks
//! of RFC 5041 section 7.1 (checks 3-5) against it.

use std::sync::Arc;

use super::access::Access;
use super::buffer::MemoryBuffer;
use super::error::{MemError, TaggedError};
use super::pd::PdId;

/// A region to register with [`StagTable::register`](super::StagTable::register).
#[derive(Debug, Clone)]
pub struct RegionSpec {
    /// The memory the region lies in.
    pub buffer: Arc<MemoryBuffer>,
    /// Offset of the region's first octet in `buffer`.
    pub offset: usize,
    /// Length of the region in octets.
    pub len: usize,
    /// The Tagged Offset of the region's first octet. The TOs of the region
    /// are `base_to .. base_to + len`, which must not wrap.
    pub base_to: u64,
    /// What the region allows besides local read.
    pub access: Access,
    /// Whether a Send with Invalidate may invalidate the STag (RFC 5040
    /// section 5.3). Local invalidation and deregistration are always
    /// allowed.
    pub invalidatable: bool,
}

impl RegionSpec {
    /// The whole buffer, with its virtual address as base TO (what Linux
    /// siw advertises) and remote invalidation allowed.
    pub fn whole(buffer: Arc<MemoryBuffer>, access: Access) -> Self {
        Self {
            offset: 0,
            len: buffer.len(),
            base_to: buffer.addr(),
            access,
            invalidatable: true,
            buffer,
        }
    }

    /// `len` octets of `buffer` at `offset`, exposed from Tagged Offset
    /// `base_to`, with remote invalidation allowed.
    pub fn new(
        buffer: Arc<MemoryBuffer>,
        offset: usize,
        len: usize,
        base_to: u64,
        access: Access,
    ) -> Self {
        Self {
            buffer,
            offset,
            len,
            base_to,
            access,
            invalidatable: true,
        }
    }

    /// Checks the spec and turns it into a descriptor.
    pub(crate) fn into_region(self, pd: PdId, generation: u32) -> Result<Region, MemError> {
        let in_buffer = self
            .offset
            .checked_add(self.len)
            .is_some_and(|end| end <= self.buffer.len());
        if !in_buffer {
            return Err(MemError::OutOfBuffer {
                offset: self.offset,
                len: self.len,
                buffer_len: self.buffer.len(),
            });
        }
        let len = u64::try_from(self.len).map_err(|_| MemError::RegionWraps)?;
        if self.base_to.checked_add(len).is_none() {
            return Err(MemError::RegionWraps);
        }
        Ok(Region {
            buffer: self.buffer,
            offset: self.offset,
            len,
            base_to: self.base_to,
            pd,
            access: self.access,
            generation,
        })
    }
}

/// The descriptor a table slot publishes: immutable once published, shared
/// with the data path through an epoch-protected pointer.
#[derive(Debug)]
pub(crate) struct Region {
    /// The memory.
    pub(crate) buffer: Arc<MemoryBuffer>,
    /// Offset of the TO `base_to` in `buffer`.
    pub(crate) offset: usize,
    /// Length in octets; `base_to + len` does not wrap.
    pub(crate) len: u64,
    /// TO of the first octet.
    pub(crate) base_to: u64,
    /// The owning protection domain.
    pub(crate) pd: PdId,
    /// Access rights (a copy of the state word's).
    pub(crate) access: Access,
    /// The slot generation this descriptor was published under.
    pub(crate) generation: u32,
}

impl Region {
    /// Where `len` octets at Tagged Offset `to` lie in the buffer: RFC 5041
    /// section 7.1 check 5 (the 64-bit sum must not wrap) first, then checks
    /// 3-4 (`[to, to + len)` inside `[base_to, base_to + self.len)`).
    pub(crate) fn locate(&self, to: u64, len: usize) -> Result<usize, TaggedError> {
        let len = u64::try_from(len).map_err(|_| TaggedError::ToWrap)?;
        let end = to.checked_add(len).ok_or(TaggedError::ToWrap)?;
        // `base_to + self.len` was checked not to wrap at registration.
        if to < self.base_to || end > self.base_to + self.len {
            return Err(TaggedError::BaseOrBounds);
        }
        // `to - base_to < self.len <= buffer.len() - offset`, so this fits.
        Ok(self.offset + (to - self.base_to) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(base_to: u64, buffer_len: usize, offset: usize, len: usize) -> Region {
        let buffer = Arc::new(MemoryBuffer::new(buffer_len));
        RegionSpec::new(buffer, offset, len, base_to, Access::ALL)
            .into_region(PdId::from_raw(1), 0)
            .unwrap()
    }

    #[test]
    fn locate_checks_both_edges() {
        let r = region(1000, 64, 16, 32);
        assert_eq!(r.locate(1000, 32), Ok(16));
        assert_eq!(r.locate(1000, 0), Ok(16));
        assert_eq!(r.locate(1031, 1), Ok(47));
        assert_eq!(r.locate(1032, 0), Ok(48));
        assert_eq!(r.locate(999, 1), Err(TaggedError::BaseOrBounds));
        assert_eq!(r.locate(1000, 33), Err(TaggedError::BaseOrBounds));
        assert_eq!(r.locate(1032, 1), Err(TaggedError::BaseOrBounds));
        assert_eq!(r.locate(u64::MAX, 1), Err(TaggedError::ToWrap));
        assert_eq!(r.locate(u64::MAX, 0), Err(TaggedError::BaseOrBounds));
    }

    #[test]
    fn region_at_the_top_of_the_to_space() {
        let r = region(u64::MAX - 8, 8, 0, 8);
        assert_eq!(r.locate(u64::MAX - 8, 8), Ok(0));
        assert_eq!(r.locate(u64::MAX - 1, 1), Ok(7));
        assert_eq!(r.locate(u64::MAX - 1, 2), Err(TaggedError::ToWrap));
    }

    #[test]
    fn specs_are_checked() {
        let buffer = Arc::new(MemoryBuffer::new(64));
        let spec = |offset, len, base_to| {
            RegionSpec::new(buffer.clone(), offset, len, base_to, Access::NONE)
                .into_region(PdId::from_raw(1), 0)
                .map(|_| ())
        };
        assert_eq!(spec(0, 64, 0), Ok(()));
        assert_eq!(spec(64, 0, 0), Ok(()));
        assert_eq!(
            spec(1, 64, 0),
            Err(MemError::OutOfBuffer {
                offset: 1,
                len: 64,
                buffer_len: 64
            })
        );
        assert!(spec(usize::MAX, 2, 0).is_err());
        assert_eq!(spec(0, 64, u64::MAX - 64), Ok(()));
        assert_eq!(spec(0, 64, u64::MAX - 63), Err(MemError::RegionWraps));
        let whole = RegionSpec::whole(buffer.clone(), Access::REMOTE_READ);
        assert_eq!((whole.offset, whole.len), (0, 64));
        assert_eq!(whole.base_to, buffer.addr());
        assert!(whole.invalidatable);
    }
}
