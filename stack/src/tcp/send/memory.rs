//! The memory of a connection's send queue, shared with transmit paths
//! that send segments from it in place instead of copying them (DPDK's
//! external-buffer mbufs): the zero-copy half of RFC 9293 section 3.8's
//! retransmission queue.
//!
//! # The access contract
//!
//! The octets are raw memory, as [`MemoryBuffer`](crate::mem::MemoryBuffer)'s
//! are. [`SendMemory`] itself never makes a reference into them: it gives
//! out its address ([`as_ptr`](SendMemory::as_ptr),
//! [`as_mut_ptr`](SendMemory::as_mut_ptr)) and copies octets in
//! ([`write_at`](SendMemory::write_at)). The send queue, the memory's
//! only writer, makes the references: shared slices of the ring for the
//! payloads of the segments it cuts, which live while the queue is
//! borrowed shared, and exclusive slices of exactly the octets a record
//! reserves, which live while it is borrowed exclusively (an FPDU is
//! framed straight into them). It writes only octets that were never
//! queued or that the peer has acknowledged, and never while a shared
//! slice of its own lives (writing takes `&mut` of the queue).
//!
//! A transmit path holds a clone of the [`Arc`] for as long as any frame
//! it built may still point into the memory, so the allocation outlives
//! the connection if it must, and it reads only through raw pointers, like
//! a device doing DMA. Reads alone never conflict. The one write that may
//! meet such a read is the queue's overwriting of acknowledged octets that
//! an old frame still points at: as for DMA into a [`MemoryBuffer`], that
//! is a data race in Rust's memory model, which on the hardware uwarp
//! targets gives a frame torn octets of data already acknowledged, and the
//! receiving TCP discards such a frame by sequence number without reading
//! its payload.
//!
//! [`MemoryBuffer`]: crate::mem::MemoryBuffer

use core::ptr;
use std::sync::Arc;

use crate::tcp::ring_block::RingBlock;

/// A fixed-size allocation of initialised octets whose address never
/// changes, recycled between connections (`ring_block`). See the module
/// documentation for the access contract: the octets are reached only
/// through raw pointers and through slices the send queue, their single
/// writer, makes, never through the block's own slices.
#[derive(Debug)]
pub struct SendMemory {
    block: RingBlock,
}

impl SendMemory {
    /// `len` initialised octets (at least one), shared from the start: a
    /// ring block (`ring_block`), on pages of its own (so that a device
    /// can map them for DMA) unless shorter than a page.
    pub(crate) fn new(len: usize) -> Arc<SendMemory> {
        Arc::new(SendMemory {
            block: RingBlock::new(len),
        })
    }

    /// The address of the first octet; stable for the memory's life. Read
    /// through it only under the module documentation's contract.
    pub fn as_ptr(&self) -> *const u8 {
        self.block.as_ptr()
    }

    /// The address of the first octet, for the queue that writes the
    /// memory: it makes the slices of its reservations from it.
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.block.as_ptr()
    }

    /// Octets in the memory.
    pub fn len(&self) -> usize {
        self.block.len()
    }

    /// Never true: the memory has at least one octet.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// All the octets, for the reads of the queue that writes them.
    ///
    /// # Safety
    /// The caller is the queue that owns the memory, the only writer, and
    /// writes no octet while the slice lives.
    pub(crate) unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe the live allocation; no write happens
        // while the slice lives (the contract), and the other holders only
        // read.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) }
    }

    /// Copies `data` into the memory starting at `offset`.
    ///
    /// # Safety
    /// The caller is the queue that owns the memory, the only writer; no
    /// slice of the octets lives (one from [`bytes`](Self::bytes) or a
    /// reservation's), and the octets written were never queued or are
    /// acknowledged (see the module documentation).
    ///
    /// # Panics
    /// If the octets would run past the memory's end.
    pub(crate) unsafe fn write_at(&self, offset: usize, data: &[u8]) {
        assert!(
            offset <= self.len() && data.len() <= self.len() - offset,
            "a write inside the send memory"
        );
        // SAFETY: the destination lies inside the live allocation (checked
        // above); `data` cannot overlap it, since no slice of the octets
        // lives (the contract), and no reference to them is made.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.as_mut_ptr().add(offset), data.len())
        }
    }
}
