//! The two-host modes (`uwarp-perf write-bw`, `read-lat`, ...): this
//! process is one side of a run, the server or the client, on a device
//! of either transport, and the other side is another `uwarp-perf`
//! process, here or on another host.
//!
//! On the DPDK transport the device's cores run inline on the measuring
//! thread (run to completion, one busy thread per process), or, with
//! `--cpus`, each on a thread of its own pinned to its CPU; the socket
//! transport runs its own control and dataplane threads. The report
//! says which threads were busy and whether two shared a CPU
//! ([`super::cpus`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use uwarp::{CoreThreads, Device, DeviceConfig, Listener};
use uwarp_dataplane::runtime::Placement;

use super::cpus::CpuUse;

use super::report::RunReport;
use super::session::{run_client, serve, ClientRun, ServerRun};
use super::{Transport, Waiting};
use crate::port::PortHost;

/// Which transport carries the run, and how it is set up.
#[derive(Debug, Clone)]
pub enum Carrier {
    /// uwarp's TCP on a DPDK port.
    Dpdk {
        /// The port and the host on it; its cores run inline on the
        /// measuring thread when their placement is unpinned, else on
        /// threads of their own, pinned.
        port: PortHost,
        /// Zero-copy transmit from payloads of this many octets
        /// (`DpdkConfig::zero_copy_from`).
        zero_copy_from: Option<usize>,
    },
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
    /// The measuring thread spins without yielding while it waits, as
    /// perftest's loops do (on cores with threads of their own).
    pub spin: bool,
}

/// Opens the device, runs this side, closes the device, and reports
/// (with what its cores counted, on DPDK).
pub fn run(config: &TwoHost) -> Result<RunReport, String> {
    let (device, transport) = open_device(&config.carrier)?;
    let cpus = config.carrier.cpus();
    let inline = matches!(
        config.carrier,
        Carrier::Dpdk { ref port, .. } if port.placement == Placement::Unpinned
    );
    let waiting = Waiting::of(inline, config.spin);
    let outcome = match config.side {
        Side::Server { port } => {
            let listener = listen(&device, &config.carrier, port)?;
            let server = ServerRun {
                mode: config.run.mode,
                inline: config.run.inline,
                mpa: config.run.mpa,
                wait: None,
            };
            serve(&device, waiting, &listener, &server)
        }
        Side::Client { peer } => run_client(&device, waiting, peer, &config.run),
    };
    let host = device.close();
    // A failed run still reports what this side's cores counted: how a
    // stall came about shows in its drops.
    let outcome = outcome.map_err(|err| match &host {
        Some(host) => format!("{err}\nthis side's cores: {}", super::host::text(host)),
        None => err,
    })?;
    Ok(RunReport {
        mode: config.run.mode,
        role: match config.side {
            Side::Server { .. } => "server",
            Side::Client { .. } => "client",
        },
        transport: transport.name(),
        outcome,
        host,
        cpus,
    })
}

impl Carrier {
    /// The busy threads a side on this carrier runs, and their CPUs.
    fn cpus(&self) -> CpuUse {
        match self {
            Carrier::Dpdk { port, .. } => CpuUse::dpdk(&port.placement),
            Carrier::Socket { .. } => CpuUse::socket(),
        }
    }
}

/// The device `carrier` names: on DPDK with its cores inline on the
/// calling thread, which runs them whenever it waits, unless the port
/// pins them to CPUs.
pub fn open_device(carrier: &Carrier) -> Result<(Device, Transport), String> {
    let (device, transport) = match carrier {
        Carrier::Dpdk {
            port: setup,
            zero_copy_from,
        } => {
            let threads = match setup.placement {
                Placement::Unpinned => CoreThreads::Inline,
                Placement::Pinned { .. } => CoreThreads::Spawned,
            };
            let mut config = setup.dpdk_config(threads)?;
            config.zero_copy_from = *zero_copy_from;
            (Device::open(DeviceConfig::dpdk(config)), Transport::Dpdk)
        }
        Carrier::Socket { .. } => (Device::open(DeviceConfig::default()), Transport::Socket),
    };
    let device = device.map_err(|e| format!("the {} device: {e}", transport.name()))?;
    Ok((device, transport))
}

/// Listens on `port` at the carrier's address (on the socket transport:
/// the one to bind, any by default) and says so on standard error, where
/// scripts and tests wait for it before they connect.
pub fn listen(device: &Device, carrier: &Carrier, port: u16) -> Result<Listener, String> {
    let ip = match carrier {
        Carrier::Dpdk { port, .. } => IpAddr::V4(port.ip),
        Carrier::Socket { bind } => bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
    };
    let addr = SocketAddr::new(ip, port);
    let listener = device
        .listen(addr)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    eprintln!("uwarp-perf: listening on {}", listener.local_addr());
    Ok(listener)
}
