//! Runs the PCI VM testbed (`scripts/vm/run.sh`, docs/vm.md) from a test:
//! two guests with NICs for DPDK, uwarp's binaries copied in from the
//! test's build.

use std::path::Path;
use std::process::Command;

/// What a run of `scripts/vm/run.sh` printed.
pub struct Run {
    /// Its standard output: each VM's lines (`a: `, `b: `) and the
    /// verdicts (`vm: SCENARIO: passed`).
    pub stdout: String,
    /// Both streams, for a failed assertion's message.
    pub shown: String,
}

/// Runs `scripts/vm/run.sh` with the binaries beside `binary` (a
/// `CARGO_BIN_EXE_*` of the calling test), a 300 s limit and `args`
/// (options, then scenarios); panics, showing its output, unless it
/// exits 0. Needs root, qemu and cpio.
pub fn run(binary: &str, args: &[&str]) -> Run {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/vm/run.sh");
    let bin = Path::new(binary).parent().expect("the binary's directory");
    let output = Command::new("bash")
        .arg(script)
        .arg("--bin")
        .arg(bin)
        .args(["--timeout", "300"])
        .args(args)
        .output()
        .expect("run scripts/vm/run.sh");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(output.status.success(), "run.sh failed:\n{shown}");
    Run { stdout, shown }
}
