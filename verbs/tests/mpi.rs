//! Open MPI 4.1 on uwarp's drop-ins: two ranks of Debian's NetPIPE
//! (`NPopenmpi`) and of the HPC Challenge (`hpcc`: HPL, and the
//! ping-pong and ring latencies and bandwidths of its `b_eff` part, MPI's
//! point-to-point and collective traffic), with every message on
//! libfabric's `verbs;ofi_rxm`
//! provider over uwarp0 (`pml cm`, `mtl ofi`, and no byte transfer layer
//! but `self`, so there is no TCP or shared-memory path to fall back to),
//! bootstrapped by `mpirun` over the kernel's TCP on this host, uwarp on
//! the socket transport.

mod support;

use std::process::{Command, Output};

use support::{assert_ranks_on_uwarp0, assert_success, debian_tool, MPI_ON_UWARP0};

/// `mpirun` of two ranks of `program` with `args`, all traffic on uwarp0
/// through libfabric, under `uwarp-run`, bounded in time, in the test's
/// scratch directory `dir` (NetPIPE writes `np.out` there, hpcc reads
/// and writes its files there).
fn mpirun(dir: &std::path::Path, program: &str, args: &[&str]) -> Output {
    let options = ["--allow-run-as-root", "--oversubscribe", "-np", "2"];
    Command::new("timeout")
        .arg("120")
        .arg(env!("CARGO_BIN_EXE_uwarp-run"))
        .arg(debian_tool("mpirun"))
        .args(options)
        .args(MPI_ON_UWARP0)
        .arg(debian_tool(program))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("timeout runs")
}

/// A scratch directory of the test's own, made empty.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// What the ranks printed (NetPIPE reports on standard error).
fn both_streams(output: &Output) -> String {
    String::from_utf8_lossy(&[output.stdout.as_slice(), &output.stderr].concat()).into_owned()
}

#[test]
fn netpipe_checks_every_message_size_up_to_a_mebibyte_over_uwarp() {
    let output = mpirun(
        &scratch("netpipe-check"),
        "NPopenmpi",
        &["-u", "1048576", "-n", "3", "-i"],
    );
    assert_success("NPopenmpi -i", &output);
    assert_ranks_on_uwarp0(&output, 2);
    let stdout = both_streams(&output);
    let checked = stdout
        .lines()
        .filter(|line| line.ends_with("Integrity check passed"))
        .count();
    assert!(checked >= 30, "sizes checked: {checked}\n{stdout}");
    assert!(!stdout.contains("failed"), "{stdout}");
}

#[test]
fn netpipe_measures_up_to_a_mebibyte_over_uwarp() {
    let output = mpirun(
        &scratch("netpipe"),
        "NPopenmpi",
        &["-u", "1048576", "-n", "5", "-p", "0"],
    );
    assert_success("NPopenmpi", &output);
    assert_ranks_on_uwarp0(&output, 2);
    let stdout = both_streams(&output);
    assert!(
        stdout
            .lines()
            .any(|line| line.contains(" 1048576 bytes") && line.contains("Mbps")),
        "no 1 MiB measurement:\n{stdout}"
    );
}

#[test]
fn hpcc_pings_and_rings_over_uwarp() {
    let dir = scratch("hpcc");
    let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hpccinf.txt");
    std::fs::copy(input, dir.join("hpccinf.txt")).expect("hpcc's input");
    let output = mpirun(&dir, "hpcc", &[]);
    assert_success("hpcc", &output);
    assert_ranks_on_uwarp0(&output, 2);
    let report = std::fs::read_to_string(dir.join("hpccoutf.txt")).expect("hpcc's report");
    let value = |name: &str| {
        report
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in hpcc's report"))
    };
    assert_eq!(value("Success"), 1.0, "hpcc's own checks");
    for name in [
        "AvgPingPongLatency_usec",
        "AvgPingPongBandwidth_GBytes",
        "NaturallyOrderedRingLatency_usec",
        "RandomlyOrderedRingBandwidth_GBytes",
    ] {
        assert!(value(name) > 0.0, "{name}");
    }
}
