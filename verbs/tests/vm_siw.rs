//! Debian's unmodified `rping` on uwarp's drop-in libraries inside a VM,
//! over DPDK's `net_virtio` on a PCI NIC (vfio-pci behind the guest's
//! emulated IOMMU), against Debian's `rping` on Linux siw in another VM:
//! `scripts/vm/run.sh siw-rping` (this build's `uwarp-run` and
//! `libuwarp_verbs.so`, copied into the guests). siw serves uwarp's
//! client, then uwarp serves siw's client; every ping's data is checked
//! by both (`-V`), each client must print all its pings (`-v`), and every
//! rping must end well (exit 0, or 255 after rping's own exit race).
//! Then, in the same boot, Debian's unmodified `ib_write_bw -R` on the
//! drop-ins is the client of `ib_write_bw -R` on siw
//! (`scripts/vm/run.sh siw-perftest`): both must end well and print their
//! result line for every message.
//!
//! Needs root (taps, a bridge), qemu and cpio (`scripts/setup.sh`).

use uwarp_testing::{pci_vms, root_or_skip, serial};

/// The pings each client sends.
const PINGS: usize = 10;

/// The size of `ib_write_bw`'s messages (run.sh's default).
const PERF_SIZE: &str = "65536";

#[test]
fn debian_rping_and_ib_write_bw_on_uwarp_in_a_vm_against_siw_in_another() {
    if !root_or_skip("the PCI VMs (taps, a bridge)") {
        return;
    }
    let _serial = serial();
    let pings = PINGS.to_string();
    let run = pci_vms::run(
        env!("CARGO_BIN_EXE_uwarp-run"),
        &["--iters", &pings, "siw-rping", "siw-perftest"],
    );
    let (stdout, shown) = (&run.stdout, &run.shown);
    for scenario in ["siw-rping", "siw-perftest"] {
        assert!(
            stdout.contains(&format!("vm: {scenario}: passed")),
            "{scenario}: no verdict:\n{shown}"
        );
    }
    // perftest's result line: size, iterations, peak, average, rate (the
    // drop-in's last words on standard error may follow it on its line).
    for (vm, who) in [("a", "siw's server"), ("b", "uwarp's client")] {
        let result = stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{vm}: ")))
            .any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() >= 5 && fields[0] == PERF_SIZE && fields[1] == pings
            });
        assert!(result, "{who}'s ib_write_bw printed no result:\n{shown}");
    }
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
