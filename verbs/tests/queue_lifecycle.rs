//! Queue pairs, completion queues and shared receive queues across their
//! lives, through the installed headers on uwarp's drop-in libraries
//! (C programs `tests/c/ql_*.c`, one part of one per test, run by
//! `uwarp-run` over loopback): every work request completes, flushed once
//! nothing will carry it; a destroyed queue pair resets its connection
//! and puts nothing more in a completion queue; queues in use are not
//! destroyed (`EBUSY`); work queues hold at most their depth (`ENOMEM`);
//! the state `ibv_modify_qp` records is read and written from many
//! threads at once.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use support::{assert_success, compile_c, uwarp_run};

/// The C program `name`, compiled once for all the tests that run it (a
/// compiler writing the program while another test runs it would fail
/// that run with `ETXTBSY`).
fn program(name: &'static str) -> PathBuf {
    static COMPILED: Mutex<Option<HashMap<&str, PathBuf>>> = Mutex::new(None);
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    compiled
        .get_or_insert_with(HashMap::new)
        .entry(name)
        .or_insert_with(|| compile_c(name))
        .clone()
}

/// Runs the part `part` of the C program `name`, which prints "ok" when
/// every check held.
fn run(name: &'static str, part: &str) {
    let output = uwarp_run(program(name), &[part]);
    assert_success(&format!("{name} {part}"), &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn work_on_a_queue_pair_moved_to_error_before_it_connected_completes_flushed() {
    run("ql_flush", "never-connected");
}

#[test]
fn work_posted_after_a_disconnect_completes_flushed() {
    run("ql_flush", "disconnect");
}

#[test]
fn work_posted_after_a_terminate_completes_flushed() {
    run("ql_flush", "terminate");
}

#[test]
fn receives_posted_before_a_rejected_connection_complete_flushed() {
    run("ql_flush", "rejection");
}

#[test]
fn nothing_of_a_destroyed_queue_pair_reaches_its_shared_queue_and_the_peer_sees_the_end() {
    run("ql_destroy", "established");
}

#[test]
fn destroying_a_queue_pair_while_it_connects_ends_the_connection() {
    run("ql_destroy", "connecting");
}

#[test]
fn queues_a_queue_pair_uses_are_busy_and_stay_usable() {
    run("ql_destroy", "in-use");
}

#[test]
fn a_queue_pair_holds_its_asymmetric_depths_and_frees_them_by_flushing() {
    run("ql_depth", "queue-pair");
}

#[test]
fn looping_chains_of_work_requests_stop_at_the_depth() {
    run("ql_depth", "loops");
}

#[test]
fn a_shared_receive_queue_holds_its_depth() {
    run("ql_depth", "srq");
}

#[test]
fn completions_free_their_slots_on_a_connected_pair() {
    run("ql_depth", "connected");
}

#[test]
fn the_recorded_state_is_read_and_written_from_many_threads() {
    run("ql_state", "threads");
}
