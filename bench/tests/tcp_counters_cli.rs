//! The TCP loss-recovery counters of a queue pair (`QpCounters`) in
//! `uwarp-perf loopback`'s reports: the impairment stage dropping frames
//! on the DPDK link makes uwarp's TCP retransmit, and the JSON and the
//! table say so; on a clean link whatever a timer resent early arrived
//! twice and was reported so. The server's counters show where
//! reordered data went. Each DPDK end's host counters (`Device::close`)
//! show the connections it set up and every frame it dropped.

mod common;

use common::QUICK_LOOPBACK;

/// The TCP counters every report carries, by their JSON names.
const TCP_FIELDS: [&str; 8] = [
    "retransmissions",
    "timeouts",
    "spurious_timeouts",
    "fast_recoveries",
    "spurious_recoveries",
    "dsacks_received",
    "dsacks_sent",
    "tail_loss_probes",
];

/// A short loopback run with `extra` arguments; its standard output.
fn loopback(extra: &[&str]) -> Vec<u8> {
    // One run at a time: each busy-polls two cores, and a run starved of
    // a CPU for longer than the 5 ms minimum RTO retransmits on a clean
    // link.
    let _serial = uwarp_testing::serial();
    let mut args = vec!["loopback"];
    args.extend(QUICK_LOOPBACK);
    args.extend(extra);
    common::perf_stdout(&args)
}

/// The counters of `transport` in a JSON report, each checked present.
fn counters(report: &serde_json::Value, transport: &str) -> [u64; 8] {
    TCP_FIELDS.map(|field| {
        report[transport]["counters"][field]
            .as_u64()
            .unwrap_or_else(|| panic!("{transport} {field}: {report}"))
    })
}

#[test]
fn loss_on_the_dpdk_link_shows_as_retransmissions() {
    let stdout = loopback(&["--impair-rx", "loss=0.02,seed=5", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let [retransmissions, ..] = counters(&report, "dpdk");
    assert!(retransmissions > 0, "{report}");
    // Each end's host counted the frames its impairment stage dropped,
    // among every frame it dropped.
    let mut impaired = 0;
    for end in ["counters", "server_counters"] {
        let host = |name: &str| host_count(&report, end, name);
        assert!(
            host("frames_dropped") >= host("impairment_dropped"),
            "{report}"
        );
        impaired += host("impairment_dropped");
        // The port's own counters: the impairment stage drops after the
        // device received, so the device counted more than the cores
        // kept, and dropped nothing itself on this lossless ring.
        assert!(
            host("port_rx_packets") >= host("frames_received") + host("impairment_dropped"),
            "{report}"
        );
        assert!(host("port_tx_packets") > 0, "{report}");
        assert_eq!(
            host("port_rx_no_mbuf") + host("port_rx_missed"),
            0,
            "{report}"
        );
    }
    assert!(impaired > 0, "{report}");
}

/// `name` of the DPDK `end`'s host counters (`counters` for the client,
/// `server_counters` for the server) in a JSON report.
fn host_count(report: &serde_json::Value, end: &str, name: &str) -> u64 {
    report["dpdk"][end]["host"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("{end} host {name}: {report}"))
}

/// Reordered Writes land in the server's region, and reordered Sends in
/// its posted receives, each segment as it arrives.
#[test]
fn reordered_segments_are_placed_out_of_order_and_never_reassembled() {
    for op in ["write", "send"] {
        let args = ["--op", op, "--crc", "--impair-rx", "reorder=0.05,seed=3"];
        let stdout = loopback(&[&args[..], &["--json"]].concat());
        let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        let server = &report["dpdk"]["server_counters"];
        let field = |name: &str| {
            server[name]
                .as_u64()
                .unwrap_or_else(|| panic!("{op}: server {name}: {report}"))
        };
        // Every message of the bandwidth run reached the server's memory.
        assert!(field("bytes_placed") >= 300 * 4096, "{op}: {report}");
        assert!(field("segments_placed_out_of_order") > 0, "{op}: {report}");
        assert!(field("bytes_placed_out_of_order") > 0, "{op}: {report}");
        // Each segment holds whole FPDUs, so none had to wait for a hole.
        assert_eq!(field("bytes_reassembled"), 0, "{op}: {report}");
        assert_eq!(field("crc_errors"), 0, "{op}: {report}");
    }
}

#[test]
fn a_clean_link_loses_nothing() {
    let stdout = loopback(&["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let [retransmissions, timeouts, spurious_timeouts, ..] = counters(&report, "dpdk");
    let server = |name: &str| report["dpdk"]["server_counters"][name].as_u64().unwrap();
    assert!(spurious_timeouts <= timeouts, "{report}");
    // Nothing is lost or reordered. A timer can still fire early when a
    // thread of the run is descheduled (a tail loss probe, or an RTO on
    // a starved CPU, which resends the whole flight): each copy it sent
    // then reached the server twice, and the server said so by D-SACK.
    assert!(retransmissions <= server("dsacks_sent"), "{report}");
    assert_eq!(server("segments_placed_out_of_order"), 0, "{report}");
    assert_eq!(server("bytes_reassembled"), 0, "{report}");
    for end in ["counters", "server_counters"] {
        let host = |name: &str| host_count(&report, end, name);
        // The bandwidth and the latency run's connections, and the five
        // of the setup run, each handed to the end's dataplane core.
        assert_eq!(host("handed_over"), 7, "{report}");
        // Every connection closed before its device did: none was reset.
        for none in [
            "resets_sent",
            "syns_dropped",
            "handshakes_failed",
            "malformed",
            "reset_at_shutdown",
        ] {
            assert_eq!(host(none), 0, "{end} {none}: {report}");
        }
        assert!(host("frames_received") > 0, "{report}");
        // The only frame a clean link drops: the peer's gratuitous ARP,
        // when it comes before this end resolves the peer's address.
        assert_eq!(
            host("frames_dropped"),
            host("interface_dropped"),
            "{report}"
        );
        assert!(host("interface_dropped") <= 1, "{report}");
        // The ends settle before they close: nothing is left in flight.
        assert_eq!(host("dropped_at_shutdown"), 0, "{report}");
    }
}

#[test]
fn the_socket_transport_reports_its_counters() {
    let stdout = loopback(&["--transport", "socket", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    // Only retransmissions come from the kernel (TCP_INFO); its loopback
    // loses nothing, and the rest has no source.
    assert_eq!(counters(&report, "socket"), [0; 8], "{report}");
    // It has no cores of uwarp's to count anything.
    assert!(
        report["socket"]["counters"].get("host").is_none(),
        "{report}"
    );
}

/// With `-v` (without it, the table has no counters: `loopback_cli`).
#[test]
fn the_table_prints_the_tcp_counters() {
    let stdout = loopback(&["--impair-rx", "loss=0.02,seed=5", "-v"]);
    let text = String::from_utf8(stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("dpdk client TCP: retransmissions "))
        .unwrap_or_else(|| panic!("{text}"));
    let count: u64 = line["dpdk client TCP: retransmissions ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(count > 0, "{text}");
    for end in ["client", "server"] {
        let prefix = format!("dpdk {end}: FPDUs sent ");
        assert!(
            text.lines().any(|l| l.starts_with(&prefix)
                && l.contains(", FPDUs split 0, CRC errors 0, Terminates sent 0 received 0")),
            "{text}"
        );
        let prefix = format!("dpdk {end} TCP: retransmissions ");
        assert!(text.lines().any(|l| l.starts_with(&prefix)), "{text}");
        let prefix = format!("dpdk {end} host: connections handed over ");
        assert!(
            text.lines().any(|l| l.starts_with(&prefix)
                && l.contains(", frames dropped ")
                && l.contains(", mbufs dropped at shutdown ")
                && l.contains("; port: received ")),
            "{text}"
        );
    }
}
