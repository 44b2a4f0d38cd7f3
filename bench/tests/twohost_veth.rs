//! The two-host modes between two `uwarp-perf` processes on DPDK's
//! net_af_packet, each in a network namespace of its own, joined by a veth
//! pair the test makes (as two hosts on one Ethernet would be): every mode
//! at a small count with its data verified, and one on an IEEE 802.1Q
//! VLAN (both ends tagging). The namespaces go away on every exit path.
//! Needs root (namespaces, af_packet).

mod common;

use common::netns::Namespaces;
use common::{finish_and_check, side_args, small_run, Perf};
use common::{ITERS, MODES};
use serde_json::Value;
use uwarp_testing::{root_or_skip, serial};

/// `uwarp-perf MODE SIDE...` on af_packet over interface `ns` (in
/// namespace `ns`), at `ip`.
fn in_namespace(ns: &str, ip: &str, mode: &str, side: &[&str], extra: &[String]) -> Vec<String> {
    let eal = format!("--vdev net_af_packet0,iface={ns},qpairs=1");
    side_args(mode, side, &["--eal", &eal, "--ip", ip], extra)
}

/// One `mode` run across `namespaces`: the server at `NET.1` on `port`,
/// the client at `NET.2` with a small count, both given `extra`; the data
/// checked and both reports returned (server, client).
fn run_across(
    namespaces: &Namespaces,
    net: &str,
    mode: &str,
    port: &str,
    extra: &[String],
) -> (Value, Value) {
    let (server_ns, client_ns) = (namespaces.server(), namespaces.client());
    let server_args = in_namespace(
        &server_ns,
        &format!("{net}.1/24"),
        mode,
        &["--server", "--port", port],
        extra,
    );
    let mut server = Perf::start("server", &["ip", "netns", "exec", &server_ns], &server_args);
    server.wait_for(&format!("listening on {net}.1"));
    let peer = format!("{net}.1:{port}");
    let mut client_extra = small_run(mode);
    client_extra.extend_from_slice(extra);
    let client_args = in_namespace(
        &client_ns,
        &format!("{net}.2/24"),
        mode,
        &["--connect", &peer],
        &client_extra,
    );
    let client = Perf::start("client", &["ip", "netns", "exec", &client_ns], &client_args);
    finish_and_check(server, client, mode, ITERS)
}

#[test]
fn every_mode_runs_between_two_namespaces_over_af_packet() {
    if !root_or_skip("a network namespace") {
        return;
    }
    let _serial = serial();
    let namespaces = Namespaces::new("uwpv1");
    for (i, mode) in MODES.into_iter().enumerate() {
        let port = (18600 + i).to_string();
        let (_, client) = run_across(&namespaces, "10.81.21", mode, &port, &[]);
        assert_eq!(client["peer"], format!("10.81.21.1:{port}").as_str());
    }
}

#[test]
fn a_two_host_run_crosses_the_link_on_a_vlan() {
    if !root_or_skip("a network namespace") {
        return;
    }
    let _serial = serial();
    let namespaces = Namespaces::new("uwpv2");
    // Both ends on VLAN 42 (IEEE 802.1Q): every frame tagged, the data
    // verified at the far end.
    let vlan = ["--vlan".to_string(), "42:3".to_string()];
    run_across(&namespaces, "10.81.22", "write-bw", "18700", &vlan);
}
