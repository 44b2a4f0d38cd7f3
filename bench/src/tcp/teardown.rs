//! How `uwarp-perf tcp` stops its port after its cores, so that two
//! processes on the two ends of a net_memif link do not race DPDK 22.11's
//! memif driver (docs/dpdk.md, "Exit and teardown"): a process must not
//! poll its port while its peer closes the link, and the two must not
//! stop their ports at the same moment.
//!
//! Once its cores have stopped polling, the process says so on standard
//! error ([`CORES_STOPPED`]), then, as asked:
//!
//! - holds its port until its standard input closes (whoever runs both
//!   ends closes it once the peer's cores stopped too);
//! - waits, bounded, for the peer to close the link first (our link goes
//!   down), then 100 ms more while the EAL's interrupt thread finishes
//!   its disconnect.

use std::time::Duration;

use uwarp_dataplane::Port;

/// The standard error line that says no core polls the port any more.
pub const CORES_STOPPED: &str = "uwarp-perf: cores stopped";

/// How long the EAL's interrupt thread gets, once the link is down, to
/// finish net_memif's disconnect (it marks the link down before it
/// frees the shared regions) before this process stops its own port.
const DISCONNECT_GRACE: Duration = Duration::from_millis(100);

/// What happens between the cores' stop and the port's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Teardown {
    /// Hold the port until standard input closes.
    pub hold_until_stdin_closes: bool,
    /// Wait up to this long for the peer to close the link (zero: not).
    pub await_peer_close: Duration,
}

impl Teardown {
    /// Runs on `port` once no core polls it, before it stops.
    pub fn before_port_stop(&self, port: &Port) {
        if !self.hold_until_stdin_closes && self.await_peer_close.is_zero() {
            return;
        }
        eprintln!("{CORES_STOPPED}");
        if self.hold_until_stdin_closes {
            // Whatever arrives is ignored; the end of the stream (or an
            // error reading it) is the signal.
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        }
        if !self.await_peer_close.is_zero() && port.wait_for_link_down(self.await_peer_close) {
            std::thread::sleep(DISCONNECT_GRACE);
        }
    }
}
