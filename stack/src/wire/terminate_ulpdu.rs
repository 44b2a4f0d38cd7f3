//! The whole ULPDU that carries a Terminate message (RFC 5040 section 4.8):
//! the untagged DDP header on the Terminate queue (RFC 5040 section 5.1,
//! queue number 2), the Terminate control field, and the headers of the
//! offending segment it echoes (RFC 5040 section 7, RFC 5041 section 7.1).
//! The RDMAP engine sends it for errors in Full Operation; an MPA initiator
//! sends one when the negotiation fails after an accepting Reply (RFC 6581
//! section 9).
//!
//! The echo rule: an error found in a received DDP segment carries the
//! segment's length and DDP header (M and D), and an RDMAP error in an RDMA
//! Read Request also carries the request's 28 octets (R). Nothing is
//! echoed for MPA errors (the framing, not a segment, failed), for local
//! catastrophic errors (nothing of the peer's is at fault), for a DDP
//! version other than 1 (the header's layout is unknown), or for a segment
//! too short to hold its DDP header.
//!
//! The DDP Segment Length is the length of the whole segment, header
//! included (RFC 5041 section 2.3: a DDP Segment is the DDP Header and its
//! ULP Payload). Linux siw puts only the payload's length there (16 for
//! the 30-octet Write of `tests/data/siw/tap/probe-7326-badstag.jsonl`).

use super::ddp::{BufferModel, DdpRepr, DdpSegment};
use super::rdmap::{Opcode, RdmapControl, QN_TERMINATE, READ_REQUEST_LEN};
use super::terminate::{ErrorType, TermError, TerminateRepr};

/// An error to report in a Terminate, with the Read Request that caused
/// it, if one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The error.
    pub error: TermError,
    /// The RDMA Read Request header to echo (R).
    pub rdmap_header: Option<[u8; READ_REQUEST_LEN]>,
}

impl Fault {
    /// An error with no Read Request behind it.
    pub fn new(error: TermError) -> Self {
        Self {
            error,
            rdmap_header: None,
        }
    }
}

/// Whether a Terminate for `error` echoes the DDP header of the segment
/// that caused it (see the module documentation).
fn echoes_ddp_header(error: TermError) -> bool {
    let unknown_layout = matches!(
        error,
        TermError::DdpTaggedInvalidVersion | TermError::DdpUntaggedInvalidVersion
    );
    let about_a_segment = !matches!(
        error.error_type(),
        ErrorType::LocalCatastrophic | ErrorType::Mpa
    );
    about_a_segment && !unknown_layout
}

/// The ULPDU of a Terminate for `fault`, caused by the received segment
/// `ulpdu` (empty when no segment caused it), sent as message `msn` of the
/// Terminate queue.
pub fn build(fault: &Fault, ulpdu: &[u8], msn: u32) -> Vec<u8> {
    let header = echoes_ddp_header(fault.error)
        .then(|| DdpSegment::new_checked(ulpdu).ok())
        .flatten()
        .map(|segment| &ulpdu[..segment.header_len()]);
    let terminate = TerminateRepr {
        ddp_segment_len: header.map(|_| u16::try_from(ulpdu.len()).unwrap_or(u16::MAX)),
        ddp_header: header,
        rdmap_header: fault.rdmap_header.as_ref().map(|h| &h[..]),
        ..TerminateRepr::new(fault.error)
    };
    let ddp = DdpRepr {
        last: true,
        reserved: 0,
        ulp_control: RdmapControl::new(Opcode::Terminate).to_u8(),
        model: BufferModel::Untagged {
            ulp_word: 0,
            qn: QN_TERMINATE,
            msn,
            mo: 0,
        },
    };
    let mut out = vec![0u8; ddp.header_len() + terminate.buffer_len()];
    let at = ddp.emit(&mut out).expect("sized above");
    // The headers echoed are whole DDP headers and a 28-octet Read Request.
    terminate
        .emit(&mut out[at..])
        .expect("the echoed headers are well formed");
    out
}

/// A Terminate carrying `error` and no echoed headers, as the first
/// message of a Terminate queue: what an MPA initiator sends when the
/// negotiation fails after an accepting Reply (RFC 6581 section 9:
/// insufficient IRD, no matching RTR).
pub fn standalone(error: TermError) -> Vec<u8> {
    build(&Fault::new(error), &[], 1)
}
