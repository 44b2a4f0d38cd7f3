//! The one uwarp device behind the drop-in libraries: opened the first
//! time an application opens its verbs device (never in a library
//! constructor: servers that fork before any RDMA call must not inherit
//! its threads), configured from the environment, and kept for the life
//! of the process.
//!
//! Its threads are started with every signal blocked, so that signals
//! meant for the process (`SIGALRM` from `alarm()`, `SIGINT`) reach the
//! application's own threads, as they do when the RNIC is hardware.
//!
//! Environment:
//! - `UWARP_TRANSPORT`: `socket` (the default: iWARP over the kernel's
//!   TCP, no set-up, any number of processes per host).

use std::sync::OnceLock;

use uwarp::{Device, DeviceConfig};

/// The process's device, or why it could not be opened (`errno`, message).
static DEVICE: OnceLock<Result<Device, (i32, String)>> = OnceLock::new();

/// The process's uwarp device, opened on first use; on failure the
/// `errno` to answer with (the reason is printed once, on standard error).
pub fn device() -> Result<&'static Device, i32> {
    let opened = DEVICE.get_or_init(|| {
        let opened = with_signals_blocked(open);
        if let Err((_, reason)) = &opened {
            eprintln!("uwarp: cannot open the device: {reason}");
        }
        opened
    });
    opened.as_ref().map_err(|(errno, _)| *errno)
}

/// Opens the device the environment describes.
fn open() -> Result<Device, (i32, String)> {
    let transport = std::env::var("UWARP_TRANSPORT").unwrap_or_else(|_| "socket".into());
    match transport.as_str() {
        "socket" => Device::open(DeviceConfig::default())
            .map_err(|e| (crate::export::errno_of(&e), e.to_string())),
        other => Err((
            libc::EINVAL,
            format!("UWARP_TRANSPORT={other}: the transports are: socket"),
        )),
    }
}

/// Runs `f` on a new thread that has every signal blocked (threads it
/// starts inherit the mask), and returns what it returned.
fn with_signals_blocked<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let result = blocking_signals(|| std::thread::scope(|scope| scope.spawn(f).join()));
    match result {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Starts a library thread named `name` running `f`, with every signal
/// blocked in it.
pub fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let builder = std::thread::Builder::new().name(name.to_owned());
    blocking_signals(|| builder.spawn(f))
}

/// Runs `f` with every signal blocked on the calling thread (so threads
/// it starts inherit the mask), then restores the mask.
fn blocking_signals<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: `all` and `previous` are plain sigset_t values owned by this
    // frame; sigfillset and pthread_sigmask only write them and the
    // calling thread's mask.
    let previous = unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        let mut previous = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous);
        previous
    };
    let result = f();
    // SAFETY: restores the mask saved above on the calling thread.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    result
}
