//! The decoded fields of one MPA startup frame, and the MPA fields of an
//! FPDU, as a JSON object (RFC 5044 section 7.1, RFC 6581 section 9 and
//! RFC 8797 for startup frames and their private data; RFC 5044 section
//! 4.1 for the CRC).
//!
//! Field names follow `tests/data/siw/golden-vectors.json` where it names a
//! field, so a decoded frame can be compared with the golden decode.

use serde_json::{json, Map, Value};
use uwarp_stack::wire::fpdu::CrcVerdict;
use uwarp_stack::wire::mpa::{EnhancedBlock, StartupFrame, ENHANCED_BLOCK_LEN, KEY_LEN};
use uwarp_stack::wire::rpcrdma::RpcRdmaPrivateData;

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number as `0x` and its hex digits, as the golden decode writes them.
pub fn hex_value(value: impl Into<u64>) -> String {
    format!("{:#x}", value.into())
}

/// Every field of the startup frame at the head of `bytes` that it holds,
/// valid or not: the key, and with the fixed header the flags, Rev,
/// PD_Length, the private data there is (`pd_present` when it is less
/// than PD_Length), the enhanced block when S is set and its octets are
/// there, and an RFC 8797 message in the private data.
pub fn startup(bytes: &[u8]) -> Map<String, Value> {
    let mut fields = Map::new();
    let key = &bytes[..bytes.len().min(KEY_LEN)];
    fields.insert("key".into(), json!(String::from_utf8_lossy(key)));
    let Ok(frame) = StartupFrame::new_header_checked(bytes) else {
        return fields;
    };
    let pd = frame.present_private_data();
    fields.insert("rev".into(), json!(frame.revision()));
    fields.insert("flags".into(), json!(format!("{:#x}", frame.flags())));
    fields.insert("M".into(), json!(frame.markers()));
    fields.insert("C".into(), json!(frame.crc()));
    fields.insert("R".into(), json!(frame.reject()));
    fields.insert("S_enhanced".into(), json!(frame.enhanced()));
    fields.insert("reserved_flags".into(), json!(frame.reserved_flags()));
    fields.insert("pd_len".into(), json!(frame.pd_length()));
    fields.insert("pd".into(), json!(hex(pd)));
    if pd.len() < usize::from(frame.pd_length()) {
        fields.insert("pd_present".into(), json!(pd.len()));
    }
    let user_pd = match frame.enhanced().then(|| EnhancedBlock::parse(pd)) {
        Some(Ok(block)) => {
            fields.insert("ird".into(), json!(block.ird));
            fields.insert("ord".into(), json!(block.ord));
            fields.insert("A_peer_to_peer".into(), json!(block.peer_to_peer));
            fields.insert("B_send_rtr".into(), json!(block.send_rtr));
            fields.insert("C_write_rtr".into(), json!(block.write_rtr));
            fields.insert("D_read_rtr".into(), json!(block.read_rtr));
            let user_pd = &pd[ENHANCED_BLOCK_LEN..];
            fields.insert("user_pd".into(), json!(hex(user_pd)));
            user_pd
        }
        Some(Err(_)) => &pd[..0],
        None => pd,
    };
    match RpcRdmaPrivateData::find(user_pd) {
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
