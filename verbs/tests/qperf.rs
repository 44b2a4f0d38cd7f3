//! Debian's unmodified qperf on uwarp's drop-in libraries: its server and
//! its client (`-cm1`: connections by the connection manager, as iWARP
//! needs) in two processes over loopback, every RC test iWARP can run.
//! qperf's RDMA Write tests use Write with immediate data, which iWARP
//! does not have (RFC 5040; siw refuses them too): qperf reports their
//! failure to post, checked here as the documented answer.

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use support::assert_success;
use support::pair::{free_port, strings, wait_listening, Running, Side};

/// The RC tests iWARP runs, and what each reports.
const TESTS: [(&str, &str); 5] = [
    ("rc_bw", "bw"),
    ("rc_bi_bw", "bw"),
    ("rc_lat", "latency"),
    ("rc_rdma_read_bw", "bw"),
    ("rc_rdma_read_lat", "latency"),
];
/// Any one run.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs qperf's client with `args` against a qperf server on uwarp,
/// both on the drop-in libraries; returns the client's output.
fn qperf(args: &[&str]) -> Output {
    // The server listens on a port of its own for the client's requests
    // (the kernel's TCP), then with the connection manager on an
    // ephemeral one for each test's connection.
    let side = |args: Vec<String>| Side {
        tool: "qperf",
        args,
        options: Vec::new(),
    };
    let port = free_port().to_string();
    let server = Running::start(side(strings(&["--listen_port", &port])).command());
    wait_listening(&port);
    let mut client = strings(&["-cm1", "--listen_port", &port, "-t", "1", "127.0.0.1"]);
    client.extend(strings(args));
    let output = Running::start(side(client).command()).finish(Instant::now() + LIMIT);
    // The server serves for good: stop it.
    let _ = server.finish(Instant::now());
    output
}

#[test]
fn debian_qperf_runs_its_rc_tests_on_uwarp() {
    let tests: Vec<&str> = TESTS.iter().map(|(test, _)| *test).collect();
    let output = qperf(&tests);
    assert_success("qperf", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    for (test, figure) in TESTS {
        let at = lines
            .iter()
            .position(|line| *line == format!("{test}:"))
            .unwrap_or_else(|| panic!("{test} did not run:\n{stdout}"));
        let result = lines.get(at + 1).copied().unwrap_or_default();
        let value: f64 = result
            .trim()
            .strip_prefix(figure)
            .and_then(|rest| rest.trim().strip_prefix('='))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("{test}: no {figure} in {result:?}:\n{stdout}"));
        assert!(value > 0.0, "{test}: {result}");
    }
}

#[test]
fn debian_qperf_rdma_write_tests_fail_to_post_write_with_immediate() {
    let output = qperf(&["rc_rdma_write_lat"]);
    assert!(!output.status.success(), "rc_rdma_write_lat ran on iWARP");
    let said = [output.stdout.as_slice(), output.stderr.as_slice()].concat();
    let said = String::from_utf8_lossy(&said);
    assert!(
        said.contains("failed to post rdma write with immediate"),
        "{said}"
    );
}
