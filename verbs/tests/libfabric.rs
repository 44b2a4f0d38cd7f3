//! libfabric on uwarp's drop-ins: Debian's `fi_info` finds `uwarp0`
//! through libfabric's verbs provider, and `fi_pingpong` moves checked
//! data over it, on message endpoints (`verbs`) and on reliable datagram
//! endpoints (`verbs;ofi_rxm`, whose rendezvous for large messages is an
//! RDMA Read), small and 1 MiB messages, two processes over loopback on
//! the socket transport. (MPI reaches uwarp the same way: Open MPI's
//! `mtl ofi` over `verbs;ofi_rxm`.)

mod support;

use std::process::Output;

use support::pair::{free_port, run_pair, strings, Loopback};
use support::{assert_success, debian_tool, pingpong_report, uwarp_run};

/// `fi_info` with `args`, on uwarp.
fn fi_info(args: &[&str]) -> String {
    let output = uwarp_run(debian_tool("fi_info"), args);
    assert_success("fi_info", &output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn fi_info_lists_uwarp0_for_the_verbs_provider() {
    let msg = fi_info(&["-p", "verbs", "-t", "FI_EP_MSG"]);
    assert!(msg.contains("domain: uwarp0"), "{msg}");
    assert!(msg.contains("protocol: FI_PROTO_IWARP"), "{msg}");
    let rdm = fi_info(&["-p", "verbs;ofi_rxm", "-t", "FI_EP_RDM"]);
    assert!(rdm.contains("domain: uwarp0"), "{rdm}");
    assert!(rdm.contains("type: FI_EP_RDM"), "{rdm}");
}

/// `fi_pingpong` server and client with `args`, data checked (`-c`);
/// both outputs, each asserted to report `iterations` transfers of
/// `size` octets.
fn pingpong(args: &[&str], size: &str, iterations: &str) -> (Output, Output) {
    let port = free_port().to_string();
    let mut common = strings(args);
    common.extend(strings(&["-S", size, "-I", iterations, "-c"]));
    let mut server = common.clone();
    server.extend(strings(&["-B", &port]));
    let mut client = common;
    client.extend(strings(&["-P", &port, "127.0.0.1"]));
    let outputs = run_pair(&Loopback, "fi_pingpong", &port, [server, client], &[]);
    for (side, output) in [("server", &outputs.0), ("client", &outputs.1)] {
        pingpong_report(
            &format!("fi_pingpong {side} {args:?} -S {size}"),
            output,
            iterations,
        );
    }
    outputs
}

#[test]
fn fi_pingpong_runs_over_verbs_message_endpoints() {
    pingpong(&["-p", "verbs", "-e", "msg"], "64", "200");
    pingpong(&["-p", "verbs", "-e", "msg"], "1048576", "20");
}

#[test]
fn fi_pingpong_runs_over_rxm_reliable_datagram_endpoints() {
    pingpong(&["-p", "verbs;ofi_rxm", "-e", "rdm"], "64", "200");
    // Past rxm's eager limit: a rendezvous, whose data moves by RDMA Read.
    pingpong(&["-p", "verbs;ofi_rxm", "-e", "rdm"], "1048576", "20");
}
