//! `uwarp-perf loopback` end to end: a short run of each operation moves
//! its data over the socket transport and over plain TCP, and reports
//! every field.

use std::process::Command;

fn run(op: &str, crc: bool) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"));
    cmd.args([
        "loopback",
        "--op",
        op,
        "-s",
        "4096",
        "-n",
        "300",
        "--latency-iters",
        "50",
        "--json",
    ]);
    if crc {
        cmd.arg("--crc");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_operation_reports_every_field() {
    for (op, crc) in [("write", false), ("read", true), ("send", false)] {
        let report = run(op, crc);
        assert_eq!(report["op"], op);
        assert_eq!(report["crc"], crc);
        for transport in ["socket", "tcp_baseline"] {
            for field in ["bw_gbps", "msg_rate", "lat_p50_us", "lat_p99_us"] {
                let value = report[transport][field].as_f64().unwrap();
                assert!(value > 0.0, "{op} {transport} {field} = {value}");
            }
        }
        assert!(report["bw_ratio"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["loopback", "--tx-depth", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tx-depth"));
}
