//! The dataplane thread of the socket transport: it owns every established
//! connection's socket and engine, and in one poll loop moves work
//! requests from the application's rings into the engines, stream octets
//! between the sockets and the engines, and completions and events back
//! to the application (the run-to-completion loop of the DPDK transport,
//! with a socket in place of a NIC queue).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use uwarp_stack::rdmap::{EngineConfig, LlpClose, QpEngine};
use uwarp_stack::verbs::QpState;

use super::descriptors::Registered;
use super::idle::{Idle, Interest};
use super::readiness::Readiness;
use super::tcp;
use crate::bell::Bell;
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
/// Octets read per connection per loop.
const RX_CHUNK: usize = 256 * 1024;
/// How long a device being dropped waits for the application to make
/// room in completion queues that are full; what they still cannot take
/// after that is discarded (each queue's `overflowed` count already says
/// it overran).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a connection that sent octets since its last look reads the
/// kernel's retransmission count (`TCP_INFO`, a system call) for its
/// counters.
const TCP_INFO_INTERVAL: Duration = Duration::from_millis(1);
/// How often one that sent nothing since reads it: retransmissions of
/// what it sent earlier still show within this, and idle connections
/// cost next to nothing.
const TCP_INFO_IDLE_INTERVAL: Duration = Duration::from_millis(100);

struct Conn {
    stream: Registered<TcpStream>,
    link: QpLink,
    out: Vec<u8>,
    out_at: usize,
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
}

impl Conn {
    fn new(adopt: Adopt, readiness: &Readiness) -> Self {
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
            out: Vec::with_capacity(TX_BUDGET + 65_536),
            out_at: 0,
            read_closed: false,
            write_closed: false,
            closed_at: None,
            tcp_info_due: Instant::now(),
            sent_since_info: false,
            watched,
        }
    }

    /// One round: returns whether anything happened, and whether the
    /// connection is finished. A finished connection has delivered all
    /// its completions, unless `give_up` says to stop waiting for room in
    /// a full completion queue. The socket is read when `readiness` found
    /// it readable.
    fn poll(
        &mut self,
        now: Instant,
        rx: &mut [u8],
        readiness: &Readiness,
        give_up: bool,
    ) -> (bool, bool) {
        let mut busy = self.link.take_work();
        if !self.watched || readiness.is_readable(self.stream.as_fd()) {
            busy |= self.receive(rx);
        }
        busy |= self.transmit();
        self.read_tcp_info(now);
        busy |= self.link.report();
        self.close_if_asked();
        self.reset_if_peer_lingers();
        if self.read_closed && self.watched {
            // An ended or reset stream stays readable for good: it would
            // wake every park.
            readiness.forget(self.stream.as_fd());
            self.watched = false;
        }
        let finished = self.link.engine.state() == QpState::Error
            && self.write_closed
            && self.out_at == self.out.len()
            && (give_up || !self.link.has_backlog());
        (busy, finished)
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
            self.link.set_transport_counters(TransportCounters {
                retransmissions,
                ..TransportCounters::default()
            });
        }
    }

    fn receive(&mut self, rx: &mut [u8]) -> bool {
        if self.read_closed {
            return false;
        }
        match self.stream.read(rx) {
            Ok(0) => {
                self.read_closed = true;
                self.link.engine.on_llp_closed();
                true
            }
            Ok(n) => {
                self.link.engine.on_bytes(&rx[..n]);
                true
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => false,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => true,
            Err(_) => {
                self.read_closed = true;
                self.link.engine.on_llp_closed();
                true
            }
        }
    }

    fn transmit(&mut self) -> bool {
        if self.write_closed {
            return false;
        }
        if self.out_at == self.out.len() {
            self.out.clear();
            self.out_at = 0;
            self.link.engine.poll_transmit(&mut self.out, TX_BUDGET);
        }
        let mut busy = false;
        while self.out_at < self.out.len() {
            match self.stream.write(&self.out[self.out_at..]) {
                Ok(n) => {
                    self.out_at += n;
                    self.sent_since_info = true;
                    busy = true;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // The peer is gone: nothing more can be sent.
                    self.out_at = self.out.len();
                    self.write_closed = true;
                    self.link.engine.on_llp_closed();
                    return true;
                }
            }
        }
        busy
    }

    /// What a parked dataplane waits for on this socket, besides the
    /// readiness set: room for our octets while some wait, and octets
    /// from the peer if the socket is not in the set.
    fn interest(&self) -> Interest<'_> {
        Interest {
            fd: self.stream.as_fd(),
            readable: !self.read_closed && !self.watched,
            writable: !self.write_closed && self.out_at < self.out.len(),
        }
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
            Some(LlpClose::Graceful) if self.out_at == self.out.len() => {
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

    /// Closes both directions with an RST; octets not yet written are
    /// dropped with the connection.
    fn reset(&mut self) {
        tcp::set_abortive_close(&self.stream);
        let _ = self.stream.shutdown(Shutdown::Both);
        self.write_closed = true;
        self.read_closed = true;
        self.out.clear();
        self.out_at = 0;
    }
}

/// Starts the dataplane thread.
///
/// The control thread rings `bell` after each connection it hands over:
/// a parked dataplane takes it at once.
pub(crate) fn spawn_dataplane(
    adopt: Receiver<Adopt>,
    bell: Arc<Bell>,
) -> io::Result<JoinHandle<()>> {
    let readiness = Readiness::new()?;
    readiness.watch(bell.as_fd())?;
    std::thread::Builder::new()
        .name("uwarp-dataplane".into())
        .spawn(move || run(adopt, bell, readiness))
}

fn run(adopt: Receiver<Adopt>, bell: Arc<Bell>, mut readiness: Readiness) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut rx = vec![0u8; RX_CHUNK];
    let mut idle = Idle::default();
    // Once the device is closing: when to stop waiting for room in full
    // completion queues.
    let mut drain_deadline: Option<Instant> = None;
    loop {
        if conns.is_empty() {
            // Nothing to poll: sleep until a connection is handed over
            // (an idle device takes no CPU), or the device closes.
            match adopt.recv() {
                Ok(new) => conns.push(Conn::new(new, &readiness)),
                Err(_) => return,
            }
        }
        loop {
            match adopt.try_recv() {
                Ok(new) => conns.push(Conn::new(new, &readiness)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // The device is closing: reset what is still open.
                    if conns.is_empty() {
                        return;
                    }
                    if drain_deadline.is_none() {
                        drain_deadline = Some(Instant::now() + DRAIN_TIMEOUT);
                        conns.iter_mut().for_each(|conn| conn.link.engine.abort());
                    }
                    break;
                }
            }
        }
        let now = Instant::now();
        let give_up = drain_deadline.is_some_and(|deadline| now >= deadline);
        let mut busy = false;
        readiness.look();
        if readiness.is_readable(bell.as_fd()) {
            bell.silence();
        }
        conns.retain_mut(|conn| {
            let (active, finished) = conn.poll(now, &mut rx, &readiness, give_up);
            busy |= active;
            if finished && conn.watched {
                readiness.forget(conn.stream.as_fd());
            }
            !finished
        });
        let set = Interest {
            fd: readiness.as_fd(),
            readable: true,
            writable: false,
        };
        // The park leaves out sockets waited on for nothing: reading,
        // the set waits for them all.
        let sockets = conns.iter().map(Conn::interest);
        idle.after_round(busy, std::iter::once(set).chain(sockets));
    }
}
