//! TCP byte-stream reassembly, offline: every data segment of a direction is
//! kept until [`Reassembler::finish`], so segments captured out of order, before
//! their SYN, or retransmitted with other boundaries all land in place. Sequence
//! numbers are compared modulo 2^32 from a reference (SYN + 1, else the first
//! segment), so streams crossing the wraparound reassemble like any other.
//!
//! Holes: zero-filling would hand fabricated bytes to a decoder, so
//! [`TcpStream::bytes`] stops at the first hole. [`TcpStream::gaps`] lists every
//! hole and [`TcpStream::islands`] keeps the data beyond the first one:
//! `bytes`, `gaps[0]`, `islands[0]`, `gaps[1]`, … tile the sequence space.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::read::CaptureError;

/// The most payload kept for one direction of one connection (1 GiB).
pub const MAX_STREAM_BYTES: u64 = 1 << 30;

/// One direction of one TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// The sender of the bytes.
    pub src: SocketAddr,
    /// The receiver of the bytes.
    pub dst: SocketAddr,
}

impl FlowKey {
    /// The direction from `src` to `dst`.
    pub fn new(src: SocketAddr, dst: SocketAddr) -> Self {
        FlowKey { src, dst }
    }

    /// The opposite direction of the same connection.
    pub fn reversed(self) -> FlowKey {
        FlowKey::new(self.dst, self.src)
    }
}

/// A TCP payload byte run in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamChunk {
    /// TCP sequence number of `data[0]`.
    pub seq: u32,
    /// The bytes.
    pub data: Vec<u8>,
}

/// One data-bearing TCP packet, in capture order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRecord {
    /// 0-based index of the capture frame that carried it.
    pub frame: usize,
    /// TCP sequence number of its first payload byte.
    pub seq: u32,
    /// Payload length.
    pub len: u32,
}

/// The reassembled bytes of one direction of one TCP connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpStream {
    /// Which direction of which connection.
    pub key: FlowKey,
    /// 0-based index of the frame of the first packet seen in this direction.
    pub first_frame: usize,
    /// The SYN's sequence number, if a SYN was seen.
    pub isn: Option<u32>,
    /// The in-order payload from `base_seq` up to the first hole.
    pub bytes: Vec<u8>,
    /// TCP sequence number of `bytes[0]`: ISN + 1 when the SYN was seen, else
    /// the lowest sequence number of any payload byte.
    pub base_seq: u32,
    /// Holes `(seq, len)` that no packet filled, in stream order. A hole before
    /// a FIN is included.
    pub gaps: Vec<(u32, u32)>,
    /// Runs of payload after the first hole; `islands[i]` follows `gaps[i]`.
    pub islands: Vec<StreamChunk>,
    /// Payload bytes seen more than once.
    pub retransmitted_bytes: u64,
    /// One record per data-bearing TCP packet, in capture order.
    pub segments: Vec<SegmentRecord>,
    /// Sequence number of the FIN, if one was seen.
    pub fin_seq: Option<u32>,
    /// Whether an RST was seen in this direction.
    pub reset: bool,
}

impl TcpStream {
    /// TCP sequence number of `bytes[offset]`.
    pub fn offset_to_seq(&self, offset: usize) -> u32 {
        stream_offset_to_seq(self.base_seq, offset)
    }

    /// Offset in `bytes` of the byte with sequence number `seq`, if it is there.
    pub fn seq_to_offset(&self, seq: u32) -> Option<usize> {
        let offset = usize::try_from(seq.wrapping_sub(self.base_seq)).ok()?;
        (offset < self.bytes.len()).then_some(offset)
    }

    /// Whether every payload byte up to the last one seen (or the FIN) is in `bytes`.
    pub fn is_complete(&self) -> bool {
        self.gaps.is_empty()
    }
}

/// TCP sequence number of the byte `offset` bytes after `base_seq` (modulo 2^32).
pub fn stream_offset_to_seq(base_seq: u32, offset: usize) -> u32 {
    // Truncation is the point: sequence numbers live modulo 2^32.
    base_seq.wrapping_add(offset as u32)
}

/// One TCP packet as decoded from a capture frame (`seq` as in the header).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TcpSegment<'a> {
    pub frame: usize,
    pub key: FlowKey,
    pub seq: u32,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
}

/// Everything seen for one direction: the segments with their payloads.
#[derive(Debug, Default)]
struct FlowState {
    first_frame: Option<usize>,
    isn: Option<u32>,
    fin_seq: Option<u32>,
    reset: bool,
    stored: u64,
    pending: Vec<(SegmentRecord, Vec<u8>)>,
}

/// Collects TCP segments and reassembles them into [`TcpStream`]s.
#[derive(Debug)]
pub(crate) struct Reassembler {
    flows: HashMap<FlowKey, FlowState>,
    limit: u64,
}

impl Default for Reassembler {
    fn default() -> Self {
        Self::with_limit(MAX_STREAM_BYTES)
    }
}

impl Reassembler {
    /// Keeps up to `limit` payload bytes per direction (default: [`MAX_STREAM_BYTES`]).
    pub fn with_limit(limit: u64) -> Self {
        Reassembler {
            flows: HashMap::new(),
            limit,
        }
    }

    /// Adds one segment. The payload of an RST is ignored (it is not stream
    /// data). Fails when a direction's stored payload passes the limit.
    pub fn push(&mut self, seg: &TcpSegment<'_>) -> Result<(), CaptureError> {
        let flow = self.flows.entry(seg.key).or_default();
        flow.first_frame.get_or_insert(seg.frame);
        let seq = seg.seq.wrapping_add(u32::from(seg.syn));
        if seg.syn && flow.isn.is_none() {
            flow.isn = Some(seg.seq);
        }
        flow.reset |= seg.rst;
        if seg.fin && !seg.rst && flow.fin_seq.is_none() {
            flow.fin_seq = Some(stream_offset_to_seq(seq, seg.payload.len()));
        }
        if seg.payload.is_empty() || seg.rst {
            return Ok(());
        }
        flow.stored += seg.payload.len() as u64;
        if flow.stored > self.limit {
            let msg = format!("stream {:?} holds more than {} bytes", seg.key, self.limit);
            return Err(CaptureError::Format(msg));
        }
        let record = SegmentRecord {
            frame: seg.frame,
            seq,
            len: seg.payload.len() as u32,
        };
        flow.pending.push((record, seg.payload.to_vec()));
        Ok(())
    }

    /// Reassembles every direction; streams sorted by `(first_frame, key)`.
    pub fn finish(self) -> Vec<TcpStream> {
        let mut streams: Vec<TcpStream> = self.flows.into_iter().map(assemble).collect();
        streams.sort_by_key(|s| (s.first_frame, s.key));
        streams
    }
}

/// Signed distance from `reference` to `seq` in sequence space.
fn rel(seq: u32, reference: u32) -> i64 {
    i64::from(seq.wrapping_sub(reference) as i32)
}

/// Builds the stream of one direction from its stored segments.
fn assemble((key, flow): (FlowKey, FlowState)) -> TcpStream {
    let first_seq = flow.pending.first().map_or(0, |(r, _)| r.seq);
    let reference = flow.isn.map_or(first_seq, |isn| isn.wrapping_add(1));
    let mut order: Vec<(i64, usize, &[u8])> = flow
        .pending
        .iter()
        .map(|(r, d)| (rel(r.seq, reference), r.frame, &d[..]))
        .collect();
    order.sort_by_key(|&(offset, frame, _)| (offset, frame));
    // Without a SYN the stream starts at the lowest sequence number seen.
    let start = if flow.isn.is_some() {
        0
    } else {
        order.first().map_or(0, |o| o.0)
    };
    let mut stream = TcpStream {
        key,
        first_frame: flow.first_frame.unwrap_or(0),
        isn: flow.isn,
        bytes: Vec::new(),
        base_seq: reference.wrapping_add(start as u32),
        gaps: Vec::new(),
        islands: Vec::new(),
        retransmitted_bytes: 0,
        segments: flow.pending.iter().map(|(r, _)| *r).collect(),
        fin_seq: flow.fin_seq,
        reset: flow.reset,
    };
    let mut end = start;
    for (offset, _, data) in order {
        end = place(&mut stream, end, offset, data, reference);
    }
    // A FIN beyond the data: the end of the stream was lost.
    let fin = flow.fin_seq.map_or(end, |f| rel(f, reference));
    if fin > end {
        let seq = reference.wrapping_add(end as u32);
        stream.gaps.push((seq, (fin - end) as u32));
    }
    stream
}

/// Places one segment starting at `offset`, given that everything before
/// `end` is already placed; returns the new `end`.
fn place(stream: &mut TcpStream, end: i64, offset: i64, data: &[u8], reference: u32) -> i64 {
    let seg_end = offset + data.len() as i64;
    if offset > end {
        let (hole, seq) = (
            reference.wrapping_add(end as u32),
            reference.wrapping_add(offset as u32),
        );
        stream.gaps.push((hole, (offset - end) as u32));
        stream.islands.push(StreamChunk {
            seq,
            data: Vec::new(),
        });
    }
    // Everything in [offset, end) was already placed (segments come sorted by offset).
    let seen = (end - offset).clamp(0, data.len() as i64) as usize;
    stream.retransmitted_bytes += seen as u64;
    let fresh = &data[seen..];
    match stream.islands.last_mut() {
        Some(island) => island.data.extend_from_slice(fresh),
        None => stream.bytes.extend_from_slice(fresh),
    }
    end.max(seg_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(frame: usize, seq: u32, payload: &[u8]) -> TcpSegment<'_> {
        let key = FlowKey::new(
            "10.0.0.1:1000".parse().unwrap(),
            "10.0.0.2:2000".parse().unwrap(),
        );
        TcpSegment {
            frame,
            key,
            seq,
            syn: false,
            fin: false,
            rst: false,
            payload,
        }
    }

    /// `seg` with one flag set: 'S' SYN, 'F' FIN, 'R' RST.
    fn flag(mut s: TcpSegment<'_>, flag: char) -> TcpSegment<'_> {
        let field = match flag {
            'S' => &mut s.syn,
            'F' => &mut s.fin,
            _ => &mut s.rst,
        };
        *field = true;
        s
    }

    fn syn(frame: usize, seq: u32) -> TcpSegment<'static> {
        flag(seg(frame, seq, &[]), 'S')
    }

    fn run(segs: &[TcpSegment<'_>]) -> TcpStream {
        let mut r = Reassembler::default();
        segs.iter().for_each(|s| r.push(s).unwrap());
        let mut streams = r.finish();
        assert_eq!(streams.len(), 1);
        streams.remove(0)
    }

    #[test]
    fn wraparound() {
        let s = run(&[
            syn(0, u32::MAX - 2),
            seg(1, 2, b"efgh"),
            seg(2, u32::MAX - 1, b"abcd"),
        ]);
        assert_eq!((&s.bytes[..], s.base_seq), (&b"abcdefgh"[..], u32::MAX - 1));
        assert_eq!((s.offset_to_seq(4), s.seq_to_offset(3)), (2, Some(5)));
        assert!(s.is_complete());
        // No SYN: the stream starts at the lowest sequence number, across the wrap.
        let s = run(&[seg(0, 2, b"efgh"), seg(1, u32::MAX - 1, b"abcd")]);
        assert_eq!((&s.bytes[..], s.isn), (&b"abcdefgh"[..], None));
    }

    #[test]
    fn out_of_order_and_before_syn() {
        let s = run(&[seg(0, 111, b"world"), seg(1, 105, b"hello "), syn(2, 104)]);
        assert_eq!(s.bytes, b"hello world");
        assert_eq!((s.isn, s.base_seq, s.first_frame), (Some(104), 105, 0));
        let order: Vec<(usize, u32)> = s.segments.iter().map(|r| (r.frame, r.seq)).collect();
        assert_eq!(order, [(0, 111), (1, 105)]);
    }

    #[test]
    fn duplicate_and_overlapping_retransmits() {
        let segs = [
            seg(0, 9, b"abcd"),
            seg(1, 9, b"abcd"),
            seg(2, 11, b"cdefgh"),
            seg(3, 13, b"ef"),
        ];
        let s = run(&segs);
        assert_eq!(
            (&s.bytes[..], s.retransmitted_bytes),
            (&b"abcdefgh"[..], 4 + 2 + 2)
        );
        assert_eq!(s.segments.len(), 4);
    }

    #[test]
    fn gaps_stop_the_stream() {
        let (fin, data) = (flag(seg(4, 30, b""), 'F'), seg(1, 1, b"abc"));
        let s = run(&[syn(0, 0), data, seg(2, 10, b"xyz"), seg(3, 20, b"q"), fin]);
        assert_eq!(s.bytes, b"abc");
        assert_eq!(s.gaps, [(4, 6), (13, 7), (21, 9)]);
        let islands: Vec<(u32, &[u8])> = s.islands.iter().map(|c| (c.seq, &c.data[..])).collect();
        assert_eq!(islands, [(10, &b"xyz"[..]), (20, b"q")]);
        assert_eq!((s.fin_seq, s.is_complete()), (Some(30), false));
        // A lost first segment after the SYN is a leading gap.
        let s = run(&[syn(0, 99), seg(1, 105, b"late")]);
        assert_eq!((s.bytes.len(), &s.gaps[..]), (0, &[(100, 5)][..]));
    }

    #[test]
    fn rst_payload_ignored_and_syn_data_kept() {
        let (tfo, rst) = (
            flag(seg(0, 4, b"tfo"), 'S'),
            flag(seg(2, 9, b"reset text"), 'R'),
        );
        let s = run(&[tfo, seg(1, 8, b"!"), rst]);
        assert_eq!((&s.bytes[..], s.reset), (&b"tfo!"[..], true));
    }

    #[test]
    fn limit_is_an_error() {
        let mut r = Reassembler::with_limit(8);
        r.push(&seg(0, 0, b"12345678")).unwrap();
        assert!(matches!(
            r.push(&seg(1, 8, b"9")),
            Err(CaptureError::Format(_))
        ));
    }

    #[test]
    fn sorted_by_first_frame_then_key() {
        let mut r = Reassembler::default();
        let mut back = seg(0, 5, b"b");
        back.key = back.key.reversed();
        r.push(&seg(1, 1, b"a")).unwrap();
        r.push(&back).unwrap();
        let keys: Vec<FlowKey> = r.finish().iter().map(|s| s.key).collect();
        assert_eq!(keys, [back.key, back.key.reversed()]);
    }
}
