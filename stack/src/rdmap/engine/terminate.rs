//! Terminate messages (RFC 5040 section 4.8): what this end sends when it
//! finds an error in the peer's traffic, with the DDP Segment Length, the
//! terminated DDP header and the terminated RDMAP header when RFC 5040
//! section 7 asks for them, and the completion status a received Terminate
//! gives the work it ends.

use crate::verbs::{WcOpcode, WcStatus, WorkCompletion};
use crate::wire::ddp::{BufferModel, DdpRepr, DdpSegment};
use crate::wire::rdmap::{Opcode, RdmapControl, QN_TERMINATE, READ_REQUEST_LEN};
use crate::wire::terminate::{ErrorType, TermError, TerminateRepr};

/// An error found in the peer's traffic, and what of the offending segment
/// the Terminate carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The error.
    pub error: TermError,
    /// Include the DDP Segment Length and the DDP header (M and D).
    pub ddp_header: bool,
    /// Include the Read Request header (R).
    pub rdmap_header: Option<[u8; READ_REQUEST_LEN]>,
}

impl Fault {
    /// An error reported without headers (MPA and local errors).
    pub fn new(error: TermError) -> Self {
        Self {
            error,
            ddp_header: false,
            rdmap_header: None,
        }
    }

    /// An error in a DDP segment whose header the Terminate echoes.
    pub fn in_segment(error: TermError) -> Self {
        Self {
            ddp_header: true,
            ..Self::new(error)
        }
    }
}

/// The ULPDU of a Terminate for `fault`, caused by the segment `ulpdu`
/// (its header is echoed when the fault asks for it and it has one), sent
/// as message `msn` of the Terminate queue.
pub fn build(fault: &Fault, ulpdu: &[u8], msn: u32) -> Vec<u8> {
    let header = fault
        .ddp_header
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

/// The completion a Terminate carrying `error` gives the oldest unfinished
/// send work request (the rest are flushed).
pub fn completion_for(error: TermError) -> WorkCompletion {
    let status = match error.error_type() {
        ErrorType::RemoteProtection | ErrorType::TaggedBuffer => WcStatus::RemoteAccessError,
        ErrorType::RemoteOperation | ErrorType::UntaggedBuffer => WcStatus::RemoteOperationError,
        ErrorType::LocalCatastrophic | ErrorType::Mpa => WcStatus::FatalError,
    };
    WorkCompletion {
        terminate: Some(error),
        ..WorkCompletion::new(0, WcOpcode::Send, status)
    }
}
