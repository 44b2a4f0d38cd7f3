//! The error type of the dataplane's safe wrappers.

use std::ffi::CStr;
use std::fmt;

/// What went wrong in a DPDK call or in the arguments given to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A DPDK function failed; `errno` is the positive error number it
    /// returned or left in `rte_errno`.
    Dpdk {
        /// The DPDK function that failed.
        op: &'static str,
        /// The error number (`libc` errno or one of DPDK's `E_RTE_*`).
        errno: i32,
    },
    /// `rte_eal_init` already ran in this process with other arguments; the
    /// EAL cannot be initialised twice.
    EalAlreadyInitialised {
        /// The arguments the running EAL was started with.
        running: Vec<String>,
        /// The arguments of the refused call.
        requested: Vec<String>,
    },
    /// An argument cannot be passed to DPDK (a name too long or containing
    /// NUL, a count out of range, ...).
    InvalidArgument(String),
    /// The device or the EAL mode does not support the request.
    Unsupported(String),
    /// The mempool had no free mbuf.
    NoMbufs,
    /// The link stayed down for as long as the caller waited.
    LinkDown {
        /// How long the caller waited.
        waited: std::time::Duration,
    },
}

impl Error {
    /// An error from a DPDK call that returned `-errno`.
    pub(crate) fn from_neg(op: &'static str, ret: i32) -> Self {
        Error::Dpdk { op, errno: -ret }
    }

    /// An error from a DPDK call that returned NULL (or -1) and set
    /// `rte_errno`.
    pub(crate) fn from_errno(op: &'static str) -> Self {
        // SAFETY: reads the calling thread's rte_errno.
        let errno = unsafe { dpdk_sys::shim_rte_errno() };
        Error::Dpdk { op, errno }
    }
}

/// DPDK's text for an error number.
pub(crate) fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string in
    // thread-local storage (or a static one), valid until the next call on
    // this thread; it is copied at once.
    unsafe {
        let p = dpdk_sys::rte_strerror(errno);
        if p.is_null() {
            return format!("error {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dpdk { op, errno } => write!(f, "{op} failed: {} ({errno})", strerror(*errno)),
            Error::EalAlreadyInitialised { running, requested } => write!(
                f,
                "the DPDK EAL is already initialised with {running:?} and cannot be \
                 initialised again with {requested:?}"
            ),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
            Error::NoMbufs => f.write_str("the mempool has no free mbuf"),
            Error::LinkDown { waited } => write!(f, "the link stayed down for {waited:?}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of the dataplane's safe wrappers.
pub type Result<T> = std::result::Result<T, Error>;

/// Converts `s` into a C string, refusing interior NUL and names longer
/// than `max` bytes (DPDK truncates or rejects those).
pub(crate) fn c_name(what: &str, s: &str, max: usize) -> Result<std::ffi::CString> {
    if s.len() > max {
        return Err(Error::InvalidArgument(format!(
            "{what} {s:?} is longer than {max} bytes"
        )));
    }
    std::ffi::CString::new(s)
        .map_err(|_| Error::InvalidArgument(format!("{what} {s:?} contains NUL")))
}
