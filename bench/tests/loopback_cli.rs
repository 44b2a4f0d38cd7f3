//! `uwarp-perf loopback` and `compare` end to end: short runs of each
//! operation move their data over the DPDK transport (a net_ring pair in
//! the process) and the socket transport, and report every field of the
//! JSON both share.

mod common;

use common::{perf_refused, perf_stdout, QUICK_LOOPBACK};

fn run(args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(QUICK_LOOPBACK);
    args.push("--json");
    serde_json::from_slice(&perf_stdout(&args)).unwrap()
}

const FIELDS: [&str; 8] = [
    "bw_gbps",
    "msg_rate",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
    "setup_per_s",
];

fn assert_measured(report: &serde_json::Value, transport: &str) {
    for field in FIELDS {
        let value = report[transport][field].as_f64().unwrap_or(0.0);
        assert!(value > 0.0, "{transport} {field} = {value}");
    }
    for field in ["memcpy_gbps", "crc32c_gbps"] {
        assert!(report["calibrate"][field].as_f64().unwrap() > 0.0);
    }
    assert_round_trip(&report[transport], "core_to_core_ns", report);
    assert_round_trip(&report[transport], "core_to_core_after_ns", report);
    assert_round_trip(&report["calibrate"], "core_to_core_ns", report);
}

/// A core-to-core round trip in a report: measured where the ends get a
/// CPU each, null otherwise. It may also be null when other busy
/// threads held both CPUs for the whole measurement (the tests of this
/// binary run side by side); the measurement itself is checked by the
/// perf tool's unit tests.
fn assert_round_trip(object: &serde_json::Value, field: &str, report: &serde_json::Value) {
    let round_trip = object
        .get(field)
        .unwrap_or_else(|| panic!("no {field}: {report}"));
    match round_trip.as_f64() {
        Some(ns) => assert!(two_cpus() && ns > 0.0, "{field}: {report}"),
        None => assert!(round_trip.is_null(), "{field}: {report}"),
    }
}

/// Whether the ends of a loopback run get a CPU each, between which the
/// core-to-core round trip is measured: counted as the perf tool counts
/// them, the CPUs this process may run on.
fn two_cpus() -> bool {
    core_affinity::get_core_ids().is_some_and(|cpus| cpus.len() >= 2)
}

#[test]
fn every_operation_runs_on_the_dpdk_transport() {
    for (op, crc) in [("write", false), ("read", true), ("send", false)] {
        let mut args = vec!["loopback", "--op", op];
        if crc {
            args.push("--crc");
        }
        let report = run(&args);
        assert_eq!(report["op"], op);
        assert_eq!(report["crc"], crc);
        assert_measured(&report, "dpdk");
        assert!(report.get("socket").is_none());
    }
}

#[test]
fn jumbo_frames_and_reordering_on_the_dpdk_link() {
    let report = run(&[
        "loopback",
        "--crc",
        "--mtu",
        "9000",
        "--impair-rx",
        "reorder=0.02,seed=7",
    ]);
    assert_eq!(report["mtu"], 9000);
    // Jumbo frames' segments reach the default zero-copy threshold.
    assert_eq!(report["zero_copy_from"], 4096);
    assert_eq!(
        report["impair_rx"],
        "loss=0,reorder=0.02,dup=0,delay=0us,seed=7"
    );
    assert_measured(&report, "dpdk");
}

/// Every operation with zero-copy transmit: the Writes, Sends and Read
/// Responses go from registered memory (the sending end counts them),
/// and each run's data is checked by the server (its verdict fails the
/// run otherwise).
#[test]
fn every_operation_runs_with_zero_copy_transmit() {
    let by_reference = |report: &serde_json::Value, end: &str| {
        report["dpdk"][end]["fpdus_sent_by_reference"]
            .as_u64()
            .unwrap()
    };
    for (op, sender) in [
        ("write", "counters"),
        ("read", "server_counters"),
        ("send", "counters"),
    ] {
        let report = run(&["loopback", "--op", op, "--crc", "--zero-copy-from", "1024"]);
        assert_eq!(report["zero_copy_from"], 1024);
        assert_measured(&report, "dpdk");
        assert!(by_reference(&report, sender) > 0, "{op}: {report}");
    }
    let off = run(&["loopback", "--zero-copy-from", "0"]);
    assert!(off["zero_copy_from"].is_null(), "{off}");
    assert_eq!(by_reference(&off, "counters"), 0, "{off}");
}

/// With `--payloads-by-reference` as well, the Writes leave the client
/// with no copy there: its frames point into registered memory (its
/// host counts them) and the server gathers their pieces (its host
/// counts them too), and checks the data (its verdict fails the run
/// otherwise).
#[test]
fn payloads_by_reference_go_from_registered_memory() {
    let args = ["loopback", "--crc", "--zero-copy-from", "1024"];
    let report = run(&[&args[..], &["--payloads-by-reference"]].concat());
    assert_measured(&report, "dpdk");
    let (client, server) = (
        &report["dpdk"]["counters"],
        &report["dpdk"]["server_counters"],
    );
    let count = |end: &serde_json::Value, field: &str| end["host"][field].as_u64().unwrap();
    let fpdus = client["fpdus_sent_by_reference"].as_u64().unwrap();
    assert!(fpdus > 0, "{report}");
    assert!(count(client, "frames_referenced") >= fpdus, "{report}");
    assert!(count(server, "frames_gathered") > 0, "{report}");
    // Without it the same FPDUs are copied into their frames.
    let copied = run(&args);
    assert_eq!(count(&copied["dpdk"]["counters"], "frames_referenced"), 0);
    assert_eq!(
        count(&copied["dpdk"]["server_counters"], "frames_gathered"),
        0
    );
}

/// The table people read: a header, a row of eight measurements per
/// transport, the calibration, each transport's fraction of copy+CRC,
/// and the ratios, which agree with the rows.
#[test]
fn compare_prints_its_table_and_the_ratios_of_its_rows() {
    let mut args = vec!["compare", "--crc"];
    args.extend(QUICK_LOOPBACK);
    let text = String::from_utf8(perf_stdout(&args)).unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line: {text}"))
    };
    let header: Vec<&str> = line("transport ").split_whitespace().collect();
    let columns = [
        "Gbit/s", "msg/s", "p50", "us", "p90", "us", "p99", "us", "p99.9",
    ];
    assert_eq!(&header[1..10], &columns, "{text}");
    assert_eq!(&header[10..], &["max", "us", "setup/s"], "{text}");
    // A row: the transport's name alone, then eight numbers.
    let row = |transport: &str| -> Vec<f64> {
        let row = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|words| words.len() == 9 && words[0] == transport)
            .unwrap_or_else(|| panic!("no {transport} row: {text}"));
        let values: Vec<f64> = row[1..]
            .iter()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{v:?}: {text}")))
            .collect();
        assert!(values.iter().all(|&v| v > 0.0), "{text}");
        values
    };
    let (dpdk, socket) = (row("dpdk"), row("socket"));
    assert!(
        line("calibrate: memcpy ").contains(" Gbit/s, CRC32c "),
        "{text}"
    );
    for transport in ["dpdk", "socket"] {
        let fraction = line(&format!("{transport}: bandwidth is "));
        assert!(fraction.contains(" of copy+CRC"), "{text}");
    }
    let ratios: Vec<&str> = line("dpdk/socket: ").split_whitespace().collect();
    assert_eq!(ratios[1], "bw", "{text}");
    let bw: f64 = ratios[2].parse().unwrap();
    // Both runs moved messages of one size, so the bandwidth ratio is the
    // ratio of the message rates, which the rows print whole: it agrees
    // with the ratio's two decimals.
    assert!((bw - dpdk[1] / socket[1]).abs() <= 0.006, "{text}");
}

/// `uwarp-perf` alone is the README's main job: `loopback` with its
/// defaults, 64 KiB Writes over the virtual DPDK link (the longest run
/// of these tests, a few seconds).
#[test]
fn no_command_runs_the_default_loopback() {
    let text = String::from_utf8(perf_stdout(&[])).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("write 65536 B x 20000 (tx depth 128, CRC off); latency: 8 B RDMA Write ping-pong, one way"),
        "{text}"
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("transport ")),
        "{text}"
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("dpdk ")),
        "{text}"
    );
}

/// Zero-length RDMA Writes, which RDMA allows, are measured on both
/// transports: a message rate and no bandwidth, every Write of both
/// runs sent and received as an FPDU of its own.
#[test]
fn zero_length_writes_are_measured_on_both_transports() {
    let quick = ["-n", "300", "--latency-iters", "50", "--setups", "5"];
    let json = [&["compare", "-s", "0", "--json"][..], &quick].concat();
    let report: serde_json::Value = serde_json::from_slice(&perf_stdout(&json)).unwrap();
    assert_eq!(report["size"], 0, "{report}");
    for transport in ["dpdk", "socket"] {
        let run = &report[transport];
        assert_eq!(run["bw_gbps"].as_f64(), Some(0.0), "{transport}: {report}");
        assert!(run["msg_rate"].as_f64().unwrap() > 0.0, "{report}");
        assert!(run["lat_p50_us"].as_f64().unwrap() > 0.0, "{report}");
        // The 300 Writes and the 50 pings, beside the control messages.
        let sent = run["counters"]["fpdus_sent"].as_u64().unwrap();
        let received = run["server_counters"]["fpdus_received"].as_u64().unwrap();
        assert!(sent >= 350 && received >= 350, "{transport}: {report}");
    }
    // Bandwidth has no ratio (0/0); the message rate has.
    assert!(report["ratios"]["bw"].is_null(), "{report}");
    assert!(report["ratios"]["msg_rate"].as_f64().unwrap() > 0.0);
    let text = [&["compare", "-s", "0"][..], &quick].concat();
    let text = String::from_utf8(perf_stdout(&text)).unwrap();
    assert!(text.starts_with("write 0 B x 300 "), "{text}");
    let ratios = text.lines().find(|l| l.starts_with("dpdk/socket: "));
    assert!(
        ratios.is_some_and(|l| l.starts_with("dpdk/socket: bw - msg_rate ")),
        "{text}"
    );
}

/// The table alone says what its numbers mean, and prints no counters;
/// `-v` adds each end's queue pair counters (two lines) and host
/// counters (one line), on DPDK, and nothing else.
#[test]
fn counters_are_printed_with_verbose_only() {
    let mut args = vec!["loopback"];
    args.extend(QUICK_LOOPBACK);
    let plain = String::from_utf8(perf_stdout(&args)).unwrap();
    args.push("-v");
    let verbose = String::from_utf8(perf_stdout(&args)).unwrap();
    let counters = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                ["dpdk client", "dpdk server"]
                    .iter()
                    .any(|end| l.starts_with(end))
            })
            .map(String::from)
            .collect()
    };
    assert_eq!(counters(&plain), Vec::<String>::new(), "{plain}");
    assert!(!plain.contains("FPDUs sent") && !plain.contains("retransmissions"));
    let meaning = plain.lines().last().unwrap_or_default();
    assert!(
        meaning.starts_with("Gbit/s, msg/s: the bandwidth run; p50 to max: ")
            && meaning.ends_with(" (-v: the counters)"),
        "{plain}"
    );
    let lines = counters(&verbose);
    for end in ["client", "server"] {
        for prefix in [": FPDUs sent ", " TCP: retransmissions ", " host: "] {
            let prefix = format!("dpdk {end}{prefix}");
            let found = lines.iter().filter(|l| l.starts_with(&prefix)).count();
            assert_eq!(found, 1, "{prefix:?}: {verbose}");
        }
    }
    assert_eq!(lines.len(), 6, "{verbose}");
    // The rest is the plain table's shape: the same lines but the
    // counters, and the meaning without its pointer to -v.
    assert_eq!(
        verbose.lines().count(),
        plain.lines().count() + lines.len(),
        "{plain}{verbose}"
    );
    assert!(!verbose.contains("(-v: the counters)"), "{verbose}");
}

/// A short sweep: 20 messages and 5 round trips at each size.
const QUICK_SWEEP: [&str; 5] = ["-a", "-n", "20", "--latency-iters", "5"];

/// A chart file of this test process, removed when dropped.
struct Chart(std::path::PathBuf);

impl Chart {
    fn new(name: &str) -> Self {
        let file = format!("uwarp-loopback-{}-{name}.svg", std::process::id());
        let path = std::env::temp_dir().join(file);
        let _ = std::fs::remove_file(&path);
        Chart(path)
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }

    /// The SVG, once written; the number of its dots, of its lines of
    /// `points` points, and its texts.
    fn read(&self, points: usize) -> (String, usize, usize, Vec<String>) {
        let svg = std::fs::read_to_string(&self.0).expect("the chart was written");
        assert!(svg.starts_with("<svg "), "{svg}");
        let lines = svg
            .split("<polyline ")
            .skip(1)
            .filter(|l| {
                let list = l.split("points=\"").nth(1).unwrap().split('"').next();
                list.unwrap().split_whitespace().count() == points
            })
            .count();
        let texts = svg
            .split("<text")
            .skip(1)
            .map(|t| {
                let text = t.split_once('>').unwrap().1;
                text.split("</text>").next().unwrap().trim().to_string()
            })
            .collect();
        (svg.clone(), svg.matches("<circle ").count(), lines, texts)
    }
}

impl Drop for Chart {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `loopback -a`: the bandwidth and the latency run at every size from
/// 2 octets to 8 MiB, each in `results`; `--plot` draws both against
/// the size: a bandwidth line, a p50 and a p99 line, a dot per size.
#[test]
fn loopback_sweeps_the_sizes_and_draws_bandwidth_and_latency() {
    let chart = Chart::new("loopback");
    let path = chart.path();
    let mut args = vec!["loopback", "--setups", "0", "--json", "--plot", &path];
    args.extend(QUICK_SWEEP);
    let report: serde_json::Value = serde_json::from_slice(&perf_stdout(&args)).unwrap();
    let sizes: Vec<u64> = (1..=23).map(|k| 1 << k).collect();
    assert_eq!(report["sizes"], serde_json::json!(sizes), "{report}");
    assert_eq!(
        report["latency_sizes"],
        serde_json::json!(sizes),
        "{report}"
    );
    assert!(report["size"].is_null() && report["latency_size"].is_null());
    assert_eq!(report["iters"], 20, "{report}");
    assert_eq!(report["latency_iters"], 5, "{report}");
    let results = report["dpdk"]["results"].as_array().unwrap();
    assert_eq!(results.len(), sizes.len(), "{report}");
    for (result, size) in results.iter().zip(&sizes) {
        assert_eq!(result["size"], *size, "{report}");
        for field in ["bw_gbps", "msg_rate", "lat_p50_us", "lat_p99_us"] {
            assert!(result[field].as_f64().unwrap() > 0.0, "{field}: {result}");
        }
    }
    // The numbers of one size have no place outside `results`.
    assert!(report["dpdk"]["bw_gbps"].is_null(), "{report}");
    assert!(report["dpdk"]["setup_per_s"].is_null(), "{report}");
    let (svg, dots, lines, texts) = chart.read(sizes.len());
    assert_eq!(dots, 3 * sizes.len(), "{svg}");
    assert_eq!(lines, 3, "{svg}");
    for label in [
        "dpdk write",
        "dpdk write p50",
        "dpdk write p99",
        "Gbit/s",
        "microseconds",
        "message size (octets)",
        "2",
        "8M",
    ] {
        assert!(texts.iter().any(|t| t == label), "{label}: {texts:?}");
    }
}

/// `compare -a`: a row per transport and size, the setup rates on a
/// line of their own, and one chart with both transports' lines.
#[test]
fn compare_sweeps_both_transports_into_one_chart() {
    let chart = Chart::new("compare");
    let path = chart.path();
    let mut args = vec!["compare", "--op", "read", "--setups", "5", "--plot", &path];
    args.extend(QUICK_SWEEP);
    let text = String::from_utf8(perf_stdout(&args)).unwrap();
    assert!(text.starts_with("read 2 to 8388608 B x 20 each "), "{text}");
    assert!(text.contains("\ntransport      size   Gbit/s "), "{text}");
    for transport in ["dpdk", "socket"] {
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|words| words.len() == 9 && words[0] == transport)
            .collect();
        let sizes: Vec<String> = rows.iter().map(|r| r[1].to_string()).collect();
        let expected: Vec<String> = (1..=23).map(|k| (1u64 << k).to_string()).collect();
        assert_eq!(sizes, expected, "{text}");
        for row in &rows {
            let values: Vec<f64> = row[2..].iter().map(|v| v.parse().unwrap()).collect();
            // Gbit/s of 2-octet Reads may round to 0.00; the message rate
            // and the latencies are measured at every size.
            assert!(
                values[0] >= 0.0 && values[1..].iter().all(|&v| v > 0.0),
                "{text}"
            );
        }
        let peak = format!("{transport}: peak bandwidth (");
        assert!(text.lines().any(|l| l.starts_with(&peak)), "{text}");
    }
    let setups = text.lines().find(|l| l.starts_with("setup/s: dpdk "));
    assert!(setups.is_some_and(|l| l.contains(", socket ")), "{text}");
    // Ratios are for runs of one size.
    assert!(!text.contains("dpdk/socket:"), "{text}");
    let (svg, dots, lines, texts) = chart.read(23);
    assert_eq!(dots, 6 * 23, "{svg}");
    assert_eq!(lines, 6, "{svg}");
    for label in [
        "dpdk read",
        "socket read",
        "dpdk write p99",
        "socket write p50",
    ] {
        assert!(texts.iter().any(|t| t == label), "{label}: {texts:?}");
    }
}

#[test]
fn compare_gives_the_dpdk_link_its_mtu() {
    let report = run(&["compare", "--mtu", "9000"]);
    assert_eq!(report["mtu"], 9000);
    assert_measured(&report, "dpdk");
    assert_measured(&report, "socket");
}

#[test]
fn the_socket_transport_runs_alone() {
    let report = run(&["loopback", "--transport", "socket"]);
    assert_measured(&report, "socket");
}

#[test]
fn compare_reports_both_transports_and_their_ratios() {
    let report = run(&["compare", "--crc"]);
    assert_measured(&report, "dpdk");
    assert_measured(&report, "socket");
    for ratio in ["bw", "msg_rate", "lat_p50", "setup"] {
        assert!(report["ratios"][ratio].as_f64().unwrap() > 0.0, "{ratio}");
    }
}

#[test]
fn calibrate_reports_its_rates() {
    let stdout = perf_stdout(&["calibrate", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    for field in ["memcpy_gbps", "crc32c_gbps", "copy_crc_gbps"] {
        assert!(report["calibrate"][field].as_f64().unwrap() > 0.0);
    }
    assert_round_trip(&report["calibrate"], "core_to_core_ns", &report);
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    for (args, message) in [
        (&["loopback", "--tx-depth", "0"][..], "tx-depth"),
        (&["loopback", "--mtu", "100"], "--mtu 100"),
        // A sweep has its own sizes.
        (&["loopback", "-a", "-s", "64"], "cannot be used with"),
        (
            &["compare", "-a", "--latency-size", "64"],
            "cannot be used with",
        ),
        (&["loopback", "--impair-rx", "reorder=2"], "--impair-rx"),
        (
            &["loopback", "--transport", "socket", "--mtu", "9000"],
            "need the dpdk transport",
        ),
        (
            &[
                "loopback",
                "--transport",
                "socket",
                "--payloads-by-reference",
            ],
            "need the dpdk transport",
        ),
        (
            &[
                "loopback",
                "--transport",
                "socket",
                "--zero-copy-from",
                "1024",
            ],
            "need the dpdk transport",
        ),
        // Given at their default values, they are refused all the same:
        // the socket transport would not apply them.
        (
            &[
                "loopback",
                "--transport",
                "socket",
                "--zero-copy-from",
                "4096",
            ],
            "need the dpdk transport",
        ),
        (
            &["loopback", "--transport", "socket", "--mtu", "1500"],
            "need the dpdk transport",
        ),
        (
            &["loopback", "--transport", "socket", "--cores", "1"],
            "need the dpdk transport",
        ),
        (
            &["loopback", "--transport", "socket", "--impair-rx", "off"],
            "need the dpdk transport",
        ),
    ] {
        let stderr = perf_refused(args);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
