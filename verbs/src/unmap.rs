//! `munmap`, `mremap`, and `mmap`/`mmap64` with `MAP_FIXED`, interposed
//! so that registered memory the program unmaps is revoked before the
//! range can change hands.
//!
//! With rdma-core, registered pages are pinned: a peer's write after the
//! program unmapped them lands in the old pages, never in a mapping that
//! took the range since. uwarp writes the range where it lies, so the
//! library exports these calls itself: a program linked with `-libverbs`
//! has `libibverbs.so.1` before `libc.so.6` in its search order, so its
//! calls, and every other library's, reach these first. Each revokes the
//! application's registrations of the pages the call is about to unmap
//! or replace ([`uwarp::app_memory::revoke`]: the regions are
//! invalidated, and no placement into them is under way when it returns),
//! then makes the system call itself (what glibc's wrappers do on
//! x86_64 and aarch64), leaving `errno` as the call sets it.
//!
//! Not seen: unmaps inside glibc (`free` of a block `malloc` mapped on its
//! own calls its internal `munmap`; `shmdt`; `madvise`), and every call of
//! a program that loads the library with `dlopen` instead of linking it.
//! There the fault guard of [`uwarp::app_memory`] still keeps the process
//! alive while the range stays unmapped; a peer's write may land in a
//! mapping that takes the range later.

use core::ffi::{c_int, c_long, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The size of the pages the kernel maps and unmaps.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Revokes the registrations of the pages of `len` octets at `addr`, as
/// the kernel will unmap them: nothing when `addr` is not page-aligned or
/// `len` is 0 (the call fails with `EINVAL`), else whole pages up to
/// `addr + len` rounded up. `errno` is left as it was, and a panic ends
/// here: the program's call goes on.
fn revoke_pages(addr: usize, len: usize) {
    let page = page_size();
    if len == 0 || addr % page != 0 {
        return;
    }
    let len = len.div_ceil(page).saturating_mul(page);
    // SAFETY: the calling thread's errno location, always valid.
    let errno = unsafe { *libc::__errno_location() };
    let _ = catch_unwind(AssertUnwindSafe(|| uwarp::app_memory::revoke(addr, len)));
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The result of a system call returning an address: `MAP_FAILED` (with
/// `errno` set by `syscall`) for -1.
fn address_of(result: c_long) -> *mut c_void {
    if result == -1 {
        libc::MAP_FAILED
    } else {
        result as *mut c_void
    }
}

/// `munmap(2)`: revokes the registrations of the pages, then unmaps them.
///
/// # Safety
///
/// As `munmap`: nothing the program still uses lies in the range.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    revoke_pages(addr as usize, len);
    // SAFETY: the program's own call, forwarded unchanged.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
}

/// `mremap(2)`: revokes the registrations of whatever the call may unmap
/// (the pages a shrink gives up; the whole old range when the mapping may
/// move; the range `MREMAP_FIXED` replaces), then remaps. A mapping that
/// grows in place with `MREMAP_MAYMOVE` has its registrations revoked
/// too: which way it goes is known only afterwards.
///
/// The C function is variadic, its fifth argument (`new_address`) passed
/// only with `MREMAP_FIXED`. On the System V x86_64 and the Linux aarch64
/// ABIs a variadic integer argument travels in the register of the same
/// position as a named one, so this reads it as a fifth parameter, and
/// uses it only when the flag says it was passed, as glibc does.
///
/// # Safety
///
/// As `mremap`.
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old_address: *mut c_void,
    old_size: usize,
    new_size: usize,
    flags: c_int,
    new_address: *mut c_void,
) -> *mut c_void {
    let old = old_address as usize;
    let fixed = flags & libc::MREMAP_FIXED != 0;
    if fixed || flags & libc::MREMAP_MAYMOVE != 0 {
        revoke_pages(old, old_size);
    } else if new_size < old_size {
        revoke_pages(old + new_size, old_size - new_size);
    }
    if fixed {
        revoke_pages(new_address as usize, new_size);
    }
    // SAFETY: the program's own call, forwarded unchanged (`new_address`
    // is ignored by the kernel without MREMAP_FIXED).
    address_of(unsafe {
        libc::syscall(
            libc::SYS_mremap,
            old_address,
            old_size,
            new_size,
            c_long::from(flags),
            new_address,
        )
    })
}

/// `mmap(2)`: with `MAP_FIXED`, which replaces whatever is mapped in the
/// range, revokes the registrations of its pages first; then maps.
///
/// # Safety
///
/// As `mmap`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    if flags & libc::MAP_FIXED != 0 {
        revoke_pages(addr as usize, len);
    }
    // SAFETY: the program's own call, forwarded unchanged.
    // Integers widened to the registers' width, as the kernel reads them.
    address_of(unsafe {
        libc::syscall(
            libc::SYS_mmap,
            addr,
            len,
            c_long::from(prot),
            c_long::from(flags),
            c_long::from(fd),
            offset,
        )
    })
}

/// `mmap64`: [`mmap`] (the same call on 64-bit Linux), which programs
/// built with `_FILE_OFFSET_BITS=64` call.
///
/// # Safety
///
/// As `mmap`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off64_t,
) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { mmap(addr, len, prot, flags, fd, offset) }
}
