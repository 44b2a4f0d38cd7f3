//! The numbers a perf run reports, as text or as JSON with the field
//! names every subcommand shares: `bw_gbps`, `msg_rate`, `lat_p50_us`,
//! `lat_p99_us` (and `lat_p90_us`, `lat_p999_us`, `lat_max_us`), null
//! where a run does not measure them. Loopback reports ([`Report`]) add
//! `setup_per_s` and `calibrate` with `memcpy_gbps` and `crc32c_gbps`;
//! two-host reports ([`RunReport`]) one entry of `results` per size.

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use uwarp::{HostReport, QpCounters, Rtr};

use super::calibrate::Calibration;
use super::cpus::CpuUse;
use super::host;
use super::session::{Outcome, Phase};
use super::{HostReports, LinkOptions, Metric, Mode, Workload};

/// Latency percentiles (from hdrhistogram), one way: half a round trip
/// (the whole round trip for RDMA Reads).
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

impl Latency {
    /// The percentiles of samples recorded in nanoseconds.
    pub fn from_histogram(histogram: &Histogram<u64>) -> Self {
        let at = |q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
        Latency {
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: histogram.max() as f64 / 1e3,
        }
    }

    /// p50, p90, p99, p99.9 and the maximum, in that order.
    pub fn values(self) -> [f64; 5] {
        [
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
        ]
    }

    /// The latency [`Latency::values`] gave.
    pub fn from_values([p50_us, p90_us, p99_us, p999_us, max_us]: [f64; 5]) -> Self {
        Latency {
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us,
        }
    }
}

/// The JSON names of [`Latency::values`].
const LATENCY_FIELDS: [&str; 5] = [
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
];

/// The fields every perf report shares: `bw_gbps` and `msg_rate` from
/// `bandwidth` (Gbit/s, messages/s), the `lat_*_us` from `latency`; null
/// where not measured.
fn fields(bandwidth: Option<(f64, f64)>, latency: Option<Latency>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("bw_gbps".into(), json!(bandwidth.map(|b| b.0)));
    out.insert("msg_rate".into(), json!(bandwidth.map(|b| b.1)));
    let values = latency.map(Latency::values);
    for (i, name) in LATENCY_FIELDS.into_iter().enumerate() {
        out.insert(name.into(), json!(values.map(|v| v[i])));
    }
    out
}

/// The header of [`columns`].
fn columns_header() -> String {
    format!(
        "{:>8} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "Gbit/s", "msg/s", "p50 us", "p90 us", "p99 us", "p99.9", "max us"
    )
}

/// The columns every perf table shares, `-` where not measured.
fn columns(bandwidth: Option<(f64, f64)>, latency: Option<Latency>) -> String {
    let (bw, rate) = match bandwidth {
        Some((bw, rate)) => (format!("{bw:.2}"), format!("{rate:.0}")),
        None => ("-".into(), "-".into()),
    };
    let mut out = format!("{bw:>8} {rate:>11}");
    match latency {
        Some(latency) => {
            for value in latency.values() {
                out += &format!(" {value:>8.2}");
            }
        }
        None => out += &format!(" {:>8}", "-").repeat(5),
    }
    out
}

/// One transport's result.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The bandwidth run: one measurement per message size.
    pub bandwidth: Vec<Phase>,
    /// The latency run: one measurement per message size.
    pub latency: Vec<Phase>,
    /// Connections set up per second, when measured.
    pub setup_per_s: Option<f64>,
    /// What the client's queue pairs of the bandwidth and latency runs
    /// carried.
    pub counters: QpCounters,
    /// What the server's carried: where a Write or Send run's data was
    /// received, so where out-of-order placement and the reassembly
    /// buffer show.
    pub server_counters: QpCounters,
    /// What each end's cores counted over the whole run, on the DPDK
    /// transport (read when its devices closed).
    pub hosts: Option<HostReports>,
    /// The core-to-core round trip just before the run, in nanoseconds
    /// (see [`core_to_core_ns`](crate::perf::core_to_core_ns)).
    pub core_to_core_ns: Option<f64>,
    /// The same just after it: the host may have moved the CPUs while
    /// it ran.
    pub core_to_core_after_ns: Option<f64>,
}

impl Measurement {
    /// Gbit/s and messages per second, and the latency, of a run at one
    /// size each (`None` for a sweep).
    pub fn single(&self) -> Option<((f64, f64), Latency)> {
        match (&self.bandwidth[..], &self.latency[..]) {
            ([bandwidth], [latency]) => Some((bandwidth.bandwidth()?, latency.summary.latency?)),
            _ => None,
        }
    }

    /// The highest bandwidth of the run and its message size.
    fn peak(&self) -> Option<(usize, f64)> {
        let rates = self.bandwidth.iter();
        rates
            .filter_map(|p| Some((p.size, p.bandwidth()?.0)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// One entry per message size of either run: its bandwidth and its
    /// latency, null where that run did not measure the size.
    fn results(&self) -> Vec<SizeResult> {
        let mut sizes: Vec<usize> = self
            .bandwidth
            .iter()
            .chain(&self.latency)
            .map(|p| p.size)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
            .into_iter()
            .map(|size| {
                let bandwidth = phase_at(&self.bandwidth, size).and_then(Phase::bandwidth);
                let latency = phase_at(&self.latency, size).and_then(|p| p.summary.latency);
                (size, bandwidth, latency)
            })
            .collect()
    }

    /// The numbers (null in a sweep, whose `results` hold them per
    /// size), the client's counters as `counters` and the server's as
    /// `server_counters`, each with its end's `host` on the DPDK
    /// transport.
    fn to_json(&self) -> Value {
        let single = self.single();
        let mut out = fields(single.map(|s| s.0), single.map(|s| s.1));
        let results: Vec<Value> = self
            .results()
            .into_iter()
            .map(|(size, bandwidth, latency)| {
                let mut out = Map::new();
                out.insert("size".into(), json!(size));
                out.extend(fields(bandwidth, latency));
                Value::Object(out)
            })
            .collect();
        out.insert("results".into(), json!(results));
        out.insert("setup_per_s".into(), json!(self.setup_per_s));
        out.insert("core_to_core_ns".into(), json!(self.core_to_core_ns));
        out.insert(
            "core_to_core_after_ns".into(),
            json!(self.core_to_core_after_ns),
        );
        let mut client = counters_json(&self.counters);
        let mut server = counters_json(&self.server_counters);
        if let Some(hosts) = &self.hosts {
            client["host"] = host::json(&hosts.client);
            server["host"] = host::json(&hosts.server);
        }
        out.insert("counters".into(), client);
        out.insert("server_counters".into(), server);
        Value::Object(out)
    }
}

/// A message size, its bandwidth (Gbit/s, messages per second) and its
/// latency, each where measured.
type SizeResult = (usize, Option<(f64, f64)>, Option<Latency>);

/// The measurement of `size` among `phases`.
fn phase_at(phases: &[Phase], size: usize) -> Option<&Phase> {
    phases.iter().find(|p| p.size == size)
}

impl Calibration {
    /// The fields of `calibrate` in every JSON report.
    pub fn to_json(self) -> Value {
        json!({
            "memcpy_gbps": self.memcpy_gbps,
            "crc32c_gbps": self.crc32c_gbps,
            "copy_crc_gbps": self.copy_crc_gbps(),
            "core_to_core_ns": self.core_to_core_ns,
        })
    }

    /// The rates in words, and the round trip when measured.
    pub fn to_text(self) -> String {
        let mut out = format!(
            "memcpy {:.1} Gbit/s, CRC32c {:.1} Gbit/s, copy+CRC {:.1} Gbit/s per core \
             (64 KiB blocks through 64 MiB)",
            self.memcpy_gbps,
            self.crc32c_gbps,
            self.copy_crc_gbps()
        );
        if let Some(ns) = self.core_to_core_ns {
            out += &format!(", {}", core_to_core_text(ns));
        }
        out
    }
}

/// A core-to-core round trip in words.
fn core_to_core_text(ns: f64) -> String {
    format!("core-to-core round trip {ns:.0} ns")
}

/// How far apart the round trips before and after a run may be before
/// the report says the host moved the CPUs while it ran.
const MOVED_FACTOR: f64 = 2.0;

/// The round trips before and after a run in words, saying so when they
/// differ by more than [`MOVED_FACTOR`]: the run then met both
/// placements of the CPUs, and its numbers mix them.
fn round_trips_text(before: f64, after: f64) -> String {
    let mut out = format!(
        "{} before the run, {after:.0} ns after",
        core_to_core_text(before)
    );
    if before.max(after) > MOVED_FACTOR * before.min(after) {
        out += ": the host moved the CPUs while it ran";
    }
    out
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

    /// The ratios dpdk/socket, when both ran at one size: bandwidth,
    /// message rate, median latency, setup rate.
    fn ratios(&self) -> Option<[(&'static str, f64); 4]> {
        let (d, s) = (self.find("dpdk")?, self.find("socket")?);
        let (((d_bw, d_rate), d_latency), ((s_bw, s_rate), s_latency)) = (d.single()?, s.single()?);
        let setup = match (d.setup_per_s, s.setup_per_s) {
            (Some(d), Some(s)) => d / s,
            _ => f64::NAN,
        };
        Some([
            ("bw", d_bw / s_bw),
            ("msg_rate", d_rate / s_rate),
            ("lat_p50", d_latency.p50_us / s_latency.p50_us),
            ("setup", setup),
        ])
    }

    /// Whether the runs went through a sweep of sizes (`-a`).
    fn sweep(&self) -> bool {
        let w = &self.workload;
        w.sizes.len() > 1 || w.latency_sizes.len() > 1
    }

    /// One JSON object.
    pub fn to_json(&self) -> Value {
        let w = &self.workload;
        let one = |sizes: &[usize]| match sizes {
            [size] => json!(size),
            _ => Value::Null,
        };
        let mut out = json!({
            "op": w.op.name(),
            "size": one(&w.sizes),
            "sizes": w.sizes,
            "iters": w.iters,
            "tx_depth": w.tx_depth,
            "latency_size": one(&w.latency_sizes),
            "latency_sizes": w.latency_sizes,
            "latency_iters": w.latency_iters,
            "crc": w.crc,
            "mtu": w.link.mtu,
            "impair_rx": w.link.impair_rx.to_string(),
            "zero_copy_from": w.link.zero_copy_from,
            "calibrate": self.calibrate.to_json(),
        });
        for (name, m) in &self.runs {
            let mut run = m.to_json();
            let peak = m.peak().map(|(_, bw)| bw / self.calibrate.copy_crc_gbps());
            run["bw_fraction_of_copy_crc"] = json!(peak);
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

    /// A table for people: the workload, a row per transport (per
    /// transport and size, for a sweep), the calibration, the ratios of
    /// `compare`, and a line saying what the numbers mean; with
    /// `verbose`, each end's queue pair and host counters too.
    pub fn to_text(&self, verbose: bool) -> String {
        let w = &self.workload;
        let each = if w.sizes.len() > 1 { " each" } else { "" };
        let mut out = format!(
            "{} {} x {}{each} (tx depth {}, CRC {}); latency: {} RDMA Write ping-pong, one way\n",
            w.op.name(),
            sizes_text(&w.sizes),
            w.iters,
            w.tx_depth,
            on_off(w.crc),
            sizes_text(&w.latency_sizes),
        );
        if w.link != LinkOptions::default() {
            let zero_copy = w
                .link
                .zero_copy_from
                .map_or_else(|| "off".to_string(), |from| format!("from {from} B"));
            out += &format!(
                "dpdk link: MTU {}, receive impairment {}, zero-copy transmit {zero_copy}\n",
                w.link.mtu, w.link.impair_rx
            );
        }
        if self.sweep() {
            out += &self.sweep_table();
        } else {
            out += &self.table();
        }
        let c = &self.calibrate;
        out += &format!("calibrate: {}\n", c.to_text());
        for (name, m) in &self.runs {
            let (size, bw) = m.peak().unwrap_or_default();
            let fraction = bw / c.copy_crc_gbps();
            if self.sweep() {
                out += &format!("{name}: peak bandwidth ({size} B) is {fraction:.2} of copy+CRC");
            } else {
                out += &format!("{name}: bandwidth is {fraction:.2} of copy+CRC");
            }
            if let (Some(before), Some(after)) = (m.core_to_core_ns, m.core_to_core_after_ns) {
                out += &format!(" ({})", round_trips_text(before, after));
            }
            out += "\n";
        }
        for (name, m) in self.runs.iter().filter(|_| verbose) {
            for (end, counters) in [("client", &m.counters), ("server", &m.server_counters)] {
                out += &counters_text(&format!("{name} {end}"), counters);
            }
            if let Some(hosts) = &m.hosts {
                out += &format!("{name} client {}", host::text(&hosts.client));
                out += &format!("{name} server {}", host::text(&hosts.server));
            }
        }
        if let Some(ratios) = self.ratios() {
            out += "dpdk/socket:";
            for (name, value) in ratios {
                // 0/0 for zero-length messages' bandwidth: no ratio.
                if value.is_finite() {
                    out += &format!(" {name} {value:.2}");
                } else {
                    out += &format!(" {name} -");
                }
            }
            out += "\n";
        }
        out += MEANING;
        if !verbose {
            out += " (-v: the counters)";
        }
        out += "\n";
        out
    }

    /// The table of runs at one size: a row per transport.
    fn table(&self) -> String {
        let mut out = format!("{:<9} {} {:>9}\n", "transport", columns_header(), "setup/s");
        for (name, m) in &self.runs {
            let setup = m
                .setup_per_s
                .map_or_else(|| "-".to_string(), |s| format!("{s:.0}"));
            let single = m.single();
            let numbers = columns(single.map(|s| s.0), single.map(|s| s.1));
            out += &format!("{name:<9} {numbers} {setup:>9}\n");
        }
        out
    }

    /// The table of a sweep: a row per transport and size, then the
    /// setup rates.
    fn sweep_table(&self) -> String {
        let mut out = format!("{:<9} {:>9} {}\n", "transport", "size", columns_header());
        for (name, m) in &self.runs {
            for (size, bandwidth, latency) in m.results() {
                out += &format!("{name:<9} {size:>9} {}\n", columns(bandwidth, latency));
            }
        }
        let setups: Vec<String> = self
            .runs
            .iter()
            .filter_map(|(name, m)| Some(format!("{name} {:.0}", m.setup_per_s?)))
            .collect();
        if !setups.is_empty() {
            out += &format!("setup/s: {}\n", setups.join(", "));
        }
        out
    }
}

/// Message sizes in words: `65536 B`, or `2 to 8388608 B` for a sweep.
fn sizes_text(sizes: &[usize]) -> String {
    match sizes {
        [first, .., last] => format!("{first} to {last} B"),
        [size] => format!("{size} B"),
        [] => "no".into(),
    }
}

/// What the numbers of a loopback table mean, in one line.
const MEANING: &str = "Gbit/s, msg/s: the bandwidth run; p50 to max: one-way latency in us; \
     setup/s: connections per second; copy+CRC: one core's copy and checksum rate, a \
     receiver's bound";

/// A run of the two-host modes as one side reports it: the numbers the
/// client measured, on both sides.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The test.
    pub mode: Mode,
    /// `client` or `server`.
    pub role: &'static str,
    /// The transport's name.
    pub transport: &'static str,
    /// What the run did.
    pub outcome: Outcome,
    /// What this process's cores counted, on the DPDK transport (read
    /// when the device closed after the run).
    pub host: Option<HostReport>,
    /// This side's busy threads and their CPUs.
    pub cpus: CpuUse,
}

/// An RTR's name.
fn rtr_name(rtr: Option<Rtr>) -> &'static str {
    match rtr {
        None => "none",
        Some(Rtr::Write) => "write",
        Some(Rtr::Read) => "read",
        Some(Rtr::Send) => "send",
    }
}

impl RunReport {
    /// One JSON object: the run's settings, and one entry of `results`
    /// per message size.
    pub fn to_json(&self) -> Value {
        let o = &self.outcome;
        let n = o.negotiated;
        let results: Vec<Value> = o
            .phases
            .iter()
            .map(|phase| {
                let mut out = Map::new();
                out.insert("size".into(), json!(phase.size));
                out.insert("iters".into(), json!(phase.summary.messages()));
                out.insert("seconds".into(), json!(phase.summary.seconds));
                out.extend(fields(phase.bandwidth(), phase.summary.latency));
                Value::Object(out)
            })
            .collect();
        json!({
            "mode": self.mode.name(),
            "role": self.role,
            "transport": self.transport,
            "local": o.local.to_string(),
            "peer": o.peer.to_string(),
            "qps": o.qps,
            "tx_depth": o.tx_depth,
            "mpa": {
                "revision": n.revision as u8,
                "crc": n.crc,
                "markers_tx": n.markers_tx,
                "markers_rx": n.markers_rx,
                "rtr": rtr_name(n.rtr),
            },
            "verified": true,
            "verification": self.mode.verification(),
            "results": results,
            "counters": counters_json(&o.counters),
            "host": self.host.as_ref().map(host::json),
            "cpus": self.cpus.to_json(),
        })
    }

    /// A table for people.
    pub fn to_text(&self) -> String {
        let o = &self.outcome;
        let n = o.negotiated;
        let depth = match self.mode.metric {
            Metric::Bandwidth => format!(", tx depth {}", o.tx_depth),
            Metric::Latency => String::new(),
        };
        let mut out = format!(
            "{} {} over {}: {} <-> {}, {} QP{depth}, MPA rev {}, CRC {}, Markers {}/{}, RTR {}\n",
            self.mode.name(),
            self.role,
            self.transport,
            o.local,
            o.peer,
            o.qps,
            n.revision as u8,
            on_off(n.crc),
            on_off(n.markers_tx),
            on_off(n.markers_rx),
            rtr_name(n.rtr),
        );
        out += &format!(
            "{:>9} {:>10} {:>8} {}\n",
            "size",
            "iters",
            "seconds",
            columns_header()
        );
        for phase in &o.phases {
            out += &format!(
                "{:>9} {:>10} {:>8.3} {}\n",
                phase.size,
                phase.summary.messages(),
                phase.summary.seconds,
                columns(phase.bandwidth(), phase.summary.latency)
            );
        }
        out += &format!(
            "data verified: {}; numbers measured by the client\n",
            self.mode.verification()
        );
        out += &self.cpus.to_text();
        out += &counters_text("this side", &o.counters);
        if let Some(report) = &self.host {
            out += &host::text(report);
        }
        out
    }
}

/// This side's queue pair counters as JSON, the TCP ones under the names
/// `uwarp-perf tcp` gives them too.
pub(super) fn counters_json(c: &QpCounters) -> Value {
    json!({
        "fpdus_sent": c.fpdus_sent,
        "fpdus_sent_by_reference": c.fpdus_sent_by_reference,
        "fpdus_written_through": c.fpdus_written_through,
        "fpdus_received": c.fpdus_received,
        "bytes_placed": c.bytes_placed,
        "segments_placed_out_of_order": c.segments_placed_out_of_order,
        "fpdus_placed_out_of_order": c.fpdus_placed_out_of_order,
        "bytes_placed_out_of_order": c.bytes_placed_out_of_order,
        "bytes_reassembled": c.bytes_reassembled,
        "fpdus_split": c.fpdus_split,
        "crc_errors": c.crc_errors,
        "terminates_sent": c.terminates_sent,
        "terminates_received": c.terminates_received,
        "retransmissions": c.retransmissions,
        "timeouts": c.timeouts,
        "spurious_timeouts": c.spurious_timeouts,
        "fast_recoveries": c.fast_recoveries,
        "spurious_recoveries": c.spurious_recoveries,
        "dsacks_received": c.dsacks_received,
        "dsacks_sent": c.dsacks_sent,
        "tail_loss_probes": c.tail_loss_probes,
        "application_rounds": c.application_rounds,
    })
}

/// The queue pair counters of the side `side` names, two lines for
/// people.
fn counters_text(side: &str, c: &QpCounters) -> String {
    format!("{side}: {}{side} {}", engine_text(c), tcp_text(c))
}

/// What a side's queue pairs carried, and where received data went, one
/// line for people.
fn engine_text(c: &QpCounters) -> String {
    format!(
        "FPDUs sent {} ({} by reference, {} written through) received {}, placed {} B ({} B out of order in {} \
         segments), reassembled {} B, FPDUs split {}, CRC errors {}, Terminates sent {} \
         received {}, rounds on the application's threads {}\n",
        c.fpdus_sent,
        c.fpdus_sent_by_reference,
        c.fpdus_written_through,
        c.fpdus_received,
        c.bytes_placed,
        c.bytes_placed_out_of_order,
        c.segments_placed_out_of_order,
        c.bytes_reassembled,
        c.fpdus_split,
        c.crc_errors,
        c.terminates_sent,
        c.terminates_received,
        c.application_rounds,
    )
}

/// The TCP loss-recovery counters, one line for people.
fn tcp_text(c: &QpCounters) -> String {
    format!(
        "TCP: retransmissions {} (timeouts {} ({} spurious)), fast recoveries {} \
         ({} spurious, undone), D-SACKs received {} sent {}, tail loss probes {}\n",
        c.retransmissions,
        c.timeouts,
        c.spurious_timeouts,
        c.fast_recoveries,
        c.spurious_recoveries,
        c.dsacks_received,
        c.dsacks_sent,
        c.tail_loss_probes,
    )
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::round_trips_text;

    #[test]
    fn round_trips_that_moved_during_a_run_are_called_out() {
        assert_eq!(
            round_trips_text(63.0, 65.4),
            "core-to-core round trip 63 ns before the run, 65 ns after"
        );
        for (before, after) in [(63.0, 339.0), (336.0, 63.0)] {
            assert!(
                round_trips_text(before, after).ends_with(": the host moved the CPUs while it ran"),
                "{before} {after}"
            );
        }
        // Slow on both sides: the run met one placement only.
        assert!(!round_trips_text(327.0, 339.0).contains("moved"));
    }
}
