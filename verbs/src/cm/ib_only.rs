//! The librdmacm verbs that only InfiniBand and RoCE give a meaning to,
//! answered as the kernel's connection manager answers them on an iWARP
//! device, so that programs linked against them load and take their
//! iWARP path: multicast (`rdma_join_multicast`, `_ex`,
//! `rdma_leave_multicast`: `ENOSYS`, iWARP has no multicast) and
//! Enhanced Connection Establishment (`rdma_set_local_ece` is accepted and
//! sends nothing, `rdma_get_remote_ece` tells no options,
//! `rdma_reject_ece` rejects as `rdma_reject` does).

use core::ffi::{c_int, c_void};

use super::connect::rdma_reject;
use super::id::with_id;
use crate::abi::cm::RdmaCmId;
use crate::abi::verbs::IbvEce;
use crate::export::symbol_versions;

/// The answer to a multicast verb on iWARP: -1 with `errno` `ENOSYS` for
/// a live id (`EINVAL` otherwise), as the kernel's `rdma_join_multicast`
/// gives for a transport that is neither InfiniBand nor RoCE.
///
/// # Safety
///
/// `id` is NULL or live.
unsafe fn no_multicast(id: *mut RdmaCmId) -> c_int {
    // SAFETY: forwarded.
    unsafe { with_id(id, |_| Err(libc::ENOSYS)) }
}

/// `rdma_join_multicast`: `ENOSYS`, as the kernel answers on iWARP.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut RdmaCmId,
    _addr: *mut libc::sockaddr,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { no_multicast(id) }
}

/// `rdma_join_multicast_ex`: `ENOSYS`, as the kernel answers on iWARP.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut RdmaCmId,
    _attr: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { no_multicast(id) }
}

/// `rdma_leave_multicast`: `ENOSYS`, as the kernel answers on iWARP.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_leave_multicast(
    id: *mut RdmaCmId,
    _addr: *mut libc::sockaddr,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { no_multicast(id) }
}

/// `rdma_set_local_ece`: accepted, and nothing is sent (an iWARP
/// connection has no ECE). 0, or -1 with `errno` `EINVAL` for an id not
/// alive or no options.
///
/// # Safety
///
/// `id` is NULL or live; `ece` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut RdmaCmId, ece: *mut IbvEce) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |_| {
            if ece.is_null() {
                Err(libc::EINVAL)
            } else {
                Ok(0)
            }
        })
    }
}

/// `rdma_get_remote_ece`: the peer's options, which on iWARP are none
/// (all zeros). 0, or -1 with `errno` `EINVAL` for an id not alive or no
/// place to write them.
///
/// # Safety
///
/// `id` is NULL or live; `ece` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut RdmaCmId, ece: *mut IbvEce) -> c_int {
    // SAFETY: forwarded; the caller promises `ece` is writable.
    unsafe {
        with_id(id, |_| {
            if ece.is_null() {
                return Err(libc::EINVAL);
            }
            ece.write(IbvEce {
                vendor_id: 0,
                options: 0,
                comp_mask: 0,
            });
            Ok(0)
        })
    }
}

/// `rdma_reject_ece`: rejects as [`rdma_reject`] does (the ECE reason
/// has no place in an MPA Reply).
///
/// # Safety
///
/// As [`rdma_reject`].
#[no_mangle]
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut RdmaCmId,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { rdma_reject(id, private_data, private_data_len) }
}

symbol_versions! {
    rdma_join_multicast => "RDMACM_1.0",
    rdma_leave_multicast => "RDMACM_1.0",
    rdma_join_multicast_ex => "RDMACM_1.1",
    rdma_set_local_ece => "RDMACM_1.3",
    rdma_get_remote_ece => "RDMACM_1.3",
    rdma_reject_ece => "RDMACM_1.3",
}
