//! The drop-in libibverbs and librdmacm, end to end: Debian's own
//! `ibv_devices` and `ibv_devinfo`, C programs compiled against the
//! installed headers (devices, completion channels and queues, the
//! connection manager over loopback), run unmodified on uwarp by
//! `uwarp-run`; its settings and `scripts/install.sh`; asynchronous
//! events a hostile peer causes. (`rping.rs` and `perftest.rs` run
//! Debian's rping and perftest.)

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use support::hostile::{
    first_untagged, hostile_peer, read_of_unknown_stag, send_fpdu, terminate, terminated_by, ulpdu,
    write_to_unknown_stag,
};
use support::pair::{
    free_port, run_pair, strings, wait_listening, Link, Loopback, MemifLink, Side,
};
use support::{assert_success, compile_c, debian_tool, uwarp_run};
use uwarp_stack::wire::rdmap::Opcode;
use uwarp_stack::wire::terminate::TermError;

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

/// `ibv_devinfo` run by `uwarp-run` with `options`.
fn devinfo_with(options: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .args(options)
        .arg(debian_tool("ibv_devinfo"))
        .output()
        .expect("uwarp-run runs")
}

#[test]
fn a_wrong_or_missing_setting_fails_the_open_with_one_line_naming_it() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--transport", "carrier-pigeon"],
            "UWARP_TRANSPORT=carrier-pigeon: the transports are: socket, dpdk",
        ),
        (
            &["--transport", "dpdk", "--ip", "10.0.0.1/24"],
            "needs UWARP_EAL",
        ),
        (
            &["--transport", "dpdk", "--eal", "--vdev net_null0"],
            "needs UWARP_IP",
        ),
        (
            &[
                "--transport",
                "dpdk",
                "--eal",
                "--vdev net_null0",
                "--ip",
                "10.0.0.1/33",
            ],
            "UWARP_IP=10.0.0.1/33",
        ),
        (
            &[
                "--transport",
                "dpdk",
                "--eal",
                "--vdev net_null0",
                "--ip",
                "10.0.0.1/24",
                "--cpus",
                "0",
            ],
            "UWARP_CPUS: expected CPU numbers CONTROL,DATAPLANE",
        ),
        (
            &["--first-fpdu-delay-ms", "600000"],
            "UWARP_FIRST_FPDU_DELAY_MS=600000: expected milliseconds",
        ),
    ];
    for (options, reason) in cases {
        let output = devinfo_with(options);
        assert!(!output.status.success(), "{options:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let ours: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("uwarp: "))
            .collect();
        assert_eq!(ours.len(), 1, "{options:?}: {stderr}");
        assert!(ours[0].contains(reason), "{options:?}: {stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!stdout.contains("uwarp:"), "{options:?}: stdout {stdout}");
    }
}

#[test]
fn the_log_setting_silences_the_library_or_names_the_device() {
    let silent = devinfo_with(&["--transport", "carrier-pigeon", "--log", "off"]);
    assert!(!silent.status.success());
    assert_eq!(
        String::from_utf8_lossy(&silent.stderr)
            .lines()
            .filter(|l| l.starts_with("uwarp: "))
            .count(),
        0
    );

    let told = devinfo_with(&["--log", "info"]);
    assert_success("ibv_devinfo", &told);
    let stderr = String::from_utf8_lossy(&told.stderr);
    assert!(
        stderr.contains("uwarp: device uwarp0 on the kernel's TCP sockets"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&told.stdout).contains("uwarp: "));
}

#[test]
fn install_sh_installs_a_uwarp_run_that_finds_its_installed_library() {
    let prefix = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .parent()
        .expect("a directory");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh");
    let installed = std::process::Command::new("bash")
        .arg(&script)
        .arg("--from")
        .args([built, &prefix])
        .output()
        .expect("bash runs");
    assert_success("install.sh", &installed);

    let run = prefix.join("bin/uwarp-run");
    let lib_dir = std::process::Command::new(&run)
        .arg("--print-lib-dir")
        .env_remove("UWARP_VERBS_LIBRARY")
        .output()
        .expect("the installed uwarp-run runs");
    assert_success("uwarp-run --print-lib-dir", &lib_dir);
    let expected = prefix
        .join("lib/uwarp/uwarp-libs")
        .canonicalize()
        .expect("installed");
    assert_eq!(
        String::from_utf8_lossy(&lib_dir.stdout).trim(),
        expected.to_string_lossy()
    );

    let devices = std::process::Command::new(&run)
        .arg(debian_tool("ibv_devices"))
        .env_remove("UWARP_VERBS_LIBRARY")
        .output()
        .expect("the installed uwarp-run runs");
    assert_success("installed uwarp-run ibv_devices", &devices);
    assert!(String::from_utf8_lossy(&devices.stdout).contains("uwarp0"));
}

#[test]
fn a_c_program_connects_accepts_rejects_and_disconnects() {
    let program = compile_c("cm_connect");
    let output = uwarp_run(&program, &[]);
    assert_success("cm_connect", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// Regression (issue 39): a request reported the peer's IRD as the
/// listener's responder resources and its ORD as the initiator depth,
/// the wrong way round from Linux's iWARP connection manager, so a server
/// accepting with the request's values (tgt's iSER target, for libiscsi's
/// IRD 4 and ORD 0) could post no RDMA Read. Asymmetric values both ways;
/// each side then reads the other as deep as allowed.
#[test]
fn a_request_reports_ird_and_ord_as_linux_iwarp_does() {
    let program = compile_c("cm_ird_ord");
    for (ird, ord) in [("4", "0"), ("0", "2"), ("3", "5")] {
        let output = uwarp_run(&program, &[ird, ord]);
        assert_success(&format!("cm_ird_ord {ird} {ord}"), &output);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
    }
}

/// Regression (issue 39): `RDMA_OPTION_ID_AFONLY` was accepted and
/// ignored, so tgt's `[::]:3260` listener, opened after `0.0.0.0:3260`,
/// failed with `EADDRINUSE`; and an IPv6 destination could not be
/// resolved on the socket transport. Both families at one port, each
/// connected to over loopback.
#[test]
fn ipv4_and_ipv6_listeners_share_a_port_with_afonly() {
    let program = compile_c("cm_afonly");
    let output = uwarp_run(&program, &[]);
    assert_success("cm_afonly", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// A bind to the loopback address on the socket transport gives the
/// device by default (programs on one host run over loopback), and none
/// with `--loopback-bind any`, as on Linux's RDMA CM, so that libfabric
/// and Open MPI ranks across hosts find the host's address on the link
/// (af_xdp_fabric.rs runs them so). A value that means nothing stops the
/// device with its reason.
#[test]
fn a_loopback_bind_gives_the_device_unless_told_to_do_as_linux() {
    let program = compile_c("cm_loopback_bind");
    for (options, expected) in [
        (&[][..], "loopback device\nok\n"),
        (&["--loopback-bind", "device"][..], "loopback device\nok\n"),
        (&["--loopback-bind", "any"][..], "loopback none\nok\n"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
            .args(options)
            .arg(&program)
            .output()
            .expect("uwarp-run runs");
        assert_success(&format!("cm_loopback_bind {options:?}"), &output);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            expected,
            "{options:?}"
        );
    }
    let output = Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .args(["--loopback-bind", "everything"])
        .arg(&program)
        .output()
        .expect("uwarp-run runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("bind errno {}\n", libc::EINVAL)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("UWARP_LOOPBACK_BIND=everything: expected device or any"),
        "{stderr}"
    );
}

#[test]
fn a_c_program_that_forks_and_exits_without_cleaning_up_leaves_nothing_behind() {
    let program = compile_c("fork_and_exit");
    let output = uwarp_run(&program, &[]);
    assert_success("fork_and_exit", &output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

/// A C program that exits with its connection open, and its peer, which
/// must hear of it (`DISCONNECTED` within 30 s), on `link`.
fn exit_with_a_connection_open(link: &dyn Link) {
    let program = compile_c("exit_connected");
    let program = program.to_str().expect("a UTF-8 path");
    let port = free_port().to_string();
    let args = |role: &str| strings(&[role, link.server_ip(), &port]);
    let (server, client) = run_pair(
        link,
        program,
        &port,
        [args("server"), args("client")],
        &["got RDMA_CM_EVENT_REJECTED"],
    );
    assert_success("exit_connected server", &server);
    assert_eq!(String::from_utf8_lossy(&server.stdout), "connected\n");
    assert_success("exit_connected client", &client);
    assert_eq!(String::from_utf8_lossy(&client.stdout), "ok\n");
}

#[test]
fn a_peer_hears_of_a_connection_a_process_left_open_at_exit() {
    exit_with_a_connection_open(&Loopback);
}

/// uwarp's TCP lives in the process: the drop-in library closes a DPDK
/// device at exit, resetting its connections, as the kernel does for
/// the socket transport.
#[test]
fn a_peer_hears_of_a_connection_a_process_left_open_at_exit_on_dpdk() {
    if !uwarp_testing::root_or_skip("DPDK's net_memif") {
        return;
    }
    exit_with_a_connection_open(&MemifLink::new("verbs-exit"));
}

/// A peer's errors reach a program as asynchronous events on its
/// context's `async_fd`: access errors for memory it was refused, fatal
/// ones for the rest and for a Terminate it sent (see
/// `uwarp_verbs::async_events::event_of`).
#[test]
fn a_c_program_hears_of_a_peers_errors_as_asynchronous_events() {
    let program = compile_c("async_events");
    let program = program.to_str().expect("a UTF-8 path");
    let port = free_port();
    let port_arg = port.to_string();
    let cases = [
        (
            "access",
            write_to_unknown_stag(),
            false,
            Some(TermError::DdpTaggedInvalidStag),
        ),
        (
            "access",
            read_of_unknown_stag(),
            false,
            Some(TermError::RdmapInvalidStag),
        ),
        (
            "fatal",
            ulpdu(Opcode::Send, first_untagged(0), &[2; 16]),
            true,
            Some(TermError::MpaCrcError),
        ),
        (
            "fatal",
            terminate(TermError::RdmapCatastrophicStream),
            false,
            None,
        ),
    ];
    let mut args = strings(&[&port_arg]);
    args.extend(cases.iter().map(|case| case.0.to_string()));
    let mut server = Side {
        tool: program,
        args,
        options: Vec::new(),
    }
    .command()
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("async_events starts");
    let mut lines = BufReader::new(server.stdout.take().expect("its stdout")).lines();
    wait_listening(&port_arg);
    for (_, ulpdu, corrupt, answer) in cases {
        let mut peer = hostile_peer(port);
        match answer {
            Some(expected) => assert_eq!(terminated_by(&mut peer, &ulpdu, corrupt), expected),
            None => {
                send_fpdu(&mut peer, &ulpdu, corrupt);
                let mut rest = Vec::new();
                peer.read_to_end(&mut rest).expect("the server closes");
            }
        }
        drop(peer);
        // The program's connection events come in order only per
        // connection: the next peer waits until this one is gone.
        let said: Vec<String> = lines.by_ref().take(2).map_while(Result::ok).collect();
        if said != ["accepted", "served"] {
            let output = server.wait_with_output().expect("async_events ends");
            panic!(
                "async_events said {said:?}:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = server.wait_with_output().expect("async_events ends");
    assert_success("async_events", &output);
    assert_eq!(rest, ["ok"]);
}
