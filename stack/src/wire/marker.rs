//! MPA Markers (RFC 5044 sections 4.2 and 4.3): insertion into and removal
//! from FPDUs at any stream offset where an FPDU can start.
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           RESERVED            |            FPDUPTR            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Towards a peer that asked for them, a sender puts a Marker at every
//! stream offset that is a multiple of 512, counting from the first octet
//! of Full Operation (so the first Marker sits just before the first FPDU).
//! FPDUPTR is the number of octets from the start of the ULPDU_Length field
//! of the FPDU that holds the Marker to the Marker; a Marker that falls
//! exactly between two FPDUs belongs to the next one and carries 0. Markers
//! count towards the CRC of the FPDU that holds them.
//!
//! Offsets in this module are octets of the MPA stream since the start of
//! Full Operation, Markers included. FPDUs and Markers are multiples of 4
//! octets, so every FPDU starts at a multiple of 4; other offsets are
//! refused with [`WireError::UnalignedOffset`] (a Marker could otherwise
//! split the CRC field). Offsets wrap like TCP sequence numbers.

use super::crc::{self, CRC_LEN};
use super::error::{check_len, check_room, Result, WireError};
use super::field::{get_u16, set_u16};
use super::fpdu::{self, CrcVerdict, LENGTH_FIELD_LEN};

/// Distance between Markers in the stream.
pub const MARKER_INTERVAL: u64 = 512;
/// Length of a Marker.
pub const MARKER_LEN: usize = 4;

/// Whether a Marker starts at stream offset `pos`.
fn marker_at(pos: u64) -> bool {
    pos % MARKER_INTERVAL == 0
}

/// Octets from `pos` to the next Marker position (512 at a Marker position).
fn until_marker(pos: u64) -> usize {
    // At most 512, so the cast cannot truncate.
    (MARKER_INTERVAL - pos % MARKER_INTERVAL) as usize
}

/// Length on the wire of `len` octets of an FPDU (without Markers) whose
/// first octet would go at stream offset `offset`, once the Markers that
/// fall inside are added. A Marker at the end position is not counted: it
/// belongs to whatever comes next.
pub fn marked_len(offset: u64, len: usize) -> usize {
    let mut pos = offset;
    let mut left = len;
    while left > 0 {
        if marker_at(pos) {
            pos = pos.wrapping_add(MARKER_LEN as u64);
        }
        let run = left.min(until_marker(pos));
        pos = pos.wrapping_add(run as u64);
        left -= run;
    }
    // Bounded by len + 4 * (len / 508 + 1).
    pos.wrapping_sub(offset) as usize
}

/// The FPDUPTR a Marker at `pos` carries inside the FPDU that starts at
/// `offset`: octets from the ULPDU_Length field to the Marker, 0 for a
/// Marker just before the length field. Stream offsets wrap like TCP
/// sequence numbers; 2^64 is a multiple of 512, so the Marker grid does too.
fn fpdu_pointer(offset: u64, pos: u64) -> u64 {
    let header_pos = if marker_at(offset) {
        offset.wrapping_add(MARKER_LEN as u64)
    } else {
        offset
    };
    if pos == offset && marker_at(offset) {
        0
    } else {
        pos.wrapping_sub(header_pos)
    }
}

/// Refuses an FPDU start that is not a multiple of 4.
fn check_aligned(offset: u64) -> Result<()> {
    if offset % 4 == 0 {
        Ok(())
    } else {
        Err(WireError::UnalignedOffset(offset))
    }
}

/// Copies FPDU octets into a buffer, inserting Markers on the way.
struct MarkedWriter<'a> {
    out: &'a mut [u8],
    written: usize,
    /// Stream offset of the FPDU's first octet.
    offset: u64,
    pos: u64,
}

impl<'a> MarkedWriter<'a> {
    fn new(out: &'a mut [u8], offset: u64) -> Self {
        Self {
            out,
            written: 0,
            offset,
            pos: offset,
        }
    }

    /// Writes the Marker that is due at the current position, if any.
    fn marker_if_due(&mut self) -> Result<()> {
        if !marker_at(self.pos) {
            return Ok(());
        }
        let pointer = fpdu_pointer(self.offset, self.pos);
        let pointer = u16::try_from(pointer).map_err(|_| WireError::MarkerPointerOverflow)?;
        let marker = &mut self.out[self.written..self.written + MARKER_LEN];
        marker[..2].fill(0);
        set_u16(marker, 2, pointer);
        self.written += MARKER_LEN;
        self.pos = self.pos.wrapping_add(MARKER_LEN as u64);
        Ok(())
    }

    fn write(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            self.marker_if_due()?;
            let run = data.len().min(until_marker(self.pos));
            self.out[self.written..self.written + run].copy_from_slice(&data[..run]);
            self.written += run;
            self.pos = self.pos.wrapping_add(run as u64);
            data = &data[run..];
        }
        Ok(())
    }
}

/// Writes an FPDU with Markers: ULPDU_Length, the ULPDU (the concatenation
/// of `parts`), PAD, then the CRC (computed over everything before it,
/// Markers included) when `crc_on`, zeros otherwise. `offset` is the stream
/// offset of the FPDU's first octet. Returns the length written. Refuses a
/// ULPDU over 65535 octets, and one so long that a Marker's 16-bit FPDUPTR
/// cannot reach back to its header (over about 65000 octets).
pub fn emit(offset: u64, parts: &[&[u8]], crc_on: bool, out: &mut [u8]) -> Result<usize> {
    check_aligned(offset)?;
    let ulpdu_len = fpdu::ulpdu_len(parts)?;
    let total = marked_len(offset, fpdu::fpdu_len(ulpdu_len));
    check_room(out, total)?;
    let mut writer = MarkedWriter::new(&mut out[..total], offset);
    // Cannot truncate: fpdu::ulpdu_len() refuses more than 65535.
    writer.write(&(ulpdu_len as u16).to_be_bytes())?;
    for part in parts {
        writer.write(part)?;
    }
    writer.write(&[0u8; 3][..fpdu::pad_len(ulpdu_len)])?;
    // A Marker due just before the CRC belongs to this FPDU and is covered.
    writer.marker_if_due()?;
    let crc = if crc_on {
        crc::crc32c(&writer.out[..writer.written])
    } else {
        0
    };
    writer.write(&crc::to_wire(crc))?;
    Ok(writer.written)
}

/// [`emit`] into a new vector.
pub fn to_vec(offset: u64, parts: &[&[u8]], crc_on: bool) -> Result<Vec<u8>> {
    check_aligned(offset)?;
    let ulpdu_len = fpdu::ulpdu_len(parts)?;
    let mut out = vec![0; marked_len(offset, fpdu::fpdu_len(ulpdu_len))];
    emit(offset, parts, crc_on, &mut out)?;
    Ok(out)
}

/// Removes the Markers from the first `unmarked_len` octets of FPDU content
/// in `marked`, which starts at stream offset `offset`, checking each
/// Marker's FPDUPTR. Appends the content to `out`; returns the marked
/// length consumed.
fn strip_into(offset: u64, marked: &[u8], unmarked_len: usize, out: &mut Vec<u8>) -> Result<usize> {
    let mut pos = offset;
    let mut at = 0;
    let mut left = unmarked_len;
    while left > 0 {
        if marker_at(pos) {
            check_len(&marked[at..], MARKER_LEN)?;
            // The two low bits are reserved and treated as zero.
            let found = get_u16(marked, at + 2) & !0x3;
            let expected = fpdu_pointer(offset, pos);
            if u64::from(found) != expected {
                return Err(WireError::MarkerMismatch {
                    offset: pos,
                    found,
                    expected: u16::try_from(expected).unwrap_or(u16::MAX),
                });
            }
            at += MARKER_LEN;
            pos = pos.wrapping_add(MARKER_LEN as u64);
        }
        let run = left.min(until_marker(pos));
        check_len(&marked[at..], run)?;
        out.extend_from_slice(&marked[at..at + run]);
        at += run;
        pos = pos.wrapping_add(run as u64);
        left -= run;
    }
    Ok(at)
}

/// One FPDU read from a stream with Markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedFpdu {
    /// The FPDU with its Markers removed: length field, ULPDU, PAD, CRC.
    pub fpdu: Vec<u8>,
    /// Octets it took on the wire, Markers included.
    pub marked_len: usize,
    /// The CRC over the marked octets before the CRC field.
    pub computed_crc: u32,
}

impl MarkedFpdu {
    /// Reads the FPDU that starts at stream offset `offset` at the start of
    /// `marked`. Gives [`WireError::Truncated`] with the whole marked
    /// length as `needed` when the buffer is short, and
    /// [`WireError::MarkerMismatch`] when a Marker does not point at the
    /// FPDU's header.
    pub fn parse(offset: u64, marked: &[u8]) -> Result<Self> {
        check_aligned(offset)?;
        let mut header = Vec::with_capacity(LENGTH_FIELD_LEN);
        let marked_header_len = marked_len(offset, LENGTH_FIELD_LEN);
        check_len(marked, marked_header_len)?;
        strip_into(offset, marked, LENGTH_FIELD_LEN, &mut header)?;
        let unmarked_len = fpdu::fpdu_len(usize::from(get_u16(&header, 0)));
        let total = marked_len(offset, unmarked_len);
        check_len(marked, total)?;
        let mut fpdu = Vec::with_capacity(unmarked_len);
        strip_into(offset, marked, unmarked_len, &mut fpdu)?;
        Ok(Self {
            fpdu,
            marked_len: total,
            computed_crc: crc::crc32c(&marked[..total - CRC_LEN]),
        })
    }

    /// The ULPDU the FPDU carries.
    pub fn ulpdu(&self) -> &[u8] {
        let len = usize::from(get_u16(&self.fpdu, 0));
        &self.fpdu[LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + len]
    }

    /// Checks the CRC when `crc_on`.
    pub fn verify(&self, crc_on: bool) -> CrcVerdict {
        if !crc_on {
            return CrcVerdict::Off;
        }
        let carried = fpdu::Fpdu::new_unchecked(&self.fpdu[..]).crc_field();
        if carried == self.computed_crc {
            CrcVerdict::Good
        } else {
            CrcVerdict::Bad {
                carried,
                computed: self.computed_crc,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Send of RFC 5044 Figures 5 and 6: MSN `msn`, 24 zero octets.
    fn rfc_send(msn: u8) -> Vec<u8> {
        let mut ulpdu = vec![0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, msn, 0, 0, 0, 0];
        ulpdu.extend_from_slice(&[0; 24]);
        ulpdu
    }

    #[test]
    fn rfc5044_figure_5_first_fpdu_with_marker() {
        let bytes = to_vec(0, &[&rfc_send(1)], true).unwrap();
        assert_eq!(bytes.len(), 0x34);
        assert_eq!(&bytes[..6], &[0, 0, 0, 0, 0x00, 0x2a]);
        assert_eq!(&bytes[0x30..], &[0x52, 0x23, 0x99, 0x83]);
        let parsed = MarkedFpdu::parse(0, &bytes).unwrap();
        assert_eq!(parsed.marked_len, 0x34);
        assert_eq!(parsed.ulpdu(), &rfc_send(1)[..]);
        assert_eq!(parsed.verify(true), CrcVerdict::Good);
    }

    #[test]
    fn rfc5044_figure_6_marker_inside_fpdu() {
        let bytes = to_vec(0x1ec, &[&rfc_send(2)], true).unwrap();
        assert_eq!(bytes.len(), 0x220 - 0x1ec);
        // The Marker at stream offset 0x200 points 0x14 octets back.
        assert_eq!(&bytes[0x200 - 0x1ec..0x204 - 0x1ec], &[0, 0, 0, 0x14]);
        assert_eq!(&bytes[bytes.len() - 4..], &[0x84, 0x92, 0x58, 0x98]);
        let parsed = MarkedFpdu::parse(0x1ec, &bytes).unwrap();
        assert_eq!(parsed.ulpdu(), &rfc_send(2)[..]);
        assert_eq!(parsed.verify(true), CrcVerdict::Good);
    }

    #[test]
    fn marker_just_before_crc_is_covered() {
        // An FPDU of 48 octets starting at 512 - 44 = 468: the Marker at 512
        // falls right before the CRC field.
        let ulpdu = rfc_send(1);
        let bytes = to_vec(468, &[&ulpdu], true).unwrap();
        assert_eq!(bytes.len(), 52);
        assert_eq!(&bytes[44..48], &[0, 0, 0, 44]);
        let parsed = MarkedFpdu::parse(468, &bytes).unwrap();
        assert_eq!(parsed.verify(true), CrcVerdict::Good);
        assert_eq!(
            crc::from_wire(bytes[48..52].try_into().unwrap()),
            crc::crc32c(&bytes[..48])
        );
    }

    #[test]
    fn marker_inside_the_ddp_header_and_pad() {
        for offset in (400..=512).step_by(4) {
            for len in [0usize, 1, 3, 20, 600, 1500] {
                let ulpdu: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let bytes = to_vec(offset, &[&ulpdu], true).unwrap();
                assert_eq!(bytes.len(), marked_len(offset, fpdu::fpdu_len(len)));
                let parsed = MarkedFpdu::parse(offset, &bytes).unwrap();
                assert_eq!(parsed.ulpdu(), &ulpdu[..], "offset {offset} len {len}");
                assert_eq!(parsed.verify(true), CrcVerdict::Good);
            }
        }
    }

    #[test]
    fn marker_mismatch_is_detected() {
        let mut bytes = to_vec(0x1ec, &[&rfc_send(2)], false).unwrap();
        bytes[0x200 - 0x1ec + 3] = 0x18;
        assert_eq!(
            MarkedFpdu::parse(0x1ec, &bytes).unwrap_err(),
            WireError::MarkerMismatch {
                offset: 0x200,
                found: 0x18,
                expected: 0x14
            }
        );
        // The two low bits are ignored.
        bytes[0x200 - 0x1ec + 3] = 0x17;
        assert!(MarkedFpdu::parse(0x1ec, &bytes).is_ok());
    }

    #[test]
    fn truncated_marked_fpdu() {
        let bytes = to_vec(0, &[&rfc_send(1)], true).unwrap();
        assert_eq!(
            MarkedFpdu::parse(0, &bytes[..5]).unwrap_err(),
            WireError::Truncated {
                needed: 6,
                available: 5
            }
        );
        assert_eq!(
            MarkedFpdu::parse(0, &bytes[..40]).unwrap_err(),
            WireError::Truncated {
                needed: 0x34,
                available: 40
            }
        );
    }

    #[test]
    fn unaligned_offsets_are_refused() {
        assert_eq!(
            to_vec(2, &[&[1]], true).unwrap_err(),
            WireError::UnalignedOffset(2)
        );
        assert_eq!(
            MarkedFpdu::parse(511, &[0; 64]).unwrap_err(),
            WireError::UnalignedOffset(511)
        );
    }

    #[test]
    fn offsets_wrap_around_the_end_of_the_stream() {
        for offset in [u64::MAX - 3, u64::MAX - 511, u64::MAX - 1003] {
            let ulpdu = [0x5a; 1400];
            let bytes = to_vec(offset, &[&ulpdu], true).unwrap();
            let parsed = MarkedFpdu::parse(offset, &bytes).unwrap();
            assert_eq!(parsed.ulpdu(), &ulpdu[..]);
            assert_eq!(parsed.verify(true), CrcVerdict::Good);
        }
        assert!(matches!(
            MarkedFpdu::parse(u64::MAX - 3, &[]),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn fpdu_pointer_overflow_is_refused() {
        let big = vec![0u8; 65_530];
        assert_eq!(
            to_vec(0, &[&big], false).unwrap_err(),
            WireError::MarkerPointerOverflow
        );
    }

    #[test]
    fn marked_lengths() {
        assert_eq!(marked_len(0, 48), 52);
        assert_eq!(marked_len(4, 508), 508);
        assert_eq!(marked_len(4, 509), 513);
        assert_eq!(marked_len(4, 2000), 2000 + 3 * 4);
        assert_eq!(marked_len(7, 0), 0);
    }
}
