//! `uwarp-perf loopback`: perftest-style measurements with both ends in one
//! process, so they need no second host. Today the transport is the
//! kernel-socket one (`uwarp-control`); every run also measures the same
//! workload over plain kernel TCP sockets as its baseline, so the ratio in
//! the report is what iWARP framing, CRCs, placement and completions cost
//! on top of TCP on this machine.
//!
//! - `workload.rs`: the RDMA side: bandwidth (a window of outstanding
//!   Writes, Reads or Sends) and latency (Send ping-pong).
//! - `baseline.rs`: the same bytes over a plain TCP socket pair.
//! - `report.rs`: the numbers and their text and JSON forms.

mod baseline;
mod report;
mod workload;

pub use report::{Measurement, Report};
pub use workload::{Op, Workload};

/// Runs `workload` over uwarp and over plain TCP, one after the other.
pub fn loopback(workload: &Workload) -> Result<Report, String> {
    let uwarp = workload::run(workload)?;
    let tcp = baseline::run(workload)?;
    Ok(Report {
        workload: workload.clone(),
        uwarp,
        tcp,
    })
}
