//! libfabric and Open MPI on uwarp on AF_XDP beside the kernel, across
//! two network namespaces joined by a veth pair (as two hosts): Debian's
//! `fi_pingpong` (data checked, 64 octets and 1 MiB, on message endpoints
//! over `verbs` and reliable datagram endpoints over `verbs;ofi_rxm`),
//! its server on uwarp on AF_XDP (`uwarp-run --transport dpdk --iface`),
//! its client on the socket transport in the other namespace (the
//! kernel's TCP); then Open MPI's NetPIPE (`NPopenmpi -i`, every size's
//! data checked, up to 1 MiB), one rank in each namespace, on the same
//! two transports, every message on uwarp0 (`mtl ofi`, no TCP byte
//! transfer layer), `mpirun` reaching the other namespace through a
//! launch agent of the test's (as it would ssh). Needs root.
//!
//! libfabric's verbs provider finds the source address of an endpoint
//! that names none (every `fi_pingpong` server's and every MPI rank's) by
//! binding "localhost". Beside the kernel that bind gets no device, as on
//! Linux's RDMA CM, and libfabric goes on to the device's own address
//! (before uwarp did so, it refused the bind and this test failed); on
//! the socket transport it gives the device and the loopback address
//! unless `uwarp-run --loopback-bind any` says to do as Linux does, which
//! the peer namespace's programs run with (docs/deploy.md).

mod support;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use support::netns::{in_namespace, listening_in, Topology, Veth};
use support::pair::{free_port, Running};
use support::{
    assert_ranks_on_uwarp0, assert_success, debian_tool, pingpong_report, MPI_ON_UWARP0,
};
use uwarp_testing::{root_or_skip, serial};

const VETH: Veth = Veth {
    host_ns: "uwfb-host",
    host_if: "uwfb0",
    host_ip: "10.86.0.1",
    peer_ns: "uwfb-peer",
    peer_if: "uwfb1",
    peer_ip: "10.86.0.2",
};

/// The namespaces' network, for `mpirun`'s own traffic.
const SUBNET: &str = "10.86.0.0/24";

/// uwarp on AF_XDP beside the kernel, on the host's end.
const ON_AF_XDP: &[&str] = &["--transport", "dpdk", "--iface", VETH.host_if];
/// uwarp on the kernel's TCP, a loopback bind giving no device, as on
/// Linux's RDMA CM: libfabric's bind of "localhost" then leads it to the
/// veth address, which the other namespace reaches.
const ON_SOCKETS: &[&str] = &["--loopback-bind", "any"];

/// How long any one program may run.
const LIMIT: Duration = Duration::from_secs(30);

/// `fi_pingpong` with `args`: its server on AF_XDP in the host's
/// namespace, its client on the socket transport in the peer's, data
/// checked (`-c`), `iterations` transfers of `size` octets; the client's
/// report line.
fn pingpong(args: &[&str], size: &str, iterations: &str) -> String {
    let program = debian_tool("fi_pingpong");
    // fi_pingpong's control connection (the kernel's TCP) is on this
    // port; its fabric endpoints take ports of their own.
    let port = free_port().to_string();
    let mut common = args.to_vec();
    common.extend(["-S", size, "-I", iterations, "-c"]);
    let mut server_args = common.clone();
    server_args.extend(["-B", &port]);
    let mut client_args = common;
    client_args.extend(["-P", &port, VETH.host_ip]);
    let mut server = Running::start(in_namespace(
        VETH.host_ns,
        Some(ON_AF_XDP),
        &program,
        &server_args,
    ));
    // The client connects once, to a control port already listening.
    let started = Instant::now();
    while !listening_in(VETH.host_ns, &port)
        && server.is_running()
        && started.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = Running::start(in_namespace(
        VETH.peer_ns,
        Some(ON_SOCKETS),
        &program,
        &client_args,
    ))
    .finish(Instant::now() + LIMIT);
    let orphaned = if client.status.success() {
        LIMIT
    } else {
        Duration::from_secs(5)
    };
    let server = server.finish(Instant::now() + orphaned);
    let what = format!("{args:?} -S {size}");
    pingpong_report(
        &format!("fi_pingpong server {what} (uwarp on AF_XDP)"),
        &server,
        iterations,
    );
    pingpong_report(
        &format!("fi_pingpong client {what} (the kernel's TCP)"),
        &client,
        iterations,
    )
}

/// A launch agent for `mpirun` (its `plm_rsh_agent`, in place of ssh):
/// run as `AGENT HOST COMMAND...`, it runs the command with `sh` in the
/// namespace whose veth address HOST is, as ssh runs it on HOST; written
/// into `dir`.
fn launch_agent(dir: &Path) -> std::path::PathBuf {
    let agent = dir.join("netns-agent.sh");
    let script = format!(
        "#!/bin/sh\n\
         host=$1\n\
         shift\n\
         case $host in\n\
         {host_ip}) ns={host_ns} ;;\n\
         {peer_ip}) ns={peer_ns} ;;\n\
         *) echo \"netns-agent: no namespace for $host\" >&2; exit 1 ;;\n\
         esac\n\
         exec ip netns exec \"$ns\" sh -c \"$*\"\n",
        host_ip = VETH.host_ip,
        host_ns = VETH.host_ns,
        peer_ip = VETH.peer_ip,
        peer_ns = VETH.peer_ns,
    );
    std::fs::write(&agent, script).expect("the agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))
        .expect("the agent is executable");
    agent
}

/// A scratch directory of the test's own, made empty.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Two ranks of NetPIPE (`NPopenmpi`) with `args`, every message on
/// uwarp0: rank 0 on AF_XDP in the host's namespace (where `mpirun`
/// runs), rank 1 on the socket transport in the peer's, each named by its
/// veth address (`--host`); `mpirun` and its daemon talk over the kernel's
/// TCP on the veth pair.
fn netpipe(args: &[&str]) -> Output {
    let dir = scratch("af-xdp-netpipe");
    let agent = launch_agent(&dir);
    let uwarp_run = env!("CARGO_BIN_EXE_uwarp-run");
    let netpipe = debian_tool("NPopenmpi");
    let netpipe = netpipe.to_str().unwrap();
    let agent = agent.to_str().unwrap();
    let mut mpirun_args = vec![
        "--allow-run-as-root",
        "--mca",
        "plm_rsh_agent",
        agent,
        "--mca",
        "oob_tcp_if_include",
        SUBNET,
    ];
    mpirun_args.extend(MPI_ON_UWARP0);
    mpirun_args.extend(["-np", "1", "--host", VETH.host_ip, uwarp_run]);
    mpirun_args.extend(ON_AF_XDP);
    mpirun_args.push(netpipe);
    mpirun_args.extend(args);
    mpirun_args.extend([":", "-np", "1", "--host", VETH.peer_ip, uwarp_run]);
    mpirun_args.extend(ON_SOCKETS);
    mpirun_args.push(netpipe);
    mpirun_args.extend(args);
    let mut command = in_namespace(VETH.host_ns, None, &debian_tool("mpirun"), &mpirun_args);
    command.current_dir(&dir);
    Running::start(command).finish(Instant::now() + LIMIT)
}

/// What the ranks printed (NetPIPE reports on standard error).
fn both_streams(output: &Output) -> String {
    String::from_utf8_lossy(&[output.stdout.as_slice(), &output.stderr].concat()).into_owned()
}

#[test]
fn fi_pingpong_and_netpipe_across_namespaces_with_uwarp_on_af_xdp() {
    if !root_or_skip("libfabric and MPI on AF_XDP (namespaces, XDP)") {
        return;
    }
    let _serial = serial();
    let _topology = Topology::new(VETH);

    for (args, iterations) in [
        (&["-p", "verbs", "-e", "msg"][..], ["200", "20"]),
        (&["-p", "verbs;ofi_rxm", "-e", "rdm"][..], ["200", "20"]),
    ] {
        // Past rxm's eager limit, 1 MiB is a rendezvous: its data moves
        // by RDMA Read.
        for (size, iterations) in ["64", "1048576"].into_iter().zip(iterations) {
            let report = pingpong(args, size, iterations);
            eprintln!("fi_pingpong {args:?}: {report}");
        }
    }

    let output = netpipe(&["-u", "1048576", "-n", "3", "-i"]);
    assert_success("NPopenmpi -i across the namespaces", &output);
    assert_ranks_on_uwarp0(&output, 2);
    let text = both_streams(&output);
    let checked = text
        .lines()
        .filter(|line| line.ends_with("Integrity check passed"))
        .count();
    assert!(checked >= 30, "sizes checked: {checked}\n{text}");
    assert!(!text.contains("failed"), "{text}");
}
