//! Asynchronous events and the rest of the device-level verbs programs
//! import: `ibv_get_async_event`, `ibv_ack_async_event`, the fork-range
//! calls, importing devices and PDs, `ibv_qp_to_qp_ex`, and
//! `ibv_resolve_eth_l2_from_gid`.

use core::ffi::{c_int, c_void};
use core::ptr;

use crate::abi::verbs::{IbvContext, IbvPd, IbvQp};
use crate::export::{fail, set_errno, symbol_versions, wait_record};

/// `ibv_get_async_event`: waits for the next asynchronous event of the
/// context on its `async_fd`. uwarp raises none yet (a queue pair's
/// errors reach the program through its completions and the connection
/// manager's events), so this waits as a quiet device's would: for ever,
/// or `EAGAIN` at once if the descriptor is non-blocking, or `EINTR`.
/// -1 with `errno` set.
///
/// # Safety
///
/// `context` is NULL or an open context.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut IbvContext,
    _event: *mut c_void,
) -> c_int {
    if context as usize == 0 {
        return fail(libc::EINVAL);
    }
    // SAFETY: the caller promises an open context.
    let fd = unsafe { async_fd(context) };
    let mut record: u64 = 0;
    // SAFETY: `record` is valid for its 8 octets. Nothing ever writes the
    // pipe while the context is open, so this returns only with an error.
    unsafe { wait_record(fd, &raw mut record) };
    -1
}

/// The context's `async_fd`, read in a frame of its own (see
/// [`wait_record`]).
///
/// # Safety
///
/// `context` is open.
unsafe extern "C" fn async_fd(context: *mut IbvContext) -> c_int {
    // SAFETY: the caller promises an open context.
    unsafe { (*context).async_fd }
}

/// `ibv_ack_async_event`: acknowledges an event [`ibv_get_async_event`]
/// returned (it returns none).
#[no_mangle]
pub extern "C" fn ibv_ack_async_event(_event: *mut c_void) {}

/// `ibv_dontfork_range`: no memory is pinned for DMA, so a child of
/// `fork` shares nothing uwarp needs kept from it. 0.
#[no_mangle]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_dofork_range`: see [`ibv_dontfork_range`]. 0.
#[no_mangle]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_import_device`: a context shared from another process through its
/// kernel command descriptor, which uwarp does not have: NULL with
/// `errno` `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut IbvContext {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// `ibv_import_pd`: as [`ibv_import_device`], for a protection domain.
#[no_mangle]
pub extern "C" fn ibv_import_pd(_context: *mut IbvContext, _handle: u32) -> *mut IbvPd {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// `ibv_unimport_pd`: nothing was imported.
#[no_mangle]
pub extern "C" fn ibv_unimport_pd(_pd: *mut IbvPd) {}

/// `ibv_qp_to_qp_ex`: uwarp offers no `ibv_wr_*` interface: NULL, which
/// programs take as "use `ibv_post_send`".
#[no_mangle]
pub extern "C" fn ibv_qp_to_qp_ex(_qp: *mut IbvQp) -> *mut c_void {
    ptr::null_mut()
}

/// `ibv_resolve_eth_l2_from_gid`: the MAC and VLAN of a RoCE GID; iWARP
/// connects by IP address: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_resolve_eth_l2_from_gid(
    _context: *mut IbvContext,
    _attr: *mut c_void,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> c_int {
    libc::EOPNOTSUPP
}

symbol_versions! {
    ibv_get_async_event => "IBVERBS_1.1",
    ibv_ack_async_event => "IBVERBS_1.1",
    ibv_dontfork_range => "IBVERBS_1.1",
    ibv_dofork_range => "IBVERBS_1.1",
    ibv_import_device => "IBVERBS_1.10",
    ibv_import_pd => "IBVERBS_1.10",
    ibv_unimport_pd => "IBVERBS_1.10",
    ibv_qp_to_qp_ex => "IBVERBS_1.6",
    ibv_resolve_eth_l2_from_gid => "IBVERBS_1.1",
}
