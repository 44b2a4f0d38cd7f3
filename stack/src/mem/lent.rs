//! Octets of a registered region lent for the length of one call: what a
//! transport that hands a payload to a system call where it lies (the
//! socket transport's `writev`) reads, instead of copying the payload
//! into a frame first (RFC 5041 section 5.1 lets a DDP implementation
//! send data from where it lies).
//!
//! A [`Lent`] lives only inside [`StagTable::lend`](super::StagTable::lend),
//! which holds the table's epoch guard throughout: a deregistration that
//! starts meanwhile waits for the call to return before it completes, so
//! the octets are never read after the application may free them. That
//! is why, unlike a [`BufferSlice`](super::BufferSlice), a `Lent` may be
//! of foreign memory: it cannot outlive the call.
//!
//! A sink that gathers several payloads into one system call keeps each
//! past its call as a [`LentRange`], which stays valid while an epoch pin
//! of the thread's, taken before the range was lent, lasts (a
//! [`Burst`](super::Burst) the sender holds for its round): the same
//! guard, held longer.
//!
//! No Rust reference into the octets is made. The kernel reads them
//! through the address ([`LentRange::as_ptr`]) with `copy_from_user`, which
//! fails with `EFAULT` instead of faulting when a program unmapped them
//! without deregistering; uwarp reads them with the buffer's own copies
//! ([`Lent::read`]), guarded for foreign memory.

use core::fmt;

use super::buffer::MemoryBuffer;
use super::error::MemError;

/// `len` octets of a [`MemoryBuffer`] at `offset`, lent for as long as
/// the borrow `'g` of the table's guard lasts.
pub struct Lent<'g> {
    buffer: &'g MemoryBuffer,
    offset: usize,
    len: usize,
}

impl<'g> Lent<'g> {
    /// The octets `offset .. offset + len` of `buffer`, which the caller
    /// checked lie inside it.
    pub(super) fn new(buffer: &'g MemoryBuffer, offset: usize, len: usize) -> Self {
        debug_assert!(offset + len <= buffer.len());
        Self {
            buffer,
            offset,
            len,
        }
    }

    /// How many octets are lent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The range, to be kept past this call while the thread's epoch pin
    /// lasts ([`LentRange`]).
    pub fn range(&self) -> LentRange {
        LentRange {
            buffer: self.buffer,
            offset: self.offset,
            len: self.len,
        }
    }

    /// Copies `out.len()` lent octets from `at` on into `out`; a fault
    /// in foreign memory its owner unmapped is [`MemError::Fault`] where
    /// a handler resumes it.
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<(), MemError> {
        match at.checked_add(out.len()) {
            Some(end) if end <= self.len => self.buffer.read_at(self.offset + at, out),
            _ => Err(MemError::OutOfBuffer {
                offset: at,
                len: out.len(),
                buffer_len: self.len,
            }),
        }
    }
}

/// A [`Lent`] range kept past the call that lent it: valid while the
/// epoch pin the thread took before it was lent lasts (a
/// [`Burst`](super::Burst)), and only on that thread; reading it is
/// `unsafe` for that reason.
#[derive(Clone, Copy)]
pub struct LentRange {
    buffer: *const MemoryBuffer,
    offset: usize,
    len: usize,
}

impl LentRange {
    /// How many octets are lent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first lent octet, for a system call that reads
    /// them (an `iovec` of `writev`), valid while the range is. Reading
    /// through it from Rust is the caller's affair: the buffer's access
    /// contract (module documentation of `buffer.rs`) makes no reference
    /// into the octets.
    ///
    /// # Safety
    ///
    /// The epoch pin this thread held when the range was lent is still
    /// held.
    pub unsafe fn as_ptr(&self) -> *const u8 {
        // SAFETY: the caller's pin keeps the region, and so its buffer,
        // from being dropped (its destruction is deferred until every pin
        // taken before the retirement is dropped).
        unsafe { (*self.buffer).ptr_at(self.offset) }
    }

    /// Copies `out.len()` lent octets from `at` on into `out`, as
    /// [`Lent::read`] does.
    ///
    /// # Safety
    ///
    /// As for [`as_ptr`](Self::as_ptr): the pin is still held.
    pub unsafe fn read(&self, at: usize, out: &mut [u8]) -> Result<(), MemError> {
        // SAFETY: the buffer is alive (the caller's pin, as in `as_ptr`),
        // and `Lent::read` checks the range.
        let buffer = unsafe { &*self.buffer };
        Lent::new(buffer, self.offset, self.len).read(at, out)
    }
}

impl fmt::Debug for LentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LentRange")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl fmt::Debug for Lent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_inside_what_was_lent() {
        let buffer = MemoryBuffer::new(64);
        buffer.write_at(0, &(0..64).collect::<Vec<u8>>()).unwrap();
        let lent = Lent::new(&buffer, 16, 8);
        assert_eq!((lent.len(), lent.is_empty()), (8, false));
        let mut out = [0; 4];
        lent.read(4, &mut out).unwrap();
        assert_eq!(out, [20, 21, 22, 23]);
        assert!(matches!(
            lent.read(5, &mut out),
            Err(MemError::OutOfBuffer { offset: 5, .. })
        ));
        assert!(lent.read(usize::MAX, &mut out).is_err());
        let range = lent.range();
        assert_eq!((range.len(), range.is_empty()), (8, false));
        // SAFETY: `buffer` outlives the range here, with no table at all.
        unsafe {
            assert_eq!(range.as_ptr(), buffer.ptr_at(16));
            range.read(0, &mut out).unwrap();
            assert!(range.read(6, &mut out).is_err());
        }
        assert_eq!(out, [16, 17, 18, 19]);
    }
}
