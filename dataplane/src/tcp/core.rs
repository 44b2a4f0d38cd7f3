//! [`TcpCore`]: the TCP connections one dataplane core owns.
//!
//! Every segment of an owned flow arrives here already validated
//! (Ethernet, IPv4, TCP checksum: `net::classify`) and goes to its
//! connection with no further lookup. A flow's application runs, and its
//! engine transmits, once after the whole receive burst, not after each
//! segment: a burst of data segments is answered by one cumulative ACK
//! (RFC 5681 section 4.2's every-second-segment rule met by the burst as
//! a whole, as a NIC's receive coalescing does), and a burst of ACKs
//! releases the window they opened in one go. Out-of-order segments
//! still each owe their immediate duplicate ACK (the engine counts them).
//! Every segment the engine has goes out in the same poll. Timers run
//! from a deadline queue, so a poll costs the same with one connection or
//! thousands; a queue entry that outlived its deadline (the engine moved
//! it later) only queues the flow again, without driving it. Closed flows
//! leave the table at the end of the poll.

use std::sync::Arc;
use std::time::Instant as WallInstant;

use crossbeam_queue::SegQueue;

use crate::net::{FourTuple, TcpMeta};
use crate::runtime::{tcp_segment, FlowHandler, FlowTable, TxBatch};
use crate::Mbuf;
use uwarp_stack::tcp::{parse_verified, Instant, State};

use super::app::TcpApp;
use super::clock::Clock;
use super::deadlines::{Deadlines, Due};
use super::doorbell::Rung;
use super::flow::{FlowCounters, Status, TcpFlow};

/// The 4-tuples of flows the dataplane cores closed, for the control core:
/// unbounded, since the control core frees a flow's ephemeral port only
/// when it hears of its close.
pub type ClosedFlows = SegQueue<FourTuple>;

/// What one dataplane core's TCP has done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpCoreCounters {
    /// Segments handed to connections.
    pub segments_received: u64,
    /// Segments the engine could not parse (bad options, bad flags).
    pub malformed: u64,
    /// Flows taken over from the control core.
    pub flows_added: u64,
    /// Flows closed and dropped from the table.
    pub flows_closed: u64,
    /// Flows open when the core stopped, reset (a RST sent to the peer).
    pub flows_reset: u64,
    /// Transmit counters.
    pub tx: FlowCounters,
}

/// The flow handler of a dataplane core running TCP.
pub struct TcpCore<A> {
    clock: Clock,
    /// Where closed flows are announced to the control core, which stops
    /// forwarding their segments here.
    announce: Arc<ClosedFlows>,
    deadlines: Deadlines,
    due: Vec<Due>,
    closed: Vec<FourTuple>,
    /// Flows that took in segments in this poll's receive burst, to be
    /// serviced once after it.
    received: Vec<FourTuple>,
    /// Flows whose doorbells rang.
    rung: Arc<Rung>,
    counters: TcpCoreCounters,
    _app: std::marker::PhantomData<fn() -> A>,
}

impl<A: TcpApp> TcpCore<A> {
    /// A core keeping engine time with `clock` (the control core's) and
    /// announcing closed flows on `announce`.
    pub fn new(clock: Clock, announce: Arc<ClosedFlows>) -> Self {
        TcpCore {
            clock,
            announce,
            deadlines: Deadlines::default(),
            due: Vec::new(),
            closed: Vec::new(),
            received: Vec::new(),
            rung: Arc::new(Rung::new()),
            counters: TcpCoreCounters::default(),
            _app: std::marker::PhantomData,
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> &TcpCoreCounters {
        &self.counters
    }

    /// Services `flow` after input and queues its next deadline.
    fn after_input(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        flow: &mut TcpFlow<A>,
        tx: &mut TxBatch,
    ) {
        match flow.service(now, tx, &mut self.counters.tx) {
            Status::Open(at) => self.deadlines.schedule(tuple, at, &mut flow.scheduled),
            Status::Closed => self.closed.push(tuple),
        }
    }
}

impl<A: TcpApp> FlowHandler for TcpCore<A> {
    type Flow = TcpFlow<A>;

    fn on_packet(
        &mut self,
        now: WallInstant,
        flow: &mut TcpFlow<A>,
        meta: &TcpMeta,
        packet: Mbuf,
        _tx: &mut TxBatch,
    ) {
        let now = self.clock.at(now);
        let (tcp, referenced) = tcp_segment(&packet, meta);
        match parse_verified(tcp) {
            Ok(mut segment) => {
                if !referenced.is_empty() {
                    // The classification checked the header ends where
                    // the first segment does: the payload is all here.
                    segment.payload = referenced;
                }
                self.counters.segments_received += 1;
                flow.on_segment(now, &segment);
            }
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        }
        if flow.mark_received() {
            self.received.push(meta.tuple);
        }
    }

    fn on_flow_added(
        &mut self,
        now: WallInstant,
        tuple: &FourTuple,
        flow: &mut TcpFlow<A>,
        tx: &mut TxBatch,
    ) {
        self.counters.flows_added += 1;
        // Its deadline was queued on the control core.
        flow.scheduled = None;
        flow.on_dataplane(*tuple, &self.rung);
        self.after_input(self.clock.at(now), *tuple, flow, tx);
    }

    fn poll(&mut self, now: WallInstant, flows: &mut FlowTable<TcpFlow<A>>, tx: &mut TxBatch) {
        let now = self.clock.at(now);
        let mut received = std::mem::take(&mut self.received);
        for tuple in received.drain(..) {
            if let Some(flow) = flows.get_mut(&tuple) {
                flow.received_serviced();
                self.after_input(now, tuple, flow, tx);
            }
        }
        self.received = received;
        let mut due = std::mem::take(&mut self.due);
        self.deadlines.expire(now, &mut due);
        for entry in due.drain(..) {
            let tuple = entry.tuple;
            if let Some(flow) = flows.get_mut(&tuple) {
                if !entry.claim(&mut flow.scheduled) {
                    continue;
                }
                if flow.on_timer(now) {
                    self.after_input(now, tuple, flow, tx);
                } else {
                    // An entry older than the flow's deadline (an ACK
                    // stopped the retransmission timer, say): nothing ran,
                    // nothing changed since the flow was last driven, so
                    // it only waits again, for its real deadline.
                    let at = flow.poll_at();
                    self.deadlines.schedule(tuple, at, &mut flow.scheduled);
                }
            }
        }
        self.due = due;
        // Only the flows rung before this poll: one that rings itself
        // while driven waits for the next.
        for _ in 0..self.rung.len() {
            let Some(tuple) = self.rung.pop() else {
                break;
            };
            // A flow serviced for input or a timer since its doorbell
            // rang took in the work then.
            if let Some(flow) = flows.get_mut(&tuple).filter(|flow| flow.doorbell_armed()) {
                self.after_input(now, tuple, flow, tx);
            }
        }
        for tuple in self.closed.drain(..) {
            if flows.remove(&tuple).is_some() {
                self.counters.flows_closed += 1;
                self.announce.push(tuple);
            }
        }
    }

    /// Everything sent acknowledged, the FIN too: established (or closed
    /// by the peer) with nothing unacknowledged, our FIN acknowledged
    /// (FIN-WAIT-2, TIME-WAIT), or no connection to lose data on (closed,
    /// or still opening).
    fn settled(&self, flow: &TcpFlow<A>) -> bool {
        let conn = flow.connection();
        match conn.state() {
            State::FinWait1 | State::Closing | State::LastAck => false,
            State::Established | State::CloseWait => {
                conn.send_acknowledged() == conn.send_queued_end()
            }
            _ => true,
        }
    }

    /// Resets every connection still open: the peers hear a RST, as from
    /// a kernel whose process exited, instead of nothing from a host gone
    /// silent (they would retransmit into the void for minutes).
    fn shut_down(&mut self, now: WallInstant, flows: &mut FlowTable<TcpFlow<A>>, tx: &mut TxBatch) {
        let now = self.clock.at(now);
        for (_, mut flow) in flows.drain() {
            if flow.reset(now, tx, &mut self.counters.tx) {
                self.counters.flows_reset += 1;
            }
        }
    }
}
