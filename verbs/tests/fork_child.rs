//! `fork()` after the device opened (row 11 of issue 38): C programs
//! compiled against the installed headers, run by `uwarp-run`. A child's
//! copies of the library's sockets do not keep the parent's closed
//! listener open; a child opens a device of its own and connects with
//! it; the parent's objects fail in the child with `ENODEV` instead of
//! blocking; on DPDK a child gets `ENODEV` and one line saying why. Each
//! program bounds itself with `alarm()`. (A child that forks before any
//! RDMA call: `programs.rs`, `fork_and_exit.c`.)

mod support;

use std::time::{Duration, Instant};

use support::{assert_success, compile_c, uwarp_run};

/// Runs the C program `name` under `uwarp-run` with `options` before it
/// and `args` after; asserts it printed "ok" and succeeded, within
/// `within`.
fn runs_ok(name: &str, options: &[&str], args: &[&str], within: Duration) -> String {
    let program = compile_c(name);
    let program = program.to_str().expect("a UTF-8 path");
    let command: Vec<&str> = options
        .iter()
        .copied()
        .chain([program])
        .chain(args.iter().copied())
        .collect();
    let started = Instant::now();
    let output = uwarp_run(command[0], &command[1..]);
    let took = started.elapsed();
    assert_success(name, &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
    assert!(took < within, "{name} took {took:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_listener_destroyed_after_a_fork_refuses_connections_at_once() {
    // The program itself checks each refusal came within 1 s (not the
    // 10 s of an MPA Reply that never comes).
    runs_ok("fork_listener", &[], &[], Duration::from_secs(20));
}

#[test]
fn a_child_opens_its_own_device_and_connects_to_its_parent() {
    runs_ok("fork_child_device", &[], &[], Duration::from_secs(20));
}

#[test]
fn the_parents_ids_and_queue_pairs_fail_in_the_child_with_enodev_at_once() {
    runs_ok("fork_parent_objects", &[], &[], Duration::from_secs(20));
}

#[test]
fn a_child_of_a_dpdk_process_gets_enodev_and_one_line_saying_why() {
    if !uwarp_testing::root_or_skip("DPDK's net_null") {
        return;
    }
    let options = [
        "--transport",
        "dpdk",
        "--eal",
        "--vdev net_null0",
        "--ip",
        "10.79.0.1/24",
    ];
    let stderr = runs_ok(
        "fork_dpdk",
        &options,
        &["10.79.0.1"],
        Duration::from_secs(30),
    );
    let said: Vec<&str> = stderr.lines().filter(|l| l.starts_with("uwarp:")).collect();
    assert_eq!(
        said,
        ["uwarp: cannot open the device: a child of fork cannot use its parent's DPDK EAL, nor start one of its own"],
        "{stderr}"
    );
}
