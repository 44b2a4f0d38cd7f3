//! The queue-pair engine: one RDMAP stream in Full Operation (RFC 5040
//! section 6 over RFC 5041 and RFC 5044), sans-IO.
//!
//! The engine takes the LLP's stream octets ([`QpEngine::on_bytes`]) and
//! the application's work requests, and produces the octets to send
//! ([`QpEngine::poll_transmit`]), work completions
//! ([`QpEngine::poll_completion`]), events ([`QpEvent`]) and the LLP close
//! it wants ([`LlpClose`]). The transport that drives it (kernel sockets,
//! the userspace TCP) owns the connection and the clock.
//!
//! - `send_queue.rs`: work requests to segments, fence, ORD, completion order.
//! - `receive.rs`: every inbound segment checked (RFC 5041 section 7.1,
//!   RFC 5040 section 7) and placed, or answered with a Terminate.
//! - `terminate.rs`: building Terminate messages (RFC 5040 section 4.8).
//!
//! States follow the RDMAC verbs ([`QpState`]): the engine starts in RTS;
//! a Terminate sent or received moves it to Terminate and, once the LLP is
//! closed, to Error; a graceful close goes through Closing. Entering
//! Terminate or Error flushes every outstanding work request.

mod receive;
mod send_queue;
mod terminate;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::ddp::UntaggedQueue;
use crate::mem::{PdId, StagTable};
use crate::mpa::{FpduReader, FpduWriter, Negotiated, Rtr};
use crate::rdmap::{InboundReads, RecvSlot, SharedReceiveQueue};
use crate::verbs::{QpState, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::terminate::TermError;

use send_queue::SendQueue;
pub use send_queue::RTR_STAG;

/// Which side of the MPA startup this end was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sent the MPA Request; sends the RTR when peer-to-peer.
    Initiator,
    /// Sent the MPA Reply; sends no FPDU before the initiator's first
    /// (RFC 5044 section 7.1.2).
    Responder,
}

/// What an engine needs to start Full Operation.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The outcome of the MPA startup phase.
    pub negotiated: Negotiated,
    /// This end's startup role.
    pub role: Role,
    /// The largest ULPDU to send (RFC 5044 section 4.1), from the LLP's
    /// EMSS with [`crate::wire::fpdu::mulpdu`].
    pub mulpdu: usize,
    /// The stream's protection domain.
    pub pd: PdId,
    /// The STag table placements go through.
    pub table: Arc<StagTable>,
    /// Take receives from this shared receive queue instead of the queue
    /// pair's own.
    pub srq: Option<Arc<SharedReceiveQueue>>,
}

/// Which completion queue a completion belongs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqKind {
    /// The send queue's.
    Send,
    /// The receive queue's.
    Recv,
}

/// Something the application should hear about besides completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpEvent {
    /// This end found an error and sent a Terminate carrying it.
    TerminateSent(TermError),
    /// The peer sent a Terminate carrying this error.
    TerminateReceived(TermError),
    /// The stream is closed in both directions; the queue pair is in Error.
    Disconnected,
}

/// How the transport should close the LLP once it has sent what
/// [`QpEngine::poll_transmit`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlpClose {
    /// Send a FIN (TCP half close).
    Graceful,
    /// Reset the connection.
    Abortive,
}

/// How much of each kind of traffic the engine has handled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// FPDUs sent.
    pub fpdus_sent: u64,
    /// FPDUs received.
    pub fpdus_received: u64,
    /// Payload octets placed into registered memory.
    pub bytes_placed: u64,
    /// FPDUs dropped by a CRC mismatch (each ends the stream).
    pub crc_errors: u64,
    /// Terminates sent.
    pub terminates_sent: u64,
    /// Terminates received.
    pub terminates_received: u64,
}

/// Receives a queue pair can have outstanding on a shared receive queue
/// ahead of the next expected Send.
const SRQ_LOOKAHEAD: usize = 64;

/// One RDMAP stream (see the module documentation).
#[derive(Debug)]
pub struct QpEngine {
    state: QpState,
    role: Role,
    mulpdu: usize,
    pd: PdId,
    table: Arc<StagTable>,
    srq: Option<Arc<SharedReceiveQueue>>,
    writer: FpduWriter,
    reader: FpduReader,
    sq: SendQueue,
    rq: UntaggedQueue<RecvSlot>,
    inbound_reads: InboundReads,
    /// The MSN the next inbound Read Request must carry.
    read_msn_rx: u32,
    /// The MSN of the next Terminate this end sends.
    terminate_msn: u32,
    /// The peer's first FPDU has arrived (the responder's send fence).
    peer_started: bool,
    /// The RTR the responder waits for as the peer's first FPDU.
    expected_rtr: Option<Rtr>,
    /// A Terminate waiting to go out ahead of everything else.
    terminate_out: Option<Vec<u8>>,
    /// Alternates Read Responses with the send queue.
    responses_first: bool,
    completions: VecDeque<(CqKind, WorkCompletion)>,
    events: VecDeque<QpEvent>,
    llp_close: Option<LlpClose>,
    peer_closed: bool,
    counters: EngineCounters,
    scratch: Vec<u8>,
}

impl QpEngine {
    /// An engine in RTS at the start of Full Operation. An initiator with a
    /// peer-to-peer RTR queues it ahead of everything else.
    pub fn new(config: EngineConfig) -> Self {
        let n = config.negotiated;
        let mut sq = SendQueue::new(n.ord);
        let mut expected_rtr = None;
        match (config.role, n.rtr) {
            (Role::Initiator, Some(rtr)) => sq.queue_rtr(rtr),
            (Role::Responder, rtr) => expected_rtr = rtr,
            (Role::Initiator, None) => {}
        }
        Self {
            state: QpState::Rts,
            role: config.role,
            mulpdu: config.mulpdu,
            pd: config.pd,
            table: config.table,
            srq: config.srq,
            writer: FpduWriter::new(n.crc, n.markers_tx),
            reader: FpduReader::new(n.crc, n.markers_rx),
            sq,
            rq: UntaggedQueue::new(),
            inbound_reads: InboundReads::new(n.ird),
            read_msn_rx: 1,
            terminate_msn: 1,
            peer_started: config.role == Role::Initiator,
            expected_rtr,
            terminate_out: None,
            responses_first: false,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            llp_close: None,
            peer_closed: false,
            counters: EngineCounters::default(),
            scratch: Vec::new(),
        }
    }

    /// The queue pair's state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The engine's counters.
    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// The MULPDU the engine segments at.
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// Adopts a new MULPDU (the LLP's EMSS changed); messages already
    /// being segmented continue at the new size.
    pub fn set_mulpdu(&mut self, mulpdu: usize) {
        self.mulpdu = mulpdu;
    }

    /// Posts a send work request. In Terminate or Error it completes at
    /// once as flushed; in Closing it is refused the same way.
    pub fn post_send(&mut self, wr: SendWr) {
        if self.state.accepts_sends() {
            self.sq.post(wr);
        } else {
            let wc = WorkCompletion::new(wr.wr_id, wr.op.wc_opcode(), WcStatus::WrFlushError);
            self.completions.push_back((CqKind::Send, wc));
        }
    }

    /// Posts a receive work request to the queue pair's own receive queue.
    /// In Terminate or Error it completes at once as flushed.
    pub fn post_recv(&mut self, wr: RecvWr) {
        if matches!(self.state, QpState::Terminate | QpState::Error) {
            let wc = WorkCompletion::new(wr.wr_id, WcOpcode::Recv, WcStatus::WrFlushError);
            self.completions.push_back((CqKind::Recv, wc));
            return;
        }
        self.rq.post(RecvSlot::new(wr, self.table.clone(), self.pd));
    }

    /// The next completion, with the queue it belongs on.
    pub fn poll_completion(&mut self) -> Option<(CqKind, WorkCompletion)> {
        while let Some(wc) = self.sq.next_completion() {
            self.completions.push_back((CqKind::Send, wc));
        }
        self.completions.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<QpEvent> {
        self.events.pop_front()
    }

    /// What the transport should do with the LLP after sending everything
    /// produced so far; `None` while the stream stays open.
    pub fn llp_close(&self) -> Option<LlpClose> {
        self.llp_close
    }

    /// Begins a graceful close: work already posted is sent, then the LLP
    /// is closed; receives keep completing until the peer closes too.
    pub fn disconnect(&mut self) {
        if self.state == QpState::Rts {
            self.state = QpState::Closing;
        }
    }

    /// Abortive close: everything outstanding is flushed and the LLP is
    /// reset.
    pub fn abort(&mut self) {
        if self.state != QpState::Error {
            self.enter_error(None);
            self.llp_close = Some(LlpClose::Abortive);
            self.events.push_back(QpEvent::Disconnected);
        }
    }

    /// The LLP was closed by the peer (FIN or RST) or failed. A close in
    /// the middle of an FPDU, or with work outstanding, is a lost
    /// connection for that work; either way the queue pair ends in Error.
    pub fn on_llp_closed(&mut self) {
        if self.peer_closed {
            return;
        }
        self.peer_closed = true;
        if self.state == QpState::Error {
            return;
        }
        let lost = (self.reader.buffered() > 0 || !self.sq.is_idle())
            .then(|| terminate::completion_for(TermError::MpaConnectionLost));
        self.enter_error(lost);
        self.llp_close.get_or_insert(LlpClose::Graceful);
        self.events.push_back(QpEvent::Disconnected);
    }

    /// Takes stream octets from the LLP, in order.
    pub fn on_bytes(&mut self, data: &[u8]) {
        if !matches!(self.state, QpState::Rts | QpState::Closing) {
            return;
        }
        self.reader.push(data);
        while matches!(self.state, QpState::Rts | QpState::Closing) {
            let ulpdu = match self.reader.next_ulpdu() {
                None => break,
                Some(Ok(ulpdu)) => ulpdu,
                Some(Err(err)) => {
                    if matches!(err, crate::mpa::FramingError::Crc { .. }) {
                        self.counters.crc_errors += 1;
                    }
                    self.send_terminate(terminate::Fault::new(err.terminate_error()), &[]);
                    break;
                }
            };
            self.counters.fpdus_received += 1;
            self.on_ulpdu(&ulpdu);
        }
    }

    /// Appends FPDUs to `out` until about `budget` octets were added or
    /// nothing is left to send; returns how many octets it added.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>, budget: usize) -> usize {
        let start = out.len();
        if let Some(ulpdu) = self.terminate_out.take() {
            self.write_fpdu(&[&ulpdu], out);
            self.counters.terminates_sent += 1;
            self.llp_close.get_or_insert(LlpClose::Graceful);
        }
        if !self.peer_started {
            return out.len() - start;
        }
        while out.len() - start < budget && matches!(self.state, QpState::Rts | QpState::Closing) {
            self.responses_first = !self.responses_first;
            let mut turns = [Self::send_from_queue, Self::send_read_response];
            if self.responses_first {
                turns.reverse();
            }
            if !turns.iter().any(|turn| turn(self, out)) {
                break;
            }
        }
        if self.state == QpState::Closing
            && self.sq.is_idle()
            && self.inbound_reads.pending() == 0
            && self.llp_close.is_none()
        {
            self.llp_close = Some(LlpClose::Graceful);
        }
        out.len() - start
    }

    /// Sends the next send queue segment; `false` when there is none.
    fn send_from_queue(&mut self, out: &mut Vec<u8>) -> bool {
        match self.sq.next_segment(self.mulpdu, &self.table, self.pd) {
            Ok(Some(segment)) => {
                let parts = [&segment.header[..segment.header_len], segment.payload];
                // Segments are cut to the MULPDU, so they always frame.
                let _ = self.writer.write(&parts, out);
                self.counters.fpdus_sent += 1;
                true
            }
            Ok(None) => false,
            Err(_) => {
                // The request completed with its local error; that ends the
                // stream (RDMAC verbs), and the peer learns of it through a
                // local catastrophic Terminate.
                let fault = terminate::Fault::new(TermError::RdmapLocalCatastrophic);
                self.send_terminate(fault, &[]);
                false
            }
        }
    }

    /// Sends the next Read Response segment; `false` when none is queued.
    fn send_read_response(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(segment) = self.inbound_reads.next_segment(self.mulpdu) else {
            return false;
        };
        let mut data = std::mem::take(&mut self.scratch);
        data.resize(segment.len as usize, 0);
        let fetched = self.table.fetch(
            crate::mem::Stag(segment.source_stag),
            self.pd,
            segment.source_to,
            &mut data,
        );
        match fetched {
            Ok(()) => {
                let header = segment.header();
                self.write_fpdu(&[&header, &data], out);
                self.counters.fpdus_sent += 1;
            }
            Err(err) => {
                // The region changed after the request was validated.
                self.send_terminate(terminate::Fault::new(err.rdmap_error()), &[]);
            }
        }
        self.scratch = data;
        true
    }

    fn write_fpdu(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) {
        // Every ULPDU the engine builds is at most the MULPDU.
        let _ = self.writer.write(parts, out);
    }

    /// Queues a Terminate for `fault` (caused by the segment `ulpdu`, if
    /// any), enters the Terminate state and flushes.
    fn send_terminate(&mut self, fault: terminate::Fault, ulpdu: &[u8]) {
        let msn = self.terminate_msn;
        self.terminate_msn = self.terminate_msn.wrapping_add(1);
        self.terminate_out = Some(terminate::build(&fault, ulpdu, msn));
        self.events.push_back(QpEvent::TerminateSent(fault.error));
        self.enter_error(None);
        self.state = QpState::Terminate;
        // Nothing reached the peer before our own RTR or first FPDU
        // otherwise; the Terminate must go out regardless.
        self.peer_started = true;
    }

    /// Flushes everything outstanding and enters Error. `first` is the
    /// status of the oldest unfinished send work request.
    fn enter_error(&mut self, first: Option<WorkCompletion>) {
        self.state = QpState::Error;
        let flushed = self.sq.flush(first);
        self.push_completions(CqKind::Send, flushed);
        let receives: Vec<_> = self
            .rq
            .flush()
            .map(|slot| WorkCompletion::new(slot.wr.wr_id, WcOpcode::Recv, WcStatus::WrFlushError))
            .collect();
        self.push_completions(CqKind::Recv, receives);
    }

    fn push_completions(&mut self, cq: CqKind, wcs: Vec<WorkCompletion>) {
        self.completions.extend(wcs.into_iter().map(|wc| (cq, wc)));
    }

    /// This end's startup role.
    pub fn role(&self) -> Role {
        self.role
    }
}
