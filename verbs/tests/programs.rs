//! The drop-in libibverbs and librdmacm, end to end: Debian's own
//! `ibv_devices` and `ibv_devinfo`, and C programs compiled against the
//! installed headers (devices, completion channels and queues, the
//! connection manager over loopback), run unmodified on uwarp by
//! `uwarp-run`.

mod support;

use support::{assert_success, compile_c, debian_tool, uwarp_run};

#[test]
fn debian_ibv_devices_lists_the_uwarp_device() {
    let output = uwarp_run(debian_tool("ibv_devices"), &[]);
    assert_success("ibv_devices", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("uwarp0"), "{stdout}");
}

#[test]
fn debian_ibv_devinfo_shows_an_active_iwarp_port() {
    let output = uwarp_run(debian_tool("ibv_devinfo"), &["-v"]);
    assert_success("ibv_devinfo -v", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "hca_id:\tuwarp0",
        "transport:\t\t\tiWARP (1)",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "max_qp_rd_atom:\t\t\t128",
        "atomic_cap:\t\t\tATOMIC_NONE (0)",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

#[test]
fn a_c_program_queries_the_device_through_the_headers() {
    let program = compile_c("device_queries");
    let output = uwarp_run(&program, &[]);
    assert_success("device_queries", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_c_program_makes_channels_and_queues_and_waits_on_them() {
    let program = compile_c("completion_queues");
    let output = uwarp_run(&program, &[]);
    assert_success("completion_queues", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_transport_uwarp_does_not_have_fails_the_open_with_a_reason() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .args(["--transport", "carrier-pigeon"])
        .arg(debian_tool("ibv_devinfo"))
        .output()
        .expect("uwarp-run runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("UWARP_TRANSPORT=carrier-pigeon: the transports are: socket"),
        "{stderr}"
    );
}

#[test]
fn a_c_program_connects_accepts_rejects_and_disconnects() {
    let program = compile_c("cm_connect");
    let output = uwarp_run(&program, &[]);
    assert_success("cm_connect", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// A TCP port nothing listens on now (the system's choice for port 0).
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    probe.local_addr().expect("its address").port()
}

/// Debian's rping, server and client in two processes on uwarp over
/// loopback, `count` pings of validated data, with `extra` options on both
/// sides; returns both outputs.
fn rping_pair(count: u32, extra: &[&str]) -> (std::process::Output, std::process::Output) {
    let rping = debian_tool("rping");
    let port = free_port().to_string();
    let count = count.to_string();
    let mut server_args = vec!["-s", "-a", "127.0.0.1", "-p", &port, "-C", &count, "-v"];
    server_args.extend_from_slice(extra);
    let server = std::process::Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .arg(&rping)
        .args(&server_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the rping server starts");
    // Read its output while it runs: a ping of 64 KiB printed with -v
    // fills the pipe, and a server blocked writing would never answer.
    let server = std::thread::spawn(move || server.wait_with_output());
    let mut client_args = vec![
        "-c",
        "-a",
        "127.0.0.1",
        "-p",
        &port,
        "-C",
        &count,
        "-v",
        "-V",
    ];
    client_args.extend_from_slice(extra);
    // The server listens once its uwarp device is up: until then the
    // client's connect is refused and it exits at once; try again.
    let started = std::time::Instant::now();
    let client = loop {
        let client = uwarp_run(&rping, &client_args);
        let refused = String::from_utf8_lossy(&client.stderr).contains("REJECTED");
        if client.status.success()
            || !refused
            || started.elapsed() > std::time::Duration::from_secs(20)
        {
            break client;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let server = server
        .join()
        .expect("the output reader")
        .expect("the rping server ends");
    (server, client)
}

/// Checks an rping pair's outputs: both succeeded, and each printed every
/// ping's data (the client after comparing it, `-V`).
fn assert_rping_pinged(
    count: u32,
    (server, client): &(std::process::Output, std::process::Output),
) {
    assert_success("rping -s", server);
    assert_success("rping -c", client);
    let pings = |output: &std::process::Output, prefix: &str| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.starts_with(prefix) && line.contains("rdma-ping-"))
            .count()
    };
    assert_eq!(pings(server, "server ping data: "), count as usize);
    assert_eq!(pings(client, "ping data: "), count as usize);
}

#[test]
fn debian_rping_pings_between_two_processes() {
    assert_rping_pinged(20, &rping_pair(20, &[]));
}

#[test]
fn debian_rping_pings_with_queue_pairs_it_made_itself() {
    // -q: ibv_create_qp and ibv_modify_qp by hand, the queue pair named by
    // conn_param.qp_num in rdma_connect and rdma_accept.
    assert_rping_pinged(5, &rping_pair(5, &["-q"]));
}

#[test]
fn debian_rping_moves_large_pings() {
    // 64 KiB - 1 octets a ping: RDMA Reads and Writes of many segments.
    assert_rping_pinged(5, &rping_pair(5, &["-S", "65535"]));
}
