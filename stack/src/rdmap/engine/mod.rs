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
//! - `transmit.rs`: what goes out and when: the Terminate first, the
//!   responder's send fence, send queue segments and Read Responses in
//!   turn, the close after a graceful disconnect.
//! - `receive.rs`: every inbound segment checked (RFC 5041 section 7.1,
//!   RFC 5040 section 7) and placed, or answered with a Terminate.
//! - `early.rs`: out-of-order segments of whole FPDUs placed at once and
//!   delivered when the in-order stream reaches them (RFC 5041 section
//!   5.3, RFC 5044 appendix A.3).
//! - `terminate.rs`: building Terminate messages and choosing what they
//!   echo (RFC 5040 sections 4.8 and 7).
//!
//! States follow the RDMAC verbs ([`QpState`]): the engine starts in RTS;
//! a Terminate sent or received moves it to Terminate (where only the
//! peer's Terminates are still heard) and, once the LLP is closed, to
//! Error; a graceful close goes through Closing. Entering Terminate or
//! Error flushes every outstanding work request; work posted afterwards
//! completes at once, flushed.

mod early;
mod receive;
mod send_queue;
mod terminate;
mod transmit;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::ddp::UntaggedQueue;
use crate::mem::{PdId, StagTable};
use crate::mpa::{FpduReader, FpduWriter, Negotiated, Rtr};
use crate::rdmap::{InboundReads, RecvSlot, SharedReceiveQueue};
use crate::verbs::{QpState, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::ddp::UNTAGGED_HEADER_LEN;
use crate::wire::fpdu::MAX_ULPDU_LEN;
use crate::wire::rdmap::READ_REQUEST_LEN;
use crate::wire::terminate::{TermError, CONTROL_LEN};
use crate::wire::terminate_ulpdu::{self, Fault};

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
    /// EMSS with [`crate::wire::fpdu::mulpdu`]. Clamped to what an FPDU can
    /// carry (65535) and to at least 70 octets, the longest message the
    /// engine cannot segment (a Terminate with every header).
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
    /// Of those, the ones whose payload the sink held by reference in
    /// registered memory (zero-copy transmit).
    pub fpdus_sent_by_reference: u64,
    /// Of those, the ones whose payload a byte-stream sink wrote through
    /// from registered memory ([`FpduSink::write_through`](crate::record::FpduSink::write_through)).
    pub fpdus_written_through: u64,
    /// FPDUs received.
    pub fpdus_received: u64,
    /// Payload octets placed into registered memory.
    pub bytes_placed: u64,
    /// FPDUs placed out of order, ahead of the in-order stream.
    pub fpdus_placed_out_of_order: u64,
    /// Payload octets of those FPDUs.
    pub bytes_placed_out_of_order: u64,
    /// In-order stream octets the FPDU reader copied into its buffer
    /// instead of reading them where they arrived: part of an FPDU whose
    /// rest had not come yet (a peer whose TCP cuts segments anywhere), or
    /// any octet when the stream carries Markers.
    pub bytes_buffered: u64,
    /// FPDUs dropped by a CRC mismatch in Full Operation (each ends the
    /// stream).
    pub crc_errors: u64,
    /// Terminates sent.
    pub terminates_sent: u64,
    /// Terminates received.
    pub terminates_received: u64,
}

/// Receives a queue pair can have outstanding on a shared receive queue
/// ahead of the next expected Send.
const SRQ_LOOKAHEAD: usize = 64;

/// The smallest MULPDU the engine segments at: the longest message it
/// must send in one segment, a Terminate that echoes an untagged DDP header
/// and a Read Request (RFC 5040 section 4.8). A Read Request, 46 octets,
/// then never needs a second segment either.
const MIN_MULPDU: usize =
    UNTAGGED_HEADER_LEN + CONTROL_LEN + 2 + UNTAGGED_HEADER_LEN + READ_REQUEST_LEN;

/// A MULPDU the engine can segment at and frame.
fn clamp_mulpdu(mulpdu: usize) -> usize {
    mulpdu.clamp(MIN_MULPDU, MAX_ULPDU_LEN)
}

/// One RDMAP stream (see the module documentation).
#[derive(Debug)]
pub struct QpEngine {
    state: QpState,
    mulpdu: usize,
    pd: PdId,
    table: Arc<StagTable>,
    srq: Option<Arc<SharedReceiveQueue>>,
    writer: FpduWriter,
    reader: FpduReader,
    /// The reader stopped at a framing error: nothing more is read.
    reader_failed: bool,
    /// The stream offset of the next octet the LLP hands over in order.
    rx_offset: u64,
    /// Whether out-of-order segments may be placed early: CRCs on and no
    /// Markers on what the peer sends.
    early_placement: bool,
    early: early::EarlyFpdus,
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
    /// How far the LLP acknowledged the octets this end sent.
    acknowledged: u64,
    counters: EngineCounters,
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
            mulpdu: clamp_mulpdu(config.mulpdu),
            pd: config.pd,
            table: config.table,
            srq: config.srq,
            writer: FpduWriter::new(n.crc, n.markers_tx),
            reader: FpduReader::new(n.crc, n.markers_rx),
            reader_failed: false,
            rx_offset: 0,
            early_placement: n.crc && !n.markers_rx,
            early: early::EarlyFpdus::default(),
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
            acknowledged: 0,
            counters: EngineCounters::default(),
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
    /// being segmented continue at the new size. Clamped like
    /// [`EngineConfig::mulpdu`].
    pub fn set_mulpdu(&mut self, mulpdu: usize) {
        self.mulpdu = clamp_mulpdu(mulpdu);
    }

    /// Posts a send work request. In Terminate or Error it completes at
    /// once as flushed; in Closing it is refused the same way, after the
    /// work posted before it.
    pub fn post_send(&mut self, wr: SendWr) {
        if self.state.accepts_sends() {
            self.sq.post(wr);
        } else {
            // After the requests before it, which may still wait for the
            // LLP's ACK.
            self.sq.refuse(wr);
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
        self.take_send_completions();
        self.completions.pop_front()
    }

    /// Moves the send queue's completions that are due behind those
    /// already queued.
    fn take_send_completions(&mut self) {
        while let Some(wc) = self.sq.next_completion(self.acknowledged) {
            self.completions.push_back((CqKind::Send, wc));
        }
    }

    /// The LLP acknowledged the first `offset` octets this end sent in
    /// Full Operation: work requests whose data went by reference up to
    /// there may complete (see [`FpduSink::references_from`](crate::record::FpduSink::references_from)).
    /// A transport whose LLP ended (closed, reset, failed) passes
    /// `u64::MAX`: nothing will read the application's memory again.
    pub fn on_acknowledged(&mut self, offset: u64) {
        self.acknowledged = self.acknowledged.max(offset);
    }

    /// How many successful unsignaled send work requests have completed
    /// (they make no completion), in send queue order: a queue counting
    /// its outstanding requests frees their slots by it. Those before a
    /// completion [`poll_completion`](Self::poll_completion) returns are
    /// counted by the time it returns it.
    pub fn unsignaled_sends_completed(&self) -> u64 {
        self.sq.unsignaled_completed()
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

    /// Abortive close: everything outstanding is flushed, nothing more is
    /// sent (not even a Terminate still waiting to go out) and the LLP is
    /// reset.
    pub fn abort(&mut self) {
        // The reset ends every retransmission: nothing waits for an ACK.
        self.acknowledged = u64::MAX;
        if self.state != QpState::Error {
            self.enter_error(None);
            self.terminate_out = None;
            self.llp_close = Some(LlpClose::Abortive);
            self.events.push_back(QpEvent::Disconnected);
        }
    }

    /// The application destroyed its queue pair: an abortive close
    /// ([`abort`](Self::abort)), unless it disconnected first. Then, as
    /// the kernel's iWARP connection manager leaves a connection that is
    /// closing when its id is destroyed (iw_cm's `destroy_cm_id` does
    /// nothing more to one in `IW_CM_STATE_CLOSING`), what the LLP holds
    /// still goes, the FIN after it: every work request outstanding is
    /// flushed and nothing more is received or sent, but what was framed
    /// before is not thrown away with a reset. `disconnecting` says
    /// whether a disconnect is posted and not taken in yet.
    pub fn detach(&mut self, disconnecting: bool) {
        let closing = disconnecting
            || self.state == QpState::Closing
            || self.llp_close == Some(LlpClose::Graceful);
        if !closing || self.llp_close == Some(LlpClose::Abortive) {
            self.abort();
            return;
        }
        if self.state != QpState::Error {
            self.enter_error(None);
            self.events.push_back(QpEvent::Disconnected);
        }
        self.llp_close.get_or_insert(LlpClose::Graceful);
    }

    /// The LLP was closed by the peer (FIN or RST) or failed: the queue
    /// pair ends in Error and everything outstanding is flushed. A close
    /// in the middle of an FPDU is a lost connection: the oldest unfinished
    /// send work request fails with it.
    pub fn on_llp_closed(&mut self) {
        if self.peer_closed {
            return;
        }
        self.peer_closed = true;
        if self.state == QpState::Error {
            return;
        }
        // After a Terminate nothing is outstanding; before one, the reader
        // has met no framing error and holds only a partial FPDU, if any.
        let mid_fpdu = self.accepts_work() && self.reader.buffered() > 0;
        let lost = mid_fpdu.then(|| terminate::completion_for(TermError::MpaConnectionLost));
        self.enter_error(lost);
        self.llp_close.get_or_insert(LlpClose::Graceful);
        self.events.push_back(QpEvent::Disconnected);
    }

    /// Whether the stream is in Full Operation (RTS or Closing).
    fn accepts_work(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Closing)
    }

    /// Queues a Terminate for `fault`, caused by the received segment
    /// `ulpdu` (empty when none caused it), enters the Terminate state and
    /// flushes.
    fn send_terminate(&mut self, fault: Fault, ulpdu: &[u8]) {
        let msn = self.terminate_msn;
        self.terminate_msn = self.terminate_msn.wrapping_add(1);
        self.terminate_out = Some(terminate_ulpdu::build(&fault, ulpdu, msn));
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
        self.sq.flush(first);
        // Ahead of the flushed receives, as before: a queue pair whose two
        // queues share a completion queue sees the request that failed
        // first (only what waits for TCP's ACK comes later).
        self.take_send_completions();
        let receives: Vec<_> = self.rq.flush().map(RecvSlot::into_flushed).collect();
        self.push_completions(CqKind::Recv, receives);
    }

    fn push_completions(&mut self, cq: CqKind, wcs: Vec<WorkCompletion>) {
        self.completions.extend(wcs.into_iter().map(|wc| (cq, wc)));
    }
}
