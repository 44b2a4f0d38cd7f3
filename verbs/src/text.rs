//! The `*_str` functions: the names of the verbs' enumerations, as
//! libibverbs spells them (applications print them in their messages),
//! with `unknown` for values outside its tables.

use core::ffi::{c_char, c_int, CStr};

use crate::export::symbol_versions;

/// The name at `index` of `names`, or `unknown`.
fn name_of(names: &[&'static CStr], index: c_int, unknown: &'static CStr) -> *const c_char {
    usize::try_from(index)
        .ok()
        .and_then(|i| names.get(i))
        .unwrap_or(&unknown)
        .as_ptr()
}

/// `ibv_node_type_str`: the name of an `enum ibv_node_type`.
#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    const NAMES: [&CStr; 7] = [
        c"unknown",
        c"InfiniBand channel adapter",
        c"InfiniBand switch",
        c"InfiniBand router",
        c"iWARP NIC",
        c"usNIC",
        c"usNIC UDP",
    ];
    name_of(&NAMES, node_type, c"unknown")
}

/// `ibv_port_state_str`: the name of an `enum ibv_port_state`.
#[no_mangle]
pub extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    const NAMES: [&CStr; 6] = [
        c"no state change (NOP)",
        c"down",
        c"init",
        c"armed",
        c"active",
        c"active defer",
    ];
    name_of(&NAMES, state, c"unknown")
}

/// `ibv_event_type_str`: the name of an `enum ibv_event_type`.
#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    const NAMES: [&CStr; 19] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
    ];
    name_of(&NAMES, event, c"unknown")
}

/// `ibv_wc_status_str`: the name of an `enum ibv_wc_status`.
#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    const NAMES: [&CStr; 22] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
    ];
    name_of(&NAMES, status, c"unknown")
}

symbol_versions! {
    ibv_node_type_str => "IBVERBS_1.1",
    ibv_port_state_str => "IBVERBS_1.1",
    ibv_event_type_str => "IBVERBS_1.1",
    ibv_wc_status_str => "IBVERBS_1.1",
}
