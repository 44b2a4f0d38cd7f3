//! [`TcpFlow`]: one connection with its application and route, as held by
//! the control core during the handshake and by a dataplane core after.
//!
//! Driving a flow is always the same three steps, whoever holds it: feed
//! it input (a segment or a timer), let the application act on the
//! events and queue data, and send every segment the engine has (RFC 9293
//! section 3.10's processing, the engine's `poll_transmit`).

use smoltcp::wire::TcpRepr;
use uwarp_dataplane::net::FrameSink;
use uwarp_stack::tcp::{Connection, Event, Instant, State};

use super::app::{End, TcpApp};
use super::route::Route;

/// Transmit counters of the flows one core drives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// TCP segments handed to the transmit queue.
    pub segments_sent: u64,
    /// Segments lost because the transmit queue or the mempool was full
    /// (TCP recovers them as losses).
    pub segments_dropped: u64,
}

/// Where a flow stands after it was driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Open; its timers are next due at the given time, if any.
    Open(Option<Instant>),
    /// Closed: drop it from its table.
    Closed,
}

/// One connection, its application and its route.
pub struct TcpFlow<A> {
    conn: Box<Connection>,
    app: A,
    route: Route,
    ended: bool,
    /// The deadline this flow is queued at in its core's timer queue.
    pub(crate) scheduled: Option<Instant>,
}

impl<A: TcpApp> TcpFlow<A> {
    /// A flow for `conn`, run by `app`, sending along `route`.
    pub fn new(conn: Box<Connection>, app: A, route: Route) -> Self {
        TcpFlow {
            conn,
            app,
            route,
            ended: false,
            scheduled: None,
        }
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// Hands a received segment to the engine (new data to the application).
    pub(crate) fn on_segment(&mut self, now: Instant, segment: &TcpRepr<'_>) {
        self.conn.on_segment(now, segment, &mut self.app);
    }

    /// Runs the engine's timers that are due.
    pub(crate) fn on_timer(&mut self, now: Instant) {
        if self.conn.poll_at().is_some_and(|at| at <= now) {
            self.conn.on_timer(now);
        }
    }

    /// Events to the application, its work, every segment out.
    pub(crate) fn service(
        &mut self,
        now: Instant,
        sink: &mut dyn FrameSink,
        counters: &mut FlowCounters,
    ) -> Status {
        self.deliver_events(now);
        if !self.ended {
            self.app.drive(now, &mut self.conn);
        }
        while let Some(segment) = self.conn.poll_transmit(now) {
            if self.route.transmit(&segment, sink) {
                counters.segments_sent += 1;
            } else {
                counters.segments_dropped += 1;
            }
        }
        self.deliver_events(now);
        if self.conn.is_closed() {
            self.end(End::Aborted);
            Status::Closed
        } else {
            Status::Open(self.conn.poll_at())
        }
    }

    /// Whether the handshake is over (the flow can leave the control core).
    pub(crate) fn is_synchronized(&self) -> bool {
        !matches!(self.conn.state(), State::SynSent | State::SynReceived)
    }

    fn deliver_events(&mut self, now: Instant) {
        while let Some(event) = self.conn.poll_event() {
            if self.ended {
                continue;
            }
            self.app.on_event(now, event, &mut self.conn);
            match event {
                Event::Closed => self.end(End::Closed),
                Event::Reset => self.end(End::Reset),
                Event::TimedOut => self.end(End::TimedOut),
                Event::Established | Event::PeerClosed => {}
            }
        }
    }

    fn end(&mut self, end: End) {
        if !self.ended {
            self.ended = true;
            self.app.on_end(end, self.conn.stats());
        }
    }
}
