//! uwarp on AF_XDP beside the kernel (`uwarp-run --transport dpdk --iface`):
//! Debian's rping and `ib_write_bw -R` on the drop-ins, on queue 0 of a
//! veth whose kernel keeps the interface and its address, against a peer
//! in another network namespace on the socket transport (so the peer is
//! the kernel's TCP). While they run, the kernel on the same interface
//! and address moves 64 MiB each way over its own TCP (SHA-256 checked),
//! answers ping, and never sees a segment of uwarp's (it would answer it
//! with a reset: its reset counter stays put). A kernel listener on the
//! interface's second address, on the port uwarp listens on, is the
//! kernel's. A second uwarp process on the interface is refused, and one
//! killed is replaced. Needs root.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::netns::{self, in_namespace, Topology, Veth};
use support::pair::{free_port, Running};
use support::{assert_success, debian_tool};
use uwarp_testing::{root_or_skip, serial};

/// The namespace of uwarp and the kernel that shares its interface.
const HOST: &str = "uwxk-host";
/// The namespace of the peer.
const PEER: &str = "uwxk-peer";
/// The shared interface (in `HOST`) and its address.
const HOST_IF: &str = "uwxk0";
const HOST_IP: &str = "10.84.0.1";
/// A second address of the shared interface (the kernel's alone: uwarp
/// is on the first).
const HOST_IP_2: &str = "10.84.0.3";
/// The peer's end (in `PEER`) and its address.
const PEER_IF: &str = "uwxk1";
const PEER_IP: &str = "10.84.0.2";

/// How long any one program may run.
const LIMIT: Duration = Duration::from_secs(60);

/// The veth pair of the test's two namespaces.
const VETH: Veth = Veth {
    host_ns: HOST,
    host_if: HOST_IF,
    host_ip: HOST_IP,
    peer_ns: PEER,
    peer_if: PEER_IF,
    peer_ip: PEER_IP,
};

/// The test's namespaces; the shared interface has its second address
/// (the kernel's alone) after the first (uwarp's).
fn topology() -> Topology {
    let topology = Topology::new(VETH);
    topology.add_host_address(HOST_IP_2);
    topology
}

/// uwarp on AF_XDP beside the kernel, on the shared interface.
const ON_AF_XDP: &[&str] = &["--transport", "dpdk", "--iface", HOST_IF];
/// uwarp on the kernel's TCP.
const ON_SOCKETS: &[&str] = &[];

/// The kernel's TCP segments sent with RST in `ns` so far.
fn resets_sent(ns: &str) -> u64 {
    let output = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .expect("cat runs");
    let snmp = String::from_utf8_lossy(&output.stdout);
    let mut tcp = snmp.lines().filter(|line| line.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|name| name == "OutRsts")
        .expect("Tcp: OutRsts");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// A kernel TCP echo server on `host` and `port` in `HOST` (one
/// connection), and a client in `PEER` that sends MiBs (the fourth
/// argument) through it and reads them back, comparing SHA-256s: prints
/// `equal SHA` when they match. The client gives up after 20 s without
/// progress.
const ECHO: &str = r#"
import hashlib, os, socket, sys, threading
role, host, port, mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
total = mib << 20
if role == "serve":
    listener = socket.create_server((host, port))
    print("listening", flush=True)
    conn, _ = listener.accept()
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        conn.sendall(data)
    conn.close()
else:
    conn = socket.create_connection((host, port), timeout=20)
    sent, received = hashlib.sha256(), hashlib.sha256()
    def send():
        block = os.urandom(1 << 20)
        for i in range(total >> 20):
            chunk = bytes([i & 0xff]) + block[1:]
            sent.update(chunk)
            conn.sendall(chunk)
        conn.shutdown(socket.SHUT_WR)
    sender = threading.Thread(target=send)
    sender.start()
    count = 0
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        received.update(data)
        count += len(data)
    sender.join()
    if count == total and sent.digest() == received.digest():
        print("equal", received.hexdigest(), flush=True)
    else:
        print("differ", count, flush=True)
        sys.exit(1)
"#;

fn python() -> &'static Path {
    Path::new("/usr/bin/python3")
}

/// Whether an XDP program is attached to the shared interface.
fn xdp_attached() -> bool {
    netns::xdp_attached(HOST, HOST_IF)
}

/// Waits until an XDP program is attached to the shared interface, at
/// most [`LIMIT`], or until `alive` says its owner is gone.
fn wait_for_xdp(alive: impl FnMut() -> bool) {
    netns::wait_for_xdp(HOST, HOST_IF, LIMIT, alive)
}

/// A kernel echo server on `host` and `port` in `HOST`, and its client
/// in `PEER` sending `mib` MiB each way, both started.
fn kernel_echo(host: &str, port: &str, mib: &str) -> (Running, Running) {
    let server = Running::start(in_namespace(
        HOST,
        None,
        python(),
        &["-c", ECHO, "serve", host, port, mib],
    ));
    std::thread::sleep(Duration::from_millis(300));
    let client = Running::start(in_namespace(
        PEER,
        None,
        python(),
        &["-c", ECHO, "send", host, port, mib],
    ));
    (server, client)
}

/// Checks a [`kernel_echo`]'s client and server, which `what` names.
fn assert_echoed(what: &str, server: &Output, client: &Output) {
    assert_success(&format!("{what}: the kernel's echo client"), client);
    assert_success(&format!("{what}: the kernel's echo server"), server);
    assert!(String::from_utf8_lossy(&client.stdout).starts_with("equal "));
}

/// The kernel's own traffic on the shared interface and address: 64 MiB
/// each way through a kernel echo server, and five pings; checks both.
fn kernel_traffic() {
    let port = free_port().to_string();
    let (server, client) = kernel_echo(HOST_IP, &port, "64");
    let ping = Running::start(in_namespace(
        PEER,
        None,
        Path::new("/usr/bin/ping"),
        &["-c", "5", "-i", "0.2", "-W", "2", HOST_IP],
    ));
    let deadline = Instant::now() + LIMIT;
    let ping = ping.finish(deadline);
    let client = client.finish(deadline);
    let server = server.finish(deadline);
    assert_success("ping of the shared address", &ping);
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains("5 received"),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
    assert_echoed("the shared address", &server, &client);
}

/// While uwarp listens on `port` of its address, a kernel listener on the
/// interface's second address and the same port is the kernel's: the
/// peer's connection to it reaches the kernel and echoes 1 MiB each way
/// (uwarp's program steers only segments to uwarp's address).
fn kernel_keeps_the_second_address(port: &str) {
    let (server, client) = kernel_echo(HOST_IP_2, port, "1");
    let deadline = Instant::now() + LIMIT;
    let client = client.finish(deadline);
    let server = server.finish(deadline);
    assert_echoed("the second address, on uwarp's port", &server, &client);
}

/// `tool` as a server on uwarp beside the kernel in `HOST` and as its
/// client on the socket transport in `PEER`, with `server_args` and
/// `client_args`; both outputs once both ended. `meanwhile` runs once
/// the first server's XDP program is attached, before the client starts.
///
/// A refused client (the server not listening yet) starts the pair
/// again, server too: perftest's `-R` client opens a second connection
/// for its test right after the first one's handshake, and the server
/// listens for it only after that handshake, so a client may be refused
/// there, with the server already past its first listen (perftest 4.5's
/// own race; on Linux a refusal ends it the same way). A client retried
/// alone then met a server waiting for the second connection, and both
/// failed ("Bad wc status 5").
fn beside_kernel_pair(
    tool: &str,
    server_args: &[&str],
    client_args: &[&str],
    meanwhile: impl FnOnce(),
) -> (Output, Output) {
    let program = debian_tool(tool);
    let started = Instant::now();
    let mut meanwhile = Some(meanwhile);
    loop {
        let mut server = Running::start(in_namespace(HOST, Some(ON_AF_XDP), &program, server_args));
        wait_for_xdp(|| server.is_running());
        if let Some(meanwhile) = meanwhile.take() {
            meanwhile();
        }
        std::thread::sleep(Duration::from_millis(300));
        let client = Running::start(in_namespace(PEER, Some(ON_SOCKETS), &program, client_args))
            .finish(Instant::now() + LIMIT);
        let text = String::from_utf8_lossy(&client.stderr).into_owned()
            + &String::from_utf8_lossy(&client.stdout);
        // rping says REJECTED, perftest "Unexpected CM event".
        let refused = text.contains("REJECTED") || text.contains("Unexpected CM event");
        if client.status.success() || !refused || started.elapsed() > Duration::from_secs(30) {
            let server = server.finish(Instant::now() + LIMIT);
            return (server, client);
        }
        // Killed at once: its deadline has passed.
        server.finish(Instant::now());
    }
}

/// Both ends of a pair succeeded; when either did not, the panic shows
/// both ends' output (a client's failure is often the server's doing).
fn assert_pair_succeeded(what: &str, server: &Output, client: &Output) {
    let text = |output: &Output| {
        format!(
            "{}; stdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    assert!(
        server.status.success() && client.status.success(),
        "{what}:\nclient (the kernel's TCP): {}\nserver (uwarp on AF_XDP): {}",
        text(client),
        text(server)
    );
}

#[test]
fn rping_and_ib_write_bw_on_af_xdp_beside_the_kernels_own_traffic_one_process_at_a_time() {
    if !root_or_skip("AF_XDP beside the kernel (namespaces, XDP)") {
        return;
    }
    let _serial = serial();
    let _topology = topology();
    let resets_before = resets_sent(HOST);

    // The kernel's traffic runs while uwarp's program is attached, then
    // rping runs.
    let port = free_port().to_string();
    let (server, client) = beside_kernel_pair(
        "rping",
        &[
            "-s", "-a", HOST_IP, "-p", &port, "-C", "100", "-S", "3000", "-V",
        ],
        &[
            "-c", "-a", HOST_IP, "-p", &port, "-C", "100", "-S", "3000", "-V",
        ],
        || {
            assert!(xdp_attached(), "uwarp's XDP program is not attached");
            kernel_traffic();
            // The rping server has long been listening.
            kernel_keeps_the_second_address(&port);
            assert!(xdp_attached(), "uwarp's XDP program went away");
        },
    );
    assert_pair_succeeded("rping", &server, &client);
    assert!(
        !xdp_attached(),
        "uwarp's XDP program stayed after it exited"
    );

    // One uwarp process per interface: a second is refused without
    // touching the first's program; one killed leaves its program, which
    // the next process replaces.
    let first = Running::start(in_namespace(
        HOST,
        Some(ON_AF_XDP),
        &debian_tool("ib_write_bw"),
        &["-R", "-p", &free_port().to_string()],
    ));
    wait_for_xdp(|| true);
    let second = Running::start(in_namespace(
        HOST,
        Some(ON_AF_XDP),
        &debian_tool("ib_write_bw"),
        &["-R", "-p", &free_port().to_string()],
    ))
    .finish(Instant::now() + LIMIT);
    assert!(!second.status.success());
    let refusal = String::from_utf8_lossy(&second.stderr);
    assert!(
        refusal.contains("another uwarp process runs beside the kernel on uwxk0"),
        "{refusal}"
    );
    assert!(
        xdp_attached(),
        "the refused process detached the first's program"
    );
    // Killed (SIGKILL) at once: its deadline has passed.
    first.finish(Instant::now());
    assert!(xdp_attached(), "a killed process's program stays attached");

    let port = free_port().to_string();
    let (server, client) = beside_kernel_pair(
        "ib_write_bw",
        &["-R", "-p", &port, "-n", "2000"],
        &["-R", "-p", &port, "-n", "2000", HOST_IP],
        || {},
    );
    assert_pair_succeeded("ib_write_bw -R", &server, &client);
    let report = String::from_utf8_lossy(&client.stdout);
    assert!(report.contains("65536"), "{report}");

    // Had a segment of uwarp's reached the kernel, its TCP would have
    // answered with a reset (uwarp's ports are bound there, not
    // listening).
    assert_eq!(resets_sent(HOST), resets_before, "the kernel sent resets");
}

/// The interface's service, `uwarpd --iface HOST_IF` in `HOST`, built
/// beside `uwarp-run` (`cargo test --workspace` builds it), running
/// until dropped, when it gets SIGTERM.
struct Service(Running);

impl Service {
    fn start() -> Service {
        let uwarpd = Path::new(env!("CARGO_BIN_EXE_uwarp-run")).with_file_name("uwarpd");
        assert!(
            uwarpd.exists(),
            "{} is missing: build it (cargo build -p uwarp-service)",
            uwarpd.display()
        );
        let mut service = Running::start(in_namespace(HOST, None, &uwarpd, &["--iface", HOST_IF]));
        wait_for_xdp(|| service.is_running());
        assert!(xdp_attached(), "uwarpd did not attach its program");
        Service(service)
    }

    /// Stops it as an administrator would, and returns its output.
    fn stop(self) -> Output {
        let pid = self.0.pid();
        // SAFETY: kill(2) touches no memory; the pid is the running
        // `ip netns exec`, which exec'd uwarpd.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        self.0.finish(Instant::now() + LIMIT)
    }
}

/// A process speaking uwarpd's protocol itself (as any local root
/// process can): the port `held` of another application, listening,
/// is refused to it for a listener, and it cannot end or unlisten it.
fn another_process_cannot_touch_ports_it_does_not_hold(held: &str) {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::MetadataExt;
    // uwarpd's socket is named after its network namespace and the
    // interface's index there.
    let netns = std::fs::metadata(format!("/var/run/netns/{HOST}"))
        .expect("the namespace's file")
        .ino();
    let index = interface_index();
    let socket = format!("/run/uwarp/uwarpd-{netns}-{index}.sock");
    let mut service = std::os::unix::net::UnixStream::connect(&socket).expect("uwarpd's socket");
    service
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answers = BufReader::new(service.try_clone().unwrap());
    for request in [
        format!("listen {held}"),
        format!("end {held}"),
        format!("unlisten {held}"),
    ] {
        service
            .write_all(format!("{request}\n").as_bytes())
            .unwrap();
        let mut answer = String::new();
        answers.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), format!("err taken {held}"), "{request}");
    }
}

/// The index of the shared interface in `HOST`.
fn interface_index() -> u32 {
    let output = Command::new("ip")
        .args(["netns", "exec", HOST, "cat"])
        .arg(format!("/sys/class/net/{HOST_IF}/ifindex"))
        .output()
        .expect("cat runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("an index")
}

#[test]
fn several_processes_share_the_interface_through_uwarpd_and_one_killed_leaves_the_rest() {
    if !root_or_skip("uwarpd (namespaces, XDP)") {
        return;
    }
    let _serial = serial();
    let _topology = topology();
    let service = Service::start();

    // Two applications on the interface at once: an ib_write_bw server
    // whose client runs for a while, and an rping server.
    let (bw_port, ping_port) = (free_port().to_string(), free_port().to_string());
    let ib_write_bw = debian_tool("ib_write_bw");
    let bw_server = Running::start(in_namespace(
        HOST,
        Some(ON_AF_XDP),
        &ib_write_bw,
        &["-R", "-p", &bw_port, "-D", "30"],
    ));
    let rping = debian_tool("rping");
    let ping_server = Running::start(in_namespace(
        HOST,
        Some(ON_AF_XDP),
        &rping,
        &[
            "-s", "-a", HOST_IP, "-p", &ping_port, "-C", "300", "-S", "3000", "-V",
        ],
    ));
    std::thread::sleep(Duration::from_secs(2));
    another_process_cannot_touch_ports_it_does_not_hold(&ping_port);
    kernel_keeps_the_second_address(&ping_port);
    let bw_client = Running::start(in_namespace(
        PEER,
        Some(ON_SOCKETS),
        &ib_write_bw,
        &["-R", "-p", &bw_port, "-D", "30", HOST_IP],
    ));
    // The bandwidth test runs; then its server is killed mid-transfer.
    std::thread::sleep(Duration::from_secs(3));
    let killed = bw_server.finish(Instant::now());
    assert!(!killed.status.success());
    // Its peer sees its connection end, long before its 30 s are up.
    let waited = Instant::now();
    let bw_client = bw_client.finish(waited + Duration::from_secs(20));
    assert!(
        waited.elapsed() < Duration::from_secs(19),
        "the killed server's client hung"
    );
    assert!(
        !bw_client.status.success(),
        "the killed server's client succeeded"
    );

    // The other application never noticed.
    let ping_client = Running::start(in_namespace(
        PEER,
        Some(ON_SOCKETS),
        &rping,
        &[
            "-c", "-a", HOST_IP, "-p", &ping_port, "-C", "300", "-S", "3000", "-V",
        ],
    ))
    .finish(Instant::now() + LIMIT);
    let ping_server = ping_server.finish(Instant::now() + LIMIT);
    assert_pair_succeeded(
        "rping beside the killed process",
        &ping_server,
        &ping_client,
    );

    // The killed application, started again on the same interface,
    // serves again.
    let bw_port = free_port().to_string();
    let (server, client) = beside_kernel_pair(
        "ib_write_bw",
        &["-R", "-p", &bw_port, "-n", "2000"],
        &["-R", "-p", &bw_port, "-n", "2000", HOST_IP],
        || {},
    );
    let stopped = service.stop();
    let said = String::from_utf8_lossy(&stopped.stderr).into_owned();
    assert_pair_succeeded(
        &format!("ib_write_bw -R after the restart (uwarpd: {said})"),
        &server,
        &client,
    );
    assert!(stopped.status.success(), "{said}");
    assert!(!xdp_attached(), "uwarpd's program stayed after it stopped");
}
