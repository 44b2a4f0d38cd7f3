//! Where a sender's FPDUs go: the record interface between the MPA framer
//! and the transport below it.
//!
//! An MPA sender hands the transport one FPDU at a time, and the transport
//! keeps each as one record, so that it can cut TCP segments at FPDU
//! boundaries (RFC 5044 section 5.2 and Appendix A.1). [`FpduSink`] is that
//! hand-over: the framer asks for room for exactly one FPDU, writes the
//! FPDU into it, and commits it. The MPA-aware TCP engine implements it
//! with room in its send queue, so FPDUs are framed where they will be
//! sent from; [`VecSink`] appends them to a vector (a byte-stream
//! transport, tests).
//!
//! The trait lives here, below both the framer (`mpa`) and the TCP engine
//! (`tcp`), so that neither depends on the other; it sits above `mem`,
//! whose slices of registered memory a sink may take by reference, and
//! whose lent ranges a byte-stream sink may write through
//! ([`FpduSink::write_through`]).

use crate::mem::{BufferSlice, Lent};

/// Where a sender frames its FPDUs, one at a time: room for exactly one
/// FPDU, kept only once committed. A transport that cuts TCP segments at
/// FPDU boundaries (RFC 5044 section 5.2) hands out room in its send
/// queue, so FPDUs are framed where they will be sent from.
pub trait FpduSink {
    /// Room for an FPDU of exactly `len` octets, or `None` when there is
    /// none now (the sender offers the same FPDU again later). A
    /// reservation that is not committed is dropped by the next one.
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]>;

    /// Keeps the FPDU written into the last reservation.
    fn commit(&mut self);

    /// The smallest payload this sink holds by reference instead of
    /// taking it framed ([`reserve_referencing`](Self::reserve_referencing),
    /// zero-copy transmit); `None`, the default, when it takes none.
    fn references_from(&self) -> Option<usize> {
        None
    }

    /// Room for an FPDU of `head` octets, then `payload` held by
    /// reference, then `tail` octets: the rooms for the two parts, kept
    /// by [`commit`](Self::commit) like [`reserve`](Self::reserve)'s.
    /// `None` when there is no room now, or the sink takes no references.
    fn reserve_referencing(
        &mut self,
        head: usize,
        payload: BufferSlice,
        tail: usize,
    ) -> Option<(&mut [u8], &mut [u8])> {
        let _ = (head, payload, tail);
        None
    }

    /// The smallest payload this sink writes through
    /// ([`write_through`](Self::write_through)) instead of taking it
    /// framed; `None`, the default, when it writes none through now.
    /// Only FPDUs without CRC and Markers are offered: the sender does
    /// not read a payload it writes through.
    fn writes_through_from(&self) -> Option<usize> {
        None
    }

    /// Takes one FPDU of `head`, then the lent `payload`, then `tail`,
    /// to be written on where the payload lies (a byte-stream
    /// transport's `writev`); `false` when there is no room now (nothing
    /// was taken; the sender offers it again later). The sender holds an
    /// epoch pin ([`Burst`](crate::mem::Burst)) from before the first
    /// such call of a round until [`end_round`](Self::end_round)
    /// returns: the sink may keep the payload's
    /// [`LentRange`](crate::mem::LentRange) until then, and must have
    /// written it, or copied what it could not write, by the time that
    /// returns. A taken FPDU is the sink's, as a committed one is.
    fn write_through(&mut self, head: &[u8], payload: &Lent<'_>, tail: &[u8]) -> bool {
        let _ = (head, payload, tail);
        false
    }

    /// The end of a round of FPDUs offered while
    /// [`writes_through_from`](Self::writes_through_from) said some:
    /// the last moment the payloads written through may be read.
    fn end_round(&mut self) {}
}

/// An [`FpduSink`] that appends committed FPDUs to a vector.
#[derive(Debug)]
pub struct VecSink<'a> {
    out: &'a mut Vec<u8>,
    /// Length of `out` up to the last committed FPDU.
    kept: usize,
}

impl<'a> VecSink<'a> {
    /// Appends to `out` after what it already holds.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        let kept = out.len();
        Self { out, kept }
    }

    /// Room for `len` octets after the last committed FPDU: a vector
    /// always has it.
    pub(crate) fn room(&mut self, len: usize) -> &mut [u8] {
        self.out.resize(self.kept + len, 0);
        &mut self.out[self.kept..]
    }

    /// Inserts `octets` into the uncommitted reservation, `at` octets
    /// after its start: a payload a test sink took by reference.
    #[cfg(feature = "testing")]
    pub(crate) fn insert_reserved(&mut self, at: usize, octets: &[u8]) {
        let at = self.kept + at;
        self.out.splice(at..at, octets.iter().copied());
    }
}

impl FpduSink for VecSink<'_> {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        Some(self.room(len))
    }

    fn commit(&mut self) {
        self.kept = self.out.len();
    }
}

impl Drop for VecSink<'_> {
    /// Drops a reservation that was never committed.
    fn drop(&mut self) {
        self.out.truncate(self.kept);
    }
}
