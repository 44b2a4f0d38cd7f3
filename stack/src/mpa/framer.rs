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

use std::borrow::Cow;

use crate::mem::BufferSlice;
use crate::record::{FpduSink, VecSink};
use crate::wire::crc;
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
    /// Where a ULPDU is gathered before Markers are woven into it.
    marked_scratch: Vec<u8>,
}

impl FpduWriter {
    /// A writer at the start of Full Operation.
    pub fn new(crc: bool, markers: bool) -> Self {
        Self {
            crc,
            markers,
            offset: 0,
            marked_scratch: Vec::new(),
        }
    }

    /// Octets written so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Octets the next FPDU takes on the wire when it carries a ULPDU of
    /// `ulpdu_len` octets, Markers included; refused over 65535.
    pub fn next_len(&self, ulpdu_len: usize) -> WireResult<usize> {
        if ulpdu_len > fpdu::MAX_ULPDU_LEN {
            return Err(WireError::UlpduTooLong(ulpdu_len));
        }
        let unmarked = fpdu::fpdu_len(ulpdu_len);
        Ok(if self.markers {
            marker::marked_len(self.offset, unmarked)
        } else {
            unmarked
        })
    }

    /// Writes the next FPDU into `out`, which holds exactly
    /// [`next_len`](Self::next_len)`(ulpdu_len)` octets: `fill` writes the
    /// ULPDU into the slice it is given, and the writer frames it there
    /// (without Markers the slice is the ULPDU's own place in `out`, so
    /// the payload is copied once, from wherever it lies, into the frame).
    /// When `fill` fails, nothing counts as written and its error is
    /// returned. Returns the FPDU's length.
    pub fn write_with<E: From<WireError>>(
        &mut self,
        ulpdu_len: usize,
        out: &mut [u8],
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        let len = self.next_len(ulpdu_len)?;
        let available = out.len();
        let out = out.get_mut(..len).ok_or(WireError::Truncated {
            needed: len,
            available,
        })?;
        let written = if self.markers {
            let mut ulpdu = std::mem::take(&mut self.marked_scratch);
            ulpdu.resize(ulpdu_len, 0);
            let result =
                fill(&mut ulpdu).map(|()| marker::emit(self.offset, &[&ulpdu], self.crc, out));
            self.marked_scratch = ulpdu;
            result??
        } else {
            let start = fpdu::LENGTH_FIELD_LEN;
            fill(&mut out[start..start + ulpdu_len])?;
            fpdu::seal(ulpdu_len, self.crc, out)?
        };
        self.offset = self.offset.wrapping_add(written as u64);
        Ok(written)
    }

    /// The lengths of the parts around a payload of `payload_len` octets
    /// held by reference, after a ULPDU header of `header_len`: the MPA
    /// length field and the header before it, the pad and CRC after.
    /// `None` with Markers on (they would fall inside the payload) or
    /// when the ULPDU is too long for an FPDU.
    pub fn referencing_parts(
        &self,
        header_len: usize,
        payload_len: usize,
    ) -> Option<(usize, usize)> {
        let ulpdu_len = header_len + payload_len;
        if self.markers || ulpdu_len > fpdu::MAX_ULPDU_LEN {
            return None;
        }
        let head = fpdu::LENGTH_FIELD_LEN + header_len;
        Some((head, fpdu::fpdu_len(ulpdu_len) - head - payload_len))
    }

    /// Frames the next FPDU around `payload`, held by reference: the MPA
    /// length field and the ULPDU's `header` into `head`, the pad and the
    /// CRC (over all three parts, the payload read where it lies) into
    /// `tail`, sized as [`referencing_parts`](Self::referencing_parts)
    /// says. Returns the FPDU's length.
    pub fn write_referencing(
        &mut self,
        header: &[u8],
        payload: &BufferSlice,
        head: &mut [u8],
        tail: &mut [u8],
    ) -> WireResult<usize> {
        let written = self.frame_parts(header, payload.len(), head, tail, |crc| {
            payload.crc32c_update(crc);
        })?;
        self.offset = self.offset.wrapping_add(written as u64);
        Ok(written)
    }

    /// The lengths of the parts around a payload of `payload_len` octets
    /// that a sink writes through ([`FpduSink::write_through`]), as
    /// [`referencing_parts`](Self::referencing_parts) gives them; `None`
    /// also with CRCs on, since the writer does not read such a payload.
    pub fn through_parts(&self, header_len: usize, payload_len: usize) -> Option<(usize, usize)> {
        if self.crc {
            return None;
        }
        self.referencing_parts(header_len, payload_len)
    }

    /// Frames the parts around a payload of `payload_len` octets that a
    /// sink writes through, sized as [`through_parts`](Self::through_parts)
    /// says, without counting the FPDU as written: the sink may refuse
    /// it. Returns the FPDU's length, for [`wrote`](Self::wrote) once the
    /// sink took it.
    pub fn frame_through(
        &self,
        header: &[u8],
        payload_len: usize,
        head: &mut [u8],
        tail: &mut [u8],
    ) -> WireResult<usize> {
        if self.through_parts(header.len(), payload_len).is_none() {
            return Err(WireError::UlpduTooLong(header.len() + payload_len));
        }
        self.frame_parts(header, payload_len, head, tail, |_| {})
    }

    /// Counts `len` octets of a [`frame_through`](Self::frame_through)
    /// FPDU as written.
    pub fn wrote(&mut self, len: usize) {
        self.offset = self.offset.wrapping_add(len as u64);
    }

    /// The length field and `header` into `head`, the pad and the CRC
    /// into `tail`, around a payload of `payload_len` octets that
    /// `payload_crc` adds to the CRC; the FPDU's length.
    fn frame_parts(
        &self,
        header: &[u8],
        payload_len: usize,
        head: &mut [u8],
        tail: &mut [u8],
        payload_crc: impl FnOnce(&mut crc::Crc32c),
    ) -> WireResult<usize> {
        let (head_len, tail_len) = self
            .referencing_parts(header.len(), payload_len)
            .ok_or(WireError::UlpduTooLong(header.len() + payload_len))?;
        if head.len() != head_len || tail.len() != tail_len {
            return Err(WireError::Truncated {
                needed: head_len + tail_len,
                available: head.len() + tail.len(),
            });
        }
        let ulpdu_len = (header.len() + payload_len) as u16;
        head[..fpdu::LENGTH_FIELD_LEN].copy_from_slice(&ulpdu_len.to_be_bytes());
        head[fpdu::LENGTH_FIELD_LEN..].copy_from_slice(header);
        let (pad, field) = tail.split_at_mut(tail_len - crc::CRC_LEN);
        pad.fill(0);
        let value = if self.crc {
            let mut crc = crc::Crc32c::new();
            crc.update(head);
            payload_crc(&mut crc);
            crc.update(pad);
            crc.value()
        } else {
            0
        };
        field.copy_from_slice(&crc::to_wire(value));
        Ok(head_len + payload_len + tail_len)
    }

    /// Appends one FPDU carrying the concatenation of `parts` to `out`.
    pub fn write(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> WireResult<usize> {
        let ulpdu_len = fpdu::ulpdu_len(parts)?;
        let mut sink = VecSink::new(out);
        let room = sink.room(self.next_len(ulpdu_len)?);
        let written = self.write_with(ulpdu_len, room, |ulpdu: &mut [u8]| {
            fpdu::concat_into(parts, ulpdu);
            Ok::<(), WireError>(())
        })?;
        sink.commit();
        Ok(written)
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

/// The whole FPDU (without Markers) at the front of `data`: its ULPDU and
/// its length, its CRC checked when `crc` is set; `None` while `data`
/// holds less than one FPDU.
pub fn front_fpdu(data: &[u8], crc: bool) -> Option<Result<(&[u8], usize), FramingError>> {
    let fpdu = Fpdu::new_checked(data).ok()?;
    if let Err(err) = crc_result(fpdu.verify(crc)) {
        return Some(Err(err));
    }
    let ulpdu = &data[fpdu::LENGTH_FIELD_LEN..fpdu::LENGTH_FIELD_LEN + fpdu.ulpdu_len()];
    Some(Ok((ulpdu, fpdu.fpdu_len())))
}

/// A CRC verdict as the reader answers it.
fn crc_result(verdict: CrcVerdict) -> Result<(), FramingError> {
    match verdict {
        CrcVerdict::Bad { carried, computed } => Err(FramingError::Crc { carried, computed }),
        CrcVerdict::Good | CrcVerdict::Off => Ok(()),
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

    /// Appends to the buffered part of an FPDU only the octets of `data`
    /// it still lacks, and moves `data` past them, so that what follows
    /// can be read in place again ([`next_in_place`](Self::next_in_place))
    /// once [`next_ulpdu`](Self::next_ulpdu) has returned the completed
    /// FPDU: a stream cut away from FPDU boundaries (a peer's TCP unaware
    /// of MPA, a socket read that ended mid-FPDU) is copied one partial
    /// FPDU at a time, not from then on. With Markers, whose positions the
    /// buffer works out, it takes all of `data`.
    pub fn top_up(&mut self, data: &mut &[u8]) {
        if !self.markers {
            // The length field first, then the rest of its FPDU.
            let field = fpdu::LENGTH_FIELD_LEN.saturating_sub(self.buffered());
            self.take(data, field);
            self.take(data, self.missing());
        } else {
            self.take(data, data.len());
        }
    }

    /// Pushes the first `len` octets of `data` (all, if fewer) and moves
    /// `data` past them.
    fn take(&mut self, data: &mut &[u8], len: usize) {
        let (taken, rest) = data.split_at(len.min(data.len()));
        self.push(taken);
        *data = rest;
    }

    /// Octets the buffered FPDU still lacks, known once its length field
    /// is (0 before).
    fn missing(&self) -> usize {
        match self.buf[self.start..] {
            [high, low, ..] => {
                let ulpdu_len = usize::from(u16::from_be_bytes([high, low]));
                fpdu::fpdu_len(ulpdu_len).saturating_sub(self.buffered())
            }
            _ => 0,
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
            Err(err) => return Some(Err(self.fail(err))),
        };
        self.start += used;
        self.compact();
        Some(Ok(ulpdu))
    }

    /// The next whole ULPDU, as [`next_ulpdu`](Self::next_ulpdu) gives
    /// it, but read where it lies in the buffer when the direction has no
    /// Markers (such an FPDU's ULPDU is one run of its octets): an FPDU
    /// that [`top_up`](Self::top_up) completed is not copied out again.
    /// What it returned is dropped from the buffer at the next call.
    pub fn next_ulpdu_in_buffer(&mut self) -> Option<Result<Cow<'_, [u8]>, FramingError>> {
        if self.markers {
            return self.next_ulpdu().map(|next| next.map(Cow::Owned));
        }
        if let Some(err) = self.failed {
            return Some(Err(err));
        }
        self.compact();
        let start = self.start;
        let (ulpdu_len, len) = match front_fpdu(&self.buf[start..], self.crc)? {
            Ok((ulpdu, len)) => (ulpdu.len(), len),
            Err(err) => return Some(Err(self.fail(err))),
        };
        self.start += len;
        let ulpdu = start + fpdu::LENGTH_FIELD_LEN;
        Some(Ok(Cow::Borrowed(&self.buf[ulpdu..ulpdu + ulpdu_len])))
    }

    /// The next whole ULPDU read in place from the front of `data`, which
    /// then moves past its FPDU: the path of FPDUs aligned with the LLP's
    /// segments (RFC 5044 appendix A.3), with no copy. It applies only
    /// when nothing is buffered and the direction has no Markers; `None`
    /// when it does not apply or `data` does not start with a whole FPDU
    /// (then [`push`](Self::push) the rest). After an error it returns the
    /// error, like [`next_ulpdu`](Self::next_ulpdu).
    pub fn next_in_place<'d>(
        &mut self,
        data: &mut &'d [u8],
    ) -> Option<Result<&'d [u8], FramingError>> {
        if let Some(err) = self.failed {
            return Some(Err(err));
        }
        if self.markers || self.buffered() > 0 {
            return None;
        }
        let whole: &'d [u8] = data;
        match front_fpdu(whole, self.crc)? {
            Ok((ulpdu, len)) => {
                *data = &whole[len..];
                self.advance(len as u64);
                Some(Ok(ulpdu))
            }
            Err(err) => Some(Err(self.fail(err))),
        }
    }

    /// The stream continues `len` octets further on: octets the LLP never
    /// hands over in order, because whole FPDUs in them were placed out of
    /// order. Refuses, skipping nothing, while part of an FPDU is buffered:
    /// the skipped octets would then not start at an FPDU boundary.
    pub fn skip(&mut self, len: u64) -> bool {
        if self.buffered() > 0 {
            return false;
        }
        self.advance(len);
        true
    }

    /// Moves the stream offset of the next octet on by `len`; nothing may
    /// be buffered.
    fn advance(&mut self, len: u64) {
        self.offset = self
            .offset
            .wrapping_add(self.start as u64)
            .wrapping_add(len);
        self.buf.clear();
        self.start = 0;
    }

    /// Stops the reader for good with `err`.
    fn fail(&mut self, err: FramingError) -> FramingError {
        self.failed = Some(err);
        self.buf = Vec::new();
        self.start = 0;
        err
    }

    fn read_plain(&self, pending: &[u8]) -> Result<Option<(Vec<u8>, usize)>, FramingError> {
        // Without Markers only a short buffer has no FPDU: wait for more.
        front_fpdu(pending, self.crc)
            .transpose()
            .map(|found| found.map(|(ulpdu, len)| (ulpdu.to_vec(), len)))
    }

    fn read_marked(
        &self,
        pending: &[u8],
        offset: u64,
    ) -> Result<Option<(Vec<u8>, usize)>, FramingError> {
        match MarkedFpdu::parse(offset, pending) {
            Ok(fpdu) => {
                crc_result(fpdu.verify(self.crc))?;
                Ok(Some((fpdu.ulpdu().to_vec(), fpdu.marked_len)))
            }
            Err(WireError::Truncated { .. }) => Ok(None),
            Err(err) => Err(FramingError::Marker(err)),
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
            // Whole FPDUs in place (where the path applies), the rest
            // through the buffer, or everything through the buffer.
            for (piece, in_place) in [1, 3, 100, 1448, 4096, stream.len()]
                .into_iter()
                .flat_map(|piece| [(piece, false), (piece, true)])
            {
                let mut reader = FpduReader::new(crc, markers);
                let mut got = Vec::new();
                for chunk in stream.chunks(piece) {
                    let mut rest = chunk;
                    while let Some(ulpdu) =
                        in_place.then(|| reader.next_in_place(&mut rest)).flatten()
                    {
                        got.push(ulpdu.unwrap().to_vec());
                    }
                    reader.push(rest);
                    if in_place {
                        while let Some(ulpdu) = reader.next_ulpdu_in_buffer() {
                            got.push(ulpdu.unwrap().into_owned());
                        }
                    } else {
                        while let Some(ulpdu) = reader.next_ulpdu() {
                            got.push(ulpdu.unwrap());
                        }
                    }
                }
                let label =
                    format!("crc {crc} markers {markers} piece {piece} in place {in_place}");
                assert_eq!(got, ulpdus(), "{label}");
                assert_eq!(reader.buffered(), 0, "{label}");
            }
        }
    }

    #[test]
    fn in_place_reading_stops_at_a_bad_crc_for_good() {
        let mut stream = Vec::new();
        let mut writer = FpduWriter::new(true, false);
        writer.write(&[b"first"], &mut stream).unwrap();
        writer.write(&[b"second"], &mut stream).unwrap();
        let last = stream.len() - 1;
        stream[last] ^= 1;
        let mut reader = FpduReader::new(true, false);
        let mut rest = &stream[..];
        assert_eq!(reader.next_in_place(&mut rest), Some(Ok(&b"first"[..])));
        let err = reader.next_in_place(&mut rest).unwrap().unwrap_err();
        assert_eq!(err.terminate_error(), TermError::MpaCrcError);
        assert_eq!(reader.next_ulpdu(), Some(Err(err)));
        assert_eq!(reader.next_in_place(&mut &b"x"[..]), Some(Err(err)));
    }

    #[test]
    fn markers_or_a_partial_fpdu_keep_the_in_place_path_off() {
        let mut stream = Vec::new();
        FpduWriter::new(false, true)
            .write(&[b"marked"], &mut stream)
            .unwrap();
        let mut marked = FpduReader::new(false, true);
        assert_eq!(marked.next_in_place(&mut &stream[..]), None);
        let mut plain = FpduReader::new(false, false);
        plain.push(&[0]);
        assert_eq!(plain.next_in_place(&mut &[0, 1, 2, 3, 4, 5][..]), None);
        assert!(!plain.skip(8), "a partial FPDU is buffered");
    }

    #[test]
    fn topping_up_a_partial_fpdu_takes_only_its_rest() {
        let mut stream = Vec::new();
        let mut writer = FpduWriter::new(true, false);
        let ulpdus: [&[u8]; 3] = [&[1; 100], &[2; 200], &[3; 300]];
        for ulpdu in ulpdus {
            writer.write(&[ulpdu], &mut stream).unwrap();
        }
        let first_len = fpdu::fpdu_len(100);
        // Every cut inside the first FPDU, the length field included.
        for cut in 1..first_len {
            let mut reader = FpduReader::new(true, false);
            let mut data = &stream[..cut];
            assert_eq!(reader.next_in_place(&mut data), None);
            reader.top_up(&mut data);
            assert!(data.is_empty());
            assert_eq!(reader.next_ulpdu(), None);
            let mut data = &stream[cut..];
            reader.top_up(&mut data);
            assert_eq!(reader.buffered(), first_len, "cut {cut}");
            assert_eq!(reader.next_ulpdu(), Some(Ok(ulpdus[0].to_vec())));
            assert_eq!(reader.buffered(), 0);
            // The rest is read where it lies.
            assert_eq!(reader.next_in_place(&mut data), Some(Ok(ulpdus[1])));
            assert_eq!(reader.next_in_place(&mut data), Some(Ok(ulpdus[2])));
            assert!(data.is_empty());
        }
        // With Markers it takes everything.
        let mut marked = FpduReader::new(true, true);
        let mut data = &stream[..];
        marked.top_up(&mut data);
        assert!(data.is_empty());
    }

    #[test]
    fn skipped_octets_keep_marker_positions() {
        // Three FPDUs with Markers; the reader skips the second (placed
        // out of order elsewhere) and still finds the third's Markers.
        let mut writer = FpduWriter::new(true, true);
        let mut stream = Vec::new();
        let mut bounds = vec![0];
        for ulpdu in [&[1u8; 700][..], &[2; 900], &[3; 600]] {
            writer.write(&[ulpdu], &mut stream).unwrap();
            bounds.push(stream.len());
        }
        let mut reader = FpduReader::new(true, true);
        reader.push(&stream[..bounds[1]]);
        assert_eq!(reader.next_ulpdu(), Some(Ok(vec![1; 700])));
        assert!(reader.skip((bounds[2] - bounds[1]) as u64));
        reader.push(&stream[bounds[2]..]);
        assert_eq!(reader.next_ulpdu(), Some(Ok(vec![3; 600])));
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
