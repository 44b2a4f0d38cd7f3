//! A run between a client and a server, over any [`Device`]: the
//! connections (one per queue pair, the [`Hello`] in the Request and the
//! server's region in the Reply), then one measurement per message size,
//! each framed by control messages:
//!
//! ```text
//! client                         server
//! Begin {size, stop}   ───────▶  clears its sink, refills its source
//!                      ◀───────  Ready {credits}
//! the loop of the mode ◀──────▶  its side of the loop (Credits, for Sends)
//! End {what it measured} ─────▶  checks the data it holds
//!                      ◀───────  Verdict {problem}
//! ... the next size ...
//! Bye                  ───────▶
//!                      ◀───────  Bye
//! disconnects          ───────▶  waits for the close
//! ```
//!
//! Both sides come out with the same [`Outcome`]: the numbers are the
//! client's, the data checks both sides' (see [`Mode::verification`]).

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use uwarp::{
    ConnectParams, Connection, Device, Error, IncomingRequest, Listener, LocalParams, Negotiated,
    QpCounters, Revision, RtrSet,
};

use super::endpoint::{
    stamp_len, Endpoint, Resources, Shape, Waiting, CLIENT_SEED, SERVER_SEED, STALL,
};
use super::loops;
use super::progress::Progress;
use super::protocol::{decode_reply, encode_reply, mailbox_slots, Control, Hello, Stop, Summary};
use super::{Metric, Mode, Op};

/// The MPA settings a side asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mpa {
    /// The revision (both sides must speak the same).
    pub revision: Revision,
    /// Ask for CRCs.
    pub crc: bool,
    /// Ask the peer for Markers.
    pub markers: bool,
    /// The client: the peer-to-peer RTRs it offers (`None`: the
    /// client-server model). The server accepts any.
    pub p2p: Option<RtrSet>,
}

impl Mpa {
    fn params(&self, peer_to_peer: Option<RtrSet>, private_data: Vec<u8>) -> LocalParams {
        LocalParams {
            revision: self.revision,
            crc: self.crc,
            markers: self.markers,
            peer_to_peer,
            private_data,
            ..LocalParams::default()
        }
    }
}

/// What the client runs.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The test.
    pub mode: Mode,
    /// Message sizes, one measurement each, in order.
    pub sizes: Vec<usize>,
    /// When each measurement stops.
    pub stop: Stop,
    /// Queue pairs (connections) the messages are spread over.
    pub qps: usize,
    /// Work requests outstanding on each queue pair (bandwidth).
    pub tx_depth: usize,
    /// Writes and Sends up to this size are posted inline.
    pub inline: usize,
    /// MPA settings.
    pub mpa: Mpa,
    /// Draw a progress bar for long measurements.
    pub progress: bool,
}

/// What the server runs.
#[derive(Debug, Clone)]
pub struct ServerRun {
    /// The test it serves (a client asking for another is rejected).
    pub mode: Mode,
    /// Writes and Sends up to this size are posted inline.
    pub inline: usize,
    /// MPA settings.
    pub mpa: Mpa,
    /// How long to wait for the client (`None`: for ever).
    pub wait: Option<Duration>,
}

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Message size.
    pub size: usize,
    /// What the client measured.
    pub summary: Summary,
}

impl Phase {
    /// Gbit/s and messages per second of a bandwidth run (`None` for a
    /// latency run).
    pub fn bandwidth(&self) -> Option<(f64, f64)> {
        if self.summary.latency.is_some() || self.summary.seconds <= 0.0 {
            return None;
        }
        let messages = self.summary.messages() as f64;
        let seconds = self.summary.seconds;
        Some((
            self.size as f64 * messages * 8.0 / seconds / 1e9,
            messages / seconds,
        ))
    }
}

/// A finished run, on either side.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What MPA negotiated (on the first queue pair).
    pub negotiated: Negotiated,
    /// This side's address.
    pub local: SocketAddr,
    /// The peer's address.
    pub peer: SocketAddr,
    /// Queue pairs.
    pub qps: usize,
    /// The client's send queue depth.
    pub tx_depth: usize,
    /// The measurements, one per size.
    pub phases: Vec<Phase>,
    /// What this side's queue pairs carried.
    pub counters: QpCounters,
}

/// The run's number, telling its queue pairs from another client's.
fn session_number() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}

/// Runs the client against the server at `peer`, its thread waiting as
/// `waiting` says.
pub fn run_client(
    device: &Device,
    waiting: Waiting,
    peer: SocketAddr,
    run: &ClientRun,
) -> Result<Outcome, String> {
    let max = run.sizes.iter().copied().max().unwrap_or(1);
    let slots = mailbox_slots(run.qps);
    let shape = Shape {
        qps: run.qps,
        max,
        receives: slots,
        sends: run.tx_depth,
        inline: run.inline,
    };
    let resources = Resources::new(device, shape)?;
    let session = session_number();
    let mut first: Option<(Connection, _)> = None;
    for (index, qp) in resources.qps.iter().enumerate() {
        let hello = Hello {
            mode: run.mode,
            qps: run.qps as u8,
            index: index as u8,
            session,
            tx_depth: run.tx_depth as u32,
            region: resources.region(),
        };
        let params = ConnectParams {
            mpa: run.mpa.params(run.mpa.p2p, hello.encode()),
            ..ConnectParams::default()
        };
        let connection = device
            .connect(peer, qp, params)
            .map_err(|e| connect_error(peer, e))?;
        let region = decode_reply(&connection.private_data)
            .map_err(|e| format!("the server at {peer}: {e}"))?;
        first.get_or_insert((connection, region));
    }
    let (connection, remote) = first.ok_or("a run needs a queue pair")?;
    let mut ep = resources.connected(remote, waiting);
    let mut phases = Vec::with_capacity(run.sizes.len());
    for &size in &run.sizes {
        let phase = client_phase(&mut ep, run, size).map_err(|e| format!("{size} B: {e}"))?;
        phases.push(phase);
    }
    // Disconnecting before the server has the Bye would flush its
    // receives on the other queue pairs first, which it would take for a
    // failure: the server answers the Bye, then the client hangs up.
    ep.send_control(&Control::Bye)?;
    let counters = ep.counters();
    match ep.control()? {
        Control::Bye => ep.close(true),
        other => return Err(format!("expected the server's Bye, got {other:?}")),
    }
    Ok(Outcome {
        negotiated: connection.negotiated,
        local: connection.local_addr,
        peer: connection.peer_addr,
        qps: run.qps,
        tx_depth: run.tx_depth,
        phases,
        counters,
    })
}

/// Why `connect` failed, in words.
fn connect_error(peer: SocketAddr, err: Error) -> String {
    match err {
        Error::Io(e) if e.kind() == ErrorKind::ConnectionRefused => {
            format!("{peer} refused the connection: nothing listens there (is the server running?)")
        }
        Error::Io(e) if e.kind() == ErrorKind::HostUnreachable => {
            format!("{peer} is unreachable: no host answered for its address")
        }
        Error::Io(e) if e.kind() == ErrorKind::TimedOut => {
            format!("connecting to {peer} timed out: nobody answered")
        }
        Error::Rejected { private_data } => format!(
            "the server at {peer} rejected the run: {}",
            String::from_utf8_lossy(&private_data)
        ),
        other => format!("cannot connect to {peer}: {other}"),
    }
}

/// One measurement, on the client.
fn client_phase(ep: &mut Endpoint<'_>, run: &ClientRun, size: usize) -> Result<Phase, String> {
    ep.clear_sink(size)?;
    ep.fill_source(size, CLIENT_SEED)?;
    ep.send_control(&Control::Begin {
        size: size as u64,
        stop: run.stop,
    })?;
    let credits = match ep.control()? {
        Control::Ready { credits } => credits,
        other => return Err(format!("expected Ready, got {other:?}")),
    };
    let mut progress = Progress::new(run.progress, format!("{size} B"), run.stop);
    let summary = match run.mode.metric {
        Metric::Bandwidth => loops::bandwidth(
            ep,
            run.mode.op,
            size,
            run.stop,
            run.tx_depth,
            credits,
            &mut progress,
        ),
        Metric::Latency => loops::ping(ep, run.mode, size, run.stop, &mut progress),
    }?;
    progress.finish();
    // What the client checks itself: what it read, and what the server
    // answered in a ping-pong (all but the stamp).
    let mismatch = match (run.mode.op, run.mode.metric) {
        (Op::Read, _) => ep.check_sink(size, SERVER_SEED)?,
        (_, Metric::Latency) => ep.check_sink(size - stamp_len(size), SERVER_SEED)?,
        _ => None,
    };
    ep.send_control(&Control::End(summary.clone()))?;
    let problem = match ep.control()? {
        Control::Verdict { problem } => problem,
        other => return Err(format!("expected the Verdict, got {other:?}")),
    };
    if let Some(at) = mismatch {
        return Err(format!(
            "the data from the server differs from its pattern at octet {at}"
        ));
    }
    match problem {
        Some(problem) => Err(format!("the server found a problem: {problem}")),
        None => Ok(Phase { size, summary }),
    }
}

/// The next connection request, waiting up to `wait` (`None`: for ever).
fn next_request(listener: &Listener, wait: Option<Duration>) -> Result<IncomingRequest, String> {
    loop {
        match listener.get_request(wait.unwrap_or(Duration::from_secs(1))) {
            Ok(request) => return Ok(request),
            Err(Error::Timeout) if wait.is_none() => continue,
            Err(Error::Timeout) => return Err("no client connected".into()),
            Err(e) => return Err(format!("waiting for a client: {e}")),
        }
    }
}

/// Rejects `request` with `reason` as its private data; returns `reason`.
fn refuse(request: IncomingRequest, reason: String) -> String {
    let mut end = reason.len().min(256);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let _ = request.reject(&reason.as_bytes()[..end]);
    reason
}

/// Serves one client's run on `listener`, its thread waiting as
/// `waiting` says.
pub fn serve(
    device: &Device,
    waiting: Waiting,
    listener: &Listener,
    run: &ServerRun,
) -> Result<Outcome, String> {
    let request = next_request(listener, run.wait)?;
    let peer = request.peer_addr;
    let hello = match Hello::decode(request.private_data()) {
        Ok(hello) => hello,
        Err(e) => return Err(refuse(request, format!("{peer}: {e}"))),
    };
    if hello.mode != run.mode {
        let reason = format!(
            "this server runs {}, the client asked for {}",
            run.mode.name(),
            hello.mode.name()
        );
        return Err(refuse(request, reason));
    }
    let qps = usize::from(hello.qps);
    let window = (2 * hello.tx_depth as usize).clamp(16, 4096);
    let shape = Shape {
        qps,
        max: usize::try_from(hello.region.max).map_err(|e| e.to_string())?,
        receives: window,
        // The server's own work requests are unsignaled.
        sends: 0,
        inline: run.inline,
    };
    let resources = Resources::new(device, shape)?;
    let reply = encode_reply(&resources.region());
    let server = |private_data| run.mpa.params(Some(RtrSet::ALL), private_data);
    let connection = request
        .accept(&resources.qps[0], server(reply.clone()))
        .map_err(|e| format!("accepting {peer}: {e}"))?;
    for index in 1..qps {
        let request = next_request(listener, Some(STALL))?;
        match Hello::decode(request.private_data()) {
            Ok(more) if more.session == hello.session && usize::from(more.index) == index => {
                request
                    .accept(&resources.qps[index], server(reply.clone()))
                    .map_err(|e| format!("accepting queue pair {index}: {e}"))?;
            }
            _ => {
                return Err(refuse(
                    request,
                    format!("expected queue pair {index} of the run from {peer}"),
                ))
            }
        }
    }
    let mut ep = resources.connected(hello.region, waiting);
    let mut phases = Vec::new();
    loop {
        match ep.control()? {
            // Zero-length messages only where no stamp must fit in them.
            Control::Begin { size, stop: _ }
                if size <= hello.region.max
                    && (size > 0 || run.mode.metric == Metric::Bandwidth) =>
            {
                let (phase, problem) = server_phase(&mut ep, run.mode, size as usize)?;
                ep.send_control(&Control::Verdict {
                    problem: problem.clone(),
                })?;
                if let Some(problem) = problem {
                    // The client hangs up on the Verdict; then this side.
                    let _ = ep.control();
                    return Err(format!("{} B: {problem}", phase.size));
                }
                phases.push(phase);
            }
            Control::Bye => break,
            other => return Err(format!("unexpected from the client: {other:?}")),
        }
    }
    ep.send_control(&Control::Bye)?;
    let counters = ep.counters();
    ep.close(false);
    Ok(Outcome {
        negotiated: connection.negotiated,
        local: connection.local_addr,
        peer: connection.peer_addr,
        qps,
        tx_depth: hello.tx_depth as usize,
        phases,
        counters,
    })
}

/// One measurement, on the server: the phase and what its check of the
/// data found wrong.
fn server_phase(
    ep: &mut Endpoint<'_>,
    mode: Mode,
    size: usize,
) -> Result<(Phase, Option<String>), String> {
    ep.clear_sink(size)?;
    ep.fill_source(size, SERVER_SEED)?;
    ep.send_control(&Control::Ready {
        credits: ep.receives() as u64,
    })?;
    let differs = |at: Option<usize>| {
        at.map(|at| format!("the last message differs from the client's pattern at octet {at}"))
    };
    let (summary, problem) = match (mode.op, mode.metric) {
        (Op::Send, Metric::Bandwidth) => {
            let summary = loops::absorb_sends(ep, size)?;
            (summary, differs(ep.check_sink(size, CLIENT_SEED)?))
        }
        (_, Metric::Latency) if mode.op != Op::Read => {
            let (rounds, summary) = loops::echo(ep, mode.op, size)?;
            let problem = if summary.counts != [rounds] {
                Some(format!(
                    "the client counted {:?} round trips, the server answered {rounds}",
                    summary.counts
                ))
            } else {
                differs(ep.check_sink(size - stamp_len(size), CLIENT_SEED)?)
            };
            (summary, problem)
        }
        (op, _) => {
            let summary = match ep.control()? {
                Control::End(summary) => summary,
                other => return Err(format!("expected the End, got {other:?}")),
            };
            let problem = if op == Op::Write {
                differs(ep.check_sink(size, CLIENT_SEED)?)
            } else {
                None
            };
            (summary, problem)
        }
    };
    Ok((Phase { size, summary }, problem))
}
