//! The C types of rdma-core's public headers that cross the boundary,
//! written out as `#[repr(C)]` Rust types with the same layout (rdma-core
//! 44 on x86-64; `tests/abi_layout.rs` checks every size and offset
//! against the installed headers with the C compiler).
//!
//! Names follow the C ones (`struct ibv_device` is [`verbs::IbvDevice`],
//! `struct rdma_cm_id` is [`cm::RdmaCmId`]),
//! and so do field names, so a reader can hold this beside `verbs.h`.

pub mod cm;
pub mod verbs;

#[cfg(test)]
mod headers;
