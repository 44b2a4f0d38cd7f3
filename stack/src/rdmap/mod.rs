//! RDMAP (RFC 5040): the queue-pair engine and its pieces: data transfer
//! (section 5), stream management (section 6), error management and
//! Terminate (section 7), with the RTR of RFC 6581.
//!
//! - [`QpEngine`]: one stream in Full Operation, sans-IO (`engine/`).
//! - [`OutboundReads`], [`InboundReads`]: the RDMA Read queues under the
//!   negotiated ORD and IRD (`read_queue.rs`).
//! - [`RecvSlot`], [`SharedReceiveQueue`]: posted receives and the shared
//!   receive queue (`recv_queue.rs`).
//! - `check` (with the `testing` feature): the engine's oracle, shared
//!   by the fuzz target and the tests.

#[cfg(feature = "testing")]
pub mod check;
pub mod engine;
pub mod read_queue;
pub mod recv_queue;

pub use engine::{CqKind, EngineConfig, EngineCounters, LlpClose, QpEngine, QpEvent, Role};
pub use read_queue::{InboundReads, OutboundReads, ResponseSegment};
pub use recv_queue::{RecvSlot, SharedReceiveQueue};
