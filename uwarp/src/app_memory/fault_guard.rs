//! The SIGSEGV/SIGBUS handler that turns a fault in a guarded copy
//! ([`resume_after_fault`]) into an error the copy returns, the way the
//! kernel's exception table turns a fault in `copy_to_user` into
//! `-EFAULT`; every other fault goes to the handler the program had.
//!
//! Installed once per process, by the first registration of application
//! memory ([`install`]), with `SA_SIGINFO | SA_ONSTACK` (a program that
//! handles stack overflows on an alternate stack keeps doing so). The
//! dispositions found then are kept and chained to:
//!
//! - a handler of the program's is called as the kernel would have called
//!   it (with its `siginfo_t` and context when it asked for them), on the
//!   same stack and with the same signals blocked as ours (its own
//!   `sa_mask` and `SA_NODEFER`/`SA_RESETHAND` are not reproduced);
//! - the default action is restored and the fault happens again (the
//!   faulting instruction runs again when the handler returns), so the
//!   process dies of the same signal with the same core dump; a signal
//!   sent with `kill` is raised again instead;
//! - an ignored signal stays ignored when sent with `kill`; a fault gets
//!   the default action, as the kernel forces it on a fault it cannot
//!   deliver.
//!
//! A handler the program installs *after* the first registration replaces
//! this one (uwarp does not interpose `sigaction`): if it chains to the
//! disposition it found, as crash reporters and language runtimes do,
//! guarded copies still recover; if it does not, a fault in a guarded
//! copy is that handler's, as any fault in the process would be.

use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Once;

use uwarp_stack::mem::{resume_after_fault, GUARDED};

/// The signals a fault in a copy raises: an unmapped or protected page
/// (SIGSEGV), a page of a truncated file (SIGBUS).
const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// The disposition each of [`SIGNALS`] had before ours, leaked so that the
/// handler reads it without a lock; null until installed.
static PREVIOUS: [AtomicPtr<libc::sigaction>; 2] = [
    AtomicPtr::new(ptr::null_mut()),
    AtomicPtr::new(ptr::null_mut()),
];

/// Installs the handler for SIGSEGV and SIGBUS, once per process; later
/// calls do nothing. On a target whose copies cannot be resumed
/// ([`GUARDED`] false) nothing is installed.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    if GUARDED {
        ONCE.call_once(|| {
            for (signal, previous) in SIGNALS.into_iter().zip(&PREVIOUS) {
                install_for(signal, previous);
            }
        });
    }
}

/// Keeps `signal`'s current disposition in `previous`, then installs
/// [`on_fault`] for it. A failure leaves the disposition as it was.
fn install_for(signal: c_int, previous: &AtomicPtr<libc::sigaction>) {
    // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, no flags,
    // an empty mask).
    let mut found: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: a valid signal number; the kernel writes `found`.
    if unsafe { libc::sigaction(signal, ptr::null(), &mut found) } != 0 {
        return;
    }
    // Published before ours is installed: the handler never sees null.
    previous.store(Box::into_raw(Box::new(found)), Ordering::Release);
    // SAFETY: as above.
    let mut ours: libc::sigaction = unsafe { core::mem::zeroed() };
    ours.sa_sigaction = on_fault as *const () as usize;
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `ours.sa_mask` is a valid set to empty; installing a handler
    // of the right signature for a valid signal.
    unsafe {
        libc::sigemptyset(&mut ours.sa_mask);
        libc::sigaction(signal, &ours, ptr::null_mut());
    }
}

/// The handler: resumes a guarded copy that faulted, and hands every
/// other signal to the disposition the program had. Async-signal-safe:
/// it reads atomics and the context, and calls only `sigaction`, `raise`
/// and the previous handler.
extern "C" fn on_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo; a positive si_code means
    // the kernel raised the signal for a fault (not kill or sigqueue).
    let fault = unsafe { (*info).si_code } > 0;
    // SAFETY: with SA_SIGINFO, `context` is the interrupted thread's
    // ucontext, which the handler may change to resume elsewhere.
    if fault && unsafe { resume_guarded_copy(context.cast()) } {
        return;
    }
    let which = usize::from(signal == libc::SIGBUS);
    let previous = PREVIOUS[which].load(Ordering::Acquire);
    // SAFETY: published (never freed) before this handler was installed.
    let previous = unsafe { &*previous };
    match previous.sa_sigaction {
        libc::SIG_IGN if !fault => {}
        libc::SIG_DFL | libc::SIG_IGN => {
            // SAFETY: all-zero is SIG_DFL with no flags; restoring it for
            // a valid signal.
            unsafe {
                let default: libc::sigaction = core::mem::zeroed();
                libc::sigaction(signal, &default, ptr::null_mut());
                // A fault happens again when the instruction restarts; a
                // sent signal must be sent again (it stays blocked until
                // this handler returns).
                if !fault {
                    libc::raise(signal);
                }
            }
        }
        handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the program installed this as an SA_SIGINFO handler.
            let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { core::mem::transmute(handler) };
            handler(signal, info, context);
        }
        handler => {
            // SAFETY: the program installed this as a plain handler.
            let handler: extern "C" fn(c_int) = unsafe { core::mem::transmute(handler) };
            handler(signal);
        }
    }
}

/// Moves the interrupted thread of `context` to the fixup of the guarded
/// copy if it faulted in that copy; whether it did.
///
/// # Safety
///
/// `context` is the ucontext a SA_SIGINFO handler was given.
#[cfg(target_arch = "x86_64")]
unsafe fn resume_guarded_copy(context: *mut libc::ucontext_t) -> bool {
    const PC: usize = libc::REG_RIP as usize;
    // SAFETY: the caller's context, valid for reads and writes.
    let registers = unsafe { &mut (*context).uc_mcontext.gregs };
    match resume_after_fault(registers[PC] as usize) {
        Some(fixup) => {
            registers[PC] = fixup as i64;
            true
        }
        None => false,
    }
}

/// No copy can be resumed here ([`GUARDED`] is false).
///
/// # Safety
///
/// None needed; the signature matches the x86_64 one.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn resume_guarded_copy(_context: *mut libc::ucontext_t) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use uwarp_stack::mem::{MemError, MemoryBuffer};

    /// A fresh anonymous mapping of one page, readable and writable.
    fn page() -> *mut u8 {
        pages(1)
    }

    /// A fresh anonymous mapping of `n` pages, readable and writable.
    fn pages(n: usize) -> *mut u8 {
        // SAFETY: a new private anonymous mapping, owned by the caller.
        let at = unsafe {
            libc::mmap(
                ptr::null_mut(),
                n * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        at.cast()
    }

    #[test]
    fn a_copy_into_memory_taken_away_fails_instead_of_faulting() {
        install();
        let at = page();
        // SAFETY: the page is this test's; the buffer is its only user,
        // and outlives the page's access only to show that the guard
        // holds. (Made inaccessible rather than unmapped: another test's
        // thread could map the range again at once.)
        let buffer = unsafe { MemoryBuffer::from_raw_parts(at.wrapping_add(100), 200) };
        buffer.write_at(0, b"before").unwrap();
        // SAFETY: the page mapped above.
        assert_eq!(
            unsafe { libc::mprotect(at.cast(), 4096, libc::PROT_NONE) },
            0
        );
        let fault = MemError::Fault { offset: 8, len: 4 };
        assert_eq!(buffer.write_at(8, b"late"), Err(fault));
        assert_eq!(buffer.read_at(8, &mut [0; 4]), Err(fault));
        drop(buffer);
        // SAFETY: the page mapped above, unmapped once.
        assert_eq!(unsafe { libc::munmap(at.cast(), 4096) }, 0);
    }

    #[test]
    fn copies_of_every_length_running_into_a_page_taken_away_fail() {
        install();
        let at = pages(4);
        // SAFETY: the pages are this test's; the buffer is their only user.
        let buffer = unsafe { MemoryBuffer::from_raw_parts(at, 4 * 4096) };
        // SAFETY: the third page of the mapping.
        assert_eq!(
            unsafe { libc::mprotect(at.add(8192).cast(), 4096, libc::PROT_NONE) },
            0
        );
        let data = vec![7u8; 9000];
        // Through the SSE loop (64 and 16 octets at a time) and `rep movsb`.
        for len in [20, 100, 1428, 4096, 8948] {
            let offset = 8192 - len / 2;
            let fault = MemError::Fault { offset, len };
            assert_eq!(buffer.write_at(offset, &data[..len]), Err(fault), "{len}");
            let mut out = vec![0u8; len];
            assert_eq!(buffer.read_at(offset, &mut out), Err(fault), "{len}");
        }
        buffer.write_at(8192 - 100, &data[..100]).unwrap();
        drop(buffer);
        // SAFETY: the mapping, unmapped once.
        assert_eq!(unsafe { libc::munmap(at.cast(), 4 * 4096) }, 0);
    }

    #[test]
    fn a_copy_into_a_read_only_page_fails_and_reads_still_work() {
        install();
        let at = page();
        // SAFETY: as above.
        let buffer = unsafe { MemoryBuffer::from_raw_parts(at, 4096) };
        buffer.write_at(4090, b"abc").unwrap();
        // SAFETY: the page mapped above.
        assert_eq!(
            unsafe { libc::mprotect(at.cast(), 4096, libc::PROT_READ) },
            0
        );
        assert_eq!(
            buffer.write_at(4000, b"x"),
            Err(MemError::Fault {
                offset: 4000,
                len: 1
            })
        );
        let mut got = [0u8; 3];
        buffer.read_at(4090, &mut got).unwrap();
        assert_eq!(&got, b"abc");
        // SAFETY: the page mapped above, unmapped once.
        assert_eq!(unsafe { libc::munmap(at.cast(), 4096) }, 0);
    }
}
