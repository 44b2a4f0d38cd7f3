//! Checks the layouts of [`super::verbs`] and its constants against the
//! installed rdma-core headers: a C program, compiled with the system's
//! C compiler, prints `sizeof`, `offsetof` and the enumerators, and each
//! must equal what Rust computes for the same name.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use super::cm::*;
use super::verbs::*;

/// One fact: its name, the C expression that computes it, and the value
/// Rust has for it.
struct Fact {
    name: String,
    c: String,
    rust: u64,
}

/// Facts about a structure: `layout!(facts, "struct ibv_device",
/// IbvDevice { rust_field => "c_field", ... })` adds its size and the
/// offset of each field (fields whose Rust name stands for a C array of
/// slots name the C field the slots start at).
macro_rules! layout {
    ($facts:ident, $c:literal, $rust:ty { $($field:ident => $cfield:literal),* $(,)? }) => {
        $facts.push(Fact {
            name: format!("sizeof({})", $c),
            c: format!("sizeof({})", $c),
            rust: size_of::<$rust>() as u64,
        });
        $(
            $facts.push(Fact {
                name: format!("offsetof({}, {})", $c, $cfield),
                c: format!("offsetof({}, {})", $c, $cfield),
                rust: core::mem::offset_of!($rust, $field) as u64,
            });
        )*
    };
}

/// Facts about constants: `constants!(facts, IBV_NODE_RNIC, ...)`, each
/// named as in C.
macro_rules! constants {
    ($facts:ident, $($name:ident),+ $(,)?) => {
        $(
            $facts.push(Fact {
                name: stringify!($name).to_owned(),
                c: format!("(unsigned long long){}", stringify!($name)),
                rust: $name as u64,
            });
        )+
    };
}

fn facts() -> Vec<Fact> {
    let mut facts = Vec::new();
    layout!(facts, "struct ibv_device", IbvDevice {
        _ops => "_ops", node_type => "node_type", transport_type => "transport_type",
        name => "name", dev_name => "dev_name", dev_path => "dev_path", ibdev_path => "ibdev_path",
    });
    layout!(facts, "struct ibv_context_ops", IbvContextOps {
        _compat_1 => "_compat_query_device", alloc_mw => "alloc_mw", bind_mw => "bind_mw",
        dealloc_mw => "dealloc_mw", _compat_2 => "_compat_create_cq", poll_cq => "poll_cq",
        req_notify_cq => "req_notify_cq", _compat_3 => "_compat_cq_event",
        post_srq_recv => "post_srq_recv", _compat_4 => "_compat_create_qp",
        post_send => "post_send", post_recv => "post_recv", _compat_5 => "_compat_create_ah",
    });
    layout!(facts, "struct ibv_context", IbvContext {
        device => "device", ops => "ops", cmd_fd => "cmd_fd", async_fd => "async_fd",
        num_comp_vectors => "num_comp_vectors", mutex => "mutex", abi_compat => "abi_compat",
    });
    layout!(facts, "struct verbs_context", VerbsContext {
        query_port => "query_port", unoffered => "advise_mr", sz => "sz", context => "context",
    });
    layout!(facts, "struct ibv_device_attr", IbvDeviceAttr {
        fw_ver => "fw_ver", node_guid => "node_guid", sys_image_guid => "sys_image_guid",
        max_mr_size => "max_mr_size", page_size_cap => "page_size_cap", vendor_id => "vendor_id",
        vendor_part_id => "vendor_part_id", hw_ver => "hw_ver", max_qp => "max_qp",
        max_qp_wr => "max_qp_wr", device_cap_flags => "device_cap_flags", max_sge => "max_sge",
        max_sge_rd => "max_sge_rd", max_cq => "max_cq", max_cqe => "max_cqe", max_mr => "max_mr",
        max_pd => "max_pd", max_qp_rd_atom => "max_qp_rd_atom",
        max_ee_rd_atom => "max_ee_rd_atom", max_res_rd_atom => "max_res_rd_atom",
        max_qp_init_rd_atom => "max_qp_init_rd_atom",
        max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap",
        max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw",
        max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp",
        max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach",
        max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah",
        max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr", max_srq => "max_srq",
        max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge", max_pkeys => "max_pkeys",
        local_ca_ack_delay => "local_ca_ack_delay", phys_port_cnt => "phys_port_cnt",
    });
    layout!(facts, "struct ibv_port_attr", IbvPortAttr {
        state => "state", max_mtu => "max_mtu", active_mtu => "active_mtu",
        gid_tbl_len => "gid_tbl_len", port_cap_flags => "port_cap_flags",
        max_msg_sz => "max_msg_sz", bad_pkey_cntr => "bad_pkey_cntr",
        qkey_viol_cntr => "qkey_viol_cntr", pkey_tbl_len => "pkey_tbl_len", lid => "lid",
        sm_lid => "sm_lid", lmc => "lmc", max_vl_num => "max_vl_num", sm_sl => "sm_sl",
        subnet_timeout => "subnet_timeout", init_type_reply => "init_type_reply",
        active_width => "active_width", active_speed => "active_speed",
        phys_state => "phys_state", link_layer => "link_layer", flags => "flags",
        port_cap_flags2 => "port_cap_flags2",
    });
    layout!(facts, "union ibv_gid", IbvGid { raw => "raw" });
    layout!(facts, "struct ibv_gid_entry", IbvGidEntry {
        gid => "gid", gid_index => "gid_index", port_num => "port_num", gid_type => "gid_type",
        ndev_ifindex => "ndev_ifindex",
    });
    layout!(facts, "struct ibv_pd", IbvPd { context => "context", handle => "handle" });
    layout!(facts, "struct ibv_mr", IbvMr {
        context => "context", pd => "pd", addr => "addr", length => "length",
        handle => "handle", lkey => "lkey", rkey => "rkey",
    });
    layout!(facts, "struct ibv_comp_channel", IbvCompChannel {
        context => "context", fd => "fd", refcnt => "refcnt",
    });
    layout!(facts, "struct ibv_cq", IbvCq {
        context => "context", channel => "channel", cq_context => "cq_context",
        handle => "handle", cqe => "cqe", mutex => "mutex", cond => "cond",
        comp_events_completed => "comp_events_completed",
        async_events_completed => "async_events_completed",
    });
    layout!(facts, "struct ibv_wc", IbvWc {
        wr_id => "wr_id", status => "status", opcode => "opcode", vendor_err => "vendor_err",
        byte_len => "byte_len", invalidated_rkey => "invalidated_rkey", qp_num => "qp_num",
        src_qp => "src_qp", wc_flags => "wc_flags", pkey_index => "pkey_index", slid => "slid",
        sl => "sl", dlid_path_bits => "dlid_path_bits",
    });
    layout!(facts, "struct ibv_qp_cap", IbvQpCap {
        max_send_wr => "max_send_wr", max_recv_wr => "max_recv_wr",
        max_send_sge => "max_send_sge", max_recv_sge => "max_recv_sge",
        max_inline_data => "max_inline_data",
    });
    layout!(facts, "struct ibv_qp_init_attr", IbvQpInitAttr {
        qp_context => "qp_context", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq",
        cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all",
    });
    for (field, rust) in [
        (
            "qp_context",
            core::mem::offset_of!(IbvQpInitAttr, qp_context),
        ),
        ("cap", core::mem::offset_of!(IbvQpInitAttr, cap)),
        (
            "sq_sig_all",
            core::mem::offset_of!(IbvQpInitAttr, sq_sig_all),
        ),
        (
            "comp_mask",
            core::mem::offset_of!(IbvQpInitAttrExHead, comp_mask),
        ),
        ("pd", core::mem::offset_of!(IbvQpInitAttrExHead, pd)),
    ] {
        facts.push(Fact {
            name: format!("offsetof(struct ibv_qp_init_attr_ex, {field})"),
            c: format!("offsetof(struct ibv_qp_init_attr_ex, {field})"),
            rust: rust as u64,
        });
    }
    layout!(facts, "struct ibv_qp", IbvQp {
        context => "context", qp_context => "qp_context", pd => "pd", send_cq => "send_cq",
        recv_cq => "recv_cq", srq => "srq", handle => "handle", qp_num => "qp_num",
        state => "state", qp_type => "qp_type", mutex => "mutex", cond => "cond",
        events_completed => "events_completed",
    });
    layout!(facts, "struct ibv_global_route", IbvGlobalRoute {
        dgid => "dgid", flow_label => "flow_label", sgid_index => "sgid_index",
        hop_limit => "hop_limit", traffic_class => "traffic_class",
    });
    layout!(facts, "struct ibv_ah_attr", IbvAhAttr {
        grh => "grh", dlid => "dlid", sl => "sl", src_path_bits => "src_path_bits",
        static_rate => "static_rate", is_global => "is_global", port_num => "port_num",
    });
    layout!(facts, "struct ibv_qp_attr", IbvQpAttr {
        qp_state => "qp_state", cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
        path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
        sq_psn => "sq_psn", dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags",
        cap => "cap", ah_attr => "ah_attr", alt_ah_attr => "alt_ah_attr",
        pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
        en_sqd_async_notify => "en_sqd_async_notify", sq_draining => "sq_draining",
        max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
        min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
        retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
        alt_timeout => "alt_timeout", rate_limit => "rate_limit",
    });
    layout!(facts, "struct ibv_sge", IbvSge { addr => "addr", length => "length", lkey => "lkey" });
    layout!(facts, "struct ibv_send_wr", IbvSendWr {
        wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge",
        opcode => "opcode", send_flags => "send_flags", invalidate_rkey => "invalidate_rkey",
        wr => "wr.rdma", qp_type => "qp_type", _bind_mw_tso => "bind_mw",
    });
    facts.push(Fact {
        name: "offsetof(struct ibv_send_wr, wr.rdma.rkey)".into(),
        c: "offsetof(struct ibv_send_wr, wr.rdma.rkey)".into(),
        rust: (core::mem::offset_of!(IbvSendWr, wr) + core::mem::offset_of!(IbvRdmaWr, rkey))
            as u64,
    });
    layout!(facts, "struct ibv_recv_wr", IbvRecvWr {
        wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge",
    });
    layout!(facts, "struct ibv_async_event", IbvAsyncEvent {
        element => "element", event_type => "event_type",
    });
    layout!(facts, "struct ibv_srq", IbvSrq {
        context => "context", srq_context => "srq_context", pd => "pd", handle => "handle",
        mutex => "mutex", cond => "cond", events_completed => "events_completed",
    });
    layout!(facts, "struct ibv_srq_attr", IbvSrqAttr {
        max_wr => "max_wr", max_sge => "max_sge", srq_limit => "srq_limit",
    });
    layout!(facts, "struct ibv_srq_init_attr", IbvSrqInitAttr {
        srq_context => "srq_context", attr => "attr",
    });
    layout!(facts, "struct ibv_ece", IbvEce {
        vendor_id => "vendor_id", options => "options", comp_mask => "comp_mask",
    });
    layout!(facts, "struct ibv_srq_init_attr_ex", IbvSrqInitAttrEx {
        srq_context => "srq_context", attr => "attr", comp_mask => "comp_mask",
        srq_type => "srq_type", pd => "pd", xrcd => "xrcd", cq => "cq", tm_cap => "tm_cap",
    });
    layout!(facts, "struct rdma_event_channel", RdmaEventChannel { fd => "fd" });
    layout!(facts, "struct rdma_ib_addr", RdmaIbAddr { sgid => "sgid", dgid => "dgid", pkey => "pkey" });
    layout!(facts, "struct rdma_addr", RdmaAddr {
        src_storage => "src_storage", dst_storage => "dst_storage", ibaddr => "addr.ibaddr",
    });
    layout!(facts, "struct rdma_route", RdmaRoute {
        addr => "addr", path_rec => "path_rec", num_paths => "num_paths",
    });
    layout!(facts, "struct rdma_cm_id", RdmaCmId {
        verbs => "verbs", channel => "channel", context => "context", qp => "qp",
        route => "route", ps => "ps", port_num => "port_num", event => "event",
        send_cq_channel => "send_cq_channel", send_cq => "send_cq",
        recv_cq_channel => "recv_cq_channel", recv_cq => "recv_cq", srq => "srq", pd => "pd",
        qp_type => "qp_type",
    });
    layout!(facts, "struct rdma_conn_param", RdmaConnParam {
        private_data => "private_data", private_data_len => "private_data_len",
        responder_resources => "responder_resources", initiator_depth => "initiator_depth",
        flow_control => "flow_control", retry_count => "retry_count",
        rnr_retry_count => "rnr_retry_count", srq => "srq", qp_num => "qp_num",
    });
    layout!(facts, "struct rdma_cm_event", RdmaCmEvent {
        id => "id", listen_id => "listen_id", event => "event", status => "status",
        conn => "param.conn",
    });
    layout!(facts, "struct rdma_addrinfo", RdmaAddrinfo {
        ai_flags => "ai_flags", ai_family => "ai_family", ai_qp_type => "ai_qp_type",
        ai_port_space => "ai_port_space", ai_src_len => "ai_src_len",
        ai_dst_len => "ai_dst_len", ai_src_addr => "ai_src_addr", ai_dst_addr => "ai_dst_addr",
        ai_src_canonname => "ai_src_canonname", ai_dst_canonname => "ai_dst_canonname",
        ai_route_len => "ai_route_len", ai_route => "ai_route",
        ai_connect_len => "ai_connect_len", ai_connect => "ai_connect", ai_next => "ai_next",
    });
    constants!(
        facts,
        IBV_SRQ_INIT_ATTR_TYPE,
        IBV_SRQ_INIT_ATTR_PD,
        IBV_SRQT_BASIC
    );
    constants!(
        facts,
        RDMA_PS_TCP,
        RAI_PASSIVE,
        RAI_NUMERICHOST,
        RDMA_CM_EVENT_ADDR_RESOLVED,
        RDMA_CM_EVENT_ADDR_ERROR,
        RDMA_CM_EVENT_ROUTE_RESOLVED,
        RDMA_CM_EVENT_CONNECT_REQUEST,
        RDMA_CM_EVENT_CONNECT_ERROR,
        RDMA_CM_EVENT_UNREACHABLE,
        RDMA_CM_EVENT_REJECTED,
        RDMA_CM_EVENT_ESTABLISHED,
        RDMA_CM_EVENT_DISCONNECTED,
        RDMA_CM_EVENT_TIMEWAIT_EXIT,
        IBV_QPT_RC,
        IBV_EVENT_QP_FATAL,
        IBV_EVENT_QP_REQ_ERR,
        IBV_EVENT_QP_ACCESS_ERR,
        IBV_QPS_RESET,
        IBV_QPS_INIT,
        IBV_QPS_RTR,
        IBV_QPS_RTS,
        IBV_QPS_SQD,
        IBV_QPS_SQE,
        IBV_QPS_ERR,
        IBV_QP_STATE,
        IBV_QP_ACCESS_FLAGS,
        IBV_QP_PORT,
        IBV_QP_CAP,
        IBV_QP_INIT_ATTR_PD,
        IBV_WR_RDMA_WRITE,
        IBV_WR_SEND,
        IBV_WR_RDMA_READ,
        IBV_WR_SEND_WITH_INV,
        IBV_SEND_FENCE,
        IBV_SEND_SIGNALED,
        IBV_SEND_SOLICITED,
        IBV_SEND_INLINE,
        IBV_WC_SUCCESS,
        IBV_WC_LOC_LEN_ERR,
        IBV_WC_LOC_QP_OP_ERR,
        IBV_WC_LOC_PROT_ERR,
        IBV_WC_WR_FLUSH_ERR,
        IBV_WC_REM_INV_REQ_ERR,
        IBV_WC_REM_ACCESS_ERR,
        IBV_WC_REM_OP_ERR,
        IBV_WC_FATAL_ERR,
        IBV_WC_SEND,
        IBV_WC_RDMA_WRITE,
        IBV_WC_RDMA_READ,
        IBV_WC_RECV,
        IBV_WC_WITH_INV,
        IBV_NODE_RNIC,
        IBV_TRANSPORT_IWARP,
        IBV_PORT_ACTIVE,
        IBV_MTU_1024,
        IBV_MTU_4096,
        IBV_LINK_LAYER_ETHERNET,
        IBV_ATOMIC_NONE,
        IBV_FORK_UNNEEDED,
        IBV_ACCESS_LOCAL_WRITE,
        IBV_ACCESS_REMOTE_WRITE,
        IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC,
        IBV_ACCESS_MW_BIND,
        IBV_ACCESS_OPTIONAL_RANGE,
        IBV_ACCESS_ZERO_BASED,
        IBV_ACCESS_ON_DEMAND,
        IBV_ACCESS_HUGETLB,
    );
    facts.push(Fact {
        name: "IBV_SYSFS_NAME_MAX".into(),
        c: "(unsigned long long)IBV_SYSFS_NAME_MAX".into(),
        rust: SYSFS_NAME_MAX as u64,
    });
    facts.push(Fact {
        name: "IBV_SYSFS_PATH_MAX".into(),
        c: "(unsigned long long)IBV_SYSFS_PATH_MAX".into(),
        rust: SYSFS_PATH_MAX as u64,
    });
    facts.push(Fact {
        name: "__VERBS_ABI_IS_EXTENDED".into(),
        c: "(unsigned long long)(uintptr_t)__VERBS_ABI_IS_EXTENDED".into(),
        rust: VERBS_ABI_IS_EXTENDED as u64,
    });
    // The compat port structure is opaque in the header; what the header
    // does say is that it is filled through a cast of ibv_port_attr, and
    // rdma-core's is the prefix up to `flags`.
    facts.push(Fact {
        name: "compat port attr length".into(),
        c: "offsetof(struct ibv_port_attr, flags)".into(),
        rust: COMPAT_PORT_ATTR_LEN as u64,
    });
    facts
}

/// Compiles and runs a C program printing each fact's C value, one
/// `index value` line each.
fn c_values(facts: &[Fact]) -> BTreeMap<usize, u64> {
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (i, fact) in facts.iter().enumerate() {
        writeln!(
            program,
            "    printf(\"{i} %llu\\n\", (unsigned long long)({}));",
            fact.c
        )
        .expect("writing to a String");
    }
    program.push_str("    return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("uwarp-verbs-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let source = dir.join("layout.c");
    let binary = dir.join("layout");
    std::fs::write(&source, program).expect("write the C program");
    let compiled = Command::new("cc")
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .expect("cc runs (build-essential)");
    assert!(
        compiled.status.success(),
        "the layout program does not compile against the installed headers \
         (libibverbs-dev):\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let output = Command::new(&binary)
        .output()
        .expect("the layout program runs");
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(output.stdout)
        .expect("ASCII output")
        .lines()
        .map(|line| {
            let (index, value) = line.split_once(' ').expect("`index value` lines");
            (
                index.parse().expect("an index"),
                value.parse().expect("a value"),
            )
        })
        .collect()
}

#[test]
fn every_layout_and_constant_matches_the_installed_headers() {
    let facts = facts();
    let c = c_values(&facts);
    let wrong: Vec<String> = facts
        .iter()
        .enumerate()
        .filter(|(i, fact)| c.get(i) != Some(&fact.rust))
        .map(|(i, fact)| format!("{}: C says {:?}, Rust {}", fact.name, c.get(&i), fact.rust))
        .collect();
    assert!(
        wrong.is_empty(),
        "layouts that differ from the headers:\n{}",
        wrong.join("\n")
    );
    assert_eq!(c.len(), facts.len(), "every fact was printed");
}
