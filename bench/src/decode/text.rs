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
    if f.contains_key("error") {
        return format!("{name} INVALID: {}", value(f, "error"));
    }
    let flags = set_flags(
        f,
        &[("M", "M"), ("C", "C"), ("R", "R"), ("S_enhanced", "S")],
    );
    let mut text = format!(
        "{name} rev {} flags [{flags}] pd_len {}",
        value(f, "rev"),
        value(f, "pd_len")
    );
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
    text
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
    if f.contains_key("op") {
        text += &format!(" | {}", value(f, "op"));
        text += if f.get("L") == Some(&Value::Bool(true)) {
            " L"
        } else {
            ""
        };
        if f.contains_key("stag") {
            text += &format!(" stag {} to {}", value(f, "stag"), value(f, "to"));
        } else {
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
        text += &format!(" | {} octets", value(f, "payload_len"));
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
            if t.get("ambiguous") == Some(&Value::Bool(true)) {
                ", ambiguous"
            } else {
                ""
            }
        );
    }
    if f.contains_key("error") {
        text += &format!(" | ERROR {}", value(f, "error"));
    }
    text
}
