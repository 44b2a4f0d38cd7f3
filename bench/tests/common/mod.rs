//! What the tests that run `uwarp-perf` processes share: the processes,
//! killed when a test ends early, with their output read as it comes;
//! and for the two-host modes, a server and a client run to their end
//! and the checks of a run's JSON report.
// Each test binary uses its own subset.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod kernel;
pub mod netns;

/// The six two-host modes.
pub const MODES: [&str; 6] = [
    "write-bw",
    "write-lat",
    "read-bw",
    "read-lat",
    "send-bw",
    "send-lat",
];

/// A loopback run short enough for a test: 4 KiB messages, 300 of
/// them, 50 round trips and 5 connection setups.
pub const QUICK_LOOPBACK: [&str; 8] = [
    "-s",
    "4096",
    "-n",
    "300",
    "--latency-iters",
    "50",
    "--setups",
    "5",
];

/// Runs `uwarp-perf` with `args` to its end.
pub fn perf_output(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(args)
        .output()
        .unwrap()
}

/// The standard error of a `uwarp-perf` run that must fail.
pub fn perf_refused(args: &[&str]) -> String {
    let out = perf_output(args);
    assert!(!out.status.success(), "{args:?} ran");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `uwarp-perf` with `args` to its end; its standard output, once
/// it has exited successfully (its standard error is the failure).
pub fn perf_stdout(args: &[&str]) -> Vec<u8> {
    let out = perf_output(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Messages of each run: small, so the runs take about a second.
pub const ITERS: u64 = 2000;

/// The message size of `mode`'s runs: 64 KiB for bandwidth, 8 octets for
/// latency.
pub fn size_of(mode: &str) -> u64 {
    if mode.ends_with("-bw") {
        65536
    } else {
        8
    }
}

/// Round trips of the latency runs that involve the socket transport:
/// its threads share two CPUs with the other process, where a round trip
/// can take a millisecond.
pub const ROUND_TRIPS: u64 = 200;

/// The arguments of a run of `iters` messages of [`size_of`] `mode`.
fn run_of(mode: &str, iters: u64) -> Vec<String> {
    args(&["-n", &iters.to_string(), "-s", &size_of(mode).to_string()])
}

/// The arguments of a run of [`ITERS`] messages of [`size_of`] `mode`.
pub fn small_run(mode: &str) -> Vec<String> {
    run_of(mode, ITERS)
}

/// Messages of a run of `mode` with the socket transport on one side:
/// [`ITERS`], or [`ROUND_TRIPS`] for latency.
pub fn quick_iters(mode: &str) -> u64 {
    if mode.ends_with("-bw") {
        ITERS
    } else {
        ROUND_TRIPS
    }
}

/// The arguments of a run of [`quick_iters`] messages of [`size_of`]
/// `mode`.
pub fn quick_run(mode: &str) -> Vec<String> {
    run_of(mode, quick_iters(mode))
}

/// A client's arguments for a `write-bw` run in MPA revision 1 with
/// Markers and CRCs: 200 Writes of 64 KiB ([`check_marked`] checks it).
pub const MARKED_WRITES: [&str; 8] = [
    "-s",
    "65536",
    "-n",
    "200",
    "--mpa-rev",
    "1",
    "--markers",
    "--crc",
];

/// Checks the reports of a [`MARKED_WRITES`] run: every Write arrived,
/// revision 1 with CRCs, and the server put Markers in what it sent, as
/// the client asked.
pub fn check_marked(server: &Value, client: &Value) {
    check_pair(server, client, "write-bw", &[65536], Some(200));
    assert_eq!(client["mpa"]["revision"], 1, "{client}");
    assert_eq!(client["mpa"]["rtr"], "none", "{client}");
    assert_eq!(client["mpa"]["crc"], true, "{client}");
    assert_eq!(client["mpa"]["markers_rx"], true, "{client}");
    assert_eq!(server["mpa"]["markers_tx"], true, "{server}");
}

/// A client's arguments for a `write-lat` run of 100 ping-pongs of 64
/// octets, offering peer-to-peer with the RTR `rtr`.
pub fn p2p_pings(rtr: &str) -> Vec<String> {
    args(&["-s", "64", "-n", "100", "--p2p", rtr])
}

/// Checks the reports of a [`p2p_pings`] run: every ping-pong, and both
/// ends agreed on `rtr`.
pub fn check_p2p(server: &Value, client: &Value, rtr: &str) {
    check_pair(server, client, "write-lat", &[64], Some(100));
    assert_eq!(client["mpa"]["rtr"], rtr, "{client}");
    assert_eq!(server["mpa"]["rtr"], rtr, "{server}");
}

/// Owned arguments.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The arguments of one side of a run: `MODE SIDE... TRANSPORT... --json
/// EXTRA...`, where SIDE is `--server --port P` or `--connect ADDR:PORT`
/// and TRANSPORT e.g. `--eal ... --ip ...` or `--transport socket`.
pub fn side_args(mode: &str, side: &[&str], transport: &[&str], extra: &[String]) -> Vec<String> {
    let mut list = args(&[mode]);
    list.extend(args(side));
    list.extend(args(transport));
    list.push("--json".into());
    list.extend_from_slice(extra);
    list
}

/// The project's scripts.
pub fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// Runs a command that must succeed (what it prints is dropped).
pub fn sh(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
    assert!(status.success(), "{program} {args:?} failed");
}

/// A running `uwarp-perf`; killed when dropped.
pub struct Perf {
    name: String,
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: mpsc::Receiver<String>,
    seen: Vec<String>,
}

/// A `uwarp-perf` that ended.
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Perf {
    /// Starts `uwarp-perf ARGS`, behind `wrapper` (e.g. `ip netns exec
    /// NS`) when it is not empty; `name` is for messages.
    pub fn start(name: &str, wrapper: &[&str], args: &[String]) -> Self {
        let binary = env!("CARGO_BIN_EXE_uwarp-perf");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("uwarp-perf starts");
        let mut stdout = child.stdout.take().expect("piped");
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let (lines, stderr) = mpsc::channel();
        let pipe = BufReader::new(child.stderr.take().expect("piped"));
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        Perf {
            name: name.to_owned(),
            child,
            stdout: Some(stdout),
            stderr,
            seen: Vec::new(),
        }
    }

    /// Waits until a line of its standard error contains `text`.
    pub fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "the {} never said {text:?}; it said:\n{}",
            self.name,
            self.seen.join("\n")
        );
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for it to exit (at most five minutes: the big transfers of
    /// the TCP interop tests take a while on a busy machine).
    pub fn finish(mut self) -> Finished {
        let deadline = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waits") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the {} did not finish; it said:\n{}",
                self.name,
                self.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.stdout.take().expect("once").join().unwrap_or_default();
        let stderr: Vec<String> = self.seen.drain(..).chain(self.stderr.iter()).collect();
        Finished {
            status,
            stdout,
            stderr: stderr.join("\n"),
        }
    }
}

impl Drop for Perf {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Finished {
    /// The JSON report of a run that succeeded.
    pub fn report(&self, name: &str) -> Value {
        assert!(
            self.status.success(),
            "the {name} failed ({}):\n{}",
            self.status,
            self.stderr
        );
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("the {name}'s report is not JSON ({e}): {}", self.stdout))
    }

    /// The one line of a failure's reason.
    pub fn failure(&self) -> String {
        assert!(!self.status.success(), "succeeded:\n{}", self.stdout);
        let reasons: Vec<&str> = self
            .stderr
            .lines()
            .filter(|line| line.starts_with("uwarp-perf: ") && !line.contains("listening on"))
            .collect();
        assert_eq!(reasons.len(), 1, "one reason:\n{}", self.stderr);
        reasons[0].to_owned()
    }
}

/// Waits for both ends of a run of `iters` messages of [`size_of`]
/// `mode` and checks their reports ([`check_pair`]); the reports,
/// server's first.
pub fn finish_and_check(server: Perf, client: Perf, mode: &str, iters: u64) -> (Value, Value) {
    let (server, client) = finish_pair(server, client);
    check_pair(&server, &client, mode, &[size_of(mode)], Some(iters));
    (server, client)
}

/// Waits for both ends of a run; their reports, server's first.
pub fn finish_pair(server: Perf, client: Perf) -> (Value, Value) {
    let client = client.finish();
    let server = server.finish();
    let client = client.report("client");
    let server = server.report("server");
    eprintln!("client: {client}");
    (server, client)
}

/// Checks a report of `mode`: one result per size of `sizes`, each of
/// `iters` messages, with the numbers its metric measures (and nothing
/// else), and the data verified.
pub fn check_report(report: &Value, mode: &str, sizes: &[u64], iters: Option<u64>) {
    assert_eq!(report["mode"], mode, "{report}");
    assert_eq!(report["verified"], true, "{report}");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), sizes.len(), "{report}");
    let bandwidth = mode.ends_with("-bw");
    for (result, size) in results.iter().zip(sizes) {
        assert_eq!(result["size"], *size, "{report}");
        let done = result["iters"].as_u64().expect("iters");
        match iters {
            Some(iters) => assert_eq!(done, iters, "{report}"),
            None => assert!(done > 0, "{report}"),
        }
        for field in ["bw_gbps", "msg_rate"] {
            assert_eq!(
                result[field].as_f64().is_some_and(|v| v > 0.0),
                bandwidth,
                "{field}: {report}"
            );
        }
        for field in [
            "lat_p50_us",
            "lat_p90_us",
            "lat_p99_us",
            "lat_p999_us",
            "lat_max_us",
        ] {
            assert_eq!(
                result[field].as_f64().is_some_and(|v| v > 0.0),
                !bandwidth,
                "{field}: {report}"
            );
        }
    }
}

/// Checks both reports of a run: the same numbers on both sides, which
/// the client measured.
pub fn check_pair(server: &Value, client: &Value, mode: &str, sizes: &[u64], iters: Option<u64>) {
    check_report(client, mode, sizes, iters);
    check_report(server, mode, sizes, iters);
    assert_eq!(client["role"], "client");
    assert_eq!(server["role"], "server");
    assert_eq!(server["results"], client["results"]);
    // Each side reports its own queue pairs' counters: both received
    // FPDUs (the control messages at least), and a clean run has no
    // errors.
    for report in [server, client] {
        let counters = &report["counters"];
        assert!(
            counters["fpdus_received"].as_u64().is_some_and(|n| n > 0),
            "{report}"
        );
        for field in ["crc_errors", "terminates_sent", "terminates_received"] {
            assert_eq!(counters[field], 0, "{field}: {report}");
        }
    }
}
