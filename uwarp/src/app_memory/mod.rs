//! The application's own memory, registered where it lies
//! ([`ProtectionDomain::register_memory`](crate::ProtectionDomain::register_memory),
//! `ibv_reg_mr`), and what a program that unmaps or frees it before
//! deregistering gets.
//!
//! An RNIC pins registered pages: the kernel's `ibv_reg_mr` fails with
//! `EFAULT` for a range that is not mapped (or not writable, when the
//! region allows writes), and a peer's write after the program freed the
//! memory lands in the pinned pages, never in whatever mapping took the
//! range. uwarp copies with the CPU into the memory where it lies, so it
//! keeps those promises in three steps:
//!
//! - **Validation** (`maps.rs`): registration reads `/proc/self/maps` once
//!   and refuses a range that is not wholly mapped, readable, and
//!   writable when the region allows local or remote writes
//!   ([`MemError::NotMapped`](uwarp_stack::mem::MemError::NotMapped)).
//! - **Revocation** (`revocation.rs`): the process's registered ranges are
//!   known; [`revoke`], which the drop-in library calls from its
//!   `munmap`, `mremap` and `mmap(MAP_FIXED)` before the kernel changes
//!   the mapping, invalidates every region overlapping the range and
//!   waits for the STag table's grace period, so no placement is under
//!   way into the range when it goes and none starts after: a peer's
//!   later access is refused with a Terminate (invalid STag) instead of
//!   landing in the next mapping.
//! - **The fault guard** (`fault_guard.rs`): what uwarp cannot see (glibc's
//!   `free` unmaps large blocks with its internal `munmap`, not through
//!   the symbol the drop-in interposes; a program that loads the library
//!   with `dlopen`) is caught when the copy faults. Copies into and out
//!   of the application's memory are guarded
//!   ([`resume_after_fault`](uwarp_stack::mem::resume_after_fault)), and a
//!   SIGSEGV/SIGBUS handler, installed with the first registration and
//!   chaining to the program's own, resumes a faulting copy with an
//!   error: the peer gets a Terminate, a local request an error
//!   completion, and the program keeps running.
//!
//! uwarp's own memory ([`ProtectionDomain::alloc_mr`](crate::ProtectionDomain::alloc_mr))
//! cannot vanish and needs none of this.

mod fault_guard;
mod maps;
mod revocation;

pub(crate) use fault_guard::install as install_fault_guard;
pub(crate) use maps::check_mapped;
pub use revocation::revoke;
pub(crate) use revocation::{Ranges, Revocable};
