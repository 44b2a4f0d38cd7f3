//! Debian's unmodified `rping` on uwarp's drop-in libraries inside a VM,
//! over DPDK's `net_virtio` on a PCI NIC (vfio-pci behind the guest's
//! emulated IOMMU), against Debian's `rping` on Linux siw in another VM:
//! `scripts/vm/run.sh siw-rping` (this build's `uwarp-run` and
//! `libuwarp_verbs.so`, copied into the guests). siw serves uwarp's
//! client, then uwarp serves siw's client; every ping's data is checked
//! by both (`-V`), each client must print all its pings (`-v`), and every
//! rping must end well (exit 0, or 255 after rping's own exit race).
//!
//! Needs root (taps, a bridge), qemu and cpio (`scripts/setup.sh`).

use std::path::Path;
use std::process::Command;

use uwarp_testing::{root_or_skip, serial};

/// The pings each client sends.
const PINGS: usize = 10;

#[test]
fn debian_rping_on_uwarp_in_a_vm_against_siw_in_another_both_roles() {
    if !root_or_skip("the PCI VMs (taps, a bridge)") {
        return;
    }
    let _serial = serial();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/vm/run.sh");
    let bin = Path::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .parent()
        .expect("uwarp-run's directory");
    let output = Command::new("bash")
        .arg(script)
        .arg("--bin")
        .arg(bin)
        .args([
            "--timeout",
            "300",
            "--iters",
            &PINGS.to_string(),
            "siw-rping",
        ])
        .output()
        .expect("run scripts/vm/run.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(output.status.success(), "run.sh failed:\n{shown}");
    assert!(
        stdout.contains("vm: siw-rping: passed"),
        "no verdict:\n{shown}"
    );
    for (vm, who) in [("a", "siw's client"), ("b", "uwarp's client")] {
        let pings = stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{vm}: ")))
            .filter(|line| line.starts_with("ping data: rdma-ping-"))
            .count();
        assert_eq!(pings, PINGS, "{who}'s pings:\n{shown}");
    }
    for wanted in [
        "Probe PCI driver: net_virtio",
        "Using IOMMU type 1",
        "device uwarp0 on DPDK at 10.88.0.13",
    ] {
        let said = stdout
            .lines()
            .any(|line| line.starts_with("b: ") && line.contains(wanted));
        assert!(said, "uwarp's VM never said {wanted:?}:\n{shown}");
    }
    assert!(!stdout.contains("data mismatch"), "wrong data:\n{shown}");
}
