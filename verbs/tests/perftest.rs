//! Debian's unmodified perftest on uwarp's drop-in libraries (`-R`:
//! connections by the connection manager, as iWARP needs), server and
//! client in two processes over loopback; each report parsed and checked.

mod support;

use support::assert_success;
use support::pair::{free_port, run_pair, strings, Link, Loopback, MemifLink, TapLink};

/// Debian's perftest `tool` with `-R` (connections by the connection
/// manager, as iWARP needs), server and client on uwarp over loopback,
/// `extra` options on both; returns the client's report.
fn perftest(tool: &str, extra: &[&str]) -> String {
    perftest_on(tool, extra, &Loopback)
}

/// [`perftest`] with server and client on `link`.
///
/// perftest's server, once the two sides exchanged their parameters,
/// closes its listener and listens again on the same port for the test's
/// connection; a client that connects in between is refused (the kernel's
/// iWARP stack refuses it too), and perftest then ends in its own error
/// path. Such a run is made again, with both sides (at most three times).
fn perftest_on(tool: &str, extra: &[&str], link: &dyn Link) -> String {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let port = free_port().to_string();
        let mut server = strings(&["-R", "-p", &port]);
        server.extend(strings(extra));
        let mut client = server.clone();
        client.push(link.server_ip().to_owned());
        let (server, client) = run_pair(
            link,
            tool,
            &port,
            [server, client],
            &["Unexpected CM event"],
        );
        let refused_between =
            String::from_utf8_lossy(&client.stderr).contains("RDMA_CM_EVENT_REJECTED");
        if !client.status.success() && refused_between && attempts < 3 {
            continue;
        }
        assert_success(&format!("{tool} client"), &client);
        assert_success(&format!("{tool} server"), &server);
        return String::from_utf8_lossy(&client.stdout).into_owned();
    }
}

/// The figures of each of a perftest report's result lines (those after
/// its `#bytes` header, up to the closing rule).
fn result_lines(report: &str) -> Vec<Vec<f64>> {
    let lines: Vec<Vec<f64>> = report
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("#bytes"))
        .skip(1)
        .take_while(|line| !line.starts_with("---"))
        .map(|line| {
            line.split_whitespace()
                .filter_map(|figure| figure.parse().ok())
                .collect()
        })
        .collect();
    assert!(!lines.is_empty(), "no result line in:\n{report}");
    lines
}

/// The message sizes `-a` runs: 2 octets to 8 MiB, each power of two.
fn all_sizes() -> Vec<f64> {
    (1..24).map(|shift| f64::from(1u32 << shift)).collect()
}

/// Runs bandwidth `tool` with `extra` options and checks each result
/// line: the sizes expected, the iterations (when `iterations` says),
/// and a message rate above zero.
fn assert_bandwidth_report(tool: &str, extra: &[&str], sizes: &[f64], iterations: Option<f64>) {
    let report = perftest(tool, extra);
    assert!(report.contains("Device         : uwarp0"), "{report}");
    assert!(report.contains("Transport type : IW"), "{report}");
    let lines = result_lines(&report);
    let reported: Vec<f64> = lines.iter().map(|figures| figures[0]).collect();
    assert_eq!(reported, sizes, "{tool} {extra:?}: {report}");
    for figures in lines {
        // #bytes, #iterations, peak and average MB/s, message rate in
        // Mpps (the one figure printed precisely enough to be above zero
        // for 2-octet messages: their MB/s round to 0.00).
        if let Some(iterations) = iterations {
            assert_eq!(figures[1], iterations, "{tool} {extra:?}: {report}");
        }
        assert!(
            figures[1] > 0.0 && figures[4] > 0.0,
            "{tool} {extra:?}: {report}"
        );
    }
}

#[test]
fn debian_perftest_bandwidth_tools_run_on_uwarp() {
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw"] {
        assert_bandwidth_report(tool, &["-n", "500", "-s", "65536"], &[65536.0], Some(500.0));
    }
}

#[test]
fn debian_perftest_bandwidth_tools_run_every_size_on_uwarp() {
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw"] {
        assert_bandwidth_report(tool, &["-a", "-n", "5"], &all_sizes(), Some(5.0));
    }
}

/// `-e`: the tool sleeps in `ibv_get_cq_event` instead of polling.
///
/// `ib_read_bw` only: perftest has no events for `ib_write_bw`, and
/// `ib_send_bw -e` can deadlock on any iWARP device. Its client may only
/// run `rx_depth` Sends ahead of the credits its server writes into its
/// memory with RDMA Writes (perftest's flow control for iWARP, which has
/// no receiver-not-ready retry); with its send window full it waits in
/// `ibv_get_cq_event` for a send completion that never comes, since
/// every Send it posted has completed and a credit arriving raises no
/// completion. Seen on uwarp with Debian's perftest 4.5: the client sent
/// 199 of 200 Sends and slept, its server waiting for the 200th.
#[test]
fn debian_perftest_read_bandwidth_waits_on_completion_events_on_uwarp() {
    assert_bandwidth_report(
        "ib_read_bw",
        &["-e", "-n", "200", "-s", "4096"],
        &[4096.0],
        Some(200.0),
    );
}

#[test]
fn debian_perftest_bandwidth_tools_run_for_a_duration_on_uwarp() {
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw"] {
        assert_bandwidth_report(tool, &["-D", "2", "-s", "65536"], &[65536.0], None);
    }
}

/// Runs latency `tool` with `extra` options and checks each result line:
/// the sizes and iterations asked for, then latencies in microseconds.
fn assert_latency_report(tool: &str, extra: &[&str], sizes: &[f64], iterations: f64) {
    let report = perftest(tool, extra);
    let lines = result_lines(&report);
    let reported: Vec<f64> = lines.iter().map(|figures| figures[0]).collect();
    assert_eq!(reported, sizes, "{tool} {extra:?}: {report}");
    for figures in lines {
        assert_eq!(figures[1], iterations, "{tool} {extra:?}: {report}");
        // t_min, t_max, t_typical, t_avg (perftest's t_stdev is "-nan"
        // when its variance rounds below zero).
        assert!(figures[2..6].iter().all(|&us| us > 0.0), "{tool}: {report}");
    }
}

/// `ib_write_lat` included: its server posts the first RDMA Write before
/// anything arrived on the connection, which the client-server model of
/// MPA forbids the responder (RFC 5044 section 7.1.2); the drop-in
/// libraries connect in the peer-to-peer model, whose RTR lets it.
#[test]
fn debian_perftest_latency_tools_run_on_uwarp() {
    for tool in ["ib_write_lat", "ib_read_lat", "ib_send_lat"] {
        assert_latency_report(tool, &["-n", "200", "-s", "64"], &[64.0], 200.0);
    }
}

#[test]
fn debian_perftest_latency_tools_run_every_size_on_uwarp() {
    for tool in ["ib_write_lat", "ib_read_lat", "ib_send_lat"] {
        assert_latency_report(tool, &["-a", "-n", "5"], &all_sizes(), 5.0);
    }
}

/// `ib_write_bw -R`, 500 messages of 64 KiB, on `link` (as root: DPDK
/// needs it), its report checked.
fn write_bw_over(link: &dyn Link, what: &str) {
    if !uwarp_testing::root_or_skip(what) {
        return;
    }
    let report = perftest_on("ib_write_bw", &["-n", "500", "-s", "65536"], link);
    let figures = &result_lines(&report)[0];
    assert_eq!(figures[..2], [65536.0, 500.0], "{report}");
    assert!(figures[3] > 0.0, "no bandwidth in {report}");
}

#[test]
fn debian_ib_write_bw_runs_over_uwarps_tcp_on_dpdk() {
    write_bw_over(&MemifLink::new("verbs-perftest"), "DPDK's net_memif");
}

/// uwarp's TCP on DPDK against the kernel's: perftest's server on a
/// net_tap port, its client on the socket transport through the tap.
#[test]
fn debian_ib_write_bw_on_dpdk_over_net_tap_serves_a_client_on_the_socket_transport() {
    write_bw_over(&TapLink::new("uwverbs1"), "DPDK's net_tap");
}
