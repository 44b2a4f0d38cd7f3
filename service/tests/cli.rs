//! `uwarpd`'s command line: a missing or mistyped interface is refused
//! with a message that names it, before anything is set up; no
//! interface at all is a usage error. (Its service itself is tested with
//! real programs in `verbs/tests/af_xdp.rs`, which finds this binary
//! beside `uwarp-run`: this test target is also what has cargo build it
//! there.)

use std::process::Command;

fn uwarpd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_uwarpd"))
        .args(args)
        .output()
        .expect("uwarpd runs")
}

#[test]
fn an_interface_that_is_not_there_is_named_in_the_refusal() {
    let out = uwarpd(&["--iface", "uwarp-none0"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no network interface uwarp-none0"), "{said}");
}

#[test]
fn no_interface_is_a_usage_error() {
    let out = uwarpd(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iface"));
}
