//! `uwarp-perf conns` end to end: thousands of iWARP connections between
//! two devices in one process (a net_ring pair, one dataplane core each),
//! every connection carrying small messages round-robin, every message
//! checked where it landed by the tool itself (a wrong or missing octet
//! fails the run), and every connection closed again.

mod common;

use common::{args, Finished, Perf};

/// Runs `uwarp-perf conns ARGS` to its end.
fn conns(list: &[&str]) -> Finished {
    let mut all = args(&["conns"]);
    all.extend(args(list));
    Perf::start("conns run", &[], &all).finish()
}

/// The JSON report of `uwarp-perf conns ARGS --json`.
fn report(list: &[&str]) -> serde_json::Value {
    let mut all = list.to_vec();
    all.push("--json");
    conns(&all).report("conns run")
}

/// Checks one result: the connections, the messages, and that the
/// measured phase moved frames and took time.
fn assert_result(result: &serde_json::Value, connections: u64, messages: u64) {
    assert_eq!(result["connections"], connections);
    assert_eq!(result["messages"], messages);
    let frames = result["frames"].as_u64().unwrap();
    assert!(frames > 0, "{result}");
    for field in [
        "setup_us_per_conn",
        "ns_per_frame",
        "ns_per_msg",
        "msg_rate",
    ] {
        assert!(result[field].as_f64().unwrap() > 0.0, "{field}: {result}");
    }
    // Resident memory is a difference, which the allocator may make
    // negative, but it is always measured.
    for field in [
        "resident_bytes_per_conn",
        "resident_bytes_per_conn_after_traffic",
        "resident_bytes_per_conn_after_run",
    ] {
        assert!(result[field].as_i64().is_some(), "{field}: {result}");
    }
}

#[test]
fn ten_thousand_connections_each_carry_writes_to_their_own_place() {
    let report = report(&["--count", "10000", "-n", "20000"]);
    assert_eq!(report["op"], "write");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_result(&results[0], 10_000, 20_000);
    // A Write is one FPDU in one segment here, and each data segment is
    // acknowledged: about two frames per message (more would mean
    // retransmissions).
    let frames = results[0]["frames"].as_u64().unwrap();
    assert!((20_000..=60_000).contains(&frames), "{frames} frames");
}

#[test]
fn sends_with_crcs_over_a_sweep_of_connection_counts() {
    let run = conns(&[
        "--count", "1,1000", "-n", "5000", "--op", "send", "--crc", "--pause", "0.2", "--json",
    ]);
    for count in [1, 1000] {
        let said = format!("conns: {count} connections up in");
        assert!(run.stderr.contains(&said), "{}", run.stderr);
    }
    let report = run.report("conns run");
    assert_eq!(report["op"], "send");
    assert_eq!(report["crc"], true);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_result(&results[0], 1, 5000);
    assert_result(&results[1], 1000, 5000);
}

#[test]
fn bad_arguments_are_refused() {
    for (list, reason) in [
        (&["--count", "0"][..], "must be positive"),
        (&["--window", "0"], "must be positive"),
        (&["--pause=-1"], "--pause must be a number of seconds"),
    ] {
        let failure = conns(list).failure();
        assert!(failure.contains(reason), "{list:?}: {failure}");
    }
    let refused = conns(&["--op", "read"]);
    assert!(!refused.status.success());
    assert!(
        refused.stderr.contains("invalid value 'read'"),
        "{}",
        refused.stderr
    );
}

/// One connection more than there are ephemeral ports (16,384) to the one
/// server endpoint: the first 16,384 all come up, and the last connect
/// fails at once, saying why. Regression: the control core forgot a
/// handed-over flow's port after 2 s and gave it to a new connection
/// while the old one still used it, so that connection timed out in MPA
/// startup; and once every port was taken it searched for ever.
#[test]
fn running_out_of_ephemeral_ports_is_an_error_not_a_reuse() {
    let failure = conns(&["--count", "16385", "-n", "100"]).failure();
    assert!(
        failure.contains("connection 16384: connect") && failure.contains("no free local port"),
        "{failure}"
    );
}
