//! `<rdma/rdma_cma.h>`: the connection manager's identifiers, events,
//! parameters and address information.

use core::ffi::{c_char, c_int, c_void};

use super::verbs::{IbvCompChannel, IbvContext, IbvCq, IbvGid, IbvPd, IbvQp, IbvSrq};

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct RdmaEventChannel {
    /// `fd`: readable when an event is pending.
    pub fd: c_int,
}

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaIbAddr {
    /// `sgid`.
    pub sgid: IbvGid,
    /// `dgid`.
    pub dgid: IbvGid,
    /// `pkey` (big-endian).
    pub pkey: u16,
}

/// `struct rdma_addr`: the source and destination socket addresses (each
/// a `sockaddr_storage` union), and the GIDs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaAddr {
    /// The `src_addr`/`src_sin`/`src_sin6`/`src_storage` union.
    pub src_storage: libc::sockaddr_storage,
    /// The `dst_addr`/`dst_sin`/`dst_sin6`/`dst_storage` union.
    pub dst_storage: libc::sockaddr_storage,
    /// `addr.ibaddr`.
    pub ibaddr: RdmaIbAddr,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaRoute {
    /// `addr`.
    pub addr: RdmaAddr,
    /// `path_rec` (InfiniBand path records: none on iWARP).
    pub path_rec: *mut c_void,
    /// `num_paths`.
    pub num_paths: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct RdmaCmId {
    /// `verbs`: the device context, once the id is bound or resolved.
    pub verbs: *mut IbvContext,
    /// `channel`: where its events go (NULL: a synchronous id).
    pub channel: *mut RdmaEventChannel,
    /// `context`: the application's pointer.
    pub context: *mut c_void,
    /// `qp`: the queue pair `rdma_create_qp` made for it.
    pub qp: *mut IbvQp,
    /// `route`.
    pub route: RdmaRoute,
    /// `ps` (`enum rdma_port_space`).
    pub ps: c_int,
    /// `port_num`.
    pub port_num: u8,
    /// `event`: a synchronous id's last event.
    pub event: *mut RdmaCmEvent,
    /// `send_cq_channel`.
    pub send_cq_channel: *mut IbvCompChannel,
    /// `send_cq`.
    pub send_cq: *mut IbvCq,
    /// `recv_cq_channel`.
    pub recv_cq_channel: *mut IbvCompChannel,
    /// `recv_cq`.
    pub recv_cq: *mut IbvCq,
    /// `srq`.
    pub srq: *mut IbvSrq,
    /// `pd`.
    pub pd: *mut IbvPd,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: c_int,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaConnParam {
    /// `private_data`.
    pub private_data: *const c_void,
    /// `private_data_len`.
    pub private_data_len: u8,
    /// `responder_resources`: the IRD.
    pub responder_resources: u8,
    /// `initiator_depth`: the ORD.
    pub initiator_depth: u8,
    /// `flow_control`.
    pub flow_control: u8,
    /// `retry_count`.
    pub retry_count: u8,
    /// `rnr_retry_count`.
    pub rnr_retry_count: u8,
    /// `srq`.
    pub srq: u8,
    /// `qp_num`.
    pub qp_num: u32,
}

/// `struct rdma_cm_event`; its `param` union is as large as its `ud`
/// member, hence the padding after `conn`.
#[repr(C)]
pub struct RdmaCmEvent {
    /// `id`.
    pub id: *mut RdmaCmId,
    /// `listen_id`: for a connection request, the listening id.
    pub listen_id: *mut RdmaCmId,
    /// `event` (`enum rdma_cm_event_type`).
    pub event: c_int,
    /// `status`: 0, or a negative `errno` value.
    pub status: c_int,
    /// `param.conn`.
    pub conn: RdmaConnParam,
    /// The rest of the `param` union (`ud`).
    pub _param_rest: [u64; 4],
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct RdmaAddrinfo {
    /// `ai_flags`.
    pub ai_flags: c_int,
    /// `ai_family`.
    pub ai_family: c_int,
    /// `ai_qp_type`.
    pub ai_qp_type: c_int,
    /// `ai_port_space`.
    pub ai_port_space: c_int,
    /// `ai_src_len`.
    pub ai_src_len: libc::socklen_t,
    /// `ai_dst_len`.
    pub ai_dst_len: libc::socklen_t,
    /// `ai_src_addr`.
    pub ai_src_addr: *mut libc::sockaddr,
    /// `ai_dst_addr`.
    pub ai_dst_addr: *mut libc::sockaddr,
    /// `ai_src_canonname`.
    pub ai_src_canonname: *mut c_char,
    /// `ai_dst_canonname`.
    pub ai_dst_canonname: *mut c_char,
    /// `ai_route_len`.
    pub ai_route_len: usize,
    /// `ai_route`.
    pub ai_route: *mut c_void,
    /// `ai_connect_len`.
    pub ai_connect_len: usize,
    /// `ai_connect`.
    pub ai_connect: *mut c_void,
    /// `ai_next`.
    pub ai_next: *mut RdmaAddrinfo,
}

impl RdmaAddrinfo {
    /// A reliable-connected entry of the TCP port space with no flags,
    /// family, addresses, names, route, connect data or next entry: the
    /// start of every entry the library makes.
    pub const fn reliable_connected() -> Self {
        RdmaAddrinfo {
            ai_flags: 0,
            ai_family: libc::AF_UNSPEC,
            ai_qp_type: super::verbs::IBV_QPT_RC,
            ai_port_space: RDMA_PS_TCP,
            ai_src_len: 0,
            ai_dst_len: 0,
            ai_src_addr: std::ptr::null_mut(),
            ai_dst_addr: std::ptr::null_mut(),
            ai_src_canonname: std::ptr::null_mut(),
            ai_dst_canonname: std::ptr::null_mut(),
            ai_route_len: 0,
            ai_route: std::ptr::null_mut(),
            ai_connect_len: 0,
            ai_connect: std::ptr::null_mut(),
            ai_next: std::ptr::null_mut(),
        }
    }
}

/// `RDMA_PS_TCP`: the port space of reliable connections.
pub const RDMA_PS_TCP: c_int = 0x0106;
/// `RAI_PASSIVE`: the address is to listen on.
pub const RAI_PASSIVE: c_int = 1;
/// `RAI_NUMERICHOST`: the node is a numeric address, never a name to
/// look up.
pub const RAI_NUMERICHOST: c_int = 2;

/// `RDMA_CM_EVENT_ADDR_RESOLVED` and the other event types.
pub const RDMA_CM_EVENT_ADDR_RESOLVED: c_int = 0;
/// `RDMA_CM_EVENT_ADDR_ERROR`.
pub const RDMA_CM_EVENT_ADDR_ERROR: c_int = 1;
/// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: c_int = 2;
/// `RDMA_CM_EVENT_CONNECT_REQUEST`.
pub const RDMA_CM_EVENT_CONNECT_REQUEST: c_int = 4;
/// `RDMA_CM_EVENT_CONNECT_ERROR`.
pub const RDMA_CM_EVENT_CONNECT_ERROR: c_int = 6;
/// `RDMA_CM_EVENT_UNREACHABLE`.
pub const RDMA_CM_EVENT_UNREACHABLE: c_int = 7;
/// `RDMA_CM_EVENT_REJECTED`.
pub const RDMA_CM_EVENT_REJECTED: c_int = 8;
/// `RDMA_CM_EVENT_ESTABLISHED`.
pub const RDMA_CM_EVENT_ESTABLISHED: c_int = 9;
/// `RDMA_CM_EVENT_DISCONNECTED`.
pub const RDMA_CM_EVENT_DISCONNECTED: c_int = 10;
/// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the last event a connection has.
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: c_int = 15;
