//! Debian's unmodified `rping` on uwarp's drop-in libraries: server and
//! client in two processes (loopback on the socket transport, or a
//! net_memif link on uwarp's TCP over DPDK); against uwarp's own rping
//! (`uwarp_interop::rping`, the rping example's code) in both roles; and
//! a persistent server (`-P`) against a hostile peer.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Output;
use std::time::{Duration, Instant};

use support::assert_success;
use support::hostile::{first_untagged, hostile_peer, terminated_by, ulpdu, write_to_unknown_stag};
use support::pair::{
    free_port, run_pair, strings, wait_listening, Link, Loopback, MemifLink, Running, Side, TapLink,
};
use uwarp::{Device, DeviceConfig, LocalParams};
use uwarp_interop::rping::{self, Options};
use uwarp_stack::mpa::negotiation;
use uwarp_stack::wire::rdmap::Opcode;
use uwarp_stack::wire::terminate::TermError;

/// The longest a single rping run may take.
const LIMIT: Duration = Duration::from_secs(60);

/// Debian's rping, server and client in two processes on uwarp on `link`,
/// `count` pings of validated data, with `extra` rping options on both
/// sides; the client tries again while its output shows one of `refused`.
fn rping_pair(count: u32, extra: &[&str], link: &dyn Link, refused: &[&str]) -> (Output, Output) {
    let port = free_port().to_string();
    let count = count.to_string();
    let address = link.server_ip();
    let mut server = strings(&["-s", "-a", address, "-p", &port, "-C", &count, "-v"]);
    server.extend(strings(extra));
    let mut client = strings(&["-c", "-a", address, "-p", &port, "-C", &count, "-v", "-V"]);
    client.extend(strings(extra));
    run_pair(link, "rping", &port, [server, client], refused)
}

/// [`rping_pair`] on the socket transport over loopback.
fn rping_over_loopback(count: u32, extra: &[&str]) -> (Output, Output) {
    rping_pair(count, extra, &Loopback, &["REJECTED"])
}

/// Checks an rping pair's outputs: both succeeded, and each printed every
/// ping's data (the client after comparing it, `-V`).
///
/// rping's server ends when its client disconnects, and then its main
/// thread destroys the event channel while its connection-manager thread
/// may still be on its way back into `rdma_get_cm_event`, which then
/// fails and the thread exits the process with status 255 (rping's own
/// race: on the kernel's librdmacm the call answers `EBADF`, on uwarp's
/// `EINVAL`, a destroyed channel). A server that printed every ping and
/// ended that way succeeded.
fn assert_rping_pinged(count: u32, (server, client): &(Output, Output)) {
    assert_success("rping -c", client);
    let stderr = String::from_utf8_lossy(&server.stderr);
    let lost_its_channel_at_exit = server.status.code() == Some(255)
        && stderr.contains("DISCONNECT EVENT")
        && stderr
            .trim_end()
            .ends_with("rdma_get_cm_event: Invalid argument");
    if !lost_its_channel_at_exit {
        assert_success("rping -s", server);
    }
    let pings = |output: &Output, prefix: &str| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.starts_with(prefix) && line.contains("rdma-ping-"))
            .count()
    };
    assert_eq!(pings(server, "server ping data: "), count as usize);
    assert_eq!(pings(client, "ping data: "), count as usize);
}

/// rping's sizes: small, more than one TCP segment, its largest (64 KiB
/// less one octet).
const SIZES: [usize; 3] = [64, 3000, 65535];
/// Pings of each run.
const PINGS: u32 = 100;

#[test]
fn debian_rping_pings_between_two_processes_at_every_size() {
    for size in SIZES {
        let pair = rping_over_loopback(PINGS, &["-S", &size.to_string()]);
        assert_rping_pinged(PINGS, &pair);
    }
}

#[test]
fn debian_rping_pings_with_queue_pairs_it_made_itself() {
    // -q: ibv_create_qp and ibv_modify_qp by hand, the queue pair named by
    // conn_param.qp_num in rdma_connect and rdma_accept.
    let pair = rping_over_loopback(5, &["-q"]);
    assert_rping_pinged(5, &pair);
}

#[test]
fn debian_rping_pings_over_uwarps_tcp_on_dpdk() {
    if !uwarp_testing::root_or_skip("DPDK's net_memif") {
        return;
    }
    let link = MemifLink::new("verbs-rping");
    // The client tries again while the server does not listen yet.
    let pair = rping_pair(10, &[], &link, &["REJECTED"]);
    assert_rping_pinged(10, &pair);
}

/// uwarp's TCP on DPDK against the kernel's: the server on a net_tap
/// port, the client on the socket transport through the tap.
#[test]
fn debian_rping_on_dpdk_over_net_tap_serves_a_client_on_the_socket_transport() {
    if !uwarp_testing::root_or_skip("DPDK's net_tap") {
        return;
    }
    let link = TapLink::new("uwverbs0");
    let pair = rping_pair(10, &["-S", "3000"], &link, &["REJECTED"]);
    assert_rping_pinged(10, &pair);
}

/// uwarp's own rping with `size`-octet pings, [`PINGS`] of them, data
/// validated.
fn uwarp_options(size: usize) -> Options {
    Options {
        size,
        count: u64::from(PINGS),
        validate: true,
        timeout: Some(Duration::from_secs(30)),
        ..Options::default()
    }
}

/// Starts Debian's rping (on uwarp) with `args` (killed if the test
/// fails first).
fn spawn_rping(args: &[&str]) -> Running {
    Running::start(
        Side {
            tool: "rping",
            args: strings(args),
            options: Vec::new(),
        }
        .command(),
    )
}

/// Its output once `rping` ended, killed after [`LIMIT`].
fn finished(rping: Running) -> Output {
    rping.finish(Instant::now() + LIMIT)
}

#[test]
fn debian_rping_client_pings_uwarps_own_rping_server() {
    let device = Device::open(DeviceConfig::default()).expect("a uwarp device");
    let listener = device.listen("127.0.0.1:0").expect("a listener");
    let port = listener.local_addr().port().to_string();
    for size in SIZES {
        let (size_arg, count) = (size.to_string(), PINGS.to_string());
        let client = spawn_rping(&[
            "-c",
            "-a",
            "127.0.0.1",
            "-p",
            &port,
            "-C",
            &count,
            "-V",
            "-S",
            &size_arg,
        ]);
        let report = rping::serve_one(&device, &listener, &uwarp_options(size))
            .unwrap_or_else(|err| panic!("uwarp's rping server, {size} octets: {err}"));
        assert_success("rping -c", &finished(client));
        assert_eq!(report.pings, u64::from(PINGS), "{size} octets");
    }
}

#[test]
fn uwarps_own_rping_client_pings_a_debian_rping_server() {
    let device = Device::open(DeviceConfig::default()).expect("a uwarp device");
    for size in SIZES {
        let port = free_port();
        let (port_arg, size_arg, count) = (port.to_string(), size.to_string(), PINGS.to_string());
        let server = spawn_rping(&[
            "-s",
            "-a",
            "127.0.0.1",
            "-p",
            &port_arg,
            "-C",
            &count,
            "-S",
            &size_arg,
        ]);
        wait_listening(&port_arg);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let report = rping::run_client(&device, addr, &uwarp_options(size))
            .unwrap_or_else(|err| panic!("uwarp's rping client, {size} octets: {err}"));
        assert_eq!(report.pings, u64::from(PINGS), "{size} octets");
        assert_success("rping -s", &finished(server));
    }
}

#[test]
fn a_persistent_debian_rping_server_survives_hostile_peers_and_serves_on() {
    let port = free_port();
    let port_arg = port.to_string();
    let mut server = spawn_rping(&["-s", "-P", "-a", "127.0.0.1", "-p", &port_arg]);
    wait_listening(&port_arg);

    // Not MPA at all: the connection closes, nothing reaches rping.
    let mut junk = TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
    junk.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    junk.write_all(&[0x5A; 100]).expect("junk goes");
    let mut rest = Vec::new();
    let _ = junk.read_to_end(&mut rest);
    assert!(
        rest.is_empty() || !rest.starts_with(b"MPA ID Rep Frame"),
        "{rest:?}"
    );

    // A Request cut short: the peer closes in the middle of it.
    let mut cut = TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
    let request = negotiation::request(&LocalParams::default())
        .to_vec()
        .expect("a Request");
    cut.write_all(&request[..10]).expect("half a Request goes");
    drop(cut);

    let cases = [
        (
            write_to_unknown_stag(),
            false,
            TermError::DdpTaggedInvalidStag,
        ),
        (
            ulpdu(Opcode::Send, first_untagged(0), &[2; 16]),
            true,
            TermError::MpaCrcError,
        ),
        (
            ulpdu(Opcode::Send, first_untagged(0), &[3; 4096]),
            false,
            TermError::DdpUntaggedTooLong,
        ),
    ];
    for (ulpdu, corrupt, expected) in cases {
        let mut peer = hostile_peer(port);
        let error = terminated_by(&mut peer, &ulpdu, corrupt);
        assert_eq!(error, expected);
    }

    // The server serves on.
    let count = "10";
    let client = spawn_rping(&["-c", "-a", "127.0.0.1", "-p", &port_arg, "-C", count, "-V"]);
    assert_success("rping -c after the hostile peers", &finished(client));
    let running = server.is_running();
    let server = server.finish(Instant::now());
    assert!(running, "rping -s -P ended: {server:?}");
    let stderr = String::from_utf8_lossy(&server.stderr);
    assert!(
        !stderr.contains("uwarp: "),
        "the library complained: {stderr}"
    );
}
