//! `uwarp-perf tcp-compare` end to end: two uwarp processes over
//! net_memif and the kernel over loopback both move the data, and the
//! JSON report carries both rates and their ratio. No timing is asserted.

use std::process::Command;

const BYTES: u64 = 64 << 20;

/// DPDK's memif needs root here (tests run as root in CI).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `value`, a number in `report`, is above zero.
fn assert_positive(value: &serde_json::Value, report: &serde_json::Value) {
    let number = value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {report}"));
    assert!(number > 0.0, "{report}");
}

#[test]
fn both_transfers_report_their_rates() {
    if !is_root() {
        eprintln!("SKIPPED: DPDK's net_memif needs root");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["tcp-compare", "--bytes", &BYTES.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["mode"], "tcp-compare");
    assert_eq!(report["bytes"], BYTES);
    let uwarp = &report["uwarp_memif"];
    assert_positive(&uwarp["gbps"], &report);
    assert_positive(&uwarp["pps"], &report);
    assert!(uwarp["retransmissions"].is_u64(), "{report}");
    let kernel = &report["kernel_loopback"];
    assert_positive(&kernel["gbps"], &report);
    assert_positive(&kernel["pps"], &report);
    assert_positive(&report["ratio_gbps"], &report);
}

#[test]
fn zero_bytes_is_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["tcp-compare", "--bytes", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bytes must be positive"));
}
