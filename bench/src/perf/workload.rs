//! The RDMA side of a loopback run: a client and a server queue pair on
//! one device (the socket transport), connected over loopback TCP.
//! Bandwidth keeps `tx_depth` work requests outstanding until `iters`
//! complete, like perftest's `ib_*_bw`; latency is a Send ping-pong,
//! reported as half the round trip, like `ib_send_lat`.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use uwarp_control::{
    Access, CompletionQueue, ConnectParams, Device, DeviceConfig, LocalParams, MemoryRegion,
    Payload, QpInit, QueuePair, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion,
};

use super::Measurement;

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
    /// Message size in octets.
    pub size: usize,
    /// Messages in the bandwidth run.
    pub iters: usize,
    /// Round trips in the latency run.
    pub latency_iters: usize,
    /// Work requests kept outstanding in the bandwidth run.
    pub tx_depth: usize,
    /// Ask for MPA CRCs.
    pub crc: bool,
}

/// How long one completion may take before the run is declared stuck.
const STALL: Duration = Duration::from_secs(20);

struct Ends {
    _device: Device,
    client: QueuePair,
    client_cq: CompletionQueue,
    server: QueuePair,
    server_cq: CompletionQueue,
    client_mr: MemoryRegion,
    server_mr: MemoryRegion,
}

fn connect(
    workload: &Workload,
    prepare_server: impl FnOnce(&QueuePair, &MemoryRegion),
) -> Result<Ends, String> {
    let device = Device::open(DeviceConfig::default()).map_err(|e| e.to_string())?;
    let pd = device.alloc_pd().map_err(|e| e.to_string())?;
    let depth = workload.iters.max(workload.latency_iters) + workload.tx_depth + 16;
    let client_cq = device.create_cq(depth);
    let server_cq = device.create_cq(depth);
    let client = device.create_qp(&pd, QpInit::new(&client_cq));
    let server = device.create_qp(&pd, QpInit::new(&server_cq));
    let all = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    let len = workload.size.max(1);
    let client_mr = pd.alloc_mr(len, all).map_err(|e| e.to_string())?;
    let server_mr = pd.alloc_mr(len, all).map_err(|e| e.to_string())?;
    client_mr.buffer().fill(0x5A);
    prepare_server(&server, &server_mr);
    let listener = device.listen("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr();
    let accepting = server.clone();
    let acceptor = std::thread::spawn(move || -> Result<(), String> {
        let request = listener.get_request(STALL).map_err(|e| e.to_string())?;
        request
            .accept(&accepting, LocalParams::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let params = ConnectParams {
        mpa: LocalParams {
            crc: workload.crc,
            ..LocalParams::default()
        },
        ..ConnectParams::default()
    };
    device
        .connect(addr, &client, params)
        .map_err(|e| e.to_string())?;
    acceptor
        .join()
        .map_err(|_| "the acceptor panicked".to_string())??;
    Ok(Ends {
        _device: device,
        client,
        client_cq,
        server,
        server_cq,
        client_mr,
        server_mr,
    })
}

fn wait(cq: &CompletionQueue) -> Result<WorkCompletion, String> {
    let wc = cq
        .poll_blocking(STALL)
        .ok_or_else(|| "no completion: the run stalled".to_string())?;
    if wc.status != WcStatus::Success {
        return Err(format!("work request failed: {wc:?}"));
    }
    Ok(wc)
}

/// Measures bandwidth with `workload.op`, then Send ping-pong latency.
pub fn run(workload: &Workload) -> Result<Measurement, String> {
    let (bw_gbps, msg_rate) = bandwidth(workload)?;
    let (lat_p50_us, lat_p99_us) = latency(workload)?;
    Ok(Measurement {
        bw_gbps,
        msg_rate,
        lat_p50_us,
        lat_p99_us,
    })
}

fn bandwidth(workload: &Workload) -> Result<(f64, f64), String> {
    let iters = workload.iters;
    let send = workload.op == Op::Send;
    let ends = connect(workload, |server, mr| {
        // Every receive is posted before the run: a Send finding none
        // would be a protocol error, not a slow measurement.
        if send {
            for i in 0..iters {
                let wr = RecvWr {
                    wr_id: i as u64,
                    sgl: vec![mr.whole()],
                };
                let _ = server.post_recv(wr);
            }
        }
    })?;
    let op = match workload.op {
        Op::Write => SendOp::Write {
            remote_addr: ends.server_mr.addr(),
            rkey: ends.server_mr.rkey(),
        },
        Op::Read => SendOp::Read {
            remote_addr: ends.server_mr.addr(),
            rkey: ends.server_mr.rkey(),
        },
        Op::Send => SendOp::Send,
    };
    let sge = ends.client_mr.sge(0, workload.size as u32);
    let start = Instant::now();
    let (mut posted, mut completed) = (0, 0);
    while completed < iters {
        while posted < iters && posted - completed < workload.tx_depth {
            let wr = SendWr::new(posted as u64, op, Payload::Sgl(vec![sge]));
            ends.client.post_send(wr).map_err(|e| e.to_string())?;
            posted += 1;
        }
        wait(&ends.client_cq)?;
        completed += 1;
    }
    if send {
        // A Send is done when it has arrived.
        for _ in 0..iters {
            wait(&ends.server_cq)?;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok((
        (workload.size * iters * 8) as f64 / elapsed / 1e9,
        iters as f64 / elapsed,
    ))
}

fn latency(workload: &Workload) -> Result<(f64, f64), String> {
    let rounds = workload.latency_iters;
    let ends = connect(workload, |server, mr| {
        let _ = server.post_recv(RecvWr {
            wr_id: 0,
            sgl: vec![mr.whole()],
        });
    })?;
    let server = ends.server.clone();
    let server_cq = ends.server_cq.clone();
    let reply_sge = ends.server_mr.sge(0, workload.size as u32);
    let echo = std::thread::spawn(move || -> Result<(), String> {
        for _ in 0..rounds {
            loop {
                let wc = wait(&server_cq)?;
                if wc.opcode == uwarp_control::WcOpcode::Recv {
                    break;
                }
            }
            server
                .post_recv(RecvWr {
                    wr_id: 0,
                    sgl: vec![reply_sge],
                })
                .map_err(|e| e.to_string())?;
            let wr = SendWr {
                signaled: false,
                ..SendWr::new(1, SendOp::Send, Payload::Sgl(vec![reply_sge]))
            };
            server.post_send(wr).map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let mut histogram = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let sge = ends.client_mr.sge(0, workload.size as u32);
    for _ in 0..rounds {
        ends.client
            .post_recv(RecvWr {
                wr_id: 9,
                sgl: vec![ends.client_mr.whole()],
            })
            .map_err(|e| e.to_string())?;
        let sent = Instant::now();
        let wr = SendWr {
            signaled: false,
            ..SendWr::new(8, SendOp::Send, Payload::Sgl(vec![sge]))
        };
        ends.client.post_send(wr).map_err(|e| e.to_string())?;
        wait(&ends.client_cq)?;
        let _ = histogram.record(sent.elapsed().as_nanos() as u64 / 2);
    }
    echo.join()
        .map_err(|_| "the echo thread panicked".to_string())??;
    Ok((
        histogram.value_at_quantile(0.5) as f64 / 1e3,
        histogram.value_at_quantile(0.99) as f64 / 1e3,
    ))
}
