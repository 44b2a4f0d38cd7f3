//! MPA FPDUs without Markers (RFC 5044 section 4.1) and the MULPDU of
//! RFC 5044 section 8.
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          ULPDU_Length         |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! ~                 ULPDU (the DDP segment)                       ~
//! |                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |          PAD (0-3 octets)     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          CRC (CRC32c, least significant octet first)          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! ULPDU_Length counts the ULPDU only; PAD makes `2 + ULPDU_Length + PAD` a
//! multiple of four; the CRC covers every octet before it. Without CRC the
//! field is still sent, as zeros, and not checked. Markers, when a peer asks
//! for them, are added and removed by [`crate::wire::marker`].

use super::crc::{self, CRC_LEN};
use super::error::{check_len, check_room, Result, WireError};
use super::field::{get_u16, set_u16};

/// Length of the ULPDU_Length field.
pub const LENGTH_FIELD_LEN: usize = 2;
/// The largest ULPDU the 16-bit length field can describe.
pub const MAX_ULPDU_LEN: usize = u16::MAX as usize;
/// Octets an FPDU adds around its ULPDU, not counting PAD.
pub const FRAMING_OVERHEAD: usize = LENGTH_FIELD_LEN + CRC_LEN;

/// PAD octets after a ULPDU of `ulpdu_len` octets.
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (LENGTH_FIELD_LEN + ulpdu_len) % 4) % 4
}

/// Length of a whole FPDU (without Markers) that carries `ulpdu_len` octets.
pub fn fpdu_len(ulpdu_len: usize) -> usize {
    FRAMING_OVERHEAD + ulpdu_len + pad_len(ulpdu_len)
}

/// MULPDU, the largest ULPDU that fits in one TCP segment of `emss` octets
/// of payload (RFC 5044 section 8):
/// `EMSS - (6 + EMSS mod 4)` without Markers and
/// `EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)` with them.
/// Returns 0 when `emss` is too small to carry any ULPDU.
pub fn mulpdu(emss: usize, markers: bool) -> usize {
    let marker_room = if markers { 4 * emss.div_ceil(512) } else { 0 };
    emss.saturating_sub(FRAMING_OVERHEAD + marker_room + emss % 4)
        .min(MAX_ULPDU_LEN)
}

/// What checking an FPDU's CRC field found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrcVerdict {
    /// CRCs are in use and the field matches.
    Good,
    /// CRCs are in use and the field does not match.
    Bad {
        /// The value the FPDU carries.
        carried: u32,
        /// The value computed over the FPDU.
        computed: u32,
    },
    /// CRCs are not in use on this stream: the field is not checked.
    Off,
}

/// A zero-copy view of one FPDU with no Markers in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fpdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Fpdu<T> {
    /// Wraps `buffer` without checking its length.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking that it holds the whole FPDU its length
    /// field announces. A short buffer gives [`WireError::Truncated`] with
    /// the FPDU's full length as `needed` once the length field is in.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let fpdu = Self::new_unchecked(buffer);
        check_len(fpdu.buffer.as_ref(), LENGTH_FIELD_LEN)?;
        check_len(fpdu.buffer.as_ref(), fpdu.fpdu_len())?;
        Ok(fpdu)
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// ULPDU_Length.
    pub fn ulpdu_len(&self) -> usize {
        usize::from(get_u16(self.buffer.as_ref(), 0))
    }

    /// Length of the whole FPDU: length field, ULPDU, PAD and CRC.
    pub fn fpdu_len(&self) -> usize {
        fpdu_len(self.ulpdu_len())
    }

    /// The ULPDU: the DDP segment this FPDU carries.
    pub fn ulpdu(&self) -> &[u8] {
        &self.buffer.as_ref()[LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + self.ulpdu_len()]
    }

    /// The PAD octets (zero from a conforming sender; not checked).
    pub fn pad(&self) -> &[u8] {
        let start = LENGTH_FIELD_LEN + self.ulpdu_len();
        &self.buffer.as_ref()[start..start + pad_len(self.ulpdu_len())]
    }

    /// The octets the CRC covers: everything before the CRC field.
    pub fn covered(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.fpdu_len() - CRC_LEN]
    }

    /// The value in the CRC field.
    pub fn crc_field(&self) -> u32 {
        let end = self.fpdu_len();
        let mut field = [0u8; CRC_LEN];
        field.copy_from_slice(&self.buffer.as_ref()[end - CRC_LEN..end]);
        crc::from_wire(field)
    }

    /// Checks the CRC when `crc_on`; reports [`CrcVerdict::Off`] otherwise.
    pub fn verify(&self, crc_on: bool) -> CrcVerdict {
        if !crc_on {
            return CrcVerdict::Off;
        }
        let computed = crc::crc32c(self.covered());
        let carried = self.crc_field();
        if computed == carried {
            CrcVerdict::Good
        } else {
            CrcVerdict::Bad { carried, computed }
        }
    }
}

/// The length of the ULPDU made of `parts`, refused when the 16-bit
/// ULPDU_Length cannot describe it.
pub fn ulpdu_len(parts: &[&[u8]]) -> Result<usize> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_ULPDU_LEN {
        return Err(WireError::UlpduTooLong(len));
    }
    Ok(len)
}

/// Writes an FPDU whose ULPDU is the concatenation of `parts` (a DDP header
/// and its payload, typically) to the start of `out`, with zero PAD and the
/// CRC when `crc_on` (zeros otherwise). Returns the FPDU's length.
pub fn emit(parts: &[&[u8]], crc_on: bool, out: &mut [u8]) -> Result<usize> {
    emit_with_pad(parts, [0; 3], crc_on, out)
}

/// [`emit`] with the given PAD octets (the first `pad_len` of them) instead
/// of zeros. A conforming sender pads with zeros; this reproduces frames of
/// peers that do not (siw's PAD is sometimes not zero).
pub fn emit_with_pad(parts: &[&[u8]], pad: [u8; 3], crc_on: bool, out: &mut [u8]) -> Result<usize> {
    let ulpdu_len = ulpdu_len(parts)?;
    check_room(out, fpdu_len(ulpdu_len))?;
    concat_into(parts, &mut out[LENGTH_FIELD_LEN..]);
    seal_with_pad(ulpdu_len, pad, crc_on, out)
}

/// Copies `parts` one after the other to the front of `out`, which must
/// hold them all.
pub fn concat_into(parts: &[&[u8]], out: &mut [u8]) {
    let mut at = 0;
    for part in parts {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
}

/// Frames a ULPDU of `ulpdu_len` octets that the caller already wrote at
/// `out[2..2 + ulpdu_len]`, where it lands in the FPDU: writes
/// ULPDU_Length in front, zero PAD and the CRC (when `crc_on`, zeros
/// otherwise) after it. Returns the FPDU's length. This is how a sender
/// frames payload it copies straight from registered memory.
pub fn seal(ulpdu_len: usize, crc_on: bool, out: &mut [u8]) -> Result<usize> {
    seal_with_pad(ulpdu_len, [0; 3], crc_on, out)
}

/// [`seal`] with the given PAD octets.
fn seal_with_pad(ulpdu_len: usize, pad: [u8; 3], crc_on: bool, out: &mut [u8]) -> Result<usize> {
    if ulpdu_len > MAX_ULPDU_LEN {
        return Err(WireError::UlpduTooLong(ulpdu_len));
    }
    let total = fpdu_len(ulpdu_len);
    check_room(out, total)?;
    // Cannot truncate: checked against MAX_ULPDU_LEN above.
    set_u16(out, 0, ulpdu_len as u16);
    let at = LENGTH_FIELD_LEN + ulpdu_len;
    let crc_at = total - CRC_LEN;
    out[at..crc_at].copy_from_slice(&pad[..crc_at - at]);
    let crc = if crc_on {
        crc::crc32c(&out[..crc_at])
    } else {
        0
    };
    out[crc_at..total].copy_from_slice(&crc::to_wire(crc));
    Ok(total)
}

/// [`emit`] into a new vector.
pub fn to_vec(parts: &[&[u8]], crc_on: bool) -> Result<Vec<u8>> {
    let ulpdu_len = ulpdu_len(parts)?;
    let mut out = vec![0; fpdu_len(ulpdu_len)];
    emit(parts, crc_on, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_makes_a_multiple_of_four() {
        assert_eq!(pad_len(0), 2);
        assert_eq!(pad_len(1), 1);
        assert_eq!(pad_len(2), 0);
        assert_eq!(pad_len(3), 3);
        for len in 0..64 {
            assert_eq!((LENGTH_FIELD_LEN + len + pad_len(len)) % 4, 0);
            assert_eq!(fpdu_len(len) % 4, 0);
        }
    }

    #[test]
    fn mulpdu_of_common_segments() {
        // A 1500-octet MTU with timestamps gives an EMSS of 1448; siw's
        // largest FPDUs at that MTU are 1448 octets (6 + 1442).
        assert_eq!(mulpdu(1448, false), 1442);
        assert_eq!(fpdu_len(mulpdu(1448, false)), 1448);
        assert_eq!(mulpdu(1460, false), 1454);
        assert_eq!(mulpdu(1450, false), 1442);
        // With Markers: ceil(1448 / 512) = 3 Markers of 4 octets.
        assert_eq!(mulpdu(1448, true), 1430);
        assert_eq!(mulpdu(4, false), 0);
        assert_eq!(mulpdu(1 << 20, false), MAX_ULPDU_LEN);
    }

    #[test]
    fn siw_send_without_crc() {
        // "Send from siw" in tests/data/siw/tap/py-client-7320.jsonl.
        let ulpdu = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0,
        ];
        let bytes = to_vec(&[&ulpdu], false).unwrap();
        assert_eq!(bytes.len(), 40);
        assert_eq!(&bytes[..2], &[0x00, 0x22]);
        let fpdu = Fpdu::new_checked(&bytes[..]).unwrap();
        assert_eq!(fpdu.ulpdu(), &ulpdu);
        assert!(fpdu.pad().is_empty());
        assert_eq!(fpdu.crc_field(), 0);
        assert_eq!(fpdu.verify(false), CrcVerdict::Off);
    }

    #[test]
    fn crc_detects_a_flipped_bit() {
        let mut bytes = to_vec(&[b"hello, ", b"iwarp"], true).unwrap();
        assert_eq!(
            Fpdu::new_checked(&bytes[..]).unwrap().verify(true),
            CrcVerdict::Good
        );
        bytes[5] ^= 0x10;
        assert!(matches!(
            Fpdu::new_checked(&bytes[..]).unwrap().verify(true),
            CrcVerdict::Bad { .. }
        ));
    }

    #[test]
    fn truncated_fpdu_reports_whole_length() {
        let bytes = to_vec(&[&[7u8; 30]], true).unwrap();
        assert_eq!(
            Fpdu::new_checked(&bytes[..1]).unwrap_err(),
            WireError::Truncated {
                needed: 2,
                available: 1
            }
        );
        assert_eq!(
            Fpdu::new_checked(&bytes[..20]).unwrap_err(),
            WireError::Truncated {
                needed: 36,
                available: 20
            }
        );
    }

    #[test]
    fn nonzero_pad_is_reproduced() {
        let mut out = [0u8; 12];
        let len = emit_with_pad(&[&[9, 9, 9, 9]], [0, 0x40, 7], true, &mut out).unwrap();
        assert_eq!(len, 12);
        assert_eq!(&out[6..8], &[0, 0x40]);
        let fpdu = Fpdu::new_checked(&out[..]).unwrap();
        assert_eq!(fpdu.pad(), &[0, 0x40]);
        assert_eq!(fpdu.verify(true), CrcVerdict::Good);
    }

    #[test]
    fn emit_refuses_oversized_ulpdu_and_small_buffers() {
        let big = vec![0u8; MAX_ULPDU_LEN + 1];
        assert_eq!(
            to_vec(&[&big], false).unwrap_err(),
            WireError::UlpduTooLong(MAX_ULPDU_LEN + 1)
        );
        let mut small = [0u8; 8];
        assert_eq!(
            emit(&[&[1, 2, 3]], false, &mut small).unwrap_err(),
            WireError::BufferTooSmall {
                needed: 12,
                available: 8
            }
        );
        assert_eq!(
            to_vec(&[&big[1..]], false).unwrap().len(),
            fpdu_len(MAX_ULPDU_LEN)
        );
    }
}
