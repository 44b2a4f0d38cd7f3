//! The XDP steering program's object, which the DPDK af_xdp driver loads
//! from a file: an anonymous one of this process (a memfd), named by its
//! `/proc/self/fd` path, so nothing is installed on the machine and
//! nothing stays behind.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::OnceLock;

/// The object the build script compiled from `bpf/uwarp_steer.bpf.c`.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/uwarp_steer.bpf.o"));

/// The steering program's object in a file the driver can open while this
/// value lives.
#[derive(Debug)]
pub struct SteeringObject(File);

impl SteeringObject {
    /// Writes the object into a new memfd.
    pub fn new() -> io::Result<Self> {
        // SAFETY: the name is a NUL-terminated literal and the flags are
        // valid; memfd_create returns a new descriptor or -1.
        let fd = unsafe { libc::memfd_create(c"uwarp_steer.bpf.o".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(OBJECT)?;
        Ok(SteeringObject(file))
    }

    /// The process's one object, written at the first call: the driver
    /// may read it whenever a port of this process configures its queues.
    pub fn of_process() -> io::Result<&'static SteeringObject> {
        static OBJECT: OnceLock<SteeringObject> = OnceLock::new();
        if let Some(object) = OBJECT.get() {
            return Ok(object);
        }
        let object = SteeringObject::new()?;
        // Another thread's, when it was first: this one's file closes.
        Ok(OBJECT.get_or_init(|| object))
    }

    /// The path the object can be opened by, in this process.
    pub fn path(&self) -> String {
        format!("/proc/self/fd/{}", self.0.as_raw_fd())
    }

    /// The `--vdev` of an af_xdp port named `name` on queue 0 of `iface`,
    /// with this program steering.
    pub fn vdev(&self, name: &str, iface: &str) -> String {
        format!(
            "{name},iface={iface},start_queue=0,queue_count=1,xdp_prog={}",
            self.path()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_is_an_elf_file_for_bpf_readable_at_its_path() {
        let object = SteeringObject::new().unwrap();
        let read = std::fs::read(object.path()).unwrap();
        assert_eq!(read, OBJECT);
        assert_eq!(&read[..4], b"\x7fELF");
        // e_machine 247: EM_BPF.
        assert_eq!(u16::from_le_bytes([read[18], read[19]]), 247);
        let vdev = object.vdev("net_af_xdp0", "eth1");
        assert!(vdev.starts_with(
            "net_af_xdp0,iface=eth1,start_queue=0,queue_count=1,xdp_prog=/proc/self/fd/"
        ));
    }
}
