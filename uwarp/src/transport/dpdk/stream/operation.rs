//! Full Operation of an `RdmaStream`, on the dataplane core that owns
//! its connection: the queue pair's RDMAP/DDP engine (RFC 5040, RFC 5041)
//! over MPA's framing (RFC 5044 sections 4 to 6). Octets TCP delivers in
//! order go straight to the engine, and whole FPDUs that arrive out of
//! order are placed from where they lie (RFC 5044 appendix A.3); each
//! FPDU the engine makes is queued as one TCP record, sized to the
//! current EMSS (RFC 5044 section 5.2, so segments start with FPDUs);
//! the application's doorbell brings new work requests in; the engine's
//! close becomes TCP's, and a Terminate (RFC 5040 section 7.2) bounds
//! how long the connection lingers.

use std::sync::Arc;

use uwarp_stack::mem::StagTable;
use uwarp_stack::rdmap::{EngineConfig, LlpClose, QpEngine};
use uwarp_stack::tcp::{Connection, Disposition, Duration, Instant};
use uwarp_stack::verbs::QpState;
use uwarp_stack::wire::fpdu::mulpdu;

use super::startup::{socket_addr, Answer, Start};
use crate::cm::Connection as Established;
use crate::counters::TransportCounters;
use crate::error::Error;
use crate::qp_link::{QpLink, CLOSE_TIMEOUT};
use crate::transport::wakeup::Wakeup;
use uwarp_dataplane::tcp::Doorbell;

/// A stream in Full Operation.
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

impl Operating {
    /// Full Operation on `conn` as `start` says, its first octet at stream
    /// position `base`, with the device's STag `table`; payloads of at
    /// least `zero_copy_from` octets are sent from registered memory
    /// (when no Markers go out).
    pub(super) fn new(
        conn: &mut Connection,
        start: Start,
        base: u64,
        table: &Arc<StagTable>,
        zero_copy_from: Option<usize>,
    ) -> Self {
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
            table: table.clone(),
            srq: qp.shared.engine_srq(),
        });
        let established = Established {
            negotiated,
            private_data,
            local_addr: socket_addr(conn.local()),
            peer_addr: socket_addr(conn.remote()),
            mulpdu,
        };
        // Markers would fall inside a payload held by reference.
        conn.set_references_from(zero_copy_from.filter(|_| !negotiated.markers_tx));
        let mut link = QpLink::new(engine, qp);
        // Receives posted before the connection came up take what arrived
        // with the last startup frame.
        link.take_work();
        Operating {
            link,
            base,
            tx_base: conn.send_queued_end(),
            answer: Some((answer, established)),
            doorbell: None,
            closed: false,
            lingering: false,
            markers_tx: negotiated.markers_tx,
            emss: conn.emss(),
        }
    }

    /// Octets of Full Operation, in order, into the engine; returns the
    /// stream position to read on from, where the engine continues (past
    /// FPDUs it had placed out of order).
    pub(super) fn feed(&mut self, data: &[u8]) -> u64 {
        if !data.is_empty() {
            self.link.engine.on_bytes(data);
        }
        self.base + self.link.engine.rx_offset()
    }

    /// New data at stream position `pos`, the stream being read up to
    /// `rx_next`: in order it goes to the engine (and `rx_next` on);
    /// whole FPDUs out of order go straight into registered memory when
    /// the engine can place them (RFC 5044 appendix A.3, counted in
    /// `counters`); the rest waits in TCP's buffer for what precedes it.
    pub(super) fn on_data(
        &mut self,
        rx_next: &mut u64,
        pos: u64,
        data: &[u8],
        in_order: bool,
        counters: &mut TransportCounters,
    ) -> Disposition {
        if in_order && pos == *rx_next {
            *rx_next = self.feed(data);
            return Disposition::Consumed;
        }
        if !in_order && pos > *rx_next && self.link.engine.place_out_of_order(pos - self.base, data)
        {
            counters.segments_placed_out_of_order += 1;
            return Disposition::Consumed;
        }
        Disposition::Keep
    }

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
        // A queue pair connects once: a second wake-up cannot be set.
        let _ = shared.wakeup.set(Wakeup::Doorbell(doorbell.clone()));
        self.doorbell = Some(doorbell);
        if let Some((answer, established)) = self.answer.take() {
            let _ = answer.send(Ok(established));
        }
    }

    /// The connection ended (or the stream was dropped): the engine
    /// learns of the closed LLP and reports (work posted since the last
    /// drive is flushed with the rest), and a `connect` or `accept` not
    /// answered yet hears `error`.
    pub(super) fn end(mut self, error: Error) {
        self.link.take_work();
        self.link.engine.on_llp_closed();
        // TCP is gone: nothing reads the application's memory again.
        self.link.engine.on_acknowledged(u64::MAX);
        self.link.report();
        if let Some((answer, _)) = self.answer.take() {
            let _ = answer.send(Err(error));
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
    ///
    /// A queue pair destroyed while its connection still sends from
    /// registered memory by reference (its close went on gracefully,
    /// `QpEngine::detach`) is reset instead: nothing may read the
    /// application's memory once it can free it.
    fn close_if_asked(&mut self, now: Instant, conn: &mut Connection) {
        if conn.holds_referenced_runs() && !conn.is_closed() && self.link.qp().is_destroyed() {
            self.closed = true;
            conn.abort();
            return;
        }
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
