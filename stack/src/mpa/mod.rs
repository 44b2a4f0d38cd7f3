//! MPA connection setup (RFC 5044 section 7, RFC 6581): the negotiation
//! rules and the initiator and responder state machines of the startup
//! phase. Framing of Full Operation is in [`crate::wire::fpdu`] and
//! [`crate::wire::marker`].

pub mod negotiation;
pub mod startup;

pub use negotiation::{LocalParams, Negotiated, NegotiationError, Rtr, RtrSet};
pub use startup::{ConnectRequest, Initiator, InitiatorOutcome, Micros, Responder, StartupError};
