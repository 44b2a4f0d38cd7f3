//! TCP over DPDK: the engine of `uwarp_stack::tcp` (RFC 9293 and the
//! MPA-aware behaviour of RFC 5044 Appendix A) on the poll-mode runtime of
//! `uwarp_dataplane`.
//!
//! - [`clock`]: engine time shared by every core.
//! - [`route`]: the Ethernet/IPv4 headers of a connection's frames.
//! - [`app`]: [`TcpApp`], what runs above a connection.
//! - [`flow`]: a connection with its application and route.
//! - [`frame_memory`]: the memory a connection's frames carry payloads
//!   from by reference.
//! - [`doorbell`]: how other threads ask a core to drive a flow.
//! - [`setup`]: the control core's TCP: listeners, active opens, the
//!   handshake, hand-over to a dataplane core.
//! - [`core`]: a dataplane core's TCP.
//! - [`host`]: all of it on one port, on threads.
//! - [`rdma`]: iWARP on it: the MPA startup on the control core, Full
//!   Operation on the dataplane cores.

pub mod app;
pub mod clock;
pub mod core;
mod deadlines;
pub mod doorbell;
pub mod flow;
pub mod frame_memory;
pub mod host;
pub mod rdma;
pub mod route;
pub mod setup;

pub use app::{End, TcpApp};
pub use clock::Clock;
pub use core::{ClosedFlows, TcpCore, TcpCoreCounters};
pub use doorbell::Doorbell;
pub use flow::{FlowCounters, TcpFlow};
pub use frame_memory::FrameMemory;
pub use host::{HostConfig, HostReport, TcpHost};
pub use route::Route;
pub use setup::{AppFactory, SetupCounters, TcpRequests, TcpSetup};
