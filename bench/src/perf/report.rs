//! The numbers a loopback run reports, as text or as one JSON object with
//! the field names the issue tracker fixed for every subcommand
//! (`bw_gbps`, `msg_rate`, `lat_p50_us`, `lat_p99_us`).

use serde_json::{json, Value};

use super::Workload;

/// One transport's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Payload bandwidth in gigabits per second.
    pub bw_gbps: f64,
    /// Messages per second.
    pub msg_rate: f64,
    /// Median one-way latency in microseconds (half a round trip).
    pub lat_p50_us: f64,
    /// 99th percentile one-way latency in microseconds.
    pub lat_p99_us: f64,
}

impl Measurement {
    fn to_json(self) -> Value {
        json!({
            "bw_gbps": self.bw_gbps,
            "msg_rate": self.msg_rate,
            "lat_p50_us": self.lat_p50_us,
            "lat_p99_us": self.lat_p99_us,
        })
    }
}

/// A whole run: uwarp and the plain-TCP baseline.
#[derive(Debug, Clone)]
pub struct Report {
    /// What was measured.
    pub workload: Workload,
    /// uwarp over the socket transport.
    pub uwarp: Measurement,
    /// The same workload over plain kernel TCP.
    pub tcp: Measurement,
}

impl Report {
    /// One JSON object.
    pub fn to_json(&self) -> Value {
        let w = &self.workload;
        json!({
            "op": w.op.name(),
            "size": w.size,
            "iters": w.iters,
            "tx_depth": w.tx_depth,
            "crc": w.crc,
            "transport": "socket",
            "socket": self.uwarp.to_json(),
            "tcp_baseline": self.tcp.to_json(),
            "bw_ratio": self.uwarp.bw_gbps / self.tcp.bw_gbps,
            "lat_p50_ratio": self.uwarp.lat_p50_us / self.tcp.lat_p50_us,
        })
    }

    /// A table for people.
    pub fn to_text(&self) -> String {
        let w = &self.workload;
        let row = |name: &str, m: &Measurement| {
            format!(
                "{name:<22} {:>10.2} {:>12.0} {:>10.2} {:>10.2}\n",
                m.bw_gbps, m.msg_rate, m.lat_p50_us, m.lat_p99_us
            )
        };
        let mut out = format!(
            "{} {} B x {} (tx depth {}, CRC {})\n{:<22} {:>10} {:>12} {:>10} {:>10}\n",
            w.op.name(),
            w.size,
            w.iters,
            w.tx_depth,
            if w.crc { "on" } else { "off" },
            "transport",
            "Gb/s",
            "msg/s",
            "p50 us",
            "p99 us"
        );
        out += &row("uwarp socket", &self.uwarp);
        out += &row("kernel TCP (baseline)", &self.tcp);
        out += &format!(
            "ratio uwarp/TCP: bandwidth {:.2}, median latency {:.2}\n",
            self.uwarp.bw_gbps / self.tcp.bw_gbps,
            self.uwarp.lat_p50_us / self.tcp.lat_p50_us
        );
        out
    }
}
