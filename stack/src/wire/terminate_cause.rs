//! Which Terminate errors a received frame can cause (RFC 5040 section 7,
//! RFC 5041 section 7.2, RFC 6581 section 9): the error that answers a
//! ULPDU whose headers do not parse, and whether an error could answer a
//! given frame at all.
//!
//! The RDMAP engine answers malformed ULPDUs with [`for_parse_error`]; a
//! decoder asks [`could_answer`] which reading of a Terminate fits the
//! frame it answers.

use super::ddp::BufferModel;
use super::rdmap::RdmapSegment;
use super::terminate::{ErrorType, TermError};
use super::WireError;

/// The Terminate error answering a ULPDU that does not parse, `err` being
/// what [`RdmapSegment::parse`] said of it (RFC 5041 section 7.2,
/// RFC 5040 section 7).
pub fn for_parse_error(err: WireError, ulpdu: &[u8]) -> TermError {
    let tagged = ulpdu.first().is_some_and(|c| c & 0x80 != 0);
    match err {
        WireError::BadDdpVersion(_) if tagged => TermError::DdpTaggedInvalidVersion,
        WireError::BadDdpVersion(_) => TermError::DdpUntaggedInvalidVersion,
        WireError::BadRdmapVersion(_) => TermError::RdmapInvalidVersion,
        WireError::UnknownOpcode(_) | WireError::OpcodeModelMismatch { .. } => {
            TermError::RdmapUnexpectedOpcode
        }
        // Shorter than its DDP header: nothing of it can be trusted.
        _ => TermError::DdpLocalCatastrophic,
    }
}

/// The frame of the peer that a Terminate answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered<'a> {
    /// The peer's MPA Request or Reply: no FPDU of the peer came first.
    Startup,
    /// An FPDU of the peer.
    Fpdu {
        /// Its ULPDU (the DDP header and what follows it).
        ulpdu: &'a [u8],
        /// Whether its CRC field failed the check.
        crc_failed: bool,
    },
}

/// Whether a receiver of `answered` could report `error` about it.
///
/// A failed CRC is answered with the MPA CRC error; a ULPDU that does not
/// parse with the error [`for_parse_error`] names; an untagged segment on
/// the wrong queue for its opcode with an invalid QN. Any other segment
/// may meet an RDMAP remote protection or operation error, or a DDP
/// buffer error of its own buffer model, except the version errors. The
/// startup frames can only cause the MPA negotiation errors of RFC 6581
/// section 9. Local catastrophic errors answer nothing of the peer's.
pub fn could_answer(error: TermError, answered: &Answered<'_>) -> bool {
    match *answered {
        Answered::Startup => matches!(
            error,
            TermError::MpaInvalidStartup
                | TermError::MpaInsufficientIrd
                | TermError::MpaNoMatchingRtr
        ),
        Answered::Fpdu {
            crc_failed: true, ..
        } => error == TermError::MpaCrcError,
        Answered::Fpdu { ulpdu, .. } => match RdmapSegment::parse(ulpdu) {
            Err(err) => error == for_parse_error(err, ulpdu),
            Ok(segment) => could_answer_segment(error, &segment),
        },
    }
}

/// [`could_answer`] for a segment whose headers parse.
fn could_answer_segment(error: TermError, segment: &RdmapSegment<'_>) -> bool {
    let version = matches!(
        error,
        TermError::RdmapInvalidVersion
            | TermError::DdpTaggedInvalidVersion
            | TermError::DdpUntaggedInvalidVersion
    );
    let right_queue = match segment.ddp.model {
        BufferModel::Untagged { qn, .. } => segment.opcode().queue_number() == Some(qn),
        BufferModel::Tagged { .. } => true,
    };
    if !right_queue {
        return error == TermError::DdpUntaggedInvalidQn;
    }
    let of_its_model = match error.error_type() {
        ErrorType::RemoteProtection | ErrorType::RemoteOperation => true,
        ErrorType::TaggedBuffer => segment.ddp.tagged(),
        ErrorType::UntaggedBuffer => {
            !segment.ddp.tagged() && error != TermError::DdpUntaggedInvalidQn
        }
        ErrorType::LocalCatastrophic | ErrorType::Mpa => false,
    };
    of_its_model && !version
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::hex;

    /// A Send with MSN 1 on queue `qn`, control octets `ddp` and `rdmap`.
    fn send(ddp: u8, rdmap: u8, qn: u8) -> Vec<u8> {
        let mut ulpdu = hex("414300000000000000000000000100000000");
        ulpdu[0] = ddp;
        ulpdu[1] = rdmap;
        ulpdu[9] = qn;
        ulpdu
    }

    fn answers(error: TermError, ulpdu: &[u8]) -> bool {
        could_answer(
            error,
            &Answered::Fpdu {
                ulpdu,
                crc_failed: false,
            },
        )
    }

    #[test]
    fn malformed_headers_have_one_answer() {
        let unknown_opcode = send(0x41, 0x4c, 0);
        assert!(answers(TermError::RdmapUnexpectedOpcode, &unknown_opcode));
        assert!(!answers(TermError::MpaInsufficientIrd, &unknown_opcode));
        let rdmap_v0 = send(0x41, 0x03, 0);
        assert!(answers(TermError::RdmapInvalidVersion, &rdmap_v0));
        assert!(!answers(TermError::MpaLocalCatastrophic, &rdmap_v0));
        assert!(answers(
            TermError::DdpUntaggedInvalidVersion,
            &send(0x42, 0x43, 0)
        ));
        assert_eq!(
            for_parse_error(WireError::BadDdpVersion(0), &[0xc0]),
            TermError::DdpTaggedInvalidVersion
        );
    }

    #[test]
    fn valid_segments_meet_errors_of_their_model() {
        let good = send(0x41, 0x43, 0);
        assert!(answers(TermError::DdpUntaggedNoBuffer, &good));
        assert!(answers(TermError::RdmapInvalidStag, &good));
        assert!(!answers(TermError::DdpTaggedInvalidStag, &good));
        assert!(!answers(TermError::DdpUntaggedInvalidQn, &good));
        assert!(!answers(TermError::RdmapInvalidVersion, &good));
        assert!(!answers(TermError::MpaLocalCatastrophic, &good));
        let wrong_queue = send(0x41, 0x43, 5);
        assert!(answers(TermError::DdpUntaggedInvalidQn, &wrong_queue));
        assert!(!answers(TermError::DdpUntaggedNoBuffer, &wrong_queue));
        let crc = Answered::Fpdu {
            ulpdu: &good,
            crc_failed: true,
        };
        assert!(could_answer(TermError::MpaCrcError, &crc));
        assert!(!could_answer(TermError::DdpUntaggedNoBuffer, &crc));
        assert!(could_answer(
            TermError::MpaInsufficientIrd,
            &Answered::Startup
        ));
        assert!(!could_answer(TermError::MpaCrcError, &Answered::Startup));
    }
}
