//! Seeded end-to-end runs of two TCP engines over the simulator's lossy,
//! reordering, re-segmenting link (`uwarp_stack::tcp::sim`).
//!
//! `UWARP_SIM_SCENARIOS` sets how many seeds run in all (default 500 in
//! debug builds, 5000 in release); `UWARP_SIM_SEED` replays one seed.

use uwarp_stack::tcp::sim::{run, LinkConfig, Scenario};
use uwarp_stack::tcp::Duration;

/// Seeds per test; four tests share the default so they run in parallel.
fn seeds_per_test() -> u64 {
    let total: u64 = if cfg!(debug_assertions) { 500 } else { 5000 };
    let total = std::env::var("UWARP_SIM_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(total);
    total.div_ceil(4)
}

/// Runs the seeds of quarter `part` (or only `UWARP_SIM_SEED`) and fails
/// with every failing seed.
fn run_part(part: u64) {
    let count = seeds_per_test();
    let seeds: Vec<u64> = match std::env::var("UWARP_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(seed) if part == 0 => vec![seed],
        Some(_) => Vec::new(),
        None => (part * count..(part + 1) * count).collect(),
    };
    let mut failures = Vec::new();
    let (mut segments, mut retransmissions, mut splits, mut misaligned) = (0, 0, 0, 0);
    let (mut injected, mut challenges) = (0, 0);
    for &seed in &seeds {
        let scenario = Scenario::random(seed);
        match run(&scenario) {
            Ok(report) => {
                segments += report.segments;
                retransmissions += report.client.retransmissions + report.server.retransmissions;
                splits += report.client.records_split + report.server.records_split;
                misaligned += report.misaligned;
                injected += report.injected;
                challenges += report.client.challenge_acks + report.server.challenge_acks;
            }
            Err(err) => failures.push(format!("seed {seed}: {} ({scenario:?})", err.0)),
        }
    }
    eprintln!(
        "{} scenarios: {segments} segments, {retransmissions} retransmissions, \
         {splits} records split, {misaligned} misaligned, {injected} blind segments \
         injected, {challenges} challenge ACKs",
        seeds.len()
    );
    for failure in failures.iter().take(10) {
        eprintln!("{}", &failure[..failure.len().min(300)]);
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed (replay with UWARP_SIM_SEED=<seed>); first: {}",
        failures.len(),
        seeds.len(),
        failures.first().map_or("", String::as_str)
    );
}

#[test]
fn seeded_scenarios_part_0() {
    run_part(0);
}

#[test]
fn seeded_scenarios_part_1() {
    run_part(1);
}

#[test]
fn seeded_scenarios_part_2() {
    run_part(2);
}

#[test]
fn seeded_scenarios_part_3() {
    run_part(3);
}

#[test]
fn clean_link_keeps_every_segment_on_a_record_boundary() {
    for seed in 0..50 {
        let mut scenario = Scenario::random(seed);
        scenario.link = LinkConfig {
            delay: Duration::from_micros(50),
            ..LinkConfig::default()
        };
        scenario.records = true;
        scenario.read_rate = None;
        scenario.mss_drop = None;
        scenario.client_bytes = 100_000;
        let report = run(&scenario).unwrap_or_else(|e| panic!("seed {seed}: {}", e.0));
        assert_eq!(report.misaligned, 0, "seed {seed}");
        assert_eq!(report.client.records_split, 0, "seed {seed}");
        assert_eq!(report.client.retransmissions, 0, "seed {seed}");
    }
}
