//! Completion channels and completion queues: `ibv_create_comp_channel`,
//! `ibv_create_cq`, `ibv_get_cq_event`, `ibv_ack_cq_events`,
//! `ibv_destroy_cq`, and the context's `poll_cq` and `req_notify_cq`.
//!
//! A channel's descriptor is a [`uwarp::CompletionChannel`]'s pipe; each
//! event on it is the token of the queue that raised it. Tokens, not
//! pointers: a queue destroyed with events still unread in the pipe leaves
//! tokens nothing answers to any more, which `ibv_get_cq_event` skips
//! (the kernel drops such events on destruction).
//!
//! As in rdma-core, destroying a queue waits until every event
//! `ibv_get_cq_event` returned for it has been acknowledged; a queue a
//! queue pair still completes on is not destroyed (`EBUSY`).

use core::ffi::{c_int, c_void};
use core::ptr;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use uwarp::{CompletionChannel, CompletionQueue, WcOpcode, WcStatus, WorkCompletion};

use crate::abi::verbs::*;
use crate::acknowledgements::Acknowledgements;
use crate::export::{fail, guard, pointer_or_errno, set_errno, symbol_versions, wait_record};
use crate::limits;
use crate::provider;

/// A completion channel: the `ibv_comp_channel` applications hold, and
/// uwarp's.
#[repr(C)]
pub struct Channel {
    ibv: IbvCompChannel,
    channel: CompletionChannel,
}

/// A completion queue: the `ibv_cq` applications hold, and uwarp's.
#[repr(C)]
pub struct Cq {
    ibv: IbvCq,
    /// uwarp's queue.
    pub cq: CompletionQueue,
    /// Its token on its channel.
    token: u64,
    /// Events returned by `ibv_get_cq_event` and acknowledged.
    events: Acknowledgements,
    /// The queue pairs completing on it, once per direction.
    pub users: AtomicUsize,
}

impl Cq {
    /// The queue behind `cq`.
    ///
    /// # Safety
    ///
    /// `cq` is a live queue [`ibv_create_cq`] returned.
    pub unsafe fn from_ibv<'a>(cq: *mut IbvCq) -> &'a Cq {
        // SAFETY: the caller promises a live queue; `ibv` is the first
        // field of the `#[repr(C)]` `Cq` it was boxed as.
        unsafe { &*cq.cast::<Cq>() }
    }

    /// The `ibv_cq` applications hold.
    pub fn ibv(&self) -> *mut IbvCq {
        ptr::from_ref(&self.ibv).cast_mut()
    }
}

/// The live queues by token: what `ibv_get_cq_event` resolves a token
/// with (the address of the `Cq`).
fn queues() -> MutexGuard<'static, HashMap<u64, usize>> {
    static QUEUES: OnceLock<Mutex<HashMap<u64, usize>>> = OnceLock::new();
    QUEUES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// `ibv_create_comp_channel`: a new completion channel; NULL with `errno`
/// set if the descriptors cannot be made.
///
/// # Safety
///
/// `context` is NULL or a context `ibv_open_device` returned.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(context: *mut IbvContext) -> *mut IbvCompChannel {
    guard(ptr::null_mut(), || {
        if context.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        match CompletionChannel::new() {
            Ok(channel) => {
                let ibv = IbvCompChannel {
                    context,
                    fd: channel.as_raw_fd(),
                    refcnt: 0,
                };
                Box::into_raw(Box::new(Channel { ibv, channel })).cast()
            }
            Err(error) => {
                set_errno(crate::export::errno_of(&error));
                ptr::null_mut()
            }
        }
    })
}

/// `ibv_destroy_comp_channel`: 0, or `EBUSY` while queues use it.
///
/// # Safety
///
/// `channel` is NULL or a live channel [`ibv_create_comp_channel`]
/// returned.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut IbvCompChannel) -> c_int {
    if channel.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a live channel, whose `refcnt` only this module writes, and
    // atomically.
    if unsafe { refcnt(channel) }.load(Ordering::Acquire) > 0 {
        return libc::EBUSY;
    }
    // SAFETY: the caller promises a live channel from
    // ibv_create_comp_channel, which boxed a `Channel` starting with it.
    drop(unsafe { Box::from_raw(channel.cast::<Channel>()) });
    0
}

/// The channel's count of queues, as an atomic.
///
/// # Safety
///
/// `channel` is live.
unsafe fn refcnt<'a>(channel: *mut IbvCompChannel) -> &'a AtomicI32 {
    // SAFETY: the field is an aligned, live `int`, only ever accessed
    // through this atomic view while the channel lives.
    unsafe { AtomicI32::from_ptr(&raw mut (*channel).refcnt) }
}

/// `ibv_create_cq`: a completion queue of at least `cqe` entries whose
/// events go to `channel` (if not NULL); NULL with `errno` set for a size
/// out of range or a completion vector other than 0.
///
/// # Safety
///
/// `context` is NULL or an open context; `channel` is NULL or a live
/// channel of it.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    pointer_or_errno(|| {
        if context.is_null() || !(1..=limits::MAX_CQE).contains(&cqe) || comp_vector != 0 {
            return Err(libc::EINVAL);
        }
        let device = provider::device()?;
        static TOKENS: AtomicU64 = AtomicU64::new(1);
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        let depth = cqe as usize;
        let cq = if channel.is_null() {
            device.create_cq(depth)
        } else {
            // SAFETY: the caller promises a live channel, boxed as a
            // `Channel` starting with the `ibv_comp_channel`.
            let owner = unsafe { &*channel.cast::<Channel>() };
            // SAFETY: live, as above.
            unsafe { refcnt(channel) }.fetch_add(1, Ordering::AcqRel);
            device.create_cq_with_channel(depth, &owner.channel, token)
        };
        let boxed = Box::new(Cq {
            ibv: IbvCq {
                context,
                channel,
                cq_context,
                handle: token as u32,
                cqe,
                // SAFETY: all zeros is PTHREAD_MUTEX_INITIALIZER and
                // PTHREAD_COND_INITIALIZER on glibc.
                mutex: unsafe { core::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { core::mem::zeroed() },
                comp_events_completed: 0,
                async_events_completed: 0,
            },
            cq,
            token,
            events: Acknowledgements::default(),
            users: AtomicUsize::new(0),
        });
        let address = Box::into_raw(boxed);
        queues().insert(token, address as usize);
        Ok(address.cast())
    })
}

/// `ibv_destroy_cq`: waits until every event returned for the queue has
/// been acknowledged, then frees it. 0, or an `errno` value: `EBUSY`
/// while a queue pair completes on it (the queue stays as it was).
///
/// # Safety
///
/// `cq` is NULL or a live queue [`ibv_create_cq`] returned.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a live queue.
        let owner = unsafe { Cq::from_ibv(cq) };
        if owner.users.load(Ordering::Acquire) > 0 {
            return libc::EBUSY;
        }
        queues().remove(&owner.token);
        owner.events.wait_for_all();
        // SAFETY: the queue is live, and its channel (if any) outlives it
        // (the channel cannot be destroyed while its refcnt counts it).
        let channel = unsafe { (*cq).channel };
        if !channel.is_null() {
            // SAFETY: live, as above.
            unsafe { refcnt(channel) }.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: ibv_create_cq boxed this `Cq`; no token leads to it any
        // more, and the caller promises nothing else uses it.
        drop(unsafe { Box::from_raw(cq.cast::<Cq>()) });
        0
    })
}

/// `ibv_get_cq_event`: waits for the next event on `channel` (or, if its
/// descriptor is non-blocking, answers `EAGAIN`) and returns its queue
/// and that queue's `cq_context`. 0, or -1 with `errno` set (`EINTR` when
/// a signal without `SA_RESTART` interrupts the wait).
///
/// It waits through [`wait_record`], calling only `extern "C"`
/// functions, so a thread cancelled while it waits unwinds through it.
///
/// # Safety
///
/// `channel` is NULL or live; `cq` and `cq_context` are valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut IbvCompChannel,
    cq: *mut *mut IbvCq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // Only `extern "C"` calls in this frame (see `wait_record`).
    crate::provider::wait_if_exiting();
    if channel as usize == 0 || cq as usize == 0 || cq_context as usize == 0 {
        return fail(libc::EINVAL);
    }
    // SAFETY: the caller promises a live channel.
    let fd = unsafe { channel_fd(channel) };
    let mut token: u64 = 0;
    loop {
        // SAFETY: `token` is valid for its 8 octets of writes.
        if unsafe { wait_record(fd, &raw mut token) } != 0 {
            return -1;
        }
        // SAFETY: the caller promises `cq` and `cq_context` are writable.
        if unsafe { take_event(token, cq, cq_context) } == 0 {
            return 0;
        }
    }
}

/// The channel's descriptor, read in a frame of its own (see
/// [`ibv_get_cq_event`]).
///
/// # Safety
///
/// `channel` is live.
unsafe extern "C" fn channel_fd(channel: *mut IbvCompChannel) -> c_int {
    // SAFETY: the caller promises a live channel.
    unsafe { (*channel).fd }
}

/// Resolves an event's token: writes its queue and `cq_context` and
/// counts the event as returned (0), or answers 1 for a queue that no
/// longer exists or an event withdrawn
/// ([`CompletionQueue::channel_event_due`](uwarp::CompletionQueue::channel_event_due)).
///
/// # Safety
///
/// `cq` and `cq_context` are valid for writes.
unsafe extern "C" fn take_event(
    token: u64,
    cq: *mut *mut IbvCq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard(1, || {
        let queues = queues();
        let Some(&address) = queues.get(&token) else {
            return 1;
        };
        // SAFETY: a queue in the table is live: destruction removes it
        // under this lock before freeing it.
        let owner = unsafe { &*(address as *const Cq) };
        if !owner.cq.channel_event_due() {
            return 1;
        }
        owner.events.returned();
        // SAFETY: the caller promises both are writable.
        unsafe {
            cq.write(owner.ibv());
            cq_context.write(owner.ibv.cq_context);
        }
        0
    })
}

/// `ibv_ack_cq_events`: acknowledges `nevents` events of `cq`.
///
/// # Safety
///
/// `cq` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: u32) {
    if cq.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: the caller promises a live queue.
        let owner = unsafe { Cq::from_ibv(cq) };
        owner.events.acknowledge(u64::from(nevents));
    });
}

/// The context's `poll_cq`: up to `entries` completions into `wc`; how
/// many, or -1 for bad arguments.
///
/// # Safety
///
/// `cq` is NULL or live; `wc` is valid for writing `entries` entries.
pub unsafe extern "C" fn poll_cq(cq: *mut IbvCq, entries: c_int, wc: *mut IbvWc) -> c_int {
    if cq.is_null() || entries < 0 || (entries > 0 && wc.is_null()) {
        return -1;
    }
    guard(-1, || {
        // SAFETY: the caller (the header's inline) passes a live queue.
        let owner = unsafe { Cq::from_ibv(cq) };
        let mut taken = 0;
        while taken < entries {
            let Some(completion) = owner.cq.poll_one() else {
                break;
            };
            // SAFETY: the caller's array holds `entries` entries.
            unsafe { wc.add(taken as usize).write(to_ibv_wc(&completion)) };
            taken += 1;
        }
        taken
    })
}

/// The context's `req_notify_cq`: arms the queue. 0.
///
/// # Safety
///
/// `cq` is NULL or live.
pub unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller passes a live queue.
        unsafe { Cq::from_ibv(cq) }
            .cq
            .req_notify(solicited_only != 0);
        0
    })
}

/// A completion as `struct ibv_wc` says it.
fn to_ibv_wc(wc: &WorkCompletion) -> IbvWc {
    let status = match wc.status {
        WcStatus::Success => IBV_WC_SUCCESS,
        WcStatus::LocalLengthError => IBV_WC_LOC_LEN_ERR,
        WcStatus::LocalQpOperationError => IBV_WC_LOC_QP_OP_ERR,
        WcStatus::LocalProtectionError => IBV_WC_LOC_PROT_ERR,
        WcStatus::WrFlushError => IBV_WC_WR_FLUSH_ERR,
        WcStatus::RemoteAccessError => IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemoteOperationError => IBV_WC_REM_OP_ERR,
        WcStatus::RemoteInvalidRequest => IBV_WC_REM_INV_REQ_ERR,
        WcStatus::FatalError => IBV_WC_FATAL_ERR,
    };
    let opcode = match wc.opcode {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::Write => IBV_WC_RDMA_WRITE,
        WcOpcode::Read => IBV_WC_RDMA_READ,
        WcOpcode::Recv => IBV_WC_RECV,
    };
    IbvWc {
        wr_id: wc.wr_id,
        status,
        opcode,
        vendor_err: 0,
        byte_len: wc.byte_len,
        invalidated_rkey: wc.invalidated_rkey.unwrap_or(0),
        qp_num: wc.qp_num,
        src_qp: 0,
        wc_flags: if wc.invalidated_rkey.is_some() {
            IBV_WC_WITH_INV
        } else {
            0
        },
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

symbol_versions! {
    ibv_create_comp_channel => "IBVERBS_1.0",
    ibv_destroy_comp_channel => "IBVERBS_1.0",
    ibv_create_cq => "IBVERBS_1.1",
    ibv_destroy_cq => "IBVERBS_1.1",
    ibv_get_cq_event => "IBVERBS_1.1",
    ibv_ack_cq_events => "IBVERBS_1.1",
}
