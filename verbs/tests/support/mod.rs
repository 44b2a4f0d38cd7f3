//! What the tests of the drop-in library share: running a program under
//! `uwarp-run`, compiling the C programs of `tests/c/` against the
//! installed rdma-core headers, and running a server and a client
//! ([`pair`]).

#![allow(dead_code, unused_imports)] // each test binary uses its own part

pub mod hostile;
pub mod netns;
pub mod pair;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `program` with `args` under `uwarp-run` (default transport).
pub fn uwarp_run(program: impl AsRef<Path>, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uwarp-run"))
        .arg(program.as_ref())
        .args(args)
        .output()
        .expect("uwarp-run runs")
}

/// The path of Debian's `tool` (from rdma-core's packages, which
/// scripts/setup.sh installs).
pub fn debian_tool(tool: &str) -> PathBuf {
    let path = Path::new("/usr/bin").join(tool);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh (it installs rdma-core's tools)",
        path.display()
    );
    path
}

/// Compiles `tests/c/<name>.c` against the installed headers, linked
/// against the system's libibverbs and librdmacm (as every application
/// is), into the test's target directory; returns the program's path.
pub fn compile_c(name: &str) -> PathBuf {
    compile_c_with(name, &[])
}

/// [`compile_c`], linked against the further libraries `libs` too (e.g.
/// `-liscsi`).
pub fn compile_c_with(name: &str, libs: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    // Compiled under a name of this process and thread, then renamed into
    // place: tests running in parallel may compile the same program, and
    // one must never run (or write) a file another is writing ("Text file
    // busy").
    let thread = format!("{:?}", std::thread::current().id());
    let partial = out.with_file_name(format!(
        "{name}.{}.{}.partial",
        std::process::id(),
        thread.trim_start_matches("ThreadId(").trim_end_matches(')')
    ));
    let compiled = Command::new("cc")
        .args(["-Wall", "-Werror", "-O1", "-o"])
        .arg(&partial)
        .arg(&source)
        .args(libs)
        .arg("-lrdmacm")
        .arg("-libverbs")
        .arg("-pthread")
        .output()
        .expect("cc runs (build-essential)");
    assert!(
        compiled.status.success(),
        "{} does not compile:\n{}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    std::fs::rename(&partial, &out).expect("the compiled program moves into place");
    out
}

/// Asserts that `output` is a successful run, showing both streams if not.
pub fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The result line Debian's `rstream` (and `riostream`) printed in
/// `output` for transfers of `size`, as it writes the size (`64`, `1m`):
/// `custom SIZE XFERS ITERS TOTAL TIME GB/SEC USEC/XFER`.
pub fn rstream_result(output: &Output, size: &str) -> Option<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|line| line.starts_with("custom") && line.split_whitespace().nth(1) == Some(size))
        .map(str::to_owned)
}

/// The line `fi_pingpong` printed in `output` for its `iterations`
/// transfers (`bytes #sent #ack total time MB/sec usec/xfer
/// Mxfers/sec`), asserted to say every one was acknowledged (`=N`); `what`
/// names the run in a failure.
pub fn pingpong_report(what: &str, output: &Output, iterations: &str) -> String {
    assert_success(what, output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = stdout
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(iterations))
        .unwrap_or_else(|| panic!("{what}: no report of {iterations} transfers:\n{stdout}"));
    let acked = format!("={iterations}");
    assert!(
        report.contains(&acked),
        "{what}: not every transfer acknowledged: {report}"
    );
    report.to_owned()
}

/// `mpirun`'s options that put every message of its ranks on uwarp0
/// through libfabric: `pml cm`, `mtl ofi` over `verbs;ofi_rxm`, no byte
/// transfer layer but `self` (no TCP or shared-memory path to fall back
/// to), and each rank saying which provider it chose (see
/// [`assert_ranks_on_uwarp0`]).
pub const MPI_ON_UWARP0: &[&str] = &[
    "--mca",
    "pml",
    "cm",
    "--mca",
    "mtl",
    "ofi",
    "--mca",
    "mtl_ofi_provider_include",
    "verbs;ofi_rxm",
    "--mca",
    "btl",
    "self",
    "--mca",
    "mtl_base_verbose",
    "100",
];

/// Asserts that `ranks` ranks of an `mpirun` with [`MPI_ON_UWARP0`] said
/// they chose libfabric's provider on uwarp0.
pub fn assert_ranks_on_uwarp0(output: &Output, ranks: usize) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let chosen = stderr
        .lines()
        .filter(|line| line.ends_with("mtl:ofi:provider: uwarp0"))
        .count();
    assert_eq!(chosen, ranks, "every rank on uwarp0:\n{stderr}");
}
