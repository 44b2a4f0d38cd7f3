//! [`Mbuf`]: an owned DPDK packet buffer, possibly a chain of segments.
//!
//! An `Mbuf` is returned to its pool when dropped, unless it was handed to
//! a device by a transmit burst (which then owns it) or turned back into a
//! raw pointer. Its bytes are reachable as slices; the byte ranges only
//! grow or shrink through `append`/`prepend`/`adj`/`trim`, which keep
//! DPDK's lengths (`data_len` per segment, `pkt_len` on the head) right.
//!
//! A segment is writable through an `Mbuf` only when nothing else can see
//! its bytes: a direct segment (data in the mbuf's own buffer) with a
//! reference count of 1. External-buffer segments
//! ([`Mbuf::from_external`]) are read-only.

use std::marker::PhantomData;
use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

use crate::error::{Error, Result};
use crate::mempool::Mempool;

/// The transmit flags that ask the device for a frame's IPv4 header and
/// TCP checksums.
const TX_CHECKSUM_FLAGS: u64 = dpdk_sys::RTE_MBUF_F_TX_IPV4
    | dpdk_sys::RTE_MBUF_F_TX_IP_CKSUM
    | dpdk_sys::RTE_MBUF_F_TX_TCP_CKSUM;

/// The transmit flags that ask the device for a frame's TCP checksum only.
const TX_TCP_CHECKSUM_FLAGS: u64 = dpdk_sys::RTE_MBUF_F_TX_IPV4 | dpdk_sys::RTE_MBUF_F_TX_TCP_CKSUM;

/// An owned mbuf (the head of a chain of one or more segments).
///
/// The layout is that of a `*mut rte_mbuf`, so a `[Mbuf]` can be passed to
/// DPDK's burst functions as an array of mbuf pointers.
#[repr(transparent)]
#[derive(Debug)]
pub struct Mbuf(NonNull<rte_mbuf>);

// SAFETY: an Mbuf is the only handle to its segments; DPDK allows freeing
// an mbuf on any thread (non-EAL threads bypass the lcore cache).
unsafe impl Send for Mbuf {}
// SAFETY: &Mbuf only reads the segments; nothing mutates them without &mut.
unsafe impl Sync for Mbuf {}

impl Mbuf {
    /// Allocates an empty mbuf (length 0, default headroom) from `pool`.
    pub fn alloc(pool: &Mempool) -> Result<Mbuf> {
        // SAFETY: pool is a live pktmbuf pool.
        let raw = unsafe { dpdk_sys::shim_rte_pktmbuf_alloc(pool.as_ptr()) };
        NonNull::new(raw).map(Mbuf).ok_or(Error::NoMbufs)
    }

    /// Allocates `count` empty mbufs from `pool` and appends them to `out`,
    /// all or none.
    pub fn alloc_bulk(pool: &Mempool, count: usize, out: &mut Vec<Mbuf>) -> Result<()> {
        let n = u32::try_from(count)
            .map_err(|_| Error::InvalidArgument(format!("bulk of {count} mbufs")))?;
        out.reserve(count);
        let len = out.len();
        // SAFETY: the spare capacity holds `count` pointer-sized slots, and
        // Mbuf has the layout of a pointer; on success DPDK wrote `count`
        // non-NULL mbufs there, on failure nothing is taken from the pool.
        unsafe {
            let dst = out.as_mut_ptr().add(len).cast::<*mut rte_mbuf>();
            let ret = dpdk_sys::shim_rte_pktmbuf_alloc_bulk(pool.as_ptr(), dst, n);
            if ret != 0 {
                return Err(Error::NoMbufs);
            }
            out.set_len(len + count);
        }
        Ok(())
    }

    /// Allocates one mbuf holding a copy of `data`, which must fit in one
    /// segment.
    pub fn from_slice(pool: &Mempool, data: &[u8]) -> Result<Mbuf> {
        let mut m = Mbuf::alloc(pool)?;
        m.extend_from_slice(data)?;
        Ok(m)
    }

    /// A copy of the whole packet in one segment from `pool`, with the
    /// same transmit offload requests; fails when no mbuf is free or the
    /// packet does not fit one.
    pub fn gathered(&self, pool: &Mempool) -> Result<Mbuf> {
        let len = u16::try_from(self.pkt_len())
            .map_err(|_| Error::InvalidArgument(format!("a packet of {} bytes", self.pkt_len())))?;
        let mut copy = Mbuf::alloc(pool)?;
        let mut out = &mut copy.append(len)?[..];
        for segment in self.segments() {
            let (here, rest) = out.split_at_mut(segment.len());
            here.copy_from_slice(segment);
            out = rest;
        }
        copy.copy_offloads_from(self);
        Ok(copy)
    }

    /// Takes ownership of a raw mbuf; `None` for NULL.
    ///
    /// # Safety
    /// `raw` must be a valid mbuf chain that nothing else will use or free.
    pub unsafe fn from_raw(raw: *mut rte_mbuf) -> Option<Mbuf> {
        NonNull::new(raw).map(Mbuf)
    }

    /// Gives up ownership: the caller must free the chain (or hand it to a
    /// device).
    pub fn into_raw(self) -> *mut rte_mbuf {
        let raw = self.0.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// The raw head mbuf; valid while `self` lives.
    pub fn as_ptr(&self) -> *mut rte_mbuf {
        self.0.as_ptr()
    }

    fn head(&self) -> &rte_mbuf {
        // SAFETY: self owns a valid mbuf.
        unsafe { self.0.as_ref() }
    }

    /// The packet's length: the bytes of all segments.
    pub fn pkt_len(&self) -> u32 {
        self.head().pkt_len
    }

    /// The bytes in the first segment.
    pub fn data_len(&self) -> u16 {
        self.head().data_len
    }

    /// The number of segments.
    pub fn nb_segs(&self) -> u16 {
        self.head().nb_segs
    }

    /// The port the mbuf was received on (as the driver set it).
    pub fn port(&self) -> u16 {
        self.head().port
    }

    /// The offload flags (`RTE_MBUF_F_*`).
    pub fn ol_flags(&self) -> u64 {
        self.head().ol_flags
    }

    /// Asks the CPU to bring the first `len` octets of the frame (at most
    /// its first segment's data) into its cache, so a frame read soon
    /// after does not wait for memory (on a memory link the peer's core
    /// wrote it), and the header of its second segment, if any, for
    /// [`Mbuf::prefetch_second`]. A hint only.
    pub fn prefetch(&self, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let head = self.head();
            prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                head,
                len.min(usize::from(head.data_len)),
            );
            // Not for a null address: a hint that never faults, but may
            // still cost a page walk.
            if !head.next.is_null() {
                // SAFETY: a hint that never faults; the next segment of
                // the chain self owns.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        head.next.cast::<i8>(),
                    )
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = len;
    }

    /// Like [`Mbuf::prefetch`], for the data of the second segment (a
    /// payload sent by reference); nothing for a frame in one segment.
    pub fn prefetch_second(&self, len: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a segment of the chain self owns, or null.
        if let Some(second) = unsafe { self.head().next.as_ref() } {
            prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                second,
                len.min(usize::from(second.data_len)),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = len;
    }

    /// Asks the CPU to bring this mbuf's header (the first cache line of
    /// `rte_mbuf`, where the data's address and lengths are) into its
    /// cache without reading it, so a [`Mbuf::prefetch`] of its data a
    /// few frames later does not wait for it. A hint only.
    pub fn prefetch_header(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint that never faults; the address is
        // this mbuf's own.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                self.as_ptr().cast::<i8>(),
            )
        };
    }

    /// Like [`Mbuf::prefetch`], for a frame about to be written here: the
    /// lines come in exclusive, so the writes need no further round trip.
    pub fn prefetch_for_write(&self, len: usize) {
        #[cfg(target_arch = "x86_64")]
        prefetch_lines::<{ std::arch::x86_64::_MM_HINT_ET0 }>(self.head(), len);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = len;
    }

    /// Asks the device to fill the IPv4 header checksum and the TCP
    /// checksum of the IPv4/TCP frame this mbuf holds, whose Ethernet and
    /// IPv4 headers are `l2_len` and `l3_len` octets long. The frame's IPv4
    /// checksum field must be 0 and its TCP checksum field the sum of the
    /// pseudo-header, as DPDK's offload contract says (`rte_mbuf_core.h`).
    /// Only for a queue whose [`TxQueue::offloads_tcp_checksums`] is true.
    ///
    /// [`TxQueue::offloads_tcp_checksums`]: crate::queue::TxQueue::offloads_tcp_checksums
    pub fn offload_tcp_checksums(&mut self, l2_len: u8, l3_len: u16) {
        self.request_offloads(TX_CHECKSUM_FLAGS, l2_len, l3_len);
    }

    /// Like [`offload_tcp_checksums`](Self::offload_tcp_checksums), for
    /// the TCP checksum alone (a device that fills no IPv4 header
    /// checksum, as virtio's): the frame's IPv4 checksum must be the right
    /// one, its TCP checksum field the pseudo-header's sum.
    pub fn offload_tcp_checksum(&mut self, l2_len: u8, l3_len: u16) {
        self.request_offloads(TX_TCP_CHECKSUM_FLAGS, l2_len, l3_len);
    }

    /// Sets the offload request `flags` and the header lengths they need.
    fn request_offloads(&mut self, flags: u64, l2_len: u8, l3_len: u16) {
        // SAFETY: self owns a valid mbuf; &mut self makes this the only view.
        let head = unsafe { self.0.as_mut() };
        head.ol_flags |= flags;
        // The `tx_offload` word packs l2_len in bits 0-6 and l3_len in
        // bits 7-15.
        head.__bindgen_anon_3.tx_offload =
            u64::from(l2_len & 0x7f) | (u64::from(l3_len & 0x1ff) << 7);
    }

    /// Gives this mbuf the transmit offload requests of `other` (a copy of
    /// a frame must ask the device for the same checksums).
    pub fn copy_offloads_from(&mut self, other: &Mbuf) {
        let source = other.head();
        // SAFETY: reading the whole `tx_offload` word of a valid mbuf.
        let word = unsafe { source.__bindgen_anon_3.tx_offload };
        // SAFETY: self owns a valid mbuf; &mut self makes this the only view.
        let head = unsafe { self.0.as_mut() };
        head.ol_flags =
            (head.ol_flags & !TX_CHECKSUM_FLAGS) | (source.ol_flags & TX_CHECKSUM_FLAGS);
        head.__bindgen_anon_3.tx_offload = word;
    }

    /// Whether all the packet's bytes are in the first segment.
    pub fn is_contiguous(&self) -> bool {
        self.nb_segs() == 1
    }

    /// Whether the first segment owns its data room alone: not an
    /// external or indirect segment, not shared with another mbuf.
    pub fn is_exclusive(&self) -> bool {
        // SAFETY: the head segment is valid and owned by self.
        unsafe { segment_writable(self.0.as_ptr()) }
    }

    /// The first segment's bytes.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the head segment is valid and owned by self.
        unsafe { segment_bytes(self.0.as_ptr()) }
    }

    /// The first segment's bytes, writable; `None` when the segment is
    /// read-only (an external buffer or a shared segment).
    pub fn data_mut(&mut self) -> Option<&mut [u8]> {
        let seg = self.0.as_ptr();
        // SAFETY: seg is owned by self; &mut self makes this the only view.
        unsafe {
            if !segment_writable(seg) {
                return None;
            }
            let len = usize::from((*seg).data_len);
            Some(std::slice::from_raw_parts_mut(
                dpdk_sys::shim_rte_pktmbuf_mtod(seg).cast::<u8>(),
                len,
            ))
        }
    }

    /// The segments' bytes, first to last.
    pub fn segments(&self) -> Segments<'_> {
        Segments {
            next: self.0.as_ptr(),
            _owner: PhantomData,
        }
    }

    /// A copy of the whole packet, all segments.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len() as usize);
        for seg in self.segments() {
            v.extend_from_slice(seg);
        }
        v
    }

    /// Free bytes before the data of the first segment.
    pub fn headroom(&self) -> u16 {
        // SAFETY: the head segment is valid.
        unsafe { dpdk_sys::shim_rte_pktmbuf_headroom(self.0.as_ptr()) }
    }

    /// Free bytes after the data of the last segment (where
    /// [`append`](Self::append) writes).
    pub fn tailroom(&self) -> u16 {
        // SAFETY: the last segment is valid.
        unsafe { dpdk_sys::shim_rte_pktmbuf_tailroom(self.last_segment()) }
    }

    fn last_segment(&self) -> *mut rte_mbuf {
        let mut seg = self.0.as_ptr();
        // SAFETY: the chain is valid and NULL-terminated.
        unsafe {
            while !(*seg).next.is_null() {
                seg = (*seg).next;
            }
        }
        seg
    }

    /// Grows the last segment by `len` bytes and returns them (their
    /// contents are whatever the buffer held).
    pub fn append(&mut self, len: u16) -> Result<&mut [u8]> {
        let last = self.last_segment();
        // SAFETY: last is owned by self; &mut self makes it exclusive.
        unsafe {
            if !segment_writable(last) {
                return Err(Error::Unsupported("append to a read-only segment".into()));
            }
            let p = dpdk_sys::shim_rte_pktmbuf_append(self.0.as_ptr(), len);
            if p.is_null() {
                return Err(Error::InvalidArgument(format!(
                    "append of {len} bytes with {} bytes of tailroom",
                    self.tailroom()
                )));
            }
            Ok(std::slice::from_raw_parts_mut(
                p.cast::<u8>(),
                usize::from(len),
            ))
        }
    }

    /// Appends a copy of `data` to the last segment.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<()> {
        let len = u16::try_from(data.len()).map_err(|_| {
            Error::InvalidArgument(format!("{} bytes do not fit a segment", data.len()))
        })?;
        self.append(len)?.copy_from_slice(data);
        Ok(())
    }

    /// Grows the first segment by `len` bytes at the front and returns
    /// them (their contents are whatever the buffer held).
    pub fn prepend(&mut self, len: u16) -> Result<&mut [u8]> {
        let head = self.0.as_ptr();
        // SAFETY: head is owned by self; &mut self makes it exclusive.
        unsafe {
            if !segment_writable(head) {
                return Err(Error::Unsupported("prepend to a read-only segment".into()));
            }
            let p = dpdk_sys::shim_rte_pktmbuf_prepend(head, len);
            if p.is_null() {
                return Err(Error::InvalidArgument(format!(
                    "prepend of {len} bytes with {} bytes of headroom",
                    self.headroom()
                )));
            }
            Ok(std::slice::from_raw_parts_mut(
                p.cast::<u8>(),
                usize::from(len),
            ))
        }
    }

    /// Removes `len` bytes from the front of the first segment.
    pub fn adj(&mut self, len: u16) -> Result<()> {
        // SAFETY: the head is owned by self.
        let p = unsafe { dpdk_sys::shim_rte_pktmbuf_adj(self.0.as_ptr(), len) };
        if p.is_null() {
            return Err(Error::InvalidArgument(format!(
                "adj of {len} bytes from a first segment of {}",
                self.data_len()
            )));
        }
        Ok(())
    }

    /// Removes `len` bytes from the end of the last segment.
    pub fn trim(&mut self, len: u16) -> Result<()> {
        // SAFETY: the chain is owned by self.
        let ret = unsafe { dpdk_sys::shim_rte_pktmbuf_trim(self.0.as_ptr(), len) };
        if ret != 0 {
            return Err(Error::InvalidArgument(format!(
                "trim of {len} bytes from a last segment of {}",
                // SAFETY: last_segment is valid.
                unsafe { (*self.last_segment()).data_len }
            )));
        }
        Ok(())
    }

    /// Appends the chain `tail` after the last segment. On failure (the
    /// chain would exceed DPDK's segment limit) `tail` is given back.
    pub fn chain(&mut self, tail: Mbuf) -> std::result::Result<(), (Error, Mbuf)> {
        // SAFETY: both chains are owned; on success tail's segments become
        // part of self's chain, so tail must not be freed separately.
        let ret = unsafe { dpdk_sys::shim_rte_pktmbuf_chain(self.0.as_ptr(), tail.as_ptr()) };
        if ret != 0 {
            return Err((Error::from_neg("rte_pktmbuf_chain", ret), tail));
        }
        std::mem::forget(tail);
        Ok(())
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: self owns the chain; every segment goes back to its pool
        // (external buffers call their free callback).
        unsafe { dpdk_sys::shim_rte_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// Iterator over the bytes of each segment of an [`Mbuf`].
#[derive(Debug)]
pub struct Segments<'a> {
    next: *mut rte_mbuf,
    _owner: PhantomData<&'a Mbuf>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.next.is_null() {
            return None;
        }
        let seg = self.next;
        // SAFETY: seg belongs to the chain borrowed for 'a.
        unsafe {
            self.next = (*seg).next;
            Some(segment_bytes(seg))
        }
    }
}

/// The data of one segment.
///
/// # Safety
/// `seg` must be a valid segment that stays alive and unmodified for `'a`.
unsafe fn segment_bytes<'a>(seg: *mut rte_mbuf) -> &'a [u8] {
    // SAFETY: the caller guarantees seg; mtod points at data_len bytes.
    unsafe {
        std::slice::from_raw_parts(
            dpdk_sys::shim_rte_pktmbuf_mtod(seg).cast::<u8>(),
            usize::from((*seg).data_len),
        )
    }
}

/// Prefetches the first `len` octets of `segment`'s data (at most to the
/// end of its buffer) with `HINT`.
#[cfg(target_arch = "x86_64")]
fn prefetch_lines<const HINT: i32>(segment: &rte_mbuf, len: usize) {
    let start = segment
        .buf_addr
        .cast::<i8>()
        .wrapping_add(usize::from(segment.data_off));
    let len = len.min(usize::from(
        segment.buf_len.saturating_sub(segment.data_off),
    ));
    for offset in (0..len).step_by(64) {
        // SAFETY: prefetching is a hint that never faults, whatever the
        // address; these are inside the segment's buffer anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(start.wrapping_add(offset)) };
    }
}

/// Whether a segment's bytes are visible through this segment only.
///
/// # Safety
/// `seg` must be a valid segment.
unsafe fn segment_writable(seg: *mut rte_mbuf) -> bool {
    // SAFETY: the caller guarantees seg.
    unsafe {
        (*seg).ol_flags & (dpdk_sys::RTE_MBUF_F_EXTERNAL | dpdk_sys::RTE_MBUF_F_INDIRECT) == 0
            && dpdk_sys::shim_rte_mbuf_refcnt_read(seg) == 1
    }
}
