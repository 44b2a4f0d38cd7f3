//! `rdma_get_devices` and `rdma_free_devices` (`rpoll` is in
//! [`crate::rsocket`]).

use core::ffi::c_int;
use core::ptr;

use crate::abi::verbs::IbvContext;
use crate::device::shared_context;
use crate::export::{guard, set_errno, symbol_versions};

/// `rdma_get_devices`: the connection manager's device contexts,
/// NULL-terminated (`*num`, when not NULL, their number); NULL with
/// `errno` set if the device cannot be opened.
///
/// # Safety
///
/// `num` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num: *mut c_int) -> *mut *mut IbvContext {
    guard(ptr::null_mut(), || match shared_context() {
        Ok(context) => {
            if !num.is_null() {
                // SAFETY: the caller promises it is writable.
                unsafe { num.write(1) };
            }
            Box::into_raw(Box::new([context, ptr::null_mut()])).cast()
        }
        Err(errno) => {
            set_errno(errno);
            ptr::null_mut()
        }
    })
}

/// `rdma_free_devices`: frees a list [`rdma_get_devices`] returned.
///
/// # Safety
///
/// `list` is NULL or such a list, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut IbvContext) {
    if !list.is_null() {
        // SAFETY: rdma_get_devices boxed the list as this array.
        drop(unsafe { Box::from_raw(list.cast::<[*mut IbvContext; 2]>()) });
    }
}

symbol_versions! {
    rdma_get_devices => "RDMACM_1.0",
    rdma_free_devices => "RDMACM_1.0",
}
