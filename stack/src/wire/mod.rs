//! Zero-copy views and parsed representations of every header uwarp puts
//! on the wire, in the style of smoltcp's `wire` module: a view
//! (`Thing<T: AsRef<[u8]>>`) checks its length once and reads fields in
//! place; a representation (`ThingRepr`) parses, validates and emits.
//!
//! | module | what | where it is specified |
//! | --- | --- | --- |
//! | [`mpa`] | MPA Request/Reply, the enhanced block | RFC 5044 7.1, RFC 6581 9 |
//! | [`fpdu`] | FPDU framing, PAD, CRC field, MULPDU | RFC 5044 4.1, 8 |
//! | [`marker`] | Marker insertion and removal | RFC 5044 4.3, 5 |
//! | [`crc`] | CRC32c and its on-wire byte order | RFC 5044 4.1 |
//! | [`ddp`] | DDP tagged/untagged headers, segmentation | RFC 5041 4, 5.2 |
//! | [`rdmap`] | RDMAP control field, opcodes, Read Request | RFC 5040 4, RFC 7306 |
//! | [`lenient`] | every field of a segment read unchecked, for diagnostics | RFC 5041 4, RFC 5040 4.1 |
//! | [`terminate`] | Terminate message and error codes | RFC 5040 4.8, 7 |
//! | [`terminate_ulpdu`] | the whole Terminate ULPDU, its echoed headers | RFC 5040 4.8, 7, RFC 5041 7.1 |
//! | [`terminate_cause`] | which Terminate errors a received frame can cause | RFC 5040 7, RFC 5041 7.2, RFC 6581 9 |
//! | [`terminate_layout`] | choosing a received Terminate's layout, and why | RFC 5040 4.8 |
//! | [`rpcrdma`] | RPC-over-RDMA CM private data | RFC 8797 |
//! | [`tcp`] | TCP header and options, parsed and emitted with the checksum | RFC 9293 3.1, RFC 7323 2-3, RFC 2018 2-3 |
//!
//! Ethernet and IPv4 are `smoltcp::wire`'s and are not repeated here; a
//! TCP header is smoltcp's `TcpRepr`, which [`tcp`] reads and writes.
//! No parser panics or reads out of bounds on any input; each returns a
//! [`WireError`] precise enough for the engines to answer with the right
//! Terminate or MPA reject.
//!
//! With the crate's `testing` feature, `check` holds the round-trip
//! oracles the fuzz targets and the tests share, and `testing` the tests'
//! helpers.

#[cfg(feature = "testing")]
pub mod check;
pub mod crc;
pub mod ddp;
mod error;
pub(crate) mod field;
pub mod fpdu;
pub mod lenient;
pub mod marker;
pub mod mpa;
pub mod rdmap;
pub mod rpcrdma;
pub mod tcp;
pub mod terminate;
pub mod terminate_cause;
pub mod terminate_layout;
pub mod terminate_ulpdu;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use error::{Result, WireError};
