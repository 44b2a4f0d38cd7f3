//! The RDMA measurements of a perf run, on either transport
//! ([`super::transport`]), in the spirit of perftest:
//!
//! - bandwidth: `tx_depth` RDMA Writes, Reads or Sends kept outstanding
//!   until `iters` complete (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`);
//! - latency: an RDMA Write ping-pong of `latency_size` octets, each side
//!   polling its own memory for the peer's next Write (`ib_write_lat`),
//!   reported as half the round trip;
//! - connection setup: `setups` connections one after another, TCP plus
//!   the MPA startup in revision 2 with a peer-to-peer RTR (Write), each
//!   done when the client's queue pair is in RTS and the server accepted.
//!
//! The server end runs on a thread of its own; on the DPDK transport each
//! end's thread also runs its device's cores (inline), pinned to a CPU of
//! its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use uwarp_control::{
    Access, CompletionQueue, ConnectParams, Device, Listener, LocalParams, MemoryRegion, Payload,
    QpInit, QpState, QueuePair, RecvWr, RtrSet, SendOp, SendWr, WcStatus, WorkCompletion,
};

use super::transport::{pin, Ends, Transport};
use super::{Latency, Measurement};

/// Which operation a bandwidth run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// Send into posted receives.
    Send,
}

impl Op {
    /// The operation's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
            Self::Send => "send",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The bandwidth operation.
    pub op: Op,
    /// Message size of the bandwidth run, in octets.
    pub size: usize,
    /// Messages in the bandwidth run.
    pub iters: usize,
    /// Message size of the latency run, in octets (at least 1).
    pub latency_size: usize,
    /// Round trips in the latency run.
    pub latency_iters: usize,
    /// Work requests kept outstanding in the bandwidth run.
    pub tx_depth: usize,
    /// Connections in the setup run (0 skips it).
    pub setups: usize,
    /// Ask for MPA CRCs.
    pub crc: bool,
}

/// How long one step may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(20);

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
    let ends = Ends::open(transport)?;
    if ends.inline() {
        pin(0);
    }
    let (bw_gbps, msg_rate) = bandwidth(&ends, workload)?;
    let latency = latency(&ends, workload)?;
    let setup_per_s = if workload.setups > 0 {
        Some(setup_rate(&ends, workload)?)
    } else {
        None
    };
    Ok(Measurement {
        bw_gbps,
        msg_rate,
        latency,
        setup_per_s,
    })
}

/// One end of a connection.
struct End {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

impl End {
    fn new(device: &Device, len: usize, depth: usize) -> Result<Self, String> {
        let pd = device.alloc_pd().map_err(|e| e.to_string())?;
        let cq = device.create_cq(depth);
        let qp = device.create_qp(&pd, QpInit::new(&cq));
        let mr = pd
            .alloc_mr(len.max(1), Access::ALL)
            .map_err(|e| e.to_string())?;
        Ok(End { qp, cq, mr })
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

/// Connects a client end to a server end (each with a region of `len`
/// octets), the server accepting on its own thread.
fn connect(
    ends: &Ends,
    workload: &Workload,
    len: usize,
    depth: usize,
    prepare_server: impl FnOnce(&End) -> Result<(), String>,
) -> Result<(End, End), String> {
    let listener = ends
        .server
        .listen(&ends.listen)
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr();
    let server = End::new(&ends.server, len, depth)?;
    prepare_server(&server)?;
    let client = End::new(ends.client(), len, depth)?;
    let connect = ConnectParams {
        mpa: params(workload),
        ..ConnectParams::default()
    };
    let local = params(workload);
    std::thread::scope(|scope| {
        let accepting = scope.spawn(|| accept(&listener, &server.qp, &local));
        let connected = ends
            .client()
            .connect(addr, &client.qp, connect)
            .map(drop)
            .map_err(|e| format!("connect: {e}"));
        let accepted = accepting
            .join()
            .map_err(|_| "the server thread panicked".to_string())?;
        connected.and(accepted)
    })?;
    Ok((client, server))
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

/// The next completion of `cq`, which must be a success. Inline ends
/// spin (each poll runs their cores); socket ends sleep on the queue.
fn wait(ends: &Ends, cq: &CompletionQueue) -> Result<WorkCompletion, String> {
    let wc = if ends.inline() {
        let deadline = Instant::now() + STALL;
        loop {
            if let Some(wc) = cq.poll_one() {
                break Some(wc);
            }
            if Instant::now() >= deadline {
                break None;
            }
        }
    } else {
        cq.poll_blocking(STALL)
    };
    let wc = wc.ok_or_else(|| "no completion: the run stalled".to_string())?;
    if wc.status != WcStatus::Success {
        return Err(format!("work request failed: {wc:?}"));
    }
    Ok(wc)
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

fn bandwidth(ends: &Ends, workload: &Workload) -> Result<(f64, f64), String> {
    let iters = workload.iters;
    let send = workload.op == Op::Send;
    let depth = iters + workload.tx_depth + 16;
    let (client, server) = connect(ends, workload, workload.size, depth, |server| {
        // Every receive is posted before the run: a Send finding none
        // would be a protocol error, not a slow measurement.
        if send {
            for i in 0..iters {
                let wr = RecvWr {
                    wr_id: i as u64,
                    sgl: vec![server.mr.whole()],
                };
                server.qp.post_recv(wr).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    })?;
    let op = match workload.op {
        Op::Write => SendOp::Write {
            remote_addr: server.mr.addr(),
            rkey: server.mr.rkey(),
        },
        Op::Read => SendOp::Read {
            remote_addr: server.mr.addr(),
            rkey: server.mr.rkey(),
        },
        Op::Send => SendOp::Send,
    };
    let sge = client.mr.sge(0, workload.size as u32);
    let stop = AtomicBool::new(false);
    let elapsed = std::thread::scope(|scope| -> Result<f64, String> {
        let serving = scope.spawn(|| -> Result<(), String> {
            if ends.inline() {
                pin(1);
            }
            if send {
                // A Send is done when it has arrived.
                for _ in 0..iters {
                    wait(ends, &server.cq)?;
                }
            }
            keep_running(ends, &ends.server, &stop);
            Ok(())
        });
        let start = Instant::now();
        let (mut posted, mut completed) = (0, 0);
        let mut result = Ok(());
        while completed < iters && result.is_ok() {
            while posted < iters && posted - completed < workload.tx_depth {
                let wr = SendWr::new(posted as u64, op, Payload::Sgl(vec![sge]));
                if let Err(err) = client.qp.post_send(wr) {
                    result = Err(err.to_string());
                    break;
                }
                posted += 1;
            }
            result = result.and(wait(ends, &client.cq).map(drop));
            completed += 1;
        }
        if result.is_err() {
            client.qp.abort();
        }
        stop.store(true, Ordering::Release);
        let served = serving
            .join()
            .map_err(|_| "the server thread panicked".to_string())?;
        result.and(served)?;
        Ok(start.elapsed().as_secs_f64())
    })?;
    close(ends, &client, &server);
    Ok((
        (workload.size * iters * 8) as f64 / elapsed / 1e9,
        iters as f64 / elapsed,
    ))
}

/// The round number the last octets of a latency message carry (one
/// octet for a 1-octet message, up to eight).
fn stamp(round: u64, size: usize) -> Vec<u8> {
    let width = size.clamp(1, 8);
    round.to_le_bytes()[..width].to_vec()
}

/// Waits until the last octets of the sink half of `mr` (its first
/// `size` octets, where the peer writes) read `want`, running the end's
/// cores.
fn await_stamp(
    ends: &Ends,
    device: &Device,
    mr: &MemoryRegion,
    size: usize,
    want: &[u8],
) -> Result<(), String> {
    let at = size - want.len();
    let mut seen = vec![0u8; want.len()];
    let deadline = Instant::now() + STALL;
    loop {
        mr.buffer()
            .read_at(at, &mut seen)
            .map_err(|e| e.to_string())?;
        if seen == want {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("no Write arrived: the latency run stalled".into());
        }
        if ends.inline() {
            device.progress();
        } else {
            std::thread::yield_now();
        }
    }
}

/// One RDMA Write of the source half of `end`'s region (its second
/// `size` octets), stamped with `round`, into the sink half of `remote`.
fn write_stamped(end: &End, remote: &MemoryRegion, round: u64, size: usize) -> Result<(), String> {
    let tail = stamp(round, size);
    end.mr
        .buffer()
        .write_at(2 * size - tail.len(), &tail)
        .map_err(|e| e.to_string())?;
    let op = SendOp::Write {
        remote_addr: remote.addr(),
        rkey: remote.rkey(),
    };
    let source = end.mr.sge(size, size as u32);
    let wr = SendWr {
        signaled: false,
        ..SendWr::new(round, op, Payload::Sgl(vec![source]))
    };
    end.qp.post_send(wr).map_err(|e| e.to_string())
}

fn latency(ends: &Ends, workload: &Workload) -> Result<Latency, String> {
    let size = workload.latency_size.max(1);
    let rounds = workload.latency_iters as u64;
    // Each region is a sink the peer writes into, then a source.
    let (client, server) = connect(ends, workload, 2 * size, 64, |_| Ok(()))?;
    let mut histogram = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<(), String> {
        let echo = scope.spawn(|| -> Result<(), String> {
            if ends.inline() {
                pin(1);
            }
            for round in 1..=rounds {
                await_stamp(ends, &ends.server, &server.mr, size, &stamp(round, size))?;
                write_stamped(&server, &client.mr, round, size)?;
            }
            // Inline cores send the last answer only when they run.
            keep_running(ends, &ends.server, &done);
            Ok(())
        });
        let mut result = Ok(());
        for round in 1..=rounds {
            let sent = Instant::now();
            result = write_stamped(&client, &server.mr, round, size).and_then(|()| {
                await_stamp(ends, ends.client(), &client.mr, size, &stamp(round, size))
            });
            if result.is_err() {
                client.qp.abort();
                break;
            }
            let _ = histogram.record(sent.elapsed().as_nanos() as u64 / 2);
        }
        done.store(true, Ordering::Release);
        let echoed = echo
            .join()
            .map_err(|_| "the echo thread panicked".to_string())?;
        result.and(echoed)
    })?;
    close(ends, &client, &server);
    let at = |q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
    Ok(Latency {
        p50_us: at(0.5),
        p90_us: at(0.9),
        p99_us: at(0.99),
        p999_us: at(0.999),
        max_us: histogram.max() as f64 / 1e3,
    })
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
        servers.push(End::new(&ends.server, 64, 16)?);
        clients.push(End::new(ends.client(), 64, 16)?);
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
