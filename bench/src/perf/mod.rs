//! The perf tool: perftest-style measurements of uwarp.
//!
//! - `uwarp-perf write-bw`, `write-lat`, `read-bw`, `read-lat`,
//!   `send-bw`, `send-lat` ([`twohost`]): one side of a run, the server
//!   or the client, in this process; the other side in another process
//!   or on another host.
//! - `uwarp-perf loopback`, `compare` and `calibrate`: the same runs
//!   with both ends in one process, so they need no second host and no
//!   NIC, plus the connection setup rate and this core's memcpy and
//!   CRC32c rates.
//! - `uwarp-perf conns` ([`conns`]): thousands of connections between two
//!   devices in this process, what each costs to set up and to hold, and
//!   the per-packet cost of small messages spread over all of them.
//!
//! The modules:
//!
//! - `mode.rs`: the operation and the metric of a run.
//! - `protocol.rs`: what client and server tell each other: the
//!   connection request and reply, the control messages of a run.
//! - `endpoint.rs`: one side's queue pairs, memory and control channel.
//! - `loops.rs`: the measuring loops of both sides.
//! - `session.rs`: the run between a client and a server.
//! - `twohost.rs`: the two-host modes' device and side.
//! - `perftest.rs`: `--perftest`, the same modes speaking perftest's own
//!   protocol ([`uwarp_interop::perftest`]) against perftest itself.
//! - `transport.rs`: the ends of a loopback run: two DPDK devices on a
//!   net_ring pair, or one device of the kernel-socket transport.
//! - `workload.rs`: the loopback run, and the connection setup rate.
//! - `calibrate.rs`: this core's memcpy and CRC32c rates, and the
//!   core-to-core round trip of the loopback's two CPUs.
//! - `cpus.rs`: the busy threads of a two-host side, their CPUs, and
//!   whether two shared one.
//! - `report.rs`: the numbers and their text and JSON forms.
//! - `host.rs`: what a DPDK end's cores counted, as text and JSON.
//! - `progress.rs`: the progress bar of long runs.
//! - `plot.rs`: the SVG chart of a size sweep.
//! - `conns/`: `uwarp-perf conns`.

mod calibrate;
pub mod conns;
pub mod cpus;
mod endpoint;
mod host;
mod loops;
mod mode;
pub mod perftest;
pub mod plot;
mod progress;
pub mod protocol;
mod report;
pub mod session;
mod transport;
pub mod twohost;
mod workload;

use std::time::Duration;

pub use calibrate::{calibrate, core_to_core_ns, Calibration};
pub use endpoint::Waiting;
pub use mode::{Metric, Mode, Op};
pub use report::{Latency, Measurement, Report, RunReport};
pub use transport::{HostReports, LinkOptions, Transport, DPDK_LINK_OPTIONS, ETHERNET_MTU};
pub use workload::Workload;

/// The message sizes of a sweep (`-a`): every power of two from 2 octets
/// to 8 MiB, as perftest's `-a`.
pub fn sweep_sizes() -> Vec<usize> {
    (1..=23).map(|k| 1usize << k).collect()
}

/// How long each calibration loop runs.
const CALIBRATE_FOR: Duration = Duration::from_millis(300);

/// Runs `workload` over each of `transports` in turn, and calibrates.
pub fn measure(transports: &[Transport], workload: &Workload) -> Result<Report, String> {
    workload.link.check(transports)?;
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
