//! Asynchronous events and the rest of the device-level verbs programs
//! import: `ibv_get_async_event`, `ibv_ack_async_event`, the fork-range
//! calls, importing devices and PDs, `ibv_qp_to_qp_ex`, and
//! `ibv_resolve_eth_l2_from_gid`.
//!
//! A queue pair that leaves Full Operation for an error (RFC 5040 section
//! 6.4: a Terminate sent or received) raises one affiliated asynchronous
//! event on its context, as an RNIC does: [`event_of`] says which. The
//! connection manager's watch of the connection raises it ([`raise`]),
//! before `RDMA_CM_EVENT_DISCONNECTED`. Events travel as 8-octet records
//! (the queue pair's number and the event type) through a pipe whose
//! read end is the context's `async_fd`, so that programs can `poll` it,
//! make it non-blocking, and be interrupted in it, as with the kernel's.

use core::ffi::{c_int, c_void};
use core::ptr;

use uwarp::QpEvent;

use crate::abi::verbs::*;
use crate::device::Context;
use crate::export::{fail, guard, set_errno, symbol_versions, wait_record};
use crate::qp::{self, Qp};

/// The asynchronous event a queue pair raises for `event`, if any
/// (`enum ibv_event_type`):
///
/// - a Terminate this end sent for a memory protection error (RDMAP
///   remote protection, RFC 5040 section 7.2; DDP tagged buffer invalid
///   STag, base or bounds, STag not associated, TO wrap, RFC 5041 section
///   7.2): `IBV_EVENT_QP_ACCESS_ERR`, as Chelsio's and Linux siw's do;
/// - any other Terminate sent (a malformed or unexpected header, an MPA
///   CRC error, no receive buffer, ...), and any Terminate received:
///   `IBV_EVENT_QP_FATAL`, the queue pair's work is lost (siw raises
///   nothing for a Terminate received; hardware RNICs report it so);
/// - a disconnection: none (the connection manager's
///   `RDMA_CM_EVENT_DISCONNECTED` says it).
pub fn event_of(event: &QpEvent) -> Option<c_int> {
    match event {
        QpEvent::TerminateSent(error) if error.is_access_violation() => {
            Some(IBV_EVENT_QP_ACCESS_ERR)
        }
        QpEvent::TerminateSent(_) | QpEvent::TerminateReceived(_) => Some(IBV_EVENT_QP_FATAL),
        QpEvent::Disconnected => None,
    }
}

/// Queues the asynchronous event `event_type` of the queue pair numbered
/// `qp_num` on its context's `async_fd`, if the queue pair is still
/// live. An event that finds the pipe full is dropped (see
/// `ibv_open_device`).
pub fn raise(qp_num: u32, event_type: c_int) {
    let record = (u64::from(event_type as u32) << 32) | u64::from(qp_num);
    qp::with_numbered(qp_num, |qp| {
        // SAFETY: a live queue pair's context is open (a program closes
        // its context only after destroying what it made from it).
        let fd = unsafe { Context::async_writer((*qp.ibv()).context) };
        // SAFETY: `record` is readable for its 8 octets; a pipe takes a
        // write of up to PIPE_BUF octets whole or not at all.
        unsafe { libc::write(fd, (&raw const record).cast(), 8) };
    });
}

/// `ibv_get_async_event`: waits for the next asynchronous event of the
/// context on its `async_fd` (or, if the descriptor is non-blocking,
/// answers `EAGAIN`) and writes it to `event`. 0, or -1 with `errno` set
/// (`EINTR` when a signal without `SA_RESTART` interrupts the wait).
/// Each event returned is acknowledged with [`ibv_ack_async_event`]
/// before its queue pair can be destroyed.
///
/// It waits through [`wait_record`], calling only `extern "C"`
/// functions, so a thread cancelled while it waits unwinds through it.
///
/// # Safety
///
/// `context` is NULL or an open context; `event` is NULL or valid for
/// writing an `ibv_async_event`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut IbvContext,
    event: *mut IbvAsyncEvent,
) -> c_int {
    crate::provider::wait_if_exiting();
    if context as usize == 0 || event as usize == 0 {
        return fail(libc::EINVAL);
    }
    // SAFETY: the caller promises an open context.
    let fd = unsafe { async_fd(context) };
    let mut record: u64 = 0;
    loop {
        // SAFETY: `record` is valid for its 8 octets of writes.
        if unsafe { wait_record(fd, &raw mut record) } != 0 {
            return -1;
        }
        // SAFETY: the caller promises `event` is writable.
        if unsafe { take_event(record, event) } == 0 {
            return 0;
        }
    }
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

/// Resolves a record [`raise`] queued: writes the event and counts it as
/// returned (0), or answers 1 for a queue pair that no longer exists.
///
/// # Safety
///
/// `event` is valid for writing an `ibv_async_event`.
unsafe extern "C" fn take_event(record: u64, event: *mut IbvAsyncEvent) -> c_int {
    guard(1, || {
        let event_type = (record >> 32) as u32 as c_int;
        let taken = qp::with_numbered(record as u32, |qp| {
            qp.async_events.returned();
            // SAFETY: the caller promises `event` is writable.
            unsafe {
                event.write(IbvAsyncEvent {
                    element: qp.ibv().cast(),
                    event_type,
                });
            }
        });
        if taken.is_some() {
            0
        } else {
            1
        }
    })
}

/// `ibv_ack_async_event`: acknowledges an event [`ibv_get_async_event`]
/// returned; the last acknowledgement lets its queue pair be destroyed.
///
/// # Safety
///
/// `event` is NULL or an event [`ibv_get_async_event`] returned, not yet
/// acknowledged, whose queue pair is live.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut IbvAsyncEvent) {
    if event.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: the caller promises an event ibv_get_async_event wrote.
        let event = unsafe { &*event };
        if is_queue_pair_event(event.event_type) && !event.element.is_null() {
            // SAFETY: the event names a live queue pair, as promised.
            unsafe { Qp::from_ibv(event.element.cast()) }
                .async_events
                .acknowledge(1);
        }
    });
}

/// Whether events of `event_type` name a queue pair (all uwarp raises).
fn is_queue_pair_event(event_type: c_int) -> bool {
    matches!(
        event_type,
        IBV_EVENT_QP_FATAL | IBV_EVENT_QP_REQ_ERR | IBV_EVENT_QP_ACCESS_ERR
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use uwarp::TermError;

    #[test]
    fn protection_errors_sent_are_access_errors_and_the_rest_fatal() {
        let cases = [
            (
                QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag),
                Some(IBV_EVENT_QP_ACCESS_ERR),
            ),
            (
                QpEvent::TerminateSent(TermError::RdmapBaseOrBounds),
                Some(IBV_EVENT_QP_ACCESS_ERR),
            ),
            (
                QpEvent::TerminateSent(TermError::MpaCrcError),
                Some(IBV_EVENT_QP_FATAL),
            ),
            (
                QpEvent::TerminateSent(TermError::DdpUntaggedTooLong),
                Some(IBV_EVENT_QP_FATAL),
            ),
            (
                QpEvent::TerminateReceived(TermError::DdpTaggedInvalidStag),
                Some(IBV_EVENT_QP_FATAL),
            ),
            (QpEvent::Disconnected, None),
        ];
        for (event, expected) in cases {
            assert_eq!(event_of(&event), expected, "{event:?}");
        }
    }
}
