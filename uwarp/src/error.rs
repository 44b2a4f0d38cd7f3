//! The one error type of the public API.

use std::fmt;
use std::io;

use uwarp_stack::mem::MemError;
use uwarp_stack::mpa::StartupError;

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// The operating system refused (socket calls).
    Io(io::Error),
    /// The MPA startup phase failed (malformed frame, negotiation, timeout,
    /// peer closed).
    Startup(StartupError),
    /// The responder rejected the connection, with its private data.
    Rejected {
        /// The responder's private data.
        private_data: Vec<u8>,
    },
    /// Memory registration failed.
    Mem(MemError),
    /// An argument is out of range; the text says which.
    InvalidArgument(&'static str),
    /// The queue pair, listener or device is not in a state for this call.
    WrongState(&'static str),
    /// Nothing happened before the deadline.
    Timeout,
    /// The device's threads are gone: it was closed, or it is the
    /// device of the parent of this child of `fork`.
    DeviceClosed,
    /// DPDK refused (EAL, port, queue or mempool set-up).
    Dpdk(uwarp_dataplane::Error),
    /// The DPDK transport could not be set up as its `DpdkConfig` says:
    /// the EAL did not start (with the reason the EAL printed), or the
    /// port could not be created or found. The text names the port or
    /// the EAL's complaint.
    DpdkSetup(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(err) => write!(f, "I/O error: {err}"),
            Self::Startup(err) => write!(f, "{err}"),
            Self::Rejected { private_data } => {
                write!(
                    f,
                    "connection rejected ({} octets of private data)",
                    private_data.len()
                )
            }
            Self::Mem(err) => write!(f, "memory registration: {err}"),
            Self::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Self::WrongState(what) => write!(f, "wrong state: {what}"),
            Self::Timeout => write!(f, "timed out"),
            Self::DeviceClosed => write!(f, "the device is closed"),
            Self::Dpdk(err) => write!(f, "DPDK: {err}"),
            Self::DpdkSetup(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

impl From<StartupError> for Error {
    fn from(err: StartupError) -> Self {
        Self::Startup(err)
    }
}

impl From<MemError> for Error {
    fn from(err: MemError) -> Self {
        Self::Mem(err)
    }
}

impl From<uwarp_dataplane::Error> for Error {
    fn from(err: uwarp_dataplane::Error) -> Self {
        Self::Dpdk(err)
    }
}

/// The control core's errors keep their meaning (and their words).
impl From<uwarp_control::Error> for Error {
    fn from(err: uwarp_control::Error) -> Self {
        match err {
            uwarp_control::Error::InvalidArgument(what) => Self::InvalidArgument(what),
            uwarp_control::Error::WrongState(what) => Self::WrongState(what),
            uwarp_control::Error::DeviceClosed => Self::DeviceClosed,
            uwarp_control::Error::Dpdk(err) => Self::Dpdk(err),
            err @ uwarp_control::Error::BesideKernel(_) => Self::DpdkSetup(err.to_string()),
        }
    }
}
