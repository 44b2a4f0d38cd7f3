//! `uwarp-perf write-bw|read-bw|send-bw --perftest` against itself, two
//! processes on the kernel-socket transport over loopback (no root):
//! every test at a large and a small size, each side's report agreeing
//! with the messages that crossed; then the ways a run fails, each with
//! one line naming the cause and no hang: a peer whose version perftest
//! would refuse, comm messages too short or too long for the receive
//! buffer, a server that never answers, a refused connection, options
//! perftest's protocol cannot carry.
//!
//! The hostile peers are this test process, speaking the comm channel's
//! first message through uwarp's verbs API.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use uwarp::{
    Access, ConnectParams, Device, DeviceConfig, MemoryRegion, Payload, QpInit, QueuePair, RecvWr,
    SendOp, SendWr,
};
use uwarp_interop::perftest::{wire, Options, Test};

use common::{args, finish_pair, Finished, Perf};

/// The first port of this file's servers (each test its own).
const PORT: u16 = 18900;

/// The socket transport, and a server's address.
const SOCKET: [&str; 4] = ["--transport", "socket", "--ip", "127.0.0.1"];

/// A `--perftest` server of `mode` on 127.0.0.1:`port`, listening.
fn server(mode: &str, port: u16, extra: &[&str]) -> Perf {
    let port = port.to_string();
    let mut list = args(&[mode, "--perftest", "--server", "-p", &port, "--json"]);
    list.extend(args(&SOCKET));
    list.extend(args(extra));
    let mut server = Perf::start("server", &[], &list);
    server.wait_for("listening on 127.0.0.1");
    server
}

/// A `--perftest` client of `mode` to 127.0.0.1:`port`.
fn client(mode: &str, port: u16, extra: &[&str]) -> Perf {
    let peer = format!("127.0.0.1:{port}");
    let mut list = args(&[mode, "--perftest", "--connect", &peer, "--json"]);
    list.extend(args(&SOCKET[..2]));
    list.extend(args(extra));
    Perf::start("client", &[], &list)
}

/// Checks one side's report of a clean run of `iters` `size`-octet
/// messages: the numbers, what it counted, no errors.
fn check_side(report: &Value, mode: &str, size: u64, iters: u64) {
    assert_eq!(report["mode"], mode, "{report}");
    assert_eq!(report["perftest"], true, "{report}");
    assert_eq!(report["peer_version"], wire::VERSION, "{report}");
    assert_eq!(
        (report["size"].as_u64(), report["iters"].as_u64()),
        (Some(size), Some(iters)),
        "{report}"
    );
    assert!(
        report["bw_avg_mbps"].as_f64().is_some_and(|bw| bw > 0.0),
        "{report}"
    );
    let expected = match (report["role"].as_str(), mode) {
        (Some("client"), "write-bw" | "send-bw") => iters,
        (Some("server"), "read-bw") => iters,
        _ => size * iters,
    };
    assert_eq!(report["verified"]["count"], expected, "{report}");
    for field in ["crc_errors", "terminates_sent", "terminates_received"] {
        assert_eq!(report["counters"][field], 0, "{field}: {report}");
    }
}

/// A run of `mode` at `size` octets, `iters` messages, both sides given
/// `extra`; the reports, server's first.
fn run(mode: &str, port: u16, size: u64, iters: u64, extra: &[&str]) -> (Value, Value) {
    let (size_text, iters_text) = (size.to_string(), iters.to_string());
    let mut options = vec!["-s", &size_text, "-n", &iters_text];
    options.extend_from_slice(extra);
    let server = server(mode, port, &options);
    let client = client(mode, port, &options);
    let (server, client) = finish_pair(server, client);
    check_side(&server, mode, size, iters);
    check_side(&client, mode, size, iters);
    assert_eq!(client["role"], "client");
    assert_eq!(client["measured_by"], "client");
    // perftest skips the peak above 20000 messages.
    let peak = client["bw_peak_mbps"].as_f64().expect("a peak");
    assert_eq!(peak > 0.0, iters <= 20_000, "{client}");
    if mode == "send-bw" {
        // The send test's server measures its own arrivals.
        assert_eq!(server["measured_by"], "server");
    } else {
        // The other servers print the client's report.
        for field in ["bw_peak_mbps", "bw_avg_mbps", "msg_rate_mpps"] {
            assert_eq!(server[field], client[field], "{field}");
        }
    }
    // Each side targets what the other advertised.
    assert_eq!(server["remote"], client["local"]);
    assert_eq!(client["remote"], server["local"]);
    (server, client)
}

#[test]
fn every_test_runs_between_two_processes_at_a_large_and_a_small_size() {
    let _serial = uwarp_testing::serial();
    for (i, mode) in ["write-bw", "read-bw", "send-bw"].into_iter().enumerate() {
        let port = PORT + 2 * i as u16;
        run(mode, port, 65536, 300, &[]);
        // Small messages cycle through the peer's buffer; an odd count
        // makes the send test post one receive too many, as perftest.
        run(mode, port + 1, 64, 1001, &[]);
    }
}

#[test]
fn crcs_and_the_read_tests_outstanding_reads_are_negotiated() {
    let _serial = uwarp_testing::serial();
    let (server, client) = run("read-bw", PORT + 10, 4096, 100, &["--crc", "-o", "4"]);
    for report in [&server, &client] {
        assert_eq!(report["mpa"]["crc"], true, "{report}");
        assert_eq!(report["mpa"]["ord"], 4, "{report}");
        assert_eq!(report["local"]["out_reads"], 4, "{report}");
    }
    let (server, _) = run("write-bw", PORT + 11, 4096, 100, &[]);
    assert_eq!(server["mpa"]["crc"], false);
    assert_eq!(server["local"]["out_reads"], 1);
}

/// Above 20000 messages the client keeps two times, not every message's.
#[test]
fn a_long_run_skips_the_peak() {
    let _serial = uwarp_testing::serial();
    run("send-bw", PORT + 12, 64, 20_001, &[]);
}

/// A client in this process that connects to a `--perftest` server on
/// `port` and sends `first` as its first comm message; the connection
/// lasts as long as what it returns.
fn hostile_client(port: u16, first: &[u8]) -> (Device, MemoryRegion) {
    let device = Device::open(DeviceConfig::default()).unwrap();
    let (qp, inbox) = comm_qp(&device);
    let params = ConnectParams {
        mpa: Options::new(Test::Write).comm_params(),
        ..ConnectParams::default()
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    device.connect(addr, &qp, params).unwrap();
    let wr = SendWr::new(2, SendOp::Send, Payload::Inline(first.to_vec()));
    qp.post_send(wr).unwrap();
    (device, inbox)
}

/// A queue pair with a comm channel's receive posted, as perftest's
/// comm channel has before it connects or accepts, and the receive's
/// memory.
fn comm_qp(device: &Device) -> (QueuePair, MemoryRegion) {
    let pd = device.alloc_pd().unwrap();
    let cq = device.create_cq(8);
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let inbox = pd.alloc_mr(wire::DEST_LEN, Access::LOCAL_WRITE).unwrap();
    qp.post_recv(RecvWr {
        wr_id: 1,
        sgl: vec![inbox.whole()],
    })
    .unwrap();
    (qp, inbox)
}

/// A `--perftest` server's end after `first` from a hostile client.
fn server_against(port: u16, first: &[u8]) -> Finished {
    let server = server("write-bw", port, &["--timeout", "5"]);
    let _peer = hostile_client(port, first);
    server.finish()
}

#[test]
fn a_peer_older_than_perftest_5_70_is_refused() {
    let _serial = uwarp_testing::serial();
    let failure = server_against(PORT + 20, &wire::encode_version("5.60")).failure();
    assert!(failure.contains("version is \"5.60\""), "{failure}");
    let failure = server_against(PORT + 21, &wire::encode_version("not perftest")).failure();
    assert!(failure.contains("needs 5.70 or later"), "{failure}");
}

#[test]
fn comm_messages_of_the_wrong_length_are_refused() {
    let _serial = uwarp_testing::serial();
    let failure = server_against(PORT + 22, b"6.06\0\0\0\0").failure();
    assert!(
        failure.contains("version message has 8 octets, not 16"),
        "{failure}"
    );
    let failure = server_against(PORT + 23, &[b'6'; 100]).failure();
    assert!(
        failure.contains("version message is longer than the 56-octet receive buffer"),
        "{failure}"
    );
}

/// A server in this process that accepts a `--perftest` client's comm
/// connection and never answers it.
#[test]
fn a_silent_server_times_the_client_out() {
    let _serial = uwarp_testing::serial();
    let device = Device::open(DeviceConfig::default()).unwrap();
    let listener = device.listen("127.0.0.1:0").unwrap();
    let port = listener.local_addr().port();
    let client = client("write-bw", port, &["--timeout", "2"]);
    let request = listener.get_request(Duration::from_secs(30)).unwrap();
    let (qp, _inbox) = comm_qp(&device);
    request
        .accept(&qp, Options::new(Test::Write).comm_params())
        .unwrap();
    let failure = client.finish().failure();
    assert!(failure.contains("timed out waiting for"), "{failure}");
}

#[test]
fn a_refused_connection_fails_at_once() {
    let _serial = uwarp_testing::serial();
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let failure = client("send-bw", port, &[]).finish().failure();
    assert!(failure.to_lowercase().contains("refused"), "{failure}");
}

#[test]
fn options_perftest_cannot_carry_are_refused() {
    let _serial = uwarp_testing::serial();
    let cases: [(&[&str], &str); 5] = [
        (
            &["write-lat"],
            "--perftest is for write-bw, read-bw and send-bw",
        ),
        (
            &["write-bw", "-q", "2"],
            "-q is not available with --perftest",
        ),
        (
            &["send-bw", "-D", "1"],
            "-D is not available with --perftest",
        ),
        (&["read-bw", "-n", "4"], "-n must be at least 5"),
        (
            &["write-bw", "-s", "9000000"],
            "-s must be 1 to 8388608 octets",
        ),
    ];
    for (list, reason) in cases {
        let mut list = args(list);
        list.extend(args(&[
            "--perftest",
            "--connect",
            "127.0.0.1:9",
            "--transport",
            "socket",
        ]));
        let failure = Perf::start("uwarp-perf", &[], &list).finish().failure();
        assert!(failure.contains(reason), "{list:?}: {failure}");
    }
}
