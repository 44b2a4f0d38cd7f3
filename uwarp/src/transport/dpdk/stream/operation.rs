//! Full Operation of an [`RdmaStream`], on the dataplane core that owns
//! its connection: the queue pair's RDMAP/DDP engine (RFC 5040, RFC 5041)
//! over MPA's framing (RFC 5044 sections 4 to 6). Octets TCP delivers in
//! order go straight to the engine, and whole FPDUs that arrive out of
//! order are placed from where they lie (RFC 5044 appendix A.3); each
//! FPDU the engine makes is queued as one TCP record, sized to the
//! current EMSS (RFC 5044 section 5.2, so segments start with FPDUs);
//! the application's doorbell brings new work requests in; the engine's
//! close becomes TCP's, and a Terminate (RFC 5040 section 7.2) bounds
//! how long the connection lingers.

use uwarp_stack::mpa::Negotiated;
use uwarp_stack::rdmap::{EngineConfig, LlpClose, QpEngine, Role};
use uwarp_stack::tcp::{Connection, Disposition, Duration, Instant};
use uwarp_stack::verbs::QpState;
use uwarp_stack::wire::fpdu::mulpdu;

use super::{end_error, socket_addr, Answer, Phase, RdmaStream};
use crate::cm::Connection as Established;
use crate::counters::TransportCounters;
use crate::qp::QueuePair;
use crate::qp_link::{QpLink, CLOSE_TIMEOUT};
use uwarp_dataplane::tcp::{Doorbell, End};

/// What Full Operation starts from.
pub(super) struct Start {
    pub(super) negotiated: Negotiated,
    pub(super) role: Role,
    pub(super) qp: QueuePair,
    pub(super) private_data: Vec<u8>,
    pub(super) answer: Answer,
}

/// Full Operation.
pub(super) struct Operating {
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

impl RdmaStream {
    /// Starts Full Operation as `start` says; `leftover` are the octets
    /// that followed the last startup frame, the first of Full Operation.
    pub(super) fn operate(&mut self, conn: &mut Connection, start: Start, leftover: &[u8]) {
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

    /// Octets of Full Operation, in order, into the engine; the stream
    /// then continues where the engine does (past FPDUs it had placed out
    /// of order).
    pub(super) fn feed_engine(&mut self, data: &[u8]) {
        if let Phase::Operating(operating) = &mut self.phase {
            if !data.is_empty() {
                operating.link.engine.on_bytes(data);
            }
            self.rx_next = operating.base + operating.link.engine.rx_offset();
        }
    }

    /// New data at stream position `pos` in Full Operation: in order it
    /// goes to the engine; whole FPDUs out of order go straight into
    /// registered memory when the engine can place them (RFC 5044
    /// appendix A.3); the rest waits in TCP's buffer for what precedes it.
    pub(super) fn operating_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        let Phase::Operating(operating) = &mut self.phase else {
            return Disposition::Keep;
        };
        if in_order && pos == self.rx_next {
            self.feed_engine(data);
            return Disposition::Consumed;
        }
        let engine = &mut operating.link.engine;
        if !in_order && pos > self.rx_next && engine.place_out_of_order(pos - operating.base, data)
        {
            self.counters.segments_placed_out_of_order += 1;
            return Disposition::Consumed;
        }
        Disposition::Keep
    }
}

impl Operating {
    /// One drive on the dataplane core: the application's new work into
    /// the engine, FPDUs out, the close the engine asks for, what TCP
    /// acknowledged, and the counters (`counters`, the stream's receive
    /// path's, with TCP's taken in), events and completions back to the
    /// application.
    pub(super) fn drive(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        counters: &mut TransportCounters,
    ) {
        self.link.take_work();
        self.transmit(conn);
        self.close_if_asked(now, conn);
        self.linger_after_terminate(now, conn);
        // Until the peer acknowledged our last startup frame (the
        // responder's Reply), nothing of Full Operation is.
        let acknowledged = conn.send_acknowledged().saturating_sub(self.tx_base);
        self.link.engine.on_acknowledged(acknowledged);
        counters.take_tcp(conn.stats());
        self.link.set_transport_counters(*counters);
        self.link.report();
        if self.link.has_backlog() {
            // Completions wait for the application to make room: come
            // back next poll.
            if let Some(doorbell) = &self.doorbell {
                doorbell.ring();
            }
        }
    }

    /// The peer closed its side of the stream.
    pub(super) fn on_peer_closed(&mut self) {
        self.link.engine.on_llp_closed();
    }

    /// The connection now runs on its dataplane core, rung by `doorbell`:
    /// the queue pair wakes it from now on, and `connect` or `accept`
    /// hears that it is up.
    pub(super) fn on_dataplane(&mut self, doorbell: Doorbell) {
        let shared = &self.link.qp().shared;
        // A queue pair connects once: a second doorbell cannot be set.
        let _ = shared.doorbell.set(doorbell.clone());
        self.doorbell = Some(doorbell);
        if let Some((answer, established)) = self.answer.take() {
            let _ = answer.send(Ok(established));
        }
    }

    /// The connection ended with `end`: the engine learns of the closed
    /// LLP and reports (work posted since the last drive is flushed with
    /// the rest), and a `connect` or `accept` not answered yet hears the
    /// error.
    pub(super) fn end(mut self, end: End) {
        self.link.take_work();
        self.link.engine.on_llp_closed();
        // TCP is gone: nothing reads the application's memory again.
        self.link.engine.on_acknowledged(u64::MAX);
        self.link.report();
        if let Some((answer, _)) = self.answer.take() {
            let _ = answer.send(Err(end_error(end)));
        }
    }

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
