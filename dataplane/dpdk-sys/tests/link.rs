//! The shim and the DPDK libraries link and answer without an EAL.

use std::ffi::CStr;

#[test]
fn shim_reads_thread_state_before_any_eal() {
    // SAFETY: both read thread-local variables DPDK initialises statically.
    unsafe {
        assert_eq!(dpdk_sys::shim_rte_lcore_id(), dpdk_sys::LCORE_ID_ANY);
        assert_eq!(dpdk_sys::shim_rte_errno(), 0);
    }
}

#[test]
fn strerror_knows_dpdk_errors() {
    // SAFETY: rte_strerror returns a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(dpdk_sys::rte_strerror(dpdk_sys::ENOENT as i32)) };
    assert_eq!(text.to_str().unwrap(), "No such file or directory");
}

#[test]
fn bit64_flags_are_u64_with_their_c_values() {
    assert_eq!(dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_TSO, 1u64 << 5);
    assert_eq!(dpdk_sys::RTE_MBUF_F_EXTERNAL, 1u64 << 61);
    assert_eq!(dpdk_sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP, 1u64 << 4);
}
