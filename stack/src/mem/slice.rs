//! A range of registered memory held alive: what a send queue keeps in
//! place of a payload's octets when the payload is sent straight from the
//! application's memory (zero-copy transmit of RFC 5040 section 5's
//! Send and RDMA Write data and section 5.2's Read Response data, which
//! RFC 5041 section 5.1 lets a DDP implementation send from where it
//! lies).
//!
//! The slice owns a reference to its [`MemoryBuffer`], so the octets stay
//! mapped for as long as a queued or in-flight segment may still read
//! them, even after the region was deregistered and the application
//! dropped its own reference. Reading follows the buffer's access
//! contract: raw copies, and one CRC pass (see
//! [`crc32c_update`](BufferSlice::crc32c_update)).
//!
//! That lifetime is why a slice is never made of a foreign buffer
//! ([`MemoryBuffer::from_raw_parts`]), whose memory its owner may free as
//! soon as its deregistration returns: a slice lives until TCP's
//! acknowledgement or the connection's end, and on a device that reads
//! external buffers until the device frees its frames, which a driver may
//! put off until it needs the descriptors again. Waiting for all that in
//! a deregistration could block it without bound, and on a device the
//! application steps from its own thread, for ever. Payloads in foreign
//! memory are copied on their way out instead (one copy more, for memory
//! uwarp did not allocate).

use core::fmt;
use core::ptr;
use std::sync::Arc;

use super::buffer::MemoryBuffer;
use crate::wire::crc::Crc32c;

/// `len` octets of a [`MemoryBuffer`] at `offset`, checked to lie inside
/// it when made.
#[derive(Clone)]
pub struct BufferSlice {
    buffer: Arc<MemoryBuffer>,
    offset: usize,
    len: usize,
}

impl BufferSlice {
    /// The octets `offset .. offset + len` of `buffer`; `None` when they
    /// do not lie inside it, or when `buffer` is foreign memory, which is
    /// never held past its deregistration (see the module documentation).
    pub fn new(buffer: Arc<MemoryBuffer>, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len)?;
        (end <= buffer.len() && !buffer.is_foreign()).then_some(Self {
            buffer,
            offset,
            len,
        })
    }

    /// The buffer the slice lies in.
    pub fn buffer(&self) -> &Arc<MemoryBuffer> {
        &self.buffer
    }

    /// Where the slice begins in its buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Octets in the slice.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no octets.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the slice's octets from `at` on into `out`, which must fit:
    /// `at + out.len()` at most [`len`](Self::len). Copies nothing and
    /// returns false otherwise.
    pub fn read(&self, at: usize, out: &mut [u8]) -> bool {
        let fits = at.checked_add(out.len()).is_some_and(|end| end <= self.len);
        fits && self.buffer.read_at(self.offset + at, out).is_ok()
    }

    /// Feeds the slice's octets to `crc`.
    ///
    /// This is the one place uwarp reads registered memory through a
    /// shared slice instead of a raw copy: the CRC routine takes one, and
    /// copying the octets first would cost the pass zero-copy transmit
    /// saves. The slice lives only for the call and nothing is written
    /// through it. A write racing it is the same race the module
    /// documentation of [`MemoryBuffer`] leaves to the consumer for raw
    /// copies, with the same outcome on the hardware uwarp targets: torn
    /// octets, here a CRC that does not match what is sent, which the peer
    /// answers with a Terminate. Such a write is the application breaking
    /// the verbs rule that a posted request's data is not changed before
    /// its completion, or, for a Read Response, a region exposed to remote
    /// writes and remote reads of the same octets at once.
    pub fn crc32c_update(&self, crc: &mut Crc32c) {
        if self.len == 0 {
            return;
        }
        // SAFETY: `offset + len <= buffer.len()` (checked in `new`), so the
        // range is inside the buffer's allocation (never foreign memory:
        // `new` refuses it), which `self.buffer` keeps alive for the call.
        // No `&mut` to these octets exists in uwarp; a racing write is the
        // consumer's, as for every raw copy (above).
        let octets =
            unsafe { core::slice::from_raw_parts(self.buffer.as_ptr().add(self.offset), self.len) };
        crc.update(octets);
    }

    /// The address of the slice's first octet, for a device that reads it
    /// by DMA (an external-buffer mbuf).
    ///
    /// # Safety
    ///
    /// As [`MemoryBuffer::as_ptr`]: valid for [`len`](Self::len) octets
    /// while this slice (or a clone) is alive, to be read through raw
    /// pointers only.
    pub unsafe fn as_ptr(&self) -> *const u8 {
        // SAFETY: `offset <= buffer.len()`, so the result is inside the
        // allocation or one past its end (for an empty slice).
        unsafe { self.buffer.as_ptr().add(self.offset).cast_const() }
    }

    /// Whether both name the same octets of the same buffer.
    pub fn same_octets(&self, other: &Self) -> bool {
        ptr::eq(Arc::as_ptr(&self.buffer), Arc::as_ptr(&other.buffer))
            && self.offset == other.offset
            && self.len == other.len
    }
}

/// Equal when they name the same octets of the same buffer.
impl PartialEq for BufferSlice {
    fn eq(&self, other: &Self) -> bool {
        self.same_octets(other)
    }
}

impl Eq for BufferSlice {}

impl fmt::Debug for BufferSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferSlice")
            .field("addr", &format_args!("{:#x}", self.buffer.addr()))
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer() -> Arc<MemoryBuffer> {
        let buffer = Arc::new(MemoryBuffer::new(64));
        let data: Vec<u8> = (0..64).collect();
        buffer.write_at(0, &data).unwrap();
        buffer
    }

    #[test]
    fn is_checked_against_its_buffer() {
        let buffer = buffer();
        assert!(BufferSlice::new(buffer.clone(), 0, 64).is_some());
        assert!(BufferSlice::new(buffer.clone(), 64, 0).is_some());
        assert!(BufferSlice::new(buffer.clone(), 1, 64).is_none());
        assert!(BufferSlice::new(buffer, usize::MAX, 2).is_none());
    }

    #[test]
    fn is_never_made_of_foreign_memory() {
        let mut owner = [0u8; 8];
        // SAFETY: `owner` outlives the buffer, which the test only hands
        // to `BufferSlice::new`.
        let foreign = unsafe { MemoryBuffer::from_raw_parts(owner.as_mut_ptr(), 8) };
        let foreign = Arc::new(foreign);
        assert!(BufferSlice::new(foreign.clone(), 0, 8).is_none());
        assert!(BufferSlice::new(foreign.clone(), 0, 0).is_none());
        assert_eq!(Arc::strong_count(&foreign), 1, "nothing kept");
    }

    #[test]
    fn reads_only_inside_itself() {
        let slice = BufferSlice::new(buffer(), 10, 8).unwrap();
        let mut out = [0u8; 3];
        assert!(slice.read(5, &mut out));
        assert_eq!(out, [15, 16, 17]);
        assert!(!slice.read(6, &mut out));
        assert!(!slice.read(usize::MAX, &mut out));
        assert!(slice.read(8, &mut []));
    }

    #[test]
    fn crc_equals_the_crc_of_a_copy() {
        let slice = BufferSlice::new(buffer(), 3, 50).unwrap();
        let mut copy = vec![0u8; 50];
        assert!(slice.read(0, &mut copy));
        let mut crc = Crc32c::new();
        crc.update(b"head");
        slice.crc32c_update(&mut crc);
        assert_eq!(
            crc.value(),
            crate::wire::crc::crc32c(&[b"head".as_slice(), &copy].concat())
        );
        let empty = BufferSlice::new(buffer(), 3, 0).unwrap();
        let before = crc.value();
        empty.crc32c_update(&mut crc);
        assert_eq!(crc.value(), before);
    }

    #[test]
    fn keeps_its_buffer_alive() {
        let buffer = buffer();
        let slice = BufferSlice::new(buffer.clone(), 60, 4).unwrap();
        drop(buffer);
        let mut out = [0u8; 4];
        assert!(slice.read(0, &mut out));
        assert_eq!(out, [60, 61, 62, 63]);
        let other = BufferSlice::new(buffer_of(&slice), 60, 4).unwrap();
        assert!(slice.same_octets(&other));
    }

    fn buffer_of(slice: &BufferSlice) -> Arc<MemoryBuffer> {
        slice.buffer.clone()
    }
}
