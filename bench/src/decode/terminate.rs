//! Terminates read in the context of their capture (RFC 5040 sections 4.8
//! and 7): each control word's layout is chosen with the evidence of
//! [`uwarp_stack::wire::terminate_layout`], given the frame the Terminate
//! answers (the last frame the other side sent before it) and the layout
//! its sender used in earlier Terminates; a Terminate and the frame it
//! answers each name the other.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::{json, Map, Value};
use uwarp_stack::wire::ddp::UNTAGGED_HEADER_LEN;
use uwarp_stack::wire::lenient::RawSegment;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, READ_REQUEST_LEN};
use uwarp_stack::wire::terminate::{LayoutHint, TerminateLayout};
use uwarp_stack::wire::terminate_cause::{could_answer, Answered};
use uwarp_stack::wire::terminate_layout::{resolve, Context, Resolved};

use super::fields::hex;
use super::{Record, RecordKind};

/// What the Terminate pass keeps of an FPDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The ULPDU: all of a Terminate's, the headers of any other
    /// (a Read Request's included).
    ulpdu: Vec<u8>,
    /// Whether its CRC failed the check.
    crc_failed: bool,
}

impl Kept {
    /// Keeps what the Terminate pass needs of `ulpdu`.
    pub fn new(ulpdu: &[u8], crc_failed: bool) -> Self {
        let terminate =
            RawSegment::read(ulpdu).and_then(|raw| raw.opcode()) == Some(Opcode::Terminate);
        let len = if terminate {
            ulpdu.len()
        } else {
            ulpdu.len().min(UNTAGGED_HEADER_LEN + READ_REQUEST_LEN)
        };
        Self {
            ulpdu: ulpdu[..len].to_vec(),
            crc_failed,
        }
    }

    /// The Terminate payload, if the ULPDU is a Terminate whose headers
    /// parse.
    fn terminate_payload(&self) -> Option<&[u8]> {
        RdmapSegment::parse(&self.ulpdu)
            .ok()
            .filter(|segment| segment.opcode() == Opcode::Terminate)
            .map(|segment| segment.payload)
    }
}

/// What was decided about one Terminate.
struct Outcome {
    /// Its `term` field, or its `error`.
    field: (&'static str, Value),
    /// The record it answers, when its error could answer that record.
    answers: Option<usize>,
    /// Its sender's address and the layout settled for it.
    settled: Option<(IpAddr, TerminateLayout)>,
}

/// Reads every Terminate among `records` (in capture order) with `hint`
/// and its context, and marks the frames they answer.
pub fn decode_all(records: &mut [Record], hint: LayoutHint) {
    let mut earlier: HashMap<IpAddr, TerminateLayout> = HashMap::new();
    for at in 0..records.len() {
        let Some(outcome) = decode_one(records, at, hint, &earlier) else {
            continue;
        };
        let (name, value) = outcome.field;
        let error = value.get("name").cloned();
        records[at].fields.insert(name.into(), value);
        if let Some((ip, layout)) = outcome.settled {
            earlier.insert(ip, layout);
        }
        if let (Some(answered), Some(error)) = (outcome.answers, error) {
            let (frame, answered_frame) = (records[at].frame, records[answered].frame);
            if let Some(Value::Object(term)) = records[at].fields.get_mut("term") {
                term.insert("answers".into(), json!(answered_frame));
            }
            records[answered].fields.insert(
                "terminated_by".into(),
                json!({ "frame": frame, "error": error }),
            );
        }
    }
}

/// Decides the Terminate of `records[at]`, if it carries one.
fn decode_one(
    records: &[Record],
    at: usize,
    hint: LayoutHint,
    earlier: &HashMap<IpAddr, TerminateLayout>,
) -> Option<Outcome> {
    let record = &records[at];
    let payload = record.kept.as_ref()?.terminate_payload()?;
    let answered_at = answered(records, at);
    let answered = answered_at.and_then(|i| answered_frame(&records[i]));
    let ip = record.key.src.ip();
    let context = Context {
        answered,
        earlier: earlier.get(&ip).copied(),
    };
    let resolved = match resolve(payload, hint, &context) {
        Ok(resolved) => resolved,
        Err(err) => {
            return Some(Outcome {
                field: ("error", json!(format!("Terminate: {err}"))),
                answers: None,
                settled: None,
            })
        }
    };
    let answers =
        answered_at.filter(|_| answered.is_some_and(|a| could_answer(resolved.repr.error, &a)));
    let settled = resolved.evidence.map(|_| (ip, resolved.repr.layout));
    Some(Outcome {
        field: ("term", term_fields(&resolved)),
        answers,
        settled,
    })
}

/// The index of the last record before `at` that the other side of its
/// connection sent: an FPDU, or its startup frame.
fn answered(records: &[Record], at: usize) -> Option<usize> {
    let other = records[at].key.reversed();
    records[..at]
        .iter()
        .rposition(|r| r.key == other && r.kind != RecordKind::Undecoded)
}

/// `record` as the frame a Terminate answers.
fn answered_frame(record: &Record) -> Option<Answered<'_>> {
    match record.kind {
        RecordKind::MpaRequest | RecordKind::MpaReply => Some(Answered::Startup),
        RecordKind::Fpdu => record.kept.as_ref().map(|kept| Answered::Fpdu {
            ulpdu: &kept.ulpdu,
            crc_failed: kept.crc_failed,
        }),
        RecordKind::Undecoded => None,
    }
}

/// The `term` field of a Terminate read as `resolved` says.
fn term_fields(resolved: &Resolved<'_>) -> Value {
    let term = &resolved.repr;
    let (layer, etype, _) = term.error.parts();
    let mut out = Map::new();
    out.insert("layer".into(), json!(layer as u8));
    out.insert("etype".into(), json!(etype));
    out.insert("ecode".into(), json!(term.code));
    out.insert("name".into(), json!(term.error.name()));
    out.insert(
        "layout".into(),
        json!(match term.layout {
            TerminateLayout::Rfc5040 => "rfc5040",
            TerminateLayout::Siw => "siw",
        }),
    );
    out.insert("ambiguous".into(), json!(term.ambiguous));
    if let Some(evidence) = resolved.evidence {
        out.insert("evidence".into(), json!(evidence.name()));
    }
    out.insert("M".into(), json!(term.ddp_segment_len.is_some()));
    out.insert("D".into(), json!(term.ddp_header.is_some()));
    out.insert("R".into(), json!(term.rdmap_header.is_some()));
    if let Some(len) = term.ddp_segment_len {
        out.insert("ddp_segment_len".into(), json!(len));
    }
    if let Some(header) = term.ddp_header {
        out.insert("ddp_header".into(), json!(hex(header)));
    }
    if let Some(header) = term.rdmap_header {
        out.insert("rdmap_header".into(), json!(hex(header)));
    }
    if !term.trailing.is_empty() {
        out.insert("trailing".into(), json!(hex(term.trailing)));
    }
    Value::Object(out)
}
