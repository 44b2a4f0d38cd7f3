//! MPA (RFC 5044, RFC 6581): the negotiation rules and the initiator and
//! responder state machines of the startup phase (RFC 5044 section 7,
//! RFC 6581 sections 5 and 8-10), and the FPDU writer and reader of Full
//! Operation over a byte stream (RFC 5044 sections 4 and 5). The formats
//! themselves are in [`crate::wire::mpa`], [`crate::wire::fpdu`] and
//! [`crate::wire::marker`]; the writer frames into an
//! [`FpduSink`](crate::record::FpduSink), the transport's record
//! interface.

pub mod framer;
pub mod negotiation;
pub mod startup;

pub use framer::{FpduReader, FpduWriter, FramingError};
pub use negotiation::{LocalParams, Negotiated, NegotiationError, Rtr, RtrSet};
pub use startup::{ConnectRequest, Initiator, InitiatorOutcome, Micros, Responder, StartupError};
