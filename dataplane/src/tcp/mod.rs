//! TCP on the dataplane cores: the engine of `uwarp_stack::tcp` (RFC 9293
//! and the MPA-aware behaviour of RFC 5044 Appendix A) on the poll-mode
//! runtime of this crate. The control core's half (listeners, active
//! opens, handshakes, the hand-over of a flow to its dataplane core) is
//! the `uwarp-control` crate's.
//!
//! - [`clock`]: engine time shared by every core.
//! - [`route`]: the Ethernet/IPv4 headers of a connection's frames.
//! - [`app`]: [`TcpApp`], what runs above a connection.
//! - [`flow`]: a connection with its application and route.
//! - [`frame_memory`]: the memory a connection's frames carry payloads
//!   from by reference.
//! - [`doorbell`]: how other threads ask a core to drive a flow.
//! - [`deadlines`]: the timer wheel of a core's flows.
//! - [`core`]: a dataplane core's TCP.

pub mod app;
pub mod clock;
pub mod core;
pub mod deadlines;
pub mod doorbell;
pub mod flow;
pub mod frame_memory;
pub mod route;

pub use app::{End, TcpApp};
pub use clock::Clock;
pub use core::{ClosedFlows, TcpCore, TcpCoreCounters};
pub use doorbell::Doorbell;
pub use flow::{FlowCounters, TcpFlow};
pub use frame_memory::FrameMemory;
pub use route::Route;
