//! The two-host modes (`uwarp-perf write-bw`, `read-lat`, ...): this
//! process is one side of a run, the server or the client, on a device
//! of either transport, and the other side is another `uwarp-perf`
//! process, here or on another host.
//!
//! On the DPDK transport the device's cores run inline on the measuring
//! thread (run to completion, one busy thread per process); the socket
//! transport runs its own control and dataplane threads.

use std::net::{IpAddr, SocketAddr};

use super::perftest::{listen, open_device};
use super::report::RunReport;
use super::session::{run_client, serve, ClientRun, ServerRun};
use super::Transport;
use crate::port::PortHost;

/// Which transport carries the run, and how it is set up.
#[derive(Debug, Clone)]
pub enum Carrier {
    /// uwarp's TCP on a DPDK port.
    Dpdk(PortHost),
    /// The kernel's TCP; a server binds `bind` (default: any address).
    Socket {
        /// The server's address.
        bind: Option<IpAddr>,
    },
}

/// Which side this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Serve one client run on this port, then exit.
    Server {
        /// The port.
        port: u16,
    },
    /// Run against the server at this address.
    Client {
        /// The server.
        peer: SocketAddr,
    },
}

/// What a two-host process runs.
#[derive(Debug, Clone)]
pub struct TwoHost {
    /// Server or client.
    pub side: Side,
    /// The transport.
    pub carrier: Carrier,
    /// The run; a server takes its mode, inline size and MPA settings,
    /// and the rest from its client.
    pub run: ClientRun,
}

/// Opens the device, runs this side, and reports.
pub fn run(config: &TwoHost) -> Result<RunReport, String> {
    let (device, transport) = open_device(&config.carrier)?;
    let inline = transport == Transport::Dpdk;
    let outcome = match config.side {
        Side::Server { port } => {
            let listener = listen(&device, &config.carrier, port)?;
            let server = ServerRun {
                mode: config.run.mode,
                inline: config.run.inline,
                mpa: config.run.mpa,
                wait: None,
            };
            serve(&device, inline, &listener, &server)?
        }
        Side::Client { peer } => run_client(&device, inline, peer, &config.run)?,
    };
    Ok(RunReport {
        mode: config.run.mode,
        role: match config.side {
            Side::Server { .. } => "server",
            Side::Client { .. } => "client",
        },
        transport: transport.name(),
        outcome,
    })
}
