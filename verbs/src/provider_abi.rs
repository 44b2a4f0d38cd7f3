//! rdma-core's provider interface (version node `IBVERBS_PRIVATE_34`):
//! the calls a provider library (libmlx5, libmlx4, libefa, DPDK's mlx5
//! drivers on top of them) makes into libibverbs.
//!
//! uwarp hosts no provider. But programs load them anyway: perftest and
//! libfabric link libmlx5 and libefa, and the DPDK EAL loads every driver
//! of its plugin directory, the mlx ones included; the dynamic loader then
//! binds each of their imports from this library, at load time, and
//! refuses to load them if one is missing. So the interface is here: a
//! provider's constructor registers its driver with
//! [`verbs_register_driver_34`], which keeps nothing, so no provider's
//! device ever appears and nothing else here is ever called. Were it
//! called, each function answers `EOPNOTSUPP`.

use core::ffi::{c_int, c_void};

use crate::export::symbol_versions;

/// `verbs_register_driver_34`: a provider registering its driver. uwarp
/// keeps nothing: its one device is its own.
#[no_mangle]
pub extern "C" fn verbs_register_driver_34(_ops: *const c_void) {}

/// `verbs_allow_disassociate_destroy`: whether destroying objects of a
/// disassociated device is allowed (never asked: no provider device).
#[no_mangle]
pub static verbs_allow_disassociate_destroy: bool = false;

/// `__verbs_log`: a provider's debug log (never called: no provider
/// device).
#[no_mangle]
pub extern "C" fn __verbs_log() {}

/// The provider interface's other entry points, each answering
/// `EOPNOTSUPP` (never called: no provider device).
macro_rules! refused {
    ($($name:ident),+ $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: provider interface, refused (see the module).")]
            #[no_mangle]
            pub extern "C" fn $name() -> c_int {
                libc::EOPNOTSUPP
            }
        )+
        symbol_versions! { $($name => "IBVERBS_PRIVATE_34"),+ }
    };
}

refused! {
    _verbs_init_and_alloc_context,
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
    verbs_init_cq,
    verbs_open_device,
    verbs_set_ops,
    verbs_uninit_context,
}

symbol_versions! {
    verbs_register_driver_34 => "IBVERBS_PRIVATE_34",
    verbs_allow_disassociate_destroy => "IBVERBS_PRIVATE_34",
    __verbs_log => "IBVERBS_PRIVATE_34",
}
