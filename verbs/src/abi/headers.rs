//! Checks the layouts of [`super::verbs`] and its constants against the
//! installed rdma-core headers: a C program, compiled with the system's
//! C compiler, prints `sizeof`, `offsetof` and the enumerators, and each
//! must equal what Rust computes for the same name.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

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
    layout!(facts, "struct ibv_pd", IbvPd { context => "context", handle => "handle" });
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
    constants!(
        facts,
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
         #include <infiniband/verbs.h>\nint main(void) {\n",
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
