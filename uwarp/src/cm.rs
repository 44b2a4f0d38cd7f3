//! The connection manager's types (librdmacm's `rdma_connect`,
//! `rdma_listen`, `rdma_accept`, `rdma_reject`): what an application asks
//! for when it connects, what a listener hands it, and what an established
//! connection reports. The MPA startup phase itself (RFC 5044 section 7,
//! RFC 6581) runs on the device's control thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, SendError, Sender};
use uwarp_control::startup::Attempt;
use uwarp_stack::mpa::{ConnectRequest, Initiator, LocalParams, Micros, Negotiated, StartupError};

use crate::bell::Bell;
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::QueuePair;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectParams {
    /// MPA settings: revision, CRC, Markers, IRD/ORD, peer-to-peer RTR
    /// options and the private data for the Request.
    pub mpa: LocalParams,
    /// Give up if the TCP connection or the MPA Reply takes longer.
    pub timeout: Duration,
    /// When a revision-2 Request is refused by a responder that only
    /// speaks revision 1 (it closes the connection), retry once with
    /// revision 1 (RFC 6581 section 10).
    pub revision_1_fallback: bool,
    /// How long this end holds its first FPDU (the peer-to-peer RTR, or
    /// the first message) back after the Reply arrives: the queue pair
    /// enters RTS, and `connect` returns, only then. Zero, the default,
    /// sends at once. Linux siw as the responder needs about 50 ms: it
    /// sends its Reply before it starts reading the connection, and an
    /// FPDU that arrives in between is never read (siw's accept race, see
    /// docs/siw-interop.md). On the DPDK transport the hold ends at the control
    /// core's next startup sweep after the delay (within 50 ms).
    pub first_fpdu_delay: Duration,
}

impl Default for ConnectParams {
    fn default() -> Self {
        Self {
            mpa: LocalParams::default(),
            timeout: Duration::from_secs(10),
            revision_1_fallback: false,
            first_fpdu_delay: Duration::ZERO,
        }
    }
}

/// An established connection's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// What MPA negotiated.
    pub negotiated: Negotiated,
    /// The peer's private data from its Request or Reply.
    pub private_data: Vec<u8>,
    /// This end's address.
    pub local_addr: SocketAddr,
    /// The peer's address.
    pub peer_addr: SocketAddr,
    /// The largest ULPDU this end sends (RFC 5044 section 4.1), from the
    /// connection's MSS: a message longer than this less the DDP header
    /// travels in several segments.
    pub mulpdu: usize,
}

/// A connection request waiting for the application's decision. Dropping
/// it undecided rejects it with no private data.
#[derive(Debug)]
pub struct IncomingRequest {
    /// What the initiator asked for: revision, CRC, Markers, its enhanced
    /// block (IRD/ORD and RTR options) and its private data.
    pub request: ConnectRequest,
    /// Where it comes from.
    pub peer_addr: SocketAddr,
    pub(crate) id: u64,
    pub(crate) control: ControlLine,
    pub(crate) decided: bool,
    /// Runs the device's cores while `accept` or `reject` waits (set by
    /// the listener that hands the request out).
    pub(crate) driver: Driver,
}

impl IncomingRequest {
    /// The initiator's private data.
    pub fn private_data(&self) -> &[u8] {
        &self.request.private_data
    }

    /// The initiator's IRD and ORD, when it sent the RFC 6581 block.
    pub fn ird_ord(&self) -> Option<(u16, u16)> {
        self.request.enhanced.map(|block| (block.ird, block.ord))
    }

    /// Accepts onto `qp` with `params` (its private data goes in the
    /// Reply); returns once the Reply is sent and the queue pair is in RTS.
    pub fn accept(mut self, qp: &QueuePair, params: LocalParams) -> Result<Connection, Error> {
        self.decided = true;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let cmd = ControlCmd::Accept {
            id: self.id,
            qp: qp.clone(),
            params,
            reply,
        };
        self.control.send(cmd).map_err(|_| Error::DeviceClosed)?;
        let outcome = self.driver.wait(&answer).and_then(|connected| connected);
        outcome.inspect_err(|_| qp.connection_failed())
    }

    /// Rejects with `private_data` in the Reply, then closes.
    pub fn reject(mut self, private_data: &[u8]) -> Result<(), Error> {
        self.decided = true;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let cmd = ControlCmd::Reject {
            id: self.id,
            private_data: private_data.to_vec(),
            reply: Some(reply),
        };
        self.control.send(cmd).map_err(|_| Error::DeviceClosed)?;
        self.driver.wait(&answer)?
    }
}

impl Drop for IncomingRequest {
    fn drop(&mut self) {
        if !self.decided {
            let _ = self.control.send(ControlCmd::Reject {
                id: self.id,
                private_data: Vec::new(),
                reply: None,
            });
        }
    }
}

/// How a listener is opened ([`Device::listen_with`](crate::Device::listen_with)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenOptions {
    /// For an IPv6 address: whether it takes IPv6 connections only
    /// (`RDMA_OPTION_ID_AFONLY`, the socket's `IPV6_V6ONLY`), or IPv4
    /// ones too; `None` leaves the system's default (Linux's
    /// `net.ipv6.bindv6only`, 0: both), as the kernel's connection
    /// manager does for an id that never set the option.
    pub af_only: Option<bool>,
}

/// A listening endpoint (`rdma_listen`); stops listening when dropped.
#[derive(Debug)]
pub struct Listener {
    pub(crate) local_addr: SocketAddr,
    pub(crate) id: u64,
    pub(crate) requests: crossbeam_channel::Receiver<IncomingRequest>,
    pub(crate) control: ControlLine,
    pub(crate) driver: Driver,
    /// [`Listener::stop`] ran.
    pub(crate) stopped: std::sync::atomic::AtomicBool,
}

impl Listener {
    /// The address it listens on (with the port the system chose for port
    /// 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The next connection request whose MPA Request has arrived, waiting
    /// up to `timeout`.
    pub fn get_request(&self, timeout: Duration) -> Result<IncomingRequest, Error> {
        let mut request = self
            .driver
            .recv(&self.requests, timeout)
            .map_err(|err| match err {
                crossbeam_channel::RecvTimeoutError::Timeout => Error::Timeout,
                crossbeam_channel::RecvTimeoutError::Disconnected => Error::DeviceClosed,
            })?;
        request.driver = self.driver.clone();
        Ok(request)
    }
}

/// How long dropping a [`Listener`] waits for its control core to close
/// the port.
const STOP_LISTENING_WAIT: Duration = Duration::from_secs(5);

impl Listener {
    /// Stops listening, and returns once the port is closed (so a connect
    /// right after is refused, not accepted by a listener about to go),
    /// or after 5 s if the control core does not answer. Requests not yet
    /// taken are rejected; a thread waiting in
    /// [`get_request`](Self::get_request) wakes with
    /// [`Error::DeviceClosed`] once those are taken. Later calls do
    /// nothing.
    pub fn stop(&self) {
        if self.stopped.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let (done, closed) = crossbeam_channel::bounded(1);
        let cmd = ControlCmd::StopListening { id: self.id, done };
        if self.control.send(cmd).is_ok() {
            let _ = self.driver.recv(&closed, STOP_LISTENING_WAIT);
        }
    }
}

impl Drop for Listener {
    /// Stops listening ([`Listener::stop`]).
    fn drop(&mut self) {
        self.stop();
    }
}

/// A new listener: its identifier, its address, and where its connection
/// requests arrive.
pub(crate) type Listening = (u64, SocketAddr, Receiver<IncomingRequest>);

/// An active open, as the control thread takes it.
#[derive(Debug)]
pub(crate) struct Connect {
    /// The listener to connect to.
    pub(crate) addr: SocketAddr,
    /// The queue pair to connect.
    pub(crate) qp: QueuePair,
    /// How to connect.
    pub(crate) params: ConnectParams,
    /// Where `connect` waits for the outcome.
    pub(crate) reply: Sender<Result<Connection, Error>>,
    /// Whether this is the one retry in revision 1
    /// ([`ConnectParams::revision_1_fallback`]), which is not retried.
    pub(crate) retry: bool,
}

impl Connect {
    /// The initiator of the MPA startup phase, started at `now`.
    pub(crate) fn initiator(&self, now: Micros) -> Result<Initiator, Error> {
        let timeout = self.params.timeout.as_micros() as Micros;
        Initiator::new(self.params.mpa.clone(), now, timeout)
            .map_err(|err| Error::Startup(StartupError::Malformed(err)))
    }

    /// This attempt, as the MPA startup policy sees it.
    pub(crate) fn attempt(&self) -> Attempt {
        Attempt {
            revision_1_fallback: self.params.revision_1_fallback,
            retry: self.retry,
        }
    }

    /// The one retry in revision 1, with the initiator's fallback
    /// settings `mpa`.
    pub(crate) fn retry_with(self, mpa: LocalParams) -> Self {
        Connect {
            params: ConnectParams { mpa, ..self.params },
            retry: true,
            ..self
        }
    }
}

/// The sending end of a control core's [`ControlCmd`]s. The socket
/// transport's control thread sleeps on its sockets, so each command also
/// rings its [`Bell`]; the DPDK control core polls its channel and has no
/// bell.
#[derive(Debug, Clone)]
pub(crate) struct ControlLine {
    commands: Sender<ControlCmd>,
    bell: Option<Arc<Bell>>,
}

impl ControlLine {
    /// A line into `commands`, ringing `bell` after each command.
    pub(crate) fn new(commands: Sender<ControlCmd>, bell: Option<Arc<Bell>>) -> Self {
        Self { commands, bell }
    }

    /// Sends `cmd` to the control core and wakes it; the command comes
    /// back when the core has stopped.
    // As crossbeam's own `send`: the DPDK transport's revision-1 retry
    // takes its `Connect` back out of the error.
    #[allow(clippy::result_large_err)]
    pub(crate) fn send(&self, cmd: ControlCmd) -> Result<(), SendError<ControlCmd>> {
        self.commands.send(cmd)?;
        if let Some(bell) = &self.bell {
            bell.ring();
        }
        Ok(())
    }

    /// The bell the control core sleeps on, if it sleeps.
    pub(crate) fn bell(&self) -> Option<&Arc<Bell>> {
        self.bell.as_ref()
    }
}

/// What the application asks of the control thread.
#[derive(Debug)]
pub(crate) enum ControlCmd {
    /// Listen on an address.
    Listen {
        addr: SocketAddr,
        options: ListenOptions,
        reply: Sender<Result<Listening, Error>>,
    },
    /// Stop listening; `done` hears once the port is closed.
    StopListening { id: u64, done: Sender<()> },
    /// Connect a queue pair.
    Connect(Connect),
    /// Accept a pending request onto a queue pair.
    Accept {
        id: u64,
        qp: QueuePair,
        params: LocalParams,
        reply: Sender<Result<Connection, Error>>,
    },
    /// Reject a pending request.
    Reject {
        id: u64,
        private_data: Vec<u8>,
        reply: Option<Sender<Result<(), Error>>>,
    },
    /// End the thread.
    Shutdown,
}
