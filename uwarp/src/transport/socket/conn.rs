//! One established connection of the socket transport: its socket, its
//! queue pair's engine, and the round that moves work requests into the
//! engine, octets between the socket and the engine, and completions and
//! events back to the application. The dataplane thread runs every
//! connection's round; an application thread may run one itself
//! ([`Conn::run_on_application`], through `conn_cell.rs`).

use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use uwarp_stack::rdmap::{EngineConfig, LlpClose, QpEngine};
use uwarp_stack::verbs::QpState;

use super::descriptors::Registered;
use super::outbound::Outbound;
use super::readiness::Readiness;
use super::tcp;
use crate::counters::TransportCounters;
use crate::qp::QueuePair;
use crate::qp_link::{QpLink, CLOSE_TIMEOUT};

/// An established connection handed over by the control thread.
#[derive(Debug)]
pub(crate) struct Adopt {
    /// The socket, non-blocking.
    pub(crate) stream: Registered<TcpStream>,
    /// The engine's configuration.
    pub(crate) config: EngineConfig,
    /// The application's handle.
    pub(crate) qp: QueuePair,
    /// Full Operation octets that arrived with the last startup frame.
    pub(crate) leftover: Vec<u8>,
}

/// Octets the engine may produce per connection per loop.
const TX_BUDGET: usize = 256 * 1024;
/// Room for framed octets waiting for the socket: a round's budget and
/// the largest FPDU, which may end past it, twice over.
const OUTBOUND_CAPACITY: usize = TX_BUDGET + 2 * 65_536;
/// At most how many times [`TX_BUDGET`] an application thread's round
/// writes, and [`RX_CHUNK`] it reads (4 MiB): a large message goes out
/// whole from the posting thread while the socket takes it, and is
/// placed whole by one poll when it is there.
const APPLICATION_ROUNDS: usize = 16;
/// Octets read per connection per round: the size of the buffer a
/// round reads into.
pub(super) const RX_CHUNK: usize = 256 * 1024;
/// How often a connection that sent octets since its last look reads the
/// kernel's retransmission count (`TCP_INFO`, a system call) for its
/// counters.
const TCP_INFO_INTERVAL: Duration = Duration::from_millis(1);
/// How often one that sent nothing since reads it: retransmissions of
/// what it sent earlier still show within this, and idle connections
/// cost next to nothing.
const TCP_INFO_IDLE_INTERVAL: Duration = Duration::from_millis(100);

pub(super) struct Conn {
    stream: Registered<TcpStream>,
    link: QpLink,
    out: Outbound,
    read_closed: bool,
    write_closed: bool,
    /// When this side closed its direction, or its engine entered
    /// Terminate, whichever came first: the peer has [`CLOSE_TIMEOUT`]
    /// from then.
    closed_at: Option<Instant>,
    /// When the kernel's retransmission count is next read.
    tcp_info_due: Instant,
    /// Octets were written since the count was last read.
    sent_since_info: bool,
    /// The socket is in the dataplane's [`Readiness`] set (adding it
    /// can fail, as when the user's epoll watches run out: then it is
    /// read every round).
    watched: bool,
    /// The kernel's retransmission count, as last read.
    retransmissions: u64,
    /// Rounds an application thread ran that did something.
    application_rounds: u64,
    /// An application thread polls for what the socket brings: the
    /// dataplane thread leaves the socket to it (out of the readiness
    /// set, not read, not waited on).
    left_to_application: bool,
}

impl Conn {
    pub(super) fn new(adopt: Adopt, readiness: &Readiness) -> Self {
        let watched = readiness.watch(adopt.stream.as_fd()).is_ok();
        let mut link = QpLink::new(QpEngine::new(adopt.config), adopt.qp);
        // Receives posted before the connection came up take what arrived
        // with the last startup frame.
        link.take_work();
        if !adopt.leftover.is_empty() {
            link.engine.on_bytes(&adopt.leftover);
        }
        Self {
            stream: adopt.stream,
            link,
            out: Outbound::new(OUTBOUND_CAPACITY),
            read_closed: false,
            write_closed: false,
            closed_at: None,
            tcp_info_due: Instant::now(),
            sent_since_info: false,
            watched,
            retransmissions: 0,
            application_rounds: 0,
            left_to_application: false,
        }
    }

    /// The application's handle.
    pub(super) fn qp(&self) -> &QueuePair {
        self.link.qp()
    }

    /// One round of the dataplane thread: returns whether anything
    /// happened, and whether the connection is finished. A finished
    /// connection has delivered all its completions, unless `give_up`
    /// says to stop waiting for room in a full completion queue. The
    /// socket is read when `readiness` found it readable.
    ///
    /// While `application_reads` (an application thread polls for what
    /// the socket brings, `conn_cell.rs`), the round leaves the socket's
    /// octets to it, and takes posted work only when `take_posts` (an
    /// application thread asked for a round while this one held the
    /// connection): the application sends what it posts on its own
    /// thread, several posts in one write.
    pub(super) fn poll(
        &mut self,
        now: Instant,
        rx: &mut [u8],
        readiness: &Readiness,
        give_up: bool,
        (application_reads, take_posts): (bool, bool),
    ) -> (bool, bool) {
        self.leave_to_application(application_reads, readiness);
        let mut busy = false;
        if !application_reads || take_posts {
            busy |= self.link.take_work();
        }
        let readable = !self.watched || readiness.is_readable(self.stream.as_fd());
        if readable && !self.left_to_application {
            busy |= self.receive(rx).is_some();
        }
        busy |= self.transmit();
        self.read_tcp_info(now);
        busy |= self.link.report();
        self.close_if_asked();
        self.reset_if_peer_lingers();
        if self.read_closed {
            // An ended or reset stream stays readable for good: it would
            // wake every park.
            self.forget(readiness);
        }
        let finished = self.link.engine.state() == QpState::Error
            && self.write_closed
            && !self.out.has_unwritten()
            && (give_up || !self.link.has_backlog());
        (busy, finished)
    }

    /// Leaves the socket to an application thread that polls for it, or
    /// takes it back: out of the readiness set while left, so that what
    /// arrives wakes neither a parked dataplane thread nor a race for the
    /// socket's lock with the application, and in it again after.
    fn leave_to_application(&mut self, leave: bool, readiness: &Readiness) {
        if leave == self.left_to_application || self.read_closed {
            return;
        }
        self.left_to_application = leave;
        if leave {
            self.forget(readiness);
        } else {
            // A socket the set cannot take is read every round.
            self.watched = readiness.watch(self.stream.as_fd()).is_ok();
        }
    }

    /// Takes the kernel's retransmission count into the queue pair's
    /// counters, at most once per [`TCP_INFO_INTERVAL`] while the
    /// connection sends, once per [`TCP_INFO_IDLE_INTERVAL`] otherwise.
    fn read_tcp_info(&mut self, now: Instant) {
        if now < self.tcp_info_due {
            return;
        }
        let interval = if self.sent_since_info {
            TCP_INFO_INTERVAL
        } else {
            TCP_INFO_IDLE_INTERVAL
        };
        self.tcp_info_due = now + interval;
        self.sent_since_info = false;
        if let Some(retransmissions) = tcp::total_retransmissions(&self.stream) {
            self.retransmissions = retransmissions;
            self.set_transport_counters();
        }
    }

    /// Gives the link what this connection counted, for its next report.
    fn set_transport_counters(&mut self) {
        self.link.set_transport_counters(TransportCounters {
            retransmissions: self.retransmissions,
            application_rounds: self.application_rounds,
            ..TransportCounters::default()
        });
    }

    /// One round on an application thread: posted work into the engine,
    /// octets out, whatever the socket holds in (read whether or not
    /// the dataplane's readiness set saw it), completions and events out.
    /// Returns whether anything happened. The kernel's counters, the
    /// readiness set and the lingering peer's timer stay the dataplane
    /// thread's.
    pub(super) fn run_on_application(&mut self, rx: &mut [u8]) -> bool {
        let mut busy = self.link.take_work();
        // What the socket holds, while reads fill the buffer: a large
        // message is placed whole in one poll.
        for _ in 0..APPLICATION_ROUNDS {
            let Some(read) = self.receive(rx) else {
                break;
            };
            busy = true;
            if read < rx.len() {
                break;
            }
        }
        // Everything the engine has, while the socket takes it: nothing
        // else would send the rest of a large message soon (the
        // dataplane thread may be parked, and waits for room only where
        // octets wait for it).
        for _ in 0..APPLICATION_ROUNDS {
            let wrote = self.transmit();
            busy |= wrote;
            if !wrote || self.out.has_unwritten() {
                break;
            }
        }
        if busy {
            self.application_rounds += 1;
            self.set_transport_counters();
        }
        busy |= self.link.report();
        self.close_if_asked();
        busy
    }

    /// Reads the socket once into `rx` and gives the engine what came;
    /// how many octets (0 at the end of the stream or after an
    /// interruption), or `None` when there was nothing to read.
    fn receive(&mut self, rx: &mut [u8]) -> Option<usize> {
        if self.read_closed {
            return None;
        }
        match self.stream.read(rx) {
            Ok(0) => {
                self.read_closed = true;
                self.link.engine.on_llp_closed();
                Some(0)
            }
            Ok(n) => {
                self.link.engine.on_bytes(&rx[..n]);
                Some(n)
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => None,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Some(0),
            Err(_) => {
                self.read_closed = true;
                self.link.engine.on_llp_closed();
                Some(0)
            }
        }
    }

    /// Writes what waits for the socket and, once nothing does, what the
    /// engine has to send: small FPDUs framed into the outbound buffer,
    /// large payloads written through from registered memory
    /// (`outbound.rs`). Returns whether anything was written.
    fn transmit(&mut self) -> bool {
        if self.write_closed {
            return false;
        }
        let Ok(mut wrote) = self.out.flush(&self.stream) else {
            self.peer_gone();
            return true;
        };
        if !self.out.has_unwritten() {
            let mut sink = self.out.sink(&self.stream);
            self.link.engine.poll_transmit_to(&mut sink, TX_BUDGET);
            let outcome = sink.outcome();
            wrote |= outcome.wrote;
            if outcome.broken {
                // An FPDU went out in part: the peer cannot read on.
                self.reset();
                self.link.engine.on_llp_closed();
                return true;
            }
            match self.out.flush(&self.stream) {
                Ok(flushed) if !outcome.failed => wrote |= flushed,
                _ => {
                    self.peer_gone();
                    return true;
                }
            }
        }
        self.sent_since_info |= wrote;
        wrote
    }

    /// The socket cannot be written any more (the peer is gone): nothing
    /// more is sent.
    fn peer_gone(&mut self) {
        self.out.clear();
        self.write_closed = true;
        self.link.engine.on_llp_closed();
    }

    /// What a parked dataplane waits for on this socket, besides the
    /// readiness set: octets from the peer if the socket is not in the
    /// set (first), and room for our octets while some wait (second).
    pub(super) fn waits_for(&self) -> (bool, bool) {
        (
            !self.read_closed && !self.watched && !self.left_to_application,
            self.has_unwritten(),
        )
    }

    /// When the connection next needs a round of the dataplane thread if
    /// nothing arrives, is posted or asked for (its next look at the
    /// kernel's counters); `None` while it needs every round: octets
    /// wait for room, completions for room in their queue, a close is
    /// under way, or the socket is read every round (not in the
    /// readiness set).
    pub(super) fn quiet_until(&self) -> Option<Instant> {
        let quiet = !self.out.has_unwritten()
            && !self.link.has_backlog()
            && self.closed_at.is_none()
            && !self.read_closed
            && !self.write_closed
            && (self.watched || self.left_to_application)
            && self.link.engine.state() == QpState::Rts;
        quiet.then_some(self.tcp_info_due)
    }

    /// Whether octets framed for the socket wait for room in it.
    pub(super) fn has_unwritten(&self) -> bool {
        !self.write_closed && self.out.has_unwritten()
    }

    /// The socket's descriptor.
    pub(super) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Closes the stream as the engine asks: gracefully once everything
    /// produced is sent, abortively at once (a reset discards what the
    /// peer has not taken, so it cannot wait for a peer that stopped
    /// reading).
    fn close_if_asked(&mut self) {
        if self.write_closed {
            return;
        }
        if self.link.engine.state() == QpState::Terminate {
            // Nothing is left to deliver but the Terminate: the clock
            // runs from now, even while a peer that stopped reading
            // holds it back.
            self.closed_at.get_or_insert_with(Instant::now);
        }
        match self.link.engine.llp_close() {
            Some(LlpClose::Graceful) if !self.out.has_unwritten() => {
                let _ = self.stream.shutdown(Shutdown::Write);
                self.write_closed = true;
                self.closed_at.get_or_insert_with(Instant::now);
            }
            Some(LlpClose::Abortive) => self.reset(),
            _ => {}
        }
    }

    /// A peer that keeps the stream open long after ours closed (one that
    /// ignores our Terminate, or stopped reading so our close never
    /// leaves) is reset, so the queue pair reaches Error and its
    /// resources are freed.
    fn reset_if_peer_lingers(&mut self) {
        let Some(closed_at) = self.closed_at else {
            return;
        };
        let open = !self.read_closed || !self.write_closed;
        if open && closed_at.elapsed() >= CLOSE_TIMEOUT {
            self.reset();
            self.link.engine.on_llp_closed();
            self.link.report();
        }
    }

    /// Aborts the queue pair (the device is closing): its work is
    /// flushed and the connection reset.
    pub(super) fn abort(&mut self) {
        self.link.engine.abort();
    }

    /// Takes the socket out of `readiness` if it is in it.
    pub(super) fn forget(&mut self, readiness: &Readiness) {
        if self.watched {
            readiness.forget(self.stream.as_fd());
            self.watched = false;
        }
    }

    /// Closes both directions with an RST; octets not yet written are
    /// dropped with the connection.
    fn reset(&mut self) {
        tcp::set_abortive_close(&self.stream);
        let _ = self.stream.shutdown(Shutdown::Both);
        self.write_closed = true;
        self.read_closed = true;
        self.out.clear();
    }
}
