//! rsockets on the drop-in librdmacm: its exports match rdma-core 44's,
//! Debian's `rstream` (its default `MSG_DONTWAIT` polling, blocking,
//! `O_NONBLOCK` and `rpoll` modes, small and large transfers, data
//! verified) and `rcopy` (a file, compared) run on
//! both sides under `uwarp-run`, as does `riostream` (`riomap`,
//! `riowrite`); a C program checks the socket semantics
//! (`tests/c/rsocket_semantics.c`), another that a socket making no call
//! keeps receives for its peer's credit updates besides its data
//! (`tests/c/rsocket_credits.c`), another that `SO_KEEPALIVE` sends its
//! messages (`tests/c/rsocket_keepalive.c`), and a plain sockets program runs on
//! rsockets under `librspreload.so` (`tests/c/rsocket_plain.c`).

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::pair::{
    free_port, run_pair, strings, wait_listening, Link, Loopback, MemifLink, Running, Side,
};
use support::{assert_success, compile_c, debian_tool, rstream_result, uwarp_run};

/// The rsocket functions rdma-core 44's librdmacm exports, all at
/// `RDMACM_1.0` (`objdump -T /usr/lib/x86_64-linux-gnu/librdmacm.so.1`).
const RSOCKET_API: [&str; 27] = [
    "rsocket",
    "rbind",
    "rlisten",
    "raccept",
    "rconnect",
    "rshutdown",
    "rclose",
    "rrecv",
    "rrecvfrom",
    "rrecvmsg",
    "rsend",
    "rsendto",
    "rsendmsg",
    "rread",
    "rreadv",
    "rwrite",
    "rwritev",
    "rpoll",
    "rselect",
    "rgetpeername",
    "rgetsockname",
    "rsetsockopt",
    "rgetsockopt",
    "rfcntl",
    "riomap",
    "riounmap",
    "riowrite",
];

/// The library `cargo test` built (in `deps/`, beside this test).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.with_file_name("libuwarp_verbs.so")
}

#[test]
fn the_rsocket_api_is_exported_at_rdmacm_1_0() {
    let output = Command::new("objdump")
        .arg("-T")
        .arg(library())
        .output()
        .expect("objdump runs (binutils)");
    assert_success("objdump -T", &output);
    let table = String::from_utf8_lossy(&output.stdout);
    for name in RSOCKET_API {
        let exported = table.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.last() == Some(&name)
                && fields.contains(&"RDMACM_1.0")
                && !line.contains("*UND*")
        });
        assert!(exported, "{name} is not exported at RDMACM_1.0:\n{table}");
    }
}

/// Debian's rstream, server and client on loopback with `options` on
/// both sides; asserts both succeeded and printed their result line for
/// `size` (as rstream names it: `64`, `1m`), and returns the client's.
fn rstream_pair(options: &[&str], size: &str) -> String {
    stream_pair(&Loopback, "rstream", options, size)
}

/// [`rstream_pair`] for `tool`, rstream or riostream (same options, same
/// output), on `link`: the client connects to its server address (an
/// IPv6 address when `options` bind the server to one with `-b`).
fn stream_pair(link: &dyn Link, tool: &str, options: &[&str], size: &str) -> String {
    let port = free_port().to_string();
    let bound = options
        .windows(2)
        .find(|pair| pair[0] == "-b")
        .map(|pair| pair[1]);
    let address = bound.unwrap_or(link.server_ip());
    let mut server = strings(&["-p", &port]);
    server.extend(strings(options));
    let mut client = strings(&["-s", address, "-p", &port]);
    let unbound = options
        .iter()
        .filter(|arg| **arg != "-b" && Some(**arg) != bound);
    client.extend(unbound.map(|arg| (*arg).to_owned()));
    let (server, client) = run_pair(link, tool, &port, [server, client], &["refused"]);
    assert_success(&format!("{tool} client"), &client);
    assert_success(&format!("{tool} server"), &server);
    assert!(
        rstream_result(&server, size).is_some(),
        "no result in {server:?}"
    );
    rstream_result(&client, size).unwrap_or_else(|| panic!("no result in {client:?}"))
}

#[test]
fn rstream_default_mode_small_transfers_verified() {
    // rstream's default: MSG_DONTWAIT calls in a busy loop.
    rstream_pair(&["-S", "64", "-C", "2000", "-T", "v"], "64");
}

#[test]
fn rstream_default_mode_large_transfers_verified() {
    rstream_pair(&["-S", "1048576", "-C", "20", "-T", "v"], "1m");
}

#[test]
fn rstream_blocking_small_and_large_transfers_verified() {
    // -T b: blocking calls with MSG_WAITALL, and RDMA_INLINE 0, which
    // uwarp raises to the 4 octets iWARP's messages need.
    rstream_pair(&["-S", "64", "-C", "2000", "-T", "b", "-T", "v"], "64");
    rstream_pair(&["-S", "1048576", "-C", "20", "-T", "b", "-T", "v"], "1m");
}

#[test]
fn rstream_nonblocking_small_and_large_transfers_verified() {
    rstream_pair(&["-S", "64", "-C", "2000", "-T", "n", "-T", "v"], "64");
    rstream_pair(&["-S", "1048576", "-C", "20", "-T", "n", "-T", "v"], "1m");
}

#[test]
fn rstream_with_rpoll_small_and_large_transfers_verified() {
    rstream_pair(&["-S", "64", "-C", "1000", "-T", "a", "-T", "v"], "64");
    rstream_pair(&["-S", "1048576", "-C", "20", "-T", "a", "-T", "v"], "1m");
}

#[test]
fn rstream_small_buffers_and_inline_size() {
    // rstream sets SO_SNDBUF and SO_RCVBUF from -B and RDMA_INLINE from
    // -i; 3000 octets is neither inline nor a whole buffer half.
    rstream_pair(
        &[
            "-S", "3000", "-C", "500", "-B", "8192", "-i", "16", "-T", "v",
        ],
        "2.9k",
    );
}

#[test]
fn riostream_writes_into_the_peers_mapped_buffer_verified() {
    // riostream riomaps its buffer and riowrites into the peer's; each
    // side spins on its buffer's last octet, which the peer's RDMA Write
    // places last.
    stream_pair(
        &Loopback,
        "riostream",
        &["-S", "64", "-C", "200", "-T", "v"],
        "64",
    );
    stream_pair(
        &Loopback,
        "riostream",
        &["-S", "1048576", "-C", "10", "-T", "v"],
        "1m",
    );
    let nonblocking = ["-S", "100000", "-C", "20", "-T", "n", "-T", "v"];
    stream_pair(&Loopback, "riostream", &nonblocking, "97k");
}

#[test]
fn rstream_over_ipv6() {
    rstream_pair(&["-b", "::1", "-S", "4096", "-C", "200", "-T", "v"], "4k");
}

#[test]
fn rstream_and_riostream_run_over_dpdk() {
    if !uwarp_testing::root_or_skip("DPDK's net_memif") {
        return;
    }
    let link = MemifLink::new("verbs-rsockets");
    stream_pair(
        &link,
        "rstream",
        &["-S", "1048576", "-C", "10", "-T", "v"],
        "1m",
    );
    stream_pair(
        &link,
        "rstream",
        &["-S", "64", "-C", "500", "-T", "n", "-T", "v"],
        "64",
    );
    stream_pair(
        &link,
        "riostream",
        &["-S", "65536", "-C", "20", "-T", "v"],
        "64k",
    );
}

/// rstream's client connects without blocking and, when `rpoll` reports
/// `POLLERR`, prints `errno`: "Connection refused" with nobody listening,
/// as on rdma-core (the pairs above try a client again on "refused", its
/// server not yet listening: over DPDK its listener comes up after the
/// link does).
#[test]
fn rstream_says_its_refused_nonblocking_connect_was_refused() {
    let port = free_port().to_string();
    let client = uwarp_run(
        debian_tool("rstream"),
        &["-s", "127.0.0.1", "-p", &port, "-S", "64", "-C", "10"],
    );
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert!(!client.status.success(), "{client:?}");
    assert!(
        stderr.contains("rpoll: Connection refused"),
        "rstream said: {stderr}"
    );
}

#[test]
fn rcopy_copies_a_file_intact() {
    let dir = std::env::temp_dir().join(format!("uwarp-rcopy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let source = dir.join("source.bin");
    let copy = dir.join("copy.bin");
    // 3 MiB and some: several buffers' worth, not a multiple of any.
    let content: Vec<u8> = (0..3 * 1024 * 1024 + 4321u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&source, &content).expect("the source file");

    let port = free_port().to_string();
    let server = Side {
        tool: "rcopy",
        args: strings(&["-p", &port]),
        options: Vec::new(),
    };
    let server = Running::start(server.command());
    wait_listening(&port);
    let destination = format!("127.0.0.1:{}", copy.display());
    let client = uwarp_run(
        debian_tool("rcopy"),
        &[
            source.to_str().expect("a UTF-8 path"),
            &destination,
            "-p",
            &port,
        ],
    );
    // The server loops for the next client: stopped once the copy is done.
    let server = server.finish(Instant::now() + Duration::from_millis(500));
    assert_success("rcopy client", &client);
    let copied =
        std::fs::read(&copy).unwrap_or_else(|e| panic!("no copy ({e}); server: {server:?}"));
    assert!(
        copied == content,
        "the copy differs from the source ({} octets of {})",
        copied.len(),
        content.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compiles `tests/c/{name}.c` and runs it under `uwarp-run` with a free
/// port: it must succeed and print "ok".
fn run_c_program(name: &str) {
    let program = compile_c(name);
    let port = free_port().to_string();
    let output = uwarp_run(&program, &[&port]);
    assert_success(name, &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_c_program_checks_rsocket_semantics() {
    run_c_program("rsocket_semantics");
}

#[test]
fn a_socket_that_makes_no_call_takes_its_peers_credits_and_data() {
    run_c_program("rsocket_credits");
}

/// Runs `tests/c/rsocket_keepalive.c` with `TCP_KEEPIDLE` `idle` (0:
/// keepalive off): the data segments its client's connection sent while
/// neither side made a call for 3.5 s.
fn keepalive_segments(idle: u32) -> u64 {
    let program = compile_c("rsocket_keepalive");
    let port = free_port().to_string();
    let output = uwarp_run(&program, &[&port, &idle.to_string()]);
    assert_success("rsocket_keepalive", &output);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.ends_with("ok\n"), "{stdout}");
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("keepalive segments "))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count of segments: {stdout}"))
}

/// `SO_KEEPALIVE` with `TCP_KEEPIDLE` 1: an idle connection sends a
/// keepalive message a second (three in 3.5 s; at least two counted
/// between the program's two looks), and nothing without keepalive.
#[test]
fn an_idle_rsocket_with_keepalive_sends_its_peer_a_message_each_keepidle() {
    assert_eq!(
        keepalive_segments(0),
        0,
        "an idle connection without keepalive sent data"
    );
    let sent = keepalive_segments(1);
    assert!(
        (2..=4).contains(&sent),
        "{sent} keepalive segments in 3.5 s, a second apart"
    );
}

#[test]
fn a_child_of_fork_cannot_use_its_parents_rsocket_and_leaves_it_working() {
    run_c_program("rsocket_fork");
}

/// rdma-core's preload library, which turns a program's TCP sockets into
/// rsockets.
const RSPRELOAD: &str = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so";

#[test]
fn a_plain_socket_program_runs_on_rsockets_under_librspreload() {
    let program = compile_c("rsocket_plain");
    let port = free_port().to_string();
    let preload = format!("LD_PRELOAD={RSPRELOAD}");
    let program = program.to_str().expect("a UTF-8 path");
    // The accepted socket must be an rsocket (the program checks SOL_RDMA),
    // while uwarp's own transport keeps its kernel sockets, and so do the
    // program's UDP sockets (datagram rsockets are ENOSYS on iWARP).
    let output = uwarp_run("/usr/bin/env", &[&preload, program, &port, "1"]);
    assert_success("rsocket_plain under librspreload.so", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}
