//! Connection-manager identifiers: `rdma_create_id`, `rdma_destroy_id`,
//! `rdma_bind_addr`, `rdma_listen`, `rdma_get_request`,
//! `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`,
//! `rdma_accept`, `rdma_reject`, `rdma_disconnect`, `rdma_establish`,
//! `rdma_migrate_id`, `rdma_set_option`, `rdma_init_qp_attr`, the ports,
//! and the queue pair of an id (`rdma_create_qp`, `rdma_create_qp_ex`,
//! `rdma_destroy_qp`).
//!
//! Binding opens uwarp's listener at once (so `rdma_get_src_port` knows
//! the port the system chose for port 0); `rdma_listen` starts handing its
//! requests out as `RDMA_CM_EVENT_CONNECT_REQUEST`s.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use uwarp::{
    ConnectParams, Connection, Error, IncomingRequest, Listener, LocalParams, QpEvent, QpState,
    QueuePair, RtrSet,
};

use super::addrinfo::{from_sockaddr, to_sockaddr};
use super::events::{self, Event, EventChannel, Liveness};
use crate::abi::cm::*;
use crate::abi::verbs::*;
use crate::async_events;
use crate::device::shared_context;
use crate::export::{errno_of, fail, guard, set_errno, symbol_versions, LiveHandles};
use crate::limits;
use crate::provider;
use crate::qp::{queue_pair_numbered, Qp};

/// How often a listening id's thread looks whether its id was destroyed.
const LISTEN_POLL: Duration = Duration::from_millis(100);

/// An identifier: the `rdma_cm_id` applications hold, and what uwarp
/// keeps for it.
#[repr(C)]
pub struct Id {
    ibv: RdmaCmId,
    shared: Arc<Shared>,
}

/// What an id's threads share with it (they outlive neither the process
/// nor this structure's last reference, but may outlive the id itself).
struct Shared {
    /// Whether the id is destroyed, and its events held.
    liveness: Arc<Liveness>,
    /// The `rdma_cm_id` (an address events carry, never dereferenced by
    /// a thread).
    c_id: usize,
    /// Where events go: the application's channel, or a synchronous id's
    /// own. Locked while an event is posted, so that destruction (which
    /// takes it too) and posting exclude each other.
    channel: Mutex<*mut EventChannel>,
    /// A synchronous id's own channel.
    private: Option<Box<EventChannel>>,
    /// What the id is doing.
    role: Mutex<Role>,
}

// SAFETY: the raw channel pointer is only dereferenced under `channel`'s
// lock while the id is not destroyed, and the application keeps a channel
// alive while ids use it (librdmacm's contract); everything else is Send
// and Sync.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

/// What an id is doing.
enum Role {
    /// Nothing yet.
    Idle,
    /// Bound: its listener is open, and holds requests until `listen`.
    Bound(Arc<Listener>),
    /// Listening: a thread hands the listener's requests out (and holds
    /// it until the id is destroyed, when it is joined).
    Listening(std::thread::JoinHandle<()>),
    /// Its destination resolved (the active side, before `connect`).
    Resolved(SocketAddr),
    /// A connection request waiting for `accept` or `reject`.
    Requested(IncomingRequest),
    /// Connecting or connected, on this queue pair.
    Connected(QueuePair),
}

impl Shared {
    fn role(&self) -> MutexGuard<'_, Role> {
        self.role.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts an event of type `kind` (with `status`, private data and
    /// IRD/ORD), unless the id was destroyed.
    fn post(&self, kind: c_int, status: c_int, private_data: Vec<u8>, ird_ord: (u8, u8)) {
        self.post_event(Event::new(
            self.c_id as *mut RdmaCmId,
            self.liveness.clone(),
            kind,
            status,
            private_data,
            ird_ord,
        ));
    }

    fn post_event(&self, event: Box<Event>) {
        let channel = self.channel.lock().unwrap_or_else(|e| e.into_inner());
        if !self.liveness.is_destroyed() {
            // SAFETY: the channel is alive while the id is (see `Shared`).
            unsafe { (**channel).post(event) };
        }
    }

    /// A synchronous id's wait for the event its operation posts: 0 if it
    /// is `expected` with status 0, else -1 with `errno` from the event.
    fn finish(&self, expected: c_int) -> c_int {
        let Some(private) = &self.private else {
            return 0;
        };
        match private.take() {
            Ok(event) if event.ibv.event == expected && event.ibv.status == 0 => 0,
            Ok(event) => {
                let errno = -event.ibv.status;
                set_errno(if errno > 0 { errno } else { libc::ECONNREFUSED });
                -1
            }
            Err(errno) => {
                set_errno(errno);
                -1
            }
        }
    }
}

/// The ids alive now.
static LIVE_IDS: LiveHandles = LiveHandles::new();

/// Whether `id` is an id `rdma_create_id` (or a connection request) made
/// and `rdma_destroy_id` has not destroyed.
pub(crate) fn is_live(id: *mut RdmaCmId) -> bool {
    LIVE_IDS.contains(id)
}

impl Id {
    /// The id behind `id`.
    ///
    /// # Safety
    ///
    /// `id` is a live id `rdma_create_id` (or a connection request)
    /// made.
    unsafe fn from_ibv<'a>(id: *mut RdmaCmId) -> &'a mut Id {
        // SAFETY: the caller promises a live id; `ibv` is the first field
        // of the `#[repr(C)]` `Id` it was boxed as.
        unsafe { &mut *id.cast::<Id>() }
    }

    /// A new id on `channel` (NULL: synchronous), with the application's
    /// `context`.
    fn boxed(channel: *mut RdmaEventChannel, context: *mut c_void) -> Result<*mut Id, c_int> {
        let private = if channel.is_null() {
            Some(EventChannel::new()?)
        } else {
            None
        };
        let mut id = Box::new(Id {
            ibv: RdmaCmId {
                verbs: ptr::null_mut(),
                channel,
                context,
                qp: ptr::null_mut(),
                // SAFETY: all zeros is a valid route (addresses of family
                // AF_UNSPEC, no path records).
                route: unsafe { core::mem::zeroed() },
                ps: RDMA_PS_TCP,
                port_num: 0,
                event: ptr::null_mut(),
                send_cq_channel: ptr::null_mut(),
                send_cq: ptr::null_mut(),
                recv_cq_channel: ptr::null_mut(),
                recv_cq: ptr::null_mut(),
                srq: ptr::null_mut(),
                pd: ptr::null_mut(),
                qp_type: IBV_QPT_RC,
            },
            shared: Arc::new(Shared {
                liveness: Arc::default(),
                c_id: 0,
                channel: Mutex::new(ptr::null_mut()),
                private,
                role: Mutex::new(Role::Idle),
            }),
        });
        let c_id = ptr::from_mut(&mut id.ibv) as usize;
        let target = match &id.shared.private {
            Some(private) => ptr::from_ref::<EventChannel>(private).cast_mut(),
            None => channel.cast::<EventChannel>(),
        };
        let shared = Arc::get_mut(&mut id.shared).expect("a new id's state is not shared yet");
        shared.c_id = c_id;
        *shared.channel.get_mut().unwrap_or_else(|e| e.into_inner()) = target;
        let id = Box::into_raw(id);
        LIVE_IDS.insert(id);
        Ok(id)
    }

    /// Attaches the id to the device: its `verbs` and port.
    fn attach(&mut self) -> Result<(), c_int> {
        self.ibv.verbs = shared_context()?;
        self.ibv.port_num = limits::PORT_NUM;
        // SAFETY: `ibaddr.sgid` is a plain 16-octet field of the id.
        self.ibv.route.addr.ibaddr.sgid = IbvGid { raw: limits::gid() };
        Ok(())
    }

    fn set_source(&mut self, addr: SocketAddr) {
        self.ibv.route.addr.src_storage = to_sockaddr(addr).0;
    }

    fn set_destination(&mut self, addr: SocketAddr) {
        self.ibv.route.addr.dst_storage = to_sockaddr(addr).0;
    }

    fn source(&self) -> Option<SocketAddr> {
        // SAFETY: the storage holds a socket address of its family (or
        // AF_UNSPEC, which gives None).
        unsafe { from_sockaddr(ptr::from_ref(&self.ibv.route.addr.src_storage).cast()) }
    }

    fn destination(&self) -> Option<SocketAddr> {
        // SAFETY: as for `source`.
        unsafe { from_sockaddr(ptr::from_ref(&self.ibv.route.addr.dst_storage).cast()) }
    }

    /// The uwarp queue pair `rdma_create_qp` made for the id, or else the
    /// one the application made itself and names by `qp_num` in its
    /// connection parameters (0: none).
    fn queue_pair(&self, qp_num: u32) -> Option<QueuePair> {
        if self.ibv.qp.is_null() {
            return (qp_num != 0).then(|| queue_pair_numbered(qp_num)).flatten();
        }
        // SAFETY: `qp` is the live queue pair of this id.
        Some(unsafe { Qp::from_ibv(self.ibv.qp) }.qp.clone())
    }
}

/// Runs `body` on the live id `id`, answering -1 with `errno` `EINVAL` for
/// NULL or an id not alive ([`is_live`]) and -1 with `EIO` for a panic;
/// `body` answers 0 or an `errno`.
///
/// # Safety
///
/// `id` is not used by another thread while `body` runs.
unsafe fn with_id(id: *mut RdmaCmId, body: impl FnOnce(&mut Id) -> Result<c_int, c_int>) -> c_int {
    if !is_live(id) {
        set_errno(libc::EINVAL);
        return -1;
    }
    guard(-1, || {
        // SAFETY: the caller promises a live id.
        match body(unsafe { Id::from_ibv(id) }) {
            Ok(answer) => answer,
            Err(errno) => {
                set_errno(errno);
                -1
            }
        }
    })
}

/// `rdma_create_id`: a new id on `channel` (NULL: synchronous: its
/// operations return when done). 0, or -1 with `errno` set.
///
/// # Safety
///
/// `channel` is NULL or live; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut RdmaEventChannel,
    id: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    if id.is_null() || !(channel.is_null() || events::is_live(channel)) {
        return fail(libc::EINVAL);
    }
    if ps != RDMA_PS_TCP {
        return fail(libc::EPROTONOSUPPORT);
    }
    guard(-1, || match Id::boxed(channel, context) {
        Ok(made) => {
            // SAFETY: the caller promises `id` is writable.
            unsafe { id.write(made.cast()) };
            0
        }
        Err(errno) => {
            set_errno(errno);
            -1
        }
    })
}

/// `rdma_destroy_id`: waits until the application has acknowledged every
/// event of the id it took, stops what the id does (a listener closes, an
/// undecided request is rejected), and frees it. 0.
///
/// # Safety
///
/// `id` is NULL or live, its queue pair already destroyed.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut RdmaCmId) -> c_int {
    if !LIVE_IDS.remove(id) {
        set_errno(libc::EINVAL);
        return -1;
    }
    guard(-1, || {
        // SAFETY: the caller promises a live id, boxed as an `Id`.
        let owned = unsafe { Box::from_raw(id.cast::<Id>()) };
        {
            let _posting = owned
                .shared
                .channel
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            owned.shared.liveness.mark_destroyed();
        }
        owned.shared.liveness.wait_released();
        let role = std::mem::replace(&mut *owned.shared.role(), Role::Idle);
        if let Role::Listening(thread) = role {
            // It sees the id destroyed within LISTEN_POLL and drops the
            // listener, which returns once the port is closed.
            let _ = thread.join();
        }
        if !owned.ibv.event.is_null() {
            // SAFETY: a synchronous id's stored request event, boxed.
            drop(unsafe { Box::from_raw(owned.ibv.event.cast::<Event>()) });
        }
        0
    })
}

/// `rdma_bind_addr`: binds the id to a local address (port 0: one the
/// system chooses, which `rdma_get_src_port` then tells). 0, or -1 with
/// `errno` set (`EADDRINUSE`, `EADDRNOTAVAIL`, ...).
///
/// # Safety
///
/// `id` is NULL or live; `addr` is NULL or a socket address.
#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut RdmaCmId, addr: *mut libc::sockaddr) -> c_int {
    // SAFETY: the caller promises a socket address, or NULL.
    let Some(addr) = (unsafe { from_sockaddr(addr) }) else {
        set_errno(libc::EAFNOSUPPORT);
        return -1;
    };
    // SAFETY: forwarded.
    unsafe { with_id(id, |id| bind(id, addr).map(|()| 0)) }
}

/// Opens the id's listener on `addr`.
fn bind(id: &mut Id, addr: SocketAddr) -> Result<(), c_int> {
    let device = provider::device()?;
    let mut role = id.shared.role();
    if !matches!(*role, Role::Idle) {
        return Err(libc::EINVAL);
    }
    let listener = device.listen(addr).map_err(|e| errno_of(&e))?;
    let bound = listener.local_addr();
    *role = Role::Bound(Arc::new(listener));
    drop(role);
    id.attach()?;
    id.set_source(bound);
    Ok(())
}

/// `rdma_listen`: hands the bound id's connection requests out as
/// `RDMA_CM_EVENT_CONNECT_REQUEST`s, each on a new id (an unbound id is
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
            *role = Role::Idle;
            drop(role);
            let shared = id.shared.clone();
            // What the listener's new ids inherit, as addresses: the
            // channel and context stay the application's, and the device
            // context is open for good.
            let inherited = (
                id.ibv.channel as usize,
                id.ibv.verbs as usize,
                id.ibv.context as usize,
            );
            let thread = provider::spawn("uwarp-cm-listen", move || {
                let (channel, verbs, context) = inherited;
                serve(
                    &shared,
                    &listener,
                    channel as *mut _,
                    verbs as *mut _,
                    context as *mut _,
                );
            })
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            *id.shared.role() = Role::Listening(thread);
            Ok(0)
        })
    }
}

/// A listening id's thread: each request becomes a new id (on the
/// listener's channel, with its `context`) and an event, until the id is
/// destroyed.
fn serve(
    listener_id: &Shared,
    listener: &Listener,
    channel: *mut RdmaEventChannel,
    verbs: *mut IbvContext,
    context: *mut c_void,
) {
    while !listener_id.liveness.is_destroyed() {
        let request = match listener.get_request(LISTEN_POLL) {
            Ok(request) => request,
            Err(Error::Timeout) => continue,
            Err(_) => return,
        };
        let Ok(child) = Id::boxed(channel, context) else {
            continue;
        };
        // SAFETY: just made, and not yet handed to the application.
        let child = unsafe { &mut *child };
        child.ibv.verbs = verbs;
        child.ibv.port_num = limits::PORT_NUM;
        if let Some(local) = listener_source(listener, &request) {
            child.set_source(local);
        }
        child.set_destination(request.peer_addr);
        let private_data = request.private_data().to_vec();
        let (ird, ord) = request.ird_ord().unwrap_or(DEFAULT_IRD_ORD);
        *child.shared.role() = Role::Requested(request);
        let mut event = Event::new(
            ptr::from_mut(&mut child.ibv),
            child.shared.liveness.clone(),
            RDMA_CM_EVENT_CONNECT_REQUEST,
            0,
            private_data,
            (clamp(ird), clamp(ord)),
        );
        event.ibv.listen_id = listener_id.c_id as *mut RdmaCmId;
        // A synchronous listener's requests go to its own channel.
        listener_id.post_event(event);
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

fn clamp(value: u16) -> u8 {
    u8::try_from(value).unwrap_or(u8::MAX)
}

/// `rdma_get_request`: a synchronous listener's next connection request:
/// its new id, with the request event in the id's `event`. 0, or -1 with
/// `errno` set.
///
/// # Safety
///
/// `listen` is NULL or a live synchronous id; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(listen: *mut RdmaCmId, id: *mut *mut RdmaCmId) -> c_int {
    if id.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: forwarded.
    unsafe {
        with_id(listen, |listener| {
            let private = listener.shared.private.as_ref().ok_or(libc::EINVAL)?;
            let event = private.take()?;
            let child = event.ibv.id;
            // SAFETY: the request's new id, live (its event was not
            // dropped).
            let child_id = Id::from_ibv(child);
            child_id.ibv.event = Box::into_raw(event).cast();
            id.write(child);
            Ok(0)
        })
    }
}

/// `rdma_resolve_addr`: resolves the destination (and the source, when
/// none is given, as the local address the route to it leaves from);
/// `RDMA_CM_EVENT_ADDR_RESOLVED` follows. 0, or -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; the addresses are NULL or socket addresses.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut RdmaCmId,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    // SAFETY: the caller promises socket addresses or NULL.
    let (src, dst) = unsafe { (from_sockaddr(src), from_sockaddr(dst)) };
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            let dst = dst.ok_or(libc::EINVAL)?;
            // Opened first: on the DPDK transport, the source is its own.
            provider::device()?;
            let source = match (src, provider::own_address()) {
                (Some(src), _) => src,
                (None, Some(own)) => SocketAddr::new(own, 0),
                (None, None) => {
                    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
                    let probe =
                        UdpSocket::bind(any).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
                    probe
                        .connect(dst)
                        .map_err(|e| e.raw_os_error().unwrap_or(libc::ENETUNREACH))?;
                    probe
                        .local_addr()
                        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?
                }
            };
            *id.shared.role() = Role::Resolved(dst);
            id.attach()?;
            id.set_source(SocketAddr::new(source.ip(), 0));
            id.set_destination(dst);
            id.shared
                .post(RDMA_CM_EVENT_ADDR_RESOLVED, 0, Vec::new(), (0, 0));
            Ok(id.shared.finish(RDMA_CM_EVENT_ADDR_RESOLVED))
        })
    }
}

/// `rdma_resolve_route`: iWARP needs no route beyond the address;
/// `RDMA_CM_EVENT_ROUTE_RESOLVED` follows. 0, or -1 with `errno` `EINVAL`
/// before the address is resolved.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut RdmaCmId, _timeout_ms: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            if !matches!(*id.shared.role(), Role::Resolved(_)) {
                return Err(libc::EINVAL);
            }
            id.shared
                .post(RDMA_CM_EVENT_ROUTE_RESOLVED, 0, Vec::new(), (0, 0));
            Ok(id.shared.finish(RDMA_CM_EVENT_ROUTE_RESOLVED))
        })
    }
}

/// The private data a connection parameter carries.
///
/// # Safety
///
/// `param` is NULL or readable, its private data readable for its length.
unsafe fn private_data(param: Option<&RdmaConnParam>) -> Vec<u8> {
    match param {
        Some(p) if !p.private_data.is_null() && p.private_data_len > 0 => {
            // SAFETY: the caller promises the octets are readable.
            unsafe {
                core::slice::from_raw_parts(
                    p.private_data.cast::<u8>(),
                    usize::from(p.private_data_len),
                )
            }
            .to_vec()
        }
        _ => Vec::new(),
    }
}

/// The IRD and ORD a connection takes, or a request reports, when neither
/// the application nor (in a revision-1 request) the peer says:
/// the most the device offers.
const DEFAULT_IRD_ORD: (u16, u16) = (limits::MAX_RD_ATOM as u16, limits::MAX_RD_ATOM as u16);

/// What `rdma_connect` and `rdma_accept` take from a connection
/// parameter: the MPA parameters (IRD from `responder_resources`, ORD from
/// `initiator_depth`, the private data), and the number of the queue pair
/// the application made itself (`qp_num`; 0: none).
///
/// Both sides speak the peer-to-peer model (RFC 6581 section 9) whenever
/// the peer does: the initiator offers every RTR type and the responder
/// takes any. In the client-server model of RFC 5044 the responder sends
/// nothing before the initiator's first FPDU (section 7.1.2), which the
/// verbs do not know of: an application whose passive side writes first
/// (perftest's `ib_write_lat`, where the server posts the first RDMA
/// Write) would wait for ever, as it would not on an iWARP RNIC, whose
/// connection managers send an RTR too.
///
/// # Safety
///
/// As [`private_data`].
unsafe fn connection_params(param: *const RdmaConnParam) -> (LocalParams, u32) {
    // SAFETY: the caller promises NULL or readable.
    let param = unsafe { param.as_ref() };
    let (ird, ord) = param.map_or(DEFAULT_IRD_ORD, |p| {
        (
            u16::from(p.responder_resources),
            u16::from(p.initiator_depth),
        )
    });
    let mpa = LocalParams {
        ird,
        ord,
        // SAFETY: forwarded.
        private_data: unsafe { private_data(param) },
        peer_to_peer: Some(RtrSet::ALL),
        ..LocalParams::default()
    };
    (mpa, param.map_or(0, |p| p.qp_num))
}

/// The IRD/ORD an established connection reports.
fn negotiated(connection: &Connection) -> (u8, u8) {
    (
        clamp(connection.negotiated.ird),
        clamp(connection.negotiated.ord),
    )
}

/// `rdma_connect`: connects the id's queue pair to the resolved
/// destination; `RDMA_CM_EVENT_ESTABLISHED` follows (with the responder's
/// private data), or `REJECTED` (with its private data; status
/// `-ECONNREFUSED`, also when nothing listens), `UNREACHABLE` (a time
/// out, no route) or `CONNECT_ERROR`, as the kernel chooses. 0, or -1
/// with `errno` set. (A reset during the MPA exchange is `REJECTED` with
/// `-ECONNRESET`.)
///
/// # Safety
///
/// `id` is NULL or live; `param` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // SAFETY: the caller promises NULL or a readable parameter.
    let (mpa, qp_num) = unsafe { connection_params(param) };
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            let qp = id.queue_pair(qp_num).ok_or(libc::EINVAL)?;
            let dst = match *id.shared.role() {
                Role::Resolved(dst) => dst,
                _ => return Err(libc::EINVAL),
            };
            *id.shared.role() = Role::Connected(qp.clone());
            let shared = id.shared.clone();
            let id_address = ptr::from_mut(id) as usize;
            provider::spawn("uwarp-cm-connect", move || {
                let device = match provider::device() {
                    Ok(device) => device,
                    Err(errno) => {
                        return shared.post(RDMA_CM_EVENT_CONNECT_ERROR, -errno, Vec::new(), (0, 0))
                    }
                };
                let params = ConnectParams {
                    mpa,
                    first_fpdu_delay: provider::first_fpdu_delay(),
                    ..ConnectParams::default()
                };
                match device.connect(dst, &qp, params) {
                    Ok(connection) => {
                        established(
                            &shared,
                            &connection,
                            connection.private_data.clone(),
                            id_address,
                        );
                        watch(&shared, &qp);
                    }
                    Err(Error::Rejected { private_data }) => {
                        shared.post(
                            RDMA_CM_EVENT_REJECTED,
                            -libc::ECONNREFUSED,
                            private_data,
                            (0, 0),
                        );
                    }
                    Err(error) => {
                        let errno = errno_of(&error);
                        shared.post(failed_connect_event(errno), -errno, Vec::new(), (0, 0));
                    }
                }
            })
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            Ok(id.shared.finish(RDMA_CM_EVENT_ESTABLISHED))
        })
    }
}

/// The event that reports a connect failed with `errno`, as the kernel's
/// connection manager chooses it for iWARP: refused, or reset by the
/// peer during the MPA exchange, is `REJECTED`; a time out or no route to
/// the peer (TCP's SYNs or ARP unanswered) is `UNREACHABLE`; anything
/// else `CONNECT_ERROR`.
fn failed_connect_event(errno: i32) -> c_int {
    match errno {
        libc::ECONNREFUSED | libc::ECONNRESET => RDMA_CM_EVENT_REJECTED,
        libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH => RDMA_CM_EVENT_UNREACHABLE,
        _ => RDMA_CM_EVENT_CONNECT_ERROR,
    }
}

/// Records an established connection's ports on the id and posts
/// `ESTABLISHED`, unless the id is gone. `id_address` is the `Id`, only
/// written while its liveness says it is alive (under the posting lock).
fn established(shared: &Shared, connection: &Connection, private_data: Vec<u8>, id_address: usize) {
    {
        let _posting = shared.channel.lock().unwrap_or_else(|e| e.into_inner());
        if shared.liveness.is_destroyed() {
            return;
        }
        // SAFETY: the id is alive (checked under the lock destruction
        // takes), and only this thread writes its route now.
        let id = unsafe { &mut *(id_address as *mut Id) };
        id.set_source(connection.local_addr);
        id.set_destination(connection.peer_addr);
    }
    shared.post(
        RDMA_CM_EVENT_ESTABLISHED,
        0,
        private_data,
        negotiated(connection),
    );
}

/// Watches the connection of `qp` until it ends: raises the queue pair's
/// asynchronous events (a Terminate sent or received) on its context, as
/// they come, then posts `DISCONNECTED` (unless the id is gone first). A
/// queue pair's events are queued before it reaches Error, so a
/// Terminate's event precedes `DISCONNECTED`.
///
/// It sleeps on the queue pair's events, looking at its state at least
/// every [`LISTEN_POLL`] (a queue pair may reach Error with no event):
/// a thread that woke every few hundred microseconds took the CPU from
/// the application and the cores wherever they share one.
fn watch(shared: &Shared, qp: &QueuePair) {
    while !shared.liveness.is_destroyed() {
        let mut closed = false;
        let first = qp.next_event(LISTEN_POLL);
        for event in first
            .into_iter()
            .chain(std::iter::from_fn(|| qp.next_event(Duration::ZERO)))
        {
            closed |= matches!(event, QpEvent::Disconnected);
            if let Some(event_type) = async_events::event_of(&event) {
                async_events::raise(qp.num(), event_type);
            }
        }
        if closed || qp.state() == QpState::Error {
            shared.post(RDMA_CM_EVENT_DISCONNECTED, 0, Vec::new(), (0, 0));
            return;
        }
    }
}

/// `rdma_accept`: accepts a connection request onto the id's queue pair,
/// with the IRD (`responder_resources`), ORD (`initiator_depth`) and
/// private data of `param`; `RDMA_CM_EVENT_ESTABLISHED` follows. 0, or -1
/// with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `param` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // SAFETY: the caller promises NULL or a readable parameter.
    let (mpa, qp_num) = unsafe { connection_params(param) };
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            let qp = id.queue_pair(qp_num).ok_or(libc::EINVAL)?;
            let request =
                match std::mem::replace(&mut *id.shared.role(), Role::Connected(qp.clone())) {
                    Role::Requested(request) => request,
                    other => {
                        *id.shared.role() = other;
                        return Err(libc::EINVAL);
                    }
                };
            let connection = request.accept(&qp, mpa).map_err(|e| errno_of(&e))?;
            let id_address = ptr::from_mut(id) as usize;
            established(&id.shared, &connection, Vec::new(), id_address);
            let shared = id.shared.clone();
            provider::spawn("uwarp-cm-watch", move || watch(&shared, &qp))
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            Ok(id.shared.finish(RDMA_CM_EVENT_ESTABLISHED))
        })
    }
}

/// `rdma_reject`: rejects a connection request, with `private_data` in
/// the MPA Reply. 0, or -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `data` is NULL or readable for `len` octets.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject(id: *mut RdmaCmId, data: *const c_void, len: u8) -> c_int {
    let param = RdmaConnParam {
        private_data: data,
        private_data_len: len,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 0,
        rnr_retry_count: 0,
        srq: 0,
        qp_num: 0,
    };
    // SAFETY: the caller promises `len` readable octets at `data`.
    let octets = unsafe { private_data(Some(&param)) };
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            match std::mem::replace(&mut *id.shared.role(), Role::Idle) {
                Role::Requested(request) => request
                    .reject(&octets)
                    .map(|()| 0)
                    .map_err(|e| errno_of(&e)),
                other => {
                    *id.shared.role() = other;
                    Err(libc::EINVAL)
                }
            }
        })
    }
}

/// `rdma_disconnect`: closes the id's connection gracefully (posted work
/// is sent first); `RDMA_CM_EVENT_DISCONNECTED` follows on both sides. 0,
/// or -1 with `errno` `EINVAL` when it has no connection.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut RdmaCmId) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            match &*id.shared.role() {
                Role::Connected(qp) => qp.disconnect(),
                _ => return Err(libc::EINVAL),
            }
            Ok(0)
        })
    }
}

/// `rdma_establish`: for applications that manage the connection's last
/// step themselves; uwarp's connections are established when
/// `ESTABLISHED` is reported. 0.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_establish(id: *mut RdmaCmId) -> c_int {
    // SAFETY: forwarded.
    unsafe { with_id(id, |_| Ok(0)) }
}

/// `rdma_migrate_id`: moves the id's future events to `channel`. 0, or
/// -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `channel` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut RdmaCmId,
    channel: *mut RdmaEventChannel,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            if !events::is_live(channel) {
                // Becoming synchronous needs a private channel the id was
                // not made with.
                return Err(libc::EINVAL);
            }
            *id.shared.channel.lock().unwrap_or_else(|e| e.into_inner()) = channel.cast();
            id.ibv.channel = channel;
            Ok(0)
        })
    }
}

/// `rdma_set_option`: the id-level options (`RDMA_OPTION_ID_TOS`,
/// `_REUSEADDR`, `_AFONLY`, `_ACK_TIMEOUT`) are accepted and have no
/// effect on uwarp's TCP; the InfiniBand path option is `ENOSYS`.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut RdmaCmId,
    level: c_int,
    optname: c_int,
    _optval: *mut c_void,
    _optlen: usize,
) -> c_int {
    /// `RDMA_OPTION_ID`.
    const LEVEL_ID: c_int = 0;
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |_| match (level, optname) {
            (LEVEL_ID, 0..=3) => Ok(0),
            _ => Err(libc::ENOSYS),
        })
    }
}

/// `rdma_get_src_port`: the id's local port (big-endian).
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    // SAFETY: the caller promises NULL or a live id.
    unsafe { id.cast::<Id>().as_ref() }
        .and_then(Id::source)
        .map_or(0, |addr| addr.port().to_be())
}

/// `rdma_get_dst_port`: the id's peer port (big-endian).
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    // SAFETY: the caller promises NULL or a live id.
    unsafe { id.cast::<Id>().as_ref() }
        .and_then(Id::destination)
        .map_or(0, |addr| addr.port().to_be())
}

/// `rdma_init_qp_attr`: the attributes to move a queue pair of the id to
/// the state `attr.qp_state` names: the state, and for INIT the access
/// flags and port. 0, or -1 with `errno` set.
///
/// # Safety
///
/// `id` is NULL or live; `attr` and `mask` are NULL or readable and
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut RdmaCmId,
    attr: *mut IbvQpAttr,
    mask: *mut c_int,
) -> c_int {
    if attr.is_null() || mask.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: forwarded; `attr` and `mask` are the caller's, checked.
    unsafe {
        with_id(id, |_| {
            let state = (*attr).qp_state;
            *attr = core::mem::zeroed();
            (*attr).qp_state = state;
            let mut answer = IBV_QP_STATE;
            if state == IBV_QPS_INIT {
                (*attr).qp_access_flags = (IBV_ACCESS_LOCAL_WRITE
                    | IBV_ACCESS_REMOTE_WRITE
                    | IBV_ACCESS_REMOTE_READ) as u32;
                (*attr).port_num = limits::PORT_NUM;
                answer |= IBV_QP_ACCESS_FLAGS | IBV_QP_PORT;
            }
            mask.write(answer);
            Ok(0)
        })
    }
}

symbol_versions! {
    rdma_create_id => "RDMACM_1.0",
    rdma_destroy_id => "RDMACM_1.0",
    rdma_bind_addr => "RDMACM_1.0",
    rdma_listen => "RDMACM_1.0",
    rdma_get_request => "RDMACM_1.0",
    rdma_resolve_addr => "RDMACM_1.0",
    rdma_resolve_route => "RDMACM_1.0",
    rdma_connect => "RDMACM_1.0",
    rdma_accept => "RDMACM_1.0",
    rdma_reject => "RDMACM_1.0",
    rdma_disconnect => "RDMACM_1.0",
    rdma_establish => "RDMACM_1.2",
    rdma_migrate_id => "RDMACM_1.0",
    rdma_set_option => "RDMACM_1.0",
    rdma_get_src_port => "RDMACM_1.0",
    rdma_get_dst_port => "RDMACM_1.0",
    rdma_init_qp_attr => "RDMACM_1.2",
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's connection manager's choice for iWARP (`cma_iw_handler`).
    #[test]
    fn a_failed_connect_is_reported_as_the_kernel_reports_it() {
        for (errno, event) in [
            (libc::ECONNREFUSED, RDMA_CM_EVENT_REJECTED),
            (libc::ECONNRESET, RDMA_CM_EVENT_REJECTED),
            (libc::ETIMEDOUT, RDMA_CM_EVENT_UNREACHABLE),
            (libc::EHOSTUNREACH, RDMA_CM_EVENT_UNREACHABLE),
            (libc::ECONNABORTED, RDMA_CM_EVENT_CONNECT_ERROR),
        ] {
            assert_eq!(failed_connect_event(errno), event, "errno {errno}");
        }
    }
}
