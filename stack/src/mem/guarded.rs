//! Copies into and out of memory the application may unmap at any time:
//! the way the Linux kernel's `copy_to_user` survives a bad user pointer.
//!
//! An RNIC's registered pages are pinned, so a peer's late write lands in
//! them and nowhere else. uwarp places into the application's memory
//! where it lies, with the CPU: if the application frees or unmaps a
//! region before deregistering it, the copy faults. [`guarded_copy`]
//! copies with instructions whose addresses are known (an SSE2 loop and
//! `rep movsb`, on x86_64), so that a SIGSEGV/SIGBUS handler (uwarp's
//! `fault_guard`) that sees a fault there can resume at
//! [`resume_after_fault`]'s address, where the copy returns how many
//! octets it did not copy, instead of letting the fault kill the
//! process. The caller turns that
//! into the protocol's answer (a Terminate, an error completion).
//!
//! Only the copy is here: this crate installs no signal handler. Without
//! one, a fault in the copy ends the process as an ordinary one would.
//! On other architectures the copy is an ordinary copy and nothing is
//! recoverable ([`GUARDED`] is false). So it is under Miri, which cannot
//! run the assembly (and checks each access of the ordinary copy, where a
//! fault is undefined behaviour it reports).

/// Whether [`guarded_copy`] can be resumed after a fault on this target.
pub const GUARDED: bool = cfg!(all(target_arch = "x86_64", not(miri)));

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod imp {
    // The copy (System V ABI: the destination in rdi, the source in rsi,
    // the length in rdx; the direction flag is clear on entry), with rcx
    // counting the octets still to copy. Below SSE_BELOW octets: 64, then
    // 16 octets at a time through xmm0-xmm3 (caller-saved, and SSE2 is in
    // every x86_64), the last few by `rep movsb`; from SSE_BELOW on, `rep
    // movsb` alone. Measured on the project's machine (ERMSB and FSRM),
    // against glibc's memcpy: `rep movsb` matches it from a few KiB on
    // but costs twice as much at a 1428-octet payload going to memory out
    // of cache, where the SSE loop matches memcpy.
    //
    // Every instruction between `_start` and `_end` may fault on either
    // range; the fixup returns rcx, never 0 there (a fault means octets
    // were left), an upper bound of the octets not copied (a 64-octet
    // block is counted once all of it is stored; `rep movsb` keeps rcx
    // exact). A completed copy returns 0. The labels are hidden: they
    // resolve inside the object that defines them, never exported.
    core::arch::global_asm!(
        ".pushsection .text.uwarp_stack_guarded_copy,\"ax\",@progbits",
        ".p2align 4",
        ".globl uwarp_stack_guarded_copy",
        ".hidden uwarp_stack_guarded_copy",
        ".type uwarp_stack_guarded_copy,@function",
        "uwarp_stack_guarded_copy:",
        "    mov rcx, rdx",
        ".globl uwarp_stack_guarded_copy_start",
        ".hidden uwarp_stack_guarded_copy_start",
        "uwarp_stack_guarded_copy_start:",
        "    cmp rcx, {sse_below}",
        "    jae .Luwarp_guarded_bytes",
        "    cmp rcx, 64",
        "    jb .Luwarp_guarded_by16",
        ".Luwarp_guarded_by64:",
        "    movdqu xmm0, [rsi]",
        "    movdqu xmm1, [rsi + 16]",
        "    movdqu xmm2, [rsi + 32]",
        "    movdqu xmm3, [rsi + 48]",
        "    movdqu [rdi], xmm0",
        "    movdqu [rdi + 16], xmm1",
        "    movdqu [rdi + 32], xmm2",
        "    movdqu [rdi + 48], xmm3",
        "    add rsi, 64",
        "    add rdi, 64",
        "    sub rcx, 64",
        "    cmp rcx, 64",
        "    jae .Luwarp_guarded_by64",
        ".Luwarp_guarded_by16:",
        "    cmp rcx, 16",
        "    jb .Luwarp_guarded_bytes",
        "    movdqu xmm0, [rsi]",
        "    movdqu [rdi], xmm0",
        "    add rsi, 16",
        "    add rdi, 16",
        "    sub rcx, 16",
        "    jmp .Luwarp_guarded_by16",
        ".Luwarp_guarded_bytes:",
        "    rep movsb",
        ".globl uwarp_stack_guarded_copy_end",
        ".hidden uwarp_stack_guarded_copy_end",
        "uwarp_stack_guarded_copy_end:",
        "    xor eax, eax",
        "    ret",
        ".globl uwarp_stack_guarded_copy_fixup",
        ".hidden uwarp_stack_guarded_copy_fixup",
        "uwarp_stack_guarded_copy_fixup:",
        "    mov rax, rcx",
        "    ret",
        ".size uwarp_stack_guarded_copy, . - uwarp_stack_guarded_copy",
        ".popsection",
        sse_below = const SSE_BELOW,
    );

    /// Copies shorter than this go through the SSE loop, longer ones
    /// through `rep movsb` alone.
    const SSE_BELOW: usize = 4096;

    extern "C" {
        /// Copies `len` octets; returns how many were not copied.
        fn uwarp_stack_guarded_copy(dst: *mut u8, src: *const u8, len: usize) -> usize;
        /// The first instruction that may fault. Only its address is used.
        static uwarp_stack_guarded_copy_start: u8;
        /// Just past the last instruction that may fault. Only its
        /// address is used.
        static uwarp_stack_guarded_copy_end: u8;
        /// Where the copy resumes after a fault. Only its address is used.
        static uwarp_stack_guarded_copy_fixup: u8;
    }

    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) -> usize {
        // SAFETY: the caller's contract (see `guarded_copy`); the routine
        // touches nothing but the two ranges and rax, rcx, rsi, rdi and
        // xmm0-xmm3, all caller-saved, and returns normally (directly or
        // through the fixup).
        unsafe { uwarp_stack_guarded_copy(dst, src, len) }
    }

    pub(super) fn resume_after_fault(pc: usize) -> Option<usize> {
        let (start, end) = faulting_range();
        let fixup = (&raw const uwarp_stack_guarded_copy_fixup).addr();
        (start..end).contains(&pc).then_some(fixup)
    }

    /// The addresses of the instructions that may fault.
    pub(super) fn faulting_range() -> (usize, usize) {
        (
            (&raw const uwarp_stack_guarded_copy_start).addr(),
            (&raw const uwarp_stack_guarded_copy_end).addr(),
        )
    }
}

#[cfg(any(not(target_arch = "x86_64"), miri))]
mod imp {
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) -> usize {
        // SAFETY: the caller's contract (see `guarded_copy`).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, len) };
        0
    }

    pub(super) fn resume_after_fault(_pc: usize) -> Option<usize> {
        None
    }
}

/// Copies `len` octets from `src` to `dst`; `Err` with (at most) the
/// number of octets not copied when the copy faulted and a signal handler resumed
/// it at [`resume_after_fault`]'s address. What was copied before the
/// fault stays copied.
///
/// # Safety
///
/// The two ranges do not overlap, and each is valid for the access, or
/// (the point of the function) faults when touched and a handler that
/// resumes the copy is installed. Nothing else may hold a reference to
/// either range.
pub unsafe fn guarded_copy(dst: *mut u8, src: *const u8, len: usize) -> Result<(), usize> {
    // SAFETY: forwarded.
    match unsafe { imp::copy(dst, src, len) } {
        0 => Ok(()),
        not_copied => Err(not_copied),
    }
}

/// Where execution must resume when a memory fault (SIGSEGV, SIGBUS)
/// hits instruction `pc`: `Some` only when `pc` is one of the
/// instructions of [`guarded_copy`] that touch the memory. Async-signal-safe: it compares
/// addresses and touches nothing else.
pub fn resume_after_fault(pc: usize) -> Option<usize> {
    imp::resume_after_fault(pc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length() {
        let src: Vec<u8> = (0..9000).map(|i| (i % 251) as u8).collect();
        for len in [0, 1, 7, 15, 16, 17, 63, 64, 65, 200, 1428, 4095, 4096, 8948] {
            for offset in [0, 3] {
                let mut dst = vec![0u8; 9000];
                let at = dst.as_mut_ptr().wrapping_add(offset);
                // SAFETY: two distinct live vectors, `len + offset` within
                // both.
                let copied = unsafe { guarded_copy(at, src.as_ptr(), len) };
                assert_eq!(copied, Ok(()));
                assert_eq!(&dst[offset..offset + len], &src[..len], "{len} at {offset}");
                assert!(dst[..offset].iter().all(|&b| b == 0));
                assert!(dst[offset + len..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn only_the_copy_instructions_resume() {
        assert_eq!(resume_after_fault(0), None);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let (start, end) = imp::faulting_range();
            assert!(start < end && end - start < 256);
            let resume = resume_after_fault(start).expect("the first one resumes");
            assert_eq!(resume_after_fault(end - 1), Some(resume));
            assert!(resume >= end && resume - end < 16, "just after them");
            assert_eq!(resume_after_fault(start - 1), None, "the length's move");
            assert_eq!(resume_after_fault(end), None, "the return of a success");
            assert_eq!(resume_after_fault(resume), None);
        }
    }
}
