//! The fields of an FPDU's ULPDU: every DDP and RDMAP header field that
//! can be read, valid or not (RFC 5041 section 4, RFC 5040 section 4.1),
//! the RDMA Read Request header (RFC 5040 section 4.4), and `error`
//! naming the first thing wrong with them: an invalid header, or a queue
//! number or MSN that does not fit the stream ([`super::sequence`]).
//!
//! A Terminate's own fields come later, with its context
//! ([`super::terminate`]).

use serde_json::{json, Map, Value};
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::lenient::RawSegment;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};

use super::fields::hex_value;
use super::sequence::Queues;

/// Adds the fields of `ulpdu` to `fields`; returns whether its headers
/// parse (a queue number or MSN out of place does not make them
/// unreadable).
pub fn fields(ulpdu: &[u8], queues: &mut Queues, fields: &mut Map<String, Value>) -> bool {
    let Some(raw) = RawSegment::read(ulpdu) else {
        fields.insert("error".into(), json!("empty ULPDU"));
        return false;
    };
    raw_fields(&raw, fields);
    let mut errors = Vec::new();
    let parsed = RdmapSegment::parse(ulpdu);
    match &parsed {
        Ok(segment) => errors.extend(queues.check(segment)),
        Err(err) => errors.push(err.to_string()),
    }
    let request_ok =
        raw.opcode() != Some(Opcode::ReadRequest) || read_request(raw.payload, fields, &mut errors);
    if let Some(first) = errors.into_iter().next() {
        fields.insert("error".into(), json!(first));
    }
    parsed.is_ok() && request_ok
}

/// The DDP and RDMAP header fields of `raw`.
fn raw_fields(raw: &RawSegment<'_>, fields: &mut Map<String, Value>) {
    fields.insert("T".into(), json!(raw.tagged));
    fields.insert("L".into(), json!(raw.last));
    fields.insert("ddp_rsvd".into(), json!(raw.ddp_reserved));
    fields.insert("ddp_ver".into(), json!(raw.ddp_version));
    if let Some(control) = raw.rdmap {
        fields.insert("rdmap_ver".into(), json!(control.version));
        fields.insert("rdmap_rsvd".into(), json!(control.reserved));
        fields.insert("opcode".into(), json!(control.opcode));
    }
    if let Some(opcode) = raw.opcode() {
        fields.insert("op".into(), json!(opcode.name()));
    }
    match raw.model {
        Some(BufferModel::Tagged { stag, to }) => {
            fields.insert("stag".into(), json!(hex_value(stag)));
            fields.insert("to".into(), json!(hex_value(to)));
        }
        Some(BufferModel::Untagged {
            ulp_word,
            qn,
            msn,
            mo,
        }) => {
            fields.insert("qn".into(), json!(qn));
            fields.insert("msn".into(), json!(msn));
            fields.insert("mo".into(), json!(mo));
            if raw.opcode().is_some_and(Opcode::invalidates) {
                fields.insert("invalidate_stag".into(), json!(hex_value(ulp_word)));
            } else if ulp_word != 0 {
                fields.insert("rsvd_ulp".into(), json!(hex_value(ulp_word)));
            }
        }
        None => {}
    }
    if raw.model.is_some() {
        fields.insert("payload_len".into(), json!(raw.payload.len()));
    }
}

/// The Read Request header at the start of `payload`; returns whether
/// there is one, else adds why not to `errors`.
fn read_request(payload: &[u8], fields: &mut Map<String, Value>, errors: &mut Vec<String>) -> bool {
    match ReadRequest::parse(payload) {
        Ok(request) => {
            fields.insert(
                "rreq".into(),
                json!({
                    "sink_stag": hex_value(request.sink_stag),
                    "sink_to": hex_value(request.sink_to),
                    "size": request.size,
                    "src_stag": hex_value(request.source_stag),
                    "src_to": hex_value(request.source_to),
                }),
            );
            true
        }
        Err(err) => {
            errors.push(format!("Read Request: {err}"));
            false
        }
    }
}
