//! [`RdmaStream`]: iWARP above one TCP connection of the DPDK transport.
//!
//! It is the connection's [`TcpApp`], so it runs where the connection
//! runs. On the control core it carries out the MPA startup phase (RFC
//! 5044 section 7.1, RFC 6581): the initiator sends its Request once TCP
//! is established and waits for the Reply; the responder waits for the
//! Request, hands it to the application as an [`IncomingRequest`] and
//! answers as the application decides. It asks to leave the control
//! core only in Full Operation; on its dataplane core it runs the queue
//! pair's engine (RFC 5040, RFC 5041): octets TCP delivers in order go
//! straight to the engine, each FPDU the engine makes is queued as one TCP
//! record (RFC 5044 section 5.2, so segments start with FPDUs), and the
//! application's doorbell brings new work requests in.

use std::net::{SocketAddr, SocketAddrV4};

use crossbeam_channel::Sender;
use uwarp_stack::mpa::{Initiator, LocalParams, Micros, Negotiated, Responder};
use uwarp_stack::rdmap::{EngineConfig, LlpClose, QpEngine, Role};
use uwarp_stack::tcp::{
    Connection, Consumer, Disposition, Duration, Endpoint, Event, Instant, State, Stats,
};
use uwarp_stack::verbs::QpState;
use uwarp_stack::wire::fpdu::mulpdu;

use crate::cm::{ConnectParams, Connection as Established, ControlCmd, IncomingRequest};
use crate::counters::TransportCounters;
use crate::device::Shared;
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::QueuePair;
use crate::qp_link::{QpLink, CLOSE_TIMEOUT};
use uwarp_control::startup::{Attempt, InitiatorDecision, Progress, Side, Startup};
use uwarp_dataplane::tcp::{Doorbell, End, TcpApp};

/// Where a stream's answer to the application goes: `connect` and
/// `accept` wait on it.
type Answer = Sender<Result<Established, Error>>;

/// What a stream needs from its device.
#[derive(Clone)]
pub(crate) struct StreamContext {
    /// The device's STag table.
    pub(crate) shared: Shared,
    /// The control core's command queue (requests carry it; a revision-1
    /// retry goes through it).
    pub(crate) control: Sender<ControlCmd>,
    /// How long a responder waits for the Request.
    pub(crate) startup_timeout: Micros,
    /// The smallest payload sent from registered memory by reference
    /// ([`DpdkConfig::zero_copy_from`](crate::DpdkConfig::zero_copy_from)).
    pub(crate) zero_copy_from: Option<usize>,
}

/// An active open, waiting for the Reply.
struct Initiating {
    startup: Startup,
    request_sent: bool,
    qp: QueuePair,
    params: ConnectParams,
    /// Whether this is the one retry in revision 1.
    retry: bool,
    answer: Answer,
}

/// A passive open, waiting for the Request.
struct Responding {
    startup: Startup,
    requests: Sender<IncomingRequest>,
}

/// A Request handed to the application, waiting for its decision.
struct Deciding {
    responder: Responder,
    private_data: Vec<u8>,
    /// Octets that followed the Request.
    leftover: Vec<u8>,
}

/// An accepted active open holding its first FPDU back for `delay`
/// ([`ConnectParams::first_fpdu_delay`]); Full Operation starts then.
struct Holding {
    start: Start,
    /// Octets that followed the Reply, and what arrived since.
    leftover: Vec<u8>,
    delay: Micros,
    /// When the hold ends, set when the stream is first driven after the
    /// Reply.
    until: Option<Micros>,
}

/// Full Operation.
struct Operating {
    link: QpLink,
    /// The TCP stream position of the engine's offset 0, the first octet
    /// of Full Operation.
    base: u64,
    /// The same for the octets the engine sends.
    tx_base: u64,
    /// The answer to `connect` or `accept`, sent once on a dataplane core.
    answer: Option<(Answer, Established)>,
    doorbell: Option<Doorbell>,
    closed: bool,
    /// Whether the connection has its linger after a Terminate.
    lingering: bool,
    /// Whether our FPDUs carry Markers, and the EMSS the MULPDU is from.
    markers_tx: bool,
    emss: usize,
}

/// What Full Operation starts from.
struct Start {
    negotiated: Negotiated,
    role: Role,
    qp: QueuePair,
    private_data: Vec<u8>,
    answer: Answer,
}

enum Phase {
    Initiating(Box<Initiating>),
    Responding(Responding),
    Deciding(Box<Deciding>),
    Holding(Box<Holding>),
    Operating(Box<Operating>),
    /// Rejected, failed or ended: nothing more to do but close.
    Finished,
}

/// iWARP above one TCP connection.
pub struct RdmaStream {
    phase: Phase,
    context: StreamContext,
    /// The stream position of the next octet to read.
    rx_next: u64,
    /// What the receive path counted; `fpdus_split` is TCP's, read at
    /// each report.
    counters: TransportCounters,
}

impl RdmaStream {
    /// The active side: sends the Request for `params` once TCP is up;
    /// `retry` if this is the one retry in revision 1.
    pub(crate) fn initiator(
        context: StreamContext,
        now: Micros,
        qp: QueuePair,
        params: ConnectParams,
        retry: bool,
        answer: Answer,
    ) -> Result<Self, (Error, Answer)> {
        let timeout = params.timeout.as_micros() as Micros;
        let initiator = match Initiator::new(params.mpa.clone(), now, timeout) {
            Ok(initiator) => initiator,
            Err(err) => {
                let err = Error::Startup(uwarp_stack::mpa::StartupError::Malformed(err));
                return Err((err, answer));
            }
        };
        Ok(Self::in_phase(
            context,
            Phase::Initiating(Box::new(Initiating {
                startup: Startup::new(Side::Initiator(initiator)),
                request_sent: false,
                qp,
                params,
                retry,
                answer,
            })),
        ))
    }

    /// The passive side: its Request goes to `requests`.
    pub(crate) fn responder(
        context: StreamContext,
        now: Micros,
        requests: Sender<IncomingRequest>,
    ) -> Self {
        let responder = Responder::new(now, context.startup_timeout);
        Self::in_phase(
            context,
            Phase::Responding(Responding {
                startup: Startup::new(Side::Responder(responder)),
                requests,
            }),
        )
    }

    fn in_phase(context: StreamContext, phase: Phase) -> Self {
        RdmaStream {
            phase,
            context,
            rx_next: 0,
            counters: TransportCounters::default(),
        }
    }

    /// The application accepted the Request onto `qp`: the Reply goes out
    /// and Full Operation begins; `answer` hears once the stream runs on
    /// its dataplane core.
    pub(crate) fn accept(
        &mut self,
        conn: &mut Connection,
        qp: QueuePair,
        params: &LocalParams,
        answer: Answer,
    ) {
        let Phase::Deciding(deciding) = &mut self.phase else {
            let _ = answer.send(Err(Error::WrongState("the request is no longer pending")));
            return;
        };
        let (reply, negotiated) = match deciding.responder.accept(params) {
            Ok(accepted) => accepted,
            Err(err) => {
                let _ = answer.send(Err(Error::Startup(err)));
                return;
            }
        };
        if conn.send(&reply) != reply.len() {
            let _ = answer.send(Err(Error::WrongState("the connection no longer sends")));
            return;
        }
        let Phase::Deciding(deciding) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            unreachable!("matched above");
        };
        let Deciding {
            private_data,
            leftover,
            ..
        } = *deciding;
        let start = Start {
            negotiated,
            role: Role::Responder,
            qp,
            private_data,
            answer,
        };
        self.operate(conn, start, &leftover);
    }

    /// The application rejected the Request: the Reply carries
    /// `private_data`, then the connection closes.
    pub(crate) fn reject(
        &mut self,
        conn: &mut Connection,
        private_data: &[u8],
    ) -> Result<(), Error> {
        let Phase::Deciding(deciding) = &mut self.phase else {
            return Err(Error::WrongState("the request is no longer pending"));
        };
        let reply = deciding
            .responder
            .reject(&LocalParams::default(), private_data)?;
        self.phase = Phase::Finished;
        conn.send(&reply);
        conn.close();
        Ok(())
    }

    /// Starts Full Operation as `start` says; `leftover` are the octets
    /// that followed the last startup frame, the first of Full Operation.
    fn operate(&mut self, conn: &mut Connection, start: Start, leftover: &[u8]) {
        let Start {
            negotiated,
            role,
            qp,
            private_data,
            answer,
        } = start;
        let mulpdu = mulpdu(conn.emss(), negotiated.markers_tx);
        let engine = QpEngine::new(EngineConfig {
            negotiated,
            role,
            mulpdu,
            pd: qp.shared.pd,
            table: self.context.shared.table.clone(),
            srq: qp.shared.init.srq.clone(),
        });
        let established = Established {
            negotiated,
            private_data,
            local_addr: socket_addr(conn.local()),
            peer_addr: socket_addr(conn.remote()),
            mulpdu,
        };
        // Markers would fall inside a payload held by reference.
        let zero_copy_from = self
            .context
            .zero_copy_from
            .filter(|_| !negotiated.markers_tx);
        conn.set_references_from(zero_copy_from);
        let mut link = QpLink::new(engine, qp);
        // Receives posted before the connection came up take what arrived
        // with the last startup frame.
        link.take_work();
        self.phase = Phase::Operating(Box::new(Operating {
            link,
            base: self.rx_next - leftover.len() as u64,
            tx_base: conn.send_queued_end(),
            answer: Some((answer, established)),
            doorbell: None,
            closed: false,
            lingering: false,
            markers_tx: negotiated.markers_tx,
            emss: conn.emss(),
        }));
        self.feed_engine(leftover);
    }

    /// Octets of the stream, in order.
    fn on_stream(&mut self, conn: &mut Connection, data: &[u8]) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                let progress = initiating.startup.feed(data);
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.feed(data);
                self.on_responder_progress(conn, progress);
            }
            Phase::Deciding(deciding) => deciding.leftover.extend_from_slice(data),
            Phase::Holding(holding) => holding.leftover.extend_from_slice(data),
            Phase::Operating(_) => self.feed_engine(data),
            Phase::Finished => {}
        }
    }

    /// Octets of Full Operation, in order, into the engine; the stream
    /// then continues where the engine does (past FPDUs it had placed out
    /// of order).
    fn feed_engine(&mut self, data: &[u8]) {
        if let Phase::Operating(operating) = &mut self.phase {
            if !data.is_empty() {
                operating.link.engine.on_bytes(data);
            }
            self.rx_next = operating.base + operating.link.engine.rx_offset();
        }
    }

    fn on_initiator_progress(&mut self, conn: &mut Connection, progress: Progress) {
        let Phase::Initiating(initiating) = &self.phase else {
            return;
        };
        let attempt = Attempt {
            revision_1_fallback: initiating.params.revision_1_fallback,
            retry: initiating.retry,
        };
        let Some(decision) = initiating.startup.initiator_decision(progress, attempt) else {
            return;
        };
        let Phase::Initiating(initiating) = std::mem::replace(&mut self.phase, Phase::Finished)
        else {
            unreachable!("matched above");
        };
        let Initiating {
            qp,
            mut params,
            answer,
            ..
        } = *initiating;
        match decision {
            InitiatorDecision::Accepted {
                negotiated,
                private_data,
                leftover,
            } => {
                self.phase = Phase::Holding(Box::new(Holding {
                    start: Start {
                        negotiated,
                        role: Role::Initiator,
                        qp,
                        private_data,
                        answer,
                    },
                    leftover,
                    delay: params.first_fpdu_delay.as_micros() as Micros,
                    until: None,
                }));
            }
            InitiatorDecision::Rejected { private_data } => {
                let _ = answer.send(Err(Error::Rejected { private_data }));
                self.finish(conn);
            }
            InitiatorDecision::RetryInRevision1(mpa) => {
                params.mpa = mpa;
                let retry = ControlCmd::Connect {
                    addr: socket_addr(conn.remote()),
                    qp,
                    params,
                    reply: answer,
                    retry: true,
                };
                if let Err(crossbeam_channel::SendError(ControlCmd::Connect { reply, .. })) =
                    self.context.control.send(retry)
                {
                    let _ = reply.send(Err(Error::DeviceClosed));
                }
                self.finish(conn);
            }
            InitiatorDecision::Failed { terminate, error } => {
                if let Some(frame) = terminate {
                    // The responder is in Full Operation already and
                    // reports it (RFC 6581 section 9).
                    conn.send(&frame);
                }
                let _ = answer.send(Err(Error::Startup(error)));
                self.finish(conn);
            }
        }
    }

    fn on_responder_progress(&mut self, conn: &mut Connection, progress: Progress) {
        let Phase::Responding(responding) = &mut self.phase else {
            return;
        };
        match progress {
            Progress::Pending => {}
            Progress::Requested(request, leftover) => {
                let incoming = IncomingRequest {
                    request: request.clone(),
                    peer_addr: socket_addr(conn.remote()),
                    id: request_id(conn.local(), conn.remote()),
                    control: self.context.control.clone(),
                    decided: false,
                    driver: Driver::default(),
                };
                let requests = responding.requests.clone();
                let Phase::Responding(responding) =
                    std::mem::replace(&mut self.phase, Phase::Finished)
                else {
                    unreachable!("matched above");
                };
                let Side::Responder(responder) = responding.startup.side else {
                    unreachable!("a responding stream has a responder");
                };
                self.phase = Phase::Deciding(Box::new(Deciding {
                    responder,
                    private_data: request.private_data,
                    leftover,
                }));
                if requests.send(incoming).is_err() {
                    // The listener is gone.
                    self.phase = Phase::Finished;
                    conn.abort();
                }
            }
            Progress::Failed(_) => self.finish(conn),
            Progress::Replied(..) => unreachable!("a responder gets no Reply"),
        }
    }

    /// Ends the stream after a failed or refused startup.
    fn finish(&mut self, conn: &mut Connection) {
        self.phase = Phase::Finished;
        conn.close();
    }

    /// Reads what TCP holds in its reassembly buffer, in order.
    fn read_held(&mut self, conn: &mut Connection) {
        while let Some((pos, data)) = conn.received() {
            let end = pos + data.len() as u64;
            if end <= self.rx_next {
                conn.release_received(end);
                continue;
            }
            if pos > self.rx_next {
                // Octets between were neither held nor placed early: the
                // stream cannot go on.
                self.phase = Phase::Finished;
                conn.abort();
                return;
            }
            let fresh = data[(self.rx_next.saturating_sub(pos)) as usize..].to_vec();
            self.rx_next = end;
            if matches!(self.phase, Phase::Operating(_)) {
                // The startup frames are always read from the buffer; only
                // Full Operation counts.
                self.counters.bytes_reassembled += fresh.len() as u64;
            }
            conn.release_received(end);
            self.on_stream(conn, &fresh);
        }
    }

    /// Startup deadlines, and the Request once TCP is up.
    fn drive_startup(&mut self, now: Instant, conn: &mut Connection) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                if !initiating.request_sent && conn.state() == State::Established {
                    let Side::Initiator(initiator) = &initiating.startup.side else {
                        unreachable!("an initiating stream has an initiator");
                    };
                    let request = initiator.request();
                    initiating.request_sent = conn.send(request) == request.len();
                }
                let progress = initiating.startup.on_timer(now.micros());
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.on_timer(now.micros());
                self.on_responder_progress(conn, progress);
            }
            Phase::Holding(holding) => {
                let until = *holding.until.get_or_insert(now.micros() + holding.delay);
                if now.micros() >= until {
                    self.end_hold(conn);
                }
            }
            _ => {}
        }
    }

    /// Starts the Full Operation a holding stream waits for.
    fn end_hold(&mut self, conn: &mut Connection) {
        if let Phase::Holding(holding) = std::mem::replace(&mut self.phase, Phase::Finished) {
            self.operate(conn, holding.start, &holding.leftover);
        }
    }

    /// The peer closed or the connection failed during the startup.
    fn startup_closed(&mut self, conn: &mut Connection) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                let progress = initiating.startup.on_closed();
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.on_closed();
                self.on_responder_progress(conn, progress);
            }
            Phase::Deciding(_) => self.phase = Phase::Finished,
            _ => {}
        }
    }
}

impl Operating {
    /// FPDUs framed straight into the TCP send queue, one record each,
    /// while it has room.
    fn transmit(&mut self, conn: &mut Connection) {
        if conn.emss() != self.emss {
            // The EMSS changed (RFC 5044 section 5.2): later FPDUs fit it.
            self.emss = conn.emss();
            self.link
                .engine
                .set_mulpdu(mulpdu(self.emss, self.markers_tx));
        }
        while self.link.engine.poll_fpdu(conn) {}
    }

    /// Closes TCP as the engine asks, once everything it made is queued.
    /// A graceful close gives the peer [`CLOSE_TIMEOUT`] of silence to
    /// close its side once our FIN is acknowledged, before TCP resets the
    /// connection, as the socket transport does: a peer ignoring our close
    /// cannot keep the queue pair out of Error.
    fn close_if_asked(&mut self, now: Instant, conn: &mut Connection) {
        if self.closed {
            return;
        }
        match self.link.engine.llp_close() {
            Some(LlpClose::Graceful) => {
                self.closed = true;
                conn.set_fin_wait2_timeout(now, Some(close_timeout()));
                conn.close();
            }
            Some(LlpClose::Abortive) => {
                self.closed = true;
                conn.abort();
            }
            None => {}
        }
    }

    /// Once the engine is in Terminate (it sent or received one, RFC 5040
    /// section 7.2), nothing is left to deliver but the Terminate itself:
    /// the connection gets [`CLOSE_TIMEOUT`] to end and is reset after
    /// that, however the peer stalls it (a window it keeps closed holds
    /// back our Terminate and FIN for good).
    fn linger_after_terminate(&mut self, now: Instant, conn: &mut Connection) {
        if !self.lingering && self.link.engine.state() == QpState::Terminate {
            self.lingering = true;
            conn.set_linger(now, close_timeout());
        }
    }
}

/// [`CLOSE_TIMEOUT`] in TCP's units.
fn close_timeout() -> Duration {
    Duration::from_micros(CLOSE_TIMEOUT.as_micros() as u64)
}

impl Consumer for RdmaStream {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        // The startup phase reads from the connection, where it can answer
        // at once; data it cannot take waits for what precedes it.
        let Phase::Operating(operating) = &mut self.phase else {
            return Disposition::Keep;
        };
        if in_order && pos == self.rx_next {
            self.feed_engine(data);
            return Disposition::Consumed;
        }
        // Whole FPDUs out of order go straight into registered memory when
        // the engine can place them (RFC 5044 appendix A.3).
        let engine = &mut operating.link.engine;
        if !in_order && pos > self.rx_next && engine.place_out_of_order(pos - operating.base, data)
        {
            self.counters.segments_placed_out_of_order += 1;
            return Disposition::Consumed;
        }
        Disposition::Keep
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

impl TcpApp for RdmaStream {
    fn on_event(&mut self, _now: Instant, event: Event, conn: &mut Connection) {
        if let Event::PeerClosed = event {
            self.read_held(conn);
            if let Phase::Holding(_) = self.phase {
                // What the peer sent before it closed is Full Operation's.
                self.end_hold(conn);
            }
            match &mut self.phase {
                Phase::Operating(operating) => operating.link.engine.on_llp_closed(),
                _ => self.startup_closed(conn),
            }
        }
    }

    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        self.read_held(conn);
        self.drive_startup(now, conn);
        if let Phase::Operating(operating) = &mut self.phase {
            operating.link.take_work();
            operating.transmit(conn);
            operating.close_if_asked(now, conn);
            operating.linger_after_terminate(now, conn);
            // Until the peer acknowledged our last startup frame (the
            // responder's Reply), nothing of Full Operation is.
            let acknowledged = conn.send_acknowledged().saturating_sub(operating.tx_base);
            operating.link.engine.on_acknowledged(acknowledged);
            self.counters.take_tcp(conn.stats());
            operating.link.set_transport_counters(self.counters);
            operating.link.report();
            if operating.link.has_backlog() {
                // Completions wait for the application to make room:
                // come back next poll.
                if let Some(doorbell) = &operating.doorbell {
                    doorbell.ring();
                }
            }
        }
    }

    fn ready_for_dataplane(&self) -> bool {
        matches!(self.phase, Phase::Operating(_))
    }

    fn on_dataplane(&mut self, doorbell: Doorbell) {
        if let Phase::Operating(operating) = &mut self.phase {
            let shared = &operating.link.qp().shared;
            // A queue pair connects once: a second doorbell cannot be set.
            let _ = shared.doorbell.set(doorbell.clone());
            operating.doorbell = Some(doorbell);
            if let Some((answer, established)) = operating.answer.take() {
                let _ = answer.send(Ok(established));
            }
        }
    }

    fn on_end(&mut self, end: End, _stats: &Stats) {
        self.end_with(end);
    }
}

/// A stream dropped before its connection ended (the device shut down
/// under it) ends as an aborted one: the queue pair goes to Error and its
/// work requests complete, flushed, where the application can poll them.
impl Drop for RdmaStream {
    fn drop(&mut self) {
        self.end_with(End::Aborted);
    }
}

impl RdmaStream {
    /// Ends the stream as its connection ended (`end`): the engine learns
    /// of the closed LLP and reports, a pending `connect` or `accept`
    /// hears the error. Does nothing the second time.
    fn end_with(&mut self, end: End) {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Operating(mut operating) => {
                // Work posted since the last poll is flushed with the rest.
                operating.link.take_work();
                operating.link.engine.on_llp_closed();
                // TCP is gone: nothing reads the application's memory again.
                operating.link.engine.on_acknowledged(u64::MAX);
                operating.link.report();
                if let Some((answer, _)) = operating.answer.take() {
                    let _ = answer.send(Err(end_error(end)));
                }
            }
            Phase::Initiating(initiating) => {
                let _ = initiating.answer.send(Err(end_error(end)));
            }
            Phase::Holding(holding) => {
                let _ = holding.start.answer.send(Err(end_error(end)));
            }
            _ => {}
        }
    }
}

/// The error a connection that ended with `end` reports to `connect`.
fn end_error(end: End) -> Error {
    use std::io::ErrorKind;
    let kind = match end {
        End::Reset => ErrorKind::ConnectionRefused,
        End::TimedOut => ErrorKind::TimedOut,
        End::Unreachable => ErrorKind::HostUnreachable,
        End::NoFreePort => ErrorKind::AddrNotAvailable,
        End::Closed | End::Aborted => ErrorKind::ConnectionAborted,
    };
    Error::Io(std::io::Error::new(
        kind,
        format!("the connection ended: {end}"),
    ))
}

fn socket_addr(endpoint: Endpoint) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(endpoint.addr, endpoint.port))
}

/// The identifier of a connection request: the 4-tuple less our own
/// address, which is the host's.
pub(crate) fn request_id(local: Endpoint, remote: Endpoint) -> u64 {
    (u64::from(u32::from(remote.addr)) << 32)
        | (u64::from(remote.port) << 16)
        | u64::from(local.port)
}
