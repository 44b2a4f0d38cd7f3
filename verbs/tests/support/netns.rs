//! Two network namespaces joined by a veth pair, for the tests of uwarp
//! beside the kernel (AF_XDP): uwarp on one end (the host's), its peer on
//! the other. Root only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::assert_success;

/// Runs `command` to its end, panicking with its output if it fails.
pub fn sh(command: &[&str]) {
    let output = Command::new(command[0])
        .args(&command[1..])
        .output()
        .expect("the command runs");
    assert_success(&command.join(" "), &output);
}

/// The two ends of a veth pair, each in a namespace of its own, with an
/// IPv4 address in one /24.
#[derive(Clone, Copy)]
pub struct Veth {
    /// The namespace of uwarp and the kernel that shares its interface.
    pub host_ns: &'static str,
    /// The shared interface (in `host_ns`).
    pub host_if: &'static str,
    /// Its (first) address.
    pub host_ip: &'static str,
    /// The namespace of the peer.
    pub peer_ns: &'static str,
    /// The peer's end (in `peer_ns`).
    pub peer_if: &'static str,
    /// Its address.
    pub peer_ip: &'static str,
}

impl Veth {
    /// Both namespaces.
    fn namespaces(&self) -> [&'static str; 2] {
        [self.host_ns, self.peer_ns]
    }
}

/// The two namespaces joined by the veth pair, addressed and up; removed
/// on drop, with every process still in them (programs a failed test left
/// running, such as an MPI daemon in the peer's namespace).
pub struct Topology {
    veth: Veth,
}

impl Topology {
    /// Makes `veth`'s namespaces, removing any left by an earlier run.
    pub fn new(veth: Veth) -> Topology {
        Topology::remove(&veth);
        for ns in veth.namespaces() {
            sh(&["ip", "netns", "add", ns]);
        }
        sh(&[
            "ip",
            "link",
            "add",
            veth.host_if,
            "netns",
            veth.host_ns,
            "type",
            "veth",
            "peer",
            "name",
            veth.peer_if,
            "netns",
            veth.peer_ns,
        ]);
        for (ns, iface, ip) in [
            (veth.host_ns, veth.host_if, veth.host_ip),
            (veth.peer_ns, veth.peer_if, veth.peer_ip),
        ] {
            let cidr = format!("{ip}/24");
            sh(&["ip", "-n", ns, "addr", "add", &cidr, "dev", iface]);
            sh(&["ip", "-n", ns, "link", "set", iface, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // A veth hands on frames whose checksum its sender left to an
        // offload (CHECKSUM_PARTIAL); a NIC never does. The kernel takes
        // them, uwarp cannot check them: the peer fills its checksums.
        sh(&[
            "ip",
            "netns",
            "exec",
            veth.peer_ns,
            "ethtool",
            "-K",
            veth.peer_if,
            "tx",
            "off",
        ]);
        Topology { veth }
    }

    /// Gives the host's end a further address (after its first, which
    /// stays uwarp's).
    pub fn add_host_address(&self, ip: &str) {
        let cidr = format!("{ip}/24");
        sh(&[
            "ip",
            "-n",
            self.veth.host_ns,
            "addr",
            "add",
            &cidr,
            "dev",
            self.veth.host_if,
        ]);
    }

    fn remove(veth: &Veth) {
        for ns in veth.namespaces() {
            kill_everything_in(ns);
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        Topology::remove(&self.veth);
    }
}

/// Kills (SIGKILL) every process in namespace `ns`, by its id (`ip netns
/// pids`): only the test's programs run there.
fn kill_everything_in(ns: &str) {
    let Ok(output) = Command::new("ip")
        .args(["netns", "pids", ns])
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return;
    };
    for pid in String::from_utf8_lossy(&output.stdout).split_whitespace() {
        if let Ok(pid) = pid.parse::<libc::pid_t>() {
            // SAFETY: kill(2) touches no memory.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// `program` with `args` in namespace `ns`, on uwarp with `options`
/// (none: not under `uwarp-run`).
pub fn in_namespace(ns: &str, options: Option<&[&str]>, program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns]);
    if let Some(options) = options {
        command.arg(env!("CARGO_BIN_EXE_uwarp-run")).args(options);
    }
    command.arg(program).args(args);
    command
}

/// Whether an XDP program is attached to `iface` in `ns`.
pub fn xdp_attached(ns: &str, iface: &str) -> bool {
    let output = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", iface])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&output.stdout).contains("xdp")
}

/// Waits until an XDP program is attached to `iface` in `ns`, at most
/// `limit`, or until `alive` says its owner is gone.
pub fn wait_for_xdp(ns: &str, iface: &str, limit: Duration, mut alive: impl FnMut() -> bool) {
    let started = Instant::now();
    while !xdp_attached(ns, iface) && alive() && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a kernel TCP socket listens on `port` in namespace `ns` (IPv4
/// or IPv6), read from its `/proc/net/tcp` and `tcp6`.
pub fn listening_in(ns: &str, port: &str) -> bool {
    let Ok(port) = port.parse::<u16>() else {
        return false;
    };
    let wanted = format!(":{port:04X} ");
    let Ok(output) = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            "/proc/net/tcp",
            "/proc/net/tcp6",
        ])
        .output()
    else {
        return false;
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|line| line.split_whitespace().nth(3) == Some("0A") && line.contains(&wanted))
}
