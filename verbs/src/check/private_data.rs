//! The private data and IRD/ORD of `rdma_connect`, `rdma_accept` and
//! `rdma_reject` from fuzz input, carried over a real connection on the
//! loopback interface to a listener of the same process.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Mutex, OnceLock};

use super::{errno, verbs, Input};
use crate::abi::cm::*;
use crate::abi::verbs::*;
use crate::cm::addrinfo::to_sockaddr;
use crate::cm::connect::*;
use crate::cm::events::{
    rdma_ack_cm_event, rdma_create_event_channel, rdma_destroy_event_channel, rdma_get_cm_event,
};
use crate::cm::id::*;
use crate::cm::listen::*;
use crate::qp::ibv_destroy_qp;

/// Connects to a listener of this process with the private data, IRD and
/// ORD `data` gives, and accepts or rejects the request with the private
/// data it gives too; checks that each side receives the octets the
/// other passed (none for a NULL pointer or a length of 0), in the event
/// the connection manager documents (`CONNECT_REQUEST` on the listener's
/// channel; `ESTABLISHED` or `REJECTED` with `-ECONNREFUSED` on the
/// connecting side's), and that `rdma_connect` without parameters (so
/// without a queue pair) fails with `EINVAL`. Each pointer is valid for
/// exactly its length. Panics otherwise.
///
/// The input: a settings octet (bit 0: accept, else reject; bit 1:
/// connect without parameters); then the connection's private data and
/// the reply's (see `PrivateData::read`), each followed by the IRD and
/// ORD to pass (an octet each).
///
/// Runs one input at a time (the listener is the process's), and opens a
/// TCP connection for each.
pub fn private_data(data: &[u8]) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let listener = Listener::get();
    let mut input = Input(data);
    let settings = input.u8();
    let connect = PrivateData::read(&mut input);
    let reply = PrivateData::read(&mut input);
    let (channel, id) = resolved(listener.addr);
    let (qp, _) = verbs()
        .create_qp(default_cap(), ptr::null_mut())
        .expect("a queue pair");
    let mut param = connect.param(qp);
    let param_ptr = if settings & 2 != 0 {
        ptr::null_mut()
    } else {
        &raw mut param
    };
    // SAFETY: a live id, and NULL or parameters whose private data are
    // readable for their length.
    let answer = unsafe { rdma_connect(id, param_ptr) };
    if param_ptr.is_null() {
        assert_eq!(
            (answer, errno()),
            (-1, libc::EINVAL),
            "rdma_connect without a queue pair"
        );
    } else {
        assert_eq!(answer, 0, "rdma_connect: errno {}", errno());
        let (request, child) = take(listener.channel(), RDMA_CM_EVENT_CONNECT_REQUEST, 0);
        assert_eq!(request, connect.sent(), "the request's private data");
        let child_qp = if settings & 1 != 0 {
            let (child_qp, _) = verbs()
                .create_qp(default_cap(), ptr::null_mut())
                .expect("a queue pair");
            let mut param = reply.param(child_qp);
            // SAFETY: the request's live id, and parameters as above.
            let accepted = unsafe { rdma_accept(child, &mut param) };
            assert_eq!(accepted, 0, "rdma_accept: errno {}", errno());
            take(listener.channel(), RDMA_CM_EVENT_ESTABLISHED, 0);
            let (established, _) = take(channel, RDMA_CM_EVENT_ESTABLISHED, 0);
            assert_eq!(
                established,
                reply.sent(),
                "the accepting reply's private data"
            );
            child_qp
        } else {
            // SAFETY: the request's live id, and private data readable
            // for their length.
            let rejected = unsafe { rdma_reject(child, reply.pointer(), reply.len) };
            assert_eq!(rejected, 0, "rdma_reject: errno {}", errno());
            let (rejection, _) = take(channel, RDMA_CM_EVENT_REJECTED, -libc::ECONNREFUSED);
            assert_eq!(
                rejection,
                reply.sent(),
                "the rejecting reply's private data"
            );
            ptr::null_mut()
        };
        destroy(child, child_qp);
    }
    destroy(id, qp);
    // SAFETY: the channel `resolved` made, its id destroyed.
    unsafe { rdma_destroy_event_channel(channel) };
}

/// Private data as an application passes them: the octets (exactly
/// `len` of them), and whether the pointer is NULL.
struct PrivateData {
    octets: Box<[u8]>,
    len: u8,
    null: bool,
    /// The IRD and ORD passed with them.
    ird_ord: (u8, u8),
}

impl PrivateData {
    /// Reads private data: an octet whose bit 7 makes the pointer NULL
    /// and whose other bits, times 2, are the length (0 to 254), the
    /// octets, then the IRD and ORD (an octet each).
    fn read(input: &mut Input<'_>) -> PrivateData {
        let head = input.u8();
        let len = (head & 0x7f) * 2;
        PrivateData {
            octets: input.bytes(usize::from(len)).into_boxed_slice(),
            len,
            null: head & 0x80 != 0,
            ird_ord: (input.u8(), input.u8()),
        }
    }

    fn pointer(&self) -> *const c_void {
        if self.null {
            ptr::null()
        } else {
            self.octets.as_ptr().cast()
        }
    }

    /// What the other side must receive.
    fn sent(&self) -> &[u8] {
        if self.null {
            &[]
        } else {
            &self.octets
        }
    }

    /// A connection parameter with these private data and `qp`.
    fn param(&self, qp: *mut IbvQp) -> RdmaConnParam {
        RdmaConnParam {
            private_data: self.pointer(),
            private_data_len: self.len,
            responder_resources: self.ird_ord.0,
            initiator_depth: self.ird_ord.1,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            // SAFETY: a live queue pair.
            qp_num: unsafe { (*qp).qp_num },
        }
    }
}

fn default_cap() -> IbvQpCap {
    IbvQpCap {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// The process's listening id, on the loopback interface, made once.
struct Listener {
    channel: usize,
    addr: SocketAddr,
}

impl Listener {
    fn get() -> &'static Listener {
        static LISTENER: OnceLock<Listener> = OnceLock::new();
        LISTENER.get_or_init(|| {
            let channel = rdma_create_event_channel();
            assert!(!channel.is_null(), "rdma_create_event_channel");
            let mut id = ptr::null_mut();
            let (mut addr, _) = to_sockaddr(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
            // SAFETY: a live channel, a writable id, then that id and a
            // socket address; the id is never destroyed.
            let port = unsafe {
                assert_eq!(
                    rdma_create_id(channel, &mut id, ptr::null_mut(), RDMA_PS_TCP),
                    0
                );
                assert_eq!(rdma_bind_addr(id, ptr::from_mut(&mut addr).cast()), 0);
                assert_eq!(rdma_listen(id, 16), 0);
                u16::from_be(rdma_get_src_port(id))
            };
            Listener {
                channel: channel as usize,
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            }
        })
    }

    fn channel(&self) -> *mut RdmaEventChannel {
        self.channel as *mut RdmaEventChannel
    }
}

/// A new channel and an id on it, its address and route resolved to
/// `addr`.
fn resolved(addr: SocketAddr) -> (*mut RdmaEventChannel, *mut RdmaCmId) {
    let channel = rdma_create_event_channel();
    assert!(!channel.is_null(), "rdma_create_event_channel");
    let mut id = ptr::null_mut();
    let (mut dst, _) = to_sockaddr(addr);
    // SAFETY: a live channel, a writable id, then that id and a socket
    // address.
    unsafe {
        assert_eq!(
            rdma_create_id(channel, &mut id, ptr::null_mut(), RDMA_PS_TCP),
            0
        );
        assert_eq!(
            rdma_resolve_addr(id, ptr::null_mut(), ptr::from_mut(&mut dst).cast(), 1000),
            0
        );
    }
    take(channel, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    // SAFETY: the id made above.
    assert_eq!(unsafe { rdma_resolve_route(id, 1000) }, 0);
    take(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    (channel, id)
}

/// Waits for the next event on `channel` (again after a signal
/// interrupted the wait: libFuzzer's timer, for one, is installed without
/// `SA_RESTART`), checks it is of type `kind` with `status`, acknowledges
/// it, and returns its private data and id.
fn take(channel: *mut RdmaEventChannel, kind: c_int, status: c_int) -> (Vec<u8>, *mut RdmaCmId) {
    let mut event = ptr::null_mut();
    // SAFETY: a live channel and a writable pointer.
    while unsafe { rdma_get_cm_event(channel, &mut event) } != 0 {
        assert_eq!(errno(), libc::EINTR, "rdma_get_cm_event");
    }
    // SAFETY: the event taken, alive until acknowledged below.
    let taken = unsafe { &*event };
    assert_eq!((taken.event, taken.status), (kind, status), "the event");
    let conn = &taken.conn;
    let private_data = if conn.private_data_len == 0 {
        Vec::new()
    } else {
        assert!(
            !conn.private_data.is_null(),
            "a length without private data"
        );
        // SAFETY: the event's private data, of its length.
        unsafe {
            core::slice::from_raw_parts(
                conn.private_data.cast::<u8>(),
                usize::from(conn.private_data_len),
            )
        }
        .to_vec()
    };
    let id = taken.id;
    // SAFETY: the event taken above, acknowledged once.
    assert_eq!(unsafe { rdma_ack_cm_event(event) }, 0);
    (private_data, id)
}

/// Destroys `qp` (unless NULL; aborting its connection) and then `id`.
fn destroy(id: *mut RdmaCmId, qp: *mut IbvQp) {
    if !qp.is_null() {
        // SAFETY: a queue pair of this oracle, used no more.
        assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
    }
    // SAFETY: a live id whose events were all acknowledged.
    assert_eq!(unsafe { rdma_destroy_id(id) }, 0);
}
