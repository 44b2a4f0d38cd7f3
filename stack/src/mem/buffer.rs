//! Memory for registration: octets at a stable address, written by remote
//! placement while the application may use it, the way a NIC's DMA writes
//! host memory (RFC 5041 section 5.1.1: the Tagged Buffer a peer places
//! into directly).
//!
//! A buffer has one of two origins:
//!
//! - **allocated** ([`MemoryBuffer::new`]): a zeroed heap allocation,
//!   starting on a page of its own ([`PAGE_ALIGN`]), that the buffer owns
//!   and frees when dropped;
//! - **foreign** ([`MemoryBuffer::from_raw_parts`]): memory the
//!   application owns (a member of a struct, a `malloc`ed or `mmap`ed
//!   range, shared memory), of any alignment, which the buffer only
//!   borrows: it never frees it, and it is valid only until the buffer is
//!   dropped. So that its owner learns when that is, uwarp keeps no
//!   reference to a foreign buffer but its registrations' (which a
//!   deregistration's grace period ends): a
//!   [`BufferSlice`](super::BufferSlice), which may outlive both, is never
//!   made of one, and zero-copy transmit copies foreign memory instead.
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
//! for the impairment stage). Zero-copy transmit never reads a foreign
//! buffer, so both exceptions concern allocated ones only. Several threads
//! may make these accesses at once, on the same buffer.
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
use super::guarded::guarded_copy;

/// Alignment of every allocation uwarp sends from by reference (a
/// [`MemoryBuffer`]'s, a TCP send queue's): a page of ordinary memory, so
/// that no two share a page and a device can map each for DMA on its own
/// (the dataplane's `dma` module maps whole pages).
pub const PAGE_ALIGN: usize = 4096;

/// `len` zeroed octets aligned to [`PAGE_ALIGN`], on pages no other
/// allocation shares, for [`dealloc_page_aligned`] to free. Aborts like
/// `Vec` when the allocation fails; panics if `len` is 0 or too large.
///
/// The block comes from the global allocator with a small alignment and
/// room to align it by hand, so that it is zeroed the way `calloc` zeroes
/// (a block the allocator maps afresh is zero already and is not
/// written). Asked for with the page alignment itself, `alloc_zeroed`
/// falls back to an aligned allocation it then clears octet by octet:
/// when TCP's send queues came from here, every page of one was written
/// at each connection's set-up, which cut the connection set-up rate five
/// times (22,600 setups/s before, 4,300 after, `uwarp-perf loopback` on
/// DPDK; the rings now have memory of their own, `tcp::ring_block`). The address of the
/// block sits in the word before the aligned start.
fn alloc_page_aligned(len: usize) -> NonNull<u8> {
    let layout = page_block_layout(len);
    // SAFETY: `layout` has a non-zero size (`page_block_layout`).
    let raw = unsafe { alloc::alloc_zeroed(layout) };
    let Some(raw) = NonNull::new(raw) else {
        alloc::handle_alloc_error(layout)
    };
    let start = (raw.as_ptr().addr() + BLOCK_HEADER).next_multiple_of(PAGE_ALIGN);
    let aligned = raw.as_ptr().wrapping_add(start - raw.as_ptr().addr());
    // SAFETY: `aligned` lies at least BLOCK_HEADER (16) octets past `raw`
    // and its pages end within the block (`page_block_layout`), so the
    // word before it is inside the block, 8-aligned (the start is
    // page-aligned), and no part of the `len` octets handed out.
    unsafe { aligned.cast::<*mut u8>().sub(1).write(raw.as_ptr()) };
    // SAFETY: inside a non-null block.
    unsafe { NonNull::new_unchecked(aligned) }
}

/// Frees what [`alloc_page_aligned`] gave for `len`.
///
/// # Safety
/// `ptr` must come from `alloc_page_aligned(len)`, with this `len`, and be
/// freed only once.
unsafe fn dealloc_page_aligned(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `alloc_page_aligned` wrote the block's address in the word
    // before `ptr`, and the block was allocated with this layout.
    unsafe {
        let raw = ptr.as_ptr().cast::<*mut u8>().sub(1).read();
        alloc::dealloc(raw, page_block_layout(len));
    }
}

/// Room before a page-aligned start for the block's address (and the
/// allocator's own alignment).
const BLOCK_HEADER: usize = 16;

/// The block holding a page-aligned allocation of `len` (non-zero)
/// octets: its whole pages, up to a page of slack to align the start, and
/// the header.
fn page_block_layout(len: usize) -> Layout {
    assert!(len > 0, "no zero-sized page-aligned allocation");
    let size = len
        .checked_next_multiple_of(PAGE_ALIGN)
        .and_then(|pages| pages.checked_add(PAGE_ALIGN + BLOCK_HEADER))
        .expect("allocation length too large");
    Layout::from_size_align(size, BLOCK_HEADER).expect("allocation length too large")
}

/// Fixed-size memory that can be registered with a
/// [`StagTable`](super::StagTable): allocated by the buffer or borrowed
/// from its owner (the module documentation's two origins). Share it with
/// `Arc`; see the module documentation for the access contract.
pub struct MemoryBuffer {
    ptr: NonNull<u8>,
    len: usize,
    origin: Origin,
}

/// Where a [`MemoryBuffer`]'s octets come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A zeroed allocation of `len` octets aligned to [`PAGE_ALIGN`] that the
    /// buffer owns and frees on drop (none for `len` 0).
    Allocated,
    /// Memory owned elsewhere, valid until the buffer is dropped
    /// ([`MemoryBuffer::from_raw_parts`]); never freed by the buffer.
    Foreign,
}

// SAFETY: `MemoryBuffer` has no thread-affine state. An allocated buffer
// uniquely owns its allocation, which lives until `drop` (which needs
// ownership); a foreign buffer's memory is valid, from any thread, until
// `drop` by the contract of `from_raw_parts`. The octets are only reached
// through raw-pointer copies bounded by `len`. Racing accesses to the same
// octets are the consumer's contract (module documentation), not a
// memory-safety hazard of the type.
unsafe impl Send for MemoryBuffer {}
// SAFETY: as above: `&MemoryBuffer` only gives raw-pointer copies, never
// references into the octets, so sharing it between threads creates no
// aliasing references.
unsafe impl Sync for MemoryBuffer {}

impl MemoryBuffer {
    /// A buffer of `len` zeroed octets starting on a page of its own
    /// ([`PAGE_ALIGN`]). Aborts like `Vec` when the allocation fails;
    /// panics if `len` exceeds `isize::MAX` rounded down to the alignment.
    pub fn new(len: usize) -> Self {
        let origin = Origin::Allocated;
        if len == 0 {
            return Self {
                ptr: NonNull::dangling(),
                len,
                origin,
            };
        }
        let ptr = alloc_page_aligned(len);
        Self { ptr, len, origin }
    }

    /// A buffer over `len` octets at `ptr` that someone else owns (the
    /// foreign origin of the module documentation): `ptr` may have any
    /// alignment, `len` may be 0 (then `ptr` may be anything, null
    /// included), the octets are used as they are (not zeroed), and
    /// dropping the buffer does not free them.
    ///
    /// # Safety
    ///
    /// Unless `ptr` and `len` fail [`check_raw_parts`](Self::check_raw_parts)
    /// (then this panics and nothing else happens), from the call until this
    /// buffer is dropped — when it is shared with `Arc`, until the last
    /// clone of that `Arc` is, for instance the one a
    /// [`StagTable`](super::StagTable) registration holds until its
    /// deregistration's grace period ends:
    ///
    /// - the `len` octets at `ptr` must be valid for reads and writes, from
    ///   any thread, and must not be freed, unmapped or remapped (a
    ///   read-only mapping does not qualify, even for a region registered
    ///   without write access: [`write_at`](Self::write_at) is safe) —
    ///   unless the process has a signal handler that resumes
    ///   [`guarded_copy`]'s faults (uwarp's), through which every access
    ///   to a foreign buffer goes: then memory that stops being valid
    ///   makes the access fail with [`MemError::Fault`], nothing else;
    /// - their owner keeps the access contract of the module
    ///   documentation: it reaches them through raw pointers only, never
    ///   through a `&[u8]` or `&mut [u8]` that another access may overlap
    ///   (placement writes them at any time the region allows it).
    ///
    /// # Panics
    ///
    /// If `ptr` and `len` fail [`check_raw_parts`](Self::check_raw_parts):
    /// they are no memory range at all.
    pub unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Self {
        if let Err(err) = Self::check_raw_parts(ptr, len) {
            panic!("MemoryBuffer::from_raw_parts: {err}");
        }
        // Only a zero length may come with a null pointer: it is never
        // read or written, but copies of zero octets still need a
        // non-null one.
        let ptr = NonNull::new(ptr).unwrap_or(NonNull::dangling());
        Self {
            ptr,
            len,
            origin: Origin::Foreign,
        }
    }

    /// Checks that `len` octets at `ptr` could be memory, as
    /// [`from_raw_parts`](Self::from_raw_parts) needs: any pointer for a
    /// length of 0; otherwise a non-null one, with `len` at most
    /// `isize::MAX` (the largest allocation) and the range not wrapping
    /// past the end of the address space. Fails with
    /// [`MemError::InvalidRange`]. It cannot tell whether the memory is
    /// valid: that is the caller's promise.
    pub fn check_raw_parts(ptr: *const u8, len: usize) -> Result<(), MemError> {
        let addr = ptr.addr();
        let fits = len == 0
            || (!ptr.is_null() && isize::try_from(len).is_ok() && addr.checked_add(len).is_some());
        if fits {
            Ok(())
        } else {
            Err(MemError::InvalidRange { addr, len })
        }
    }

    /// Whether the octets belong to someone else
    /// ([`from_raw_parts`](Self::from_raw_parts)) rather than to the
    /// buffer ([`new`](Self::new)).
    pub fn is_foreign(&self) -> bool {
        self.origin == Origin::Foreign
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
    /// [`RegionSpec::whole`](super::RegionSpec::whole). An empty buffer
    /// made from a null pointer reports a dangling, non-null address.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr().addr() as u64
    }

    /// The address of the octet at `offset`, which the caller checked is
    /// at most the buffer's length: for a lent range's system calls
    /// ([`LentRange::as_ptr`](super::LentRange::as_ptr)). Computed with
    /// `wrapping_add`, so no reference or in-bounds claim is made.
    pub(crate) fn ptr_at(&self, offset: usize) -> *const u8 {
        debug_assert!(offset <= self.len);
        self.ptr.as_ptr().cast_const().wrapping_add(offset)
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
        // inside the buffer's memory, live while `self` is (allocated, or
        // foreign by the contract of `from_raw_parts`, or else faulting
        // into `copy`'s guard); `out` is a distinct `&mut` the caller
        // owns, and neither safe code nor a foreign memory's owner (its
        // contract) holds a slice of this buffer, so the ranges do not
        // overlap. No reference to the buffer's octets is made.
        unsafe {
            self.copy(
                out.as_mut_ptr(),
                self.ptr.as_ptr().add(offset),
                offset,
                out.len(),
            )
        }
    }

    /// Copies `data` into the buffer starting at `offset`.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<(), MemError> {
        self.check(offset, data.len())?;
        // SAFETY: `offset + data.len() <= self.len`, so the destination is
        // inside the buffer's live memory (as in `read_at`); `data` cannot
        // alias it (safe code has no slice of this buffer, and a foreign
        // memory's owner makes none). No reference to the octets is made.
        unsafe {
            self.copy(
                self.ptr.as_ptr().add(offset),
                data.as_ptr(),
                offset,
                data.len(),
            )
        }
    }

    /// Copies `len` octets between the buffer (at `offset`) and memory of
    /// the caller's: plainly for an allocated buffer, which cannot go
    /// away while `self` lives; through [`guarded_copy`] for a foreign
    /// one, which its owner may unmap against the contract of
    /// [`from_raw_parts`](Self::from_raw_parts) (a program that frees
    /// registered memory before deregistering it): where a signal handler
    /// resumes such a copy, the fault becomes [`MemError::Fault`].
    ///
    /// # Safety
    ///
    /// `dst` and `src` are the two ranges of `read_at` or `write_at`, one
    /// of them `len` octets of this buffer at `offset`.
    unsafe fn copy(
        &self,
        dst: *mut u8,
        src: *const u8,
        offset: usize,
        len: usize,
    ) -> Result<(), MemError> {
        match self.origin {
            Origin::Allocated => {
                // SAFETY: the caller's ranges, valid and distinct.
                unsafe { ptr::copy_nonoverlapping(src, dst, len) };
                Ok(())
            }
            // SAFETY: the caller's ranges, distinct, and valid or (the
            // foreign memory gone) faulting into the guard.
            Origin::Foreign => {
                unsafe { guarded_copy(dst, src, len) }.map_err(|_| MemError::Fault { offset, len })
            }
        }
    }

    /// Sets every octet to `byte`.
    pub fn fill(&self, byte: u8) {
        // SAFETY: exactly the `self.len` octets of the buffer's live memory
        // (as in `read_at`) are written, through the raw pointer.
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
        // Foreign memory goes back to its owner untouched.
        if self.origin == Origin::Foreign || self.len == 0 {
            return;
        }
        // SAFETY: an allocated buffer's non-empty `ptr` came from
        // `alloc_page_aligned(self.len)` and is freed exactly once, here,
        // when the last owner goes away.
        unsafe { dealloc_page_aligned(self.ptr, self.len) }
    }
}

impl fmt::Debug for MemoryBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBuffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("origin", &self.origin)
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
        assert_eq!(buf.addr() % PAGE_ALIGN as u64, 0);
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
    fn borrows_unaligned_foreign_memory_and_leaves_it_to_its_owner() {
        // Aligned, so that octet 3 is not: an allocation of octets may
        // start at an odd address (Miri's do).
        #[repr(align(8))]
        struct Aligned([u8; 32]);
        let mut aligned = Aligned([0xEE; 32]);
        let owner = &mut aligned.0;
        let base = owner.as_mut_ptr();
        // SAFETY: octets 3..19 of `owner` live past the buffer, which is
        // dropped before `owner` is touched again, and are reached only
        // through `base` meanwhile.
        let buf = unsafe { MemoryBuffer::from_raw_parts(base.wrapping_add(3), 16) };
        assert!(buf.is_foreign() && !MemoryBuffer::new(1).is_foreign());
        assert_eq!(buf.len(), 16);
        assert_eq!(buf.addr(), base as u64 + 3);
        assert_ne!(buf.addr() % 2, 0, "odd, so unaligned");
        let mut out = [0u8; 16];
        buf.read_at(0, &mut out).unwrap();
        assert_eq!(out, [0xEE; 16], "not zeroed");
        buf.write_at(0, &[1, 2]).unwrap();
        buf.write_at(14, &[3, 4]).unwrap();
        assert!(buf.write_at(15, &[0, 0]).is_err());
        drop(buf);
        // Not freed: the owner's memory is still there, written in place.
        assert_eq!(&owner[..6], &[0xEE, 0xEE, 0xEE, 1, 2, 0xEE]);
        assert_eq!(&owner[16..20], &[0xEE, 3, 4, 0xEE]);
        assert!(owner[20..].iter().all(|&b| b == 0xEE));
    }

    #[test]
    fn foreign_memory_may_be_empty_at_any_address() {
        let mut owner = [7u8; 4];
        for ptr in [core::ptr::null_mut(), owner.as_mut_ptr().wrapping_add(1)] {
            // SAFETY: zero octets are valid at any address.
            let buf = unsafe { MemoryBuffer::from_raw_parts(ptr, 0) };
            assert!(buf.is_empty() && buf.is_foreign());
            assert_ne!(buf.addr(), 0, "never a null pointer, even from one");
            assert!(buf.read_at(0, &mut []).is_ok());
            assert!(buf.write_at(0, &[1]).is_err());
            buf.fill(1);
        }
        assert_eq!(owner, [7; 4]);
    }

    #[test]
    fn raw_parts_are_checked() {
        let null = core::ptr::null::<u8>();
        let at = |addr: usize| null.with_addr(addr);
        let invalid = |addr, len| Err(MemError::InvalidRange { addr, len });
        assert_eq!(MemoryBuffer::check_raw_parts(null, 0), Ok(()));
        assert_eq!(MemoryBuffer::check_raw_parts(at(usize::MAX), 0), Ok(()));
        assert_eq!(MemoryBuffer::check_raw_parts(at(0x1003), 16), Ok(()));
        assert_eq!(MemoryBuffer::check_raw_parts(null, 1), invalid(0, 1));
        // The range may end at the last address, not wrap past it.
        let top = usize::MAX - 15;
        assert_eq!(MemoryBuffer::check_raw_parts(at(top), 15), Ok(()));
        assert_eq!(MemoryBuffer::check_raw_parts(at(top), 16), invalid(top, 16));
        assert_eq!(
            MemoryBuffer::check_raw_parts(at(1), usize::MAX),
            invalid(1, usize::MAX)
        );
        // No allocation is longer than isize::MAX.
        let long = isize::MAX as usize + 1;
        assert_eq!(
            MemoryBuffer::check_raw_parts(at(64), long),
            invalid(64, long)
        );
        assert_eq!(
            MemoryBuffer::check_raw_parts(at(64), long - 1),
            Ok(()),
            "only the length is checked, not whether the memory exists"
        );
    }

    #[test]
    #[should_panic(expected = "no memory range")]
    fn a_null_pointer_with_a_length_panics() {
        // SAFETY: `check_raw_parts` refuses a null pointer with a length,
        // so the call panics, which its contract allows.
        let _ = unsafe { MemoryBuffer::from_raw_parts(core::ptr::null_mut(), 8) };
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<MemoryBuffer>();
    }
}
