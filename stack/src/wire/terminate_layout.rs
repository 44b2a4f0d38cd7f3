//! Choosing the layout of a received Terminate's control word: RFC 5040
//! section 4.8's, or Linux siw's little-endian bit-field order (see
//! [`super::terminate`]), and saying which evidence chose it.
//!
//! Most control words are valid in one layout only. For the rest the
//! evidence is weighed in this order, the first that tells the two
//! readings apart deciding:
//!
//! 1. the echoed headers: only one reading's M, D and R flags announce
//!    exactly the octets that follow, with no reserved bit set;
//! 2. the frame the Terminate answers: only one reading's error is one
//!    that frame could cause ([`could_answer`]);
//! 3. the sender's earlier Terminates: it already used one of the layouts.
//!
//! When nothing decides, the RFC 5040 reading is taken and marked
//! ambiguous.

use super::terminate::{LayoutHint, TerminateLayout, TerminateRepr};
use super::terminate_cause::{could_answer, Answered};
use super::Result;

/// What settled the layout of a Terminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Evidence {
    /// The caller named the layout.
    Given,
    /// The control word is valid in this layout only.
    ControlWord,
    /// Only in this layout do the flags account for the octets after the
    /// control word, with no reserved bit set.
    EchoedHeaders,
    /// Only this layout's error could answer the frame the Terminate
    /// answers.
    AnsweredFrame,
    /// The sender used this layout in an earlier Terminate.
    EarlierTerminate,
}

impl Evidence {
    /// A short name for decoders to print.
    pub fn name(self) -> &'static str {
        match self {
            Self::Given => "given",
            Self::ControlWord => "control word",
            Self::EchoedHeaders => "echoed headers",
            Self::AnsweredFrame => "answered frame",
            Self::EarlierTerminate => "earlier terminate",
        }
    }
}

/// What is known around a Terminate besides its own octets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context<'a> {
    /// The frame of the peer it answers, if known.
    pub answered: Option<Answered<'a>>,
    /// The layout its sender's earlier Terminates were in, if any was
    /// settled.
    pub earlier: Option<TerminateLayout>,
}

/// A Terminate read in the layout the evidence chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved<'a> {
    /// The message; its `ambiguous` flag is set when nothing decided.
    pub repr: TerminateRepr<'a>,
    /// What decided the layout; `None` when nothing did.
    pub evidence: Option<Evidence>,
}

/// A piece of evidence: whether it speaks for one reading of a Terminate.
type SpeaksFor<'f> = &'f dyn Fn(&TerminateRepr<'_>) -> bool;

/// Parses a Terminate payload (what follows its DDP header) in the layout
/// `hint` names or, for [`LayoutHint::Auto`], the one the evidence in
/// `context` and in the payload itself chooses.
pub fn resolve<'a>(
    payload: &'a [u8],
    hint: LayoutHint,
    context: &Context<'_>,
) -> Result<Resolved<'a>> {
    if hint != LayoutHint::Auto {
        let repr = TerminateRepr::parse(payload, hint)?;
        return Ok(Resolved {
            repr,
            evidence: Some(Evidence::Given),
        });
    }
    let rfc = TerminateRepr::parse(payload, LayoutHint::Rfc5040);
    let siw = TerminateRepr::parse(payload, LayoutHint::Siw);
    let (rfc, siw) = match (rfc, siw) {
        (Ok(rfc), Ok(siw)) => (rfc, siw),
        (Ok(only), Err(_)) | (Err(_), Ok(only)) => {
            return Ok(Resolved {
                repr: only,
                evidence: Some(Evidence::ControlWord),
            })
        }
        (Err(err), Err(_)) => return Err(err),
    };
    let answers = |t: &TerminateRepr<'_>| {
        context
            .answered
            .as_ref()
            .is_some_and(|a| could_answer(t.error, a))
    };
    let used_before = |t: &TerminateRepr<'_>| context.earlier == Some(t.layout);
    let tests: [(Evidence, SpeaksFor<'_>); 3] = [
        (Evidence::EchoedHeaders, &echo_fits),
        (Evidence::AnsweredFrame, &answers),
        (Evidence::EarlierTerminate, &used_before),
    ];
    for (evidence, test) in tests {
        let chosen = match (test(&rfc), test(&siw)) {
            (true, false) => rfc,
            (false, true) => siw,
            _ => continue,
        };
        return Ok(Resolved {
            repr: chosen,
            evidence: Some(evidence),
        });
    }
    Ok(Resolved {
        repr: TerminateRepr {
            ambiguous: true,
            ..rfc
        },
        evidence: None,
    })
}

/// Whether the flags of `term` announce exactly the octets after its
/// control word and no reserved bit is set.
fn echo_fits(term: &TerminateRepr<'_>) -> bool {
    term.trailing.is_empty() && term.reserved == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::terminate::TermError;
    use crate::wire::testing::hex;

    /// siw's answer to a Send with RDMAP version 0 (probe-7335), and the
    /// Send: valid as RFC 5040 too, as an MPA local catastrophic error.
    const RDMAP_V0_TERMINATE: &str = "20050000";
    const RDMAP_V0_SEND: &str = "4103000000000000000000000001000000005a5a";

    #[test]
    fn each_kind_of_evidence_decides() {
        let payload = hex(RDMAP_V0_TERMINATE);
        let alone = resolve(&payload, LayoutHint::Auto, &Context::default()).unwrap();
        assert_eq!((alone.evidence, alone.repr.ambiguous), (None, true));
        assert_eq!(alone.repr.error, TermError::MpaLocalCatastrophic);
        let send = hex(RDMAP_V0_SEND);
        let answered = Context {
            answered: Some(Answered::Fpdu {
                ulpdu: &send,
                crc_failed: false,
            }),
            earlier: Some(TerminateLayout::Rfc5040),
        };
        let by_frame = resolve(&payload, LayoutHint::Auto, &answered).unwrap();
        assert_eq!(by_frame.evidence, Some(Evidence::AnsweredFrame));
        assert_eq!(by_frame.repr.error, TermError::RdmapInvalidVersion);
        assert!(!by_frame.repr.ambiguous);
        let earlier = Context {
            earlier: Some(TerminateLayout::Siw),
            ..Context::default()
        };
        let by_earlier = resolve(&payload, LayoutHint::Auto, &earlier).unwrap();
        assert_eq!(by_earlier.evidence, Some(Evidence::EarlierTerminate));
        assert_eq!(by_earlier.repr.layout, TerminateLayout::Siw);
        // siw's unexpected-opcode error with M and D set and the DDP
        // header echoed: as RFC 5040, reserved bits and trailing octets.
        let echoed = hex("200603000012414c00000000000000000000000100000000");
        let by_echo = resolve(&echoed, LayoutHint::Auto, &Context::default()).unwrap();
        assert_eq!(by_echo.evidence, Some(Evidence::EchoedHeaders));
        assert_eq!(by_echo.repr.error, TermError::RdmapUnexpectedOpcode);
        let crc_error = hex("02020000");
        let only_siw = resolve(&crc_error, LayoutHint::Auto, &earlier).unwrap();
        assert_eq!(only_siw.evidence, Some(Evidence::ControlWord));
        let given = resolve(&payload, LayoutHint::Siw, &Context::default()).unwrap();
        assert_eq!(given.evidence, Some(Evidence::Given));
    }
}
