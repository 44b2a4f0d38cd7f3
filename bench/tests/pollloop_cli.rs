//! `uwarp-perf pollloop` end to end on both links: uwarp's loop and
//! dpdk-testpmd both move packets, and the report carries both rates.

use std::process::Command;

fn run(link: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["pollloop", "--link", link, "--seconds", "1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn both_links_report_both_rates() {
    for link in ["ring", "memif"] {
        let report = run(link);
        assert_eq!(report["mode"], "pollloop");
        assert_eq!(report["link"], link);
        let uwarp = report["uwarp"]["pps"].as_f64().unwrap();
        let testpmd = report["testpmd"]["pps"].as_f64().unwrap();
        assert!(uwarp > 0.0 && testpmd > 0.0, "{report}");
        assert!(report["ratio"].as_f64().unwrap() > 0.0, "{report}");
    }
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["pollloop", "--frames", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("frames must be"));
}
