//! `<infiniband/verbs.h>`: the device, context, port and memory types,
//! and the constants uwarp answers with.

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `IBV_SYSFS_NAME_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_PATH_MAX: usize = 256;

/// `IBV_NODE_RNIC`: an RDMA NIC (iWARP).
pub const IBV_NODE_RNIC: c_int = 4;
/// `IBV_TRANSPORT_IWARP`.
pub const IBV_TRANSPORT_IWARP: c_int = 1;
/// `IBV_PORT_ACTIVE`.
pub const IBV_PORT_ACTIVE: c_int = 4;
/// `IBV_MTU_1024`.
pub const IBV_MTU_1024: c_int = 3;
/// `IBV_MTU_4096`.
pub const IBV_MTU_4096: c_int = 5;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_ATOMIC_NONE`: iWARP has no atomics (RFC 5040 defines none).
pub const IBV_ATOMIC_NONE: c_int = 0;
/// `IBV_FORK_UNNEEDED` (`enum ibv_fork_status`).
pub const IBV_FORK_UNNEEDED: c_int = 2;
/// `IBV_ACCESS_LOCAL_WRITE`.
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
/// `IBV_ACCESS_REMOTE_READ`.
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;
/// `IBV_ACCESS_MW_BIND`.
pub const IBV_ACCESS_MW_BIND: c_int = 1 << 4;
/// `IBV_ACCESS_OPTIONAL_RANGE`: hints (relaxed ordering and the like) a
/// provider may ignore; `ibv_reg_mr` masks them off before checking.
pub const IBV_ACCESS_OPTIONAL_RANGE: c_int = 0x3ff0_0000;

/// `struct _ibv_device_ops`: two slots libibverbs no longer uses.
#[repr(C)]
pub struct IbvDeviceOps {
    /// `_dummy1`.
    pub _dummy1: *const c_void,
    /// `_dummy2`.
    pub _dummy2: *const c_void,
}

/// `struct ibv_device`.
#[repr(C)]
pub struct IbvDevice {
    /// `_ops`.
    pub _ops: IbvDeviceOps,
    /// `node_type` (`enum ibv_node_type`).
    pub node_type: c_int,
    /// `transport_type` (`enum ibv_transport_type`).
    pub transport_type: c_int,
    /// `name`: the device's name, e.g. `uwarp0`.
    pub name: [c_char; SYSFS_NAME_MAX],
    /// `dev_name`: the uverbs device's name.
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    /// `dev_path`: the uverbs device's sysfs path.
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    /// `ibdev_path`: the device's sysfs path.
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// An operation slot of `struct ibv_context_ops` that libibverbs 1.1 and
/// later never call (named `_compat_*` in the header).
pub type CompatOp = *const c_void;

/// `struct ibv_context_ops`: the function table the header's inline fast
/// path calls (`ibv_post_send` is `qp->context->ops.post_send(...)`).
#[repr(C)]
pub struct IbvContextOps {
    /// `_compat_query_device` .. `_compat_dereg_mr`.
    pub _compat_1: [CompatOp; 7],
    /// `alloc_mw`.
    pub alloc_mw: Option<unsafe extern "C" fn(pd: *mut c_void, kind: c_int) -> *mut c_void>,
    /// `bind_mw`.
    pub bind_mw:
        Option<unsafe extern "C" fn(qp: *mut c_void, mw: *mut c_void, bind: *mut c_void) -> c_int>,
    /// `dealloc_mw`.
    pub dealloc_mw: Option<unsafe extern "C" fn(mw: *mut c_void) -> c_int>,
    /// `_compat_create_cq`.
    pub _compat_2: CompatOp,
    /// `poll_cq`.
    pub poll_cq:
        Option<unsafe extern "C" fn(cq: *mut IbvCq, entries: c_int, wc: *mut IbvWc) -> c_int>,
    /// `req_notify_cq`.
    pub req_notify_cq: Option<unsafe extern "C" fn(cq: *mut IbvCq, solicited_only: c_int) -> c_int>,
    /// `_compat_cq_event` .. `_compat_destroy_srq`.
    pub _compat_3: [CompatOp; 7],
    /// `post_srq_recv`.
    pub post_srq_recv: Option<
        unsafe extern "C" fn(
            srq: *mut IbvSrq,
            wr: *mut IbvRecvWr,
            bad: *mut *mut IbvRecvWr,
        ) -> c_int,
    >,
    /// `_compat_create_qp` .. `_compat_destroy_qp`.
    pub _compat_4: [CompatOp; 4],
    /// `post_send`.
    pub post_send: Option<
        unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int,
    >,
    /// `post_recv`.
    pub post_recv: Option<
        unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int,
    >,
    /// `_compat_create_ah` .. `_compat_async_event`.
    pub _compat_5: [CompatOp; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    /// `device`.
    pub device: *mut IbvDevice,
    /// `ops`.
    pub ops: IbvContextOps,
    /// `cmd_fd`: the uverbs command descriptor (none here: -1).
    pub cmd_fd: c_int,
    /// `async_fd`: readable when an asynchronous event is pending.
    pub async_fd: c_int,
    /// `num_comp_vectors`.
    pub num_comp_vectors: c_int,
    /// `mutex` (`pthread_mutex_t`).
    pub mutex: libc::pthread_mutex_t,
    /// `abi_compat`: `UINTPTR_MAX` says a [`VerbsContext`] surrounds it.
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` value that makes the
/// header's inlines look for the [`VerbsContext`].
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `verbs_context.query_port`.
pub type QueryPortFn = unsafe extern "C" fn(
    context: *mut IbvContext,
    port_num: u8,
    attr: *mut IbvPortAttr,
    attr_len: usize,
) -> c_int;

/// `struct verbs_context`: the extended operations, in front of the
/// [`IbvContext`] (the header finds it at `context - 320`).
#[repr(C)]
pub struct VerbsContext {
    /// `query_port`: what the inline `ibv_query_port` calls.
    pub query_port: Option<QueryPortFn>,
    /// `advise_mr` .. `_ABI_placeholder3`: extended verbs uwarp does not
    /// offer; NULL makes the header's inlines answer `EOPNOTSUPP` (or
    /// fall back to the legacy verb, as `ibv_query_device_ex` does).
    pub unoffered: [CompatOp; 38],
    /// `sz`: the size of this structure, which the inlines check.
    pub sz: usize,
    /// `context`: what applications hold.
    pub context: IbvContext,
}

/// `struct ibv_device_attr`.
#[repr(C)]
pub struct IbvDeviceAttr {
    /// `fw_ver`.
    pub fw_ver: [c_char; 64],
    /// `node_guid` (big-endian).
    pub node_guid: u64,
    /// `sys_image_guid` (big-endian).
    pub sys_image_guid: u64,
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `page_size_cap`.
    pub page_size_cap: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// `max_qp`.
    pub max_qp: c_int,
    /// `max_qp_wr`.
    pub max_qp_wr: c_int,
    /// `device_cap_flags`.
    pub device_cap_flags: c_uint,
    /// `max_sge`.
    pub max_sge: c_int,
    /// `max_sge_rd`.
    pub max_sge_rd: c_int,
    /// `max_cq`.
    pub max_cq: c_int,
    /// `max_cqe`.
    pub max_cqe: c_int,
    /// `max_mr`.
    pub max_mr: c_int,
    /// `max_pd`.
    pub max_pd: c_int,
    /// `max_qp_rd_atom`: the IRD a queue pair can have.
    pub max_qp_rd_atom: c_int,
    /// `max_ee_rd_atom`.
    pub max_ee_rd_atom: c_int,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: c_int,
    /// `max_qp_init_rd_atom`: the ORD a queue pair can have.
    pub max_qp_init_rd_atom: c_int,
    /// `max_ee_init_rd_atom`.
    pub max_ee_init_rd_atom: c_int,
    /// `atomic_cap` (`enum ibv_atomic_cap`).
    pub atomic_cap: c_int,
    /// `max_ee`.
    pub max_ee: c_int,
    /// `max_rdd`.
    pub max_rdd: c_int,
    /// `max_mw`.
    pub max_mw: c_int,
    /// `max_raw_ipv6_qp`.
    pub max_raw_ipv6_qp: c_int,
    /// `max_raw_ethy_qp`.
    pub max_raw_ethy_qp: c_int,
    /// `max_mcast_grp`.
    pub max_mcast_grp: c_int,
    /// `max_mcast_qp_attach`.
    pub max_mcast_qp_attach: c_int,
    /// `max_total_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: c_int,
    /// `max_ah`.
    pub max_ah: c_int,
    /// `max_fmr`.
    pub max_fmr: c_int,
    /// `max_map_per_fmr`.
    pub max_map_per_fmr: c_int,
    /// `max_srq`.
    pub max_srq: c_int,
    /// `max_srq_wr`.
    pub max_srq_wr: c_int,
    /// `max_srq_sge`.
    pub max_srq_sge: c_int,
    /// `max_pkeys`.
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr`.
#[repr(C)]
pub struct IbvPortAttr {
    /// `state` (`enum ibv_port_state`).
    pub state: c_int,
    /// `max_mtu` (`enum ibv_mtu`).
    pub max_mtu: c_int,
    /// `active_mtu` (`enum ibv_mtu`).
    pub active_mtu: c_int,
    /// `gid_tbl_len`.
    pub gid_tbl_len: c_int,
    /// `port_cap_flags`.
    pub port_cap_flags: u32,
    /// `max_msg_sz`.
    pub max_msg_sz: u32,
    /// `bad_pkey_cntr`.
    pub bad_pkey_cntr: u32,
    /// `qkey_viol_cntr`.
    pub qkey_viol_cntr: u32,
    /// `pkey_tbl_len`.
    pub pkey_tbl_len: u16,
    /// `lid`.
    pub lid: u16,
    /// `sm_lid`.
    pub sm_lid: u16,
    /// `lmc`.
    pub lmc: u8,
    /// `max_vl_num`.
    pub max_vl_num: u8,
    /// `sm_sl`.
    pub sm_sl: u8,
    /// `subnet_timeout`.
    pub subnet_timeout: u8,
    /// `init_type_reply`.
    pub init_type_reply: u8,
    /// `active_width`.
    pub active_width: u8,
    /// `active_speed`.
    pub active_speed: u8,
    /// `phys_state`.
    pub phys_state: u8,
    /// `link_layer`.
    pub link_layer: u8,
    /// `flags`.
    pub flags: u8,
    /// `port_cap_flags2`.
    pub port_cap_flags2: u16,
}

/// The size of `struct _compat_ibv_port_attr`, which the exported
/// `ibv_query_port@IBVERBS_1.1` fills: [`IbvPortAttr`] up to and with
/// `link_layer`.
pub const COMPAT_PORT_ATTR_LEN: usize = core::mem::offset_of!(IbvPortAttr, flags);

/// `union ibv_gid`, as its 16 raw octets (aligned as its other member,
/// two 64-bit words, is).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct IbvGid {
    /// `raw`.
    pub raw: [u8; 16],
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct IbvPd {
    /// `context`.
    pub context: *mut IbvContext,
    /// `handle`.
    pub handle: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct IbvCompChannel {
    /// `context`.
    pub context: *mut IbvContext,
    /// `fd`: readable when an event is pending.
    pub fd: c_int,
    /// `refcnt`: the completion queues using the channel.
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct IbvCq {
    /// `context`.
    pub context: *mut IbvContext,
    /// `channel`: where the queue's events go, or NULL.
    pub channel: *mut IbvCompChannel,
    /// `cq_context`: the application's pointer, handed back with events.
    pub cq_context: *mut c_void,
    /// `handle`.
    pub handle: u32,
    /// `cqe`: how many entries the queue holds.
    pub cqe: c_int,
    /// `mutex` (libibverbs' own; unused here).
    pub mutex: libc::pthread_mutex_t,
    /// `cond` (libibverbs' own; unused here).
    pub cond: libc::pthread_cond_t,
    /// `comp_events_completed`: events acknowledged.
    pub comp_events_completed: u32,
    /// `async_events_completed`.
    pub async_events_completed: u32,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvWc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status` (`enum ibv_wc_status`).
    pub status: c_int,
    /// `opcode` (`enum ibv_wc_opcode`).
    pub opcode: c_int,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// The union of `imm_data` and `invalidated_rkey`.
    pub invalidated_rkey: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags`.
    pub wc_flags: c_uint,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}

/// `IBV_WC_SUCCESS` and the other `enum ibv_wc_status` values uwarp
/// reports.
pub const IBV_WC_SUCCESS: c_int = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const IBV_WC_LOC_LEN_ERR: c_int = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const IBV_WC_LOC_QP_OP_ERR: c_int = 2;
/// `IBV_WC_LOC_PROT_ERR`.
pub const IBV_WC_LOC_PROT_ERR: c_int = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const IBV_WC_WR_FLUSH_ERR: c_int = 5;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const IBV_WC_REM_INV_REQ_ERR: c_int = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const IBV_WC_REM_ACCESS_ERR: c_int = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const IBV_WC_REM_OP_ERR: c_int = 11;
/// `IBV_WC_FATAL_ERR`.
pub const IBV_WC_FATAL_ERR: c_int = 19;

/// `IBV_WC_SEND`.
pub const IBV_WC_SEND: c_int = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const IBV_WC_RDMA_WRITE: c_int = 1;
/// `IBV_WC_RDMA_READ`.
pub const IBV_WC_RDMA_READ: c_int = 2;
/// `IBV_WC_RECV`.
pub const IBV_WC_RECV: c_int = 1 << 7;

/// `IBV_WC_WITH_INV`: `invalidated_rkey` is set.
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpCap {
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttr {
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `send_cq`.
    pub send_cq: *mut IbvCq,
    /// `recv_cq`.
    pub recv_cq: *mut IbvCq,
    /// `srq`.
    pub srq: *mut IbvSrq,
    /// `cap`: asked for, and written back with what the queue pair has.
    pub cap: IbvQpCap,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: c_int,
    /// `sq_sig_all`: every send work request completes signaled.
    pub sq_sig_all: c_int,
}

/// `IBV_QPT_RC`: the only type iWARP has (a reliable connection).
pub const IBV_QPT_RC: c_int = 2;

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    /// `context`.
    pub context: *mut IbvContext,
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `pd`.
    pub pd: *mut IbvPd,
    /// `send_cq`.
    pub send_cq: *mut IbvCq,
    /// `recv_cq`.
    pub recv_cq: *mut IbvCq,
    /// `srq`.
    pub srq: *mut IbvSrq,
    /// `handle`.
    pub handle: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `state` (`enum ibv_qp_state`).
    pub state: c_int,
    /// `qp_type`.
    pub qp_type: c_int,
    /// `mutex` (libibverbs' own; unused here).
    pub mutex: libc::pthread_mutex_t,
    /// `cond` (libibverbs' own; unused here).
    pub cond: libc::pthread_cond_t,
    /// `events_completed`.
    pub events_completed: u32,
}

/// `struct ibv_async_event`: the event and the object it concerns.
#[repr(C)]
pub struct IbvAsyncEvent {
    /// `element`: a union of the queue pair, CQ, SRQ or WQ pointer and
    /// the port number; uwarp's events all name a queue pair.
    pub element: *mut c_void,
    /// `event_type` (`enum ibv_event_type`).
    pub event_type: c_int,
}

/// `IBV_EVENT_QP_FATAL`: the queue pair went to the error state for an
/// error that is not one of memory access (an `enum ibv_event_type`).
pub const IBV_EVENT_QP_FATAL: c_int = 1;
/// `IBV_EVENT_QP_REQ_ERR`: an invalid request from the peer.
pub const IBV_EVENT_QP_REQ_ERR: c_int = 2;
/// `IBV_EVENT_QP_ACCESS_ERR`: a memory access violation.
pub const IBV_EVENT_QP_ACCESS_ERR: c_int = 3;

/// `IBV_QPS_RESET` and the other `enum ibv_qp_state` values.
pub const IBV_QPS_RESET: c_int = 0;
/// `IBV_QPS_INIT`.
pub const IBV_QPS_INIT: c_int = 1;
/// `IBV_QPS_RTR`.
pub const IBV_QPS_RTR: c_int = 2;
/// `IBV_QPS_RTS`.
pub const IBV_QPS_RTS: c_int = 3;
/// `IBV_QPS_SQD`.
pub const IBV_QPS_SQD: c_int = 4;
/// `IBV_QPS_SQE`.
pub const IBV_QPS_SQE: c_int = 5;
/// `IBV_QPS_ERR`.
pub const IBV_QPS_ERR: c_int = 6;

/// `IBV_QP_STATE` (`enum ibv_qp_attr_mask`).
pub const IBV_QP_STATE: c_int = 1;
/// `IBV_QP_ACCESS_FLAGS`.
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
/// `IBV_QP_PORT`.
pub const IBV_QP_PORT: c_int = 1 << 5;
/// `IBV_QP_CAP`.
pub const IBV_QP_CAP: c_int = 1 << 19;

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvGlobalRoute {
    /// `dgid`.
    pub dgid: IbvGid,
    /// `flow_label`.
    pub flow_label: u32,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAhAttr {
    /// `grh`.
    pub grh: IbvGlobalRoute,
    /// `dlid`.
    pub dlid: u16,
    /// `sl`.
    pub sl: u8,
    /// `src_path_bits`.
    pub src_path_bits: u8,
    /// `static_rate`.
    pub static_rate: u8,
    /// `is_global`.
    pub is_global: u8,
    /// `port_num`.
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpAttr {
    /// `qp_state`.
    pub qp_state: c_int,
    /// `cur_qp_state`.
    pub cur_qp_state: c_int,
    /// `path_mtu`.
    pub path_mtu: c_int,
    /// `path_mig_state`.
    pub path_mig_state: c_int,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: c_uint,
    /// `cap`.
    pub cap: IbvQpCap,
    /// `ah_attr`.
    pub ah_attr: IbvAhAttr,
    /// `alt_ah_attr`.
    pub alt_ah_attr: IbvAhAttr,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `sq_draining`.
    pub sq_draining: u8,
    /// `max_rd_atomic`: the ORD.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`: the IRD.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `rate_limit`.
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSge {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u32,
    /// `lkey`.
    pub lkey: u32,
}

/// `wr.rdma` of `struct ibv_send_wr` (the `wr` union is as large as its
/// `atomic` member, hence the padding).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvRdmaWr {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
    /// The rest of the union.
    pub _union_rest: [u32; 5],
}

/// `struct ibv_send_wr`.
#[repr(C)]
pub struct IbvSendWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `next`.
    pub next: *mut IbvSendWr,
    /// `sg_list`.
    pub sg_list: *mut IbvSge,
    /// `num_sge`.
    pub num_sge: c_int,
    /// `opcode` (`enum ibv_wr_opcode`).
    pub opcode: c_int,
    /// `send_flags`.
    pub send_flags: c_uint,
    /// The union of `imm_data` and `invalidate_rkey`.
    pub invalidate_rkey: u32,
    /// `wr` (its `rdma` member).
    pub wr: IbvRdmaWr,
    /// `qp_type`.
    pub qp_type: u32,
    /// The `bind_mw`/`tso` union.
    pub _bind_mw_tso: [u64; 6],
}

/// `IBV_WR_RDMA_WRITE` and the other `enum ibv_wr_opcode` values uwarp
/// names.
pub const IBV_WR_RDMA_WRITE: c_int = 0;
/// `IBV_WR_SEND`.
pub const IBV_WR_SEND: c_int = 2;
/// `IBV_WR_RDMA_READ`.
pub const IBV_WR_RDMA_READ: c_int = 4;
/// `IBV_WR_SEND_WITH_INV`.
pub const IBV_WR_SEND_WITH_INV: c_int = 9;

/// `IBV_SEND_FENCE`.
pub const IBV_SEND_FENCE: c_uint = 1;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
/// `IBV_SEND_SOLICITED`.
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
/// `IBV_SEND_INLINE`.
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct IbvRecvWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `next`.
    pub next: *mut IbvRecvWr,
    /// `sg_list`.
    pub sg_list: *mut IbvSge,
    /// `num_sge`.
    pub num_sge: c_int,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct IbvSrq {
    /// `context`.
    pub context: *mut IbvContext,
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `pd`.
    pub pd: *mut IbvPd,
    /// `handle`.
    pub handle: u32,
    /// `mutex` (libibverbs' own; unused here).
    pub mutex: libc::pthread_mutex_t,
    /// `cond` (libibverbs' own; unused here).
    pub cond: libc::pthread_cond_t,
    /// `events_completed`.
    pub events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSrqAttr {
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct IbvSrqInitAttr {
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `attr`.
    pub attr: IbvSrqAttr,
}

/// `struct ibv_srq_init_attr_ex`: [`IbvSrqInitAttr`]'s fields, then which
/// of the others are valid, the type, and the domain (the XRC domain, CQ
/// and tag-matching capabilities name features uwarp does not offer).
#[repr(C)]
pub struct IbvSrqInitAttrEx {
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `attr`.
    pub attr: IbvSrqAttr,
    /// `comp_mask` (`IBV_SRQ_INIT_ATTR_*`).
    pub comp_mask: u32,
    /// `srq_type` (`enum ibv_srq_type`).
    pub srq_type: c_int,
    /// `pd`.
    pub pd: *mut IbvPd,
    /// `xrcd`.
    pub xrcd: *mut c_void,
    /// `cq`.
    pub cq: *mut IbvCq,
    /// `tm_cap` (`max_num_tags`, `max_ops`).
    pub tm_cap: [u32; 2],
}

/// `IBV_SRQ_INIT_ATTR_TYPE`: `srq_type` is valid.
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
/// `IBV_SRQ_INIT_ATTR_PD`: `pd` is valid.
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// `IBV_SRQT_BASIC`: a plain shared receive queue.
pub const IBV_SRQT_BASIC: c_int = 0;

/// The head of `struct ibv_qp_init_attr_ex`: the fields of
/// [`IbvQpInitAttr`] (packed after one another, with no padding at the
/// end as that structure has), then `comp_mask` and `pd` (what
/// `rdma_create_qp_ex` reads; the extended fields after them name
/// features uwarp does not offer).
#[repr(C)]
pub struct IbvQpInitAttrExHead {
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `send_cq`.
    pub send_cq: *mut IbvCq,
    /// `recv_cq`.
    pub recv_cq: *mut IbvCq,
    /// `srq`.
    pub srq: *mut IbvSrq,
    /// `cap`.
    pub cap: IbvQpCap,
    /// `qp_type`.
    pub qp_type: c_int,
    /// `sq_sig_all`.
    pub sq_sig_all: c_int,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `pd`, when `comp_mask` has `IBV_QP_INIT_ATTR_PD`.
    pub pd: *mut IbvPd,
}

/// `IBV_QP_INIT_ATTR_PD`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;

/// `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    /// `context`.
    pub context: *mut IbvContext,
    /// `pd`.
    pub pd: *mut IbvPd,
    /// `addr`: the first octet registered.
    pub addr: *mut c_void,
    /// `length`.
    pub length: usize,
    /// `handle`.
    pub handle: u32,
    /// `lkey`: the STag local work requests name.
    pub lkey: u32,
    /// `rkey`: the STag a peer names.
    pub rkey: u32,
}

/// `IBV_ACCESS_ZERO_BASED`: Tagged Offsets count from 0.
pub const IBV_ACCESS_ZERO_BASED: c_int = 1 << 5;
/// `IBV_ACCESS_ON_DEMAND`: on-demand paging.
pub const IBV_ACCESS_ON_DEMAND: c_int = 1 << 6;
/// `IBV_ACCESS_HUGETLB`: a hint that the memory is huge pages.
pub const IBV_ACCESS_HUGETLB: c_int = 1 << 7;

/// `struct ibv_gid_entry`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvGidEntry {
    /// `gid`.
    pub gid: IbvGid,
    /// `gid_index`.
    pub gid_index: u32,
    /// `port_num`.
    pub port_num: u32,
    /// `gid_type` (`enum ibv_gid_type`).
    pub gid_type: u32,
    /// `ndev_ifindex`: the network device's index (none: 0).
    pub ndev_ifindex: u32,
}

/// `struct ibv_ece`: InfiniBand's Enhanced Connection Establishment
/// options.
#[repr(C)]
pub struct IbvEce {
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `options`.
    pub options: u32,
    /// `comp_mask`.
    pub comp_mask: u32,
}
