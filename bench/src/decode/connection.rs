//! Decoding one direction of an iWARP connection: the MPA startup frame,
//! then FPDUs in Full Operation (RFC 5044 sections 4 and 7), with CRC and
//! Markers as the startup frames of both directions negotiated them.
//!
//! CRCs are used in both directions when either startup frame sets C;
//! Markers go towards a peer whose startup frame set M. When a capture
//! misses the startup frames, Markers are assumed off and CRCs are judged
//! by the field: zero means off, anything else is checked.

use serde_json::{json, Map, Value};
use uwarp_stack::wire::fpdu::{CrcVerdict, Fpdu};
use uwarp_stack::wire::marker::MarkedFpdu;
use uwarp_stack::wire::mpa::{
    FrameKind, StartupFrame, StartupRepr, KEY_LEN, REPLY_KEY, REQUEST_KEY,
};
use uwarp_stack::wire::WireError;

use super::fields;
use super::segment;
use super::sequence::Queues;
use super::terminate::Kept;
use super::CrcMode;

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// An MPA Request.
    MpaRequest,
    /// An MPA Reply.
    MpaReply,
    /// An FPDU.
    Fpdu,
    /// Stream octets that are not MPA, or that a hole cut off.
    Undecoded,
}

impl RecordKind {
    /// The `kind` value of the JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Self::MpaRequest => "mpa_request",
            Self::MpaReply => "mpa_reply",
            Self::Fpdu => "fpdu",
            Self::Undecoded => "undecoded",
        }
    }
}

/// One decoded unit of one direction's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// What it is.
    pub kind: RecordKind,
    /// Offset of its first octet in the direction's stream.
    pub offset: usize,
    /// Its length on the wire.
    pub len: usize,
    /// The decoded fields.
    pub fields: Map<String, Value>,
    /// What the Terminate pass needs of an FPDU.
    pub kept: Option<Kept>,
}

/// The startup frame at the head of a stream, if the stream opens with one.
pub struct Startup<'a> {
    /// The parsed frame, or why it could not be parsed.
    pub parsed: Result<StartupRepr<'a>, WireError>,
    /// Whether it is a Request or a Reply (from the key).
    pub kind: FrameKind,
    /// Its length, when known.
    pub len: usize,
}

/// Reads the startup frame at the head of `bytes`.
pub fn startup(bytes: &[u8]) -> Option<Startup<'_>> {
    let key = bytes.get(..KEY_LEN)?;
    let kind = if key == REQUEST_KEY {
        FrameKind::Request
    } else if key == REPLY_KEY {
        FrameKind::Reply
    } else {
        return None;
    };
    let parsed = StartupRepr::parse_bytes(bytes);
    let len = match &parsed {
        Ok((_, len)) => *len,
        Err(_) => StartupFrame::new_checked(bytes).map_or(bytes.len(), |f| f.frame_len()),
    };
    Some(Startup {
        parsed: parsed.map(|(repr, _)| repr),
        kind,
        len,
    })
}

/// How FPDUs in one direction are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// CRC use: known on or off, or judged per FPDU.
    pub crc: CrcMode,
    /// Markers in this direction.
    pub markers: bool,
}

/// Works out the framing of the direction whose startup frame is `own` and
/// whose peer sent `peer`.
pub fn framing(own: Option<&Startup<'_>>, peer: Option<&Startup<'_>>, forced: CrcMode) -> Framing {
    let (own, peer) = (parsed(own), parsed(peer));
    let crc = match (forced, own, peer) {
        (CrcMode::On | CrcMode::Off, _, _) => forced,
        (CrcMode::Auto, Some(a), Some(b)) => {
            if a.crc || b.crc {
                CrcMode::On
            } else {
                CrcMode::Off
            }
        }
        (CrcMode::Auto, Some(one), None) | (CrcMode::Auto, None, Some(one)) if one.crc => {
            CrcMode::On
        }
        (CrcMode::Auto, _, _) => CrcMode::Auto,
    };
    Framing {
        crc,
        markers: peer.is_some_and(|p| p.markers),
    }
}

/// The successfully parsed frame of `start`, if any.
fn parsed<'a>(start: Option<&Startup<'a>>) -> Option<StartupRepr<'a>> {
    start.and_then(|s| s.parsed.as_ref().ok().copied())
}

/// Decodes `bytes`, one direction of a connection, into units.
pub fn decode_direction(bytes: &[u8], own: Option<&Startup<'_>>, framing: Framing) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut offset = 0;
    if let Some(start) = own {
        units.push(startup_unit(bytes, start));
        match &start.parsed {
            Ok(repr) if !repr.reject => offset = start.len,
            _ => {
                undecoded(
                    &mut units,
                    bytes,
                    start.len,
                    "no Full Operation follows this frame",
                );
                return units;
            }
        }
    }
    let full_operation_start = offset;
    let mut queues = Queues::new(own.is_some());
    while offset < bytes.len() {
        let stream_offset = (offset - full_operation_start) as u64;
        match fpdu_unit(&bytes[offset..], stream_offset, framing, &mut queues) {
            Ok((mut unit, in_sync)) => {
                unit.offset = offset;
                offset += unit.len;
                units.push(unit);
                if !in_sync {
                    undecoded(&mut units, bytes, offset, "FPDU stream out of step");
                    break;
                }
            }
            Err(_) if offset == 0 && bytes.starts_with(b"MPA ID ") => {
                let key = String::from_utf8_lossy(&bytes[..bytes.len().min(KEY_LEN)]);
                let reason = format!("MPA startup frame with an invalid key {key:?}");
                undecoded(&mut units, bytes, offset, &reason);
                if let Some(unit) = units.last_mut() {
                    unit.fields.extend(fields::startup(bytes));
                }
                break;
            }
            Err(err) if offset == 0 => {
                let head = fields::hex(&bytes[..bytes.len().min(16)]);
                let reason =
                    format!("neither an MPA startup frame nor an FPDU ({err}); starts {head}");
                undecoded(&mut units, bytes, offset, &reason);
                break;
            }
            Err(err) => {
                undecoded(&mut units, bytes, offset, &err.to_string());
                break;
            }
        }
    }
    units
}

fn startup_unit(bytes: &[u8], start: &Startup<'_>) -> Unit {
    let kind = match start.kind {
        FrameKind::Request => RecordKind::MpaRequest,
        FrameKind::Reply => RecordKind::MpaReply,
    };
    let mut fields = fields::startup(bytes);
    if let Err(err) = &start.parsed {
        fields.insert("error".into(), json!(err.to_string()));
    }
    Unit {
        kind,
        offset: 0,
        len: start.len.min(bytes.len()),
        fields,
        kept: None,
    }
}

fn undecoded(units: &mut Vec<Unit>, bytes: &[u8], offset: usize, reason: &str) {
    if offset >= bytes.len() {
        return;
    }
    let mut fields = Map::new();
    fields.insert("reason".into(), json!(reason));
    units.push(Unit {
        kind: RecordKind::Undecoded,
        offset,
        len: bytes.len() - offset,
        fields,
        kept: None,
    });
}

/// Decodes the FPDU at the head of `bytes`; the flag says whether the
/// stream still looks in step (headers that do not parse and a CRC that
/// did not check mean the length field was probably not a length field).
fn fpdu_unit(
    bytes: &[u8],
    stream_offset: u64,
    framing: Framing,
    queues: &mut Queues,
) -> Result<(Unit, bool), WireError> {
    let (unmarked, wire_len, computed_crc) = if framing.markers {
        let marked = MarkedFpdu::parse(stream_offset, bytes)?;
        (marked.fpdu, marked.marked_len, marked.computed_crc)
    } else {
        let fpdu = Fpdu::new_checked(bytes)?;
        let len = fpdu.fpdu_len();
        let computed = uwarp_stack::wire::crc::crc32c(fpdu.covered());
        (bytes[..len].to_vec(), len, computed)
    };
    let fpdu = Fpdu::new_unchecked(&unmarked[..]);
    let verdict = match framing.crc {
        CrcMode::Off => CrcVerdict::Off,
        CrcMode::Auto if fpdu.crc_field() == 0 => CrcVerdict::Off,
        CrcMode::On | CrcMode::Auto if fpdu.crc_field() == computed_crc => CrcVerdict::Good,
        CrcMode::On | CrcMode::Auto => CrcVerdict::Bad {
            carried: fpdu.crc_field(),
            computed: computed_crc,
        },
    };
    let mut fields = Map::new();
    fields.insert("ulpdu_len".into(), json!(fpdu.ulpdu_len()));
    fields.insert("mpa_len".into(), json!(fpdu.ulpdu_len()));
    fields.insert("markers".into(), json!(framing.markers));
    // RFC 5044 4.1 asks for zeros; siw sometimes sends other octets.
    fields.insert("pad".into(), json!(fields::hex(fpdu.pad())));
    fields::crc(verdict, &mut fields);
    let headers_parse = segment::fields(fpdu.ulpdu(), queues, &mut fields);
    let in_sync = headers_parse || verdict == CrcVerdict::Good;
    let crc_failed = matches!(verdict, CrcVerdict::Bad { .. });
    Ok((
        Unit {
            kind: RecordKind::Fpdu,
            offset: 0,
            len: wire_len,
            fields,
            kept: Some(Kept::new(fpdu.ulpdu(), crc_failed)),
        },
        in_sync,
    ))
}
