//! Endpoints, librdmacm's one-call set-up (rdma-core's `rdma_create_ep`
//! family): `rdma_create_ep`, `rdma_destroy_ep`, `rdma_create_srq`,
//! `rdma_create_srq_ex`, `rdma_destroy_srq`.
//!
//! An endpoint is a synchronous id made from an `rdma_getaddrinfo`
//! entry: a passive one is bound to the entry's source address and keeps
//! the domain and queue pair attributes it was given, so that
//! `rdma_get_request` gives each request's new id a queue pair; an active
//! one is resolved to the entry's destination, with its queue pair made.
//! Each step is the verb a program would call itself, so each keeps that
//! verb's semantics and errors.

use core::ffi::c_int;
use core::ptr;

use super::connect::{rdma_resolve_addr, rdma_resolve_route};
use super::id::{is_live, rdma_create_id, rdma_destroy_id, Id};
use super::listen::rdma_bind_addr;
use super::qp::{default_pd, rdma_create_qp, rdma_destroy_qp};
use crate::abi::cm::*;
use crate::abi::verbs::*;
use crate::export::{fail, guard, symbol_versions};
use crate::srq::{ibv_create_srq, ibv_destroy_srq};

/// How long an active endpoint's resolutions may take, as rdma-core's.
const RESOLVE_TIMEOUT_MS: c_int = 2000;

/// The calling thread's `errno`.
fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `rdma_create_ep`: a synchronous id for the `rdma_getaddrinfo` entry
/// `res`: passive (`RAI_PASSIVE`: bound to its source address, keeping
/// `pd` and `qp_init_attr` for the queue pairs of the requests
/// `rdma_get_request` hands out) or active (resolved to its destination,
/// with its queue pair made in `pd` from `qp_init_attr` when given). 0,
/// or -1 with `errno` set by the step that failed (the id destroyed).
///
/// # Safety
///
/// `id` is writable; `res` is an entry `rdma_getaddrinfo` returned (or
/// as readable); `pd` is NULL or live; `qp_init_attr` is NULL or readable
/// and writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut RdmaCmId,
    res: *mut RdmaAddrinfo,
    pd: *mut IbvPd,
    qp_init_attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(-1, || {
        if id.is_null() || res.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: the caller promises a readable entry.
        let res = unsafe { &*res };
        let mut made = ptr::null_mut();
        // SAFETY: a writable `made`.
        if unsafe {
            rdma_create_id(
                ptr::null_mut(),
                &mut made,
                ptr::null_mut(),
                res.ai_port_space,
            )
        } != 0
        {
            return -1;
        }
        // SAFETY: forwarded, with the new id.
        let set_up = unsafe {
            if res.ai_flags & RAI_PASSIVE != 0 {
                passive(made, res, pd, qp_init_attr)
            } else {
                active(made, res, pd, qp_init_attr)
            }
        };
        if let Err(errno) = set_up {
            // SAFETY: the id just made, with what was made of it.
            unsafe { rdma_destroy_ep(made) };
            return fail(errno);
        }
        // SAFETY: the caller promises `id` is writable.
        unsafe { id.write(made) };
        0
    })
}

/// A passive endpoint: `id` bound to the entry's source address, keeping
/// the domain and queue pair attributes (with the entry's type).
///
/// # Safety
///
/// As [`rdma_create_ep`], `id` the endpoint's new id.
unsafe fn passive(
    id: *mut RdmaCmId,
    res: &RdmaAddrinfo,
    pd: *mut IbvPd,
    qp_init_attr: *mut IbvQpInitAttr,
) -> Result<(), c_int> {
    // SAFETY: a live id; the entry's address, as the caller promises.
    if unsafe { rdma_bind_addr(id, res.ai_src_addr) } != 0 {
        return Err(errno());
    }
    // SAFETY: the live id just made, used by this thread alone.
    let endpoint = unsafe { Id::from_ibv(id) };
    if !pd.is_null() {
        endpoint.ibv.pd = pd;
    }
    // SAFETY: the caller promises NULL or readable attributes.
    endpoint.endpoint_qp = unsafe { qp_init_attr.as_ref() }.map(|attr| IbvQpInitAttr {
        qp_type: res.ai_qp_type,
        ..*attr
    });
    Ok(())
}

/// An active endpoint: `id` resolved to the entry's destination (from its
/// source, if it has one), with its queue pair made when attributes are
/// given.
///
/// # Safety
///
/// As [`rdma_create_ep`], `id` the endpoint's new id.
unsafe fn active(
    id: *mut RdmaCmId,
    res: &RdmaAddrinfo,
    pd: *mut IbvPd,
    qp_init_attr: *mut IbvQpInitAttr,
) -> Result<(), c_int> {
    // SAFETY: a live id; the entry's addresses, as the caller promises.
    let resolved = unsafe {
        rdma_resolve_addr(id, res.ai_src_addr, res.ai_dst_addr, RESOLVE_TIMEOUT_MS) == 0
            && rdma_resolve_route(id, RESOLVE_TIMEOUT_MS) == 0
    };
    if !resolved {
        return Err(errno());
    }
    if !qp_init_attr.is_null() {
        // SAFETY: the caller promises readable and writable attributes.
        unsafe { (*qp_init_attr).qp_type = res.ai_qp_type };
        // SAFETY: a live id, and the caller's domain and attributes.
        if unsafe { rdma_create_qp(id, pd, qp_init_attr) } != 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Gives a request's new id `child` of the passive endpoint `endpoint` its
/// queue pair, when the endpoint has attributes for one (rdma-core's
/// `rdma_get_request`). `Err` with the `errno` of the failure.
///
/// # Safety
///
/// `child` is a live id, used by this thread alone.
pub(super) unsafe fn give_queue_pair(endpoint: &Id, child: *mut RdmaCmId) -> Result<(), c_int> {
    let Some(mut attr) = endpoint.endpoint_qp else {
        return Ok(());
    };
    // SAFETY: a live id, the endpoint's domain (or NULL) and a copy of its
    // attributes.
    if unsafe { rdma_create_qp(child, endpoint.ibv.pd, &mut attr) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `rdma_destroy_ep`: destroys an endpoint's queue pair, its shared
/// receive queue and the id itself.
///
/// # Safety
///
/// `id` is NULL or an id, its queue pair and queue no longer in use.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut RdmaCmId) {
    guard((), || {
        if !is_live(id) {
            return;
        }
        // SAFETY: a live id, and what was made for it.
        unsafe {
            rdma_destroy_qp(id);
            rdma_destroy_srq(id);
            rdma_destroy_id(id);
        }
    });
}

/// `rdma_create_srq`: a shared receive queue for the id, in `pd` (NULL:
/// the id's domain, else the process's default one), kept in `id->srq`
/// and used by the queue pair `rdma_create_qp` makes for the id. 0, or -1
/// with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `pd` is NULL or live; `attr` is NULL or readable
/// and writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq(
    id: *mut RdmaCmId,
    pd: *mut IbvPd,
    attr: *mut IbvSrqInitAttr,
) -> c_int {
    guard(-1, || {
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: the caller promises readable and writable attributes.
        let attr = unsafe { &mut *attr };
        let mut ex = IbvSrqInitAttrEx {
            srq_context: attr.srq_context,
            attr: attr.attr,
            comp_mask: IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
            srq_type: IBV_SRQT_BASIC,
            pd,
            xrcd: ptr::null_mut(),
            cq: ptr::null_mut(),
            tm_cap: [0; 2],
        };
        // SAFETY: forwarded, with attributes made here.
        let answer = unsafe { rdma_create_srq_ex(id, &mut ex) };
        attr.attr = ex.attr;
        answer
    })
}

/// `rdma_create_srq_ex`: as [`rdma_create_srq`], from extended
/// attributes, which must say the queue's type; only basic queues exist
/// on iWARP (XRC and tag matching are `EOPNOTSUPP`). 0, or -1 with
/// `errno` set (`EINVAL` for an id not alive or that has a queue).
///
/// # Safety
///
/// `id` is NULL or live; `attr` is NULL or readable and writable, its
/// domain NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut RdmaCmId,
    attr: *mut IbvSrqInitAttrEx,
) -> c_int {
    guard(-1, || {
        if !is_live(id) || attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: a live id, and the caller's attributes.
        let (id, attr) = unsafe { (Id::from_ibv(id), &mut *attr) };
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 || !id.ibv.srq.is_null() {
            return fail(libc::EINVAL);
        }
        if attr.srq_type != IBV_SRQT_BASIC {
            return fail(libc::EOPNOTSUPP);
        }
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || attr.pd.is_null() {
            attr.pd = id.ibv.pd;
            attr.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
        }
        let pd = if attr.pd.is_null() {
            match default_pd() {
                Ok(pd) => pd,
                Err(errno) => return fail(errno),
            }
        } else {
            attr.pd
        };
        let mut basic = IbvSrqInitAttr {
            srq_context: attr.srq_context,
            attr: attr.attr,
        };
        // SAFETY: a live domain and attributes made here.
        let srq = unsafe { ibv_create_srq(pd, &mut basic) };
        if srq.is_null() {
            return -1;
        }
        attr.attr = basic.attr;
        id.ibv.srq = srq;
        0
    })
}

/// `rdma_destroy_srq`: destroys the id's shared receive queue, if it has
/// one.
///
/// # Safety
///
/// `id` is NULL or live, its queue used by no queue pair.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut RdmaCmId) {
    guard((), || {
        if !is_live(id) {
            return;
        }
        // SAFETY: a live id.
        let id = unsafe { Id::from_ibv(id) };
        // SAFETY: NULL, or the queue rdma_create_srq made for the id; a
        // queue still in use stays the id's.
        if !id.ibv.srq.is_null() && unsafe { ibv_destroy_srq(id.ibv.srq) } == 0 {
            id.ibv.srq = ptr::null_mut();
        }
    });
}

symbol_versions! {
    rdma_create_ep => "RDMACM_1.0",
    rdma_destroy_ep => "RDMACM_1.0",
    rdma_create_srq => "RDMACM_1.0",
    rdma_create_srq_ex => "RDMACM_1.0",
    rdma_destroy_srq => "RDMACM_1.0",
}
