//! The drop-in libibverbs and librdmacm, end to end: Debian's own
//! `ibv_devices` and `ibv_devinfo`, and C programs compiled against the
//! installed headers (devices, completion channels and queues, the
//! connection manager over loopback), run unmodified on uwarp by
//! `uwarp-run`.

mod support;

use support::{assert_success, compile_c, debian_tool, uwarp_run};

#[test]
fn debian_ibv_devices_lists_the_uwarp_device() {
    let output = uwarp_run(debian_tool("ibv_devices"), &[]);
    assert_success("ibv_devices", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("uwarp0"), "{stdout}");
}

#[test]
fn debian_ibv_devinfo_shows_an_active_iwarp_port() {
    let output = uwarp_run(debian_tool("ibv_devinfo"), &["-v"]);
    assert_success("ibv_devinfo -v", &output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "hca_id:\tuwarp0",
        "transport:\t\t\tiWARP (1)",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "max_qp_rd_atom:\t\t\t128",
        "atomic_cap:\t\t\tATOMIC_NONE (0)",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

#[test]
fn a_c_program_queries_the_device_through_the_headers() {
    let program = compile_c("device_queries");
    let output = uwarp_run(&program, &[]);
    assert_success("device_queries", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_c_program_makes_channels_and_queues_and_waits_on_them() {
    let program = compile_c("completion_queues");
    let output = uwarp_run(&program, &[]);
    assert_success("completion_queues", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_transport_uwarp_does_not_have_fails_the_open_with_a_reason() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .args(["--transport", "carrier-pigeon"])
        .arg(debian_tool("ibv_devinfo"))
        .output()
        .expect("uwarp-run runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("UWARP_TRANSPORT=carrier-pigeon: the transports are: socket"),
        "{stderr}"
    );
}

#[test]
fn a_c_program_connects_accepts_rejects_and_disconnects() {
    let program = compile_c("cm_connect");
    let output = uwarp_run(&program, &[]);
    assert_success("cm_connect", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}
