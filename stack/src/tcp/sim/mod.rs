//! A deterministic simulator: two engines over an in-memory link with
//! seeded loss, duplication, delay, jitter, reordering (by time, or by
//! position as the dataplane's impairment stage does it), stalls (a
//! descheduled host), a bandwidth limit, a re-segmenting middlebox
//! (splitting and merging segments), sides that answer every segment at
//! once or a batch at a time, receivers that read slowly from a small
//! buffer to starve the window, consumers that place part of the data out
//! of order, simultaneous opens, shrinking MSS, and an off-path attacker
//! injecting resets, SYNs, FINs and data (RFC 5961).
//!
//! Every segment goes through [`crate::tcp::Segment::emit`] and
//! [`crate::tcp::parse`], so the wire format and checksums are exercised
//! too. A [`Scenario`] fixes everything from its seed; [`run`] plays it in
//! virtual time and checks that both streams arrive complete, in order and
//! never handed over twice, that the connection closes cleanly, and that no
//! segment starts inside a record (RFC 5044 A.1) unless the scenario allows
//! an exception.

mod app;
mod link;
mod recorder;
mod rng;
mod scenario;
mod world;

pub use app::pattern;
pub use link::{LinkConfig, Stall, DISPLACE_HOLD, DISPLACE_MAX};
pub use recorder::Recorder;
pub use rng::SimRng;
pub use scenario::Scenario;

use crate::tcp::connection::Stats;
use crate::tcp::timers::time::Duration;
use world::World;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Report {
    /// Virtual time the run took.
    pub elapsed: Duration,
    /// Virtual time until every octet had reached its application: the
    /// transfer's completion time, without the close and TIME-WAIT.
    pub delivered: Duration,
    /// The client's counters.
    pub client: Stats,
    /// The server's counters.
    pub server: Stats,
    /// Data segments that started inside a record, seen on the wire
    /// before the middlebox.
    pub misaligned: u64,
    /// Segments put on the link.
    pub segments: u64,
    /// Blind segments injected.
    pub injected: u32,
    /// The duplicate thresholds the client and the server ended with
    /// ([`crate::tcp::Connection::reordering`]).
    pub reordering: [usize; 2],
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError(pub String);

/// Plays `scenario` to the end and checks it.
pub fn run(scenario: &Scenario) -> Result<Report, SimError> {
    let mut world = World::new(scenario);
    world.run()?;
    world.verify()?;
    let report = world.report();
    let engine_count = report.client.unaligned_segments + report.server.unaligned_segments;
    if report.misaligned != engine_count {
        return Err(SimError(format!(
            "{} misaligned segments on the wire, the engines counted {engine_count}",
            report.misaligned
        )));
    }
    let splits = report.client.records_split + report.server.records_split;
    if !scenario.may_split() && splits > 0 {
        return Err(SimError(format!(
            "{splits} records split without an A.1 exception"
        )));
    }
    if !scenario.may_misalign() && report.misaligned > 0 {
        return Err(SimError(format!(
            "{} segments started inside a record",
            report.misaligned
        )));
    }
    Ok(report)
}
