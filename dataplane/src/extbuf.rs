//! External-buffer mbufs: an [`Mbuf`] whose bytes live in caller memory, for
//! transmitting without a copy (DPDK's `rte_pktmbuf_attach_extbuf`).
//!
//! An [`ExternalRegion`] boxes the owner of some memory (a `Vec<u8>`, an
//! `Arc` of a send queue's ring) next to the `rte_mbuf_ext_shared_info`
//! DPDK needs, whose reference count counts the region handle and every
//! mbuf attached to a slice of it. Whoever drops the last reference frees
//! the box, and with it the owner: DPDK's free callback on whichever
//! thread frees the last mbuf (after the device sent it, or when it is
//! dropped unsent), or the handle's `Drop`. The bytes therefore stay alive
//! and unmoved for as long as any device or mbuf can read them.
//! [`Mbuf::from_external`] is the one-mbuf case, with no `unsafe` on the
//! caller's side.
//!
//! For a PCI device the holder also keeps the region's DMA mapping
//! ([`ExternalRegion::map_for_dma`], [`crate::dma`]), made by the first
//! frame that needs it and dropped before the owner, when the last frame
//! is freed: the memory stays mapped for as long as a device may read it.

use std::ffi::c_void;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;

use crate::dma::{self, DmaMapping};
use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;

/// References a region may hand out at once, below the 16-bit count's
/// limit (the handle holds one more).
const MAX_ATTACHED: u16 = u16::MAX - 1;

/// What every holder starts with, whatever its owner: the DPDK record of
/// the buffer, and its DMA mapping once a frame needed one. `shinfo`
/// comes first, so a pointer to the head is a pointer to it.
#[repr(C)]
struct HolderHead {
    shinfo: dpdk_sys::rte_mbuf_ext_shared_info,
    /// Set by the first [`ExternalRegion::map_for_dma`]: the mapping, or
    /// `None` when it was refused.
    dma: OnceLock<Option<DmaMapping>>,
}

/// The buffer's owner, after the head, in one allocation whose address
/// does not change. The head comes first, so a pointer to the holder is a
/// pointer to it; it is also dropped first, so the memory is unmapped
/// before its owner frees it.
#[repr(C)]
struct ExtHolder<B> {
    head: HolderHead,
    owner: B,
}

/// DPDK's free callback: drops the holder, and with it the owner.
///
/// # Safety
/// `opaque` must be the `Box<ExtHolder<B>>` leaked by
/// [`ExternalRegion::new`], passed exactly once (when the shared info's
/// reference count reaches 0).
unsafe extern "C" fn free_holder<B>(_addr: *mut c_void, opaque: *mut c_void) {
    // SAFETY: see the function's contract. A panic in B's Drop cannot
    // unwind through this extern "C" function; Rust aborts instead.
    drop(unsafe { Box::from_raw(opaque.cast::<ExtHolder<B>>()) });
}

/// `owner` boxed with a shared info whose count (1) is the caller's, and
/// whose callback frees the box.
fn hold<B: Send + 'static>(owner: B) -> NonNull<ExtHolder<B>> {
    let holder = Box::into_raw(Box::new(ExtHolder {
        head: HolderHead {
            shinfo: dpdk_sys::rte_mbuf_ext_shared_info {
                free_cb: Some(free_holder::<B>),
                fcb_opaque: std::ptr::null_mut(),
                refcnt: 1,
            },
            dma: OnceLock::new(),
        },
        owner,
    }));
    // SAFETY: holder is a live, leaked box, exclusively ours.
    unsafe { (*holder).head.shinfo.fcb_opaque = holder.cast::<c_void>() };
    // SAFETY: Box::into_raw never gives null.
    unsafe { NonNull::new_unchecked(holder) }
}

/// Memory that mbufs can carry slices of without copying, alive until the
/// handle and every such mbuf are gone.
#[derive(Debug)]
pub struct ExternalRegion {
    head: NonNull<HolderHead>,
    base: *const u8,
    len: usize,
}

// SAFETY: the handle's only state is the holder, whose owner is Send, and
// its reference count, which is atomic (DPDK's builtins and ours).
unsafe impl Send for ExternalRegion {}
// SAFETY: `&ExternalRegion` only reads base/len, adds references
// atomically, and sets the DMA mapping through a `OnceLock`.
unsafe impl Sync for ExternalRegion {}

impl ExternalRegion {
    /// A region over the `len` bytes at `base`, kept alive by `owner`.
    ///
    /// # Safety
    /// The bytes must stay allocated and at the same address for as long
    /// as `owner` lives, and must not be written while a frame attached to
    /// them can still be read, except where the reader tolerates it (a
    /// send queue rewrites only acknowledged octets).
    pub unsafe fn new<B: Send + 'static>(owner: B, base: *const u8, len: usize) -> Self {
        ExternalRegion {
            head: hold(owner).cast(),
            base,
            len,
        }
    }

    /// A region over the bytes of `owner`, which it keeps.
    pub fn from_owner<B>(owner: B) -> Self
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        let holder = hold(owner);
        // The address is read once the owner sits in the holder, where it
        // stays: an owner that stores its bytes inline (an array) moved.
        // SAFETY: the holder is live, and its owner never moves again.
        let bytes = unsafe { holder.as_ref().owner.as_ref() };
        ExternalRegion {
            base: bytes.as_ptr(),
            len: bytes.len(),
            head: holder.cast(),
        }
    }

    /// The reference count DPDK and this handle share.
    fn refcnt(&self) -> &AtomicU16 {
        // SAFETY: the shared info lives as long as any reference, and this
        // handle holds one; DPDK updates the field with atomic builtins
        // only, which AtomicU16 matches.
        unsafe { AtomicU16::from_ptr(&raw mut (*self.shinfo()).refcnt) }
    }

    /// The DPDK record of the buffer, first in the holder.
    fn shinfo(&self) -> *mut dpdk_sys::rte_mbuf_ext_shared_info {
        self.head.as_ptr().cast()
    }

    /// Maps the region's memory for DMA by a PCI device ([`crate::dma`])
    /// unless a call did already; whether it is mapped. The first call
    /// decides: a region whose mapping was refused stays unmapped (its
    /// frames are copied), and a mapped one stays mapped until its last
    /// frame is freed.
    pub fn map_for_dma(&self) -> bool {
        // SAFETY: the head lives as long as any reference, and this handle
        // holds one; `OnceLock` makes the first caller's mapping the only
        // one, whichever thread calls.
        let dma = unsafe { &(*self.head.as_ptr()).dma };
        dma.get_or_init(|| dma::map(self.base, self.len).ok())
            .is_some()
    }

    /// `range` of the region cut where its addresses cross a page
    /// ([`dma::page_pieces`]), in order.
    pub fn page_pieces(&self, range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
        let start = range.start;
        dma::page_pieces(self.base as usize + start, range.len())
            .map(move |piece| piece.start + start..piece.end + start)
    }

    /// Where `bytes` begins in the region, when it lies inside it.
    pub fn offset_of(&self, bytes: &[u8]) -> Option<usize> {
        let (start, base) = (bytes.as_ptr() as usize, self.base as usize);
        let offset = start.checked_sub(base)?;
        (offset <= self.len && bytes.len() <= self.len - offset).then_some(offset)
    }

    /// Makes `m`, an empty exclusive mbuf fresh from a pool (whose data
    /// room may be small), carry `bytes`, a slice of the region of 1 to
    /// 65535 octets, as its single segment, read-only and not copied.
    ///
    /// The device reads the bytes at their virtual address: a device that
    /// copies in software, or a memory link, needs nothing more; a NIC
    /// needs the EAL in IOVA-as-VA mode ([`Eal::iova_is_va`]) and the
    /// memory DMA-mapped for it.
    pub fn attach(&self, m: Mbuf, bytes: &[u8]) -> Result<Mbuf> {
        let offset = self.offset_of(bytes).ok_or_else(|| {
            Error::InvalidArgument("the bytes lie outside the external region".into())
        })?;
        self.attach_range(m, offset..offset + bytes.len())
    }

    /// Like [`attach`](Self::attach), for the octets at `range` of the
    /// region, named by their place so that the caller makes no
    /// reference to them (memory that other threads may write, such as
    /// registered memory).
    pub fn attach_range(&self, m: Mbuf, range: Range<usize>) -> Result<Mbuf> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(
                "the bytes lie outside the external region".into(),
            ));
        }
        if !m.is_contiguous() || m.data_len() != 0 || !m.is_exclusive() {
            return Err(Error::InvalidArgument(
                "an external segment needs an empty exclusive mbuf".into(),
            ));
        }
        let len = u16::try_from(range.len())
            .ok()
            .filter(|&len| len > 0)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "external segment of {} bytes (1 to 65535)",
                    range.len()
                ))
            })?;
        // Only the handle's owner adds references, so the count cannot
        // pass the limit between this check and the increment.
        if self.refcnt().load(Ordering::Relaxed) > MAX_ATTACHED {
            return Err(Error::Unsupported(
                "an external region in more than 65534 mbufs at once".into(),
            ));
        }
        self.refcnt().fetch_add(1, Ordering::AcqRel);
        // Inside the region (checked above), so inside its allocation.
        let addr = self.base.wrapping_add(range.start);
        // SAFETY: m is an empty exclusive mbuf, exclusively ours (`Mbuf` owns
        // its chain);
        // the reference just added is the one it holds, given back by DPDK
        // when it frees the segment. The bytes are only read.
        unsafe {
            let raw = m.as_ptr();
            dpdk_sys::shim_rte_pktmbuf_attach_extbuf(
                raw,
                addr.cast_mut().cast::<c_void>(),
                addr as u64,
                len,
                self.shinfo(),
            );
            // attach_extbuf leaves data_len 0 at offset 0: cover the bytes.
            let p = dpdk_sys::shim_rte_pktmbuf_append(raw, len);
            debug_assert!(
                !p.is_null(),
                "the fresh external segment has room for itself"
            );
        }
        Ok(m)
    }
}

impl Drop for ExternalRegion {
    fn drop(&mut self) {
        if self.refcnt().fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: that was the last reference: no mbuf points into the
            // region, so the holder goes, through the callback DPDK would
            // have called.
            unsafe {
                let shinfo = self.shinfo();
                if let Some(free) = (*shinfo).free_cb {
                    free(self.base.cast_mut().cast(), (*shinfo).fcb_opaque);
                }
            }
        }
    }
}

impl Mbuf {
    /// An mbuf whose single segment is the bytes of `owner` (1 to 65535 of
    /// them, DPDK's segment limit), read-only, without copying.
    ///
    /// The mbuf header comes from `pool` (a pool with a small data room is
    /// enough). The device reads the bytes by DMA at their virtual address,
    /// so this needs the EAL in IOVA-as-VA mode ([`Eal::iova_is_va`]); with
    /// a real NIC the memory must also be DMA-mapped for it
    /// (`rte_extmem_register` + `rte_dev_dma_map`), which the caller of
    /// registered application memory arranges. Virtual devices copy in
    /// software and need nothing more.
    pub fn from_external<B>(eal: &Eal, pool: &Mempool, owner: B) -> Result<Mbuf>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        if !eal.iova_is_va() {
            return Err(Error::Unsupported(
                "external buffers need the EAL in IOVA-as-VA mode".into(),
            ));
        }
        let region = ExternalRegion::from_owner(owner);
        // The mbuf holds its own reference; the region's goes with it.
        region.attach_range(Mbuf::alloc(pool)?, 0..region.len)
    }
}
