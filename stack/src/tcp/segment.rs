//! The outgoing [`Segment`], whose payload borrows the send queue, its
//! emission with the IPv4 pseudo-header checksum (the header's format is
//! [`crate::wire::tcp`]'s, RFC 9293 section 3.1), and the reset that
//! answers a segment for no connection (RFC 9293 section 3.10.7.1).

use crate::mem::BufferSlice;
use crate::tcp::send::queue::Chunk;
use crate::tcp::seq::Seq;
use crate::wire::tcp::{self, Checksum};
use core::ops::Range;
use smoltcp::wire::{Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};

/// The payload of an outgoing segment: up to two slices of the send
/// queue's ring, so a dataplane can copy or reference them without an
/// intermediate buffer, and the runs of it that the queue holds by
/// reference in registered memory instead (zero-copy transmit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Payload<'a> {
    /// The first part of the ring's image of the payload.
    pub first: &'a [u8],
    /// The part after the ring wrapped, often empty.
    pub second: &'a [u8],
    /// Runs held by reference: where they lie, the two slices hold stale
    /// octets. Empty unless the send queue was given such runs.
    pub references: References<'a>,
}

impl<'a> Payload<'a> {
    /// A payload of `bytes`, in one piece (segments built outside a send
    /// queue: tests, tools).
    pub fn of(bytes: &'a [u8]) -> Self {
        Payload {
            first: bytes,
            ..Payload::default()
        }
    }

    /// Octets in the payload.
    pub fn len(&self) -> usize {
        self.first.len() + self.second.len()
    }

    /// No octet at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the payload into the front of `out`, which must be at least
    /// [`Payload::len`] octets: the ring's octets, and the referenced runs
    /// from their memory.
    pub fn copy_to(&self, out: &mut [u8]) {
        let mut at = 0;
        for (span, slice, offset) in self.references.iter() {
            self.copy_ring(at..span.start, out);
            let copied = slice.read(offset, &mut out[span.clone()]);
            debug_assert!(copied, "a run lies inside its memory");
            at = span.end;
        }
        self.copy_ring(at..self.len(), out);
    }

    /// Copies the ring's octets at offsets `range` of the payload into the
    /// front of `out`, which must hold at least `range.len()` octets,
    /// across the ring's end if they lie across it.
    pub fn copy_ring_part(&self, range: Range<usize>, out: &mut [u8]) {
        let split = self.first.len();
        let first = range.start.min(split)..range.end.min(split);
        let (before, after) = out.split_at_mut(first.len());
        before.copy_from_slice(&self.first[first]);
        let second = range.start.max(split) - split..range.end.max(split) - split;
        after[..second.len()].copy_from_slice(&self.second[second]);
    }

    /// Copies the ring's octets at offsets `range` of the payload into the
    /// same offsets of `out`.
    fn copy_ring(&self, range: Range<usize>, out: &mut [u8]) {
        self.copy_ring_part(range.clone(), &mut out[range.start..]);
    }

    /// The payload gathered into a vector (tests and slow paths).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len()];
        self.copy_to(&mut out);
        out
    }
}

/// The runs of a payload that its send queue holds by reference: the
/// queue's chunks that overlap it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct References<'a> {
    /// The payload's first position.
    start: u64,
    /// Position after its last octet.
    end: u64,
    /// Where the first chunk begins.
    first_start: u64,
    /// The chunks overlapping the payload, in order, in two parts (a
    /// ring's).
    chunks: [&'a [Chunk]; 2],
}

impl<'a> References<'a> {
    /// The `chunks` overlapping a payload at positions `range`, the first
    /// beginning at `first_start`.
    pub(crate) fn new(range: Range<u64>, first_start: u64, chunks: [&'a [Chunk]; 2]) -> Self {
        References {
            start: range.start,
            end: range.end,
            first_start,
            chunks,
        }
    }

    /// No run at all: the ring holds the whole payload.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Each run, clipped to the payload: the offsets it takes in the
    /// payload, its memory, and the offset in that memory of its first
    /// octet in the payload.
    pub fn iter(&self) -> impl Iterator<Item = (Range<usize>, &'a BufferSlice, usize)> + '_ {
        let (start, end) = (self.start, self.end);
        let chunks = self.chunks.iter().flat_map(|part| part.iter());
        chunks
            .scan(self.first_start, |chunk_start, chunk| {
                let begins = *chunk_start;
                *chunk_start = chunk.end();
                Some(chunk.referenced(begins))
            })
            .flatten()
            .filter_map(move |(run_start, slice)| {
                let from = run_start.max(start);
                let to = (run_start + slice.len() as u64).min(end);
                (from < to).then(|| {
                    let span = (from - start) as usize..(to - start) as usize;
                    (span, slice, (from - run_start) as usize)
                })
            })
    }
}

/// A segment the engine wants sent: addresses, the TCP header as a
/// `TcpRepr` (its `payload` field is empty) and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Source IPv4 address.
    pub src: Ipv4Address,
    /// Destination IPv4 address.
    pub dst: Ipv4Address,
    /// Header fields and options.
    pub header: TcpRepr<'static>,
    /// The data, borrowed from the send queue.
    pub payload: Payload<'a>,
}

/// The buffer given to [`Segment::emit`] is shorter than the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Octets the segment needs.
    pub needed: usize,
}

impl Segment<'_> {
    /// Octets of TCP header plus payload.
    pub fn len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Octets of TCP header, options and padding included.
    pub fn header_len(&self) -> usize {
        tcp::header_len(&self.header)
    }

    /// Never true: a segment has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The sequence number of the first octet (or of the SYN/FIN).
    pub fn seq(&self) -> Seq {
        self.header.seq_number.into()
    }

    /// Writes the TCP header, the payload and the checksum over the IPv4
    /// pseudo-header into the front of `buf`; returns the octets written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        self.write(buf, Checksum::Full)
    }

    /// Like [`Segment::emit`], for a device that completes the checksum
    /// (RFC 1071 sums are additive, so it adds the segment's octets to
    /// what the field holds): the checksum field gets only the sum of the
    /// IPv4 pseudo-header (RFC 9293 section 3.1), not complemented.
    pub fn emit_for_checksum_offload(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        self.write(buf, Checksum::PseudoHeader { len: self.len() })
    }

    /// Writes only the TCP header into the front of `buf`, for a device
    /// that completes the checksum and sends the payload from where it
    /// lies (the send queue's memory): the checksum field gets the sum of
    /// the IPv4 pseudo-header for the whole segment, as
    /// [`Segment::emit_for_checksum_offload`] writes it. Returns the
    /// header's length.
    pub fn emit_header_for_checksum_offload(
        &self,
        buf: &mut [u8],
    ) -> Result<usize, BufferTooSmall> {
        let header_len = self.header_len();
        let out = buf
            .get_mut(..header_len)
            .ok_or(BufferTooSmall { needed: header_len })?;
        let len = header_len + self.payload.len();
        tcp::emit(
            &self.header,
            self.src,
            self.dst,
            out,
            Checksum::PseudoHeader { len },
        );
        Ok(header_len)
    }

    /// Writes the payload and then the header, with the checksum field as
    /// `sum` says, into the front of `buf`; returns the octets written.
    fn write(&self, buf: &mut [u8], sum: Checksum) -> Result<usize, BufferTooSmall> {
        let header_len = self.header_len();
        let len = header_len + self.payload.len();
        let out = buf.get_mut(..len).ok_or(BufferTooSmall { needed: len })?;
        self.payload.copy_to(&mut out[header_len..]);
        tcp::emit(&self.header, self.src, self.dst, out, sum);
        Ok(len)
    }

    /// The segment as a vector of octets (tests and slow paths).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = vec![0; self.len()];
        // The buffer has exactly the segment's length.
        let _ = self.emit(&mut bytes);
        bytes
    }
}

/// A header with no options and no payload, the base of every segment the
/// engine builds (and of segments tests and tools forge).
pub fn bare_header(
    src_port: u16,
    dst_port: u16,
    control: TcpControl,
    seq: Seq,
    ack: Option<Seq>,
    window_len: u16,
) -> TcpRepr<'static> {
    TcpRepr {
        src_port,
        dst_port,
        control,
        seq_number: seq.into(),
        ack_number: ack.map(TcpSeqNumber::from),
        window_len,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    }
}

/// The reset that answers `seg`, received from `src` for `dst` where no
/// connection exists (RFC 9293 section 3.10.7.1): none for a reset,
/// `<SEQ=SEG.ACK><CTL=RST>` for a segment with ACK, otherwise
/// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
pub fn reset_reply(
    src: Ipv4Address,
    dst: Ipv4Address,
    seg: &TcpRepr<'_>,
) -> Option<Segment<'static>> {
    if seg.control == TcpControl::Rst {
        return None;
    }
    let (seq, ack) = match seg.ack_number {
        Some(ack) => (Seq::from(ack), None),
        None => (
            Seq(0),
            Some(Seq::from(seg.seq_number) + seg.segment_len() as u32),
        ),
    };
    Some(Segment {
        src: dst,
        dst: src,
        header: bare_header(seg.dst_port, seg.src_port, TcpControl::Rst, seq, ack, 0),
        payload: Payload::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tcp::{parse, parse_verified, ParseError};
    use smoltcp::wire::checksum;

    const A: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
    const B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

    #[test]
    fn only_parse_checks_the_checksum_and_both_refuse_malformed_headers() {
        let mut header = bare_header(1000, 2000, TcpControl::Syn, Seq(7), None, 512);
        header.max_seg_size = Some(1460);
        let segment = Segment {
            src: A,
            dst: B,
            header,
            payload: Payload::default(),
        };
        let mut bytes = segment.to_bytes();
        assert_eq!(parse(A, B, &bytes).unwrap(), header);
        assert_eq!(parse_verified(&bytes).unwrap(), header);
        bytes[16] ^= 0xff;
        assert_eq!(parse(A, B, &bytes), Err(ParseError::Checksum));
        assert_eq!(parse_verified(&bytes).unwrap(), header);
        // An option running past the header.
        bytes[21] = 40;
        assert_eq!(parse_verified(&bytes), Err(ParseError::Malformed));
        assert_eq!(parse_verified(&bytes[..10]), Err(ParseError::Malformed));
    }

    #[test]
    fn ring_parts_are_copied_across_the_wrap() {
        let data: Vec<u8> = (0..100u8).collect();
        let (first, second) = data.split_at(60);
        let payload = Payload {
            first,
            second,
            ..Payload::default()
        };
        for range in [0..60, 10..20, 60..100, 70..75, 59..61, 0..100, 100..100] {
            let mut out = vec![0xEE; range.len() + 1];
            payload.copy_ring_part(range.clone(), &mut out);
            assert_eq!(&out[..range.len()], &data[range.clone()], "{range:?}");
            assert_eq!(out[range.len()], 0xEE, "{range:?}: nothing past it");
        }
    }

    #[test]
    fn a_device_completing_the_offloaded_checksum_gets_the_full_one() {
        let data: Vec<u8> = (0..1461u32).map(|i| (i * 7 + 3) as u8).collect();
        let (first, second) = data.split_at(1000);
        let mut header = bare_header(49152, 4791, TcpControl::Psh, Seq(9), Some(Seq(5)), 900);
        header.timestamp = Some(smoltcp::wire::TcpTimestampRepr::new(11, 22));
        let segment = Segment {
            src: A,
            dst: B,
            header,
            payload: Payload {
                first,
                second,
                ..Payload::default()
            },
        };
        let full = segment.to_bytes();
        let mut offloaded = vec![0; segment.len()];
        assert_eq!(
            segment.emit_for_checksum_offload(&mut offloaded),
            Ok(full.len())
        );
        assert_ne!(offloaded, full);
        // What the device does: sum every octet, the field's pseudo-header
        // sum included, and write the complement.
        let sum = !checksum::data(&offloaded);
        offloaded[16..18].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(offloaded, full);
        assert!(parse(A, B, &offloaded).is_ok());
        assert_eq!(
            segment.emit_for_checksum_offload(&mut [0; 20]),
            Err(BufferTooSmall { needed: full.len() })
        );
        // The header alone, the payload sent from elsewhere: the same
        // octets as the front of the offloaded segment.
        let header_len = segment.header_len();
        let mut alone = vec![0; header_len];
        assert_eq!(
            segment.emit_header_for_checksum_offload(&mut alone),
            Ok(header_len)
        );
        let mut whole = vec![0; segment.len()];
        segment.emit_for_checksum_offload(&mut whole).unwrap();
        assert_eq!(alone, whole[..header_len]);
        assert_eq!(
            segment.emit_header_for_checksum_offload(&mut [0; 8]),
            Err(BufferTooSmall { needed: header_len })
        );
    }
}
