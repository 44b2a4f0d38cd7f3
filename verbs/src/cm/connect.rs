//! Connecting: `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`,
//! `rdma_accept`, `rdma_reject`, `rdma_disconnect`, `rdma_establish`, and
//! the thread that watches a connection until it ends.
//!
//! Each operation posts its event; a synchronous id's operation then
//! waits for it (`id::complete`). uwarp's own connect is synchronous, so
//! `rdma_connect` runs it on a library thread.

use core::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use uwarp::{ConnectParams, Connection, Error, LocalParams, QpEvent, QpState, QueuePair, RtrSet};

use super::events::{Event, SetAddresses};
use super::id::{complete, with_id, Id, Role, Shared};
use super::listen::LISTEN_POLL;
use crate::abi::cm::*;
use crate::async_events;
use crate::export::{errno_of, symbol_versions};
use crate::limits;
use crate::provider;

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
    // SAFETY: forwarded.
    unsafe {
        let started = start_resolve_addr(id, src, dst);
        complete(id, started)
    }
}

/// [`rdma_resolve_addr`]'s work before a synchronous id's wait.
///
/// # Safety
///
/// As [`rdma_resolve_addr`].
unsafe extern "C" fn start_resolve_addr(
    id: *mut RdmaCmId,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
) -> c_int {
    // SAFETY: forwarded; the caller promises socket addresses or NULL.
    unsafe {
        with_id(id, |id| {
            let (src, dst) = (
                super::addrinfo::from_sockaddr(src),
                super::addrinfo::from_sockaddr(dst),
            );
            let dst = dst.ok_or(libc::EINVAL)?;
            // Opened first: on the DPDK transport, the source is its own.
            provider::device()?;
            let source = match (src, provider::own_address()) {
                (Some(src), _) => src,
                (None, Some(own)) => SocketAddr::new(own, 0),
                (None, None) => route_source(dst)?,
            };
            *id.shared.role() = Role::Resolved(dst);
            id.attach()?;
            id.set_source(SocketAddr::new(source.ip(), 0));
            id.set_destination(dst);
            id.shared
                .post(RDMA_CM_EVENT_ADDR_RESOLVED, 0, Vec::new(), (0, 0));
            Ok(id.started())
        })
    }
}

/// The local address the kernel's route to `dst` leaves from.
fn route_source(dst: SocketAddr) -> Result<SocketAddr, c_int> {
    let errno = |e: std::io::Error, or| e.raw_os_error().unwrap_or(or);
    let unspecified = match dst {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    };
    let any = SocketAddr::new(unspecified, 0);
    let probe = UdpSocket::bind(any).map_err(|e| errno(e, libc::EIO))?;
    probe
        .connect(dst)
        .map_err(|e| errno(e, libc::ENETUNREACH))?;
    probe.local_addr().map_err(|e| errno(e, libc::EIO))
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
        let started = start_resolve_route(id);
        complete(id, started)
    }
}

/// [`rdma_resolve_route`]'s work before a synchronous id's wait.
///
/// # Safety
///
/// As [`rdma_resolve_route`].
unsafe extern "C" fn start_resolve_route(id: *mut RdmaCmId) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        with_id(id, |id| {
            if !matches!(*id.shared.role(), Role::Resolved(_)) {
                return Err(libc::EINVAL);
            }
            id.shared
                .post(RDMA_CM_EVENT_ROUTE_RESOLVED, 0, Vec::new(), (0, 0));
            Ok(id.started())
        })
    }
}

/// The private data a connection parameter carries.
///
/// # Safety
///
/// `param` is NULL or readable, its private data readable for its length.
pub(super) unsafe fn private_data(param: Option<&RdmaConnParam>) -> Vec<u8> {
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
pub(super) const DEFAULT_IRD_ORD: (u16, u16) =
    (limits::MAX_RD_ATOM as u16, limits::MAX_RD_ATOM as u16);

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

/// A count as the connection manager's one-octet fields carry it.
pub(super) fn clamp(value: u16) -> u8 {
    u8::try_from(value).unwrap_or(u8::MAX)
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
/// `-ECONNRESET`.) An id destroyed while it connects has its connection
/// aborted once it is made, so the peer hears of it.
///
/// # Safety
///
/// `id` is NULL or live; `param` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        let started = start_connect(id, param);
        complete(id, started)
    }
}

/// [`rdma_connect`]'s work before a synchronous id's wait.
///
/// # Safety
///
/// As [`rdma_connect`].
unsafe extern "C" fn start_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // SAFETY: forwarded; the caller promises NULL or a readable parameter.
    unsafe {
        with_id(id, |id| {
            let (mpa, qp_num) = connection_params(param);
            let qp = id.queue_pair(qp_num).ok_or(libc::EINVAL)?;
            let dst = match *id.shared.role() {
                Role::Resolved(dst) => dst,
                _ => return Err(libc::EINVAL),
            };
            *id.shared.role() = Role::Connected {
                qp: qp.clone(),
                disconnecting: false,
            };
            let shared = id.shared.clone();
            provider::spawn("uwarp-cm-connect", move || connect(&shared, dst, &qp, mpa))
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            Ok(id.started())
        })
    }
}

/// A connect's thread: connects `qp` to `dst` and posts the outcome; an
/// established connection is then watched until it ends.
fn connect(shared: &Shared, dst: SocketAddr, qp: &QueuePair, mpa: LocalParams) {
    let device = match provider::device() {
        Ok(device) => device,
        Err(errno) => return shared.post(RDMA_CM_EVENT_CONNECT_ERROR, -errno, Vec::new(), (0, 0)),
    };
    let params = ConnectParams {
        mpa,
        first_fpdu_delay: provider::first_fpdu_delay(),
        ..ConnectParams::default()
    };
    match device.connect(dst, qp, params) {
        Ok(_) if shared.liveness.is_destroyed() => qp.abort(),
        Ok(connection) => {
            established(shared, &connection, connection.private_data.clone());
            watch(shared, qp);
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

/// Posts `ESTABLISHED` for an established connection, carrying its
/// addresses into the id when the event is taken.
fn established(shared: &Shared, connection: &Connection, private_data: Vec<u8>) {
    let event = Event::new(
        shared.c_id as *mut RdmaCmId,
        shared.liveness.clone(),
        RDMA_CM_EVENT_ESTABLISHED,
        0,
        private_data,
        negotiated(connection),
    );
    shared.post_event(event.on_hand_out(Box::new(SetAddresses {
        local: connection.local_addr,
        peer: connection.peer_addr,
    })));
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
    // SAFETY: forwarded.
    unsafe {
        let started = start_accept(id, param);
        complete(id, started)
    }
}

/// [`rdma_accept`]'s work before a synchronous id's wait.
///
/// # Safety
///
/// As [`rdma_accept`].
unsafe extern "C" fn start_accept(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // SAFETY: forwarded; the caller promises NULL or a readable parameter.
    unsafe {
        with_id(id, |id| {
            let (mpa, qp_num) = connection_params(param);
            let qp = id.queue_pair(qp_num).ok_or(libc::EINVAL)?;
            let connected = Role::Connected {
                qp: qp.clone(),
                disconnecting: false,
            };
            let request = match std::mem::replace(&mut *id.shared.role(), connected) {
                Role::Requested(request) => request,
                other => {
                    *id.shared.role() = other;
                    return Err(libc::EINVAL);
                }
            };
            let connection = request.accept(&qp, mpa).map_err(|e| errno_of(&e))?;
            established(&id.shared, &connection, Vec::new());
            let shared = id.shared.clone();
            provider::spawn("uwarp-cm-watch", move || watch(&shared, &qp))
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
            Ok(id.started())
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
pub unsafe extern "C" fn rdma_reject(
    id: *mut RdmaCmId,
    data: *const core::ffi::c_void,
    len: u8,
) -> c_int {
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
    // SAFETY: forwarded; the caller promises `len` readable octets at
    // `data`.
    unsafe {
        with_id(id, |id| {
            let octets = private_data(Some(&param));
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
        with_id(id, |id| match &mut *id.shared.role() {
            Role::Connected { qp, disconnecting } => {
                *disconnecting = true;
                qp.disconnect();
                Ok(0)
            }
            _ => Err(libc::EINVAL),
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
    unsafe { with_id(id, |_: &mut Id| Ok(0)) }
}

/// `rdma_notify`: tells the connection manager that the program saw an
/// asynchronous event on the id's queue pair, which InfiniBand uses to
/// complete a connection; on iWARP it does nothing and answers 0, as the
/// kernel's does (tgt's iSER target calls it on every connection). -1 with
/// `errno` `EINVAL` for an id not alive.
///
/// # Safety
///
/// `id` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn rdma_notify(id: *mut RdmaCmId, _event: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { with_id(id, |_: &mut Id| Ok(0)) }
}

symbol_versions! {
    rdma_notify => "RDMACM_1.0",
    rdma_resolve_addr => "RDMACM_1.0",
    rdma_resolve_route => "RDMACM_1.0",
    rdma_connect => "RDMACM_1.0",
    rdma_accept => "RDMACM_1.0",
    rdma_reject => "RDMACM_1.0",
    rdma_disconnect => "RDMACM_1.0",
    rdma_establish => "RDMACM_1.2",
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::addrinfo::to_sockaddr;
    use crate::cm::events::{
        rdma_ack_cm_event, rdma_create_event_channel, rdma_destroy_event_channel, rdma_get_cm_event,
    };
    use crate::cm::id::{rdma_create_id, rdma_destroy_id, rdma_get_dst_port, rdma_get_src_port};

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

    /// Takes the next event on `channel`, of type `kind` and status 0;
    /// its private data, after `check` has looked at the id (while the
    /// event is held), acknowledged.
    fn take(
        channel: *mut RdmaEventChannel,
        kind: c_int,
        check: impl FnOnce(*mut RdmaCmId),
    ) -> Vec<u8> {
        let mut event = core::ptr::null_mut();
        // SAFETY: a live channel holding an event (no wait); `event` is
        // writable.
        assert_eq!(unsafe { rdma_get_cm_event(channel, &mut event) }, 0);
        // SAFETY: an event handed out and not acknowledged.
        let taken = unsafe { &*event };
        assert_eq!((taken.event, taken.status), (kind, 0));
        check(taken.id);
        let private_data = taken.conn.private_data;
        let len = usize::from(taken.conn.private_data_len);
        let octets = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the event's private data, alive while it is held.
            unsafe { core::slice::from_raw_parts(private_data.cast::<u8>(), len) }.to_vec()
        };
        // SAFETY: handed out above, acknowledged once.
        assert_eq!(unsafe { rdma_ack_cm_event(event) }, 0);
        octets
    }

    /// The ports `rdma_get_src_port` and `rdma_get_dst_port` answer for
    /// `id`, in host order.
    fn ports(id: *mut RdmaCmId) -> (u16, u16) {
        // SAFETY: a live id.
        let (src, dst) = unsafe { (rdma_get_src_port(id), rdma_get_dst_port(id)) };
        (u16::from_be(src), u16::from_be(dst))
    }

    /// Issue 38 row 20: the connect thread, once uwarp has connected, ran
    /// [`established`] on an id the application still holds and reads
    /// (its threads may call the id's verbs or read its fields while
    /// `rdma_connect` is in progress). Before the fix it made a `&mut
    /// Id` from the id's address and wrote the connection's addresses into
    /// the route, on its own thread: Miri reports the data race with the
    /// application's reads ("Data race detected between (1) retag write
    /// on thread `cm::connect::te` and (2) retag write of type
    /// `cm::id::Id`", or, on some seeds, the `&mut` made under the
    /// application's protected borrow), and natively the route changes
    /// before `ESTABLISHED` is taken. Now no library thread writes the
    /// id: the addresses travel in the `ESTABLISHED` event and are
    /// written by the thread that takes it, as rdma-core writes them in
    /// `rdma_get_cm_event`.
    ///
    /// The id is resolved with the exported verbs; [`established`] runs on
    /// a thread of its own, as `rdma_connect`'s thread runs it, with the
    /// part of the id that thread is given (a device without a transport
    /// cannot connect).
    #[test]
    fn the_connect_thread_leaves_the_id_to_the_application() {
        let src: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let dst: SocketAddr = "192.0.2.2:4420".parse().unwrap();
        let local: SocketAddr = "192.0.2.1:50000".parse().unwrap();
        let channel = rdma_create_event_channel();
        assert!(!channel.is_null());
        let mut id = core::ptr::null_mut();
        // SAFETY: a live channel; `id` is writable.
        let created =
            unsafe { rdma_create_id(channel, &mut id, core::ptr::null_mut(), RDMA_PS_TCP) };
        assert_eq!(created, 0);
        let (mut src_c, _) = to_sockaddr(src);
        let (mut dst_c, _) = to_sockaddr(dst);
        // SAFETY: a live id; socket addresses.
        let resolved = unsafe {
            rdma_resolve_addr(id, (&raw mut src_c).cast(), (&raw mut dst_c).cast(), 1000)
        };
        assert_eq!(resolved, 0);
        take(channel, RDMA_CM_EVENT_ADDR_RESOLVED, |_| ());
        // SAFETY: a live, resolved id.
        assert_eq!(unsafe { rdma_resolve_route(id, 1000) }, 0);
        take(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, |_| ());
        assert_eq!(ports(id), (0, 4420));

        let connection = Connection {
            negotiated: uwarp::Negotiated {
                revision: uwarp_stack::wire::mpa::Revision::Enhanced,
                crc: true,
                markers_tx: false,
                markers_rx: false,
                ird: 4,
                ord: 2,
                peer_ird: Some(2),
                peer_ord: Some(4),
                rtr: None,
            },
            private_data: b"reply".to_vec(),
            local_addr: local,
            peer_addr: dst,
            mulpdu: 1024,
        };
        // What `rdma_connect` gives its thread: the part of the id that
        // library threads share.
        // SAFETY: a live id, used by no other thread now.
        let library = unsafe { Id::from_ibv(id) }.shared.clone();
        std::thread::scope(|scope| {
            scope.spawn(|| established(&library, &connection, connection.private_data.clone()));
            // The application reads its id meanwhile: the route is still
            // the resolved one.
            for _ in 0..4 {
                assert_eq!(ports(id), (0, 4420));
            }
        });
        assert_eq!(ports(id), (0, 4420), "ESTABLISHED not taken yet");
        let private_data = take(channel, RDMA_CM_EVENT_ESTABLISHED, |about| {
            assert_eq!(about, id);
            assert_eq!(ports(about), (50000, 4420));
        });
        assert_eq!(private_data, b"reply");
        // SAFETY: live, and no thread uses them any more.
        unsafe {
            assert_eq!(rdma_destroy_id(id), 0);
            rdma_destroy_event_channel(channel);
        }
    }
}
