//! Debian's `rdma_server`/`rdma_client` and `rdma_xserver`/`rdma_xclient`
//! (rdmacm-utils: librdmacm's `rdma_create_ep` examples, synchronous ids
//! end to end: an endpoint's queue pair made for each request, a Send
//! each way, `rdma_xserver`'s private data read from `id->event` by its
//! client) on uwarp's drop-ins, on the socket transport and on DPDK
//! between two processes over net_memif.

mod support;

use std::process::Output;

use support::assert_success;
use support::pair::{free_port, run_two, strings, Link, Loopback, MemifLink};

/// Runs `server` and `client` (a pair of rdmacm-utils' examples) on
/// `link`, and checks both said they ended with 0.
fn endpoint_pair(link: &dyn Link, server: &str, client: &str) {
    let port = free_port().to_string();
    let outputs = run_pair_of(link, server, client, &port);
    let (server_output, client_output) = &outputs;
    assert_success(client, client_output);
    assert_success(server, server_output);
    for (tool, output) in [(server, server_output), (client, client_output)] {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!("{tool}: end 0")),
            "{tool} did not end with 0:\n{stdout}"
        );
    }
}

/// The two tools on `link`: the server on `port`, the client connecting
/// to it.
fn run_pair_of(link: &dyn Link, server: &str, client: &str, port: &str) -> (Output, Output) {
    let address = link.server_ip().to_owned();
    let server_args = strings(&["-p", port]);
    let client_args = strings(&["-s", &address, "-p", port]);
    run_two(
        link,
        [server, client],
        port,
        [server_args, client_args],
        &["rdma_connect", "rdma_create_ep"],
    )
}

#[test]
fn debian_rdma_server_and_client_run_on_uwarp() {
    endpoint_pair(&Loopback, "rdma_server", "rdma_client");
}

#[test]
fn debian_rdma_xserver_and_xclient_run_on_uwarp() {
    endpoint_pair(&Loopback, "rdma_xserver", "rdma_xclient");
}

#[test]
fn debian_rdma_server_and_client_run_on_uwarp_over_dpdk() {
    if !uwarp_testing::root_or_skip("DPDK's net_memif") {
        return;
    }
    let link = MemifLink::new("verbs-endpoints");
    endpoint_pair(&link, "rdma_server", "rdma_client");
    endpoint_pair(&link, "rdma_xserver", "rdma_xclient");
}
