//! The queue pair of an id: `rdma_create_qp`, `rdma_create_qp_ex`,
//! `rdma_destroy_qp`. As librdmacm does, a NULL protection domain takes
//! the id's (an endpoint's) or else the process's default one, the id's
//! shared receive queue is used when the attributes name none, and
//! missing completion queues are made for the id (each with a completion
//! channel), kept in its `send_cq` and `recv_cq` and destroyed with the
//! queue pair.

use core::ffi::c_int;
use core::ptr;
use std::sync::OnceLock;

use crate::abi::cm::RdmaCmId;
use crate::abi::verbs::*;
use crate::cm::id::is_live;
use crate::cq::{ibv_create_comp_channel, ibv_create_cq, ibv_destroy_comp_channel, ibv_destroy_cq};
use crate::device::shared_context;
use crate::export::{guard, set_errno, symbol_versions};
use crate::pd::ibv_alloc_pd;
use crate::qp::{ibv_create_qp, ibv_destroy_qp};

/// The process's default protection domain (librdmacm's per-device one),
/// allocated on first use and kept.
pub(super) fn default_pd() -> Result<*mut IbvPd, c_int> {
    static PD: OnceLock<Result<usize, c_int>> = OnceLock::new();
    let made = PD.get_or_init(|| {
        let context = shared_context()?;
        // SAFETY: the shared context is open for good.
        let pd = unsafe { ibv_alloc_pd(context) };
        if pd.is_null() {
            // SAFETY: the errno ibv_alloc_pd set.
            Err(unsafe { *libc::__errno_location() })
        } else {
            Ok(pd as usize)
        }
    });
    made.map(|address| address as *mut IbvPd)
}

/// A completion queue of `depth` entries with a channel of its own, for
/// an id that was given none.
fn own_cq(depth: u32) -> Result<(*mut IbvCompChannel, *mut IbvCq), c_int> {
    let context = shared_context()?;
    // SAFETY: the shared context is open for good.
    let channel = unsafe { ibv_create_comp_channel(context) };
    if channel.is_null() {
        // SAFETY: the errno the call set.
        return Err(unsafe { *libc::__errno_location() });
    }
    let depth = c_int::try_from(depth.max(1)).unwrap_or(c_int::MAX);
    // SAFETY: a live context and channel.
    let cq = unsafe { ibv_create_cq(context, depth, ptr::null_mut(), channel, 0) };
    if cq.is_null() {
        // SAFETY: the errno the call set; the channel is ours and unused.
        let errno = unsafe { *libc::__errno_location() };
        // SAFETY: as above.
        unsafe { ibv_destroy_comp_channel(channel) };
        return Err(errno);
    }
    Ok((channel, cq))
}

/// Makes the id's queue pair. 0, or -1 with `errno` set (`EINVAL` for an
/// id not alive or NULL attributes).
///
/// # Safety
///
/// `pd` is NULL or live; `attr` is NULL or readable and writable.
unsafe fn create(id: *mut RdmaCmId, pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> c_int {
    if !is_live(id) || attr.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    guard(-1, || {
        // SAFETY: a live id; the caller promises readable attributes.
        let (id, attr) = unsafe { (&mut *id, &mut *attr) };
        if !id.qp.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // An endpoint's domain (`rdma_create_ep`), else the default one.
        let pd = match (pd.is_null(), id.pd.is_null()) {
            (false, _) => Ok(pd),
            (true, false) => Ok(id.pd),
            (true, true) => default_pd(),
        };
        let pd = match pd {
            Ok(pd) => pd,
            Err(errno) => {
                set_errno(errno);
                return -1;
            }
        };
        if attr.send_cq.is_null() {
            match own_cq(attr.cap.max_send_wr) {
                Ok((channel, cq)) => (id.send_cq_channel, id.send_cq) = (channel, cq),
                Err(errno) => {
                    set_errno(errno);
                    return -1;
                }
            }
            attr.send_cq = id.send_cq;
        }
        if attr.recv_cq.is_null() {
            match own_cq(attr.cap.max_recv_wr) {
                Ok((channel, cq)) => (id.recv_cq_channel, id.recv_cq) = (channel, cq),
                Err(errno) => {
                    set_errno(errno);
                    return -1;
                }
            }
            attr.recv_cq = id.recv_cq;
        }
        if attr.srq.is_null() {
            // The id's shared receive queue (`rdma_create_srq`), if any.
            attr.srq = id.srq;
        }
        // SAFETY: a live domain and attributes naming live queues.
        let qp = unsafe { ibv_create_qp(pd, attr) };
        if qp.is_null() {
            return -1;
        }
        // SAFETY: just made; librdmacm leaves an id's queue pair in INIT.
        unsafe { (*qp).state = IBV_QPS_INIT };
        id.qp = qp;
        id.pd = pd;
        0
    })
}

/// `rdma_create_qp`: the id's queue pair, in `pd` (NULL: the default
/// domain), on the queues `attr` names (NULL ones are made for the id).
/// 0, or -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `pd` is NULL or live; `attr` is NULL or readable
/// and writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut RdmaCmId,
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { create(id, pd, attr) }
}

/// `rdma_create_qp_ex`: as [`rdma_create_qp`], from extended attributes
/// (their domain if `IBV_QP_INIT_ATTR_PD` says so; extended features are
/// `EOPNOTSUPP`).
///
/// # Safety
///
/// `id` is NULL or live; `attr` is NULL or readable and writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut RdmaCmId,
    attr: *mut IbvQpInitAttrExHead,
) -> c_int {
    if !is_live(id) || attr.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller promises readable attributes.
    let (mask, pd) = unsafe { ((*attr).comp_mask, (*attr).pd) };
    if mask & !IBV_QP_INIT_ATTR_PD != 0 {
        set_errno(libc::EOPNOTSUPP);
        return -1;
    }
    let pd = if mask & IBV_QP_INIT_ATTR_PD != 0 {
        pd
    } else {
        ptr::null_mut()
    };
    // SAFETY: the caller promises readable and writable attributes.
    let ex = unsafe { &mut *attr };
    let mut base = IbvQpInitAttr {
        qp_context: ex.qp_context,
        send_cq: ex.send_cq,
        recv_cq: ex.recv_cq,
        srq: ex.srq,
        cap: ex.cap,
        qp_type: ex.qp_type,
        sq_sig_all: ex.sq_sig_all,
    };
    // SAFETY: forwarded, with the attributes copied.
    let answer = unsafe { create(id, pd, &mut base) };
    (ex.send_cq, ex.recv_cq, ex.cap) = (base.send_cq, base.recv_cq, base.cap);
    answer
}

/// `rdma_destroy_qp`: destroys the id's queue pair, and the completion
/// queues made for it.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut RdmaCmId) {
    if !is_live(id) {
        return;
    }
    // SAFETY: the caller promises a live id; its queue pair and own queues
    // are live until destroyed here.
    unsafe {
        let id = &mut *id;
        if !id.qp.is_null() {
            ibv_destroy_qp(id.qp);
            id.qp = ptr::null_mut();
        }
        for (channel, cq) in [
            (&mut id.send_cq_channel, &mut id.send_cq),
            (&mut id.recv_cq_channel, &mut id.recv_cq),
        ] {
            if !cq.is_null() {
                ibv_destroy_cq(*cq);
                ibv_destroy_comp_channel(*channel);
                (*channel, *cq) = (ptr::null_mut(), ptr::null_mut());
            }
        }
    }
}

symbol_versions! {
    rdma_create_qp => "RDMACM_1.0",
    rdma_create_qp_ex => "RDMACM_1.0",
    rdma_destroy_qp => "RDMACM_1.0",
}
