//! Queue pairs: `ibv_create_qp`, `ibv_query_qp`, `ibv_modify_qp`,
//! `ibv_destroy_qp`, and the context's `post_send` and `post_recv` (RFC
//! 5040 section 5: the send and receive queues of an RDMAP stream).
//!
//! An iWARP queue pair is connected by the connection manager (librdmacm),
//! not by `ibv_modify_qp`'s address and sequence-number attributes, which
//! iWARP does not have: `ibv_modify_qp` records the state asked for and
//! moves a queue pair to the error state (flushing its work) when asked.
//!
//! The queues a queue pair names (its CQs and SRQ) count it as a user
//! until it is destroyed: destroying one of them before fails with
//! `EBUSY`, as in the kernel.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use uwarp::{Payload, QpCaps, QpInit, QpState, QueuePair, RecvWr, SendOp, SendWr, Sge, Stag};

use crate::abi::verbs::*;
use crate::acknowledgements::Acknowledgements;
use crate::cq::Cq;
use crate::export::{errno_of, guard, pointer_or_errno, post_chain, symbol_versions};
use crate::limits;
use crate::pd::Pd;
use crate::provider;
use crate::srq::Srq;

/// The most octets of inline data a send work request may carry.
const MAX_INLINE_DATA: u32 = 256;

/// A queue pair: the `ibv_qp` applications hold, and uwarp's.
#[repr(C)]
pub struct Qp {
    /// The `ibv_qp`, in a cell: its `state` is rewritten (atomically, see
    /// [`Qp::recorded_state`]) while other threads hold the `Qp`. Its
    /// other fields are read through the cell's pointer, never through a
    /// reference to the whole `ibv_qp`.
    ibv: UnsafeCell<IbvQp>,
    /// uwarp's queue pair.
    pub qp: QueuePair,
    /// What it was created with (as written back to the application).
    cap: IbvQpCap,
    /// Every send work request completes signaled.
    sq_sig_all: bool,
    /// Its asynchronous events returned by `ibv_get_async_event` and
    /// acknowledged.
    pub async_events: Acknowledgements,
}

/// The live queue pairs by number, for the connection manager's
/// `conn_param.qp_num` (a queue pair the application made itself).
fn by_number() -> MutexGuard<'static, HashMap<u32, usize>> {
    static QPS: OnceLock<Mutex<HashMap<u32, usize>>> = OnceLock::new();
    QPS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The uwarp queue pair numbered `num`, if it is live.
pub fn queue_pair_numbered(num: u32) -> Option<QueuePair> {
    with_numbered(num, |qp| qp.qp.clone())
}

/// What `f` makes of the queue pair numbered `num`, if it is live; it
/// stays live while `f` runs (its destruction waits).
pub fn with_numbered<T>(num: u32, f: impl FnOnce(&Qp) -> T) -> Option<T> {
    let qps = by_number();
    // SAFETY: a queue pair in the table is live: destruction removes it
    // under this lock first.
    qps.get(&num)
        .map(|&address| f(unsafe { &*(address as *const Qp) }))
}

impl Qp {
    /// The queue pair behind `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is a live queue pair [`ibv_create_qp`] returned.
    pub unsafe fn from_ibv<'a>(qp: *mut IbvQp) -> &'a Qp {
        // SAFETY: the caller promises a live queue pair; `ibv` is the
        // first field of the `#[repr(C)]` `Qp` it was boxed as.
        unsafe { &*qp.cast::<Qp>() }
    }

    /// The `ibv_qp` applications hold.
    pub fn ibv(&self) -> *mut IbvQp {
        self.ibv.get()
    }

    /// The `state` field of the `ibv_qp`, as an atomic: the state
    /// `ibv_modify_qp` recorded last (the application reads the field
    /// too).
    fn state_field(&self) -> &AtomicI32 {
        // SAFETY: the field is an aligned `int` inside the cell, live as
        // long as `self`; the library only ever accesses it through this
        // atomic view once the queue pair is handed out.
        unsafe { AtomicI32::from_ptr(&raw mut (*self.ibv.get()).state) }
    }

    /// The state `ibv_modify_qp` recorded last (`enum ibv_qp_state`).
    fn recorded_state(&self) -> c_int {
        self.state_field().load(Ordering::Acquire)
    }

    /// Records `state` for `ibv_query_qp` and the application.
    pub fn record_state(&self, state: c_int) {
        self.state_field().store(state, Ordering::Release);
    }
}

/// `ibv_create_qp`: a reliable-connection queue pair in `pd`, with the
/// capabilities it really has written back to `attr.cap`; NULL with
/// `errno` set for another type or limits beyond the device's.
///
/// # Safety
///
/// `pd` is NULL or live; `attr` is NULL or valid for reads and writes,
/// naming live queues.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp {
    // SAFETY: forwarded.
    pointer_or_errno(|| unsafe { create(pd, attr) })
}

/// [`ibv_create_qp`]'s work.
///
/// # Safety
///
/// As [`ibv_create_qp`].
unsafe fn create(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> Result<*mut IbvQp, c_int> {
    if pd.is_null() || attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller promises a readable and writable structure.
    let init = unsafe { &mut *attr };
    let wanted = init.cap;
    let fits = init.qp_type == IBV_QPT_RC
        && !init.send_cq.is_null()
        && !init.recv_cq.is_null()
        && wanted.max_send_wr <= limits::MAX_QP_WR as u32
        && wanted.max_recv_wr <= limits::MAX_QP_WR as u32
        && wanted.max_send_sge <= limits::MAX_SGE as u32
        && wanted.max_recv_sge <= limits::MAX_SGE as u32
        && wanted.max_inline_data <= MAX_INLINE_DATA;
    if !fits {
        return Err(libc::EINVAL);
    }
    let device = provider::device()?;
    let cap = IbvQpCap {
        max_send_wr: wanted.max_send_wr.max(1),
        max_recv_wr: wanted.max_recv_wr.max(1),
        max_send_sge: wanted.max_send_sge.max(1),
        max_recv_sge: wanted.max_recv_sge.max(1),
        max_inline_data: MAX_INLINE_DATA,
    };
    // SAFETY: the caller promises live queues and domain.
    let (send_cq, recv_cq, domain) = unsafe {
        (
            Cq::from_ibv(init.send_cq),
            Cq::from_ibv(init.recv_cq),
            Pd::from_ibv(pd),
        )
    };
    // SAFETY: as above, for the SRQ if any.
    let srq = (!init.srq.is_null()).then(|| unsafe { Srq::from_ibv(init.srq) });
    let qp = device.create_qp(
        &domain.pd,
        QpInit {
            send_cq: send_cq.cq.clone(),
            recv_cq: recv_cq.cq.clone(),
            srq: srq.map(|srq| srq.srq.clone()),
            caps: QpCaps {
                max_send_sge: cap.max_send_sge as usize,
                max_recv_sge: cap.max_recv_sge as usize,
                max_inline_data: cap.max_inline_data as usize,
            },
            max_send_wr: cap.max_send_wr as usize,
            max_recv_wr: cap.max_recv_wr as usize,
        },
    );
    init.cap = cap;
    domain.users.fetch_add(1, Ordering::AcqRel);
    for users in [&send_cq.users, &recv_cq.users]
        .into_iter()
        .chain(srq.map(|srq| &srq.users))
    {
        users.fetch_add(1, Ordering::AcqRel);
    }
    let boxed = Box::new(Qp {
        ibv: UnsafeCell::new(IbvQp {
            // SAFETY: the caller promises a live domain.
            context: unsafe { (*pd).context },
            qp_context: init.qp_context,
            pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: init.srq,
            handle: qp.num(),
            qp_num: qp.num(),
            state: IBV_QPS_RESET,
            qp_type: IBV_QPT_RC,
            // SAFETY: all zeros is PTHREAD_MUTEX_INITIALIZER and
            // PTHREAD_COND_INITIALIZER on glibc.
            mutex: unsafe { core::mem::zeroed() },
            // SAFETY: as above.
            cond: unsafe { core::mem::zeroed() },
            events_completed: 0,
        }),
        qp,
        cap,
        sq_sig_all: init.sq_sig_all != 0,
        async_events: Acknowledgements::default(),
    });
    let num = boxed.qp.num();
    let address = Box::into_raw(boxed);
    by_number().insert(num, address as usize);
    Ok(address.cast())
}

/// The `enum ibv_qp_state` of a uwarp queue pair: Idle is INIT until the
/// application recorded another state, Closing is SQD (draining).
fn state_of(qp: &Qp) -> c_int {
    match qp.qp.state() {
        QpState::Idle => qp.recorded_state(),
        QpState::Rts => IBV_QPS_RTS,
        QpState::Closing => IBV_QPS_SQD,
        QpState::Terminate => IBV_QPS_SQE,
        QpState::Error => IBV_QPS_ERR,
    }
}

/// `ibv_query_qp`: the queue pair's state and capabilities. 0, or an
/// `errno` value.
///
/// # Safety
///
/// `qp` is NULL or live; `attr` and `init` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init: *mut IbvQpInitAttr,
) -> c_int {
    if qp.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a live queue pair.
        let owner = unsafe { Qp::from_ibv(qp) };
        let state = state_of(owner);
        // SAFETY: all zeros is a valid `ibv_qp_attr` (integers only).
        let mut answer: IbvQpAttr = unsafe { core::mem::zeroed() };
        answer.qp_state = state;
        answer.cur_qp_state = state;
        answer.path_mtu = IBV_MTU_1024;
        answer.cap = owner.cap;
        answer.max_rd_atomic = limits::MAX_RD_ATOM as u8;
        answer.max_dest_rd_atomic = limits::MAX_RD_ATOM as u8;
        answer.port_num = limits::PORT_NUM;
        // SAFETY: the caller promises a writable structure.
        unsafe { attr.write(answer) };
        if !init.is_null() {
            let ibv = owner.ibv();
            // SAFETY: the caller promises a writable structure; the fields
            // read are written only at creation.
            unsafe {
                init.write(IbvQpInitAttr {
                    qp_context: (*ibv).qp_context,
                    send_cq: (*ibv).send_cq,
                    recv_cq: (*ibv).recv_cq,
                    srq: (*ibv).srq,
                    cap: owner.cap,
                    qp_type: IBV_QPT_RC,
                    sq_sig_all: c_int::from(owner.sq_sig_all),
                })
            };
        }
        0
    })
}

/// `ibv_modify_qp`: with `IBV_QP_STATE`, records the state (ERR aborts
/// the queue pair: its connection is reset and its work flushed); the
/// other attributes are InfiniBand's and mean nothing to iWARP. 0, or an
/// `errno` value.
///
/// # Safety
///
/// `qp` is NULL or live; `attr` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut IbvQp, attr: *mut IbvQpAttr, mask: c_int) -> c_int {
    if qp.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    if mask & IBV_QP_STATE == 0 {
        return 0;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a readable structure.
        let state = unsafe { (*attr).qp_state };
        if !(IBV_QPS_RESET..=IBV_QPS_ERR).contains(&state) {
            return libc::EINVAL;
        }
        // SAFETY: the caller promises a live queue pair.
        let owner = unsafe { Qp::from_ibv(qp) };
        if state == IBV_QPS_ERR {
            owner.qp.abort();
        }
        owner.record_state(state);
        0
    })
}

/// `ibv_destroy_qp`: takes the queue pair out of the number table (so no
/// asynchronous event finds it any more), waits until every asynchronous
/// event `ibv_get_async_event` returned for it has been acknowledged,
/// destroys uwarp's queue pair (a connection being set up or established
/// is reset, and nothing more of it reaches a completion queue: see
/// [`QueuePair::destroy`]), releases its domain and queues, and frees it.
/// 0.
///
/// # Safety
///
/// `qp` is NULL or a live queue pair the application no longer uses.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a live queue pair.
        let owner = unsafe { Qp::from_ibv(qp) };
        // Unpublished first: `with_numbered` holds the table's lock while
        // it uses a queue pair, so once this returns nobody else does.
        by_number().remove(&owner.qp.num());
        owner.async_events.wait_for_all();
        owner.qp.destroy();
        // SAFETY: the queue pair's domain, queues and SRQ outlive it: none
        // can be destroyed while it counts as a user.
        unsafe {
            let ibv = owner.ibv();
            Pd::from_ibv((*ibv).pd).users.fetch_sub(1, Ordering::AcqRel);
            Cq::from_ibv((*ibv).send_cq)
                .users
                .fetch_sub(1, Ordering::AcqRel);
            Cq::from_ibv((*ibv).recv_cq)
                .users
                .fetch_sub(1, Ordering::AcqRel);
            if !(*ibv).srq.is_null() {
                Srq::from_ibv((*ibv).srq)
                    .users
                    .fetch_sub(1, Ordering::AcqRel);
            }
        }
        // SAFETY: ibv_create_qp boxed this `Qp`; it is out of the number
        // table, and the caller promises nothing else uses it.
        drop(unsafe { Box::from_raw(qp.cast::<Qp>()) });
        0
    })
}

/// The scatter/gather elements of a work request, checked against
/// `max_sge`, copied out of the application's list. Read element by
/// element without assuming alignment: a list a program packed in a
/// buffer of its own need not be aligned, and a misaligned one must be
/// the program's error, never an abort of the program (Rust's slice
/// check aborts on a misaligned pointer).
///
/// # Safety
///
/// `list` is valid for `count` elements when `count` is positive.
unsafe fn sges(list: *const IbvSge, count: c_int, max_sge: u32) -> Result<Vec<IbvSge>, c_int> {
    match count {
        0 => Ok(Vec::new()),
        n if n < 0 || n as u32 > max_sge || list.is_null() => Err(libc::EINVAL),
        // SAFETY: the caller promises `count` elements, read unaligned.
        n => Ok((0..n as usize)
            .map(|i| unsafe { list.add(i).read_unaligned() })
            .collect()),
    }
}

/// uwarp's scatter/gather elements for `list`.
fn to_sgl(list: &[IbvSge]) -> Vec<Sge> {
    list.iter()
        .map(|sge| Sge {
            addr: sge.addr,
            length: sge.length,
            lkey: Stag(sge.lkey),
        })
        .collect()
}

/// A receive work request as uwarp takes it.
///
/// # Safety
///
/// `wr.sg_list` is valid for `wr.num_sge` elements.
pub unsafe fn recv_wr(wr: &IbvRecvWr, max_sge: u32) -> Result<RecvWr, c_int> {
    // SAFETY: forwarded.
    let list = unsafe { sges(wr.sg_list, wr.num_sge, max_sge) }?;
    Ok(RecvWr {
        wr_id: wr.wr_id,
        sgl: to_sgl(&list),
    })
}

/// A send work request as uwarp takes it.
///
/// # Safety
///
/// `wr.sg_list` is valid for `wr.num_sge` elements, and with
/// `IBV_SEND_INLINE` each element's range is readable.
unsafe fn send_wr(wr: &IbvSendWr, qp: &Qp) -> Result<SendWr, c_int> {
    // SAFETY: forwarded.
    let list = unsafe { sges(wr.sg_list, wr.num_sge, qp.cap.max_send_sge) }?;
    let op = match wr.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_INV => SendOp::SendWithInvalidate {
            invalidate: wr.invalidate_rkey,
        },
        IBV_WR_RDMA_WRITE => SendOp::Write {
            remote_addr: wr.wr.remote_addr,
            rkey: wr.wr.rkey,
        },
        IBV_WR_RDMA_READ => SendOp::Read {
            remote_addr: wr.wr.remote_addr,
            rkey: wr.wr.rkey,
        },
        // Immediate data, atomics, memory windows, local invalidation,
        // TSO: nothing iWARP's RDMAP (RFC 5040) carries or uwarp offers.
        _ => return Err(libc::EINVAL),
    };
    let inline = wr.send_flags & IBV_SEND_INLINE != 0 && !matches!(op, SendOp::Read { .. });
    let payload = if inline {
        // SAFETY: forwarded.
        Payload::Inline(unsafe { gather(&list, qp.cap.max_inline_data) }?)
    } else {
        Payload::Sgl(to_sgl(&list))
    };
    let flag = |bit: c_uint| wr.send_flags & bit != 0;
    let mut send = SendWr::new(wr.wr_id, op, payload);
    send.signaled = qp.sq_sig_all || flag(IBV_SEND_SIGNALED);
    send.solicited = flag(IBV_SEND_SOLICITED);
    send.fence = flag(IBV_SEND_FENCE);
    Ok(send)
}

/// The octets of an inline work request's elements (the application's
/// memory, unregistered), at most `max` of them.
///
/// # Safety
///
/// Each element's range is readable.
unsafe fn gather(list: &[IbvSge], max: u32) -> Result<Vec<u8>, c_int> {
    let total: u64 = list.iter().map(|sge| u64::from(sge.length)).sum();
    if total > u64::from(max) {
        return Err(libc::EINVAL);
    }
    let mut data = Vec::with_capacity(total as usize);
    for sge in list.iter().filter(|sge| sge.length > 0) {
        // SAFETY: the caller promises the range is readable; verbs let the
        // application reuse it as soon as the post returns, so it is
        // copied now.
        let octets =
            unsafe { core::slice::from_raw_parts(sge.addr as *const u8, sge.length as usize) };
        data.extend_from_slice(octets);
    }
    Ok(data)
}

/// The context's `post_send`: posts a chain of send work requests. 0, or
/// an `errno` value with `*bad` the first one not posted (`ENOMEM` once
/// `max_send_wr` are outstanding, so a chain that loops back on itself
/// stops there).
///
/// # Safety
///
/// `qp` is live; `wr` is a valid chain; `bad` is writable.
pub unsafe extern "C" fn post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
) -> c_int {
    // SAFETY: the caller (the header's inline) passes a live queue pair
    // and a valid chain.
    unsafe {
        let owner = Qp::from_ibv(qp);
        post_chain(wr, bad, |this| {
            let send = send_wr(this, owner)?;
            owner.qp.post_send(send).map_err(|e| errno_of(&e))
        })
    }
}

/// The context's `post_recv`: posts a chain of receive work requests. 0,
/// or an `errno` value with `*bad` the first one not posted (`ENOMEM`
/// once `max_recv_wr` are outstanding).
///
/// # Safety
///
/// `qp` is live; `wr` is a valid chain; `bad` is writable.
pub unsafe extern "C" fn post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    // SAFETY: the caller passes a live queue pair and a valid chain.
    unsafe {
        let owner = Qp::from_ibv(qp);
        post_chain(wr, bad, |this| {
            let recv = recv_wr(this, owner.cap.max_recv_sge)?;
            owner.qp.post_recv(recv).map_err(|e| errno_of(&e))
        })
    }
}

symbol_versions! {
    ibv_create_qp => "IBVERBS_1.1",
    ibv_query_qp => "IBVERBS_1.1",
    ibv_modify_qp => "IBVERBS_1.1",
    ibv_destroy_qp => "IBVERBS_1.1",
}

#[cfg(test)]
mod tests {
    //! Queue pairs shared between threads, as the C ABI lets applications
    //! share them, through the exported verbs. Small enough for Miri
    //! (`scripts/miri-ci.sh`), whose data-race detector and aliasing
    //! model check what x86 never shows: both properties below held by
    //! construction, with no test failing before.

    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::cq::{ibv_create_cq, ibv_destroy_cq};
    use crate::device::shared_context;
    use crate::pd::{ibv_alloc_pd, ibv_dealloc_pd};

    /// A handle the application shares between its threads, as C lets it.
    #[derive(Clone, Copy)]
    struct Shared(*mut IbvQp);

    // SAFETY: a queue pair's handle may be used from any thread: the
    // exported verbs synchronise what they share (the point of the tests).
    unsafe impl Send for Shared {}
    // SAFETY: as above.
    unsafe impl Sync for Shared {}

    /// A queue pair (never connected) on a domain and a completion queue
    /// of its own, handed to `body`, then destroyed with them.
    fn with_queue_pair(body: impl FnOnce(Shared)) {
        let context = shared_context().expect("the device opens");
        // SAFETY: a live context; no channel.
        let (pd, cq) = unsafe {
            (
                ibv_alloc_pd(context),
                ibv_create_cq(context, 16, core::ptr::null_mut(), core::ptr::null_mut(), 0),
            )
        };
        assert!(!pd.is_null() && !cq.is_null());
        let mut attr = IbvQpInitAttr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: core::ptr::null_mut(),
            cap: IbvQpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: a live domain; the attributes name a live queue.
        let qp = unsafe { ibv_create_qp(pd, &mut attr) };
        assert!(!qp.is_null());
        body(Shared(qp));
        // SAFETY: what was made above, each destroyed once, users first.
        unsafe {
            assert_eq!(ibv_destroy_cq(cq), 0);
            assert_eq!(ibv_dealloc_pd(pd), 0);
        }
    }

    /// The state `ibv_query_qp` answers for `qp`.
    fn queried_state(qp: Shared) -> c_int {
        // SAFETY: all zeros is a valid `ibv_qp_attr`.
        let mut attr: IbvQpAttr = unsafe { core::mem::zeroed() };
        // SAFETY: a live queue pair and a writable answer.
        let rc = unsafe { ibv_query_qp(qp.0, &mut attr, IBV_QP_STATE, core::ptr::null_mut()) };
        assert_eq!(rc, 0);
        attr.qp_state
    }

    /// Issue 38 row 19: `ibv_modify_qp` on one thread while another asks
    /// `ibv_query_qp`, as an application's connection thread and its
    /// data thread do. Before the fix the state field of the `ibv_qp` was
    /// written in place (a plain store through the application's
    /// pointer) while the other thread read it through its `&Qp`: Miri
    /// reports the data race (and the write under a live shared
    /// reference). Now it is one atomic.
    #[test]
    fn modify_and_query_on_two_threads_share_the_state_atomically() {
        with_queue_pair(|qp| {
            let states = [IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS];
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    for _ in 0..20 {
                        let state = queried_state(qp);
                        assert!(state == IBV_QPS_RESET || states.contains(&state), "{state}");
                    }
                });
                for &state in states.iter().cycle().take(21) {
                    // SAFETY: all zeros is a valid `ibv_qp_attr`.
                    let mut attr: IbvQpAttr = unsafe { core::mem::zeroed() };
                    attr.qp_state = state;
                    // SAFETY: a live queue pair and a readable attribute.
                    assert_eq!(unsafe { ibv_modify_qp(qp.0, &mut attr, IBV_QP_STATE) }, 0);
                }
            });
            assert_eq!(queried_state(qp), IBV_QPS_RTS);
            // SAFETY: a live queue pair nothing else uses now.
            assert_eq!(unsafe { ibv_destroy_qp(qp.0) }, 0);
        });
    }

    /// Issue 38 row 21: `ibv_destroy_qp` while the connection manager (or
    /// an asynchronous event) uses the queue pair through the number
    /// table ([`with_numbered`], which promises it stays live while it
    /// runs). Before the fix `ibv_destroy_qp` took the queue pair back
    /// into a `Box` (unique ownership) first and unpublished it after:
    /// Miri reports the other thread's next read through its `&Qp` (its
    /// borrow was invalidated by the `Box`). Now destruction unpublishes
    /// first, waiting for the user, and frees last.
    #[test]
    fn destroy_waits_for_a_user_that_found_the_queue_pair_by_number() {
        with_queue_pair(|qp| {
            // SAFETY: a live queue pair; the number is written only at
            // creation.
            let num = unsafe { (*qp.0).qp_num };
            let (entered, has_entered) = mpsc::channel();
            std::thread::scope(|scope| {
                let user = scope.spawn(move || {
                    with_numbered(num, |found| {
                        entered.send(()).unwrap();
                        // Long enough for the destroying thread to get as
                        // far as it can before it must wait.
                        std::thread::sleep(Duration::from_millis(20));
                        (found.qp.num(), found.cap.max_send_wr)
                    })
                });
                has_entered.recv().unwrap();
                // SAFETY: a live queue pair the application no longer
                // uses (the library's own user is what is checked).
                assert_eq!(unsafe { ibv_destroy_qp(qp.0) }, 0);
                assert_eq!(user.join().unwrap(), Some((num, 4)));
            });
            assert!(with_numbered(num, |_| ()).is_none());
        });
    }
}
