//! The two-host modes between two processes on the kernel-socket
//! transport over loopback (no root needed), and the ways a run fails:
//! a port nobody listens on, a server of another mode, a bad `--eal`,
//! bad arguments. Each failure exits non-zero with one line naming the
//! cause, and prints no report.

mod common;

use common::{args, check_pair, finish_and_check, finish_pair, quick_iters, quick_run};
use common::{side_args, Finished, Perf, MODES};
use uwarp_testing::root_or_skip;

/// The first port of this file's servers (each test its own).
const PORT: u16 = 18800;

/// The socket transport, and a server's address.
const SOCKET: [&str; 4] = ["--transport", "socket", "--ip", "127.0.0.1"];

/// A server of `mode` on the socket transport, listening on 127.0.0.1,
/// with `extra` arguments.
fn server(mode: &str, port: u16, extra: &[&str]) -> Perf {
    let port = port.to_string();
    let list = side_args(mode, &["--server", "--port", &port], &SOCKET, &args(extra));
    let mut server = Perf::start("server", &[], &list);
    server.wait_for("listening on 127.0.0.1");
    server
}

/// A client of `mode` on the socket transport, to 127.0.0.1:`port`.
fn client(mode: &str, port: u16, extra: &[String]) -> Perf {
    let peer = format!("127.0.0.1:{port}");
    let list = side_args(mode, &["--connect", &peer], &SOCKET[..2], extra);
    Perf::start("client", &[], &list)
}

/// `uwarp-perf ARGS`, to its end.
fn perf(list: &[&str]) -> Finished {
    Perf::start("uwarp-perf", &[], &args(list)).finish()
}

#[test]
fn every_mode_runs_between_two_processes_over_kernel_sockets() {
    for (i, mode) in MODES.into_iter().enumerate() {
        let port = PORT + i as u16;
        let server = server(mode, port, &[]);
        let client = client(mode, port, &quick_run(mode));
        let (_, client) = finish_and_check(server, client, mode, quick_iters(mode));
        assert_eq!(client["transport"], "socket");
        assert_eq!(client["peer"], format!("127.0.0.1:{port}"));
        // The kernel's TCP has no uwarp cores to report.
        assert!(client["host"].is_null(), "{client}");
    }
}

/// Sixteen queue pairs: every receive the close flushes must fit the
/// client's completion queue, or the socket transport holds them back
/// and the client never finishes.
#[test]
fn writes_spread_over_sixteen_queue_pairs_in_revision_1() {
    let server = server("write-bw", 18810, &["--mpa-rev", "1"]);
    let client = client(
        "write-bw",
        18810,
        &args(&[
            "-q",
            "16",
            "-t",
            "4",
            "-n",
            "3000",
            "-s",
            "4096",
            "--mpa-rev",
            "1",
            "--crc",
        ]),
    );
    let (server, client) = finish_pair(server, client);
    check_pair(&server, &client, "write-bw", &[4096], Some(3000));
    assert_eq!(client["qps"], 16);
    assert_eq!(client["mpa"]["revision"], 1);
    assert_eq!(client["mpa"]["rtr"], "none");
    assert_eq!(server["mpa"]["crc"], true);
}

/// `--spin`: both measuring threads spin as perftest's loops do, never
/// yielding, while the socket transport's threads run the connections;
/// the data still moves and is checked, in a latency and a bandwidth run.
#[test]
fn spinning_measuring_threads_move_and_check_the_data() {
    for (port, mode) in [(18813, "write-lat"), (18814, "write-bw")] {
        let server = server(mode, port, &["--spin"]);
        let mut extra = quick_run(mode);
        extra.push("--spin".into());
        let client = client(mode, port, &extra);
        finish_and_check(server, client, mode, quick_iters(mode));
    }
}

/// Inline cores run on the measuring thread as it waits: it cannot spin
/// without them.
#[test]
fn spinning_needs_cores_on_threads() {
    let refused = perf(&[
        "write-lat",
        "--connect",
        "10.0.0.1:18815",
        "--transport",
        "dpdk",
        "--eal",
        "--vdev net_null0",
        "--ip",
        "10.0.0.2/24",
        "--spin",
    ]);
    let reason = refused.failure();
    assert!(
        reason.contains("--spin needs the cores on threads"),
        "{reason}"
    );
}

#[test]
fn a_port_nobody_listens_on_refuses_at_once() {
    // Port 18819 is bound by no test.
    let refused = client("write-bw", 18819, &[]).finish();
    let reason = refused.failure();
    assert!(
        reason.contains("127.0.0.1:18819 refused the connection"),
        "{reason}"
    );
    assert!(refused.stdout.is_empty());
}

#[test]
fn a_server_of_another_mode_rejects_the_client() {
    let server = server("write-bw", 18811, &[]);
    let client = client("read-bw", 18811, &[]).finish();
    let server = server.finish();
    let reason = client.failure();
    assert!(
        reason
            .contains("rejected the run: this server runs write-bw, the client asked for read-bw"),
        "{reason}"
    );
    assert!(server.failure().contains("this server runs write-bw"));
}

#[test]
fn a_bad_eal_fails_with_the_eals_reason() {
    if !root_or_skip("the EAL") {
        return;
    }
    let bad_device = perf(&[
        "read-lat",
        "--connect",
        "10.81.90.1:1",
        "--eal",
        "--vdev net_bogus0",
        "--ip",
        "10.81.90.2/24",
    ]);
    let reason = bad_device.failure();
    assert!(
        reason.contains("the EAL did not start: failed to parse device \"net_bogus0\""),
        "{reason}"
    );
    let bad_option = perf(&[
        "send-bw",
        "--server",
        "--eal",
        "--vdev net_tap0,iface=uwpbad --no-such-option",
        "--ip",
        "10.81.90.1/24",
    ]);
    let reason = bad_option.failure();
    assert!(
        reason.contains("unrecognized option '--no-such-option'"),
        "{reason}"
    );
    // The EAL's usage text does not reach standard output.
    assert!(bad_option.stdout.is_empty(), "{}", bad_option.stdout);
}

/// Each side names its busy threads and says whether two shared a CPU:
/// on the socket transport the measuring thread and the transport's
/// dataplane thread, both unpinned, which may have shared one when the
/// process has CPUs enough for both, and did otherwise.
#[test]
fn each_side_says_which_threads_were_busy_and_whether_they_shared_a_cpu() {
    let server = server("write-lat", 18812, &[]);
    let list = [
        "write-lat",
        "--connect",
        "127.0.0.1:18812",
        "--transport",
        "socket",
        "-n",
        "200",
    ];
    let client = perf(&list);
    let server = server.finish().report("server");
    assert!(client.status.success(), "{}", client.stderr);
    let cpus = core_affinity::get_core_ids().map_or(0, |ids| ids.len());
    let line = client
        .stdout
        .lines()
        .find(|l| l.starts_with("CPUs of this side ("));
    let line = line.unwrap_or_else(|| panic!("{}", client.stdout));
    let threads = "measuring thread unpinned, socket dataplane thread unpinned; ";
    let verdict = if cpus >= 2 {
        "may have shared a CPU: the OS places the measuring thread and the socket \
         dataplane thread, which may share a CPU with another busy thread"
    } else {
        "shared a CPU: 2 busy threads on 1 CPU"
    };
    assert_eq!(
        line,
        format!("CPUs of this side ({cpus} available): {threads}{verdict}"),
    );
    let report = &server["cpus"];
    assert_eq!(report["available_cpus"], cpus, "{server}");
    assert_eq!(report["threads"][0]["name"], "measuring thread", "{server}");
    assert_eq!(report["threads"][1]["name"], "socket dataplane thread");
    assert!(report["threads"][0]["cpu"].is_null() && report["threads"][1]["cpu"].is_null());
    if cpus >= 2 {
        assert!(report["shared_cpu"].is_null(), "{server}");
    } else {
        assert_eq!(report["shared_cpu"], true, "{server}");
    }
}

#[test]
fn bad_arguments_are_refused_with_one_line() {
    let refused = |list: &[&str], cause: &str| {
        let reason = perf(list).failure();
        assert!(reason.contains(cause), "{list:?}: {reason}");
    };
    // A socket client with one bad option each.
    let clients: [(&str, &[&str], &str); 11] = [
        ("write-lat", &["-q", "2"], "one queue pair"),
        ("write-bw", &["-q", "17"], "-q must be 1 to 16"),
        ("send-bw", &["-t", "0"], "-t (tx-depth) must be 1 to"),
        ("send-bw", &["-s", "0"], "-s must be"),
        ("read-bw", &["-D", "0"], "-D 0"),
        (
            "write-bw",
            &["--mpa-rev", "1", "--p2p", "read"],
            "--p2p needs --mpa-rev 2",
        ),
        (
            "read-lat",
            &["--eal", "--vdev net_tap0"],
            "are for --transport dpdk",
        ),
        (
            "write-bw",
            &["--zero-copy-from", "1024"],
            "are for --transport dpdk",
        ),
        ("send-lat", &["--cpus", "0,1"], "are for --transport dpdk"),
        (
            "write-bw",
            &["--payloads-by-reference"],
            "are for --transport dpdk",
        ),
        (
            "read-bw",
            &["--impair-rx", "loss=0.01"],
            "are for --transport dpdk",
        ),
    ];
    for (mode, bad, cause) in clients {
        let mut list = vec![mode, "--connect", "127.0.0.1:1", "--transport", "socket"];
        list.extend_from_slice(bad);
        refused(&list, cause);
    }
    // DPDK servers on net_tap0 with one thing wrong (`ip`, or `extra`).
    let tap_server = |ip: &'static str, extra: &[&'static str], cause: &str| {
        let mut list = vec![
            "write-bw",
            "--server",
            "--eal",
            "--vdev net_tap0",
            "--ip",
            ip,
        ];
        list.extend_from_slice(extra);
        refused(&list, cause);
    };
    tap_server("10.0.0.1/24", &["--impair-rx", "loss=2"], "--impair-rx");
    tap_server("10.0.0.1", &[], "expected ADDRESS/PREFIX");
    // A DPDK server without its EAL.
    refused(
        &["write-bw", "--server", "--ip", "10.0.0.1/24"],
        "--transport dpdk needs --eal",
    );
    // --cpus takes the syntax of `tcp --cpus`, and not perftest's
    // protocol.
    let one_cpu = perf(&["write-bw", "--server", "--cpus", "0"]);
    assert!(!one_cpu.status.success());
    assert!(
        one_cpu.stderr.contains(
            "invalid value '0' for '--cpus <CONTROL,DATAPLANE>': expected CPU numbers \
             CONTROL,DATAPLANE[,DATAPLANE...] (e.g. 0,1), not \"0\""
        ),
        "{}",
        one_cpu.stderr
    );
    refused(
        &["write-bw", "--server", "--perftest", "--cpus", "0,1"],
        "--cpus is not available with --perftest",
    );
    // The argument parser's own refusals name the options too.
    let neither = perf(&["write-bw"]);
    assert!(!neither.status.success());
    assert!(
        neither.stderr.contains("--server|--connect"),
        "{}",
        neither.stderr
    );
}
