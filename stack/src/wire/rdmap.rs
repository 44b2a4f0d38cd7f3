//! RDMAP headers (RFC 5040 section 4): the control field, the opcodes of
//! RFC 5040 and RFC 7306, the RDMA Read Request header, and a DDP segment
//! read as an RDMAP message segment.
//!
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+
//! |RV |Rsv| Opcode|   RDMAP control field = DDP `RsvdULP[0]` (RFC 5040 4.1)
//! +-+-+-+-+-+-+-+-+
//! ```
//!
//! The Terminate message has a module of its own,
//! [`crate::wire::terminate`].

use super::ddp::{BufferModel, DdpRepr, DdpSegment};
use super::error::{check_len, check_room, Result, WireError};
use super::field::{get_u32, get_u64, set_u32, set_u64};

/// The RDMAP version this crate speaks (RFC 5040 section 4.1).
pub const RDMAP_VERSION: u8 = 1;
/// Length of the RDMA Read Request header (RFC 5040 section 4.4).
pub const READ_REQUEST_LEN: usize = 28;

/// Untagged queue of Send messages (RFC 5040 section 5.1).
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages.
pub const QN_TERMINATE: u32 = 2;
/// Untagged queue of Atomic Responses (RFC 7306 section 5.1; Atomic
/// Requests share queue 1 with RDMA Read Requests).
pub const QN_ATOMIC_RESPONSE: u32 = 3;

/// RDMAP opcodes of RFC 5040 section 4.2 and RFC 7306 section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Opcode {
    /// RDMA Write.
    RdmaWrite = 0x0,
    /// RDMA Read Request.
    ReadRequest = 0x1,
    /// RDMA Read Response.
    ReadResponse = 0x2,
    /// Send.
    Send = 0x3,
    /// Send with Invalidate.
    SendInvalidate = 0x4,
    /// Send with Solicited Event.
    SendSolicited = 0x5,
    /// Send with Solicited Event and Invalidate.
    SendSolicitedInvalidate = 0x6,
    /// Terminate.
    Terminate = 0x7,
    /// Immediate Data (RFC 7306).
    ImmediateData = 0x8,
    /// Immediate Data with Solicited Event (RFC 7306).
    ImmediateDataSolicited = 0x9,
    /// Atomic Request (RFC 7306).
    AtomicRequest = 0xA,
    /// Atomic Response (RFC 7306).
    AtomicResponse = 0xB,
}

impl Opcode {
    /// Every opcode, in numeric order.
    pub const ALL: [Self; 12] = [
        Self::RdmaWrite,
        Self::ReadRequest,
        Self::ReadResponse,
        Self::Send,
        Self::SendInvalidate,
        Self::SendSolicited,
        Self::SendSolicitedInvalidate,
        Self::Terminate,
        Self::ImmediateData,
        Self::ImmediateDataSolicited,
        Self::AtomicRequest,
        Self::AtomicResponse,
    ];

    /// The opcode with number `value`, if RFC 5040 or RFC 7306 defines it.
    pub fn from_u8(value: u8) -> Result<Self> {
        Self::ALL
            .get(usize::from(value))
            .copied()
            .ok_or(WireError::UnknownOpcode(value))
    }

    /// Whether the message travels in tagged DDP segments.
    pub fn tagged(self) -> bool {
        matches!(self, Self::RdmaWrite | Self::ReadResponse)
    }

    /// The untagged queue the message targets; `None` for tagged messages.
    pub fn queue_number(self) -> Option<u32> {
        match self {
            Self::RdmaWrite | Self::ReadResponse => None,
            Self::ReadRequest | Self::AtomicRequest => Some(QN_READ_REQUEST),
            Self::Terminate => Some(QN_TERMINATE),
            Self::AtomicResponse => Some(QN_ATOMIC_RESPONSE),
            Self::Send
            | Self::SendInvalidate
            | Self::SendSolicited
            | Self::SendSolicitedInvalidate
            | Self::ImmediateData
            | Self::ImmediateDataSolicited => Some(QN_SEND),
        }
    }

    /// Whether the message invalidates the STag in `RsvdULP[8:39]`.
    pub fn invalidates(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSolicitedInvalidate)
    }

    /// Whether the message carries a Solicited Event.
    pub fn solicited(self) -> bool {
        matches!(
            self,
            Self::SendSolicited | Self::SendSolicitedInvalidate | Self::ImmediateDataSolicited
        )
    }

    /// The message's name as RFC 5040 and RFC 7306 write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::RdmaWrite => "RDMA Write",
            Self::ReadRequest => "RDMA Read Request",
            Self::ReadResponse => "RDMA Read Response",
            Self::Send => "Send",
            Self::SendInvalidate => "Send with Invalidate",
            Self::SendSolicited => "Send with Solicited Event",
            Self::SendSolicitedInvalidate => "Send with Solicited Event and Invalidate",
            Self::Terminate => "Terminate",
            Self::ImmediateData => "Immediate Data",
            Self::ImmediateDataSolicited => "Immediate Data with Solicited Event",
            Self::AtomicRequest => "Atomic Request",
            Self::AtomicResponse => "Atomic Response",
        }
    }
}

/// The RDMAP control field: version, reserved bits and opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmapControl {
    /// The two reserved bits, kept for exact re-emission; uwarp sends 0.
    pub reserved: u8,
    /// The opcode.
    pub opcode: Opcode,
}

impl RdmapControl {
    /// A control field with version 1, no reserved bits and `opcode`.
    pub fn new(opcode: Opcode) -> Self {
        Self {
            reserved: 0,
            opcode,
        }
    }

    /// Parses the control octet; refuses an RV other than 1 and unknown
    /// opcodes.
    pub fn parse(octet: u8) -> Result<Self> {
        let raw = RawControl::from_u8(octet);
        if raw.version != RDMAP_VERSION {
            return Err(WireError::BadRdmapVersion(raw.version));
        }
        Ok(Self {
            reserved: raw.reserved,
            opcode: Opcode::from_u8(raw.opcode)?,
        })
    }

    /// The control octet.
    pub fn to_u8(self) -> u8 {
        RDMAP_VERSION << 6 | (self.reserved & 0x3) << 4 | self.opcode as u8
    }
}

/// The three fields of an RDMAP control octet as sent, none of them
/// checked (RFC 5040 section 4.1): what a decoder shows of a control field
/// that [`RdmapControl::parse`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawControl {
    /// RV, the RDMAP version (2 bits).
    pub version: u8,
    /// The two reserved bits.
    pub reserved: u8,
    /// The opcode number (4 bits), defined or not.
    pub opcode: u8,
}

impl RawControl {
    /// Splits the control octet into its fields.
    pub fn from_u8(octet: u8) -> Self {
        Self {
            version: octet >> 6,
            reserved: (octet >> 4) & 0x3,
            opcode: octet & 0x0F,
        }
    }
}

/// The RDMA Read Request header (RFC 5040 section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequest {
    /// Data sink STag: where the Read Response is placed.
    pub sink_stag: u32,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// RDMA Read Message Size.
    pub size: u32,
    /// Data source STag: the buffer to read.
    pub source_stag: u32,
    /// Data source tagged offset.
    pub source_to: u64,
}

impl ReadRequest {
    /// Parses the first 28 octets of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        check_len(buf, READ_REQUEST_LEN)?;
        Ok(Self {
            sink_stag: get_u32(buf, 0),
            sink_to: get_u64(buf, 4),
            size: get_u32(buf, 12),
            source_stag: get_u32(buf, 16),
            source_to: get_u64(buf, 20),
        })
    }

    /// Writes the header to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        check_room(buf, READ_REQUEST_LEN)?;
        set_u32(buf, 0, self.sink_stag);
        set_u64(buf, 4, self.sink_to);
        set_u32(buf, 12, self.size);
        set_u32(buf, 16, self.source_stag);
        set_u64(buf, 20, self.source_to);
        Ok(READ_REQUEST_LEN)
    }

    /// The header as an array.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut out = [0u8; READ_REQUEST_LEN];
        // The array is exactly the header's length.
        let _ = self.emit(&mut out);
        out
    }
}

/// A DDP segment read as part of an RDMAP message: the DDP header, the
/// RDMAP control field it carries, and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmapSegment<'a> {
    /// The DDP header.
    pub ddp: DdpRepr,
    /// The RDMAP control field from `RsvdULP[0]`.
    pub control: RdmapControl,
    /// The payload after the DDP header (for a Read Request or Terminate,
    /// their RDMAP header and what follows).
    pub payload: &'a [u8],
}

impl<'a> RdmapSegment<'a> {
    /// Parses a ULPDU: the DDP header (version 1), the RDMAP control field
    /// (version 1, a known opcode) and checks that the opcode travels in the
    /// buffer model the segment uses. Inlined, so that its caller gets
    /// the fields in registers rather than a `Result` to read back from
    /// memory.
    #[inline]
    pub fn parse(ulpdu: &'a [u8]) -> Result<Self> {
        let segment = DdpSegment::new_checked(ulpdu)?;
        DdpRepr::check(&segment)?;
        let ddp = DdpRepr::read(&segment);
        let control = RdmapControl::parse(ddp.ulp_control)?;
        if control.opcode.tagged() != ddp.tagged() {
            return Err(WireError::OpcodeModelMismatch {
                opcode: control.opcode as u8,
                tagged: ddp.tagged(),
            });
        }
        Ok(Self {
            ddp,
            control,
            payload: &ulpdu[ddp.header_len()..],
        })
    }

    /// A whole message in one segment (DDP's Last flag set, RFC 5041
    /// section 5.1): `opcode` on the buffer `model`, carrying `payload`.
    pub fn whole_message(opcode: Opcode, model: BufferModel, payload: &'a [u8]) -> Self {
        Self {
            ddp: DdpRepr {
                last: true,
                reserved: 0,
                ulp_control: 0,
                model,
            },
            control: RdmapControl::new(opcode),
            payload,
        }
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.control.opcode
    }

    /// The STag a Send with Invalidate names, if this is one.
    pub fn invalidate_stag(&self) -> Option<u32> {
        match self.ddp.model {
            BufferModel::Untagged { ulp_word, .. } if self.opcode().invalidates() => Some(ulp_word),
            _ => None,
        }
    }

    /// Length of the emitted ULPDU: header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.ddp.header_len() + self.payload.len()
    }

    /// Writes header and payload to the start of `buf`; the DDP header's
    /// `RsvdULP[0]` is taken from `control`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        check_room(buf, len)?;
        let ddp = DdpRepr {
            ulp_control: self.control.to_u8(),
            ..self.ddp
        };
        let header_len = ddp.emit(buf)?;
        buf[header_len..len].copy_from_slice(self.payload);
        Ok(len)
    }

    /// The emitted ULPDU as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.buffer_len()];
        // The vector is exactly the segment's length.
        let _ = self.emit(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_field_round_trip() {
        for opcode in Opcode::ALL {
            let control = RdmapControl::new(opcode);
            assert_eq!(control.to_u8(), 0x40 | opcode as u8);
            assert_eq!(RdmapControl::parse(control.to_u8()).unwrap(), control);
        }
        for op in 0xC..=0xF {
            assert_eq!(
                RdmapControl::parse(0x40 | op).unwrap_err(),
                WireError::UnknownOpcode(op)
            );
        }
        assert_eq!(
            RdmapControl::parse(0x03).unwrap_err(),
            WireError::BadRdmapVersion(0)
        );
        assert_eq!(
            RdmapControl::parse(0xC3).unwrap_err(),
            WireError::BadRdmapVersion(3)
        );
    }

    #[test]
    fn siw_read_request() {
        // "RDMA Read Request from siw" (tests/data/siw/tap/py-client-7320).
        let ulpdu: Vec<u8> = [
            &[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0][..],
            &[
                0xb5, 0xcf, 0xf1, 0x00, 0x00, 0x00, 0x55, 0xd9, 0xd4, 0x75, 0x15, 0x50, 0x00, 0x00,
                0x00, 0x40, 0x11, 0x22, 0x33, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,
            ],
        ]
        .concat();
        let segment = RdmapSegment::parse(&ulpdu).unwrap();
        assert_eq!(segment.opcode(), Opcode::ReadRequest);
        let request = ReadRequest::parse(segment.payload).unwrap();
        assert_eq!(
            request,
            ReadRequest {
                sink_stag: 0xb5cf_f100,
                sink_to: 0x55d9_d475_1550,
                size: 64,
                source_stag: 0x1122_3300,
                source_to: 0x7f00_0000_1000,
            }
        );
        assert_eq!(request.to_bytes(), segment.payload);
        assert_eq!(segment.to_vec(), ulpdu);
    }

    #[test]
    fn opcode_in_wrong_model() {
        // An RDMA Write (opcode 0) in an untagged segment.
        let ulpdu = [0x41, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            RdmapSegment::parse(&ulpdu).unwrap_err(),
            WireError::OpcodeModelMismatch {
                opcode: 0,
                tagged: false
            }
        );
    }

    #[test]
    fn send_with_invalidate_names_its_stag() {
        let ulpdu = [
            0x41, 0x44, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        let segment = RdmapSegment::parse(&ulpdu).unwrap();
        assert_eq!(segment.invalidate_stag(), Some(0xdead_beef));
        assert!(segment.opcode().invalidates());
    }

    #[test]
    fn queue_numbers() {
        assert_eq!(Opcode::Send.queue_number(), Some(QN_SEND));
        assert_eq!(Opcode::ReadRequest.queue_number(), Some(QN_READ_REQUEST));
        assert_eq!(Opcode::Terminate.queue_number(), Some(QN_TERMINATE));
        assert_eq!(Opcode::AtomicRequest.queue_number(), Some(QN_READ_REQUEST));
        assert_eq!(
            Opcode::AtomicResponse.queue_number(),
            Some(QN_ATOMIC_RESPONSE)
        );
        assert_eq!(Opcode::ImmediateData.queue_number(), Some(QN_SEND));
        assert_eq!(Opcode::RdmaWrite.queue_number(), None);
        assert!(Opcode::ReadResponse.tagged());
    }

    #[test]
    fn truncated_read_request() {
        assert!(ReadRequest::parse(&[0u8; 27]).is_err());
    }
}
