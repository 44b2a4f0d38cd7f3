//! MPA startup frames: the Request and Reply of RFC 5044 section 7.1, with
//! the enhanced connection-establishment block of RFC 6581 section 9.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                Key: "MPA ID Req Frame" / "MPA ID Rep Frame"   |
//! |                          (16 octets)                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |M|C|R|S| Res   |     Rev       |          PD_Length            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|B|           IRD             |C|D|          ORD              |  when S = 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~                 private data (PD_Length octets in all)        ~
//! ```

use super::error::{check_len, check_room, emitted, Result, WireError};
use super::field::{get_u16, set_u16};

/// Length of the key that opens every startup frame.
pub const KEY_LEN: usize = 16;
/// The key of an MPA Request.
pub const REQUEST_KEY: &[u8; KEY_LEN] = b"MPA ID Req Frame";
/// The key of an MPA Reply.
pub const REPLY_KEY: &[u8; KEY_LEN] = b"MPA ID Rep Frame";
/// Length of a startup frame without private data.
pub const HEADER_LEN: usize = 20;
/// The most private data a startup frame may carry (RFC 5044 section 7.1).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Length of the RFC 6581 enhanced block at the start of the private data.
pub const ENHANCED_BLOCK_LEN: usize = 4;
/// The largest IRD or ORD value; it also means "no automatic IRD/ORD
/// negotiation" (RFC 6581 section 9.1).
pub const IRD_ORD_MAX: u16 = 0x3FFF;

/// M: the sender of this frame wants Markers in what it receives.
const FLAG_MARKERS: u8 = 0x80;
/// C: the sender of this frame wants CRCs.
const FLAG_CRC: u8 = 0x40;
/// R: the responder rejects the connection (Reply only).
const FLAG_REJECT: u8 = 0x20;
/// S: the private data begins with the RFC 6581 enhanced block.
const FLAG_ENHANCED: u8 = 0x10;
/// The low four bits: reserved, sent as zero, ignored on receipt.
const FLAGS_RESERVED: u8 = 0x0F;

/// Offsets of the fixed fields.
mod field {
    use core::ops::Range;
    pub const KEY: Range<usize> = 0..16;
    pub const FLAGS: usize = 16;
    pub const REV: usize = 17;
    pub const PD_LENGTH: usize = 18;
    pub const PRIVATE_DATA: usize = 20;
}

/// Whether a startup frame is the initiator's Request or the responder's
/// Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// `MPA ID Req Frame`, sent by the initiator.
    Request,
    /// `MPA ID Rep Frame`, sent by the responder.
    Reply,
}

impl FrameKind {
    /// The 16-octet key that identifies this kind of frame.
    pub fn key(self) -> &'static [u8; KEY_LEN] {
        match self {
            Self::Request => REQUEST_KEY,
            Self::Reply => REPLY_KEY,
        }
    }
}

/// The MPA revision of a startup frame (RFC 5044 section 7.1,
/// RFC 6581 section 8, RFC 5044 Appendix C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Revision {
    /// Revision 0: pre-IETF RDMAC peers (RFC 5044 Appendix C).
    Rdmac = 0,
    /// Revision 1: RFC 5044.
    Rfc5044 = 1,
    /// Revision 2: RFC 6581 enhanced connection establishment.
    Enhanced = 2,
}

impl Revision {
    /// The revision carried by the Rev octet, if it is one MPA defines.
    pub fn from_u8(rev: u8) -> Result<Self> {
        match rev {
            0 => Ok(Self::Rdmac),
            1 => Ok(Self::Rfc5044),
            2 => Ok(Self::Enhanced),
            other => Err(WireError::UnknownMpaRevision(other)),
        }
    }
}

/// The RFC 6581 section 9 block: IRD/ORD and the peer-to-peer RTR options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EnhancedBlock {
    /// A: the connection uses the peer-to-peer model with an RTR message.
    pub peer_to_peer: bool,
    /// B: a zero-length Send may serve as the RTR.
    pub send_rtr: bool,
    /// C: a zero-length RDMA Write may serve as the RTR.
    pub write_rtr: bool,
    /// D: a zero-length RDMA Read may serve as the RTR.
    pub read_rtr: bool,
    /// Inbound RDMA Read queue depth (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits).
    pub ord: u16,
}

impl EnhancedBlock {
    /// Parses the first four octets of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        check_len(buf, ENHANCED_BLOCK_LEN)?;
        let first = get_u16(buf, 0);
        let second = get_u16(buf, 2);
        Ok(Self {
            peer_to_peer: first & 0x8000 != 0,
            send_rtr: first & 0x4000 != 0,
            ird: first & IRD_ORD_MAX,
            write_rtr: second & 0x8000 != 0,
            read_rtr: second & 0x4000 != 0,
            ord: second & IRD_ORD_MAX,
        })
    }

    /// The four octets of this block; refuses IRD or ORD above 0x3FFF.
    pub fn to_bytes(&self) -> Result<[u8; ENHANCED_BLOCK_LEN]> {
        for value in [self.ird, self.ord] {
            if value > IRD_ORD_MAX {
                return Err(WireError::IrdOrdOutOfRange(value));
            }
        }
        let first = u16::from(self.peer_to_peer) << 15 | u16::from(self.send_rtr) << 14 | self.ird;
        let second = u16::from(self.write_rtr) << 15 | u16::from(self.read_rtr) << 14 | self.ord;
        let mut out = [0u8; ENHANCED_BLOCK_LEN];
        set_u16(&mut out, 0, first);
        set_u16(&mut out, 2, second);
        Ok(out)
    }
}

/// A zero-copy view of a startup frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> StartupFrame<T> {
    /// Wraps `buffer` without checking its length; accessors may panic on a
    /// short buffer. Use [`Self::new_checked`] for input from the network.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking that it holds the fixed header and the
    /// private data PD_Length announces. A short buffer gives
    /// [`WireError::Truncated`] whose `needed` is the whole frame's length
    /// once the header is in, so a stream reader knows how long to wait.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Wraps `buffer` after checking only that it holds the 20-octet fixed
    /// header, so that every field of a frame whose private data is cut
    /// short or over the limit can still be read;
    /// [`Self::present_private_data`] gives what private data there is.
    pub fn new_header_checked(buffer: T) -> Result<Self> {
        check_len(buffer.as_ref(), HEADER_LEN)?;
        Ok(Self::new_unchecked(buffer))
    }

    /// Checks the buffer against the header and PD_Length.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check_len(buf, HEADER_LEN)?;
        let pd_length = usize::from(self.pd_length());
        if pd_length > MAX_PRIVATE_DATA {
            return Err(WireError::PrivateDataTooLong(pd_length));
        }
        check_len(buf, HEADER_LEN + pd_length)
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The frame's kind, from its key.
    pub fn kind(&self) -> Result<FrameKind> {
        let key = &self.buffer.as_ref()[field::KEY];
        if key == REQUEST_KEY {
            Ok(FrameKind::Request)
        } else if key == REPLY_KEY {
            Ok(FrameKind::Reply)
        } else {
            Err(WireError::BadMpaKey)
        }
    }

    /// The flags octet as sent.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// M: the sender wants Markers in what it receives.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_MARKERS != 0
    }

    /// C: the sender wants CRCs.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_CRC != 0
    }

    /// R: the connection is rejected.
    pub fn reject(&self) -> bool {
        self.flags() & FLAG_REJECT != 0
    }

    /// S: the private data starts with the enhanced block.
    pub fn enhanced(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }

    /// The four reserved flag bits (siw's experimental GSO flag is 0x08).
    pub fn reserved_flags(&self) -> u8 {
        self.flags() & FLAGS_RESERVED
    }

    /// The Rev octet as sent.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref()[field::REV]
    }

    /// PD_Length.
    pub fn pd_length(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PD_LENGTH)
    }

    /// Length of the whole frame: header plus private data.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_length())
    }

    /// All PD_Length octets of private data, enhanced block included.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA..self.frame_len()]
    }

    /// The private data octets the buffer holds, at most PD_Length of
    /// them: all of them for a frame that passed [`Self::new_checked`].
    pub fn present_private_data(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = buf.len().min(self.frame_len());
        buf.get(field::PRIVATE_DATA..end).unwrap_or_default()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> StartupFrame<T> {
    /// Writes the key of `kind`.
    pub fn set_kind(&mut self, kind: FrameKind) {
        self.buffer.as_mut()[field::KEY].copy_from_slice(kind.key());
    }

    /// Writes the flags octet.
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    /// Writes the Rev octet.
    pub fn set_revision(&mut self, rev: u8) {
        self.buffer.as_mut()[field::REV] = rev;
    }

    /// Writes PD_Length.
    pub fn set_pd_length(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::PD_LENGTH, len);
    }

    /// The private data area, PD_Length octets long.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let end = self.frame_len();
        &mut self.buffer.as_mut()[field::PRIVATE_DATA..end]
    }
}

/// A parsed startup frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StartupRepr<'a> {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M: the sender wants Markers in what it receives.
    pub markers: bool,
    /// C: the sender wants CRCs.
    pub crc: bool,
    /// R: the responder rejects the connection.
    pub reject: bool,
    /// The reserved low four flag bits, kept so that a frame re-emits
    /// exactly as it arrived; uwarp itself sends 0.
    pub reserved_flags: u8,
    /// The revision.
    pub revision: Revision,
    /// The enhanced block, present exactly when the S flag is set.
    pub enhanced: Option<EnhancedBlock>,
    /// The application's private data (after the enhanced block if any).
    pub private_data: &'a [u8],
}

impl<'a> StartupRepr<'a> {
    /// Parses a frame, validating key, revision, PD_Length and the
    /// enhanced block.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &StartupFrame<&'a T>) -> Result<Self> {
        frame.check_len()?;
        let kind = frame.kind()?;
        let revision = Revision::from_u8(frame.revision())?;
        let buf: &'a [u8] = frame.buffer.as_ref();
        let all_pd = &buf[field::PRIVATE_DATA..frame.frame_len()];
        let (enhanced, private_data) = if frame.enhanced() {
            if all_pd.len() < ENHANCED_BLOCK_LEN {
                return Err(WireError::MissingEnhancedBlock);
            }
            let block = EnhancedBlock::parse(all_pd)?;
            (Some(block), &all_pd[ENHANCED_BLOCK_LEN..])
        } else {
            (None, all_pd)
        };
        Ok(Self {
            kind,
            markers: frame.markers(),
            crc: frame.crc(),
            reject: frame.reject(),
            reserved_flags: frame.reserved_flags(),
            revision,
            enhanced,
            private_data,
        })
    }

    /// Parses the startup frame at the start of `buf`; returns it with its
    /// length on the wire.
    pub fn parse_bytes(buf: &'a [u8]) -> Result<(Self, usize)> {
        let frame = StartupFrame::new_checked(buf)?;
        let len = frame.frame_len();
        Ok((Self::parse(&frame)?, len))
    }

    /// PD_Length of the emitted frame: enhanced block plus private data.
    pub fn pd_length(&self) -> usize {
        self.private_data.len() + self.enhanced.map_or(0, |_| ENHANCED_BLOCK_LEN)
    }

    /// Length of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_length()
    }

    /// The flags octet this representation emits.
    pub fn flags(&self) -> u8 {
        let mut flags = self.reserved_flags & FLAGS_RESERVED;
        for (set, bit) in [
            (self.markers, FLAG_MARKERS),
            (self.crc, FLAG_CRC),
            (self.reject, FLAG_REJECT),
            (self.enhanced.is_some(), FLAG_ENHANCED),
        ] {
            if set {
                flags |= bit;
            }
        }
        flags
    }

    /// Writes the frame to the start of `buf` and returns its length.
    /// Refuses private data over 512 octets and IRD/ORD over 0x3FFF.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let pd_length = self.pd_length();
        if pd_length > MAX_PRIVATE_DATA {
            return Err(WireError::PrivateDataTooLong(pd_length));
        }
        let block = self.enhanced.map(|b| b.to_bytes()).transpose()?;
        let len = self.buffer_len();
        check_room(buf, len)?;
        let mut frame = StartupFrame::new_unchecked(&mut buf[..len]);
        frame.set_kind(self.kind);
        frame.set_flags(self.flags());
        frame.set_revision(self.revision as u8);
        // Cannot truncate: pd_length <= 512 was checked above.
        frame.set_pd_length(pd_length as u16);
        let pd = frame.private_data_mut();
        let user_pd = match block {
            Some(block) => {
                pd[..ENHANCED_BLOCK_LEN].copy_from_slice(&block);
                &mut pd[ENHANCED_BLOCK_LEN..]
            }
            None => pd,
        };
        user_pd.copy_from_slice(self.private_data);
        Ok(len)
    }

    /// The emitted frame as a vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        emitted(self.buffer_len(), |out| self.emit(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::hex;

    #[test]
    fn siw_request_revision_2() {
        // tests/data/siw/tap/mpa-req-from-siw-7301.bin
        let bytes = hex("4d504120494420526571204672616d651002000400010001");
        let (repr, len) = StartupRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(len, 24);
        assert_eq!(repr.kind, FrameKind::Request);
        assert_eq!(repr.revision, Revision::Enhanced);
        assert!(!repr.markers && !repr.crc && !repr.reject);
        let block = repr.enhanced.unwrap();
        assert_eq!((block.ird, block.ord), (1, 1));
        assert!(!block.peer_to_peer);
        assert!(repr.private_data.is_empty());
        assert_eq!(repr.to_vec().unwrap(), bytes);
    }

    #[test]
    fn siw_peer_to_peer_request() {
        // tests/data/siw/tap/mpa-req-from-siw-7304.bin: A, C and D set.
        let bytes = hex("4d504120494420526571204672616d65100200048001c001");
        let (repr, _) = StartupRepr::parse_bytes(&bytes).unwrap();
        let block = repr.enhanced.unwrap();
        assert!(block.peer_to_peer && !block.send_rtr && block.write_rtr && block.read_rtr);
        assert_eq!(repr.to_vec().unwrap(), bytes);
    }

    #[test]
    fn reserved_flag_survives_round_trip() {
        // siw's experimental GSO flag, 0x08 (mpa-req-from-siw-7305.bin).
        let bytes = hex("4d504120494420526571204672616d651802000400010001");
        let (repr, _) = StartupRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(repr.reserved_flags, 0x08);
        assert_eq!(repr.to_vec().unwrap(), bytes);
    }

    #[test]
    fn reject_reply() {
        // siw's answer to a Markers request (probe-7324-markers.rx.bin).
        let bytes = hex("4d504120494420526570204672616d653002000400000000");
        let (repr, _) = StartupRepr::parse_bytes(&bytes).unwrap();
        assert_eq!(repr.kind, FrameKind::Reply);
        assert!(repr.reject);
        assert_eq!(repr.enhanced, Some(EnhancedBlock::default()));
    }

    #[test]
    fn truncated_frame_reports_whole_length() {
        let bytes = hex("4d504120494420526571204672616d651002000400010001");
        assert_eq!(
            StartupFrame::new_checked(&bytes[..10]).unwrap_err(),
            WireError::Truncated {
                needed: 20,
                available: 10
            }
        );
        assert_eq!(
            StartupFrame::new_checked(&bytes[..22]).unwrap_err(),
            WireError::Truncated {
                needed: 24,
                available: 22
            }
        );
    }

    #[test]
    fn bad_key_revision_and_length() {
        let mut bytes = hex("4d504120494420526571204672616d6500010000");
        bytes[0] = b'X';
        assert_eq!(
            StartupRepr::parse_bytes(&bytes).unwrap_err(),
            WireError::BadMpaKey
        );
        bytes[0] = b'M';
        bytes[17] = 3;
        assert_eq!(
            StartupRepr::parse_bytes(&bytes).unwrap_err(),
            WireError::UnknownMpaRevision(3)
        );
        bytes[17] = 1;
        bytes[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(
            StartupRepr::parse_bytes(&bytes).unwrap_err(),
            WireError::PrivateDataTooLong(513)
        );
    }

    #[test]
    fn header_fields_of_a_frame_cut_short() {
        let bytes = hex("4d504120494420526571204672616d6550030008aabbcc");
        assert!(StartupFrame::new_checked(&bytes[..]).is_err());
        assert!(StartupFrame::new_header_checked(&bytes[..19]).is_err());
        let frame = StartupFrame::new_header_checked(&bytes[..]).unwrap();
        assert_eq!(
            (frame.kind(), frame.revision()),
            (Ok(FrameKind::Request), 3)
        );
        assert!(frame.crc() && frame.enhanced() && !frame.markers());
        assert_eq!(frame.pd_length(), 8);
        assert_eq!(frame.present_private_data(), &[0xaa, 0xbb, 0xcc]);
    }

    #[test]
    fn enhanced_flag_without_block() {
        let bytes = hex("4d504120494420526571204672616d6510020002aaaa");
        assert_eq!(
            StartupRepr::parse_bytes(&bytes).unwrap_err(),
            WireError::MissingEnhancedBlock
        );
    }

    #[test]
    fn emit_refuses_what_the_wire_cannot_carry() {
        let big = [0u8; 509];
        let repr = StartupRepr {
            kind: FrameKind::Request,
            markers: false,
            crc: true,
            reject: false,
            reserved_flags: 0,
            revision: Revision::Enhanced,
            enhanced: Some(EnhancedBlock::default()),
            private_data: &big,
        };
        assert_eq!(
            repr.to_vec().unwrap_err(),
            WireError::PrivateDataTooLong(513)
        );
        let repr = StartupRepr {
            private_data: &big[..508],
            ..repr
        };
        assert_eq!(repr.to_vec().unwrap().len(), HEADER_LEN + MAX_PRIVATE_DATA);
        let repr = StartupRepr {
            enhanced: Some(EnhancedBlock {
                ird: 0x4000,
                ..EnhancedBlock::default()
            }),
            ..repr
        };
        assert_eq!(
            repr.to_vec().unwrap_err(),
            WireError::IrdOrdOutOfRange(0x4000)
        );
    }

    #[test]
    fn no_negotiation_value() {
        let block = EnhancedBlock {
            ird: IRD_ORD_MAX,
            ord: IRD_ORD_MAX,
            ..EnhancedBlock::default()
        };
        let bytes = block.to_bytes().unwrap();
        assert_eq!(bytes, [0x3f, 0xff, 0x3f, 0xff]);
        assert_eq!(EnhancedBlock::parse(&bytes).unwrap(), block);
    }
}
