//! The memory of a connection's two rings, its send queue and its
//! reassembly buffer, kept for the next connection when one ends.
//!
//! The rings are a connection's largest allocations (256 KiB each by
//! default), and from the global allocator each was costly: glibc maps a
//! block that large afresh (a system call, and a page fault as its
//! header is written) and unmaps it when it is freed, and once freeing
//! one has raised glibc's mapping threshold it takes them from its heap
//! instead and clears them, faulting in every page. Measured here, a
//! `Connection` cost 7 us to make in a process that had freed none, and
//! 116 us in one that had (Debian 12's glibc, 256 KiB rings).
//!
//! A new block is an anonymous mapping of its own (`mmap`): zero without
//! being written, page-aligned, each page faulted in only when the ring
//! first reaches it, whatever the allocator's state. A block whose
//! connection ended goes to a process-wide cache, by length, up to
//! [`CACHE_BYTES`]; the next ring of that length takes it as it is, with
//! no system call and its pages still mapped. Its octets are the last
//! connection's, which the rings never let out: the send queue reads only
//! octets it queued, the reassembly buffer only octets it stored. A block
//! the cache has no room for is unmapped.

use core::ptr::{self, NonNull};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::mem::PAGE_ALIGN;

/// The most octets the cache keeps: 256 blocks of the default 256 KiB.
const CACHE_BYTES: usize = 64 << 20;

/// Initialised octets (zero when new, a previous ring's when recycled),
/// page-aligned and returned to the cache when dropped. The length is
/// the ring's; the mapping covers whole pages. A block shorter than a
/// page (the one-octet reassembly ring a connection keeps in TIME-WAIT,
/// `Reassembly::free_ring`) comes from the global allocator instead, is
/// not page-aligned and is not cached: a mapping each would cost a
/// system call and a page of address space per closed connection.
#[derive(Debug)]
pub(crate) struct RingBlock {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a RingBlock uniquely owns its octets (the cache held them
// before, and no one else), and has no thread-affine state.
unsafe impl Send for RingBlock {}
// SAFETY: `&RingBlock` gives shared slices (reads) and the address.
// Its one owner that writes through the address from `&self`,
// SendMemory, does so under its single-writer contract (only the send
// queue writes, never while a slice it made of those octets lives; see
// `send::memory`), so sharing creates no conflicting references.
unsafe impl Sync for RingBlock {}

impl RingBlock {
    /// A block of `len` octets (at least one): from the cache when it has
    /// one of that length, else mapped, or from the allocator when
    /// shorter than a page.
    pub(crate) fn new(len: usize) -> Self {
        let len = len.max(1);
        let ptr = if is_mapped(len) {
            CACHE
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(len)
                .unwrap_or_else(|| map(len))
        } else {
            let layout = small_layout(len);
            // SAFETY: the layout's size is at least one.
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
                .unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
        };
        RingBlock { ptr, len }
    }

    /// The address of the first octet, for an owner that reads and
    /// writes through raw pointers and makes no slices of the block
    /// ([`SendMemory`](super::SendMemory)).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Octets in the block.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The octets.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live allocation of initialised
        // octets this block owns; `&self` rules out `as_mut_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The octets, to write.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the slice the
        // only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for RingBlock {
    fn drop(&mut self) {
        if !is_mapped(self.len) {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), small_layout(self.len)) };
            return;
        }
        let refused = CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .put(self.ptr, self.len);
        if let Some(ptr) = refused {
            // SAFETY: every mapped block comes from `map(len)` (through
            // the cache or not) with this `len`, and leaves this block
            // only here, once; nothing refers to its octets any more.
            unsafe { unmap(ptr, self.len) };
        }
    }
}

/// Whether a block of `len` octets is a mapping of its own (and cached).
fn is_mapped(len: usize) -> bool {
    len >= page_size()
}

/// The system's page size (4 KiB on x86-64; 16 or 64 KiB on some arm64
/// kernels): what a mapping takes at least.
fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads a system constant.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size)
            .ok()
            .filter(|&size| size >= PAGE_ALIGN)
            .unwrap_or(PAGE_ALIGN)
    })
}

/// The allocator's layout of a block shorter than a page.
fn small_layout(len: usize) -> std::alloc::Layout {
    std::alloc::Layout::array::<u8>(len).expect("a block shorter than a page")
}

/// The length of the mapping of a `len`-octet block: whole pages.
fn mapped_len(len: usize) -> usize {
    len.checked_next_multiple_of(page_size())
        .expect("ring length too large")
}

/// A new anonymous mapping for a `len`-octet block. Aborts like `Vec`
/// when the system has no memory for it.
fn map(len: usize) -> NonNull<u8> {
    let size = mapped_len(len);
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory; the result is checked.
    let addr = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    match NonNull::new(addr.cast::<u8>()) {
        Some(ptr) if addr != libc::MAP_FAILED => ptr,
        _ => std::alloc::handle_alloc_error(
            std::alloc::Layout::from_size_align(size, page_size()).expect("page layout"),
        ),
    }
}

/// Unmaps a block [`map`] made.
///
/// # Safety
/// `ptr` comes from `map(len)` with this `len`, is unmapped once, and no
/// reference into it lives.
unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the caller's contract. munmap of a whole mapping of ours
    // fails only on arguments it was not given.
    unsafe { libc::munmap(ptr.as_ptr().cast(), mapped_len(len)) };
}

/// The process's cache of ring blocks.
static CACHE: Mutex<Cache> = Mutex::new(Cache::new(CACHE_BYTES));

/// Free blocks by length, up to a number of octets.
#[derive(Debug)]
struct Cache {
    /// Free blocks, by their length.
    free: BTreeMap<usize, Vec<FreeBlock>>,
    held: usize,
    limit: usize,
}

/// A free block's address.
#[derive(Debug)]
struct FreeBlock(NonNull<u8>);

// SAFETY: a free block is owned by the cache alone; it moves to the
// thread that takes it.
unsafe impl Send for FreeBlock {}

impl Cache {
    const fn new(limit: usize) -> Self {
        Cache {
            free: BTreeMap::new(),
            held: 0,
            limit,
        }
    }

    /// A free block of `len` octets, if there is one.
    fn take(&mut self, len: usize) -> Option<NonNull<u8>> {
        let FreeBlock(ptr) = self.free.get_mut(&len)?.pop()?;
        self.held -= mapped_len(len);
        Some(ptr)
    }

    /// Keeps the block at `ptr` of `len` octets; gives it back when its
    /// mapping would take the cache past its limit.
    fn put(&mut self, ptr: NonNull<u8>, len: usize) -> Option<NonNull<u8>> {
        let mapped = mapped_len(len);
        if self.held + mapped > self.limit {
            return Some(ptr);
        }
        self.held += mapped;
        self.free.entry(len).or_default().push(FreeBlock(ptr));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_block_serves_the_next_one_of_its_length_as_it_was() {
        // A length no other test of the process uses.
        let len = 3 * page_size() + 17;
        let mut block = RingBlock::new(len);
        assert_eq!(block.len(), len);
        assert!(
            block.as_slice().iter().all(|&octet| octet == 0),
            "new is zero"
        );
        assert_eq!(block.as_ptr() as usize % 4096, 0, "page-aligned");
        block.as_mut_slice()[len - 1] = 7;
        let addr = block.as_ptr();
        drop(block);
        let again = RingBlock::new(len);
        assert_eq!(again.as_ptr(), addr, "recycled");
        assert_eq!(again.as_slice()[len - 1], 7, "as it was");
        let other = RingBlock::new(len);
        assert_ne!(other.as_ptr(), addr, "one owner at a time");
    }

    #[test]
    fn the_cache_keeps_blocks_up_to_its_limit_in_whole_pages() {
        let page = page_size();
        let mut cache = Cache::new(3 * page);
        let a = NonNull::<u8>::dangling();
        // Two pages each, mapped.
        assert_eq!(cache.put(a, page + 1), None);
        assert_eq!(cache.put(a, page + 1), Some(a), "over the limit");
        assert_eq!(cache.take(page), None, "no block of that length");
        assert_eq!(cache.take(page + 1), Some(a));
        assert_eq!(cache.take(page + 1), None);
        assert_eq!(cache.put(a, 3 * page), None, "room again");
    }

    #[test]
    fn a_block_shorter_than_a_page_is_the_allocators() {
        let mut small = RingBlock::new(1);
        assert_eq!(small.as_slice(), [0]);
        small.as_mut_slice()[0] = 9;
        assert_eq!(small.as_slice(), [9]);
        assert!(!is_mapped(small.len()), "not mapped, so never cached");
        assert!(is_mapped(page_size()));
    }
}
