//! The capture decoder behind `uwarp-perf decode`: reassembled TCP streams
//! in, one record per MPA startup frame and per FPDU out (RFC 5044,
//! RFC 6581, RFC 5041, RFC 5040, RFC 8797), as text or as JSON lines.
//!
//! Unlike Wireshark it decodes MPA revision 2, the RFC 6581 enhanced block
//! and RFC 8797 private data, and it reads Linux siw's Terminate layout,
//! choosing it from the Terminate's context when the control word reads
//! both ways (RFC 5040 section 4.8). An invalid header is shown with every
//! field that can be read and what is wrong with it. Corrupt or non-MPA
//! data is reported as such, never a crash.

mod connection;
mod fields;
mod segment;
mod sequence;
mod terminate;
mod text;

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use uwarp_stack::wire::terminate::LayoutHint;

use crate::capture::{FlowKey, TcpStream};
pub use connection::RecordKind;

/// How to treat the CRC field of FPDUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrcMode {
    /// As the startup frames negotiated; without them, judge each FPDU by
    /// its field (zero means off).
    #[default]
    Auto,
    /// Always check.
    On,
    /// Never check.
    Off,
}

/// Decoder settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeOptions {
    /// CRC handling.
    pub crc: CrcMode,
    /// Which Terminate layout to assume (siw's or RFC 5040's).
    pub terminate_layout: LayoutHint,
}

/// One decoded MPA frame, FPDU or undecodable run of one TCP direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The direction.
    pub key: FlowKey,
    /// 1-based number of the capture frame that completed it.
    pub frame: usize,
    /// TCP sequence number of its first octet.
    pub tcp_seq: u32,
    /// Offset of its first octet in the direction's stream.
    pub offset: usize,
    /// Its length on the wire.
    pub len: usize,
    /// What it is.
    pub kind: RecordKind,
    /// Decoded fields (see [`Record::to_json`]).
    pub fields: Map<String, Value>,
    /// What the Terminate pass needs of an FPDU.
    pub(crate) kept: Option<terminate::Kept>,
}

impl Record {
    /// The record as one JSON object: `kind`, `src`, `dst`, `tcp_seq`,
    /// `frame`, `stream_offset`, `wire_len`, then the decoded fields
    /// (`ulpdu_len`, `crc`, the DDP and RDMAP header fields and `error`
    /// for FPDUs; see `docs/decode.md`).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), json!(self.kind.name()));
        out.insert("src".into(), json!(self.key.src.to_string()));
        out.insert("dst".into(), json!(self.key.dst.to_string()));
        out.insert("tcp_seq".into(), json!(self.tcp_seq));
        out.insert("frame".into(), json!(self.frame));
        out.insert("stream_offset".into(), json!(self.offset));
        out.insert("wire_len".into(), json!(self.len));
        out.extend(self.fields.clone());
        Value::Object(out)
    }

    /// The record as one line of text.
    pub fn to_text(&self) -> String {
        text::line(self)
    }
}

/// Decodes every connection in `streams`. Records come in the order the
/// capture completed them; Terminates are read in that order, each with
/// the frames before it as context.
pub fn decode_streams(streams: &[TcpStream], options: &DecodeOptions) -> Vec<Record> {
    let by_key: HashMap<FlowKey, &TcpStream> = streams.iter().map(|s| (s.key, s)).collect();
    let mut records = Vec::new();
    for stream in streams {
        let peer = by_key.get(&stream.key.reversed()).copied();
        records.extend(decode_one(stream, peer, options.crc));
    }
    records.sort_by_key(|r| (r.frame, r.key, r.offset));
    terminate::decode_all(&mut records, options.terminate_layout);
    records
}

/// Decodes one direction, using its peer's startup frame for negotiation.
fn decode_one(stream: &TcpStream, peer: Option<&TcpStream>, crc: CrcMode) -> Vec<Record> {
    let own = connection::startup(&stream.bytes);
    let peer_start = peer.and_then(|p| connection::startup(&p.bytes));
    let framing = connection::framing(own.as_ref(), peer_start.as_ref(), crc);
    let frames = FrameIndex::new(stream);
    let mut units = connection::decode_direction(&stream.bytes, own.as_ref(), framing);
    if let Some(&(seq, len)) = stream.gaps.first() {
        let mut fields = Map::new();
        fields.insert(
            "reason".into(),
            json!(format!(
                "capture has a hole of {len} octets at seq {seq}; decoding stops"
            )),
        );
        units.push(connection::Unit {
            kind: RecordKind::Undecoded,
            offset: stream.bytes.len(),
            len: 0,
            fields,
            kept: None,
        });
    }
    units
        .into_iter()
        .map(|unit| Record {
            key: stream.key,
            frame: frames.completing(unit.offset + unit.len.max(1) - 1),
            tcp_seq: stream.offset_to_seq(unit.offset),
            offset: unit.offset,
            len: unit.len,
            kind: unit.kind,
            fields: unit.fields,
            kept: unit.kept,
        })
        .collect()
}

/// Finds the capture frame that delivered a given stream octet.
struct FrameIndex {
    /// (start offset, end offset, 0-based frame), sorted by start.
    runs: Vec<(usize, usize, usize)>,
    fallback: usize,
}

impl FrameIndex {
    /// The largest TCP payload a segment can carry (with TSO in captures).
    const MAX_RUN: usize = 1 << 18;

    fn new(stream: &TcpStream) -> Self {
        let mut runs: Vec<_> = stream
            .segments
            .iter()
            .map(|s| {
                let start = s.seq.wrapping_sub(stream.base_seq) as usize;
                (start, start + s.len as usize, s.frame)
            })
            .collect();
        runs.sort_unstable();
        Self {
            runs,
            fallback: stream.first_frame,
        }
    }

    /// 1-based number of the earliest frame that carried `offset`.
    fn completing(&self, offset: usize) -> usize {
        let end = self.runs.partition_point(|r| r.0 <= offset);
        let frame = self.runs[..end]
            .iter()
            .rev()
            .take_while(|r| r.0 + Self::MAX_RUN > offset)
            .filter(|r| r.1 > offset)
            .map(|r| r.2)
            .min()
            .unwrap_or(self.fallback);
        frame + 1
    }
}
