//! The two-host modes between two `uwarp-perf` processes on DPDK, joined
//! by a net_memif link (each process with its own `--file-prefix`, which
//! `uwarp-perf` gives it): every mode at a small count with its data
//! verified, the bandwidth modes with zero-copy transmit, MPA revision 1
//! with Markers, inline Sends and each peer-to-peer RTR, a size sweep
//! with its chart, Sends for a duration over four queue pairs, a
//! refused connection and an unreachable peer. Needs root (DPDK's memif).

mod common;

use common::{args, check_pair, finish_and_check, finish_pair, side_args};
use common::{check_marked, check_p2p, p2p_pings, small_run, Perf, ITERS, MARKED_WRITES, MODES};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use uwarp_testing::{root_or_skip, serial};

use serde_json::Value;

/// The server's address on the link (the link is private to the two
/// processes, so the tests of this file share the subnet).
const SERVER_IP: &str = "10.81.0.1";
const CLIENT_IP: &str = "10.81.0.2";
const PORT: u16 = 18515;

/// The memif socket of one run, removed afterwards.
struct Socket(PathBuf);

impl Socket {
    fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("uwarp-twohost-{}-{test}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Socket(path)
    }

    /// The `--eal` of the memif `role` side.
    fn eal(&self, role: &str, mac: &str) -> String {
        format!(
            "--vdev net_memif0,role={role},socket={},socket-abstract=no,mac={mac}",
            self.0.display()
        )
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Starts the server of `mode` (memif's server side too) and, once its
/// memif socket exists, the client with `client_args` aimed at `port`.
fn start(mode: &str, test: &str, port: u16, client_args: &[String]) -> (Perf, Perf, Socket) {
    start_towards(mode, test, &format!("{SERVER_IP}:{port}"), &[], client_args)
}

/// [`start`] with the server given `server_args` and the client aimed at
/// `target` (ADDR:PORT).
fn start_towards(
    mode: &str,
    test: &str,
    target: &str,
    server_args: &[String],
    client_args: &[String],
) -> (Perf, Perf, Socket) {
    let socket = Socket::new(test);
    let server_args = side_args(
        mode,
        &["--server", "--port", &PORT.to_string()],
        &[
            "--eal",
            &socket.eal("server", "02:fe:00:00:00:01"),
            "--ip",
            &format!("{SERVER_IP}/24"),
        ],
        server_args,
    );
    let mut server = Perf::start("server", &[], &server_args);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.0.exists() {
        assert!(
            !server.exited(),
            "the server exited before its memif socket existed"
        );
        assert!(Instant::now() < deadline, "no memif socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The socket exists from the EAL's probe, a moment before the port
    // starts; a memif client arriving in between is refused for good.
    std::thread::sleep(Duration::from_millis(100));
    let client_args = side_args(
        mode,
        &["--connect", target],
        &[
            "--eal",
            &socket.eal("client", "02:fe:00:00:00:02"),
            "--ip",
            &format!("{CLIENT_IP}/24"),
        ],
        client_args,
    );
    let client = Perf::start("client", &[], &client_args);
    (server, client, socket)
}

/// A run of `mode` with `client_args`; both reports.
fn run(mode: &str, test: &str, client_args: &[String]) -> (Value, Value) {
    let (server, client, _socket) = start(mode, test, PORT, client_args);
    finish_pair(server, client)
}

#[test]
fn every_mode_runs_between_two_processes_over_memif() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    for mode in MODES {
        let (server, client, _socket) = start(mode, "modes", PORT, &small_run(mode));
        let (server, client) = finish_and_check(server, client, mode, ITERS);
        assert_eq!(client["transport"], "dpdk");
        assert_eq!(client["mpa"]["rtr"], "write", "{client}");
        // Each process's cores: the one connection set up and handed
        // over, frames received, nothing malformed or reset; all run by
        // the measuring thread, which has nothing to share a CPU with.
        for report in [&server, &client] {
            assert_eq!(report["cpus"]["shared_cpu"], false, "{report}");
            let threads = &report["cpus"]["threads"];
            assert_eq!(threads.as_array().map(Vec::len), Some(1), "{report}");
            let host = &report["host"];
            assert_eq!(host["handed_over"], 1, "{report}");
            assert!(host["frames_received"].as_u64().unwrap() > 0, "{report}");
            assert_eq!(host["malformed"], 0, "{report}");
            assert_eq!(host["resets_sent"], 0, "{report}");
        }
    }
}

/// The bandwidth modes that send from the client with it sending from
/// registered memory (`--zero-copy-from`): its Writes and Sends go by
/// reference and complete on TCP's ACK, and the server checks the data.
#[test]
fn bandwidth_modes_run_with_zero_copy_transmit() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    for mode in ["write-bw", "send-bw"] {
        let mut client_args = small_run(mode);
        client_args.extend(args(&["--zero-copy-from", "1024"]));
        let (server, client, _socket) = start(mode, "zero-copy", PORT, &client_args);
        let (_, client) = finish_and_check(server, client, mode, ITERS);
        let by_reference = client["counters"]["fpdus_sent_by_reference"].as_u64();
        assert!(by_reference.unwrap() > 0, "{client}");
    }
}

/// The MPA options of the tool on DPDK: revision 1 with Markers and CRCs
/// under bulk Writes, inline Sends, and each peer-to-peer RTR a client
/// may offer in revision 2, every run's data verified.
#[test]
fn mpa_options_and_inline_sends_run_over_memif() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let (server, client) = run("write-bw", "markers", &args(&MARKED_WRITES));
    check_marked(&server, &client);

    let inline = args(&["-s", "64", "-n", "500", "-I", "64"]);
    let (server, client) = run("send-lat", "inline", &inline);
    check_pair(&server, &client, "send-lat", &[64], Some(500));

    for rtr in ["none", "read", "send"] {
        let (server, client) = run("write-lat", rtr, &p2p_pings(rtr));
        check_p2p(&server, &client, rtr);
    }
}

#[test]
fn a_size_sweep_draws_its_chart() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let chart = std::env::temp_dir().join(format!("uwarp-twohost-{}.svg", std::process::id()));
    let _ = std::fs::remove_file(&chart);
    let sweep = args(&[
        "-a",
        "-n",
        "50",
        "--crc",
        "--plot",
        &chart.display().to_string(),
    ]);
    let (server, client) = run("write-bw", "sweep", &sweep);
    let sizes: Vec<u64> = (1..=23).map(|k| 1 << k).collect();
    check_pair(&server, &client, "write-bw", &sizes, Some(50));
    assert_eq!(client["mpa"]["crc"], true);
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    let _ = std::fs::remove_file(&chart);
    assert!(svg.starts_with("<svg "), "{svg}");
    // One line through every size, a dot at each, and its legend.
    let line = svg.split("<polyline ").skip(1).find(|l| {
        let points = l.split("points=\"").nth(1).unwrap().split('"').next();
        points.unwrap().split_whitespace().count() == sizes.len()
    });
    assert!(line.is_some(), "{svg}");
    assert_eq!(svg.matches("<circle ").count(), sizes.len());
    assert!(svg.contains(">\nbandwidth\n</text>"), "{svg}");
}

/// `--cpus`: each side's cores on threads of their own, pinned as it
/// says, move and verify the data as when the measuring thread runs
/// them; each side names its threads and their CPUs, and says whether
/// two shared a CPU: the client's control and dataplane cores pinned to
/// one CPU did; the server's three busy threads (two pinned, the
/// measuring thread not) did when the process has fewer than three CPUs,
/// and may have otherwise.
#[test]
fn cores_pinned_with_cpus_say_whether_they_shared_a_cpu() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let target = format!("{SERVER_IP}:{PORT}");
    let mut client_args = small_run("write-bw");
    client_args.extend(args(&["--cpus", "1,1"]));
    let server_args = args(&["--cpus", "0,1"]);
    let (server, client, _socket) =
        start_towards("write-bw", "cpus", &target, &server_args, &client_args);
    let (server, client) = finish_and_check(server, client, "write-bw", ITERS);
    let threads = |report: &Value| -> Vec<(String, Value)> {
        let list = report["cpus"]["threads"].as_array().unwrap();
        list.iter()
            .map(|t| (t["name"].as_str().unwrap().to_string(), t["cpu"].clone()))
            .collect()
    };
    let expected = |control: u64, dataplane: u64| {
        vec![
            ("control core".to_string(), Value::from(control)),
            ("dataplane core 0".to_string(), Value::from(dataplane)),
            ("measuring thread".to_string(), Value::Null),
        ]
    };
    assert_eq!(threads(&server), expected(0, 1), "{server}");
    assert_eq!(threads(&client), expected(1, 1), "{client}");
    assert_eq!(client["cpus"]["shared_cpu"], true, "{client}");
    assert_eq!(
        client["cpus"]["sharing"],
        "the control core and the dataplane core 0 are pinned to CPU 1"
    );
    let cpus = server["cpus"]["available_cpus"].as_u64().unwrap();
    if cpus < 3 {
        assert_eq!(server["cpus"]["shared_cpu"], true, "{server}");
        let why = server["cpus"]["sharing"].as_str().unwrap();
        assert!(
            why.starts_with(&format!("3 busy threads on {cpus} CPU")),
            "{why}"
        );
    } else {
        assert!(server["cpus"]["shared_cpu"].is_null(), "{server}");
    }
}

#[test]
fn sends_for_a_duration_over_four_queue_pairs_all_arrive() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let run_args = args(&["-D", "1", "-q", "4", "-t", "16", "-s", "4096"]);
    let (server, client) = run("send-bw", "duration", &run_args);
    // The server counted every Send the client counted, on each queue
    // pair, before it agreed.
    check_pair(&server, &client, "send-bw", &[4096], None);
    assert_eq!(client["qps"], 4);
    assert_eq!(server["qps"], 4);
}

#[test]
fn a_port_without_a_server_refuses_the_client() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let (server, client, _socket) = start("write-bw", "refused", PORT + 1, &[]);
    let refused = client.finish();
    drop(server);
    let reason = refused.failure();
    assert!(
        reason.contains(&format!("{SERVER_IP}:{} refused the connection", PORT + 1)),
        "{reason}"
    );
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
}

/// An address on the link that no host holds: ARP gets no answer, and the
/// client says the peer is unreachable.
#[test]
fn an_address_nobody_holds_is_unreachable() {
    if !root_or_skip("DPDK's net_memif") {
        return;
    }
    let _serial = serial();
    let nobody = "10.81.0.9";
    let target = format!("{nobody}:{PORT}");
    let (server, client, _socket) = start_towards("write-bw", "unreachable", &target, &[], &[]);
    let unreachable = client.finish();
    drop(server);
    let reason = unreachable.failure();
    assert!(
        reason.contains(&format!("{target} is unreachable")),
        "{reason}"
    );
    assert!(unreachable.stdout.is_empty(), "{}", unreachable.stdout);
}
