//! uwarp against uwarp across the two transports: one `uwarp-perf` on
//! DPDK's net_tap, the other on the kernel's sockets on the tap's kernel
//! side, in both directions, every mode at a small count with its data
//! verified.
//!
//! - DPDK server, socket client: the server makes the tap; once it
//!   listens the tap's kernel side gets its address, then the client
//!   connects to the server's address through it.
//! - Socket server, DPDK client: the server listens on every kernel
//!   address (the tap does not exist yet: the client makes it); the
//!   tap's kernel side gets its address while the client is asking for
//!   it by ARP.
//!
//! A round trip between the two takes a quarter of a millisecond here,
//! and milliseconds when the machine is busy (the DPDK process polls one
//! of two CPUs without pause; the socket process's threads and the
//! kernel's tap share the other): the latency runs are short.
//!
//! Both ways again with the MPA options: revision 1 with Markers and
//! CRCs, and peer-to-peer with a Read or a Send RTR.
//!
//! Each test has its own tap and subnet. Needs root (taps).

mod common;

use serde_json::Value;

use common::{args, check_marked, check_p2p, finish_and_check, finish_pair, p2p_pings};
use common::{quick_iters, quick_run, sh, side_args, MARKED_WRITES};
use common::{Perf, MODES};
use uwarp_testing::{root_or_skip, serial};

/// One test's tap: the kernel at 10.81.N.1, uwarp at 10.81.N.2. The tap
/// goes with the DPDK process that made it; dropping this takes the
/// kernel's address off a tap still there.
struct Tap {
    name: String,
    subnet: u8,
}

impl Tap {
    fn new(subnet: u8) -> Self {
        Tap {
            name: format!("uwpt{subnet}"),
            subnet,
        }
    }

    fn kernel_ip(&self) -> String {
        format!("10.81.{}.1", self.subnet)
    }

    fn uwarp_ip(&self) -> String {
        format!("10.81.{}.2", self.subnet)
    }

    /// `uwarp-perf MODE SIDE...` on DPDK on this tap.
    fn dpdk(&self, mode: &str, side: &[&str], extra: &[String]) -> Vec<String> {
        let eal = format!("--vdev net_tap0,iface={}", self.name);
        let ip = format!("{}/24", self.uwarp_ip());
        side_args(mode, side, &["--eal", &eal, "--ip", &ip], extra)
    }

    /// Gives the kernel's side its address (waiting for the tap).
    fn up(&self) {
        let script = common::scripts().join("topo-tap.sh");
        let cidr = format!("{}/24", self.kernel_ip());
        sh(
            "bash",
            &[&script.display().to_string(), "up", &self.name, &cidr],
        );
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let script = common::scripts().join("topo-tap.sh");
        let _ = std::process::Command::new("bash")
            .arg(script)
            .args(["down", &self.name])
            .status();
    }
}

/// `uwarp-perf MODE SIDE... --transport socket` (with `extra`).
fn socket(mode: &str, side: &[&str], extra: &[String]) -> Vec<String> {
    side_args(mode, side, &["--transport", "socket"], extra)
}

/// Starts a server and a client of `mode` across `tap`, on `port`: the
/// DPDK side serving (`dpdk_serves`) or connecting, the socket side the
/// other, the client with `client_extra`. Returns both, server first,
/// and the address the client connects to.
fn across(
    tap: &Tap,
    dpdk_serves: bool,
    mode: &str,
    port: &str,
    client_extra: &[String],
) -> (Perf, Perf, String) {
    let server_side = ["--server", "--port", port];
    let (mut server, peer) = if dpdk_serves {
        let server = Perf::start("DPDK server", &[], &tap.dpdk(mode, &server_side, &[]));
        (server, format!("{}:{port}", tap.uwarp_ip()))
    } else {
        let server = Perf::start("socket server", &[], &socket(mode, &server_side, &[]));
        (server, format!("{}:{port}", tap.kernel_ip()))
    };
    server.wait_for("listening on");
    let client_side = ["--connect", peer.as_str()];
    let client = if dpdk_serves {
        tap.up();
        Perf::start(
            "socket client",
            &[],
            &socket(mode, &client_side, client_extra),
        )
    } else {
        // The client makes the tap, then asks for the server's address
        // until the kernel's side has it.
        let client = Perf::start(
            "DPDK client",
            &[],
            &tap.dpdk(mode, &client_side, client_extra),
        );
        tap.up();
        client
    };
    (server, client, peer)
}

/// Every mode over its own tap, with the DPDK side serving (`dpdk_serves`)
/// or connecting; the socket side is the other.
fn every_mode(subnet: u8, dpdk_serves: bool) {
    if !root_or_skip("a tap device") {
        return;
    }
    let _serial = serial();
    let tap = Tap::new(subnet);
    for (i, mode) in MODES.into_iter().enumerate() {
        let port = (18700 + 10 * usize::from(subnet) + i).to_string();
        let (server, client, peer) = across(&tap, dpdk_serves, mode, &port, &quick_run(mode));
        let (server, client) = finish_and_check(server, client, mode, quick_iters(mode));
        check_across(&server, &client, &peer, dpdk_serves);
    }
}

/// Checks that a run went [`across`] the transports: the server on DPDK
/// when `dpdk_serves`, the client on the other, connected to `peer`.
fn check_across(server: &Value, client: &Value, peer: &str, dpdk_serves: bool) {
    let transports = (server["transport"].as_str(), client["transport"].as_str());
    let expected = if dpdk_serves {
        (Some("dpdk"), Some("socket"))
    } else {
        (Some("socket"), Some("dpdk"))
    };
    assert_eq!(transports, expected, "{server} {client}");
    assert_eq!(client["peer"], peer, "{client}");
}

#[test]
fn a_dpdk_server_serves_a_socket_client_in_every_mode() {
    every_mode(31, true);
}

#[test]
fn a_socket_server_serves_a_dpdk_client_in_every_mode() {
    every_mode(32, false);
}

/// The MPA options across the transports, each way: revision 1 with
/// Markers and CRCs on 64 KiB Writes, and peer-to-peer with each RTR
/// the client may ask for.
fn mpa_options(subnet: u8, dpdk_serves: bool) {
    if !root_or_skip("a tap device") {
        return;
    }
    let _serial = serial();
    let tap = Tap::new(subnet);
    let port = |i: usize| (18700 + 10 * usize::from(subnet) + i).to_string();
    let marked = args(&MARKED_WRITES);
    let (server, client, peer) = across(&tap, dpdk_serves, "write-bw", &port(0), &marked);
    let (server, client) = finish_pair(server, client);
    check_marked(&server, &client);
    check_across(&server, &client, &peer, dpdk_serves);
    for (i, rtr) in ["read", "send"].into_iter().enumerate() {
        let offer = p2p_pings(rtr);
        let (server, client, peer) = across(&tap, dpdk_serves, "write-lat", &port(i + 1), &offer);
        let (server, client) = finish_pair(server, client);
        check_p2p(&server, &client, rtr);
        check_across(&server, &client, &peer, dpdk_serves);
    }
}

#[test]
fn mpa_options_work_from_a_socket_client_to_a_dpdk_server() {
    mpa_options(33, true);
}

#[test]
fn mpa_options_work_from_a_dpdk_client_to_a_socket_server() {
    mpa_options(34, false);
}
