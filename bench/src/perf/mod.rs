//! `uwarp-perf loopback`, `compare` and `calibrate`: perftest-style
//! measurements with both ends in one process, so they need no second
//! host and no NIC.
//!
//! - `transport.rs`: the ends of a run: two DPDK devices on a net_ring
//!   pair, or one device of the kernel-socket transport.
//! - `workload.rs`: bandwidth (Writes, Reads or Sends outstanding), RDMA
//!   Write ping-pong latency, connection setup rate.
//! - `calibrate.rs`: this core's memcpy and CRC32c rates.
//! - `report.rs`: the numbers and their text and JSON forms.

mod calibrate;
mod report;
mod transport;
mod workload;

use std::time::Duration;

pub use calibrate::{calibrate, Calibration};
pub use report::{Latency, Measurement, Report};
pub use transport::Transport;
pub use workload::{Op, Workload};

/// How long each calibration loop runs.
const CALIBRATE_FOR: Duration = Duration::from_millis(300);

/// Runs `workload` over each of `transports` in turn, and calibrates.
pub fn measure(transports: &[Transport], workload: &Workload) -> Result<Report, String> {
    let mut runs = Vec::new();
    for &transport in transports {
        let measured = workload::run(transport, workload)
            .map_err(|e| format!("{} transport: {e}", transport.name()))?;
        runs.push((transport.name(), measured));
    }
    Ok(Report {
        workload: workload.clone(),
        runs,
        calibrate: calibrate(CALIBRATE_FOR),
    })
}
