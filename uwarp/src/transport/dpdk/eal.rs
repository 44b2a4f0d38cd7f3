//! The process's DPDK EAL, which the library starts: the first device
//! opened on the DPDK transport (or the first [`VirtualLink`] made)
//! starts it with its [`DpdkConfig::eal`] arguments, and every later one
//! runs on it. The EAL starts once per process and cannot be restarted,
//! so a later device whose arguments differ from the running EAL's is
//! refused with both sets of arguments in the error.
//!
//! - No arguments (`None`): whatever EAL this process runs already, else
//!   one for virtual devices only (`EalConfig::virtual_devices` with no
//!   device: no hugepages, no PCI scan), which is also what the tests'
//!   helpers start, so they and devices share it.
//! - Arguments (`Some`): the base of virtual devices, or of PCI devices
//!   when the arguments name some (`-a`, `--allow`, `-b`, `--block`: the
//!   EAL then scans the bus and wants hugepages, unless the arguments say
//!   `--no-huge`), a file prefix of this process's own (two processes on
//!   one machine, e.g. over net_memif, must not share a runtime
//!   directory), then the arguments.
//!
//! When `rte_eal_init` fails, its return value says little ("Invalid
//! argument"); the reason is in what the EAL printed while it ran
//! ("unrecognized option '--bogus'", "failed to parse device
//! \"net_bogus0\""), and its usage text lands on standard output, where
//! it would corrupt a program's report. So an EAL started from
//! arguments runs with both streams captured: on success they are
//! replayed unchanged, on failure the reason becomes the error.
//!
//! A child of `fork` has its parent's EAL in its memory but none of its
//! threads, and cannot start one of its own: its DPDK devices are
//! refused.
//!
//! [`VirtualLink`]: super::VirtualLink
//! [`DpdkConfig::eal`]: super::DpdkConfig::eal

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use uwarp_dataplane::{Eal, EalConfig};

use crate::error::Error;
use crate::fork;

/// The EAL arguments that name PCI devices.
const PCI_OPTIONS: [&str; 4] = ["-a", "--allow", "-b", "--block"];

/// Held while the EAL starts: one start at a time, and no two captures
/// of the standard streams at once.
static STARTING: Mutex<()> = Mutex::new(());

/// The fork generation, plus one, of the process that started the EAL;
/// 0 before it started.
static STARTED_IN: AtomicU64 = AtomicU64::new(0);

/// The running EAL, started from `args` if none runs yet (see the
/// module's documentation); an error if one runs with other arguments
/// than `args` ask for, or if it does not start.
pub(crate) fn start(args: Option<&[String]>) -> Result<&'static Eal, Error> {
    let started_in = STARTED_IN.load(Ordering::Acquire);
    if started_in != 0 && started_in != fork::generation() + 1 {
        return Err(Error::DpdkSetup(
            "a child of fork cannot use its parent's DPDK EAL, nor start one of its own".into(),
        ));
    }
    let _starting = STARTING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let eal = running_or_started(args)?;
    STARTED_IN.store(fork::generation() + 1, Ordering::Release);
    Ok(eal)
}

/// The running EAL, or one started from `args`.
fn running_or_started(args: Option<&[String]>) -> Result<&'static Eal, Error> {
    match args {
        None => match Eal::get() {
            Some(eal) => Ok(eal),
            None => Ok(Eal::init(
                &EalConfig::virtual_devices(Vec::<String>::new()),
            )?),
        },
        Some(args) => {
            let config = config(args);
            if Eal::get().is_some() {
                // Running already: the same arguments get it, others the
                // mismatch (nothing runs rte_eal_init again).
                return Ok(Eal::init(&config)?);
            }
            init_captured(&config)
        }
    }
}

/// The EAL configuration of the arguments `args`.
fn config(args: &[String]) -> EalConfig {
    let pci = args.iter().any(|arg| {
        PCI_OPTIONS
            .iter()
            .any(|o| arg == o || arg.starts_with(&format!("{o}=")))
    });
    let base = if pci {
        EalConfig::pci_devices(Vec::<String>::new())
    } else {
        EalConfig::virtual_devices(Vec::<String>::new())
    };
    let mut config = base.file_prefix(&format!("uwarp-{}", std::process::id()));
    for arg in args {
        config = config.arg(arg.clone());
    }
    config
}

/// `rte_eal_init` with standard output and error captured (see the
/// module's documentation).
fn init_captured(config: &EalConfig) -> Result<&'static Eal, Error> {
    let (outcome, printed) = capture_output(|| Eal::init(config)).map_err(|e| {
        Error::DpdkSetup(format!(
            "the EAL did not start: cannot capture its messages: {e}"
        ))
    })?;
    match outcome {
        Ok(eal) => {
            let _ = std::io::stdout().write_all(&printed.stdout);
            let _ = std::io::stderr().write_all(&printed.stderr);
            Ok(eal)
        }
        Err(err) => Err(Error::DpdkSetup(
            match eal_reason(&String::from_utf8_lossy(&printed.stderr)) {
                Some(reason) => format!("the EAL did not start: {reason} ({err})"),
                None => format!("the EAL did not start: {err}"),
            },
        )),
    }
}

/// What a call printed on each stream.
struct Printed {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `f` with file descriptors 1 and 2 sent to temporary files, and
/// returns what it printed. What other threads of the process write to
/// either meanwhile is captured with it (and replayed with it, if the
/// EAL starts).
fn capture_output<T>(f: impl FnOnce() -> T) -> std::io::Result<(T, Printed)> {
    let redirect = |fd: i32| -> std::io::Result<(File, i32)> {
        let path = std::env::temp_dir().join(format!("uwarp-{}-fd{fd}.txt", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let _ = std::fs::remove_file(&path);
        // SAFETY: dup and dup2 on descriptors this process owns.
        let saved = unsafe { libc::dup(fd) };
        if saved < 0 || unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((file, saved))
    };
    let restore = |fd: i32, saved: i32| {
        // SAFETY: `saved` is the duplicate `redirect` made of `fd`.
        unsafe {
            libc::dup2(saved, fd);
            libc::close(saved);
        }
    };
    let _ = std::io::stdout().flush();
    let (mut out, saved_out) = redirect(1)?;
    let (mut err, saved_err) = match redirect(2) {
        Ok(pair) => pair,
        Err(e) => {
            restore(1, saved_out);
            return Err(e);
        }
    };
    let value = f();
    // The EAL prints its usage with C's buffered stdio.
    // SAFETY: fflush(NULL) flushes every C output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    restore(1, saved_out);
    restore(2, saved_err);
    let read = |file: &mut File| -> std::io::Result<Vec<u8>> {
        let mut text = Vec::new();
        file.rewind()?;
        file.read_to_end(&mut text)?;
        Ok(text)
    };
    let printed = Printed {
        stdout: read(&mut out)?,
        stderr: read(&mut err)?,
    };
    Ok((value, printed))
}

/// The first line of the EAL's messages that says what went wrong: not
/// one of its "Detected ..." notes, nor its closing generic complaint.
fn eal_reason(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(|line| {
            let line = line.trim();
            line.strip_prefix("EAL: ")
                .or_else(|| line.strip_prefix("uwarp: "))
                .unwrap_or(line)
        })
        .find(|line| {
            !line.is_empty()
                && !line.starts_with("Detected")
                && !line.contains("Invalid 'command line' arguments")
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_eal_reason_is_its_first_complaint() {
        let printed = "uwarp: unrecognized option '--bogus'\nEAL: Detected CPU lcores: 2\n\
                       EAL: FATAL: Invalid 'command line' arguments.\n";
        assert_eq!(
            eal_reason(printed).as_deref(),
            Some("unrecognized option '--bogus'")
        );
        let printed = "EAL: Detected CPU lcores: 2\nEAL: Detected NUMA nodes: 1\n\
                       EAL: failed to parse device \"net_bogus0\"\n\
                       EAL: Unable to parse device 'net_bogus0'\n";
        assert_eq!(
            eal_reason(printed).as_deref(),
            Some("failed to parse device \"net_bogus0\"")
        );
        assert_eq!(eal_reason("EAL: Detected NUMA nodes: 1\n"), None);
    }

    #[test]
    fn pci_arguments_take_the_pci_base_and_others_the_virtual_one() {
        let prefix = format!("--file-prefix=uwarp-{}", std::process::id());
        let pci = config(&args(&["-a", "0000:00:07.0"])).args();
        assert_eq!(pci[..2], args(&[&prefix, "-a"])[..]);
        assert!(!pci.contains(&"--no-huge".to_owned()));
        let pci = config(&args(&["--allow=0000:00:07.0"])).args();
        assert!(!pci.contains(&"--no-huge".to_owned()));
        let virtual_devices = config(&args(&["--vdev", "net_tap0,iface=x"])).args();
        assert!(virtual_devices.contains(&"--no-huge".to_owned()));
        assert!(virtual_devices.contains(&prefix));
        assert!(!virtual_devices.contains(&"--no-shconf".to_owned()));
        let end = virtual_devices.len();
        assert_eq!(
            virtual_devices[end - 4..],
            args(&["--vdev", "net_tap0,iface=x", "-l", "0"])[..]
        );
    }
}
