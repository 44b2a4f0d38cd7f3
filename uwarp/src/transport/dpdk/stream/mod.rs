//! [`RdmaStream`]: iWARP above one TCP connection of the DPDK transport.
//!
//! It is the connection's [`TcpApp`], so it runs where the connection
//! runs, in one phase after the other, a module each:
//!
//! - `startup.rs`: on the control core, MPA's startup phase (RFC 5044
//!   section 7.1, RFC 6581): the Request and Reply, the application's
//!   accept or reject, the connection manager's policy for an active
//!   open. The stream asks to leave the control core only once in Full
//!   Operation.
//! - `operation.rs`: on its dataplane core, Full Operation: the queue
//!   pair's RDMAP/DDP engine (RFC 5040, RFC 5041) over MPA's framing
//!   (RFC 5044 sections 4 to 6).
//!
//! This module holds the stream and its phase, reads what TCP delivers in
//! order into the phase that takes it, moves the stream from one phase to
//! the next, and dispatches TCP's calls.

mod operation;
mod startup;

use std::sync::Arc;

use crossbeam_channel::Sender;
use uwarp_stack::mem::StagTable;
use uwarp_stack::mpa::{LocalParams, Micros};
use uwarp_stack::tcp::{Connection, Consumer, Disposition, Event, Instant, Stats};

use crate::cm::{Connect, ControlLine, IncomingRequest};
use crate::counters::TransportCounters;
use crate::error::Error;
use crate::qp::QueuePair;
use operation::Operating;
pub(crate) use startup::request_tuple;
use startup::{Answer, Next, StartupPhase};
use uwarp_dataplane::tcp::{Doorbell, End, TcpApp};

/// What a stream needs from its device.
#[derive(Clone)]
pub(crate) struct StreamContext {
    /// The device's STag table.
    pub(crate) table: Arc<StagTable>,
    /// The control core's command queue (requests carry it; a revision-1
    /// retry goes through it).
    pub(crate) control: ControlLine,
    /// How long a responder waits for the Request.
    pub(crate) startup_timeout: Micros,
    /// The smallest payload sent from registered memory by reference
    /// ([`DpdkConfig::zero_copy_from`](crate::DpdkConfig::zero_copy_from)).
    pub(crate) zero_copy_from: Option<usize>,
}

/// Where a stream is in its life.
enum Phase {
    /// On the control core.
    Startup(StartupPhase),
    /// On its dataplane core.
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
    /// The active side of `connect`: sends the Request once TCP is up.
    pub(crate) fn initiator(
        context: StreamContext,
        now: Micros,
        connect: Connect,
    ) -> Result<Self, (Error, Answer)> {
        let phase = StartupPhase::initiator(now, connect)?;
        Ok(Self::in_phase(context, phase))
    }

    /// The passive side: its Request goes to `requests`.
    pub(crate) fn responder(
        context: StreamContext,
        now: Micros,
        requests: Sender<IncomingRequest>,
    ) -> Self {
        let phase = StartupPhase::responder(now, context.startup_timeout, requests);
        Self::in_phase(context, phase)
    }

    fn in_phase(context: StreamContext, phase: StartupPhase) -> Self {
        RdmaStream {
            phase: Phase::Startup(phase),
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
        if !matches!(self.phase, Phase::Startup(_)) {
            let _ = answer.send(Err(Error::WrongState("the request is no longer pending")));
            return;
        }
        self.startup_step(conn, |phase, conn, _| {
            phase.accept(conn, qp, params, answer)
        });
    }

    /// The application rejected the Request: the Reply carries
    /// `private_data`, then the connection closes.
    pub(crate) fn reject(
        &mut self,
        conn: &mut Connection,
        private_data: &[u8],
    ) -> Result<(), Error> {
        let mut result = Err(Error::WrongState("the request is no longer pending"));
        self.startup_step(conn, |phase, conn, _| {
            let (next, rejected) = phase.reject(conn, private_data);
            result = rejected;
            next
        });
        result
    }

    /// Takes a step of the startup phase, if the stream is in it, and goes
    /// where it leads; `step` gets the control core's command queue.
    fn startup_step(
        &mut self,
        conn: &mut Connection,
        step: impl FnOnce(StartupPhase, &mut Connection, &ControlLine) -> Next,
    ) {
        if !matches!(self.phase, Phase::Startup(_)) {
            return;
        }
        let Phase::Startup(phase) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            unreachable!("matched above");
        };
        match step(phase, conn, &self.context.control) {
            Next::Startup(phase) => self.phase = Phase::Startup(phase),
            Next::Operate(start, leftover) => {
                let base = self.rx_next - leftover.len() as u64;
                let context = &self.context;
                let mut operating =
                    Operating::new(conn, start, base, &context.table, context.zero_copy_from);
                self.rx_next = operating.feed(&leftover);
                self.phase = Phase::Operating(Box::new(operating));
            }
            Next::Finished => {}
        }
    }

    /// Reads what TCP holds in its reassembly buffer, in order, into the
    /// phase the stream is in.
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
            conn.release_received(end);
            if let Phase::Operating(operating) = &mut self.phase {
                // The startup frames are always read from the buffer; only
                // Full Operation counts.
                self.counters.bytes_reassembled += fresh.len() as u64;
                self.rx_next = operating.feed(&fresh);
            } else {
                self.startup_step(conn, |phase, conn, control| {
                    phase.input(conn, control, &fresh)
                });
            }
        }
    }

    /// Ends the stream as its connection ended (`end`): the engine learns
    /// of the closed LLP and reports, a pending `connect` or `accept`
    /// hears the error. Does nothing the second time.
    fn end_with(&mut self, end: End) {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Startup(phase) => phase.end(end_error(end)),
            Phase::Operating(operating) => operating.end(end_error(end)),
            Phase::Finished => {}
        }
    }
}

impl Consumer for RdmaStream {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        // The startup phase reads from the connection, where it can answer
        // at once; data it cannot take waits for what precedes it.
        let Phase::Operating(operating) = &mut self.phase else {
            return Disposition::Keep;
        };
        operating.on_data(&mut self.rx_next, pos, data, in_order, &mut self.counters)
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

impl TcpApp for RdmaStream {
    fn on_event(&mut self, _now: Instant, event: Event, conn: &mut Connection) {
        if let Event::PeerClosed = event {
            self.read_held(conn);
            self.startup_step(conn, |phase, conn, control| phase.closed(conn, control));
            if let Phase::Operating(operating) = &mut self.phase {
                operating.on_peer_closed();
            }
        }
    }

    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        self.read_held(conn);
        self.startup_step(conn, |phase, conn, control| phase.drive(now, conn, control));
        if let Phase::Operating(operating) = &mut self.phase {
            operating.drive(now, conn, &mut self.counters);
        }
    }

    fn ready_for_dataplane(&self) -> bool {
        matches!(self.phase, Phase::Operating(_))
    }

    fn on_dataplane(&mut self, doorbell: Doorbell) {
        if let Phase::Operating(operating) = &mut self.phase {
            operating.on_dataplane(doorbell);
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
