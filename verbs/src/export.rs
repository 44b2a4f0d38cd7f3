//! How a function becomes part of the C ABI: its symbol version, the
//! guard every entry point runs its body in, and the set of handles
//! alive ([`LiveHandles`]).
//!
//! rustc links a `cdylib` with a version script of its own, which leaves
//! exports unversioned; applications linked against rdma-core ask for
//! `ibv_reg_mr@IBVERBS_1.1`. An assembler `.symver name, name@@@NODE`
//! directive renames the export to its default version at `NODE` (a node
//! of `versions.map`, which build.rs hands the linker), so
//! `readelf --dyn-syms` shows `ibv_reg_mr@@IBVERBS_1.1` and nothing
//! unversioned.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::abi::verbs::{IbvRecvWr, IbvSendWr};

/// Gives each exported function its symbol version:
/// `symbol_versions! { ibv_open_device => "IBVERBS_1.1", ... }`.
///
/// Test builds of the crate (its unit tests link an executable, which has
/// no version script) leave the names as they are.
macro_rules! symbol_versions {
    ($($name:ident => $node:literal),+ $(,)?) => {
        #[cfg(not(test))]
        core::arch::global_asm!($(
            concat!(".symver ", stringify!($name), ", ", stringify!($name), "@@@", $node),
        )+);
    };
}
pub(crate) use symbol_versions;

/// Sets the calling thread's `errno`.
pub fn set_errno(value: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot,
    // valid for writes for the thread's whole life.
    unsafe { *libc::__errno_location() = value };
}

/// Runs the body of a C entry point. A panic must not unwind into C (it
/// would abort the application): it becomes `failed`, with `errno` set to
/// `EIO`, after the panic hook has printed where it happened.
///
/// The body runs with the thread's cancellation disabled
/// ([`CancellationDeferred`]): a cancellation acted on inside it would
/// unwind into `catch_unwind`, which cannot catch glibc's forced unwind
/// and aborts the program ("FATAL: exception not rethrown"). A
/// cancellation pending then is acted on at the thread's next
/// cancellation point after the call. Verbs that wait (and so are
/// cancellation points in rdma-core) wait outside the guard, in frames
/// that only call `extern "C"` functions ([`wait_record`]).
pub fn guard<T>(failed: T, body: impl FnOnce() -> T) -> T {
    let _deferred = CancellationDeferred::new();
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        failed
    })
}

/// `PTHREAD_CANCEL_DISABLE` of glibc's `<pthread.h>` (the `libc` crate
/// has neither it nor the function).
const PTHREAD_CANCEL_DISABLE: i32 = 1;

extern "C" {
    /// glibc's `pthread_setcancelstate`.
    fn pthread_setcancelstate(state: i32, earlier: *mut i32) -> i32;
}

/// The calling thread's cancellation disabled while this lives, then its
/// earlier state restored (`pthread_setcancelstate`).
pub struct CancellationDeferred {
    earlier: i32,
}

impl CancellationDeferred {
    /// Disables cancellation, remembering the state to restore. Under
    /// Miri, which has no thread cancellation (and to which
    /// `pthread_setcancelstate` is a foreign function), it does nothing.
    pub fn new() -> Self {
        let mut earlier = 0;
        if cfg!(miri) {
            return Self { earlier };
        }
        // SAFETY: `earlier` is valid for the write; the state is a valid
        // value.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &raw mut earlier) };
        Self { earlier }
    }
}

impl Default for CancellationDeferred {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for CancellationDeferred {
    fn drop(&mut self) {
        let mut ignored = 0;
        if cfg!(miri) {
            return;
        }
        // SAFETY: restores the state `new` read.
        unsafe { pthread_setcancelstate(self.earlier, &raw mut ignored) };
    }
}

/// Runs the body of a C entry point that answers a pointer: `Ok` is the
/// answer; `Err(errno)` answers NULL with `errno` set (a panic: NULL with
/// `EIO`, as [`guard`]).
pub fn pointer_or_errno<T>(body: impl FnOnce() -> Result<*mut T, i32>) -> *mut T {
    guard(core::ptr::null_mut(), || {
        body().unwrap_or_else(|errno| {
            set_errno(errno);
            core::ptr::null_mut()
        })
    })
}

/// A work request in a chain the application posts.
pub trait Chained {
    /// The next request of the chain (NULL after the last).
    fn next(&self) -> *mut Self;
}

impl Chained for IbvSendWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Chained for IbvRecvWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts a chain of work requests one by one with `post`: 0, or the
/// first refusal's `errno` value with `*bad` (when not NULL) the request
/// refused, as `ibv_post_send` and its kin answer.
///
/// # Safety
///
/// `first` is NULL or a valid chain; `bad` is NULL or writable.
pub unsafe fn post_chain<W: Chained>(
    first: *mut W,
    bad: *mut *mut W,
    mut post: impl FnMut(&W) -> Result<(), i32>,
) -> i32 {
    // The chain's requests go out together (one write on the socket
    // transport).
    guard(libc::EIO, || {
        uwarp::post_together(|| {
            let mut request = first;
            while !request.is_null() {
                // SAFETY: the caller promises a valid chain.
                let this = unsafe { &*request };
                if let Err(errno) = post(this) {
                    if !bad.is_null() {
                        // SAFETY: the caller promises it is writable.
                        unsafe { bad.write(request) };
                    }
                    return errno;
                }
                request = this.next();
            }
            0
        })
    })
}

/// Sets the calling thread's `errno` and returns -1: the failure of a verb
/// answering -1. An `extern "C"` function, so that a waiting frame (see
/// [`wait_record`]) may call it without gaining an unwinding table.
pub extern "C" fn fail(errno: i32) -> i32 {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() = errno };
    -1
}

/// Waits for one 8-octet record on `fd`, a channel's pipe (a queue's
/// token, an event's address), with the kernel's `read()` semantics: 0,
/// or -1 with `errno` set (`EAGAIN` on a non-blocking descriptor, `EINTR`
/// when a signal without `SA_RESTART` interrupts it).
///
/// It calls only `extern "C"` functions, and so do the verbs that wait
/// through it (`ibv_get_cq_event`, `rdma_get_cm_event`,
/// `ibv_get_async_event`): their frames have no unwinding table, so a
/// thread cancelled while it waits (rping cancels its completion thread
/// so) unwinds through them as through C. A Rust call there could unwind,
/// and rustc would guard it with an abort-on-unwind landing pad whose
/// table stops the cancellation's unwinding; even a raw-pointer
/// dereference is such a call in unoptimised builds, so callers read
/// their descriptor in a frame of its own.
///
/// # Safety
///
/// `record` is valid for a write of 8 octets.
pub unsafe extern "C" fn wait_record(fd: i32, record: *mut u64) -> i32 {
    // SAFETY: the caller promises `record` is writable.
    let got = unsafe { libc::read(fd, record as *mut libc::c_void, 8) };
    if got == 0 {
        // End of file: the channel was destroyed while this thread waited
        // on it. The kernel's descriptor leaves such a reader blocked (a
        // program may destroy its channel while a thread still waits, as
        // rping does on its way out): so does this, until a signal
        // interrupts it.
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
        return fail(libc::EINTR);
    }
    if got == 8 {
        0
    } else if got < 0 {
        -1
    } else {
        fail(libc::EIO)
    }
}

/// The `errno` value that says what `error` is.
pub fn errno_of(error: &uwarp::Error) -> i32 {
    match error {
        uwarp::Error::Io(err) => err
            .raw_os_error()
            .unwrap_or_else(|| errno_of_kind(err.kind())),
        uwarp::Error::InvalidArgument(_) | uwarp::Error::Mem(_) => libc::EINVAL,
        uwarp::Error::WrongState(_) => libc::EINVAL,
        uwarp::Error::Timeout => libc::ETIMEDOUT,
        uwarp::Error::Rejected { .. } => libc::ECONNREFUSED,
        uwarp::Error::DeviceClosed => libc::ENODEV,
        uwarp::Error::Startup(_) => libc::ECONNRESET,
        uwarp::Error::Dpdk(_) | uwarp::Error::DpdkSetup(_) => libc::ENODEV,
    }
}

/// The `errno` value for an I/O error that carries none (uwarp's own TCP
/// reports how a connection ended by its kind): what the kernel's TCP
/// would have said.
fn errno_of_kind(kind: std::io::ErrorKind) -> i32 {
    use std::io::ErrorKind;
    match kind {
        ErrorKind::TimedOut => libc::ETIMEDOUT,
        ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
        ErrorKind::ConnectionReset => libc::ECONNRESET,
        ErrorKind::ConnectionAborted => libc::ECONNABORTED,
        ErrorKind::HostUnreachable => libc::EHOSTUNREACH,
        ErrorKind::NetworkUnreachable => libc::ENETUNREACH,
        ErrorKind::AddrNotAvailable => libc::EADDRNOTAVAIL,
        ErrorKind::AddrInUse => libc::EADDRINUSE,
        _ => libc::EIO,
    }
}

/// The handles of one kind (addresses of objects the library made for the
/// application) alive now. An entry point handed one that is not, such
/// as a handle the application already destroyed (perftest 4.5 connects
/// again with a destroyed id, then destroys it a second time, after a
/// rejection), fails with `EINVAL` instead of touching freed memory.
///
/// A destroyed handle's memory is not freed at once but retired
/// ([`LiveHandles::retire`]): the last [`RETIRED_KEPT`] destroyed handles
/// of a kind keep their addresses, so a stale handle among them is never
/// mistaken for a new object made at the same address. Older stale
/// handles are what they are in rdma-core: undefined behaviour of the
/// program.
#[derive(Debug)]
pub struct LiveHandles {
    live: Mutex<BTreeSet<usize>>,
    retired: Mutex<std::collections::VecDeque<Retired>>,
}

/// How many destroyed handles of each kind keep their memory.
pub const RETIRED_KEPT: usize = 256;

/// A destroyed object's memory, and how to free it. Kept as a pointer,
/// not an address: what follows pointers (Miri's leak check) sees the
/// memory kept, not lost.
struct Retired {
    object: *mut (),
    free: unsafe fn(*mut ()),
}

// SAFETY: a retired object is used by nothing but its one `free`, which
// runs on whichever thread retires the object that pushes it out (as
// when its address was kept as an integer).
unsafe impl Send for Retired {}

impl std::fmt::Debug for Retired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Retired({:p})", self.object)
    }
}

impl LiveHandles {
    /// An empty set.
    pub const fn new() -> Self {
        Self {
            live: Mutex::new(BTreeSet::new()),
            retired: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<usize>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the memory of `object`, a destroyed handle already
    /// [`remove`](Self::remove)d, until [`RETIRED_KEPT`] more have been
    /// retired; then frees it.
    pub fn retire<T>(&self, object: Box<T>) {
        /// Frees what `retire` kept.
        ///
        /// # Safety
        ///
        /// `object` came from `Box::<T>::into_raw`, once.
        unsafe fn free<T>(object: *mut ()) {
            // SAFETY: the caller's promise.
            drop(unsafe { Box::from_raw(object.cast::<T>()) });
        }
        let object = Box::into_raw(object).cast::<()>();
        let oldest = {
            let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            retired.push_back(Retired {
                object,
                free: free::<T>,
            });
            if retired.len() > RETIRED_KEPT {
                retired.pop_front()
            } else {
                None
            }
        };
        if let Some(oldest) = oldest {
            // SAFETY: retired once, by `retire` with its own `free`.
            unsafe { (oldest.free)(oldest.object) };
        }
    }

    /// Records `handle` as alive.
    pub fn insert<T>(&self, handle: *mut T) {
        self.set().insert(handle as usize);
    }

    /// Records `handle` as destroyed; `false` if it was not alive.
    pub fn remove<T>(&self, handle: *mut T) -> bool {
        self.set().remove(&(handle as usize))
    }

    /// Whether `handle` is alive (NULL never is).
    pub fn contains<T>(&self, handle: *mut T) -> bool {
        self.set().contains(&(handle as usize))
    }
}

impl Default for LiveHandles {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LiveHandles {
    /// Frees what the set still keeps (a set in a static is never
    /// dropped: its handles' memory is kept for the life of the process).
    fn drop(&mut self) {
        let retired = self.retired.get_mut().unwrap_or_else(|e| e.into_inner());
        for kept in retired.drain(..) {
            // SAFETY: retired once, by `retire` with its own `free`, and
            // out of the list now.
            unsafe { (kept.free)(kept.object) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// uwarp's TCP on DPDK reports how a connect ended by the error's
    /// kind alone: the application sees the errno the kernel's TCP gives.
    #[test]
    fn an_io_error_without_an_os_code_keeps_its_meaning() {
        use std::io::{Error, ErrorKind};
        for (kind, errno) in [
            (ErrorKind::TimedOut, libc::ETIMEDOUT),
            (ErrorKind::HostUnreachable, libc::EHOSTUNREACH),
            (ErrorKind::ConnectionRefused, libc::ECONNREFUSED),
            (ErrorKind::ConnectionAborted, libc::ECONNABORTED),
            (ErrorKind::Other, libc::EIO),
        ] {
            let error = uwarp::Error::Io(Error::new(kind, "the connection ended"));
            assert_eq!(errno_of(&error), errno, "{kind:?}");
        }
        let os = uwarp::Error::Io(Error::from_raw_os_error(libc::ENETDOWN));
        assert_eq!(errno_of(&os), libc::ENETDOWN);
    }

    /// An object that counts its drops.
    struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The handle registry the C entry points check every handle against,
    /// used from two threads at once as applications do: a handle is
    /// alive from insert to remove, once; a destroyed one's memory is
    /// kept for the last RETIRED_KEPT and freed exactly once after (and
    /// when the set is dropped). Under Miri this checks the type-erased
    /// frees (`retire`'s pointers) for double frees, leaks and races.
    #[test]
    fn handles_live_once_and_retired_memory_is_freed_once_oldest_first() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;

        let dropped = Arc::new(AtomicUsize::new(0));
        let handles = LiveHandles::new();
        let per_thread = RETIRED_KEPT / 2 + 20;
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    for _ in 0..per_thread {
                        let handle = Box::into_raw(Box::new(Counted(dropped.clone())));
                        handles.insert(handle);
                        assert!(handles.contains(handle));
                        assert!(handles.remove(handle));
                        assert!(!handles.contains(handle), "destroyed once");
                        assert!(!handles.remove(handle), "destroyed once");
                        // SAFETY: made above by Box::into_raw, out of the
                        // set, used by nothing else.
                        handles.retire(unsafe { Box::from_raw(handle) });
                    }
                });
            }
        });
        assert!(!handles.contains(core::ptr::null_mut::<Counted>()));
        let made = 2 * per_thread;
        assert_eq!(dropped.load(Ordering::Relaxed), made - RETIRED_KEPT);
        drop(handles);
        assert_eq!(dropped.load(Ordering::Relaxed), made);
    }
}
