//! DDP segment headers (RFC 5041 section 4) and segmentation of a message
//! into DDP segments (RFC 5041 section 5.2).
//!
//! ```text
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |T|L| Rsvd  | DV|  RsvdULP[0]   |   control field (RFC 5041 4.2)
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! tagged, 14 octets:   control | STag (32) | TO (64)
//! untagged, 18 octets: control | RsvdULP[8:39] (32) | QN (32) | MSN (32) | MO (32)
//! ```
//!
//! `RsvdULP[0]`, the second octet, belongs to the upper layer: RDMAP keeps
//! its control field there ([`crate::wire::rdmap`]). `RsvdULP[8:39]` carries
//! the STag to invalidate for RDMAP's Send with Invalidate.

use super::error::{check_len, check_room, Result, WireError};
use super::field::{get_u32, get_u64, set_u32, set_u64};

/// The DDP version this crate speaks (RFC 5041 section 4.2).
pub const DDP_VERSION: u8 = 1;
/// Length of a tagged header.
pub const TAGGED_HEADER_LEN: usize = 14;
/// Length of an untagged header.
pub const UNTAGGED_HEADER_LEN: usize = 18;

/// T: the segment targets a tagged buffer.
const CTRL_TAGGED: u8 = 0x80;
/// L: the last segment of its message.
const CTRL_LAST: u8 = 0x40;
/// Rsvd: four reserved bits, sent as zero and not checked.
const CTRL_RESERVED: u8 = 0x3C;
/// DV: the DDP version.
const CTRL_VERSION: u8 = 0x03;

/// Offsets of the fields.
mod field {
    pub const CONTROL: usize = 0;
    pub const ULP_CONTROL: usize = 1;
    pub const STAG: usize = 2;
    pub const TO: usize = 6;
    pub const ULP_WORD: usize = 2;
    pub const QN: usize = 6;
    pub const MSN: usize = 10;
    pub const MO: usize = 14;
}

/// A zero-copy view of a DDP segment: header and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpSegment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DdpSegment<T> {
    /// Wraps `buffer` without checking its length.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking it holds the header its T bit calls for.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let segment = Self::new_unchecked(buffer);
        check_len(segment.buffer.as_ref(), 1)?;
        check_len(segment.buffer.as_ref(), segment.header_len())?;
        Ok(segment)
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn control(&self) -> u8 {
        self.buffer.as_ref()[field::CONTROL]
    }

    /// T: tagged buffer model.
    pub fn tagged(&self) -> bool {
        self.control() & CTRL_TAGGED != 0
    }

    /// L: last segment of the message.
    pub fn last(&self) -> bool {
        self.control() & CTRL_LAST != 0
    }

    /// The four reserved control bits.
    pub fn reserved(&self) -> u8 {
        (self.control() & CTRL_RESERVED) >> 2
    }

    /// DV, the DDP version.
    pub fn version(&self) -> u8 {
        self.control() & CTRL_VERSION
    }

    /// `RsvdULP[0]`: the upper layer's control octet (RDMAP's control field).
    pub fn ulp_control(&self) -> u8 {
        self.buffer.as_ref()[field::ULP_CONTROL]
    }

    /// Length of the header: 14 tagged, 18 untagged.
    pub fn header_len(&self) -> usize {
        if self.tagged() {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }

    /// Tagged: the data sink's STag.
    pub fn stag(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::STAG)
    }

    /// Tagged: the tagged offset.
    pub fn tagged_offset(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::TO)
    }

    /// Untagged: `RsvdULP[8:39]` (RDMAP's Invalidate STag).
    pub fn ulp_word(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ULP_WORD)
    }

    /// Untagged: the queue number.
    pub fn queue_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::QN)
    }

    /// Untagged: the message sequence number.
    pub fn msn(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::MSN)
    }

    /// Untagged: the message offset.
    pub fn message_offset(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::MO)
    }

    /// The payload after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// The fields that differ between the two buffer models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferModel {
    /// The segment is placed at `to` in the buffer `stag` names.
    Tagged {
        /// Data sink STag.
        stag: u32,
        /// Tagged offset.
        to: u64,
    },
    /// The segment is placed at `mo` of message `msn` on queue `qn`.
    Untagged {
        /// `RsvdULP[8:39]`: RDMAP's Invalidate STag, otherwise 0.
        ulp_word: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number (starts at 1 per queue, wraps).
        msn: u32,
        /// Message offset.
        mo: u32,
    },
}

/// A parsed DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DdpRepr {
    /// L: last segment of the message.
    pub last: bool,
    /// The four reserved control bits, kept for exact re-emission; uwarp
    /// sends 0.
    pub reserved: u8,
    /// `RsvdULP[0]`, the upper layer's control octet.
    pub ulp_control: u8,
    /// Tagged or untagged fields.
    pub model: BufferModel,
}

impl DdpRepr {
    /// Parses the header of `segment`; refuses a DDP version other than 1.
    pub fn parse<T: AsRef<[u8]>>(segment: &DdpSegment<T>) -> Result<Self> {
        Self::check(segment)?;
        Ok(Self::read(segment))
    }

    /// What [`parse`](Self::parse) refuses: a header longer than the
    /// segment, a DDP version other than 1.
    pub(crate) fn check<T: AsRef<[u8]>>(segment: &DdpSegment<T>) -> Result<()> {
        check_len(segment.buffer.as_ref(), segment.header_len())?;
        if segment.version() != DDP_VERSION {
            return Err(WireError::BadDdpVersion(segment.version()));
        }
        Ok(())
    }

    /// The header of a `segment` that passed [`check`](Self::check). Apart
    /// from `parse` so that a caller checking first gets the header built
    /// in place: a `Result` of it is written to the stack field by field
    /// and read back whole, which the CPU cannot forward from its store
    /// buffer (the stall cost `RdmapSegment::parse` half its time).
    /// Inlined for the same reason: returned, it is that write and read.
    #[inline(always)]
    pub(crate) fn read<T: AsRef<[u8]>>(segment: &DdpSegment<T>) -> Self {
        let model = if segment.tagged() {
            BufferModel::Tagged {
                stag: segment.stag(),
                to: segment.tagged_offset(),
            }
        } else {
            BufferModel::Untagged {
                ulp_word: segment.ulp_word(),
                qn: segment.queue_number(),
                msn: segment.msn(),
                mo: segment.message_offset(),
            }
        };
        Self {
            last: segment.last(),
            reserved: segment.reserved(),
            ulp_control: segment.ulp_control(),
            model,
        }
    }

    /// Whether the header is tagged.
    pub fn tagged(&self) -> bool {
        matches!(self.model, BufferModel::Tagged { .. })
    }

    /// Length of the emitted header.
    pub fn header_len(&self) -> usize {
        if self.tagged() {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }

    /// The control octet this header emits.
    pub fn control(&self) -> u8 {
        let mut control = DDP_VERSION | (self.reserved << 2) & CTRL_RESERVED;
        if self.tagged() {
            control |= CTRL_TAGGED;
        }
        if self.last {
            control |= CTRL_LAST;
        }
        control
    }

    /// Writes the header to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.header_len();
        check_room(buf, len)?;
        buf[field::CONTROL] = self.control();
        buf[field::ULP_CONTROL] = self.ulp_control;
        match self.model {
            BufferModel::Tagged { stag, to } => {
                set_u32(buf, field::STAG, stag);
                set_u64(buf, field::TO, to);
            }
            BufferModel::Untagged {
                ulp_word,
                qn,
                msn,
                mo,
            } => {
                set_u32(buf, field::ULP_WORD, ulp_word);
                set_u32(buf, field::QN, qn);
                set_u32(buf, field::MSN, msn);
                set_u32(buf, field::MO, mo);
            }
        }
        Ok(len)
    }
}

/// The payload lengths of the DDP segments that carry a message of
/// `message_len` octets when each segment (header included) may be at most
/// `mulpdu` octets (RFC 5041 section 5.2). A zero-length message is one
/// segment with no payload. Yields nothing when `mulpdu` cannot hold the
/// header and at least one payload octet.
pub fn segment_payload_lens(
    message_len: usize,
    mulpdu: usize,
    tagged: bool,
) -> impl Iterator<Item = usize> {
    let header = if tagged {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    };
    let room = mulpdu.saturating_sub(header);
    let count = if room == 0 {
        0
    } else {
        message_len.div_ceil(room).max(1)
    };
    (0..count).map(move |i| (message_len - i * room).min(room))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc5041_segmentation_example() {
        // RFC 5041 section 5.2: a 2048-octet message at MULPDU 1500.
        let untagged: Vec<_> = segment_payload_lens(2048, 1500, false).collect();
        assert_eq!(untagged, [1482, 566]);
        let tagged: Vec<_> = segment_payload_lens(2048, 1500, true).collect();
        assert_eq!(tagged, [1486, 562]);
    }

    #[test]
    fn segmentation_edges() {
        assert_eq!(
            segment_payload_lens(0, 1500, false).collect::<Vec<_>>(),
            [0]
        );
        assert_eq!(
            segment_payload_lens(1482, 1500, false).collect::<Vec<_>>(),
            [1482]
        );
        assert_eq!(
            segment_payload_lens(1483, 1500, false).collect::<Vec<_>>(),
            [1482, 1]
        );
        assert_eq!(segment_payload_lens(10, 18, false).count(), 0);
        assert_eq!(segment_payload_lens(10, 14, true).count(), 0);
    }

    #[test]
    fn siw_read_response_header() {
        // "RDMA Read Response to siw" (tests/data/siw/tap/py-client-7320).
        let header = [
            0xc1, 0x42, 0xb5, 0xcf, 0xf1, 0x00, 0x00, 0x00, 0x55, 0xd9, 0xd4, 0x75, 0x15, 0x50,
        ];
        let segment = DdpSegment::new_checked(&header[..]).unwrap();
        let repr = DdpRepr::parse(&segment).unwrap();
        assert_eq!(
            repr,
            DdpRepr {
                last: true,
                reserved: 0,
                ulp_control: 0x42,
                model: BufferModel::Tagged {
                    stag: 0xb5cf_f100,
                    to: 0x55d9_d475_1550
                }
            }
        );
        let mut out = [0u8; 14];
        assert_eq!(repr.emit(&mut out).unwrap(), 14);
        assert_eq!(out, header);
    }

    #[test]
    fn untagged_header_and_version_check() {
        let header = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0xaa,
        ];
        let segment = DdpSegment::new_checked(&header[..]).unwrap();
        assert_eq!(segment.payload(), &[0xaa]);
        let repr = DdpRepr::parse(&segment).unwrap();
        assert!(matches!(
            repr.model,
            BufferModel::Untagged {
                qn: 5,
                msn: 1,
                mo: 0,
                ulp_word: 0
            }
        ));
        let mut bad = header;
        bad[0] = 0x42;
        let segment = DdpSegment::new_checked(&bad[..]).unwrap();
        assert_eq!(
            DdpRepr::parse(&segment).unwrap_err(),
            WireError::BadDdpVersion(2)
        );
    }

    #[test]
    fn truncated_headers() {
        assert!(DdpSegment::new_checked(&[][..]).is_err());
        assert_eq!(
            DdpSegment::new_checked(&[0x41u8; 17][..]).unwrap_err(),
            WireError::Truncated {
                needed: 18,
                available: 17
            }
        );
        assert!(DdpSegment::new_checked(&[0xc1u8; 13][..]).is_err());
        assert!(DdpSegment::new_checked(&[0xc1u8; 14][..]).is_ok());
    }
}
