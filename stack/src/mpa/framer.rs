//! MPA Full Operation over a byte stream (RFC 5044 sections 4 and 5): one
//! direction's FPDU writer and one direction's FPDU reader, each with CRC
//! and Markers as the startup phase negotiated for that direction.
//!
//! The reader takes stream data in pieces of any size, as a socket or an
//! in-order TCP receive path hands it over, and yields whole ULPDUs. A CRC
//! that does not check or a Marker that does not point at its FPDU is an
//! error the connection answers with a Terminate (layer LLP, type MPA) and
//! a close; after an error the reader yields nothing more, since the
//! stream's framing can no longer be trusted.

use crate::wire::fpdu::{self, CrcVerdict, Fpdu};
use crate::wire::marker::{self, MarkedFpdu};
use crate::wire::terminate::TermError;
use crate::wire::{Result as WireResult, WireError};

/// Writes FPDUs for one direction.
#[derive(Debug, Clone)]
pub struct FpduWriter {
    crc: bool,
    markers: bool,
    /// Octets sent in Full Operation so far, Markers included.
    offset: u64,
}

impl FpduWriter {
    /// A writer at the start of Full Operation.
    pub fn new(crc: bool, markers: bool) -> Self {
        Self {
            crc,
            markers,
            offset: 0,
        }
    }

    /// Octets written so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Appends one FPDU carrying the concatenation of `parts` to `out`.
    pub fn write(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> WireResult<usize> {
        let unmarked = fpdu::fpdu_len(fpdu::ulpdu_len(parts)?);
        let len = if self.markers {
            marker::marked_len(self.offset, unmarked)
        } else {
            unmarked
        };
        let start = out.len();
        out.resize(start + len, 0);
        let result = if self.markers {
            marker::emit(self.offset, parts, self.crc, &mut out[start..])
        } else {
            fpdu::emit(parts, self.crc, &mut out[start..])
        };
        match result {
            Ok(written) => {
                self.offset = self.offset.wrapping_add(written as u64);
                Ok(written)
            }
            Err(err) => {
                out.truncate(start);
                Err(err)
            }
        }
    }
}

/// Why a reader stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingError {
    /// An FPDU's CRC did not check.
    Crc {
        /// The value the FPDU carried.
        carried: u32,
        /// The value computed over it.
        computed: u32,
    },
    /// A Marker did not point at the start of its FPDU.
    Marker(WireError),
}

impl FramingError {
    /// The Terminate error that reports this failure (RFC 5044 section 8,
    /// RFC 5040 section 7).
    pub fn terminate_error(self) -> TermError {
        match self {
            Self::Crc { .. } => TermError::MpaCrcError,
            Self::Marker(_) => TermError::MpaMarkerMismatch,
        }
    }
}

/// Reads FPDUs of one direction from stream data.
#[derive(Debug, Clone)]
pub struct FpduReader {
    crc: bool,
    markers: bool,
    /// Stream offset of `buf[0]`.
    offset: u64,
    buf: Vec<u8>,
    /// Where the next FPDU starts in `buf`.
    start: usize,
    failed: Option<FramingError>,
}

impl FpduReader {
    /// A reader at the start of Full Operation.
    pub fn new(crc: bool, markers: bool) -> Self {
        Self {
            crc,
            markers,
            offset: 0,
            buf: Vec::new(),
            start: 0,
            failed: None,
        }
    }

    /// Appends stream data.
    pub fn push(&mut self, data: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Octets received but not yet returned as a whole FPDU.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole ULPDU, `None` while the next FPDU is incomplete, or
    /// the error that stopped the stream (returned again on every call).
    pub fn next_ulpdu(&mut self) -> Option<Result<Vec<u8>, FramingError>> {
        if let Some(err) = self.failed {
            return Some(Err(err));
        }
        let pending = &self.buf[self.start..];
        let fpdu_offset = self.offset.wrapping_add(self.start as u64);
        let parsed = if self.markers {
            self.read_marked(pending, fpdu_offset)
        } else {
            self.read_plain(pending)
        };
        let (ulpdu, used) = match parsed {
            Ok(Some(found)) => found,
            Ok(None) => return None,
            Err(err) => {
                self.failed = Some(err);
                self.buf = Vec::new();
                self.start = 0;
                return Some(Err(err));
            }
        };
        self.start += used;
        self.compact();
        Some(Ok(ulpdu))
    }

    fn read_plain(&self, pending: &[u8]) -> Result<Option<(Vec<u8>, usize)>, FramingError> {
        let Ok(fpdu) = Fpdu::new_checked(pending) else {
            // Only a short buffer fails without Markers: wait for more.
            return Ok(None);
        };
        self.check(fpdu.verify(self.crc))?;
        Ok(Some((fpdu.ulpdu().to_vec(), fpdu.fpdu_len())))
    }

    fn read_marked(
        &self,
        pending: &[u8],
        offset: u64,
    ) -> Result<Option<(Vec<u8>, usize)>, FramingError> {
        match MarkedFpdu::parse(offset, pending) {
            Ok(fpdu) => {
                self.check(fpdu.verify(self.crc))?;
                Ok(Some((fpdu.ulpdu().to_vec(), fpdu.marked_len)))
            }
            Err(WireError::Truncated { .. }) => Ok(None),
            Err(err) => Err(FramingError::Marker(err)),
        }
    }

    fn check(&self, verdict: CrcVerdict) -> Result<(), FramingError> {
        match verdict {
            CrcVerdict::Bad { carried, computed } => Err(FramingError::Crc { carried, computed }),
            CrcVerdict::Good | CrcVerdict::Off => Ok(()),
        }
    }

    /// Drops consumed octets once they are most of the buffer.
    fn compact(&mut self) {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.offset = self.offset.wrapping_add(self.start as u64);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulpdus() -> Vec<Vec<u8>> {
        (0..40usize)
            .map(|i| (0..(i * 37) % 1500).map(|j| (i + j) as u8).collect())
            .collect()
    }

    #[test]
    fn every_split_of_the_stream_gives_the_same_ulpdus() {
        for (crc, markers) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut writer = FpduWriter::new(crc, markers);
            let mut stream = Vec::new();
            for ulpdu in ulpdus() {
                writer.write(&[&ulpdu], &mut stream).unwrap();
            }
            assert_eq!(writer.offset(), stream.len() as u64);
            for piece in [1, 3, 100, 1448, stream.len()] {
                let mut reader = FpduReader::new(crc, markers);
                let mut got = Vec::new();
                for chunk in stream.chunks(piece) {
                    reader.push(chunk);
                    while let Some(ulpdu) = reader.next_ulpdu() {
                        got.push(ulpdu.unwrap());
                    }
                }
                assert_eq!(got, ulpdus(), "crc {crc} markers {markers} piece {piece}");
                assert_eq!(reader.buffered(), 0);
            }
        }
    }

    #[test]
    fn a_corrupted_octet_is_a_crc_error_that_sticks() {
        let mut writer = FpduWriter::new(true, false);
        let mut stream = Vec::new();
        writer.write(&[b"first"], &mut stream).unwrap();
        let second = stream.len();
        writer.write(&[b"second"], &mut stream).unwrap();
        stream[second + 4] ^= 1;
        let mut reader = FpduReader::new(true, false);
        reader.push(&stream);
        assert_eq!(reader.next_ulpdu(), Some(Ok(b"first".to_vec())));
        let err = reader.next_ulpdu().unwrap().unwrap_err();
        assert_eq!(err.terminate_error(), TermError::MpaCrcError);
        reader.push(b"more");
        assert_eq!(reader.next_ulpdu(), Some(Err(err)));
    }

    #[test]
    fn a_bad_marker_is_a_marker_error() {
        let mut writer = FpduWriter::new(false, true);
        let mut stream = Vec::new();
        writer.write(&[&[7u8; 1000]], &mut stream).unwrap();
        // The Marker at stream offset 512 of the first FPDU.
        stream[512 + 3] ^= 0x10;
        let mut reader = FpduReader::new(false, true);
        reader.push(&stream);
        let err = reader.next_ulpdu().unwrap().unwrap_err();
        assert_eq!(err.terminate_error(), TermError::MpaMarkerMismatch);
    }

    #[test]
    fn without_crc_the_field_is_not_checked() {
        let mut stream = Vec::new();
        FpduWriter::new(true, false)
            .write(&[b"abc"], &mut stream)
            .unwrap();
        let mut reader = FpduReader::new(false, false);
        let last = stream.len() - 1;
        stream[last] ^= 0xff;
        reader.push(&stream);
        assert_eq!(reader.next_ulpdu(), Some(Ok(b"abc".to_vec())));
    }

    #[test]
    fn the_smallest_fpdu() {
        let mut stream = Vec::new();
        // An empty ULPDU: length field, two octets of PAD, CRC.
        assert_eq!(
            FpduWriter::new(true, false)
                .write(&[], &mut stream)
                .unwrap(),
            8
        );
    }

    #[test]
    fn nothing_is_buffered_after_a_framing_error() {
        // Regression: the buffer was dropped but its start index kept, so
        // buffered() underflowed after an error.
        let mut frame = Vec::new();
        FpduWriter::new(true, false)
            .write(&[b"0123456789abcdef"], &mut frame)
            .unwrap();
        frame[5] ^= 0xFF;
        let mut reader = FpduReader::new(true, false);
        reader.push(&frame[..4]);
        reader.push(&frame[4..]);
        assert!(matches!(
            reader.next_ulpdu(),
            Some(Err(FramingError::Crc { .. }))
        ));
        assert_eq!(reader.buffered(), 0);
        reader.push(b"more");
        assert_eq!(reader.buffered(), 0);
    }
}
