//! The drop-in librdmacm's lifetimes under real application patterns, as
//! rdma-core defines them (issue 38's connection-manager rows): the C
//! program `tests/c/cm_lifetimes.c`, compiled against the installed
//! headers and run by `uwarp-run` on the socket transport, one scenario
//! per test; the racy ones loop thousands of times in one run.

mod support;

use support::{assert_success, compile_c, uwarp_run};

/// Runs `scenario` of `cm_lifetimes.c` (with `iterations`, if any) and
/// asserts it printed "ok" and exited 0.
fn scenario(scenario: &str, iterations: Option<u32>) {
    // Compiled once: the tests run in parallel.
    static PROGRAM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let program = PROGRAM.get_or_init(|| compile_c("cm_lifetimes"));
    let count = iterations.map(|n| n.to_string());
    let mut args = vec![scenario];
    args.extend(count.as_deref());
    let output = uwarp_run(program, &args);
    assert_success(scenario, &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// Row 1: an event handed out while another thread destroys its id;
/// `rdma_destroy_id` returns only after the holder acknowledged it, and
/// no event of a destroyed id is handed out afterwards.
#[test]
fn an_id_is_never_destroyed_under_an_event_handed_out() {
    scenario("event-vs-destroy", Some(5000));
}

/// Rows 2 and 14, racing: a listener destroyed as its request is taken;
/// the taken request keeps the destroy waiting, a dropped one is
/// rejected at once.
#[test]
fn a_listener_is_never_destroyed_under_its_request() {
    scenario("request-vs-listener-destroy", Some(3000));
}

/// Rows 2 and 8: a held request keeps its listener's destroy waiting; its
/// new id can be rejected and destroyed before it is acknowledged.
#[test]
fn a_held_request_counts_against_its_listener_not_its_new_id() {
    scenario("held-request", None);
}

/// Row 3: a listener migrated to another channel, the old one destroyed:
/// its requests, their new ids and their events follow it.
#[test]
fn requests_follow_their_listener_to_its_new_channel() {
    scenario("children-follow-migrated-listener", Some(1000));
}

/// Row 7: unread events queue without bound; the descriptor is readable
/// exactly while one is queued.
#[test]
fn unread_events_never_block_the_library() {
    scenario("unread-events", Some(20_000));
}

/// Row 9: a synchronous id migrated to a channel becomes asynchronous,
/// and back.
#[test]
fn a_migrated_synchronous_id_becomes_asynchronous() {
    scenario("migrate-sync", None);
}

/// Row 10: a signal without `SA_RESTART` interrupts a synchronous wait
/// with `EINTR`; with `SA_RESTART` the wait goes on.
#[test]
fn a_signal_interrupts_a_synchronous_wait_as_read_would() {
    scenario("sync-wait-interrupted", None);
}

/// Row 13: a client destroyed while it connects: the server hears the
/// connection end.
#[test]
fn an_id_destroyed_while_connecting_leaves_no_connection() {
    scenario("destroy-while-connecting", None);
}

/// Row 14: a request dropped unread with its listener is rejected at once.
#[test]
fn an_unread_request_of_a_destroyed_listener_is_rejected_at_once() {
    scenario("unread-request-of-destroyed-listener", None);
}

/// Row 14: a request dropped unread with its channel is rejected at once.
#[test]
fn an_unread_request_of_a_destroyed_channel_is_rejected_at_once() {
    scenario("unread-request-of-destroyed-channel", None);
}

/// Rows 15 and 22: a stale id never reaches the next id made, and the
/// port getters check liveness.
#[test]
fn a_stale_id_never_reaches_a_new_one() {
    scenario("stale-handles", None);
}

/// Row 18: synchronous operations keep their event in `id->event`, with
/// the peer's private data.
#[test]
fn a_synchronous_operation_keeps_its_event() {
    scenario("sync-event-kept", None);
}

/// Row 4: threads cancelled in synchronous waits, or with a cancel
/// pending in verbs that write, unwind; the program does not abort.
#[test]
fn cancelled_threads_unwind_through_the_library() {
    scenario("cancellation", None);
}
