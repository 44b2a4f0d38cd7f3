//! `uwarp-perf tcp`: uwarp's TCP over DPDK against any TCP peer, like
//! iperf: a [`Role`] (sink, source or echo) on a connection uwarp opens
//! (`--connect`) or accepts (`--listen`), with bytes, Gbit/s,
//! retransmissions and SHA-256 digests of both directions printed, so the
//! two ends of a transfer can be compared.

pub mod compare;
pub mod roles;
pub mod teardown;

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use uwarp::HostReport;
use uwarp_control::TcpHost;
use uwarp_dataplane::runtime::Impairment;
use uwarp_dataplane::tcp::End;
use uwarp_stack::tcp::CongestionControl;

use crate::port::PortHost;

pub use roles::{pattern, pattern_block, Report, Role, RoleApp};
pub use teardown::Teardown;

/// Which side opens the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    /// Accept connections on this port.
    Listen(u16),
    /// Connect to this peer.
    Connect(SocketAddrV4),
}

/// What `uwarp-perf tcp` runs.
#[derive(Clone, Debug)]
pub struct TcpRun {
    /// The role of each connection.
    pub role: Role,
    /// Listen or connect.
    pub open: Open,
    /// Octets a source sends.
    pub bytes: u64,
    /// Connections to serve (listen) or open (connect), one after another.
    pub connections: usize,
    /// The DPDK port, our addresses on it, and where the host's control
    /// and dataplane cores run.
    pub host: PortHost,
    /// Nagle's algorithm.
    pub nagle: bool,
    /// Congestion control.
    pub congestion: CongestionControl,
    /// Give up on a connection after this long.
    pub timeout: Duration,
    /// The port's impairment stage (off by default).
    pub impairment: Impairment,
    /// How long the host stays up after the last connection ended, so
    /// the final ACK of an active close (sent on entering TIME-WAIT, and
    /// again for a retransmitted FIN) reaches the peer before the port
    /// goes down.
    pub linger: Duration,
    /// What happens between the cores' stop and the port's.
    pub teardown: Teardown,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct TcpOutcome {
    /// One report per connection, in the order they ended.
    pub reports: Vec<Report>,
    /// The host's counters.
    pub host: HostReport,
}

/// Runs the transfer(s) and returns what they measured.
pub fn run(config: &TcpRun) -> Result<TcpOutcome, String> {
    if config.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    let (eal, device, mut host_config) = config.host.open()?;
    host_config.tcp.nagle = config.nagle;
    host_config.tcp.congestion = config.congestion;
    host_config.impairment = config.impairment;
    let host = TcpHost::start(eal, device, host_config).map_err(|e| e.to_string())?;
    let (report_tx, reports) = crossbeam_channel::unbounded();
    let block = Arc::new(pattern_block());
    let app = {
        let (role, bytes) = (config.role, config.bytes);
        move || RoleApp::new(role, bytes, Arc::clone(&block), report_tx.clone())
    };
    let mut reports_out = Vec::with_capacity(config.connections);
    let result = transfer(&host, config, app, &reports, &mut reports_out);
    if result.is_ok() {
        std::thread::sleep(config.linger);
    }
    let host_report = host.shutdown_awaiting(|port| config.teardown.before_port_stop(port));
    result?;
    Ok(TcpOutcome {
        reports: reports_out,
        host: host_report,
    })
}

/// Listens or connects, then collects one report per connection.
fn transfer(
    host: &TcpHost<RoleApp>,
    config: &TcpRun,
    app: impl Fn() -> RoleApp + Clone + Send + 'static,
    reports: &crossbeam_channel::Receiver<Report>,
    out: &mut Vec<Report>,
) -> Result<(), String> {
    if let Open::Listen(port) = config.open {
        let app = app.clone();
        host.listen(port, move |_peer| app())
            .map_err(|e| e.to_string())?;
        // Scripts and tests wait for this line before they connect.
        eprintln!("uwarp-perf: listening on {}:{port}", host.address().ip);
    }
    for _ in 0..config.connections {
        if let Open::Connect(peer) = config.open {
            host.connect(peer, app()).map_err(|e| e.to_string())?;
        }
        let report = reports
            .recv_timeout(config.timeout)
            .map_err(|_| format!("no connection ended within {:?}", config.timeout))?;
        out.push(report);
    }
    Ok(())
}

/// A digest in lower-case hex.
pub(crate) fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn end_name(end: End) -> &'static str {
    match end {
        End::Closed => "closed",
        End::Reset => "reset",
        End::TimedOut => "timed-out",
        End::Unreachable => "unreachable",
        End::NoFreePort => "no-free-port",
        End::Aborted => "aborted",
    }
}

fn gbps(report: &Report) -> f64 {
    let octets = report.sent.max(report.received) as f64;
    if report.seconds > 0.0 {
        octets * 8.0 / report.seconds / 1e9
    } else {
        0.0
    }
}

impl Report {
    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "role": self.role.name(),
            "end": end_name(self.end),
            "bytes_sent": self.sent,
            "bytes_received": self.received,
            "seconds": self.seconds,
            "gbps": gbps(self),
            "segments_sent": self.stats.segments_sent,
            "segments_received": self.stats.segments_received,
            "retransmissions": self.stats.retransmissions,
            "timeouts": self.stats.timeouts,
            "spurious_timeouts": self.stats.spurious_timeouts,
            "fast_recoveries": self.stats.fast_recoveries,
            "spurious_recoveries": self.stats.spurious_recoveries,
            "dsacks_received": self.stats.dsacks_received,
            "dsacks_sent": self.stats.dsacks_sent,
            "tail_loss_probes": self.stats.tail_loss_probes,
            "window_probes": self.stats.window_probes,
            "sha256_sent": hex(&self.sent_sha256),
            "sha256_received": hex(&self.received_sha256),
        })
    }

    /// The report as text.
    pub fn to_text(&self) -> String {
        format!(
            "{} {}: sent {} B, received {} B in {:.3} s ({:.3} Gbit/s), \
             {} retransmissions\n  sha256 sent     {}\n  sha256 received {}\n",
            self.role.name(),
            end_name(self.end),
            self.sent,
            self.received,
            self.seconds,
            gbps(self),
            self.stats.retransmissions,
            hex(&self.sent_sha256),
            hex(&self.received_sha256),
        )
    }
}
