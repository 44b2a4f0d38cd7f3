//! The loopback measurements of a perf run, on either transport
//! ([`super::transport`]): the client and the server of the two-host
//! modes ([`super::session`]) on two threads of this process, plus the
//! connection setup rate:
//!
//! - bandwidth: `write-bw`, `read-bw` or `send-bw` at one size, or at
//!   each size of a sweep (`-a`);
//! - latency: `write-lat`, an RDMA Write ping-pong of `latency_size`
//!   octets (or of each size of the sweep), reported as half the round
//!   trip;
//! - connection setup: `setups` connections one after another, TCP plus
//!   the MPA startup in revision 2 with a peer-to-peer RTR (Write), each
//!   done when the client's queue pair is in RTS and the server accepted.
//!
//! The server end runs on a thread of its own; on the DPDK transport each
//! end's thread also runs its device's cores (inline), pinned to a CPU of
//! its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uwarp::{
    CompletionQueue, ConnectParams, Device, Listener, LocalParams, QpCounters, QpInit, QpState,
    QueuePair, Revision, RtrSet,
};

use super::calibrate::core_to_core_ns;
use super::endpoint::STALL;
use super::protocol::Stop;
use super::session::{run_client, serve, ClientRun, Mpa, Phase, ServerRun};
use super::transport::{pin, Ends, LinkOptions, Transport};
use super::{Measurement, Metric, Mode, Op};

/// How long each run measures the core-to-core round trip before it
/// starts and after it ends.
const CORE_TO_CORE_SPAN: Duration = Duration::from_millis(50);

/// What to measure.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The bandwidth operation.
    pub op: Op,
    /// Message sizes of the bandwidth run, in octets: one measurement
    /// each, over one connection.
    pub sizes: Vec<usize>,
    /// Messages in the bandwidth run.
    pub iters: usize,
    /// Message sizes of the latency run, in octets (each at least 1).
    pub latency_sizes: Vec<usize>,
    /// Round trips in the latency run.
    pub latency_iters: usize,
    /// Work requests kept outstanding in the bandwidth run.
    pub tx_depth: usize,
    /// Connections in the setup run (0 skips it).
    pub setups: usize,
    /// Ask for MPA CRCs.
    pub crc: bool,
    /// The DPDK link's MTU and impairment.
    pub link: LinkOptions,
}

/// Measures `workload` over `transport`.
pub fn run(transport: Transport, workload: &Workload) -> Result<Measurement, String> {
    // Pinning happens on threads of the run's own, so the caller's
    // thread (and the socket transport's threads it starts later) keep
    // every CPU.
    std::thread::scope(|scope| {
        scope
            .spawn(|| measure(transport, workload))
            .join()
            .map_err(|_| "the client thread panicked".to_string())?
    })
}

fn measure(transport: Transport, workload: &Workload) -> Result<Measurement, String> {
    // Before the ends start any thread of their own.
    let before = core_to_core_ns(CORE_TO_CORE_SPAN);
    let ends = Ends::open(transport, &workload.link)?;
    if ends.inline() {
        pin(0);
    }
    let bandwidth = Mode {
        op: workload.op,
        metric: Metric::Bandwidth,
    };
    let (bandwidth, bandwidth_counters, bandwidth_server) =
        session(&ends, workload, bandwidth, &workload.sizes, workload.iters)?;
    let latency = Mode {
        op: Op::Write,
        metric: Metric::Latency,
    };
    let (latency, latency_counters, latency_server) = session(
        &ends,
        workload,
        latency,
        &workload.latency_sizes,
        workload.latency_iters,
    )?;
    let setup_per_s = if workload.setups > 0 {
        Some(setup_rate(&ends, workload)?)
    } else {
        None
    };
    let hosts = ends.close();
    // Once the ends' threads are gone again.
    let after = core_to_core_ns(CORE_TO_CORE_SPAN);
    Ok(Measurement {
        bandwidth,
        latency,
        setup_per_s,
        counters: bandwidth_counters + latency_counters,
        server_counters: bandwidth_server + latency_server,
        hosts,
        core_to_core_ns: before,
        core_to_core_after_ns: after,
    })
}

/// One run of `mode` at each of `sizes`, `iters` messages each, between
/// the two ends: the server on a thread of its own (pinned to the second
/// CPU when it runs cores), the client on this one. Returns the
/// measurements and the client's and the server's counters.
fn session(
    ends: &Ends,
    workload: &Workload,
    mode: Mode,
    sizes: &[usize],
    iters: usize,
) -> Result<(Vec<Phase>, QpCounters, QpCounters), String> {
    let mpa = Mpa {
        revision: Revision::Enhanced,
        crc: workload.crc,
        markers: false,
        p2p: Some(RtrSet::WRITE_AND_READ),
    };
    let client = ClientRun {
        mode,
        sizes: sizes.to_vec(),
        stop: Stop::Iters(iters as u64),
        qps: 1,
        tx_depth: workload.tx_depth,
        inline: 0,
        mpa,
        // Drawn on a terminal only, for runs longer than a second.
        progress: true,
    };
    let server = ServerRun {
        mode,
        inline: 0,
        mpa,
        wait: Some(STALL),
    };
    let listener = ends
        .server
        .listen(&ends.listen)
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr();
    let (client, server) = std::thread::scope(|scope| {
        let serving = scope.spawn(|| {
            if ends.inline() {
                pin(1);
            }
            serve(&ends.server, ends.waiting(), &listener, &server)
        });
        let client = run_client(ends.client(), ends.waiting(), addr, &client);
        let server = serving
            .join()
            .unwrap_or_else(|_| Err("the server thread panicked".into()));
        (client, server)
    });
    // A side that fails resets the connections, so the other one only
    // sees them close: the server's reason comes first when both failed.
    let (client, server) = match (client, server) {
        (Ok(client), Ok(server)) => (client, server),
        (Ok(_), Err(server)) => return Err(format!("server: {server}")),
        (Err(client), Ok(_)) => return Err(format!("client: {client}")),
        (Err(client), Err(server)) => return Err(format!("server: {server}; client: {client}")),
    };
    Ok((client.phases, client.counters, server.counters))
}

/// One end of a connection of the setup run.
struct End {
    qp: QueuePair,
    // Kept alive as long as the queue pair that reports to it.
    _cq: CompletionQueue,
}

impl End {
    fn new(device: &Device) -> Result<Self, String> {
        let pd = device.alloc_pd().map_err(|e| e.to_string())?;
        let cq = device.create_cq(16);
        let qp = device.create_qp(&pd, QpInit::new(&cq));
        Ok(End { qp, _cq: cq })
    }
}

/// MPA settings of the runs: CRC as asked, peer-to-peer with the RTRs
/// uwarp offers by default (it picks Write).
fn params(workload: &Workload) -> LocalParams {
    LocalParams {
        crc: workload.crc,
        peer_to_peer: Some(RtrSet::WRITE_AND_READ),
        ..LocalParams::default()
    }
}

fn accept(listener: &Listener, qp: &QueuePair, params: &LocalParams) -> Result<(), String> {
    let request = listener
        .get_request(STALL)
        .map_err(|e| format!("no connection request: {e}"))?;
    request
        .accept(qp, params.clone())
        .map(drop)
        .map_err(|e| format!("accept: {e}"))
}

/// Runs `device`'s cores until `stop` (for an inline end that has
/// nothing else to do meanwhile).
fn keep_running(ends: &Ends, device: &Device, stop: &AtomicBool) {
    if ends.inline() {
        while !stop.load(Ordering::Acquire) {
            device.progress();
        }
    }
}

/// Disconnects `client`, and waits for both queue pairs to close.
fn close(ends: &Ends, client: &End, server: &End) {
    client.qp.disconnect();
    let closed = |device: &Device, qp: &QueuePair| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while qp.state() != QpState::Error && Instant::now() < deadline {
            if device.progress() == 0 {
                std::thread::yield_now();
            }
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| closed(&ends.server, &server.qp));
        closed(ends.client(), &client.qp);
    });
}

fn setup_rate(ends: &Ends, workload: &Workload) -> Result<f64, String> {
    let count = workload.setups;
    let listener = ends
        .server
        .listen(&ends.listen)
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr();
    let local = params(workload);
    let mut clients = Vec::with_capacity(count);
    let mut servers = Vec::with_capacity(count);
    let done = AtomicBool::new(false);
    for _ in 0..count {
        servers.push(End::new(&ends.server)?);
        clients.push(End::new(ends.client())?);
    }
    let elapsed = std::thread::scope(|scope| -> Result<f64, String> {
        let accepting = scope.spawn(|| -> Result<(), String> {
            if ends.inline() {
                pin(1);
            }
            for server in &servers {
                accept(&listener, &server.qp, &local)?;
            }
            keep_running(ends, &ends.server, &done);
            Ok(())
        });
        let start = Instant::now();
        let mut result = Ok(());
        for client in &clients {
            let params = ConnectParams {
                mpa: params(workload),
                ..ConnectParams::default()
            };
            if let Err(err) = ends.client().connect(addr, &client.qp, params) {
                result = Err(format!("connect: {err}"));
                break;
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        done.store(true, Ordering::Release);
        let accepted = accepting
            .join()
            .map_err(|_| "the server thread panicked".to_string())?;
        result.and(accepted)?;
        Ok(elapsed)
    })?;
    for (client, server) in clients.iter().zip(&servers) {
        close(ends, client, server);
    }
    Ok(count as f64 / elapsed)
}
