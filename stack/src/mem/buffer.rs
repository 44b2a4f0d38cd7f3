//! Memory for registration: a zeroed heap allocation at a stable address,
//! written by remote placement while the application may use it, the way a
//! NIC's DMA writes host memory (RFC 5041 section 5.1.1: the Tagged Buffer
//! a peer places into directly).
//!
//! # The access contract
//!
//! The octets are raw memory. Nothing in uwarp ever makes a `&mut [u8]`
//! that points into them, and every access but two is a raw-pointer copy
//! ([`read_at`](MemoryBuffer::read_at), [`write_at`](MemoryBuffer::write_at),
//! the [`StagTable`](super::StagTable)'s placement). The exceptions are
//! reads of zero-copy transmit, each through a `&[u8]` that lives only
//! for one pass: the CRC pass
//! ([`BufferSlice::crc32c_update`](super::BufferSlice::crc32c_update)),
//! and, on a device that reads external buffers, the device's read of a
//! payload whose address it was handed, which stands for a NIC's DMA: the
//! memcpy of a virtual device's driver, or, on a memory link, the
//! receiving core's copy of the frame into one mbuf (or into a duplicate
//! for the impairment stage). Several threads may make these accesses at
//! once, on the same buffer.
//!
//! What the type does not do is make two accesses to the *same octets* from
//! different threads, one of them a write, well defined: that is a data race
//! in Rust's memory model, as it would be for DMA if the CPU were modelled.
//! As with verbs, the consumer keeps the races away: it does not read
//! octets a peer may still be writing before the completion that orders
//! them (RDMAP's ordering and completion rules, RFC 5040 section 5), and it
//! does not advertise one range to two writers at once. On the hardware
//! uwarp targets, breaking that rule yields torn octet values and nothing
//! else; the table's own guarantees (no placement after a deregistration
//! has completed, see [`StagTable::deregister`](super::StagTable::deregister))
//! never depend on it.

use core::fmt;
use core::ptr::{self, NonNull};
use std::alloc::{self, Layout};

use super::error::MemError;

/// Alignment of every allocation: one cache line.
const ALIGN: usize = 64;

/// A zeroed, fixed-size allocation that can be registered with a
/// [`StagTable`](super::StagTable). Share it with `Arc`; see the module
/// documentation for the access contract.
pub struct MemoryBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `MemoryBuffer` uniquely owns its allocation and has no
// thread-affine state; the octets are only reached through raw-pointer
// copies bounded by `len`, and the allocation lives until `drop`, which
// needs ownership. Racing accesses to the same octets are the consumer's
// contract (module documentation), not a memory-safety hazard of the type.
unsafe impl Send for MemoryBuffer {}
// SAFETY: as above: `&MemoryBuffer` only gives raw-pointer copies, never
// references into the octets, so sharing it between threads creates no
// aliasing references.
unsafe impl Sync for MemoryBuffer {}

impl MemoryBuffer {
    /// A buffer of `len` zeroed octets, aligned to 64. Aborts like `Vec`
    /// when the allocation fails; panics if `len` exceeds `isize::MAX`
    /// rounded down to the alignment.
    pub fn new(len: usize) -> Self {
        if len == 0 {
            return Self {
                ptr: NonNull::dangling(),
                len,
            };
        }
        let layout = Layout::from_size_align(len, ALIGN).expect("MemoryBuffer length too large");
        // SAFETY: `layout` has a non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }

    /// Size in octets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no octets.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The virtual address of the first octet. Linux siw advertises this as
    /// the base Tagged Offset of a region, and so does
    /// [`RegionSpec::whole`](super::RegionSpec::whole).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr().addr() as u64
    }

    /// Checks that `len` octets at `offset` are inside the buffer.
    fn check(&self, offset: usize, len: usize) -> Result<(), MemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(MemError::OutOfBuffer {
                offset,
                len,
                buffer_len: self.len,
            }),
        }
    }

    /// Copies `out.len()` octets starting at `offset` into `out`.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), MemError> {
        self.check(offset, out.len())?;
        // SAFETY: `offset + out.len() <= self.len`, so the source range is
        // inside the live allocation; `out` is a distinct `&mut` the caller
        // owns, and safe code cannot obtain a slice of this buffer, so the
        // ranges do not overlap. No reference to the buffer's octets is made.
        unsafe {
            ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len());
        }
        Ok(())
    }

    /// Copies `data` into the buffer starting at `offset`.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<(), MemError> {
        self.check(offset, data.len())?;
        // SAFETY: `offset + data.len() <= self.len`, so the destination is
        // inside the live allocation; `data` cannot alias it (safe code has
        // no slice of this buffer). No reference to the octets is made.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len());
        }
        Ok(())
    }

    /// Sets every octet to `byte`.
    pub fn fill(&self, byte: u8) {
        // SAFETY: exactly the `self.len` octets of the live allocation are
        // written, through the raw pointer.
        unsafe { ptr::write_bytes(self.ptr.as_ptr(), byte, self.len) }
    }

    /// The raw pointer to the first octet, for code that hands the memory to
    /// something else (a NIC, a DPDK external buffer).
    ///
    /// # Safety
    ///
    /// The pointer is valid for `len()` octets while this buffer is alive.
    /// The caller must keep the access contract of the module
    /// documentation: access the octets through raw pointers (a reference
    /// into them may be aliased by concurrent placement; the one shared
    /// slice uwarp makes, for a CRC, is argued for where it is made), and
    /// never pass a slice made from this pointer to [`read_at`],
    /// [`write_at`] or a [`StagTable`](super::StagTable) operation on the
    /// same buffer.
    ///
    /// [`read_at`]: Self::read_at
    /// [`write_at`]: Self::write_at
    pub unsafe fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for MemoryBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let layout = Layout::from_size_align(self.len, ALIGN)
            .expect("layout was valid when the buffer was allocated");
        // SAFETY: `ptr` came from `alloc_zeroed` with this same layout and is
        // freed exactly once, here, when the last owner goes away.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl fmt::Debug for MemoryBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBuffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_zeroed_and_copies() {
        let buf = MemoryBuffer::new(100);
        assert_eq!(buf.len(), 100);
        assert!(!buf.is_empty());
        assert_eq!(buf.addr() % ALIGN as u64, 0);
        let mut out = [0xFFu8; 100];
        buf.read_at(0, &mut out).unwrap();
        assert_eq!(out, [0u8; 100]);
        buf.write_at(98, &[1, 2]).unwrap();
        let mut tail = [0u8; 3];
        buf.read_at(97, &mut tail).unwrap();
        assert_eq!(tail, [0, 1, 2]);
        buf.fill(0xA5);
        buf.read_at(0, &mut out).unwrap();
        assert_eq!(out, [0xA5u8; 100]);
    }

    #[test]
    fn refuses_out_of_range() {
        let buf = MemoryBuffer::new(10);
        let err = MemError::OutOfBuffer {
            offset: 9,
            len: 2,
            buffer_len: 10,
        };
        assert_eq!(buf.write_at(9, &[0, 0]), Err(err));
        assert_eq!(buf.read_at(9, &mut [0, 0]), Err(err));
        assert!(buf.write_at(usize::MAX, &[0]).is_err());
        assert!(buf.write_at(10, &[]).is_ok());
        assert!(buf.write_at(11, &[]).is_err());
    }

    #[test]
    fn empty_buffer() {
        let buf = MemoryBuffer::new(0);
        assert!(buf.is_empty());
        assert!(buf.read_at(0, &mut []).is_ok());
        assert!(buf.write_at(0, &[1]).is_err());
        buf.fill(1);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<MemoryBuffer>();
    }
}
