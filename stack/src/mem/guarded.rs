//! Copies into and out of memory the application may unmap at any time:
//! the way the Linux kernel's `copy_to_user` survives a bad user pointer.
//!
//! An RNIC's registered pages are pinned, so a peer's late write lands in
//! them and nowhere else. uwarp places into the application's memory
//! where it lies, with the CPU: if the application frees or unmaps a
//! region before deregistering it, the copy faults. [`guarded_copy`]
//! copies with one instruction whose address is known (`rep movsb`, on
//! x86_64), so that a SIGSEGV/SIGBUS handler (uwarp's `fault_guard`)
//! that sees a fault there can resume at [`resume_after_fault`]'s
//! address, where the copy returns how many octets it did not copy,
//! instead of letting the fault kill the process. The caller turns that
//! into the protocol's answer (a Terminate, an error completion).
//!
//! Only the copy is here: this crate installs no signal handler. Without
//! one, a fault in the copy ends the process as an ordinary one would.
//! On other architectures the copy is an ordinary copy and nothing is
//! recoverable ([`GUARDED`] is false).

/// Whether [`guarded_copy`] can be resumed after a fault on this target.
pub const GUARDED: bool = cfg!(target_arch = "x86_64");

#[cfg(target_arch = "x86_64")]
mod imp {
    // The copy (System V ABI: the destination in rdi, the source in rsi,
    // the length in rdx; the direction flag is clear on entry). `rep
    // movsb` is restartable: when it faults, rcx holds the octets still
    // to copy, which the fixup returns. A completed copy returns 0. Both
    // labels are hidden: they resolve inside the object that defines
    // them and are never exported.
    core::arch::global_asm!(
        ".pushsection .text.uwarp_stack_guarded_copy,\"ax\",@progbits",
        ".p2align 4",
        ".globl uwarp_stack_guarded_copy",
        ".hidden uwarp_stack_guarded_copy",
        ".type uwarp_stack_guarded_copy,@function",
        "uwarp_stack_guarded_copy:",
        "    mov rcx, rdx",
        ".globl uwarp_stack_guarded_copy_fault",
        ".hidden uwarp_stack_guarded_copy_fault",
        "uwarp_stack_guarded_copy_fault:",
        "    rep movsb",
        "    xor eax, eax",
        "    ret",
        ".globl uwarp_stack_guarded_copy_fixup",
        ".hidden uwarp_stack_guarded_copy_fixup",
        "uwarp_stack_guarded_copy_fixup:",
        "    mov rax, rcx",
        "    ret",
        ".size uwarp_stack_guarded_copy, . - uwarp_stack_guarded_copy",
        ".popsection",
    );

    extern "C" {
        /// Copies `len` octets; returns how many were not copied.
        fn uwarp_stack_guarded_copy(dst: *mut u8, src: *const u8, len: usize) -> usize;
        /// The `rep movsb`: the one instruction of the copy that touches
        /// the memory. Only its address is used.
        static uwarp_stack_guarded_copy_fault: u8;
        /// Where the copy resumes after a fault. Only its address is used.
        static uwarp_stack_guarded_copy_fixup: u8;
    }

    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) -> usize {
        // SAFETY: the caller's contract (see `guarded_copy`); the routine
        // touches nothing but the two ranges and rax, rcx, rsi, rdi, all
        // caller-saved, and returns normally (directly or through the
        // fixup).
        unsafe { uwarp_stack_guarded_copy(dst, src, len) }
    }

    pub(super) fn resume_after_fault(pc: usize) -> Option<usize> {
        let fixup = (&raw const uwarp_stack_guarded_copy_fixup).addr();
        (pc == fault_instruction()).then_some(fixup)
    }

    /// The address of the `rep movsb`.
    pub(super) fn fault_instruction() -> usize {
        (&raw const uwarp_stack_guarded_copy_fault).addr()
    }
}

#[cfg(not(target_arch = "x86_64"))]
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

/// Copies `len` octets from `src` to `dst`; `Err` with the number of
/// octets not copied when the copy faulted and a signal handler resumed
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
/// hits instruction `pc`: `Some` only when `pc` is the faulting
/// instruction of [`guarded_copy`]. Async-signal-safe: it compares
/// addresses and touches nothing else.
pub fn resume_after_fault(pc: usize) -> Option<usize> {
    imp::resume_after_fault(pc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length() {
        let src: Vec<u8> = (0..=255).collect();
        for len in [0, 1, 7, 64, 255] {
            let mut dst = vec![0u8; 256];
            // SAFETY: two distinct live vectors, `len` within both.
            let copied = unsafe { guarded_copy(dst.as_mut_ptr(), src.as_ptr(), len) };
            assert_eq!(copied, Ok(()));
            assert_eq!(&dst[..len], &src[..len]);
            assert!(dst[len..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn only_the_copy_instruction_resumes() {
        assert_eq!(resume_after_fault(0), None);
        let copy_fn = guarded_copy as *const () as usize;
        assert_eq!(resume_after_fault(copy_fn), None);
        #[cfg(target_arch = "x86_64")]
        {
            let fault = imp::fault_instruction();
            let resume = resume_after_fault(fault).expect("the rep movsb resumes");
            assert!(resume > fault && resume - fault < 16, "just after it");
            assert_eq!(resume_after_fault(fault + 1), None);
        }
    }
}
