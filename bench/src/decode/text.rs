//! One line of human-readable text per decoded record, built from the same
//! fields as the JSON output so the two never disagree.

use serde_json::{Map, Value};

use super::{Record, RecordKind};

/// A field as text: strings bare, everything else as JSON.
fn value(fields: &Map<String, Value>, name: &str) -> String {
    match fields.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "-".into(),
    }
}

/// The names of the boolean fields among `names` that are true.
fn set_flags(fields: &Map<String, Value>, names: &[(&str, &str)]) -> String {
    names
        .iter()
        .filter(|(field, _)| fields.get(*field) == Some(&Value::Bool(true)))
        .map(|(_, shown)| *shown)
        .collect::<Vec<_>>()
        .join("")
}

/// Renders `record` as one line.
pub fn line(record: &Record) -> String {
    let head = format!(
        "#{:<5} {} > {} seq={}",
        record.frame, record.key.src, record.key.dst, record.tcp_seq
    );
    let f = &record.fields;
    let body = match record.kind {
        RecordKind::MpaRequest | RecordKind::MpaReply => startup(record.kind, f),
        RecordKind::Fpdu => fpdu(f),
        RecordKind::Undecoded => format!("undecoded {} octets: {}", record.len, value(f, "reason")),
    };
    format!("{head} {body}")
}

fn startup(kind: RecordKind, f: &Map<String, Value>) -> String {
    let name = if kind == RecordKind::MpaRequest {
        "MPA Request"
    } else {
        "MPA Reply"
    };
    let flags = set_flags(
        f,
        &[("M", "M"), ("C", "C"), ("R", "R"), ("S_enhanced", "S")],
    );
    let mut text = format!(
        "{name} rev {} flags [{flags}] pd_len {}",
        value(f, "rev"),
        value(f, "pd_len")
    );
    if f.contains_key("pd_present") {
        text += &format!(" ({} present)", value(f, "pd_present"));
    }
    if f.contains_key("ird") {
        let rtr = set_flags(
            f,
            &[
                ("A_peer_to_peer", "A"),
                ("B_send_rtr", "B"),
                ("C_write_rtr", "C"),
                ("D_read_rtr", "D"),
            ],
        );
        text += &format!(" ird {} ord {} [{rtr}]", value(f, "ird"), value(f, "ord"));
    }
    if let Some(Value::Object(rpc)) = f.get("rpcrdma") {
        text += &format!(
            " rpcrdma send {} recv {} inv {}",
            value(rpc, "send_size"),
            value(rpc, "receive_size"),
            value(rpc, "remote_invalidation")
        );
    }
    text + &error(f)
}

fn fpdu(f: &Map<String, Value>) -> String {
    let mut text = format!(
        "FPDU ulpdu {} crc {}",
        value(f, "ulpdu_len"),
        value(f, "crc")
    );
    if f.get("markers") == Some(&Value::Bool(true)) {
        text += " markers";
    }
    if f.contains_key("ddp_ver") {
        text += &format!(" |{}", headers(f));
    }
    if let Some(Value::Object(r)) = f.get("rreq") {
        text += &format!(
            " | read {} from {}@{} to {}@{}",
            value(r, "size"),
            value(r, "src_stag"),
            value(r, "src_to"),
            value(r, "sink_stag"),
            value(r, "sink_to")
        );
    }
    if let Some(Value::Object(t)) = f.get("term") {
        text += &format!(
            " | {} ({}/{}/{:#04x}, {} layout{})",
            value(t, "name"),
            value(t, "layer"),
            value(t, "etype"),
            t.get("ecode").and_then(Value::as_u64).unwrap_or(0),
            value(t, "layout"),
            layout_reason(t)
        );
    }
    if let Some(Value::Object(by)) = f.get("terminated_by") {
        text += &format!(
            " | TERMINATED by #{}: {}",
            value(by, "frame"),
            value(by, "error")
        );
    }
    text + &error(f)
}

/// The DDP and RDMAP header fields: versions only when not 1, the opcode
/// by name when it has one, then the buffer-model fields the ULPDU holds.
fn headers(f: &Map<String, Value>) -> String {
    let mut text = String::new();
    for (field, shown) in [("ddp_ver", "ddp"), ("rdmap_ver", "rdmap")] {
        if f.get(field).is_some_and(|v| v != 1) {
            text += &format!(" {shown} v{}", value(f, field));
        }
    }
    match (f.get("op"), f.get("opcode").and_then(Value::as_u64)) {
        (Some(_), _) => text += &format!(" {}", value(f, "op")),
        (None, Some(opcode)) => text += &format!(" opcode {opcode:#x}"),
        (None, None) => {}
    }
    if f.get("L") == Some(&Value::Bool(true)) {
        text += " L";
    }
    if f.contains_key("stag") {
        text += &format!(" stag {} to {}", value(f, "stag"), value(f, "to"));
    } else if f.contains_key("qn") {
        text += &format!(
            " qn {} msn {} mo {}",
            value(f, "qn"),
            value(f, "msn"),
            value(f, "mo")
        );
    }
    if f.contains_key("invalidate_stag") {
        text += &format!(" inv {}", value(f, "invalidate_stag"));
    }
    if f.contains_key("payload_len") {
        text += &format!(" | {} octets", value(f, "payload_len"));
    }
    text
}

/// How a Terminate's layout was chosen, and the frame it answers.
fn layout_reason(t: &Map<String, Value>) -> String {
    let mut text = if t.get("ambiguous") == Some(&Value::Bool(true)) {
        ", ambiguous".to_string()
    } else {
        match t.get("evidence").and_then(Value::as_str) {
            Some("given") | None => String::new(),
            Some(evidence) => format!(" by {evidence}"),
        }
    };
    if t.contains_key("answers") {
        text += &format!(", answers #{}", value(t, "answers"));
    }
    text
}

/// ` | ERROR` and the error, when the record has one.
fn error(f: &Map<String, Value>) -> String {
    if f.contains_key("error") {
        format!(" | ERROR {}", value(f, "error"))
    } else {
        String::new()
    }
}
