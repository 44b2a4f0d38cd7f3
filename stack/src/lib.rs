//! uwarp-stack: the iWARP protocol suite, sans-IO.
//!
//! The crate holds the protocols and nothing that does I/O: no DPDK, no
//! sockets, no threads. Engines consume bytes, segments and timer ticks and
//! produce bytes and events, so the same code runs over the userspace TCP on
//! DPDK, over kernel sockets, and over in-memory test links.
//!
//! - [`wire`]: zero-copy views and parsed representations of every header
//!   uwarp puts on the wire (RFC 5040, 5041, 5044, 6581, 7306, 8797).
//! - [`mpa`]: the MPA startup phase: Request/Reply negotiation of revision,
//!   CRC, Markers, IRD/ORD and the peer-to-peer RTR (RFC 5044, RFC 6581),
//!   and FPDU framing of Full Operation over a byte stream.
//! - [`ddp`]: the data sink's untagged queues (RFC 5041).
//! - [`rdmap`]: the queue-pair engine: send and receive queues, RDMA Read
//!   queues under IRD/ORD, Terminate (RFC 5040, RFC 6581).
//! - [`mem`]: memory registration: protection domains, registered buffers
//!   and the lock-free STag table with epoch-based deregistration
//!   (RFC 5040, 5041, 5042).
//! - [`verbs`]: work requests, completions and queue pair states, the
//!   types applications see.

pub mod ddp;
pub mod mem;
pub mod mpa;
pub mod rdmap;
pub mod tcp;
pub mod verbs;
pub mod wire;
