//! Registered memory on the drop-in library: `ibv_reg_mr` checks the range
//! as the kernel does (`mr_validation.c`), and a program that takes
//! registered memory away before `ibv_dereg_mr` (unmaps it, maps over it,
//! frees it, protects it) gets a Terminate on the peer's access or an
//! error completion on its own, never a crash and never a peer's write
//! in another mapping (`mr_unmapped.c`, one scenario per run, each on a
//! connection of its own over loopback, on the socket transport).

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use support::{assert_success, compile_c, uwarp_run};

/// `mr_unmapped`, compiled once for every test of this binary (they run
/// at once).
fn mr_unmapped() -> &'static PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| compile_c("mr_unmapped"))
}

/// Runs `program` with `args` under uwarp-run: it must print "ok" and
/// exit 0.
fn says_ok(program: &Path, args: &[&str]) {
    let output = uwarp_run(program, args);
    assert_success(&format!("{} {args:?}", program.display()), &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// Runs `mr_unmapped SCENARIO`, which must say "ok".
fn scenario_holds(scenario: &str) {
    says_ok(mr_unmapped(), &[scenario]);
}

#[test]
fn registration_refuses_unmapped_and_read_only_memory_with_efault() {
    says_ok(&compile_c("mr_validation"), &[]);
}

#[test]
fn a_peer_writing_into_unmapped_memory_gets_a_terminate_and_the_next_mapping_stays_intact() {
    scenario_holds("munmap");
}

#[test]
fn a_peer_writing_into_memory_mapped_over_gets_a_terminate_and_the_new_mapping_stays_intact() {
    scenario_holds("remap");
}

#[test]
fn a_peer_writing_into_memory_mremap_may_have_moved_gets_a_terminate() {
    scenario_holds("mremap");
}

#[test]
fn a_peer_writing_into_memory_glibc_unmapped_unseen_gets_a_terminate_not_a_crash() {
    scenario_holds("free");
}

#[test]
fn nothing_lands_after_deregistration_with_writes_in_flight() {
    scenario_holds("dereg");
}

#[test]
fn a_child_of_fork_unmapping_registered_memory_does_not_wait_for_the_parents_device() {
    scenario_holds("fork");
}

#[test]
fn a_peer_reading_memory_gone_gets_a_terminate_not_a_crash() {
    scenario_holds("read_source");
}

#[test]
fn sending_from_memory_gone_completes_with_a_local_protection_error() {
    scenario_holds("send_source");
}

#[test]
fn sending_a_large_payload_from_memory_gone_ends_the_connection_not_the_program() {
    scenario_holds("send_large");
}

#[test]
fn a_send_arriving_into_memory_gone_completes_the_receive_with_a_local_protection_error() {
    scenario_holds("recv_sink");
}

#[test]
fn a_read_response_arriving_into_memory_gone_completes_the_read_in_error() {
    scenario_holds("read_sink");
}

#[test]
fn the_programs_own_fault_handlers_keep_working_around_the_guard() {
    scenario_holds("chain");
}

#[test]
fn a_handler_installed_later_that_does_not_chain_gets_the_fault() {
    let output = uwarp_run(mr_unmapped(), &["nochain"]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "the program's handler exits 3:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "program handler\n");
}
