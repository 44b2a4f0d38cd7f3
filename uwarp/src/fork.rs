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

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

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
    // Miri runs no `fork` (nor `pthread_atfork`, a foreign function to
    // it): under it there is no child to tell apart.
    if cfg!(miri) {
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

/// The pipe over which a child says it closed its copies of the sockets
/// (read end, write end; -1 when there is none), made before each `fork`.
static CLOSED_PIPE: [AtomicI32; 2] = [AtomicI32::new(-1), AtomicI32::new(-1)];

/// How long `fork` waits in the parent for the child's word.
const CHILD_CLOSED_WAIT_MS: i32 = 2000;

/// In the forking thread before `fork`: waits for the socket transport's
/// sockets being made now to be registered, holds new ones back, and
/// makes the pipe the child answers on.
extern "C" fn before_fork() {
    descriptors::hold_creations();
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors. Without a pipe the
    // parent does not wait (as before this existed).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        fds = [-1; 2];
    }
    CLOSED_PIPE[0].store(fds[0], Ordering::Release);
    CLOSED_PIPE[1].store(fds[1], Ordering::Release);
}

/// In the parent after `fork`: waits (at most [`CHILD_CLOSED_WAIT_MS`])
/// until the child has closed its copies of the transport's sockets, then
/// lets the transport make sockets again. A socket the parent closes
/// after `fork` returns is closed for good, as a kernel object would be:
/// without the wait, a child not yet scheduled would still hold a
/// listening socket open (a client connecting to a listener the parent
/// destroyed would be accepted, not refused).
extern "C" fn after_fork_in_parent() {
    let (read, write) = (
        CLOSED_PIPE[0].swap(-1, Ordering::AcqRel),
        CLOSED_PIPE[1].swap(-1, Ordering::AcqRel),
    );
    if read >= 0 {
        // SAFETY: the pipe's descriptors, made by `before_fork` and owned
        // here; the child's word (or its end of the pipe closing, if it
        // dies first) ends the wait.
        unsafe {
            libc::close(write);
            let mut ready = libc::pollfd {
                fd: read,
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&mut ready, 1, CHILD_CLOSED_WAIT_MS);
            libc::close(read);
        }
    }
    descriptors::release_creations();
}

/// In the child, before `fork` returns there: closes the copies of the
/// transport's sockets, tells the parent so, and counts the fork
/// (async-signal-safe: close, write and atomics only).
extern "C" fn after_fork_in_child() {
    descriptors::close_in_child();
    let (read, write) = (
        CLOSED_PIPE[0].swap(-1, Ordering::AcqRel),
        CLOSED_PIPE[1].swap(-1, Ordering::AcqRel),
    );
    if write >= 0 {
        let word = 1u8;
        // SAFETY: writes one octet to the pipe, then closes the child's
        // copies of both ends.
        unsafe {
            libc::write(write, (&raw const word).cast(), 1);
            libc::close(write);
            libc::close(read);
        }
    }
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
