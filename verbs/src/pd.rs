//! Protection domains: `ibv_alloc_pd`, `ibv_dealloc_pd` (RFC 5040
//! section 2.1: what queue pairs and memory regions may work together).

use core::ffi::c_int;
use core::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::verbs::{IbvContext, IbvPd};
use crate::export::{errno_of, guard, set_errno, symbol_versions};
use crate::provider;

/// A protection domain: the `ibv_pd` applications hold, and uwarp's.
#[repr(C)]
pub struct Pd {
    ibv: IbvPd,
    /// uwarp's domain.
    pub pd: uwarp::ProtectionDomain,
    /// Memory regions and queue pairs made in it and not yet destroyed:
    /// while there are any, it cannot be freed (`EBUSY`).
    pub users: AtomicUsize,
}

impl Pd {
    /// The domain behind `pd`.
    ///
    /// # Safety
    ///
    /// `pd` is a live domain [`ibv_alloc_pd`] returned.
    pub unsafe fn from_ibv<'a>(pd: *mut IbvPd) -> &'a Pd {
        // SAFETY: the caller promises a live domain; `ibv` is the first
        // field of the `#[repr(C)]` `Pd` it was boxed as.
        unsafe { &*pd.cast::<Pd>() }
    }
}

/// `ibv_alloc_pd`: a new protection domain; NULL with `errno` set when
/// none can be made.
///
/// # Safety
///
/// `context` is NULL or a context `ibv_open_device` returned.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    guard(ptr::null_mut(), || {
        if context.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        let allocated =
            provider::device().and_then(|device| device.alloc_pd().map_err(|e| errno_of(&e)));
        match allocated {
            Ok(pd) => {
                let ibv = IbvPd {
                    context,
                    handle: pd.id().raw(),
                };
                let users = AtomicUsize::new(0);
                Box::into_raw(Box::new(Pd { ibv, pd, users })).cast()
            }
            Err(errno) => {
                set_errno(errno);
                ptr::null_mut()
            }
        }
    })
}

/// `ibv_dealloc_pd`: frees a protection domain. 0, or an `errno` value
/// (`EBUSY` while memory regions or queue pairs are in it).
///
/// # Safety
///
/// `pd` is NULL or one [`ibv_alloc_pd`] returned, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    if pd.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller promises a live PD.
    if unsafe { Pd::from_ibv(pd) }.users.load(Ordering::Acquire) > 0 {
        return libc::EBUSY;
    }
    // SAFETY: the caller promises a live PD from ibv_alloc_pd, which boxed
    // a `Pd` whose first field is the `ibv_pd`.
    drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
    0
}

symbol_versions! {
    ibv_alloc_pd => "IBVERBS_1.1",
    ibv_dealloc_pd => "IBVERBS_1.1",
}
