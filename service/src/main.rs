//! `uwarpd --iface IFACE`: the interface's service. It owns uwarp's port
//! beside the kernel on IFACE (the XDP program, its map, the AF_XDP
//! socket on queue 0 and the ports held in the kernel) and shares it
//! among any number of uwarp processes on the host: each gets a net_memif
//! link of its own, carrying the frames of the TCP ports it holds, and
//! asks the service for its ports over a Unix socket (the protocol of
//! `uwarp_dataplane::af_xdp::service`). A process that ends, however it
//! ends, loses its ports and its link; the others run on. The library
//! finds the service by the interface (`DpdkConfig::beside_kernel`,
//! `uwarp-run --iface`): nothing to configure.
//!
//! - `uplink`: the port on the interface, and the ports held in the
//!   kernel.
//! - `apps`: one application: its connection to the service and its link.
//! - `dispatch`: which application a frame from the interface belongs
//!   to, and whether one from an application may go out.
//! - `service`: the loop that moves frames and answers requests.

mod apps;
mod dispatch;
mod service;
mod uplink;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

/// The service that shares uwarp's port beside the kernel on one
/// interface among uwarp processes.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The kernel interface (e.g. eth1): uwarp runs on its queue 0,
    /// through AF_XDP, on the interface's own IPv4 address.
    #[arg(long)]
    iface: String,
}

/// Set by SIGINT and SIGTERM: the service stops.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
    }
    match service::Service::start(&cli.iface).and_then(|service| service.run(&STOP)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("uwarpd: {message}");
            ExitCode::FAILURE
        }
    }
}
