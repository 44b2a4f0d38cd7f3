//! The types applications see: work requests, work completions and queue
//! pair states, with the names of the RDMAC verbs (the iWARP verbs
//! specification) and libibverbs, so that anyone who has posted a
//! `ibv_send_wr` recognises them. No RFC defines this interface; the
//! completions follow RFC 5040 section 5's ordering and completion rules,
//! and the states are the model RFC 5040 section 6.6 refers to for stream
//! teardown.
//!
//! - [`Sge`], [`SendWr`], [`SendOp`], [`RecvWr`]: what is posted (`wr.rs`).
//! - [`WorkCompletion`], [`WcStatus`], [`WcOpcode`]: what is polled from a
//!   completion queue (`completion.rs`).
//! - [`QpState`]: the RDMAC verbs queue pair states (`qp_state.rs`).

mod completion;
mod qp_state;
mod wr;

pub use completion::{WcOpcode, WcStatus, WorkCompletion};
pub use qp_state::QpState;
pub use wr::{Payload, RecvWr, SendOp, SendWr, Sge};
