//! What a received Terminate (RFC 5040 section 4.8) does to the work it
//! ends: the completion status it gives the oldest unfinished send work
//! request. The Terminates this end sends are built by
//! [`crate::wire::terminate_ulpdu`].

use crate::verbs::{WcOpcode, WcStatus, WorkCompletion};
use crate::wire::terminate::{ErrorType, TermError};

/// The completion a Terminate carrying `error` gives the oldest unfinished
/// send work request (the rest are flushed).
pub fn completion_for(error: TermError) -> WorkCompletion {
    let status = match error.error_type() {
        ErrorType::RemoteProtection | ErrorType::TaggedBuffer => WcStatus::RemoteAccessError,
        ErrorType::RemoteOperation | ErrorType::UntaggedBuffer => WcStatus::RemoteOperationError,
        ErrorType::LocalCatastrophic | ErrorType::Mpa => WcStatus::FatalError,
    };
    WorkCompletion {
        terminate: Some(error),
        ..WorkCompletion::new(0, WcOpcode::Send, status)
    }
}
