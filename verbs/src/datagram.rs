//! Address handles and multicast: `ibv_create_ah`,
//! `ibv_create_ah_from_wc`, `ibv_destroy_ah`, `ibv_attach_mcast`,
//! `ibv_detach_mcast`. They serve unreliable-datagram queue pairs, and
//! iWARP has only reliable connections (RFC 5040 runs over a TCP stream):
//! each answers `EOPNOTSUPP`, as siw's do. Programs that link them
//! (perftest for its UD tests) load, and learn it when they ask.

use core::ffi::{c_int, c_void};
use core::ptr;

use crate::abi::verbs::{IbvGid, IbvPd, IbvQp};
use crate::export::{set_errno, symbol_versions};

/// `ibv_create_ah`: NULL with `errno` `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_create_ah(_pd: *mut IbvPd, _attr: *mut c_void) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// `ibv_create_ah_from_wc`: NULL with `errno` `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_create_ah_from_wc(
    _pd: *mut IbvPd,
    _wc: *mut c_void,
    _grh: *mut c_void,
    _port_num: u8,
) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// `ibv_destroy_ah`: there are none: `EINVAL`.
#[no_mangle]
pub extern "C" fn ibv_destroy_ah(_ah: *mut c_void) -> c_int {
    libc::EINVAL
}

/// `ibv_attach_mcast`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_attach_mcast(_qp: *mut IbvQp, _gid: *const IbvGid, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_detach_mcast`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_detach_mcast(_qp: *mut IbvQp, _gid: *const IbvGid, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

symbol_versions! {
    ibv_create_ah => "IBVERBS_1.1",
    ibv_create_ah_from_wc => "IBVERBS_1.1",
    ibv_destroy_ah => "IBVERBS_1.1",
    ibv_attach_mcast => "IBVERBS_1.1",
    ibv_detach_mcast => "IBVERBS_1.1",
}
