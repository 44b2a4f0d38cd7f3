//! Why a perftest run failed.

use std::fmt;

use uwarp_stack::rdmap::QpEvent;
use uwarp_stack::verbs::{WcOpcode, WorkCompletion};

use uwarp::Error;

/// Why a run failed.
#[derive(Debug)]
pub enum PerftestError {
    /// A uwarp call failed (connect, accept, registration, posting).
    Api(Error),
    /// The options are out of perftest's ranges; the text says which.
    BadOptions(String),
    /// The peer's perftest is older than 5.70, or its version message is
    /// no version at all (perftest: "Current implementation is not
    /// compatible with versions older than 5.70").
    IncompatibleVersion {
        /// The peer's version text.
        peer: String,
    },
    /// A comm channel message of the wrong length arrived.
    MessageLength {
        /// The message awaited.
        what: &'static str,
        /// Its length.
        expected: usize,
        /// What arrived.
        got: u32,
    },
    /// A comm channel message longer than the receive buffer arrived
    /// (this side answered it with a Terminate).
    MessageTooLong {
        /// The message awaited.
        what: &'static str,
        /// The receive buffer's length.
        limit: usize,
    },
    /// A work request failed.
    Completion {
        /// What was awaited.
        waiting_for: &'static str,
        /// The completion.
        wc: WorkCompletion,
    },
    /// Something other than the awaited completion arrived.
    Unexpected {
        /// What was awaited.
        waiting_for: &'static str,
        /// What completed instead.
        got: WcOpcode,
    },
    /// A Terminate was sent or received.
    Terminated(QpEvent),
    /// The connection closed while a step was awaited.
    Disconnected {
        /// What was awaited.
        waiting_for: &'static str,
    },
    /// A step took longer than the options' timeout.
    Timeout {
        /// What was awaited.
        waiting_for: &'static str,
    },
    /// What arrived does not match what the run says crossed.
    Mismatch {
        /// What was counted.
        what: &'static str,
        /// What the run says.
        expected: u64,
        /// What this side counted.
        counted: u64,
    },
}

impl fmt::Display for PerftestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Api(err) => write!(f, "{err}"),
            Self::BadOptions(what) => write!(f, "{what}"),
            Self::IncompatibleVersion { peer } => write!(
                f,
                "the peer's perftest version is {peer:?}; perftest-compatible mode needs 5.70 or later"
            ),
            Self::MessageLength {
                what,
                expected,
                got,
            } => write!(
                f,
                "the peer's {what} message has {got} octets, not {expected}"
            ),
            Self::MessageTooLong { what, limit } => write!(
                f,
                "the peer's {what} message is longer than the {limit}-octet receive buffer"
            ),
            Self::Completion { waiting_for, wc } => match wc.terminate {
                Some(error) => write!(
                    f,
                    "waiting for {waiting_for}: {:?} with a Terminate ({error:?})",
                    wc.status
                ),
                None => write!(f, "waiting for {waiting_for}: {:?}", wc.status),
            },
            Self::Unexpected { waiting_for, got } => {
                write!(f, "waiting for {waiting_for}, got a {got:?} completion")
            }
            Self::Terminated(event) => write!(f, "the stream was terminated: {event:?}"),
            Self::Disconnected { waiting_for } => {
                write!(f, "the peer disconnected while this side waited for {waiting_for}")
            }
            Self::Timeout { waiting_for } => write!(f, "timed out waiting for {waiting_for}"),
            Self::Mismatch {
                what,
                expected,
                counted,
            } => write!(f, "{what}: the run says {expected}, this side counted {counted}"),
        }
    }
}

impl std::error::Error for PerftestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Api(err) => Some(err),
            _ => None,
        }
    }
}

impl From<Error> for PerftestError {
    fn from(err: Error) -> Self {
        Self::Api(err)
    }
}
