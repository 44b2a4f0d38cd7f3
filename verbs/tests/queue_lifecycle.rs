//! Queue pairs, completion queues and shared receive queues across their
//! lives, through the installed headers on uwarp's drop-in libraries
//! (C programs `tests/c/ql_*.c`, run by `uwarp-run` over loopback): every
//! work request completes, flushed once nothing will carry it; a
//! destroyed queue pair resets its connection and puts nothing more in a
//! completion queue; queues in use are not destroyed (`EBUSY`); work
//! queues hold at most their depth (`ENOMEM`); the state `ibv_modify_qp`
//! records is read and written from many threads at once.

mod support;

use support::{assert_success, compile_c, uwarp_run};

/// Compiles and runs the C program `name`, which prints "ok" when every
/// check held.
fn run(name: &str) {
    let program = compile_c(name);
    let output = uwarp_run(&program, &[]);
    assert_success(name, &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn work_posted_in_the_error_state_or_after_the_connection_completes_flushed() {
    run("ql_flush");
}

#[test]
fn a_destroyed_queue_pair_resets_its_connection_and_queues_in_use_stay() {
    run("ql_destroy");
}

#[test]
fn work_queues_hold_their_depth_and_looping_chains_stop_there() {
    run("ql_depth");
}
