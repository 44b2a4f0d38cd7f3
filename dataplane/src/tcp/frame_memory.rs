//! The memory a connection's frames may carry their TCP payload from by
//! reference, as external-buffer regions (`crate::extbuf`): its
//! send queue's ring, and the registered memory of the records that
//! zero-copy transmit left there (RFC 5040 section 5's Tagged and
//! Untagged sources, sent without a copy where the device reads external
//! buffers).

use std::sync::Arc;

use crate::extbuf::ExternalRegion;
use uwarp_stack::mem::MemoryBuffer;
use uwarp_stack::tcp::Connection;

/// One connection's send-side memory, as regions frames can point into.
#[derive(Debug)]
pub struct FrameMemory {
    /// The send queue's ring; `None` once the connection gave it back in
    /// TIME-WAIT ([`Connection::release_memory`]).
    send_ring: Option<ExternalRegion>,
    /// The registered buffers the latest referenced runs lay in, with
    /// their regions, the most recent last: a queue pair's Writes or
    /// Sends from one buffer and its Read Responses from another take
    /// turns segment by segment, and each keeps its region for a whole
    /// transfer (one allocation).
    registered: Vec<(Arc<MemoryBuffer>, ExternalRegion)>,
}

/// Registered buffers a flow keeps a region for at once: beyond it, the
/// least recently used goes.
const REGISTERED_REGIONS: usize = 4;

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
            registered: Vec::new(),
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
        let held = self
            .registered
            .iter()
            .position(|(held, _)| Arc::ptr_eq(held, buffer));
        let entry = match held {
            Some(at) => self.registered.remove(at),
            None => {
                if self.registered.len() == REGISTERED_REGIONS {
                    self.registered.remove(0);
                }
                // SAFETY (both blocks): the Arc keeps the allocation, which
                // never moves, and the region only hands its address to
                // devices, which read it the way a NIC reads host memory
                // by DMA, while the application may write it (the access
                // contract of `MemoryBuffer`). A Send's or Write's run is
                // only referenced while the request is not complete,
                // during which verbs forbid the application to touch it;
                // after completion (TCP acknowledged it) a frame still in
                // flight is a duplicate the receiver discards by sequence
                // number. A Read Response's source has no such guard, as
                // with a NIC: octets changed under it arrive as they were
                // read, and with CRCs on fail the CRC framed before.
                let base = unsafe { buffer.as_ptr() }.cast_const();
                let region = unsafe { ExternalRegion::new(Arc::clone(buffer), base, buffer.len()) };
                (Arc::clone(buffer), region)
            }
        };
        self.registered.push(entry);
        let (_, region) = self.registered.last().expect("pushed above");
        region
    }

    /// Lets go of the registered buffers `conn` no longer sends from:
    /// all of them once it holds no run by reference, and otherwise those
    /// only this cache still holds (their region and its entry), so a
    /// connection keeps no application memory alive that the application
    /// and its queued runs have let go. Frames still pointing into such
    /// memory keep it alive until they are freed.
    ///
    /// It runs after every service of every flow: with nothing held (a
    /// port that copies), it costs one check.
    pub fn forget_unused_registered(&mut self, conn: &Connection) {
        if self.registered.is_empty() {
            return;
        }
        if conn.holds_referenced_runs() {
            self.registered
                .retain(|(buffer, _)| Arc::strong_count(buffer) > 2);
        } else {
            self.registered.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;
    use uwarp_stack::mem::BufferSlice;
    use uwarp_stack::tcp::{Config, Endpoint, Instant, Seq};

    /// A connection that has queued nothing.
    fn connection() -> Connection {
        let near = Endpoint::new(Ipv4Address::new(10, 0, 0, 1), 40000);
        let far = Endpoint::new(Ipv4Address::new(10, 0, 0, 2), 5000);
        Connection::connect(
            Config::default(),
            near,
            far,
            Seq(1),
            Instant::from_micros(0),
        )
    }

    /// Each cached region holds two references to its buffer: its cache
    /// entry's and its holder's.
    fn cached(buffer: &Arc<MemoryBuffer>) -> bool {
        Arc::strong_count(buffer) == 3
    }

    #[test]
    fn buffers_taking_turns_keep_their_regions_and_a_fifth_evicts_the_oldest() {
        let mut memory = FrameMemory::new(&connection());
        let buffers: Vec<_> = (0..5).map(|_| Arc::new(MemoryBuffer::new(64))).collect();
        let (a, b) = (&buffers[0], &buffers[1]);
        for _ in 0..3 {
            memory.registered(b);
            memory.registered(a);
            assert_eq!(memory.registered.len(), 2, "one region each");
            assert!(cached(a) && cached(b));
        }
        for buffer in &buffers[2..] {
            memory.registered(buffer);
        }
        assert_eq!(Arc::strong_count(b), 1, "b, used least recently, went");
        assert_eq!(buffers.iter().filter(|&buffer| cached(buffer)).count(), 4);
    }

    #[test]
    fn buffers_nobody_else_holds_are_let_go_and_all_once_no_run_is_queued() {
        let mut conn = connection();
        let mut memory = FrameMemory::new(&conn);
        let (sent, dropped) = (
            Arc::new(MemoryBuffer::new(64)),
            Arc::new(MemoryBuffer::new(64)),
        );
        memory.registered(&sent);
        memory.registered(&dropped);
        // A run of `sent` is queued; the application lets `dropped` go.
        let run = BufferSlice::new(Arc::clone(&sent), 0, 64).unwrap();
        conn.reserve_record_referencing(0, run, 0).unwrap();
        conn.commit_record();
        let weak = Arc::downgrade(&dropped);
        drop(dropped);
        memory.forget_unused_registered(&conn);
        assert!(weak.upgrade().is_none(), "only the cache held it");
        assert_eq!(Arc::strong_count(&sent), 4, "ours, the run's, the cache's");
        // Once nothing is queued, nothing is kept.
        memory.forget_unused_registered(&connection());
        assert_eq!(Arc::strong_count(&sent), 2, "ours and the run's");
        assert!(memory.send_ring().is_some(), "the ring stays");
        memory.release_send_ring();
        assert!(memory.send_ring().is_none());
    }
}
