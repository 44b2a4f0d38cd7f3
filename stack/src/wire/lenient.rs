//! Every field of a DDP segment carrying RDMAP read as it is, valid or
//! not (RFC 5041 section 4, RFC 5040 section 4.1): the DDP control bits
//! and version, the RDMAP control field, and the STag and TO or the queue
//! number, MSN and MO.
//!
//! [`RdmapSegment::parse`](super::rdmap::RdmapSegment::parse) refuses a
//! segment at its first invalid field and says why; a diagnostic tool
//! shows that reason beside the fields this module reads, down to the
//! last one the ULPDU holds.

use super::ddp::{BufferModel, DdpRepr, DdpSegment};
use super::rdmap::{Opcode, RawControl};

/// The fields of a ULPDU read as a DDP segment carrying RDMAP, unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSegment<'a> {
    /// T: tagged buffer model.
    pub tagged: bool,
    /// L: last segment of its message.
    pub last: bool,
    /// The four reserved DDP control bits.
    pub ddp_reserved: u8,
    /// DV, the DDP version.
    pub ddp_version: u8,
    /// `RsvdULP[0]` read as RDMAP's control field; `None` when the ULPDU
    /// ends after its first octet.
    pub rdmap: Option<RawControl>,
    /// The rest of the DDP header; `None` when the ULPDU is shorter than
    /// the header its T bit calls for.
    pub model: Option<BufferModel>,
    /// The octets after the DDP header (empty without a whole header).
    pub payload: &'a [u8],
}

impl<'a> RawSegment<'a> {
    /// Reads every field `ulpdu` holds; `None` when it is empty.
    pub fn read(ulpdu: &'a [u8]) -> Option<Self> {
        let control = DdpSegment::new_unchecked(ulpdu.get(..1)?);
        let rdmap = ulpdu.get(1).map(|&octet| RawControl::from_u8(octet));
        let (model, payload) = match DdpSegment::new_checked(ulpdu) {
            Ok(segment) => (
                Some(DdpRepr::read(&segment).model),
                &ulpdu[segment.header_len()..],
            ),
            Err(_) => (None, &ulpdu[ulpdu.len()..]),
        };
        Some(Self {
            tagged: control.tagged(),
            last: control.last(),
            ddp_reserved: control.reserved(),
            ddp_version: control.version(),
            rdmap,
            model,
            payload,
        })
    }

    /// The opcode, when the control field names one RFC 5040 or RFC 7306
    /// defines (whatever the versions say).
    pub fn opcode(&self) -> Option<Opcode> {
        self.rdmap.and_then(|c| Opcode::from_u8(c.opcode).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::hex;

    #[test]
    fn a_bad_ddp_version_hides_no_field() {
        // A Send with DV 2: the strict parser stops at the version.
        let ulpdu = hex("42430000000000000000000000070000000000aa");
        let raw = RawSegment::read(&ulpdu).unwrap();
        assert!(!raw.tagged && raw.last);
        assert_eq!(raw.ddp_version, 2);
        assert_eq!(raw.opcode(), Some(Opcode::Send));
        assert_eq!(
            raw.model,
            Some(BufferModel::Untagged {
                ulp_word: 0,
                qn: 0,
                msn: 7,
                mo: 0
            })
        );
        assert_eq!(raw.payload, &[0x00, 0xaa]);
    }

    #[test]
    fn unknown_opcodes_and_short_ulpdus() {
        let raw = RawSegment::read(&[0x41, 0x4c]).unwrap();
        let control = raw.rdmap.unwrap();
        assert_eq!((control.version, control.opcode), (1, 0xc));
        assert_eq!(raw.opcode(), None);
        assert_eq!((raw.model, raw.payload), (None, &[][..]));
        assert_eq!(RawSegment::read(&[0xc1]).unwrap().rdmap, None);
        assert!(RawSegment::read(&[]).is_none());
    }
}
