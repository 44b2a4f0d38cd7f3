//! One socket's MPA startup phase (RFC 5044 section 7.1, RFC 6581): the
//! octets read so far, the sans-IO initiator or responder of
//! `uwarp-stack`, and the deadline.

use std::io::{self, Read};
use std::net::TcpStream;

use uwarp_stack::mpa::{
    ConnectRequest, Initiator, InitiatorOutcome, Micros, Responder, StartupError,
};

/// Which side of the startup a socket is on.
#[derive(Debug)]
pub(crate) enum Side {
    /// Sent a Request, waits for the Reply.
    Initiator(Initiator),
    /// Waits for a Request (and then for the application's decision).
    Responder(Responder),
}

/// What a call to [`Setup::poll`] found.
#[derive(Debug)]
pub(crate) enum Progress {
    /// Nothing yet.
    Pending,
    /// The Reply arrived; the octets after it belong to Full Operation.
    Replied(InitiatorOutcome, Vec<u8>),
    /// The Request arrived.
    Requested(ConnectRequest, Vec<u8>),
    /// The startup failed.
    Failed(StartupError),
}

/// A socket in its startup phase.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) stream: TcpStream,
    pub(crate) side: Side,
    done: bool,
}

impl Setup {
    /// A socket (already non-blocking) starting as `side`.
    pub(crate) fn new(stream: TcpStream, side: Side) -> Self {
        Self {
            stream,
            side,
            done: false,
        }
    }

    /// Reads what the socket has and advances the startup.
    pub(crate) fn poll(&mut self, now: Micros) -> Progress {
        if self.done {
            return Progress::Pending;
        }
        let mut chunk = [0u8; 2048];
        loop {
            let read = self.stream.read(&mut chunk);
            let n = match read {
                Ok(0) => return self.fail(self.closed_error()),
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.fail(self.closed_error()),
            };
            match self.feed(&chunk[..n]) {
                Progress::Pending => {}
                other => return other,
            }
        }
        let timer = match &self.side {
            Side::Initiator(initiator) => initiator.on_timer(now),
            Side::Responder(responder) => responder.on_timer(now),
        };
        match timer {
            Ok(()) => Progress::Pending,
            Err(err) => self.fail(err),
        }
    }

    fn feed(&mut self, data: &[u8]) -> Progress {
        let result = match &mut self.side {
            Side::Initiator(initiator) => initiator.on_bytes(data).map(|(used, outcome)| {
                outcome.map(|o| Progress::Replied(o, data[used..].to_vec()))
            }),
            Side::Responder(responder) => responder.on_bytes(data).map(|(used, request)| {
                request.map(|r| Progress::Requested(r, data[used..].to_vec()))
            }),
        };
        match result {
            Ok(Some(progress)) => {
                self.done = true;
                progress
            }
            Ok(None) => Progress::Pending,
            Err(err) => self.fail(err),
        }
    }

    fn closed_error(&self) -> StartupError {
        match &self.side {
            Side::Initiator(initiator) => initiator.on_peer_closed(),
            Side::Responder(_) => StartupError::ClosedBeforeFrame {
                retry_with_revision_1: false,
            },
        }
    }

    fn fail(&mut self, err: StartupError) -> Progress {
        self.done = true;
        Progress::Failed(err)
    }
}
