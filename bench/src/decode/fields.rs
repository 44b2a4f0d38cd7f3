//! The decoded fields of one MPA startup frame or one FPDU, as a JSON
//! object (RFC 5044 section 7.1 and RFC 6581 section 9 for startup frames;
//! RFC 5041 section 4, RFC 5040 section 4 and RFC 8797 for what FPDUs and
//! private data carry).
//!
//! Field names follow `tests/data/siw/golden-vectors.json` where it names a
//! field, so a decoded frame can be compared with the golden decode.

use serde_json::{json, Map, Value};
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::fpdu::CrcVerdict;
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};
use uwarp_stack::wire::rpcrdma::RpcRdmaPrivateData;
use uwarp_stack::wire::terminate::{LayoutHint, TerminateLayout, TerminateRepr};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number as `0x` and its hex digits, as the golden decode writes them.
fn hex_value(value: impl Into<u64>) -> String {
    format!("{:#x}", value.into())
}

/// Fields of a parsed startup frame; `raw_pd` is all PD_Length octets.
pub fn startup(repr: &StartupRepr<'_>, raw_flags: u8, raw_pd: &[u8]) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("rev".into(), json!(repr.revision as u8));
    fields.insert("flags".into(), json!(format!("{raw_flags:#x}")));
    fields.insert("M".into(), json!(repr.markers));
    fields.insert("C".into(), json!(repr.crc));
    fields.insert("R".into(), json!(repr.reject));
    fields.insert("S_enhanced".into(), json!(repr.enhanced.is_some()));
    fields.insert("reserved_flags".into(), json!(repr.reserved_flags));
    fields.insert("pd_len".into(), json!(raw_pd.len()));
    fields.insert("pd".into(), json!(hex(raw_pd)));
    if let Some(block) = repr.enhanced {
        fields.insert("ird".into(), json!(block.ird));
        fields.insert("ord".into(), json!(block.ord));
        fields.insert("A_peer_to_peer".into(), json!(block.peer_to_peer));
        fields.insert("B_send_rtr".into(), json!(block.send_rtr));
        fields.insert("C_write_rtr".into(), json!(block.write_rtr));
        fields.insert("D_read_rtr".into(), json!(block.read_rtr));
        fields.insert("user_pd".into(), json!(hex(repr.private_data)));
    }
    match RpcRdmaPrivateData::find(repr.private_data) {
        Some(Ok(rpc)) => {
            fields.insert(
                "rpcrdma".into(),
                json!({
                    "remote_invalidation": rpc.remote_invalidation,
                    "send_size": rpc.send_size,
                    "receive_size": rpc.receive_size,
                }),
            );
        }
        Some(Err(err)) => {
            fields.insert("rpcrdma_error".into(), json!(err.to_string()));
        }
        None => {}
    }
    fields
}

/// The CRC verdict's name and, when checked, the two values.
pub fn crc(verdict: CrcVerdict, fields: &mut Map<String, Value>) {
    let name = match verdict {
        CrcVerdict::Good => "good",
        CrcVerdict::Bad { carried, computed } => {
            fields.insert("crc_carried".into(), json!(hex_value(carried)));
            fields.insert("crc_computed".into(), json!(hex_value(computed)));
            "bad"
        }
        CrcVerdict::Off => "off",
    };
    fields.insert("crc".into(), json!(name));
}

/// Fields of a ULPDU read as a DDP segment carrying RDMAP.
pub fn ulpdu(ulpdu: &[u8], hint: LayoutHint, fields: &mut Map<String, Value>) {
    let segment = match RdmapSegment::parse(ulpdu) {
        Ok(segment) => segment,
        Err(err) => {
            fields.insert("error".into(), json!(err.to_string()));
            return;
        }
    };
    let ddp = &segment.ddp;
    fields.insert("T".into(), json!(ddp.tagged()));
    fields.insert("L".into(), json!(ddp.last));
    fields.insert("ddp_ver".into(), json!(1));
    fields.insert("rdmap_ver".into(), json!(1));
    fields.insert("opcode".into(), json!(segment.opcode() as u8));
    fields.insert("op".into(), json!(segment.opcode().name()));
    match ddp.model {
        BufferModel::Tagged { stag, to } => {
            fields.insert("stag".into(), json!(hex_value(stag)));
            fields.insert("to".into(), json!(hex_value(to)));
        }
        BufferModel::Untagged {
            ulp_word,
            qn,
            msn,
            mo,
        } => {
            fields.insert("qn".into(), json!(qn));
            fields.insert("msn".into(), json!(msn));
            fields.insert("mo".into(), json!(mo));
            if segment.opcode().invalidates() {
                fields.insert("invalidate_stag".into(), json!(hex_value(ulp_word)));
            } else if ulp_word != 0 {
                fields.insert("rsvd_ulp".into(), json!(hex_value(ulp_word)));
            }
        }
    }
    if ddp.reserved != 0 || segment.control.reserved != 0 {
        fields.insert("reserved_bits_set".into(), json!(true));
    }
    fields.insert("payload_len".into(), json!(segment.payload.len()));
    match segment.opcode() {
        Opcode::ReadRequest => read_request(segment.payload, fields),
        Opcode::Terminate => terminate(segment.payload, hint, fields),
        _ => {}
    }
}

fn read_request(payload: &[u8], fields: &mut Map<String, Value>) {
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
        }
        Err(err) => {
            fields.insert("error".into(), json!(format!("Read Request: {err}")));
        }
    }
}

fn terminate(payload: &[u8], hint: LayoutHint, fields: &mut Map<String, Value>) {
    let term = match TerminateRepr::parse(payload, hint) {
        Ok(term) => term,
        Err(err) => {
            fields.insert("error".into(), json!(format!("Terminate: {err}")));
            return;
        }
    };
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
    fields.insert("term".into(), Value::Object(out));
}
