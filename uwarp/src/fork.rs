//! What a child of `fork(2)` keeps of the devices its parent opened.
//!
//! A child has one thread, the one that forked: the threads or cores of
//! its parent's devices are not in it, so nothing would ever answer a
//! device's control commands or poll its connections, and it holds copies
//! of the sockets those threads own, which keep them open after the
//! parent closed its own (a closed listening port still completing
//! handshakes). Under rdma-core the child may open a device of its own,
//! and what it inherited does not outlive the parent's close.
//!
//! uwarp counts the forks that separate a process from the one where
//! its first device opened (its *fork generation*, 0 there, 1 in its
//! children, ...). Each device's [`Driver`](crate::driver::Driver) records
//! the generation it was made in, so everything made from a parent's
//! device fails with [`Error::DeviceClosed`](crate::Error::DeviceClosed)
//! in a child instead of waiting for threads that are not there; a new
//! [`Device`](crate::Device) opened in the child works as in any process.
//!
//! A `pthread_atfork(3)` child handler, registered when the first device
//! opens, closes the socket transport's sockets in the child and counts
//! the fork. It runs before `fork` returns in the child, where a
//! multithreaded parent's child may only call async-signal-safe
//! functions: it does nothing but `close(2)`, atomic loads and stores.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::transport::socket::descriptors;

/// This process's fork generation.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Whether the handlers are registered (or being registered).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// This process's fork generation: how many `fork(2)`s separate it from
/// the process where uwarp first watched for forks (the first
/// [`Device::open`](crate::Device::open), or the first call of this
/// function). A process that keeps a device per process (the drop-in
/// libraries do) opens a new one when the generation is not the one its
/// device was opened in.
pub fn fork_generation() -> u64 {
    watch();
    generation()
}

/// The fork generation, without registering the handlers.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Registers the fork handlers, once per process (and its children,
/// which inherit them). A thread that finds another one registering
/// them does not wait for it (a lock held by a thread at `fork` would
/// stay held in the child for ever).
pub(crate) fn watch() {
    if WATCHING.load(Ordering::Acquire) || WATCHING.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the three handlers take no arguments, return, and cannot
    // unwind (they call nothing that panics); pthread_atfork has no other
    // precondition. It fails only when it cannot allocate its entry, and
    // then children are not told apart from their parent, as before.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        );
    }
}

/// In the forking thread before `fork`: waits for the socket transport's
/// sockets being made now to be registered, and holds new ones back.
extern "C" fn before_fork() {
    descriptors::hold_creations();
}

/// In the parent after `fork`: lets the transport make sockets again.
extern "C" fn after_fork_in_parent() {
    descriptors::release_creations();
}

/// In the child, before `fork` returns there: closes the copies of the
/// transport's sockets and counts the fork (async-signal-safe: close and
/// atomics only).
extern "C" fn after_fork_in_child() {
    descriptors::close_in_child();
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_of_fork_is_one_generation_further() {
        let parent = fork_generation();
        let mut answer = [0u8; 8];
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child only loads an atomic and calls write(2) and
        // _exit(2), all async-signal-safe, before it exits.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            let generation = generation().to_ne_bytes();
            // SAFETY: writes the 8 octets of `generation` to the pipe and
            // exits without running the parent's exit handlers.
            unsafe {
                libc::write(pipe[1], generation.as_ptr().cast(), 8);
                libc::_exit(0);
            }
        }
        // SAFETY: reads 8 octets into `answer`, then reaps the child and
        // closes the pipe, all owned here.
        unsafe {
            assert_eq!(libc::read(pipe[0], answer.as_mut_ptr().cast(), 8), 8);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        assert_eq!(u64::from_ne_bytes(answer), parent + 1);
        assert_eq!(generation(), parent, "the parent is the same process");
    }
}
