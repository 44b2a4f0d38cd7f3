//! The error type of the control core's calls.

use std::fmt;

/// Why a call to the control core failed.
#[derive(Debug)]
pub enum Error {
    /// An argument is out of range; the text says which.
    InvalidArgument(&'static str),
    /// The host is not in a state for this call; the text says why.
    WrongState(&'static str),
    /// The host's cores are gone.
    DeviceClosed,
    /// DPDK refused (port, queue or mempool set-up).
    Dpdk(uwarp_dataplane::Error),
    /// A port beside the kernel (`HostConfig::beside_kernel`) found no
    /// steering program of uwarp's on its interface.
    BesideKernel(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Self::WrongState(what) => write!(f, "wrong state: {what}"),
            Self::DeviceClosed => write!(f, "the device is closed"),
            Self::Dpdk(err) => write!(f, "DPDK: {err}"),
            Self::BesideKernel(err) => write!(f, "beside the kernel: {err}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<uwarp_dataplane::Error> for Error {
    fn from(err: uwarp_dataplane::Error) -> Self {
        Self::Dpdk(err)
    }
}
