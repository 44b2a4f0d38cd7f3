//! One uwarp process per interface beside the kernel, and no program of
//! a dead one left behind.
//!
//! DPDK's af_xdp driver attaches its XDP program through netlink, which
//! outlives the process: one killed (SIGKILL) leaves uwarp's program on
//! the interface, and the next process's driver then fails to attach its
//! own ("Failed to load custom XDP program"), since it refuses to replace
//! a program. So a process that runs a port beside the kernel holds a
//! lock of the interface's (an `flock` the kernel releases when the
//! process ends, however it ends) from before its port attaches the
//! program until after its port closed; one that takes the lock and finds
//! a program of uwarp's attached knows its owner is gone and detaches it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

use super::port_map::{detach_program, uwarps_program_attached};

/// The name of the interface of index `index`, or the index in words.
fn name_of(index: u32) -> String {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has the IF_NAMESIZE octets the call may write.
    let found = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
    if found.is_null() {
        return format!("the interface of index {index}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into `name`.
    unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Where the locks are.
const LOCK_DIR: &str = "/run/uwarp";

/// This process's claim on an interface, held while the value lives.
#[derive(Debug)]
pub struct InterfaceClaim {
    _lock: File,
}

impl InterfaceClaim {
    /// Claims the interface of index `index` in this process's network
    /// namespace, detaching a program of uwarp's that a process now gone
    /// left attached; an error when another uwarp process runs on it.
    pub fn take(index: u32) -> io::Result<InterfaceClaim> {
        // Interfaces of two namespaces may share an index.
        let netns = std::fs::metadata("/proc/self/ns/net")?.ino();
        std::fs::create_dir_all(LOCK_DIR)?;
        let path = format!("{LOCK_DIR}/af_xdp-{netns}-{index}.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "another uwarp process runs beside the kernel on {} (one per interface)",
                        name_of(index)
                    ),
                )
            } else {
                err
            });
        }
        if uwarps_program_attached(index) {
            detach_program(index)?;
        }
        Ok(InterfaceClaim { _lock: lock })
    }
}
