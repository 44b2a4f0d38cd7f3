//! A host on the client end of a `net_memif` link comes up though its
//! server refused it at first.
//!
//! A memif server listens from the moment its EAL probes it, and refuses
//! ("device disabled") a client that connects before its port starts; a
//! refused DPDK memif client does not connect again by itself. Here the
//! server process starts its port 3 s after its EAL, and the client's
//! `TcpHost` starts meanwhile: it must start its port again until the
//! link is up (every `MEMIF_CLIENT_ATTEMPT`), well within its 10 s
//! `link_wait`. Before, it waited the whole `link_wait` on the refused
//! link and failed (seen as rsockets and rping runs over memif whose link
//! stayed down).
//!
//! Runs without libtest's harness: the test starts a copy of itself as
//! the server (DPDK's shared memory needs root).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use uwarp_control::host::MEMIF_CLIENT_ATTEMPT;
use uwarp_control::{HostConfig, TcpHost};
use uwarp_dataplane::runtime::port_config;
use uwarp_dataplane::tcp::{End, TcpApp};
use uwarp_dataplane::{Device, Eal, EalConfig, Mempool, MempoolConfig, Port};
use uwarp_stack::tcp::{Connection, Consumer, Disposition, Instant as TcpInstant, Stats};

const SOCKET: &str = "/tmp/uwarp-test-memif-refused/memif.sock";
const SERVER_LATE: Duration = Duration::from_secs(3);

fn vdev(role: &str, last: u8) -> String {
    format!("net_memif0,role={role},socket={SOCKET},socket-abstract=no,mac=02:fe:00:00:05:0{last}")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--server") {
        server();
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("a_refused_memif_client_host_comes_up: test");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: DPDK's net_memif needs root");
        return;
    }
    std::fs::create_dir_all("/tmp/uwarp-test-memif-refused").expect("the socket's directory");
    let _ = std::fs::remove_file(SOCKET);
    let mut server = Command::new(&args[0])
        .arg("--server")
        .stdin(Stdio::piped())
        .spawn()
        .expect("start the server");
    let started = Instant::now();
    while !std::path::Path::new(SOCKET).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let config = EalConfig::virtual_devices([vdev("client", 2)]).file_prefix(&format!(
        "uwarp-memif-refused-client-{}",
        std::process::id()
    ));
    let eal = Eal::init(&config).expect("EAL with net_memif");
    let device = Device::by_name(eal, "net_memif0").expect("the memif port");
    let host_config = HostConfig::from_cidr("10.85.0.2/24").expect("an address");
    let up = Instant::now();
    let host = TcpHost::<Idle>::start(eal, device, host_config);
    let took = up.elapsed();
    drop(server.stdin.take());
    let status = server.wait().expect("the server ended");
    let _ = std::fs::remove_file(SOCKET);
    let host = host.unwrap_or_else(|e| panic!("the client's link never came up ({took:?}): {e}"));
    assert!(
        took >= SERVER_LATE - Duration::from_millis(500),
        "the link came up in {took:?}, before the server started its port"
    );
    assert!(
        took < SERVER_LATE + 2 * MEMIF_CLIENT_ATTEMPT,
        "up only after {took:?}"
    );
    host.shutdown();
    assert!(status.success(), "the server failed: {status}");
    println!("client up after {took:?}; test result: ok. 1 passed");
}

/// Listens at once (its EAL probes the port), starts the port only
/// [`SERVER_LATE`] later, and keeps it until standard input closes.
fn server() {
    let config = EalConfig::virtual_devices([vdev("server", 1)]).file_prefix(&format!(
        "uwarp-memif-refused-server-{}",
        std::process::id()
    ));
    let eal = Eal::init(&config).expect("EAL with net_memif");
    std::thread::sleep(SERVER_LATE);
    let pool = std::sync::Arc::new(
        Mempool::new(eal, "refused-server", &MempoolConfig::default(), None).expect("a pool"),
    );
    let device = Device::by_name(eal, "net_memif0").expect("the memif port");
    let settings = port_config(&device.capabilities().expect("capabilities"), 1);
    let mut port =
        Port::configure(eal, device, &settings, std::slice::from_ref(&pool)).expect("configure");
    port.start().expect("start the server's port");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    let _ = port.stop();
}

/// A connection's application that does nothing: the test needs only
/// the host's port up.
struct Idle;

impl Consumer for Idle {
    fn on_data(&mut self, _pos: u64, _data: &[u8], _in_order: bool) -> Disposition {
        Disposition::Keep
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

impl TcpApp for Idle {
    fn drive(&mut self, _now: TcpInstant, _conn: &mut Connection) {}

    fn on_end(&mut self, _end: End, _stats: &Stats) {}
}
