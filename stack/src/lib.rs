//! uwarp-stack: the iWARP protocol suite, sans-IO.
//!
//! The crate holds the protocols and nothing that does I/O: no DPDK, no
//! sockets, no threads. Engines consume bytes, segments and timer ticks and
//! produce bytes and events, so the same code runs over the userspace TCP on
//! DPDK, over kernel sockets, and over in-memory test links.
//!
//! The modules, lowest first: each uses only those before it in this
//! list, except that `tcp` and `mpa` are siblings that do not use each
//! other.
//!
//! - [`wire`]: zero-copy views and parsed representations of every header
//!   uwarp puts on the wire (RFC 5040 sections 4 and 7, RFC 5041 section 4,
//!   RFC 5044 sections 4, 5 and 7, RFC 6581 section 9, RFC 7306, RFC 8797,
//!   and the TCP header of RFC 9293 section 3.1 with the options of RFC
//!   7323 and RFC 2018), and the Terminate a sender builds.
//! - [`mem`]: memory registration: protection domains, registered buffers
//!   and the lock-free STag table with epoch-based deregistration
//!   (RFC 5040 sections 5.1-5.3, RFC 5041 sections 5.1.1 and 8, RFC 5042).
//! - [`verbs`]: work requests, completions and queue pair states, the
//!   types applications see (the RDMAC verbs' names; completions follow
//!   RFC 5040 section 5's ordering rules).
//! - [`record`]: the record interface between an FPDU framer and the
//!   transport below it (RFC 5044 section 5.2 and Appendix A.1).
//! - [`tcp`]: the MPA-aware TCP engine (RFC 9293 with RFC 5961, 7323,
//!   2018, 2883, 6675, 5681, 6582, 9438, 6298, 5682, 8985 section 7), which
//!   keeps FPDUs whole in segments and hands data over at once (RFC 5044
//!   Appendix A).
//! - [`mpa`]: the MPA startup phase: Request/Reply negotiation of revision,
//!   CRC, Markers, IRD/ORD and the peer-to-peer RTR (RFC 5044 section 7,
//!   RFC 6581 sections 5 and 8-10), and FPDU framing of Full Operation
//!   over a byte stream (RFC 5044 sections 4 and 5).
//! - [`ddp`]: the data sink's untagged queues (RFC 5041 section 5.2).
//! - [`rdmap`]: the queue-pair engine: send and receive queues, RDMA Read
//!   queues under IRD/ORD, Terminate (RFC 5040 sections 5-7, RFC 6581).
//!
//! # Features
//!
//! `testing` adds the fuzz and test oracles (`wire::check`,
//! `rdmap::check`) and the tests' helpers (`wire::testing`). The crate's
//! own tests and its fuzz crate turn it on; production builds leave it off.

pub mod ddp;
pub mod mem;
pub mod mpa;
pub mod rdmap;
pub mod record;
pub mod tcp;
pub mod verbs;
pub mod wire;
