//! uwarp on PCI NICs driven by DPDK's own poll-mode drivers, inside VMs:
//! `scripts/vm/run.sh` boots two guests on one bridge, gives each a
//! virtio-net and an e1000e NIC for DPDK, bound to vfio-pci behind the
//! guest's emulated IOMMU, and runs `uwarp-perf`'s two-host modes between
//! them (this build's `uwarp-perf`, copied into the guests), in one boot:
//!
//! - `virtio-write-bw-zero-copy`: RDMA Writes on virtio-net with two
//!   queue pairs and the device's RSS on (`net_virtio`), one dataplane
//!   core;
//! - `e1000e-read-bw-zero-copy`: RDMA Reads on e1000e (Intel 82574,
//!   `net_e1000_em`);
//! - `virtio-rss`: Writes over 8 connections, two dataplane cores on each
//!   side, one per queue of the virtio NIC.
//!
//! Each scenario must pass with its data verified (the server finds the
//! client's pattern after the last Write; the client the server's after
//! the last Read), and both guests must have probed each NIC with its
//! PMD through IOMMU type 1. In the two zero-copy scenarios each side
//! loses 1% of what it receives, and the side sending the data must have
//! sent its frames' payloads by reference from registered memory mapped
//! for the NIC's DMA (none copied for want of a mapping) and recovered
//! from the losses by retransmitting, again by reference: the data the
//! other side verified crossed the IOMMU from uwarp's own memory, and the
//! NIC's own count of frames sent covers every frame sent so. With
//! RSS, each side's two cores must both
//! have received frames from their queues, all 8 connections handed
//! over, and at most one segment per connection forwarded from one core
//! to another: the device's hash put every connection's segments on the
//! queue of the core that owns it (the server's cores own what lands on
//! their queue; the client's choose source ports the device's Toeplitz
//! hash sends back to them). A segment that reaches its core before the
//! core took its connection over from the control core is forwarded
//! once, by the control core (2 of 541 frames in one CI dry run); a hash
//! that did not steer would forward about half of them.
//!
//! Needs root (taps, a bridge), qemu and cpio (`scripts/setup.sh`). Under
//! TCG the boot and the three scenarios take about 40 s.

use uwarp_testing::{pci_vms, root_or_skip, serial};

/// The scenarios, each with what its client's "data verified" line says.
const SCENARIOS: [(&str, &str); 3] = [
    (
        "virtio-write-bw-zero-copy",
        "the server found the client's pattern",
    ),
    (
        "e1000e-read-bw-zero-copy",
        "the client found the server's pattern",
    ),
    ("virtio-rss", "the server found the client's pattern"),
];

/// The number after `words ` in `line` ("sent by reference 9308, ...").
fn count(line: &str, words: &str) -> Option<u64> {
    let (_, after) = line.split_once(&format!("{words} "))?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The FPDUs a "this side: " line says zero-copy transmit sent: the M of
/// "FPDUs sent N (M by reference, K written through)".
fn fpdus_by_reference(line: &str) -> Option<u64> {
    let (_, after) = line.split_once("FPDUs sent ")?;
    let (_, after) = after.split_once('(')?;
    after.split_once(" by reference")?.0.parse().ok()
}

/// The line of `lines` starting with `prefix`.
fn line<'a>(lines: &[&'a str], prefix: &str, shown: &str) -> &'a str {
    lines
        .iter()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line:\n{shown}"))
}

/// The lines VM `vm` printed for each scenario, in order: those up to and
/// including its `uwvm: NAME ROLE rc=` line.
fn sections<'a>(stdout: &'a str, vm: &str) -> Vec<(String, Vec<&'a str>)> {
    let prefix = format!("{vm}: ");
    let mut sections = Vec::new();
    let mut lines = Vec::new();
    for line in stdout.lines().filter_map(|line| line.strip_prefix(&prefix)) {
        lines.push(line);
        if let Some(end) = line.strip_prefix("uwvm: ") {
            let name = end.split_whitespace().next().unwrap_or_default();
            sections.push((name.to_owned(), std::mem::take(&mut lines)));
        }
    }
    sections
}

/// The frames each core received, from a `host:` line's "(A/B per core)".
fn per_core(host: &str) -> Vec<u64> {
    host.split_once(" per core)")
        .and_then(|(before, _)| before.rsplit_once('('))
        .map(|(_, counts)| counts.split('/').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

#[test]
fn uwarp_perf_between_two_vms_on_virtio_and_e1000e_with_rss() {
    if !root_or_skip("the PCI VMs (taps, a bridge)") {
        return;
    }
    let _serial = serial();
    let run = pci_vms::run(
        env!("CARGO_BIN_EXE_uwarp-perf"),
        &SCENARIOS.map(|(name, _)| name),
    );
    let (stdout, shown) = (&run.stdout, &run.shown);

    for vm in ["a", "b"] {
        for wanted in [
            "Probe PCI driver: net_virtio",
            "Probe PCI driver: net_e1000_em",
            "Using IOMMU type 1",
        ] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(vm) && l.contains(wanted)),
                "VM {vm} never said {wanted:?}:\n{shown}"
            );
        }
    }
    let (servers, clients) = (sections(stdout, "a"), sections(stdout, "b"));
    assert_eq!(servers.len(), SCENARIOS.len(), "server sections:\n{shown}");
    assert_eq!(clients.len(), SCENARIOS.len(), "client sections:\n{shown}");
    for (i, (name, verified)) in SCENARIOS.into_iter().enumerate() {
        assert!(
            stdout.contains(&format!("vm: {name}: passed")),
            "{name}: no verdict:\n{shown}"
        );
        for (side, (section, lines)) in [("server", &servers[i]), ("client", &clients[i])] {
            assert_eq!(section, name, "the {side}'s scenario {i}:\n{shown}");
            assert_eq!(
                lines.last().copied(),
                Some(&format!("uwvm: {name} {side} rc=0") as &str),
                "{name}'s {side}:\n{shown}"
            );
        }
        let client_verified = clients[i]
            .1
            .iter()
            .any(|line| line.starts_with("data verified: ") && line.contains(verified));
        assert!(client_verified, "{name}: no data verified:\n{shown}");
    }

    // Zero copy: the Writes' sender is the client, the Reads' the server.
    for (name, sender) in [(SCENARIOS[0].0, &clients[0]), (SCENARIOS[1].0, &servers[1])] {
        // Each FPDU zero-copy transmit left in registered memory went out
        // by reference, in at least one frame.
        let fpdus = line(&sender.1, "this side: ", shown);
        let zero_copy = fpdus_by_reference(fpdus).unwrap_or(0);
        assert!(zero_copy > 0, "{name}: {fpdus}");
        let host = line(&sender.1, "host: ", shown);
        let referenced = count(host, "sent by reference").unwrap_or(0);
        assert!(referenced >= zero_copy, "{name}: {fpdus}\n{host}");
        assert_eq!(
            count(host, "copied for want of a DMA mapping"),
            Some(0),
            "{name}: {host}"
        );
        // The NIC sent every frame it took by reference (and the rest):
        // qemu's e1000e silently dropped frames whose payload crossed
        // pages (docs/vm.md), which its own count leaves out.
        let (_, port) = host
            .split_once("; port: ")
            .unwrap_or_else(|| panic!("{name}: no port counters: {host}"));
        let device_sent = count(port, "sent").unwrap_or(0);
        let left_unsent = count(host, "mbufs dropped at shutdown").unwrap_or(0);
        assert!(
            device_sent + left_unsent >= referenced,
            "{name}: the device sent {device_sent} frames of {referenced} by reference: {host}"
        );
        let tcp = line(&sender.1, "this side TCP: ", shown);
        assert!(
            count(tcp, "retransmissions").unwrap_or(0) > 0,
            "{name}: the losses were recovered: {tcp}"
        );
    }

    // RSS: both queues of each side in use, no connection steered to
    // the wrong core (a segment that came before its connection's
    // hand-over is forwarded once: at most one per connection).
    for (side, (_, lines)) in [("server", &servers[2]), ("client", &clients[2])] {
        let host = line(lines, "host: ", shown);
        assert!(
            host.contains("connections handed over 8,"),
            "{side}: {host}"
        );
        let forwarded = count(host, "segments forwarded").expect("a forwarded count");
        assert!(forwarded <= 8, "{side}: {forwarded} forwarded: {host}");
        let cores = per_core(host);
        assert_eq!(cores.len(), 2, "{side}: {host}");
        assert!(cores.iter().all(|&frames| frames > 0), "{side}: {host}");
    }
}
