//! `uwarp-perf tcp-compare`: one bulk transfer between two uwarp
//! processes over net_memif, then the same transfer over the kernel's TCP
//! on loopback, in the same run: Gbit/s and packets per second of both,
//! and their ratio.
//!
//! - uwarp: this binary started twice as `uwarp-perf tcp`, a sink
//!   listening behind the memif server and a source connecting from the
//!   memif client, each printing its JSON report. Both connections must
//!   end `closed`, the sink must have received every octet the source
//!   sent, and their SHA-256 digests must match. The time is the longer
//!   of the two ends' (each counts from its connection's establishment
//!   to its end, on its own clock), so the rate is never overstated;
//!   packets per second are the segments the source sent (data, plus its
//!   FIN and a few ACKs) over that time. The source's retransmissions are
//!   reported beside them.
//! - kernel: a `TcpListener` on 127.0.0.1, a sink thread and a source
//!   thread moving the same octets of [`pattern_block`], hashed at both
//!   ends (and compared with uwarp's digest: both runs move the same
//!   bytes). The time runs from the start of the writes to the sink's
//!   end of stream. Packets per second come from the delta of `Tcp: OutSegs` in
//!   `/proc/net/snmp`, which is system-wide: it counts both directions
//!   (the sink's ACKs too) and anything else the machine sends, in
//!   segments of loopback's MSS (close to 64 KiB).
//!
//! Both processes' cores busy-poll (yielding when idle). The EAL puts
//! each process's main thread on CPU 0 and unpinned core threads inherit
//! that, so without [`Pinning::Split`] all four core threads share CPU 0
//! and the two dataplanes take turns on it.
//!
//! The sink says it listens only once its memif link is up, which takes
//! the source's memif client: so the source starts when the sink's memif
//! socket exists (and its port has had time to start), and the sink's
//! "listening on" line then confirms the link; the source opens its
//! connection as soon as its own end of the link is up.
//!
//! The two end in two phases, so that neither races DPDK 22.11's memif
//! teardown (docs/dpdk.md, "Exit and teardown"): each stops its cores and
//! says so ([`CORES_STOPPED`]); once both did, the source (which holds its
//! port until its standard input closes) stops its port, and the sink,
//! which waits for that close, stops its own after it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::teardown::CORES_STOPPED;
use super::{hex, pattern_block};
use crate::pollloop::memif_vdev;

/// The sink's TCP port.
const PORT: u16 = 5001;
/// The sink's address (a /24).
const SINK_IP: &str = "10.90.0.1";
/// The source's address (same subnet).
const SOURCE_IP: &str = "10.90.0.2";
/// How long the sink may take to create its memif socket, and then to
/// report its listener (which it does once the source's memif client
/// connected and the link is up).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait between the sink's memif socket appearing and the source's
/// start. The socket exists from the EAL's probe, a few milliseconds
/// before the sink starts its port, and a memif client that connects in
/// between is refused for good; the source's own EAL start (hundreds of
/// milliseconds) widens the margin further.
const SETTLE: Duration = Duration::from_millis(100);
/// How long the sink waits for the source to close its end of the link
/// once its own cores stopped.
const PEER_CLOSE_WAIT: Duration = Duration::from_secs(10);
/// Octets per write and read on the kernel side.
const KERNEL_CHUNK: usize = 1 << 20;

/// Where the uwarp processes' core threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Not pinned: the threads inherit the EAL main thread's CPU, so all
    /// four share CPU 0 (and CPU 1 idles).
    Unpinned,
    /// Each process on a CPU of its own, control and dataplane core
    /// together: the sink on CPU 1, the source on CPU 0. About twice as
    /// fast as `Unpinned` on two CPUs; which core shares a CPU with which
    /// made no measurable difference.
    Split,
}

impl Pinning {
    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Pinning::Unpinned => "unpinned",
            Pinning::Split => "split",
        }
    }

    /// `uwarp-perf tcp --cpus CONTROL,DATAPLANE` for the sink (`sink`)
    /// or the source.
    fn cpus(self, sink: bool) -> Option<&'static str> {
        match (self, sink) {
            (Pinning::Unpinned, _) => None,
            (Pinning::Split, true) => Some("1,1"),
            (Pinning::Split, false) => Some("0,0"),
        }
    }
}

/// What `uwarp-perf tcp-compare` runs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Octets each transfer moves.
    pub bytes: u64,
    /// Where the uwarp processes' cores run.
    pub pinning: Pinning,
    /// How long the uwarp transfer may take once both ends are up.
    pub timeout: Duration,
}

/// One transfer's time and segment count.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Seconds it took.
    pub seconds: f64,
    /// Segments counted (which ones: see the module's documentation).
    pub segments: u64,
}

impl Transfer {
    /// Gbit/s for `bytes` octets.
    pub fn gbps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.seconds / 1e9
    }

    /// Segments per second.
    pub fn pps(&self) -> f64 {
        self.segments as f64 / self.seconds
    }
}

/// Both transfers.
#[derive(Clone, Debug)]
pub struct CompareReport {
    /// What ran.
    pub config: CompareConfig,
    /// uwarp over net_memif; `segments` are the source's.
    pub uwarp: Transfer,
    /// Segments the uwarp source retransmitted.
    pub retransmissions: u64,
    /// The kernel over loopback; `segments` are the system's `OutSegs`.
    pub kernel: Transfer,
}

impl CompareReport {
    /// uwarp's Gbit/s over the kernel's.
    pub fn ratio_gbps(&self) -> f64 {
        self.uwarp.gbps(self.config.bytes) / self.kernel.gbps(self.config.bytes)
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> Value {
        let bytes = self.config.bytes;
        json!({
            "mode": "tcp-compare",
            "bytes": bytes,
            "pinning": self.config.pinning.name(),
            "uwarp_memif": {
                "gbps": self.uwarp.gbps(bytes),
                "pps": self.uwarp.pps(),
                "retransmissions": self.retransmissions,
                "seconds": self.uwarp.seconds,
                "segments_sent": self.uwarp.segments,
            },
            "kernel_loopback": {
                "gbps": self.kernel.gbps(bytes),
                "pps": self.kernel.pps(),
                "seconds": self.kernel.seconds,
                "out_segs_system_wide": self.kernel.segments,
            },
            "ratio_gbps": self.ratio_gbps(),
        })
    }

    /// The report as a table.
    pub fn to_text(&self) -> String {
        let bytes = self.config.bytes;
        format!(
            "bulk TCP transfer of {bytes} B, one connection (uwarp cores: {})\n\
             {:<34}{:>10}{:>14}{:>17}\n\
             {:<34}{:>10.3}{:>14.0}{:>17}\n\
             {:<34}{:>10.3}{:>14.0}{:>17}\n\
             {:<34}{:>10.2}\n\
             packets/s: uwarp counts the segments its source sent; the kernel's \
             are Tcp OutSegs from /proc/net/snmp, system-wide (both directions, \
             segments of up to 64 KiB on loopback)\n",
            self.config.pinning.name(),
            "",
            "Gbit/s",
            "packets/s",
            "retransmissions",
            "uwarp TCP, 2 processes, net_memif",
            self.uwarp.gbps(bytes),
            self.uwarp.pps(),
            self.retransmissions,
            "kernel TCP, loopback",
            self.kernel.gbps(bytes),
            self.kernel.pps(),
            "-",
            "ratio uwarp/kernel (Gbit/s)",
            self.ratio_gbps(),
        )
    }
}

/// Runs the uwarp transfer, then the kernel's.
pub fn run(config: &CompareConfig) -> Result<CompareReport, String> {
    if config.bytes == 0 {
        return Err("--bytes must be positive".into());
    }
    let (uwarp, retransmissions, uwarp_digest) = uwarp(config)?;
    let (kernel, kernel_digest) =
        kernel(config.bytes).map_err(|e| format!("kernel loopback transfer: {e}"))?;
    if kernel_digest != uwarp_digest {
        return Err(format!(
            "the kernel transfer's SHA-256 {kernel_digest} differs from uwarp's {uwarp_digest}: \
             the two runs did not move the same bytes"
        ));
    }
    Ok(CompareReport {
        config: config.clone(),
        uwarp,
        retransmissions,
        kernel,
    })
}

/// The children and the memif socket: dropping it kills the children
/// still running and removes the socket.
struct Children {
    socket: PathBuf,
    running: Vec<Child>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// One `uwarp-perf tcp` child's output, read on threads of its own.
struct Peer {
    name: &'static str,
    stdout: JoinHandle<String>,
    stderr: Receiver<String>,
    /// Its standard input: dropping it lets a child run with
    /// `--hold-port` stop its port.
    stdin: Option<ChildStdin>,
    /// The stderr lines taken from `stderr` so far.
    seen: Vec<String>,
}

impl Peer {
    /// Starts `uwarp-perf tcp ARGS` into `children`.
    fn spawn(name: &'static str, args: &[String], children: &mut Children) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let mut child = Command::new(exe)
            .arg("tcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the uwarp {name}: {e}"))?;
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        children.running.push(child);
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let (lines, stderr_lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Peer {
            name,
            stdout,
            stderr: stderr_lines,
            stdin,
            seen: Vec::new(),
        })
    }

    /// Waits until a stderr line contains `text`; fails when the child
    /// closes its stderr (it exited) or after `timeout`.
    fn wait_for_line(&mut self, text: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self
                .stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen.push(line);
                    if found {
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.error("exited early")),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.error(&format!("did not print {text:?} within {timeout:?}")))
                }
            }
        }
    }

    /// "the uwarp NAME WHAT", then the last lines of its stderr.
    fn error(&mut self, what: &str) -> String {
        let tail = self.tail();
        format!("the uwarp {} {what}{tail}", self.name)
    }

    /// The last lines of its stderr, to explain a failure: what it
    /// printed until it exited, or until it was quiet for a moment.
    fn tail(&mut self) -> String {
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
        match &self.seen[self.seen.len().saturating_sub(6)..] {
            [] => String::new(),
            lines => format!("; its stderr ends:\n  {}", lines.join("\n  ")),
        }
    }

    /// Its JSON report, once it exited with `status`.
    fn report(mut self, status: std::process::ExitStatus) -> Result<PeerReport, String> {
        if !status.success() {
            return Err(self.error(&format!("failed ({status})")));
        }
        let stdout = self.stdout.join().unwrap_or_default();
        let json: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            format!(
                "the uwarp {}'s report is not one JSON object ({e}): {stdout:?}",
                self.name
            )
        })?;
        PeerReport::from_json(&json)
            .map_err(|field| format!("the uwarp {}'s report lacks {field:?}: {json}", self.name))
    }
}

/// What `uwarp-perf tcp --json` reported for one connection.
struct PeerReport {
    end: String,
    sent: u64,
    received: u64,
    seconds: f64,
    segments_sent: u64,
    retransmissions: u64,
    sha256_sent: String,
    sha256_received: String,
}

impl PeerReport {
    /// Reads the fields; the error names the first one missing.
    fn from_json(json: &Value) -> Result<Self, &'static str> {
        let u64_field = |name| json[name].as_u64().ok_or(name);
        let str_field = |name| json[name].as_str().map(str::to_owned).ok_or(name);
        Ok(PeerReport {
            end: str_field("end")?,
            sent: u64_field("bytes_sent")?,
            received: u64_field("bytes_received")?,
            seconds: json["seconds"].as_f64().ok_or("seconds")?,
            segments_sent: u64_field("segments_sent")?,
            retransmissions: u64_field("retransmissions")?,
            sha256_sent: str_field("sha256_sent")?,
            sha256_received: str_field("sha256_received")?,
        })
    }
}

/// The arguments of `uwarp-perf tcp` for the sink (`sink`) or the
/// source, whose memif link runs over `socket`.
fn tcp_args(config: &CompareConfig, sink: bool, socket: &Path) -> Vec<String> {
    let socket = socket.display().to_string();
    let vdev = |role: &str, mac: &str| format!("--vdev {}", memif_vdev(role, &socket, mac));
    let mut args: Vec<String> = if sink {
        vec![
            "--role".into(),
            "sink".into(),
            "--listen".into(),
            PORT.to_string(),
            "--eal".into(),
            vdev("server", "02:fe:00:00:00:01"),
            "--ip".into(),
            format!("{SINK_IP}/24"),
            "--await-peer-close-ms".into(),
            PEER_CLOSE_WAIT.as_millis().to_string(),
        ]
    } else {
        vec![
            "--role".into(),
            "source".into(),
            "--connect".into(),
            format!("{SINK_IP}:{PORT}"),
            "--bytes".into(),
            config.bytes.to_string(),
            "--eal".into(),
            vdev("client", "02:fe:00:00:00:02"),
            "--ip".into(),
            format!("{SOURCE_IP}/24"),
            "--hold-port".into(),
        ]
    };
    args.extend([
        "--json".into(),
        "--timeout".into(),
        config.timeout.as_secs().max(1).to_string(),
    ]);
    if let Some(cpus) = config.pinning.cpus(sink) {
        args.extend(["--cpus".into(), cpus.into()]);
    }
    args
}

/// The uwarp transfer: its time and the source's segments, the source's
/// retransmissions, and the digest of what moved.
fn uwarp(config: &CompareConfig) -> Result<(Transfer, u64, String), String> {
    let socket = PathBuf::from(format!(
        "/tmp/uwarp-perf-{}-tcp-compare.sock",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&socket);
    let mut children = Children {
        socket,
        running: Vec::new(),
    };
    let sink_args = tcp_args(config, true, &children.socket);
    let mut sink = Peer::spawn("sink", &sink_args, &mut children)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while !children.socket.exists() {
        if children.running[0]
            .try_wait()
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err(sink.error("exited early"));
        }
        if Instant::now() > deadline {
            return Err(sink.error(&format!(
                "did not create its memif socket {} within {READY_TIMEOUT:?}",
                children.socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(SETTLE);

    let source_args = tcp_args(config, false, &children.socket);
    let mut source = Peer::spawn("source", &source_args, &mut children)?;
    sink.wait_for_line("listening on", READY_TIMEOUT)
        .map_err(|e| format!("{e}\n(beside it, the uwarp source{})", source.tail()))?;

    // The source stops its port once both ends' cores stopped polling
    // (or one of them failed before: its exit then tells the rest).
    let limit = config.timeout + READY_TIMEOUT;
    let _ = sink
        .wait_for_line(CORES_STOPPED, limit)
        .and_then(|()| source.wait_for_line(CORES_STOPPED, limit));
    drop(source.stdin.take());
    let statuses = wait_all(&mut children.running, limit).map_err(|e| {
        let (sink, source) = (sink.tail(), source.tail());
        format!("{e}\n(the uwarp sink{sink})\n(the uwarp source{source})")
    })?;
    let (sink, source) = (sink.report(statuses[0])?, source.report(statuses[1])?);
    for (name, report) in [("sink", &sink), ("source", &source)] {
        if report.end != "closed" {
            return Err(format!(
                "the uwarp {name}'s connection ended {}, not closed",
                report.end
            ));
        }
    }
    if source.sent != config.bytes || sink.received != config.bytes {
        return Err(format!(
            "the uwarp source sent {} B and the sink received {} B, not {} B",
            source.sent, sink.received, config.bytes
        ));
    }
    if source.sha256_sent != sink.sha256_received {
        return Err(format!(
            "SHA-256 mismatch over uwarp: the source sent {}, the sink received {}",
            source.sha256_sent, sink.sha256_received
        ));
    }
    let transfer = Transfer {
        seconds: sink.seconds.max(source.seconds),
        segments: source.segments_sent,
    };
    Ok((transfer, source.retransmissions, source.sha256_sent))
}

/// Waits for every child to exit, within `timeout`; their statuses.
fn wait_all(
    children: &mut [Child],
    timeout: Duration,
) -> Result<Vec<std::process::ExitStatus>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let statuses = children
            .iter_mut()
            .map(|child| child.try_wait())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        if let Some(all) = statuses.iter().copied().collect::<Option<Vec<_>>>() {
            return Ok(all);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the uwarp transfer did not finish within {timeout:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The kernel transfer over loopback: its time and the system's
/// `OutSegs` delta, and the digest of what moved.
fn kernel(bytes: u64) -> std::io::Result<(Transfer, String)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut tx = TcpStream::connect(listener.local_addr()?)?;
    let (mut rx, _) = listener.accept()?;
    let block = pattern_block();
    // Any window of KERNEL_CHUNK octets starting inside the first block.
    let pattern = block.repeat(KERNEL_CHUNK / block.len() + 2);
    let before = out_segs()?;
    let start = Instant::now();
    let sink = std::thread::spawn(move || -> std::io::Result<(u64, [u8; 32], Instant)> {
        let mut buf = vec![0u8; KERNEL_CHUNK];
        let (mut received, mut hash) = (0u64, Sha256::new());
        loop {
            let n = rx.read(&mut buf)?;
            if n == 0 {
                return Ok((received, hash.finalize().into(), Instant::now()));
            }
            hash.update(&buf[..n]);
            received += n as u64;
        }
    });
    let source = std::thread::spawn(move || -> std::io::Result<[u8; 32]> {
        let (mut sent, mut hash) = (0u64, Sha256::new());
        while sent < bytes {
            let offset = (sent % block.len() as u64) as usize;
            let len = (bytes - sent).min(KERNEL_CHUNK as u64) as usize;
            let chunk = &pattern[offset..offset + len];
            tx.write_all(chunk)?;
            hash.update(chunk);
            sent += len as u64;
        }
        tx.shutdown(Shutdown::Write)?;
        Ok(hash.finalize().into())
    });
    let sent = source.join().map_err(|_| panicked("source"))??;
    let (received, digest, end) = sink.join().map_err(|_| panicked("sink"))??;
    let segments = out_segs()?.saturating_sub(before);
    if received != bytes || digest != sent {
        return Err(std::io::Error::other(format!(
            "the sink received {received} B with SHA-256 {}, the source sent {bytes} B with {}",
            hex(&digest),
            hex(&sent)
        )));
    }
    let transfer = Transfer {
        seconds: end.duration_since(start).as_secs_f64(),
        segments,
    };
    Ok((transfer, hex(&digest)))
}

fn panicked(thread: &str) -> std::io::Error {
    std::io::Error::other(format!("the kernel {thread} thread panicked"))
}

/// `Tcp: OutSegs` of `/proc/net/snmp`: segments the whole system sent.
fn out_segs() -> std::io::Result<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp")?;
    parse_out_segs(&snmp).ok_or_else(|| std::io::Error::other("no Tcp OutSegs in /proc/net/snmp"))
}

/// `OutSegs` from the two `Tcp:` lines (names, then values) of `snmp`.
fn parse_out_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter_map(|line| line.strip_prefix("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let index = names
        .split_whitespace()
        .position(|name| name == "OutSegs")?;
    values.split_whitespace().nth(index)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_segs_is_read_from_the_tcp_lines() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm ActiveOpens InSegs OutSegs RetransSegs\n\
                    Tcp: 1 12 3400 5600 7\nUdp: InDatagrams\nUdp: 9\n";
        assert_eq!(parse_out_segs(snmp), Some(5600));
        assert_eq!(parse_out_segs("Udp: InDatagrams\nUdp: 9\n"), None);
    }

    #[test]
    fn rates_follow_bytes_segments_and_seconds() {
        let transfer = Transfer {
            seconds: 2.0,
            segments: 1000,
        };
        assert_eq!(transfer.gbps(1_000_000_000), 4.0);
        assert_eq!(transfer.pps(), 500.0);
    }
}
