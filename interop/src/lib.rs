//! uwarp-interop: programs that speak other iWARP implementations'
//! application protocols over the `uwarp` API, octet for octet on the
//! wire, so that uwarp and the real programs (on Linux siw or an iWARP
//! NIC) can run against each other in either role.
//!
//! - [`rping`]: librdmacm's `rping` ping-pong (RDMA Read, Write and Send).
//! - [`perftest`]: perftest's `ib_{write,read,send}_bw -R` protocol.
//! - [`nfs`]: the RFC 8797 example: connection private data between an
//!   RPC-over-RDMA client and server (RFC 8166), and the inline
//!   thresholds they agree on.

pub mod nfs;
pub mod perftest;
pub mod rping;
