//! uwarp on PCI NICs driven by DPDK's own poll-mode drivers, inside VMs:
//! `scripts/vm/run.sh` boots two guests on one bridge, gives each a NIC
//! for DPDK bound to vfio-pci behind the guest's emulated IOMMU, and runs
//! `uwarp-perf`'s two-host mode between them (this build's `uwarp-perf`,
//! copied into the guests).
//!
//! - virtio-net-pci with two queue pairs and the device's RSS on, driven
//!   by `net_virtio`, RDMA Writes;
//! - e1000e (Intel 82574), driven by `net_e1000_em`, RDMA Reads.
//!
//! Each checks that both guests probed the NIC with the PMD named, through
//! IOMMU type 1, and that both sides verified the data (the server finds
//! the client's pattern after the last Write; the client the server's
//! after the last Read).
//!
//! Needs root (taps, a bridge), qemu and cpio (`scripts/setup.sh`). Under
//! TCG each scenario takes about 30 s.

use std::path::Path;
use std::process::Command;

use uwarp_testing::{root_or_skip, serial};

/// Runs `scenario` and checks its output: both VMs probed the NIC with
/// `pmd` through the IOMMU, and `verified` is in the client's report.
fn run(scenario: &str, pmd: &str, verified: &str) {
    if !root_or_skip("the PCI VMs (taps, a bridge)") {
        return;
    }
    let _serial = serial();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/vm/run.sh");
    let output = Command::new("bash")
        .arg(script)
        .args([
            "--perf",
            env!("CARGO_BIN_EXE_uwarp-perf"),
            "--timeout",
            "240",
        ])
        .arg(scenario)
        .output()
        .expect("run scripts/vm/run.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(output.status.success(), "{scenario} failed:\n{shown}");
    assert!(
        stdout.contains(&format!("vm: {scenario}: passed")),
        "no verdict:\n{shown}"
    );
    for vm in ["a", "b"] {
        let lines: Vec<&str> = stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{vm}: ")))
            .collect();
        for wanted in [
            &format!("Probe PCI driver: {pmd}") as &str,
            "Using IOMMU type 1",
        ] {
            assert!(
                lines.iter().any(|line| line.contains(wanted)),
                "VM {vm} never said {wanted:?}:\n{shown}"
            );
        }
    }
    let client_verified = stdout
        .lines()
        .any(|line| line.starts_with("b: data verified: ") && line.contains(verified));
    assert!(client_verified, "the client verified no data:\n{shown}");
}

#[test]
fn rdma_writes_between_two_vms_on_virtio_net_with_rss() {
    run(
        "virtio-write-bw",
        "net_virtio",
        "the server found the client's pattern",
    );
}

#[test]
fn rdma_reads_between_two_vms_on_e1000e() {
    run(
        "e1000e-read-bw",
        "net_e1000_em",
        "the client found the server's pattern",
    );
}
