//! The memory a connection's frames may carry their TCP payload from by
//! reference, as external-buffer regions (`uwarp_dataplane::extbuf`): its
//! send queue's ring, and the registered memory of the records that
//! zero-copy transmit left there (RFC 5040 section 5's Tagged and
//! Untagged sources, sent without a copy where the device reads external
//! buffers).

use std::sync::Arc;

use uwarp_dataplane::extbuf::ExternalRegion;
use uwarp_stack::mem::MemoryBuffer;
use uwarp_stack::tcp::Connection;

/// One connection's send-side memory, as regions frames can point into.
#[derive(Debug)]
pub struct FrameMemory {
    /// The send queue's ring; `None` once the connection gave it back in
    /// TIME-WAIT ([`Connection::release_memory`]).
    send_ring: Option<ExternalRegion>,
    /// The registered buffer the last referenced run lay in, and its
    /// region: runs of one buffer follow each other, so one region serves
    /// a whole transfer for one allocation.
    registered: Option<(Arc<MemoryBuffer>, ExternalRegion)>,
}

impl FrameMemory {
    /// The memory of `conn`'s send queue.
    pub fn new(conn: &Connection) -> Self {
        let memory = Arc::clone(conn.send_memory());
        let (base, len) = (memory.as_ptr(), memory.len());
        // SAFETY: the Arc keeps the allocation, which never moves; the
        // send queue rewrites only acknowledged octets, which a receiver
        // discards by sequence number (see `SendMemory`).
        let send_ring = unsafe { ExternalRegion::new(memory, base, len) };
        FrameMemory {
            send_ring: Some(send_ring),
            registered: None,
        }
    }

    /// The send queue's ring, unless it was given back.
    pub fn send_ring(&self) -> Option<&ExternalRegion> {
        self.send_ring.as_ref()
    }

    /// Forgets the send queue's ring (the connection gave it back).
    /// Frames still pointing into it keep it alive.
    pub fn release_send_ring(&mut self) {
        self.send_ring = None;
    }

    /// The region over all of `buffer`, registered memory a queued record
    /// holds a run of.
    pub fn registered(&mut self, buffer: &Arc<MemoryBuffer>) -> &ExternalRegion {
        if matches!(&self.registered, Some((held, _)) if !Arc::ptr_eq(held, buffer)) {
            self.registered = None;
        }
        let (_, region) = self.registered.get_or_insert_with(|| {
            // SAFETY (both blocks): the Arc keeps the allocation, which
            // never moves, and the region only hands its address to
            // devices, which read it the way a NIC reads host memory by
            // DMA, while the application may write it: a run is only
            // referenced while its Send or Write is not complete, during
            // which verbs forbid the application to touch it, and after
            // completion (TCP acknowledged it) a frame still in flight is
            // a duplicate the receiver discards by sequence number.
            let base = unsafe { buffer.as_ptr() }.cast_const();
            let region = unsafe { ExternalRegion::new(Arc::clone(buffer), base, buffer.len()) };
            (Arc::clone(buffer), region)
        });
        region
    }

    /// Lets go of the registered buffer once `conn` holds no run by
    /// reference, so that the connection keeps no application memory
    /// alive while it sends none of it.
    pub fn forget_registered_unless_sending(&mut self, conn: &Connection) {
        if self.registered.is_some() && !conn.sends_by_reference() {
            self.registered = None;
        }
    }
}
