//! uwarp-control: the control core.
//!
//! A uwarp host on a DPDK port has one control core and one or more
//! dataplane cores (`uwarp-dataplane`). The control core sets connections
//! up and hands them over; the dataplane cores run them.
//!
//! - [`setup`]: [`TcpSetup`], the control core's half of TCP (RFC 9293
//!   section 3.5): listeners, active opens, the three-way handshake, and
//!   the hand-over of each synchronized connection to the dataplane core
//!   its segments arrive on (RFC 5044 Appendix A's move from the generic
//!   to the optimized path).
//! - [`host`]: [`TcpHost`], a TCP/IP host on one port: the port started,
//!   the control core and the dataplane cores on threads of their own.
//! - [`startup`]: one connection's MPA startup phase (RFC 5044 section
//!   7.1, RFC 6581), the policy every transport of the `uwarp` crate
//!   carries out on its control core.
//!
//! The STag table the control core owns, and the iWARP connection
//! manager on top of this crate, are the `uwarp` crate's (its DPDK
//! transport).

pub mod error;
pub mod host;
pub mod setup;
pub mod startup;

pub use error::Error;
pub use host::{parse_mac, BesideKernel, HostConfig, HostReport, TcpHost};
pub use setup::{AppFactory, SetupCounters, TcpRequests, TcpSetup};
