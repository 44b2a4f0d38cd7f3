//! `dpdk-testpmd` in io forwarding mode: the reference the poll loop is
//! measured against, run as a child process in the same run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The testpmd binary Debian's `dpdk-dev` package installs.
pub const TESTPMD: &str = "dpdk-testpmd";

/// How many all-zero reports [`Testpmd::rates`] waits through for traffic
/// to start.
pub const START_REPORTS: usize = 15;

/// A running testpmd forwarding between (or on) its ports.
pub struct Testpmd {
    child: Child,
    rates: mpsc::Receiver<u64>,
    started: mpsc::Receiver<()>,
}

/// What testpmd is started with.
pub struct TestpmdConfig<'a> {
    /// `--lcores` mapping, e.g. `0@1,1@0` (main lcore first, then the
    /// forwarding lcore).
    pub lcores: &'a str,
    /// The `--vdev` arguments.
    pub vdevs: &'a [String],
    /// Send a first burst of packets (`--tx-first`).
    pub tx_first: bool,
    /// The EAL's `--file-prefix`, distinct per process on one machine.
    pub file_prefix: &'a str,
}

impl Testpmd {
    /// Starts testpmd in io forwarding mode, printing port statistics
    /// every second.
    pub fn start(config: &TestpmdConfig<'_>) -> Result<Testpmd, String> {
        let mut cmd = Command::new(TESTPMD);
        cmd.args(["--lcores", config.lcores])
            .args(["--no-huge", "-m", "256", "--no-pci", "--no-telemetry"])
            .arg(format!("--file-prefix={}", config.file_prefix));
        for vdev in config.vdevs {
            cmd.args(["--vdev", vdev]);
        }
        cmd.args([
            "--",
            "--forward-mode=io",
            "--nb-cores=1",
            "--total-num-mbufs=8192",
            "--stats-period=1",
            "--auto-start",
        ]);
        if config.tx_first {
            cmd.arg("--tx-first");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {TESTPMD} (install Debian's dpdk-dev): {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rates) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // testpmd prints a port's MAC address once the port started.
                if line.starts_with("Port 0: ") {
                    let _ = started_tx.send(());
                }
                if let Some(pps) = parse_rx_pps(&line) {
                    if tx.send(pps).is_err() {
                        break;
                    }
                }
            }
        });
        Ok(Testpmd {
            child,
            rates,
            started,
        })
    }

    /// Waits until testpmd's port has started (a memif server refuses a
    /// client's handshake before that, and the client does not retry).
    pub fn wait_started(&self, timeout: Duration) -> Result<(), String> {
        self.started
            .recv_timeout(timeout)
            .map_err(|_| format!("{TESTPMD}'s port did not start within {timeout:?}"))
    }

    /// The receive rates (packets/s) testpmd prints for its port, one
    /// per second: the first `seconds` after skipping `warmup` reports and
    /// every report before traffic starts (testpmd prints zeros while it
    /// waits for a memif peer, for up to [`START_REPORTS`] reports); fewer
    /// if testpmd stops printing. (Every run here has testpmd on one port.)
    pub fn rates(&self, warmup: usize, seconds: usize) -> Vec<u64> {
        std::iter::from_fn(|| self.rates.recv_timeout(Duration::from_secs(5)).ok())
            .take(START_REPORTS + warmup + seconds)
            .skip_while(|&pps| pps == 0)
            .skip(warmup)
            .take(seconds)
            .collect()
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        // SIGINT lets testpmd stop its ports and free its memory.
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number of `  Rx-pps:    955387185          Rx-bps: ...`.
fn parse_rx_pps(line: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix("Rx-pps:")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_rx_pps;

    #[test]
    fn reads_the_receive_rate() {
        assert_eq!(
            parse_rx_pps("  Rx-pps:    955387185          Rx-bps:            0"),
            Some(955_387_185)
        );
        assert_eq!(
            parse_rx_pps("  Tx-pps:    5          Tx-bps:            0"),
            None
        );
        assert_eq!(parse_rx_pps("  Rx-pps: x"), None);
    }
}
