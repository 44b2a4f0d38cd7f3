//! The RDMAP Terminate message (RFC 5040 section 4.8) and the error
//! Layer / Error Type / Error Code values of RFC 5040 section 7, with the
//! MPA codes RFC 6581 section 9.2 adds.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Layer | EType |  Error Code   |M|D|R|       Reserved          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  DDP Segment Length (M or D)  | Terminated DDP header (if D)  ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~ Terminated RDMAP header: a Read Request header (if R)         ~
//! ```
//!
//! Linux siw writes the control word from little-endian bit-fields, so on
//! x86 its first octet is `EType << 4 | Layer` and M/D/R are 0x01/0x02/0x04
//! of the third octet (see `tests/data/siw/README.md`). uwarp always sends
//! the RFC layout and recognises siw's when it receives.

use super::ddp::{DdpSegment, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use super::error::{check_len, check_room, emitted, Result, WireError};
use super::field::{get_u16, set_u16};
use super::rdmap::READ_REQUEST_LEN;
use super::terminate_layout::{resolve, Context};

/// Length of the Terminate control word.
pub const CONTROL_LEN: usize = 4;

/// The layer an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// RDMAP (0).
    Rdmap = 0,
    /// DDP (1).
    Ddp = 1,
    /// The lower layer protocol: MPA (2).
    Llp = 2,
}

/// The Error Type within a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// Local catastrophic error (RDMAP or DDP, type 0).
    LocalCatastrophic,
    /// RDMAP remote protection error (type 1).
    RemoteProtection,
    /// RDMAP remote operation error (type 2).
    RemoteOperation,
    /// DDP tagged buffer error (type 1).
    TaggedBuffer,
    /// DDP untagged buffer error (type 2).
    UntaggedBuffer,
    /// MPA error (LLP type 0).
    Mpa,
}

/// Declares [`TermError`] and its table of (layer, type, code, name) in one
/// place, so that the two directions of the mapping cannot disagree.
macro_rules! term_errors {
    ($($variant:ident = ($layer:ident, $etype:literal, $code:literal, $name:literal);)*) => {
        /// Every error a Terminate can carry: RFC 5040 section 7 and the
        /// MPA codes of RFC 6581 section 9.2.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum TermError {
            $(
                #[doc = $name]
                $variant,
            )*
        }

        impl TermError {
            /// Every error, in table order.
            pub const ALL: &'static [TermError] = &[$(TermError::$variant,)*];

            /// (layer, error type number, error code) of this error.
            pub fn parts(self) -> (Layer, u8, u8) {
                match self {
                    $(TermError::$variant => (Layer::$layer, $etype, $code),)*
                }
            }

            /// The error's name as the RFC writes it.
            pub fn name(self) -> &'static str {
                match self {
                    $(TermError::$variant => $name,)*
                }
            }
        }
    };
}

term_errors! {
    RdmapLocalCatastrophic = (Rdmap, 0, 0x00, "RDMAP local catastrophic error (any error code)");
    RdmapInvalidStag = (Rdmap, 1, 0x00, "RDMAP remote protection: invalid STag");
    RdmapBaseOrBounds = (Rdmap, 1, 0x01, "RDMAP remote protection: base or bounds violation");
    RdmapAccessRights = (Rdmap, 1, 0x02, "RDMAP remote protection: access rights violation");
    RdmapStagNotAssociated = (Rdmap, 1, 0x03, "RDMAP remote protection: STag not associated with RDMAP stream");
    RdmapToWrap = (Rdmap, 1, 0x04, "RDMAP remote protection: TO wrap");
    RdmapProtectionCannotInvalidate = (Rdmap, 1, 0x09, "RDMAP remote protection: STag cannot be invalidated");
    RdmapProtectionUnspecified = (Rdmap, 1, 0xFF, "RDMAP remote protection: unspecified error");
    RdmapInvalidVersion = (Rdmap, 2, 0x05, "RDMAP remote operation: invalid RDMAP version");
    RdmapUnexpectedOpcode = (Rdmap, 2, 0x06, "RDMAP remote operation: unexpected opcode");
    RdmapCatastrophicStream = (Rdmap, 2, 0x07, "RDMAP remote operation: catastrophic error, localized to RDMAP stream");
    RdmapCatastrophicGlobal = (Rdmap, 2, 0x08, "RDMAP remote operation: catastrophic error, global");
    RdmapOperationCannotInvalidate = (Rdmap, 2, 0x09, "RDMAP remote operation: STag cannot be invalidated");
    RdmapOperationUnspecified = (Rdmap, 2, 0xFF, "RDMAP remote operation: unspecified error");
    DdpLocalCatastrophic = (Ddp, 0, 0x00, "DDP local catastrophic error");
    DdpTaggedInvalidStag = (Ddp, 1, 0x00, "DDP tagged buffer: invalid STag");
    DdpTaggedBaseOrBounds = (Ddp, 1, 0x01, "DDP tagged buffer: base or bounds violation");
    DdpTaggedStagNotAssociated = (Ddp, 1, 0x02, "DDP tagged buffer: STag not associated with DDP stream");
    DdpTaggedToWrap = (Ddp, 1, 0x03, "DDP tagged buffer: TO wrap");
    DdpTaggedInvalidVersion = (Ddp, 1, 0x04, "DDP tagged buffer: invalid DDP version");
    DdpUntaggedInvalidQn = (Ddp, 2, 0x01, "DDP untagged buffer: invalid QN");
    DdpUntaggedNoBuffer = (Ddp, 2, 0x02, "DDP untagged buffer: invalid MSN, no buffer available");
    DdpUntaggedMsnRange = (Ddp, 2, 0x03, "DDP untagged buffer: invalid MSN, MSN range is not valid");
    DdpUntaggedInvalidMo = (Ddp, 2, 0x04, "DDP untagged buffer: invalid MO");
    DdpUntaggedTooLong = (Ddp, 2, 0x05, "DDP untagged buffer: DDP message too long for available buffer");
    DdpUntaggedInvalidVersion = (Ddp, 2, 0x06, "DDP untagged buffer: invalid DDP version");
    MpaConnectionLost = (Llp, 0, 0x01, "MPA: TCP connection closed, terminated or lost");
    MpaCrcError = (Llp, 0, 0x02, "MPA: MPA CRC error");
    MpaMarkerMismatch = (Llp, 0, 0x03, "MPA: MPA Marker and ULPDU length field mismatch");
    MpaInvalidStartup = (Llp, 0, 0x04, "MPA: invalid MPA Request or Reply frame");
    MpaLocalCatastrophic = (Llp, 0, 0x05, "MPA: local catastrophic error");
    MpaInsufficientIrd = (Llp, 0, 0x06, "MPA: insufficient IRD resources");
    MpaNoMatchingRtr = (Llp, 0, 0x07, "MPA: no matching RTR option");
}

impl TermError {
    /// Whether this is a memory protection error: a peer's access to
    /// memory it named by STag, refused (RDMAP remote protection errors,
    /// RFC 5040 section 7.2; DDP tagged buffer errors on the STag, its
    /// base and bounds, its stream or the TO, RFC 5041 section 7.2). An
    /// RNIC reports these as access errors, the rest as fatal ones.
    pub fn is_access_violation(self) -> bool {
        matches!(
            self,
            Self::RdmapInvalidStag
                | Self::RdmapBaseOrBounds
                | Self::RdmapAccessRights
                | Self::RdmapStagNotAssociated
                | Self::RdmapToWrap
                | Self::RdmapProtectionCannotInvalidate
                | Self::RdmapProtectionUnspecified
                | Self::DdpTaggedInvalidStag
                | Self::DdpTaggedBaseOrBounds
                | Self::DdpTaggedStagNotAssociated
                | Self::DdpTaggedToWrap
        )
    }

    /// The error with these numbers, if the RFCs define it. An RDMAP local
    /// catastrophic error may carry any error code (RFC 5040 section 4.8).
    pub fn from_parts(layer: u8, etype: u8, code: u8) -> Result<Self> {
        if (layer, etype) == (Layer::Rdmap as u8, 0) {
            return Ok(Self::RdmapLocalCatastrophic);
        }
        Self::ALL
            .iter()
            .copied()
            .find(|e| {
                let (l, t, c) = e.parts();
                (l as u8, t, c) == (layer, etype, code)
            })
            .ok_or(WireError::UnknownTerminateCode { layer, etype, code })
    }

    /// The layer.
    pub fn layer(self) -> Layer {
        self.parts().0
    }

    /// The typed Error Type.
    pub fn error_type(self) -> ErrorType {
        match self.parts() {
            (Layer::Llp, _, _) => ErrorType::Mpa,
            (Layer::Rdmap, 1, _) => ErrorType::RemoteProtection,
            (Layer::Rdmap, 2, _) => ErrorType::RemoteOperation,
            (Layer::Ddp, 1, _) => ErrorType::TaggedBuffer,
            (Layer::Ddp, 2, _) => ErrorType::UntaggedBuffer,
            // The table gives RDMAP and DDP no type but 0, 1 and 2.
            (Layer::Rdmap | Layer::Ddp, _, _) => ErrorType::LocalCatastrophic,
        }
    }

    /// The Error Code octet.
    pub fn code(self) -> u8 {
        self.parts().2
    }
}

/// How the control word's bits are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminateLayout {
    /// RFC 5040 section 4.8: Layer in the high nibble, M/D/R = 0x80/0x40/0x20.
    Rfc5040,
    /// Linux siw on little-endian hosts: Layer in the low nibble,
    /// M/D/R = 0x01/0x02/0x04.
    Siw,
}

/// Which layout to assume when parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LayoutHint {
    /// Pick the layout under which the message is valid; when both are,
    /// weigh the evidence ([`super::terminate_layout`]), and when nothing
    /// decides prefer RFC 5040 and say the result is ambiguous.
    #[default]
    Auto,
    /// Only the RFC 5040 layout.
    Rfc5040,
    /// Only the siw layout.
    Siw,
}

/// The decoded control word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Control {
    error: TermError,
    code: u8,
    m: bool,
    d: bool,
    r: bool,
    reserved: u16,
}

impl Control {
    fn decode(word: [u8; CONTROL_LEN], layout: TerminateLayout) -> Result<Self> {
        let (layer, etype, flags) = match layout {
            TerminateLayout::Rfc5040 => (word[0] >> 4, word[0] & 0x0F, [0x80, 0x40, 0x20]),
            TerminateLayout::Siw => (word[0] & 0x0F, word[0] >> 4, [0x01, 0x02, 0x04]),
        };
        let hdrct_mask = flags[0] | flags[1] | flags[2];
        let reserved_high = match layout {
            TerminateLayout::Rfc5040 => word[2] & !hdrct_mask,
            TerminateLayout::Siw => (word[2] & !hdrct_mask) >> 3,
        };
        Ok(Self {
            error: TermError::from_parts(layer, etype, word[1])?,
            code: word[1],
            m: word[2] & flags[0] != 0,
            d: word[2] & flags[1] != 0,
            r: word[2] & flags[2] != 0,
            reserved: u16::from(reserved_high) << 8 | u16::from(word[3]),
        })
    }

    fn encode(&self, layout: TerminateLayout) -> [u8; CONTROL_LEN] {
        let (layer, etype, _) = self.error.parts();
        let code = if self.error == TermError::RdmapLocalCatastrophic {
            self.code
        } else {
            self.error.code()
        };
        let (first, flags, reserved_shift) = match layout {
            TerminateLayout::Rfc5040 => ((layer as u8) << 4 | etype, [0x80, 0x40, 0x20], 0),
            TerminateLayout::Siw => (etype << 4 | layer as u8, [0x01, 0x02, 0x04], 3),
        };
        let mut third = ((self.reserved >> 8) as u8 & 0x1F) << reserved_shift;
        for (set, bit) in [(self.m, flags[0]), (self.d, flags[1]), (self.r, flags[2])] {
            if set {
                third |= bit;
            }
        }
        [first, code, third, self.reserved as u8]
    }
}

/// Reads consecutive fields off a payload.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self, len: usize) -> Result<&'a [u8]> {
        check_len(&self.buf[self.at..], len)?;
        Ok(&self.buf[self.at..self.at + len])
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let field = self.peek(len)?;
        self.at += len;
        Ok(field)
    }
}

/// A parsed Terminate message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateRepr<'a> {
    /// The error being reported.
    pub error: TermError,
    /// The Error Code octet; equal to `error.code()` except for an RDMAP
    /// local catastrophic error, which may carry any value.
    pub code: u8,
    /// M: the length of the terminated DDP segment. The 16-bit field is on
    /// the wire whenever M or D is set; without M its value is not valid
    /// and reads as `None` (and is sent as 0).
    pub ddp_segment_len: Option<u16>,
    /// D: the header of the DDP segment that caused the error (14 octets
    /// tagged, 18 untagged).
    pub ddp_header: Option<&'a [u8]>,
    /// R: the RDMAP header of the message that caused the error (the
    /// 28-octet Read Request header).
    pub rdmap_header: Option<&'a [u8]>,
    /// The 13 reserved bits of the control word, kept for exact re-emission.
    pub reserved: u16,
    /// Octets after the headers the control word announces.
    pub trailing: &'a [u8],
    /// The layout the control word was in, and is emitted in.
    pub layout: TerminateLayout,
    /// Both layouts gave a valid message, no evidence told them apart, and
    /// [`LayoutHint::Auto`] chose RFC 5040.
    pub ambiguous: bool,
}

impl<'a> TerminateRepr<'a> {
    /// A Terminate in the RFC layout carrying only `error`.
    pub fn new(error: TermError) -> Self {
        Self {
            error,
            code: error.code(),
            ddp_segment_len: None,
            ddp_header: None,
            rdmap_header: None,
            reserved: 0,
            trailing: &[],
            layout: TerminateLayout::Rfc5040,
            ambiguous: false,
        }
    }

    /// Parses a Terminate message's payload (what follows its DDP header).
    /// [`LayoutHint::Auto`] weighs the evidence the payload itself holds
    /// ([`super::terminate_layout`]); a caller that knows more about the
    /// message's context calls [`super::terminate_layout::resolve`].
    pub fn parse(payload: &'a [u8], hint: LayoutHint) -> Result<Self> {
        check_len(payload, CONTROL_LEN)?;
        match hint {
            LayoutHint::Rfc5040 => Self::parse_as(payload, TerminateLayout::Rfc5040),
            LayoutHint::Siw => Self::parse_as(payload, TerminateLayout::Siw),
            LayoutHint::Auto => {
                resolve(payload, hint, &Context::default()).map(|resolved| resolved.repr)
            }
        }
    }

    fn parse_as(payload: &'a [u8], layout: TerminateLayout) -> Result<Self> {
        let mut word = [0u8; CONTROL_LEN];
        word.copy_from_slice(&payload[..CONTROL_LEN]);
        let control = Control::decode(word, layout)?;
        let mut reader = Reader {
            buf: payload,
            at: CONTROL_LEN,
        };
        let ddp_segment_len = if control.m || control.d {
            Some(get_u16(reader.take(2)?, 0)).filter(|_| control.m)
        } else {
            None
        };
        let ddp_header = if control.d {
            let header_len = DdpSegment::new_unchecked(reader.peek(1)?).header_len();
            Some(reader.take(header_len)?)
        } else {
            None
        };
        let rdmap_header = if control.r {
            Some(reader.take(READ_REQUEST_LEN)?)
        } else {
            None
        };
        let rest = &payload[reader.at..];
        Ok(Self {
            error: control.error,
            code: control.code,
            ddp_segment_len,
            ddp_header,
            rdmap_header,
            reserved: control.reserved,
            trailing: rest,
            layout,
            ambiguous: false,
        })
    }

    /// Whether the DDP Segment Length field is on the wire (M or D set).
    fn has_length_field(&self) -> bool {
        self.ddp_segment_len.is_some() || self.ddp_header.is_some()
    }

    /// Length of the emitted Terminate payload.
    pub fn buffer_len(&self) -> usize {
        CONTROL_LEN
            + usize::from(self.has_length_field()) * 2
            + self.ddp_header.map_or(0, <[u8]>::len)
            + self.rdmap_header.map_or(0, <[u8]>::len)
            + self.trailing.len()
    }

    /// Writes the Terminate payload to the start of `buf` in `self.layout`.
    /// Refuses a DDP header that is not a whole tagged or untagged header
    /// and an RDMAP header that is not 28 octets.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if let Some(header) = self.ddp_header {
            let valid = DdpSegment::new_checked(header)
                .is_ok_and(|h| h.header_len() == header.len())
                && matches!(header.len(), TAGGED_HEADER_LEN | UNTAGGED_HEADER_LEN);
            if !valid {
                return Err(WireError::BadTerminate);
            }
        }
        if self
            .rdmap_header
            .is_some_and(|h| h.len() != READ_REQUEST_LEN)
        {
            return Err(WireError::BadTerminate);
        }
        let len = self.buffer_len();
        check_room(buf, len)?;
        let control = Control {
            error: self.error,
            code: self.code,
            m: self.ddp_segment_len.is_some(),
            d: self.ddp_header.is_some(),
            r: self.rdmap_header.is_some(),
            reserved: self.reserved & 0x1FFF,
        };
        buf[..CONTROL_LEN].copy_from_slice(&control.encode(self.layout));
        let mut at = CONTROL_LEN;
        if self.has_length_field() {
            set_u16(buf, at, self.ddp_segment_len.unwrap_or(0));
            at += 2;
        }
        for part in [self.ddp_header, self.rdmap_header, Some(self.trailing)]
            .into_iter()
            .flatten()
        {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Ok(at)
    }

    /// The emitted payload as a vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        emitted(self.buffer_len(), |out| self.emit(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::hex;

    #[test]
    fn table_round_trips() {
        for &error in TermError::ALL {
            let (layer, etype, code) = error.parts();
            assert_eq!(
                TermError::from_parts(layer as u8, etype, code).unwrap(),
                error
            );
        }
        assert_eq!(TermError::ALL.len(), 33);
    }

    #[test]
    fn access_violations_are_the_protection_and_tagged_stag_errors() {
        for &error in TermError::ALL {
            let expected = match error.parts() {
                (Layer::Rdmap, 1, _) => true,
                (Layer::Ddp, 1, code) => code <= 0x03,
                _ => false,
            };
            assert_eq!(error.is_access_violation(), expected, "{error:?}");
        }
    }

    #[test]
    fn siw_bad_stag_terminate() {
        // siw's answer to an RDMA Write with a bogus STag (probe-7326):
        // DDP tagged buffer error, invalid STag, M and D set, siw layout.
        let payload = hex("110003000010c140deadbe000000000000001000");
        let term = TerminateRepr::parse(&payload, LayoutHint::Auto).unwrap();
        assert_eq!(term.layout, TerminateLayout::Siw);
        assert_eq!(term.error, TermError::DdpTaggedInvalidStag);
        assert_eq!(term.ddp_segment_len, Some(16));
        assert_eq!(term.ddp_header, Some(&payload[6..20]));
        assert_eq!(term.rdmap_header, None);
        assert!(term.trailing.is_empty() && !term.ambiguous);
        assert_eq!(term.to_vec().unwrap(), payload);
        let rfc = TerminateRepr {
            layout: TerminateLayout::Rfc5040,
            ..term
        };
        assert_eq!(&rfc.to_vec().unwrap()[..4], &[0x11, 0x00, 0xC0, 0x00]);
    }

    #[test]
    fn siw_bad_qn_terminate() {
        // probe-7333: DDP untagged buffer error, invalid QN.
        let payload = hex("210103000010414300000000000000050000000100000000");
        let term = TerminateRepr::parse(&payload, LayoutHint::Auto).unwrap();
        assert_eq!(term.error, TermError::DdpUntaggedInvalidQn);
        assert_eq!(term.ddp_header.map(<[u8]>::len), Some(18));
        assert_eq!(term.to_vec().unwrap(), payload);
    }

    #[test]
    fn ambiguous_terminate_prefers_rfc_unless_told() {
        // probe-7335: siw means RDMAP / remote operation / invalid version;
        // read as RFC 5040 the same octets are LLP / MPA / local catastrophic.
        let payload = hex("20050000");
        let auto = TerminateRepr::parse(&payload, LayoutHint::Auto).unwrap();
        assert!(auto.ambiguous);
        assert_eq!(auto.error, TermError::MpaLocalCatastrophic);
        let siw = TerminateRepr::parse(&payload, LayoutHint::Siw).unwrap();
        assert_eq!(siw.error, TermError::RdmapInvalidVersion);
        assert_eq!(siw.to_vec().unwrap(), payload);
    }

    #[test]
    fn crc_error_terminate_is_only_valid_as_siw() {
        // probe-7332: as RFC 5040, layer 0 type 2 code 2 is undefined.
        let payload = hex("02020000");
        let term = TerminateRepr::parse(&payload, LayoutHint::Auto).unwrap();
        assert_eq!(term.error, TermError::MpaCrcError);
        assert_eq!(term.layout, TerminateLayout::Siw);
    }

    #[test]
    fn read_request_terminate_with_all_headers() {
        let ddp = hex("414100000000000000010000000100000000");
        let rreq = [7u8; READ_REQUEST_LEN];
        let term = TerminateRepr {
            ddp_segment_len: Some(46),
            ddp_header: Some(&ddp),
            rdmap_header: Some(&rreq),
            ..TerminateRepr::new(TermError::RdmapInvalidStag)
        };
        let bytes = term.to_vec().unwrap();
        assert_eq!(&bytes[..4], &[0x01, 0x00, 0xE0, 0x00]);
        let parsed = TerminateRepr::parse(&bytes, LayoutHint::Rfc5040).unwrap();
        assert_eq!(parsed, term);
        assert_eq!(
            TerminateRepr::parse(&bytes[..bytes.len() - 1], LayoutHint::Rfc5040).unwrap_err(),
            WireError::Truncated {
                needed: 28,
                available: 27
            }
        );
    }

    #[test]
    fn d_without_m_still_carries_the_length_field() {
        let ddp = hex("c140deadbe000000000000001000");
        let ddp = &ddp[..];
        let term = TerminateRepr {
            ddp_header: Some(ddp),
            ..TerminateRepr::new(TermError::DdpTaggedInvalidStag)
        };
        let bytes = term.to_vec().unwrap();
        assert_eq!(&bytes[..6], &[0x11, 0x00, 0x40, 0x00, 0x00, 0x00]);
        assert_eq!(
            TerminateRepr::parse(&bytes, LayoutHint::Rfc5040).unwrap(),
            term
        );
    }

    #[test]
    fn rdmap_local_catastrophic_keeps_any_code() {
        let payload = [0x00, 0x5a, 0x00, 0x00];
        let term = TerminateRepr::parse(&payload, LayoutHint::Rfc5040).unwrap();
        assert_eq!(term.error, TermError::RdmapLocalCatastrophic);
        assert_eq!(term.code, 0x5a);
        assert_eq!(term.to_vec().unwrap(), payload);
    }

    #[test]
    fn invalid_control_words() {
        assert!(TerminateRepr::parse(&[0x33, 0, 0, 0], LayoutHint::Auto).is_err());
        assert!(TerminateRepr::parse(&[0x01], LayoutHint::Auto).is_err());
        assert_eq!(
            TerminateRepr::parse(&[0x21, 0x09, 0, 0], LayoutHint::Rfc5040).unwrap_err(),
            WireError::UnknownTerminateCode {
                layer: 2,
                etype: 1,
                code: 9
            }
        );
    }

    #[test]
    fn emit_refuses_malformed_headers() {
        let short = [0x41u8; 10];
        let term = TerminateRepr {
            ddp_header: Some(&short),
            ..TerminateRepr::new(TermError::DdpUntaggedInvalidQn)
        };
        assert_eq!(term.to_vec().unwrap_err(), WireError::BadTerminate);
    }
}
