//! Shared receive queues: `ibv_create_srq`, `ibv_destroy_srq`,
//! `ibv_modify_srq`, `ibv_query_srq`, and the context's `post_srq_recv`
//! (RFC 5040 section 5's receive queue, shared by several queue pairs).
//! A queue holds at most its `max_wr` receives (`ENOMEM` beyond), and is
//! not destroyed while a queue pair takes receives from it (`EBUSY`).

use core::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use uwarp::SharedReceiveQueue;

use crate::abi::verbs::*;
use crate::export::{errno_of, guard, pointer_or_errno, post_chain, symbol_versions};
use crate::limits;
use crate::provider;
use crate::qp::recv_wr;

/// A shared receive queue: the `ibv_srq` applications hold, and uwarp's.
#[repr(C)]
pub struct Srq {
    ibv: IbvSrq,
    /// uwarp's queue.
    pub srq: SharedReceiveQueue,
    /// Its limits, as created.
    attr: IbvSrqAttr,
    /// The queue pairs taking receives from it.
    pub users: AtomicUsize,
}

impl Srq {
    /// The queue behind `srq`.
    ///
    /// # Safety
    ///
    /// `srq` is a live queue [`ibv_create_srq`] returned.
    pub unsafe fn from_ibv<'a>(srq: *mut IbvSrq) -> &'a Srq {
        // SAFETY: the caller promises a live queue; `ibv` is the first
        // field of the `#[repr(C)]` `Srq` it was boxed as.
        unsafe { &*srq.cast::<Srq>() }
    }
}

/// `ibv_create_srq`: a shared receive queue; NULL with `errno` set when
/// the limits asked for are beyond the device's.
///
/// # Safety
///
/// `pd` is NULL or live; `attr` is NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut IbvPd, attr: *mut IbvSrqInitAttr) -> *mut IbvSrq {
    pointer_or_errno(|| {
        if pd.is_null() || attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller promises a readable and writable structure.
        let init = unsafe { &mut *attr };
        let wanted = init.attr;
        if wanted.max_wr > limits::MAX_QP_WR as u32 || wanted.max_sge > limits::MAX_SGE as u32 {
            return Err(libc::EINVAL);
        }
        let device = provider::device()?;
        init.attr.max_wr = wanted.max_wr.max(1);
        init.attr.max_sge = wanted.max_sge.max(1);
        let srq = Box::new(Srq {
            ibv: IbvSrq {
                // SAFETY: the caller promises a live domain.
                context: unsafe { (*pd).context },
                srq_context: init.srq_context,
                pd,
                handle: 0,
                // SAFETY: all zeros is PTHREAD_MUTEX_INITIALIZER and
                // PTHREAD_COND_INITIALIZER on glibc.
                mutex: unsafe { core::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { core::mem::zeroed() },
                events_completed: 0,
            },
            srq: device.create_srq(init.attr.max_wr as usize),
            attr: init.attr,
            users: AtomicUsize::new(0),
        });
        Ok(Box::into_raw(srq).cast())
    })
}

/// `ibv_destroy_srq`: 0, or `EBUSY` while a queue pair takes receives
/// from the queue (it stays as it was).
///
/// # Safety
///
/// `srq` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut IbvSrq) -> c_int {
    if srq.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a live queue.
        if unsafe { Srq::from_ibv(srq) }.users.load(Ordering::Acquire) > 0 {
            return libc::EBUSY;
        }
        // SAFETY: a live queue from ibv_create_srq, which boxed an `Srq`
        // starting with it; no queue pair uses it.
        drop(unsafe { Box::from_raw(srq.cast::<Srq>()) });
        0
    })
}

/// `ibv_query_srq`: the queue's limits. 0, or an `errno` value.
///
/// # Safety
///
/// `srq` is NULL or live; `attr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    if srq.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller promises a live queue and a writable structure.
    unsafe { attr.write(Srq::from_ibv(srq).attr) };
    0
}

/// `ibv_modify_srq`: uwarp's queue has no limit event to arm
/// (`IBV_SRQ_LIMIT`) nor a size to change (`IBV_SRQ_MAX_WR`):
/// `EOPNOTSUPP` for either, 0 for an empty mask.
///
/// # Safety
///
/// `srq` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut IbvSrq,
    _attr: *mut IbvSrqAttr,
    mask: c_int,
) -> c_int {
    match (srq.is_null(), mask) {
        (true, _) => libc::EINVAL,
        (false, 0) => 0,
        (false, _) => libc::EOPNOTSUPP,
    }
}

/// The context's `post_srq_recv`: posts a chain of receives to the
/// shared queue. 0, or an `errno` value with `*bad` the first not posted
/// (`ENOMEM` once `max_wr` receives are outstanding).
///
/// # Safety
///
/// `srq` is live; `wr` is a valid chain; `bad` is writable.
pub unsafe extern "C" fn post_srq_recv(
    srq: *mut IbvSrq,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    // SAFETY: the caller (the header's inline) passes a live queue and a
    // valid chain.
    unsafe {
        let owner = Srq::from_ibv(srq);
        post_chain(wr, bad, |this| {
            let recv = recv_wr(this, owner.attr.max_sge)?;
            owner.srq.post(recv).map_err(|e| errno_of(&e))
        })
    }
}

symbol_versions! {
    ibv_create_srq => "IBVERBS_1.1",
    ibv_destroy_srq => "IBVERBS_1.1",
    ibv_query_srq => "IBVERBS_1.1",
    ibv_modify_srq => "IBVERBS_1.1",
}
