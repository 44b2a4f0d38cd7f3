//! Connection-manager identifiers: `rdma_create_id`, `rdma_destroy_id`,
//! `rdma_migrate_id`, `rdma_set_option`, `rdma_get_src_port`,
//! `rdma_get_dst_port`, `rdma_init_qp_attr`; what an id is made of, where
//! its events go, and how a synchronous id waits for them. Binding and
//! listening are in [`listen`](super::listen), connecting in
//! [`connect`](super::connect).
//!
//! Threads: only the application's threads touch an `rdma_cm_id`. The
//! library's threads (a listener's, a connect's, a connection's watcher)
//! hold the id's shared part and post events; what an event changes
//! in the id is written by the thread that takes it
//! ([`HandOut`](super::events::HandOut)).

use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use uwarp::{IncomingRequest, ListenOptions, Listener, QueuePair};

use super::addrinfo::{from_sockaddr, to_sockaddr};
use super::events::{self, acknowledge, take_from, Event, EventChannel, Liveness};
use super::queue::{take_or_wait, EventQueue, TAKE_NOTHING};
use crate::abi::cm::*;
use crate::abi::verbs::*;
use crate::device::shared_context;
use crate::export::{fail, guard, set_errno, symbol_versions, LiveHandles};
use crate::limits;
use crate::qp::{queue_pair_numbered, Qp};

/// An identifier: the `rdma_cm_id` applications hold, and what uwarp
/// keeps for it.
#[repr(C)]
pub struct Id {
    pub(super) ibv: RdmaCmId,
    pub(super) shared: Arc<Shared>,
    /// A passive endpoint's queue pair attributes (`rdma_create_ep`): each
    /// request's new id gets a queue pair made with them.
    pub(super) endpoint_qp: Option<IbvQpInitAttr>,
    /// `RDMA_OPTION_ID_AFONLY`, when set: how its listener is opened.
    pub(super) listen_options: ListenOptions,
    /// The fork generation the id was made in ([`uwarp::fork_generation`]).
    generation: u64,
}

/// What an id's threads share with it.
pub(super) struct Shared {
    /// Whether the id is destroyed, and its events held.
    pub(super) liveness: Arc<Liveness>,
    /// The `rdma_cm_id` (an address events carry, never dereferenced by
    /// a library thread).
    pub(super) c_id: usize,
    /// Where its events go: its channel's queue (a synchronous id's own
    /// channel's); `None` once destroyed. Locked while an event is
    /// posted, so that destruction and migration exclude posting.
    queue: Mutex<Option<Arc<EventQueue>>>,
    /// What the id is doing.
    role: Mutex<Role>,
}

/// What an id is doing.
pub(super) enum Role {
    /// Nothing yet.
    Idle,
    /// Bound: its listener is open, and holds requests until `listen`.
    Bound(Arc<Listener>),
    /// Listening: a thread hands the listener's requests out until the
    /// listener stops (when the id is destroyed, which joins it).
    Listening(Arc<Listener>, ListenThread),
    /// Its destination resolved (the active side, before `connect`).
    Resolved(SocketAddr),
    /// A connection request waiting for `accept` or `reject`.
    Requested(IncomingRequest),
    /// Connecting or connected, on this queue pair; `disconnecting` once
    /// the application asked for a graceful close.
    Connected {
        /// The connection's queue pair.
        qp: QueuePair,
        /// `rdma_disconnect` was called.
        disconnecting: bool,
    },
}

/// A listening id's thread, and the fork generation it was started in
/// ([`uwarp::fork_generation`]): a child of `fork` has none of its
/// parent's threads to join.
pub(super) struct ListenThread {
    pub(super) thread: std::thread::JoinHandle<()>,
    pub(super) generation: u64,
}

impl ListenThread {
    /// Waits for the thread to end, where it exists.
    fn join(self) {
        if self.generation == uwarp::fork_generation() {
            drop(self.thread.join());
        }
    }
}

impl Shared {
    pub(super) fn role(&self) -> MutexGuard<'_, Role> {
        self.role.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self) -> MutexGuard<'_, Option<Arc<EventQueue>>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts an event of type `kind` about the id (with `status`, private
    /// data and the responder resources and initiator depth), unless the
    /// id was destroyed.
    pub(super) fn post(&self, kind: c_int, status: c_int, private_data: Vec<u8>, rd: (u8, u8)) {
        self.post_event(Event::new(
            self.c_id as *mut RdmaCmId,
            self.liveness.clone(),
            kind,
            status,
            private_data,
            rd,
        ));
    }

    /// Posts `event` where the id's events go, unless it was destroyed.
    pub(super) fn post_event(&self, event: Box<Event>) {
        let queue = self.queue();
        if let Some(queue) = &*queue {
            queue.post(event);
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
    /// `id` is a live id, used by no other thread meanwhile (the
    /// application's contract with librdmacm).
    pub(super) unsafe fn from_ibv<'a>(id: *mut RdmaCmId) -> &'a mut Id {
        // SAFETY: the caller promises a live id; `ibv` is the first field
        // of the `#[repr(C)]` `Id` it was boxed as.
        unsafe { &mut *id.cast::<Id>() }
    }

    /// A new id, not yet published, whose events go nowhere until it is
    /// given a channel ([`Id::set_channel`]).
    pub(super) fn unpublished(context: *mut c_void) -> Box<Id> {
        let mut id = Box::new(Id {
            ibv: RdmaCmId {
                verbs: ptr::null_mut(),
                channel: ptr::null_mut(),
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
                queue: Mutex::new(None),
                role: Mutex::new(Role::Idle),
            }),
            endpoint_qp: None,
            listen_options: ListenOptions::default(),
            generation: uwarp::fork_generation(),
        });
        let c_id = ptr::from_mut(&mut id.ibv) as usize;
        Arc::get_mut(&mut id.shared)
            .expect("a new id's state is not shared yet")
            .c_id = c_id;
        id
    }

    /// Publishes the id: a live handle from now on.
    pub(super) fn publish(id: Box<Id>) -> *mut RdmaCmId {
        let id: *mut RdmaCmId = Box::into_raw(id).cast();
        LIVE_IDS.insert(id);
        id
    }

    /// Whether the id was made by the parent of this process (a child of
    /// `fork`): the library threads that serve it are the parent's, and
    /// may have held its locks at the fork, so the child touches nothing
    /// of it but its `rdma_cm_id` (as with the parent's other objects, its
    /// operations answer `ENODEV`).
    fn is_foreign(&self) -> bool {
        self.generation != uwarp::fork_generation()
    }

    /// What an operation that posted its event answers: 0, or
    /// [`STARTED_SYNC`] for a synchronous id, which then waits for it.
    pub(super) fn started(&self) -> c_int {
        if self.is_sync() {
            STARTED_SYNC
        } else {
            0
        }
    }

    /// Whether the id is synchronous (its channel is its own).
    pub(super) fn is_sync(&self) -> bool {
        self.sync_channel().is_some()
    }

    /// A synchronous id's own channel.
    fn sync_channel(&self) -> Option<*mut RdmaEventChannel> {
        let channel = self.ibv.channel;
        // SAFETY: an id's channel is a channel made by `EventChannel::new`
        // (live, or retired with its memory kept).
        (!channel.is_null() && unsafe { EventChannel::from_ibv(channel) }.is_private())
            .then_some(channel)
    }

    /// Sends the id's events, from now on, to `channel` (NULL: a new
    /// channel of its own, which makes it synchronous), moving those not
    /// yet read there. A synchronous id's old channel is destroyed, with
    /// its stored event acknowledged (rdma-core's `rdma_migrate_id`).
    pub(super) fn set_channel(&mut self, channel: *mut RdmaEventChannel) -> Result<(), c_int> {
        let channel = if channel.is_null() {
            EventChannel::publish(EventChannel::private()?)
        } else {
            channel
        };
        // SAFETY: a channel made by `EventChannel::new`, live.
        let target = unsafe { EventChannel::from_ibv(channel) }.queue().clone();
        {
            let mut queue = self.shared.queue();
            let moved = match &*queue {
                Some(old) => old.remove_about(&self.shared.liveness),
                None => Vec::new(),
            };
            for event in moved {
                target.post(event);
            }
            *queue = Some(target);
        }
        if let Some(own) = self.sync_channel() {
            self.acknowledge_stored();
            EventChannel::destroy(own);
        }
        self.ibv.channel = channel;
        Ok(())
    }

    /// Acknowledges the event a synchronous operation stored in the id's
    /// `event`, if any.
    pub(super) fn acknowledge_stored(&mut self) {
        // SAFETY: the id, borrowed mutably.
        unsafe { acknowledge_stored_at(self) };
    }

    /// Attaches the id to the device: its `verbs` and port.
    pub(super) fn attach(&mut self) -> Result<(), c_int> {
        self.ibv.verbs = shared_context()?;
        self.ibv.port_num = limits::PORT_NUM;
        // SAFETY: `ibaddr.sgid` is a plain 16-octet field of the id.
        self.ibv.route.addr.ibaddr.sgid = IbvGid { raw: limits::gid() };
        Ok(())
    }

    pub(super) fn set_source(&mut self, addr: SocketAddr) {
        self.ibv.route.addr.src_storage = to_sockaddr(addr).0;
    }

    pub(super) fn set_destination(&mut self, addr: SocketAddr) {
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
    pub(super) fn queue_pair(&self, qp_num: u32) -> Option<QueuePair> {
        if self.ibv.qp.is_null() {
            return (qp_num != 0).then(|| queue_pair_numbered(qp_num)).flatten();
        }
        // SAFETY: `qp` is the live queue pair of this id.
        Some(unsafe { Qp::from_ibv(self.ibv.qp) }.qp.clone())
    }
}

/// Acknowledges the event a synchronous operation stored in the `event`
/// of the id at `id`, if any, writing that field alone (other threads may
/// read the rest of the id meanwhile).
///
/// # Safety
///
/// `id` is a live (or retired) id; no other thread uses its `event`.
unsafe fn acknowledge_stored_at(id: *mut Id) {
    // SAFETY: the caller's promise.
    let stored = unsafe { ptr::replace(&raw mut (*id).ibv.event, ptr::null_mut()) };
    if !stored.is_null() {
        // SAFETY: an event handed out into `event` and not acknowledged by
        // the application (rdma-core's contract: the library acknowledges
        // it).
        unsafe { acknowledge(stored) };
    }
}

/// Writes an established connection's addresses into the id at `id`
/// (from the thread that takes its `ESTABLISHED`): its route's two
/// addresses and nothing else, for other threads may read the rest of the
/// id meanwhile (`rdma_destroy_id`, waiting for this event; the
/// application, its `context`).
pub(super) fn set_addresses(id: *mut RdmaCmId, local: SocketAddr, peer: SocketAddr) {
    // SAFETY: the id is alive while the event that carries this is held,
    // and only the taking thread writes its route now.
    unsafe {
        (&raw mut (*id).route.addr.src_storage).write(to_sockaddr(local).0);
        (&raw mut (*id).route.addr.dst_storage).write(to_sockaddr(peer).0);
    }
}

/// Runs `body` on the live id `id`, answering -1 with `errno` `EINVAL` for
/// NULL or an id not alive ([`is_live`]) and -1 with `EIO` for a panic;
/// `body` answers 0 (or [`STARTED_SYNC`]) or an `errno`.
///
/// # Safety
///
/// `id` is not used by another thread while `body` runs.
pub(super) unsafe fn with_id(
    id: *mut RdmaCmId,
    body: impl FnOnce(&mut Id) -> Result<c_int, c_int>,
) -> c_int {
    guard(-1, || {
        if !is_live(id) {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller promises a live id.
        let live = unsafe { Id::from_ibv(id) };
        if live.is_foreign() {
            set_errno(libc::ENODEV);
            return -1;
        }
        match body(live) {
            Ok(answer) => answer,
            Err(errno) => {
                set_errno(errno);
                -1
            }
        }
    })
}

/// What an operation that posts its own event answers when the id is
/// synchronous: [`complete`] must wait for that event.
pub(super) const STARTED_SYNC: c_int = TAKE_NOTHING;

/// What the operation's start answered (`started`: 0, -1 with `errno`
/// set, or [`STARTED_SYNC`]) made final: a synchronous id waits for the
/// next event on its own channel and keeps it in its `event` until its
/// next operation (rdma-core's `ucma_complete`): 0, or -1 with `errno`
/// from the event's status (`ECONNREFUSED` for `REJECTED`), `EINTR` when a
/// signal without `SA_RESTART` interrupts the wait. A thread cancelled
/// while it waits unwinds through it ([`take_or_wait`]).
///
/// # Safety
///
/// `id` is not used by another thread meanwhile.
pub(super) unsafe extern "C" fn complete(id: *mut RdmaCmId, started: c_int) -> c_int {
    if started != STARTED_SYNC {
        return started;
    }
    let mut args = id;
    // SAFETY: `take_completion` takes this argument.
    unsafe { take_or_wait(take_completion, (&raw mut args).cast()) }
}

/// [`complete`]'s look at a synchronous id's channel (`args`: the id):
/// the stored event acknowledged, the next one stored and its status
/// answered (0, or -1 with `errno`), or [`TAKE_NOTHING`] with the
/// descriptor to wait on.
///
/// # Safety
///
/// `args` points at the id, as [`complete`] has it; `fd` is writable.
unsafe extern "C" fn take_completion(args: *mut c_void, fd: *mut c_int) -> c_int {
    // SAFETY: the caller's promise.
    let id = unsafe { *args.cast::<*mut RdmaCmId>() };
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            id.acknowledge_stored();
            let channel = id.sync_channel().ok_or(libc::EINVAL)?;
            let queue = EventChannel::from_ibv(channel).queue();
            if queue.is_foreign() {
                return Err(libc::ENODEV);
            }
            let Some(event) = take_from(queue) else {
                fd.write(queue.fd());
                return Ok(TAKE_NOTHING);
            };
            id.ibv.event = event;
            status_of(&*event).map(|()| 0)
        })
    }
}

/// What a synchronous operation answers for its event (rdma-core's
/// `ucma_complete`): `Ok` for status 0, else the `errno`.
pub(super) fn status_of(event: &RdmaCmEvent) -> Result<(), c_int> {
    match event.status {
        0 => Ok(()),
        _ if event.event == RDMA_CM_EVENT_REJECTED => Err(libc::ECONNREFUSED),
        status => Err(status.abs()),
    }
}

/// `rdma_create_id`: a new id on `channel` (NULL: synchronous: its
/// operations return when done, and its `channel` is its own). 0, or -1
/// with `errno` set.
///
/// # Safety
///
/// `channel` is NULL or a channel `rdma_create_event_channel` made; `id`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut RdmaEventChannel,
    id: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    guard(-1, || {
        if id.is_null() || !(channel.is_null() || events::is_live(channel)) {
            return fail(libc::EINVAL);
        }
        if ps != RDMA_PS_TCP {
            return fail(libc::EPROTONOSUPPORT);
        }
        let mut made = Id::unpublished(context);
        if let Err(errno) = made.set_channel(channel) {
            return fail(errno);
        }
        // SAFETY: the caller promises `id` is writable.
        unsafe { id.write(Id::publish(made)) };
        0
    })
}

/// `rdma_destroy_id`, as rdma-core's: acknowledges a synchronous id's
/// stored event, drops the id's unread events (rejecting the requests
/// among a listener's), waits until the application has acknowledged
/// every event counted against the id, stops what the id does (a
/// listener closes, an undecided request is rejected, a connection not
/// being closed gracefully is aborted, so its peer hears of it), and frees
/// it. 0, or -1 with `errno` `EINVAL` for an id not alive.
///
/// # Safety
///
/// `id` is NULL or an id made by `rdma_create_id` or a connection
/// request, its queue pair already destroyed.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut RdmaCmId) -> c_int {
    guard(-1, || {
        if !LIVE_IDS.remove(id) {
            return fail(libc::EINVAL);
        }
        let live = id.cast::<Id>();
        // Until the application has acknowledged the id's events it
        // holds, its threads may still read the id through them (an
        // event's `id`, and what its `context` names): until then the id
        // is only read here, and its stored event written, never borrowed
        // whole.
        // SAFETY: a live id, boxed as an `Id`; one field read.
        if unsafe { (*live).generation } != uwarp::fork_generation() {
            // A copy of the parent's id, in a child of fork: forgotten,
            // not torn down (its locks may be held for good).
            return 0;
        }
        // SAFETY: as above; a synchronous id's stored event is this
        // thread's to acknowledge (rdma-core's contract).
        unsafe { acknowledge_stored_at(live) };
        // SAFETY: as above; a shared borrow of the part library threads
        // share.
        let shared = unsafe { &(*live).shared }.clone();
        let unread = {
            let mut queue = shared.queue();
            shared.liveness.mark_destroyed();
            queue
                .take()
                .map(|queue| queue.remove_about(&shared.liveness))
        };
        drop(unread);
        shared.liveness.wait_released();
        // SAFETY: a live id, boxed as an `Id`, ours alone now that no
        // event names it.
        let owned = unsafe { Box::from_raw(live) };
        let role = std::mem::replace(&mut *owned.shared.role(), Role::Idle);
        match role {
            // The port is closed when `stop` returns; the thread wakes
            // and ends.
            Role::Listening(listener, thread) => {
                listener.stop();
                thread.join();
            }
            Role::Connected {
                qp,
                disconnecting: false,
            } => qp.abort(),
            _ => {}
        }
        if let Some(own) = owned.sync_channel() {
            EventChannel::destroy(own);
        }
        LIVE_IDS.retire(owned);
        0
    })
}

/// `rdma_migrate_id`: moves the id's events, those not yet read and those
/// to come, to `channel`; NULL makes it synchronous on a channel of its
/// own, and a synchronous id migrated to a channel becomes asynchronous
/// (its own channel destroyed). Then waits until the application has
/// acknowledged every event of the id it holds, as rdma-core does. 0, or
/// -1 with `errno` `EINVAL` (an id or channel not alive, a synchronous id
/// migrated to NULL).
///
/// # Safety
///
/// `id` is NULL or live; `channel` is NULL or a channel
/// `rdma_create_event_channel` made.
#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut RdmaCmId,
    channel: *mut RdmaEventChannel,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            let to_own = channel.is_null();
            if (to_own && id.is_sync()) || !(to_own || events::is_live(channel)) {
                return Err(libc::EINVAL);
            }
            id.set_channel(channel)?;
            id.shared.liveness.wait_released();
            Ok(0)
        })
    }
}

/// `RDMA_OPTION_ID`: the id-level options.
const RDMA_OPTION_ID: c_int = 0;
/// `RDMA_OPTION_ID_AFONLY`: an IPv6 id takes IPv6 connections only.
const RDMA_OPTION_ID_AFONLY: c_int = 2;

/// `rdma_set_option`: `RDMA_OPTION_ID_AFONLY` (an `int`, before
/// `rdma_bind_addr`) makes the id's IPv6 listener take IPv6 connections
/// only, so that it shares a port with an IPv4 listener (tgt's iSER
/// target listens on `0.0.0.0` and `[::]` at one port); without it an
/// IPv6 listener takes both families, as the kernel's connection manager
/// does by default. The other id-level options (`_TOS`, `_REUSEADDR`,
/// `_ACK_TIMEOUT`) are accepted and have no effect on uwarp's TCP; the
/// InfiniBand path option is `ENOSYS`. 0, or -1 with `errno` set (`EINVAL`
/// for an option value of the wrong size).
///
/// # Safety
///
/// `id` is NULL or live; `optval` is NULL or readable for `optlen`
/// octets.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut RdmaCmId,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    // SAFETY: forwarded; the caller promises `optlen` readable octets.
    unsafe {
        with_id(id, |id| match (level, optname) {
            (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => {
                if optval.is_null() || optlen != size_of::<c_int>() {
                    return Err(libc::EINVAL);
                }
                let only = optval.cast::<c_int>().read_unaligned() != 0;
                id.listen_options.af_only = Some(only);
                Ok(0)
            }
            (RDMA_OPTION_ID, 0..=3) => Ok(0),
            _ => Err(libc::ENOSYS),
        })
    }
}

/// A port of the live id `id` (big-endian), 0 for an id not alive or
/// without that address.
///
/// # Safety
///
/// `id` is not used by another thread meanwhile.
unsafe fn port_of(id: *mut RdmaCmId, address: fn(&Id) -> Option<SocketAddr>) -> u16 {
    guard(0, || {
        if !is_live(id) {
            return 0;
        }
        // SAFETY: a live id.
        address(unsafe { Id::from_ibv(id) }).map_or(0, |addr| addr.port().to_be())
    })
}

/// `rdma_get_src_port`: the id's local port (big-endian); 0 for an id not
/// alive.
///
/// # Safety
///
/// `id` is NULL or an id made by `rdma_create_id` or a request.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    // SAFETY: forwarded.
    unsafe { port_of(id, Id::source) }
}

/// `rdma_get_dst_port`: the id's peer port (big-endian); 0 for an id not
/// alive.
///
/// # Safety
///
/// `id` is NULL or an id made by `rdma_create_id` or a request.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    // SAFETY: forwarded.
    unsafe { port_of(id, Id::destination) }
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
    // SAFETY: forwarded; `attr` and `mask` are the caller's, checked.
    unsafe {
        with_id(id, |_| {
            if attr.is_null() || mask.is_null() {
                return Err(libc::EINVAL);
            }
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
    rdma_migrate_id => "RDMACM_1.0",
    rdma_set_option => "RDMACM_1.0",
    rdma_get_src_port => "RDMACM_1.0",
    rdma_get_dst_port => "RDMACM_1.0",
    rdma_init_qp_attr => "RDMACM_1.2",
}
