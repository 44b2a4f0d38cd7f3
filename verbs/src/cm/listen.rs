//! The passive side: `rdma_bind_addr`, `rdma_listen`, `rdma_get_request`.
//!
//! Binding opens uwarp's listener at once (so `rdma_get_src_port` knows
//! the port the system chose for port 0); `rdma_listen` starts a thread
//! that turns its requests into `RDMA_CM_EVENT_CONNECT_REQUEST`s. Each
//! carries a new id, which is published when the application takes the
//! event, on the listener's channel of that moment (a synchronous
//! listener's requests get synchronous ids, as in rdma-core); a request
//! dropped unread is rejected at once.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use uwarp::{Error, IncomingRequest, Listener};

use super::connect::{clamp, DEFAULT_IRD_ORD};
use super::events::{take_from, Event, EventChannel, HandOut};
use super::id::{is_live, status_of, with_id, Id, ListenThread, Role, Shared};
use super::queue::{take_or_wait, TAKE_NOTHING};
use crate::abi::cm::*;
use crate::export::{errno_of, fail, symbol_versions};
use crate::provider;

/// How often a listening id's thread looks whether its id was destroyed.
pub(super) const LISTEN_POLL: Duration = Duration::from_millis(100);

/// `rdma_bind_addr`: binds the id to a local address (port 0: one the
/// system chooses, which `rdma_get_src_port` then tells). 0, or -1 with
/// `errno` set (`EADDRINUSE`, `EADDRNOTAVAIL`, ...).
///
/// # Safety
///
/// `id` is NULL or live; `addr` is NULL or a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut RdmaCmId, addr: *mut libc::sockaddr) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            let addr = super::addrinfo::from_sockaddr(addr).ok_or(libc::EAFNOSUPPORT)?;
            bind(id, addr).map(|()| 0)
        })
    }
}

/// Opens the id's listener on `addr`, and gives the id the device unless
/// `addr` is a loopback address the device cannot hear: Linux's RDMA CM
/// takes a loopback bind as a wildcard and acquires no device for it
/// (`cma_any_addr` counts loopback addresses), so `verbs` stays NULL.
/// libfabric's verbs provider binds "localhost" for an endpoint that
/// names no address only to learn the device, and with no device there
/// goes on to every device's own addresses, which is what a process
/// beside the kernel needs. On the DPDK transport the listener hears
/// nothing (the host cannot reach the device through its loopback). The
/// socket transport does carry loopback connections, and there a
/// loopback bind gives the device by default, so that programs on one
/// host keep running over loopback (on Linux they would use the device's
/// own addresses), or, with `UWARP_LOOPBACK_BIND=any`, does as Linux
/// does: what ranks across hosts need, whose peers cannot reach
/// 127.0.0.1.
fn bind(id: &mut Id, addr: SocketAddr) -> Result<(), c_int> {
    let device = provider::device()?;
    let mut role = id.shared.role();
    if !matches!(*role, Role::Idle) {
        return Err(libc::EINVAL);
    }
    let listener = device
        .listen_with(addr, id.listen_options)
        .map_err(|e| errno_of(&e))?;
    let bound = listener.local_addr();
    *role = Role::Bound(Arc::new(listener));
    drop(role);
    if !addr.ip().is_loopback()
        || (device.carries_loopback() && provider::loopback_bind_gives_device())
    {
        id.attach()?;
    }
    id.set_source(bound);
    Ok(())
}

/// `rdma_listen`: hands the bound id's connection requests out as
/// `RDMA_CM_EVENT_CONNECT_REQUEST`s, each with a new id (an unbound id is
/// bound to any address and port first). 0, or -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut RdmaCmId, _backlog: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            if matches!(*id.shared.role(), Role::Idle) {
                bind(id, SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))?;
            }
            let mut role = id.shared.role();
            let Role::Bound(listener) = &*role else {
                return Err(libc::EINVAL);
            };
            let listener = listener.clone();
            let serving = listener.clone();
            let shared = id.shared.clone();
            // What the requests' new ids inherit: the application's
            // context.
            let context = id.ibv.context as usize;
            let thread = provider::spawn("uwarp-cm-listen", move || {
                serve(&shared, &serving, context as *mut _);
            })
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            let generation = uwarp::fork_generation();
            *role = Role::Listening(listener, ListenThread { thread, generation });
            Ok(0)
        })
    }
}

/// A listening id's thread: each request becomes an event carrying a new
/// id (with the listener's `context`, and the device, which a listener
/// bound to a loopback address has not), counted against the listener,
/// until the id is destroyed.
fn serve(listener_id: &Shared, listener: &Listener, context: *mut c_void) {
    while !listener_id.liveness.is_destroyed() {
        let request = match listener.get_request(LISTEN_POLL) {
            Ok(request) => request,
            Err(Error::Timeout) => continue,
            Err(_) => return,
        };
        let mut child = Id::unpublished(context);
        if child.attach().is_err() {
            // The device is gone (closed, or this is a child of fork):
            // the request is dropped, which rejects it.
            return;
        }
        if let Some(local) = listener_source(listener, &request) {
            child.set_source(local);
        }
        child.set_destination(request.peer_addr);
        let private_data = request.private_data().to_vec();
        let (ird, ord) = request.ird_ord().unwrap_or(DEFAULT_IRD_ORD);
        *child.shared.role() = Role::Requested(request);
        // As Linux's iWARP connection manager reports a request (and so
        // as servers accept it, passing these back): the initiator depth
        // the peer's IRD allows, the responder resources its ORD needs.
        let mut event = Event::new(
            child.shared.c_id as *mut RdmaCmId,
            listener_id.liveness.clone(),
            RDMA_CM_EVENT_CONNECT_REQUEST,
            0,
            private_data,
            (clamp(ord), clamp(ird)),
        );
        event.ibv.listen_id = listener_id.c_id as *mut RdmaCmId;
        listener_id.post_event(event.on_hand_out(Box::new(NewId { child })));
    }
}

/// A connection request's new id, published when the application takes
/// the request; dropped unread, it rejects the request.
struct NewId {
    child: Box<Id>,
}

// SAFETY: the id's raw pointers are addresses for the application, not
// dereferenced by the thread that holds it; the rest is Send.
unsafe impl Send for NewId {}

impl HandOut for NewId {
    /// Gives the new id the listener's channel of this moment (a channel
    /// of its own when the listener is synchronous, as rdma-core's
    /// `ucma_process_conn_req` migrates it) and publishes it.
    fn hand_out(self: Box<Self>, event: &mut RdmaCmEvent) -> Result<(), c_int> {
        let mut child = self.child;
        // SAFETY: the listener is alive while its request is held.
        let listener = unsafe { Id::from_ibv(event.listen_id) };
        let channel = if listener.is_sync() {
            ptr::null_mut()
        } else {
            listener.ibv.channel
        };
        child.set_channel(channel)?;
        event.id = Id::publish(child);
        Ok(())
    }
}

/// The local address a request came to: the listener's, with the
/// address the peer used when the listener's is unspecified.
fn listener_source(listener: &Listener, request: &IncomingRequest) -> Option<SocketAddr> {
    let local = listener.local_addr();
    if !local.ip().is_unspecified() {
        return Some(local);
    }
    if let Some(own) = provider::own_address() {
        return Some(SocketAddr::new(own, local.port()));
    }
    let probe = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).ok()?;
    probe.connect(request.peer_addr).ok()?;
    Some(SocketAddr::new(probe.local_addr().ok()?.ip(), local.port()))
}

/// `rdma_get_request`: a synchronous listener's next connection request:
/// its new id (synchronous too, with a queue pair when the listener is an
/// endpoint given queue pair attributes), with the request event in the
/// new id's `event` (acknowledged when the new id's next operation
/// completes or it is destroyed), as rdma-core's. 0, or -1 with `errno` set (`EINVAL` for
/// an asynchronous listener, `EINTR` when a signal without `SA_RESTART`
/// interrupts the wait).
///
/// It waits in a frame whose only calls are `extern "C"` ones: a thread
/// cancelled while it waits unwinds through it.
///
/// # Safety
///
/// `listen` is NULL or a live id; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(listen: *mut RdmaCmId, id: *mut *mut RdmaCmId) -> c_int {
    let mut args = (listen, id);
    // SAFETY: `take_request` takes these arguments.
    unsafe { take_or_wait(take_request, (&raw mut args).cast()) }
}

/// [`rdma_get_request`]'s look at the listener's channel (`args`: the
/// listener and where to write the new id): 0 with the new id written,
/// -1 with `errno`, or [`TAKE_NOTHING`] with the descriptor to wait on in
/// `fd`.
///
/// # Safety
///
/// `args` is a `(listen, id)` pair as [`rdma_get_request`] takes them;
/// `fd` is writable.
unsafe extern "C" fn take_request(args: *mut c_void, fd: *mut c_int) -> c_int {
    // SAFETY: the caller's promise.
    let (listen, id) = unsafe { *args.cast::<(*mut RdmaCmId, *mut *mut RdmaCmId)>() };
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: forwarded; the caller promises `id` and `fd` are writable.
    unsafe {
        with_id(listen, |listener| {
            if !listener.is_sync() {
                return Err(libc::EINVAL);
            }
            listener.acknowledge_stored();
            let queue = EventChannel::from_ibv(listener.ibv.channel).queue();
            if queue.is_foreign() {
                return Err(libc::ENODEV);
            }
            let Some(event) = take_from(queue) else {
                fd.write(queue.fd());
                return Ok(TAKE_NOTHING);
            };
            let failed = status_of(&*event).and_then(|()| {
                if (*event).event == RDMA_CM_EVENT_CONNECT_REQUEST && is_live((*event).id) {
                    Ok(())
                } else {
                    Err(libc::EINVAL)
                }
            });
            if let Err(errno) = failed {
                listener.ibv.event = event;
                return Err(errno);
            }
            let child = (*event).id;
            if let Err(errno) = super::endpoint::give_queue_pair(listener, child) {
                listener.ibv.event = event;
                return Err(errno);
            }
            Id::from_ibv(child).ibv.event = event;
            id.write(child);
            Ok(0)
        })
    }
}

symbol_versions! {
    rdma_bind_addr => "RDMACM_1.0",
    rdma_listen => "RDMACM_1.0",
    rdma_get_request => "RDMACM_1.0",
}
