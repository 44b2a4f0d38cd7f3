//! [`RdmaStream`]: iWARP above one TCP connection of the DPDK transport.
//!
//! It is the connection's [`TcpApp`], so it runs where the connection
//! runs, in one phase after the other, a module each:
//!
//! - [`startup`]: on the control core, MPA's startup phase (RFC 5044
//!   section 7.1, RFC 6581): the Request and Reply, the application's
//!   accept or reject, the connection manager's policy for an active
//!   open. The stream asks to leave the control core only once in Full
//!   Operation.
//! - [`operation`]: on its dataplane core, Full Operation: the queue
//!   pair's RDMAP/DDP engine (RFC 5040, RFC 5041) over MPA's framing
//!   (RFC 5044 sections 4 to 6).
//!
//! This module holds the phases, reads what TCP delivers in order into
//! the phase that takes it, and dispatches TCP's calls to them.

mod operation;
mod startup;

use std::net::{SocketAddr, SocketAddrV4};

use crossbeam_channel::Sender;
use uwarp_stack::mpa::Micros;
use uwarp_stack::tcp::{Connection, Consumer, Disposition, Endpoint, Event, Instant, Stats};

use crate::cm::{Connection as Established, ControlCmd};
use crate::counters::TransportCounters;
use crate::device::Shared;
use crate::error::Error;
use operation::Operating;
use startup::{Deciding, Holding, Initiating, Responding};
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
    fn in_phase(context: StreamContext, phase: Phase) -> Self {
        RdmaStream {
            phase,
            context,
            rx_next: 0,
            counters: TransportCounters::default(),
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
            if matches!(self.phase, Phase::Operating(_)) {
                // The startup frames are always read from the buffer; only
                // Full Operation counts.
                self.counters.bytes_reassembled += fresh.len() as u64;
                self.feed_engine(&fresh);
            } else {
                self.startup_input(conn, &fresh);
            }
        }
    }

    /// Ends the stream as its connection ended (`end`): the engine learns
    /// of the closed LLP and reports, a pending `connect` or `accept`
    /// hears the error. Does nothing the second time.
    fn end_with(&mut self, end: End) {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Operating(operating) => operating.end(end),
            Phase::Initiating(initiating) => {
                let _ = initiating.answer.send(Err(end_error(end)));
            }
            Phase::Holding(holding) => {
                let _ = holding.start.answer.send(Err(end_error(end)));
            }
            Phase::Responding(_) | Phase::Deciding(_) | Phase::Finished => {}
        }
    }
}

impl Consumer for RdmaStream {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        // The startup phase reads from the connection, where it can answer
        // at once; data it cannot take waits for what precedes it.
        self.operating_data(pos, data, in_order)
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

impl TcpApp for RdmaStream {
    fn on_event(&mut self, _now: Instant, event: Event, conn: &mut Connection) {
        if let Event::PeerClosed = event {
            self.read_held(conn);
            self.startup_closed(conn);
            if let Phase::Operating(operating) = &mut self.phase {
                operating.on_peer_closed();
            }
        }
    }

    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        self.read_held(conn);
        self.drive_startup(now, conn);
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
