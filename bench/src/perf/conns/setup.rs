//! Setting up and tearing down a `conns` run: each end's memory and
//! completion queue, then `count` connections (TCP plus the MPA startup
//! in revision 2 with a Write RTR), one after another, the client
//! connecting on this thread while the server accepts on another (each
//! thread runs its own device's cores), and at the end a graceful close
//! of every one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uwarp::{
    Access, CompletionQueue, ConnectParams, Device, LocalParams, MemoryRegion, QpInit, QpState,
    QueuePair, RtrSet,
};

use super::pair::{Pair, SERVER_IP};
use crate::perf::endpoint::STALL;
use crate::perf::transport::pin;

/// How long the accepting side waits for a request before it looks
/// whether the connecting side gave up.
const REQUEST_POLL: Duration = Duration::from_millis(50);

/// One end's resources: a completion queue for all its queue pairs, one
/// region, and the queue pairs.
pub(super) struct End {
    pub(super) cq: CompletionQueue,
    pub(super) region: MemoryRegion,
    pub(super) qps: Vec<QueuePair>,
    pd: uwarp::ProtectionDomain,
}

impl End {
    /// A region of `len` octets (every page touched, so that it counts as
    /// resident before the connections are measured) and a completion
    /// queue of `cq_depth` entries; no queue pairs yet.
    pub(super) fn new(device: &Device, len: usize, cq_depth: usize) -> Result<Self, String> {
        let pd = device.alloc_pd().map_err(|e| e.to_string())?;
        let region = pd
            .alloc_mr(len, Access::ALL)
            .map_err(|e| format!("cannot register {len} octets: {e}"))?;
        region.buffer().fill(0);
        Ok(End {
            cq: device.create_cq(cq_depth),
            region,
            qps: Vec::new(),
            pd,
        })
    }

    /// Creates `count` queue pairs on `device`, all reporting to the
    /// completion queue.
    pub(super) fn create_qps(&mut self, device: &Device, count: usize) {
        self.qps = (0..count)
            .map(|_| device.create_qp(&self.pd, QpInit::new(&self.cq)))
            .collect();
    }
}

/// The MPA settings of both ends: revision 2 (the default), CRCs as
/// asked, peer-to-peer with the RTRs uwarp offers (it picks Write).
fn params(crc: bool) -> LocalParams {
    LocalParams {
        crc,
        peer_to_peer: Some(RtrSet::WRITE_AND_READ),
        ..LocalParams::default()
    }
}

/// Connects every client queue pair to the server queue pair of the same
/// index; returns how long it took.
pub(super) fn connect_all(
    pair: &Pair,
    client: &End,
    server: &End,
    crc: bool,
) -> Result<Duration, String> {
    let listener = pair
        .server
        .listen(format!("{SERVER_IP}:0"))
        .map_err(|e| format!("listen: {e}"))?;
    let addr = listener.local_addr();
    // Set when a connect failed: no more requests will come.
    let gave_up = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let accepting = scope.spawn(|| -> Result<(), String> {
            pin(1);
            for (index, qp) in server.qps.iter().enumerate() {
                let deadline = Instant::now() + STALL;
                let request = loop {
                    match listener.get_request(REQUEST_POLL) {
                        Ok(request) => break request,
                        Err(_) if gave_up.load(Ordering::Acquire) => return Ok(()),
                        Err(e) if Instant::now() >= deadline => {
                            return Err(format!("connection {index}: no request: {e}"))
                        }
                        Err(_) => {}
                    }
                };
                request
                    .accept(qp, params(crc))
                    .map_err(|e| format!("connection {index}: accept: {e}"))?;
            }
            Ok(())
        });
        let start = Instant::now();
        let mut connected = Ok(());
        for (index, qp) in client.qps.iter().enumerate() {
            let request = ConnectParams {
                mpa: params(crc),
                ..ConnectParams::default()
            };
            if let Err(err) = pair.client.connect(addr, qp, request) {
                connected = Err(format!("connection {index}: connect: {err}"));
                gave_up.store(true, Ordering::Release);
                break;
            }
        }
        let elapsed = start.elapsed();
        let accepted = accepting
            .join()
            .unwrap_or_else(|_| Err("the accepting thread panicked".into()));
        connected.and(accepted).map(|()| elapsed)
    })
}

/// Disconnects every client queue pair and steps both ends until every
/// queue pair of both is closed (in Error, RFC 5040 section 6's end of
/// a stream); returns how long it took. An error if none closes for
/// [`STALL`].
pub(super) fn close_all(pair: &Pair, client: &End, server: &End) -> Result<Duration, String> {
    let start = Instant::now();
    for qp in &client.qps {
        qp.disconnect();
    }
    let mut open = client.qps.iter().chain(&server.qps).peekable();
    let mut last_closed = Instant::now();
    while let Some(qp) = open.peek() {
        if qp.state() == QpState::Error {
            open.next();
            last_closed = Instant::now();
            continue;
        }
        if last_closed.elapsed() > STALL {
            return Err(format!("a queue pair is still {:?}", qp.state()));
        }
        pair.step();
        drain(&client.cq);
        drain(&server.cq);
    }
    Ok(start.elapsed())
}

/// Takes whatever a completion queue holds (the closes flush what was
/// still posted).
fn drain(cq: &CompletionQueue) {
    let mut out = Vec::new();
    while cq.poll(&mut out, 64) > 0 {
        out.clear();
    }
}
