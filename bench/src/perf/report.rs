//! The numbers a perf run reports, as text or as JSON with the field
//! names every subcommand shares: `bw_gbps`, `msg_rate`, `lat_p50_us`,
//! `lat_p99_us` (and `lat_p90_us`, `lat_p999_us`, `lat_max_us`),
//! `setup_per_s` where measured, and `calibrate` with `memcpy_gbps` and
//! `crc32c_gbps`.

use serde_json::{json, Value};

use super::calibrate::Calibration;
use super::Workload;

/// Latency percentiles (from hdrhistogram), one way: half a round trip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Median, in microseconds.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// The largest.
    pub max_us: f64,
}

/// One transport's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Payload bandwidth in gigabits per second.
    pub bw_gbps: f64,
    /// Messages per second.
    pub msg_rate: f64,
    /// The latency run.
    pub latency: Latency,
    /// Connections set up per second, when measured.
    pub setup_per_s: Option<f64>,
}

impl Measurement {
    fn to_json(self) -> Value {
        let l = self.latency;
        json!({
            "bw_gbps": self.bw_gbps,
            "msg_rate": self.msg_rate,
            "lat_p50_us": l.p50_us,
            "lat_p90_us": l.p90_us,
            "lat_p99_us": l.p99_us,
            "lat_p999_us": l.p999_us,
            "lat_max_us": l.max_us,
            "setup_per_s": self.setup_per_s,
        })
    }
}

impl Calibration {
    fn to_json(self) -> Value {
        json!({
            "memcpy_gbps": self.memcpy_gbps,
            "crc32c_gbps": self.crc32c_gbps,
            "copy_crc_gbps": self.copy_crc_gbps(),
        })
    }
}

/// What a run measured: each transport it ran, and the calibration.
#[derive(Debug, Clone)]
pub struct Report {
    /// What was measured.
    pub workload: Workload,
    /// Each transport's name and result, in the order they ran.
    pub runs: Vec<(&'static str, Measurement)>,
    /// The machine's single-core copy and CRC rates.
    pub calibrate: Calibration,
}

impl Report {
    fn find(&self, name: &str) -> Option<&Measurement> {
        self.runs.iter().find(|(n, _)| *n == name).map(|(_, m)| m)
    }

    /// The ratios dpdk/socket, when both ran: bandwidth, message rate,
    /// median latency, setup rate.
    fn ratios(&self) -> Option<[(&'static str, f64); 4]> {
        let (d, s) = (self.find("dpdk")?, self.find("socket")?);
        let setup = match (d.setup_per_s, s.setup_per_s) {
            (Some(d), Some(s)) => d / s,
            _ => f64::NAN,
        };
        Some([
            ("bw", d.bw_gbps / s.bw_gbps),
            ("msg_rate", d.msg_rate / s.msg_rate),
            ("lat_p50", d.latency.p50_us / s.latency.p50_us),
            ("setup", setup),
        ])
    }

    /// One JSON object.
    pub fn to_json(&self) -> Value {
        let w = &self.workload;
        let mut out = json!({
            "op": w.op.name(),
            "size": w.size,
            "iters": w.iters,
            "tx_depth": w.tx_depth,
            "latency_size": w.latency_size,
            "crc": w.crc,
            "calibrate": self.calibrate.to_json(),
        });
        for (name, m) in &self.runs {
            let mut run = m.to_json();
            run["bw_fraction_of_copy_crc"] = json!(m.bw_gbps / self.calibrate.copy_crc_gbps());
            out[*name] = run;
        }
        if let Some(ratios) = self.ratios() {
            let mut object = json!({});
            for (name, value) in ratios {
                object[name] = if value.is_finite() {
                    json!(value)
                } else {
                    Value::Null
                };
            }
            out["ratios"] = object;
        }
        out
    }

    /// A table for people.
    pub fn to_text(&self) -> String {
        let w = &self.workload;
        let mut out = format!(
            "{} {} B x {} (tx depth {}, CRC {}); latency: {} B RDMA Write ping-pong, one way\n",
            w.op.name(),
            w.size,
            w.iters,
            w.tx_depth,
            if w.crc { "on" } else { "off" },
            w.latency_size,
        );
        out += &format!(
            "{:<9} {:>8} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
            "transport",
            "Gbit/s",
            "msg/s",
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9",
            "max us",
            "setup/s"
        );
        for (name, m) in &self.runs {
            let l = m.latency;
            let setup = m
                .setup_per_s
                .map_or_else(|| "-".to_string(), |s| format!("{s:.0}"));
            out += &format!(
                "{name:<9} {:>8.2} {:>11.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9}\n",
                m.bw_gbps, m.msg_rate, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us, setup
            );
        }
        let c = &self.calibrate;
        out += &format!(
            "calibrate: memcpy {:.1} Gbit/s, CRC32c {:.1} Gbit/s, copy+CRC {:.1} Gbit/s per core\n",
            c.memcpy_gbps,
            c.crc32c_gbps,
            c.copy_crc_gbps()
        );
        for (name, m) in &self.runs {
            out += &format!(
                "{name}: bandwidth is {:.2} of copy+CRC\n",
                m.bw_gbps / c.copy_crc_gbps()
            );
        }
        if let Some(ratios) = self.ratios() {
            out += "dpdk/socket:";
            for (name, value) in ratios {
                out += &format!(" {name} {value:.2}");
            }
            out += "\n";
        }
        out
    }
}
