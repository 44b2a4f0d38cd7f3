//! Raw bindings to the system DPDK, for uwarp.
//!
//! The bindings are generated at build time by bindgen from the DPDK that
//! `pkg-config libdpdk` finds (22.11 or later; Debian 12 ships 22.11), so
//! they always match the installed headers and no generated file is kept in
//! the repository. Only what uwarp uses is allowlisted: EAL set-up, lcores,
//! mempools, mbufs, ethdev, rings and virtual devices.
//!
//! DPDK's fast path (`rte_eth_rx_burst`, `rte_pktmbuf_alloc`, ...) is made of
//! `static inline` functions and macros that have no symbol to link to. The
//! crate compiles a small C shim that forwards to each of them; those
//! wrappers carry a `shim_` prefix, e.g. [`shim_rte_eth_rx_burst`], and take
//! the same arguments as the DPDK function they wrap.
//!
//! Everything here is `unsafe` and follows DPDK's own contracts; the safe
//! layer is the `uwarp-dataplane` crate.
//!
//! Linking uses DPDK's shared libraries as pkg-config lists them, plus
//! `librte_net_ring` (for `rte_eth_from_rings`) and `librte_bus_vdev` (for
//! `rte_vdev_init`/`rte_vdev_uninit`). Poll-mode drivers are loaded
//! by `rte_eal_init` from DPDK's driver directory.

// DPDK's Doxygen comments (`@param[in]`, bare URLs) are not rustdoc.
#[allow(
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    rustdoc::all
)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub use bindings::*;
