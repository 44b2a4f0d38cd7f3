//! uwarp-testing: helpers the tests of several uwarp crates share, so that
//! no test file copies another's or includes it by path.
//!
//! - [`pair`]: devices and connected queue pairs over the `uwarp` API on
//!   either transport, application-owned memory with guard octets, and
//!   what the tests check them with.
//! - [`dpdk_rig`]: uwarp's TCP on DPDK stepped over a net_ring pair, with
//!   a peer the test plays with hand-made frames (RFC 9293 segments), and
//!   iWARP devices on net_ring pairs.
//! - [`siw_vm`]: the siw VM of `scripts/siw-vm/`, booted to run one
//!   shell line, for tests against Linux soft-iWARP.
//! - [`siw_frames`]: the startup frames and untagged ULPDUs a test peer
//!   of siw sends.
//! - [`pci_vms`]: the two VMs of `scripts/vm/run.sh`, on PCI NICs driven
//!   by DPDK's own drivers.
//! - [`serial`] and [`root_or_skip`]: running tests that need both CPUs,
//!   or root, as this machine allows.
//! - [`example_binary`]: a package's example, built for a test that runs
//!   it as a process of its own.
//! - [`free_port`]: a port for a program's server that no other program
//!   takes before the server binds it.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

pub mod dpdk_rig;
pub mod pair;
pub mod pci_vms;
pub mod siw_frames;
pub mod siw_vm;

/// Holds the tests of one binary that take both CPUs (busy-polling cores
/// on threads, or a VM) to one at a time: side by side they starve each
/// other's threads, and a descheduled thread looks like loss to TCP.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether this process runs as root; if not, says on stderr that the
/// test is skipped because `what` needs root.
pub fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    if !root {
        eprintln!("SKIPPED: {what} needs root");
    }
    root
}

/// The example `name` of the workspace package `package`, built for the
/// calling test binary's profile and target directory (it lies next to
/// the test's own directory, `target/<profile>/deps/..`).
///
/// It is brought up to date with `cargo test --workspace --no-run`, the
/// build `cargo test --workspace` makes, examples included: after that
/// command (CI's) nothing is left to build, while a build of the example
/// alone (`cargo build -p PACKAGE --example NAME`) would resolve other
/// features and rebuild the crates below it (over a minute on two CPUs).
/// After `cargo test --test NAME`, which builds no example, it builds
/// the workspace's tests once. If that build fails while the tree is
/// being edited, a binary already there is used.
pub fn example_binary(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the deps directory");
    let profile_dir = deps.parent().expect("the profile directory");
    let target_dir = profile_dir.parent().expect("the target directory");
    // `cargo test`'s own profile for each directory: its default (test
    // targets with `test`, the rest with `dev`) puts everything in debug.
    let profile: Vec<String> = match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => Vec::new(),
        Some("release") => vec!["--release".into()],
        Some(other) => vec!["--profile".into(), other.into()],
        None => panic!("{} names no profile", profile_dir.display()),
    };
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let status = Command::new(env!("CARGO"))
        .args(["test", "--quiet", "--workspace", "--no-run"])
        .args(&profile)
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    if !status.success() {
        assert!(
            binary.exists(),
            "cargo test --no-run failed and there is no {package} example {name}"
        );
        eprintln!("cargo test --no-run failed; using the {name} example already built");
    }
    assert!(binary.exists(), "{} is missing", binary.display());
    binary
}

/// The lowest port handed out in tests' servers (below it lie well-known
/// services' ports).
const FIRST_TEST_PORT: u16 = 10_000;

/// A TCP port nothing listens on now, for a server a test starts, chosen
/// below the kernel's ephemeral range (`ip_local_port_range`).
///
/// A port the system chose for port 0 is free again once the probe
/// closes, and any program's next port-0 listener or outgoing connection
/// may take it before the test's server binds it (the server then fails
/// with `EADDRINUSE`, or a client reaches someone else's listener): seen
/// with connection-manager tests running at once, each making thousands
/// of port-0 listeners. Below the ephemeral range only explicit binds take
/// ports. Successive calls of one process try successive ports, from a
/// place that differs between processes.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let below = ephemeral_range_start();
    if below <= FIRST_TEST_PORT + 1000 {
        return system_port();
    }
    let span = u32::from(below - FIRST_TEST_PORT);
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let offset = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = FIRST_TEST_PORT + offset as u16;
        if TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok() {
            return port;
        }
    }
    system_port()
}

/// The first port of the kernel's ephemeral range (32768 when it cannot
/// be read, Linux's default).
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A port the system chooses for port 0, free now.
fn system_port() -> u16 {
    let probe = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind a probe");
    probe.local_addr().expect("the probe's address").port()
}
