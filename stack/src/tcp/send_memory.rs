//! The memory of a connection's send queue, shared with transmit paths
//! that send segments from it in place instead of copying them (DPDK's
//! external-buffer mbufs): the zero-copy half of RFC 9293 section 3.8's
//! retransmission queue.
//!
//! The queue is the only writer. A transmit path holds a clone of the
//! [`Arc`] for as long as any frame it built may still point into the
//! memory, so the allocation outlives the connection if it must, and it
//! reads only through raw pointers, like a device doing DMA. The queue
//! writes only octets that were never queued or that the peer has
//! acknowledged; a frame still pointing at those is an old copy of
//! acknowledged data, which the receiving TCP discards by sequence number
//! without reading its payload.

use std::sync::Arc;

/// A fixed-size, zero-initialised allocation whose address never changes.
#[derive(Debug)]
pub struct SendMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: SendMemory owns a plain heap allocation of octets. Writes go
// through `SendQueue`, which is the single writer; other holders read
// through raw pointers only (see the module documentation).
unsafe impl Send for SendMemory {}
// SAFETY: as above: `&SendMemory` gives out only the address and length.
unsafe impl Sync for SendMemory {}

impl SendMemory {
    /// `len` zeroed octets (at least one), shared from the start.
    pub(crate) fn new(len: usize) -> Arc<SendMemory> {
        let bytes = vec![0u8; len.max(1)].into_boxed_slice();
        let len = bytes.len();
        Arc::new(SendMemory {
            ptr: Box::into_raw(bytes).cast::<u8>(),
            len,
        })
    }

    /// The address of the first octet; stable for the memory's life.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Octets in the memory.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: the memory has at least one octet.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The octets, for the queue's own reads.
    ///
    /// # Safety
    /// The caller is the queue that owns the writing side, and does not
    /// write while the slice lives.
    pub(crate) unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe the live allocation; see the contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The octets, writable.
    ///
    /// # Safety
    /// Only the queue that owns the memory may call this, and never while
    /// a slice from [`bytes`](Self::bytes) lives; it writes only octets no
    /// unacknowledged segment holds.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: ptr/len describe the live allocation; the caller is the
        // single writer (see the contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for SendMemory {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from Box::into_raw of a boxed slice of this
        // length, and the last holder drops it once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}
