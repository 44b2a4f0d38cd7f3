//! One connection's MPA startup phase, sans-IO (RFC 5044 section 7.1,
//! RFC 6581 sections 5 and 10): the initiator or responder of
//! `uwarp-stack` fed with octets as they arrive, whichever transport
//! carries them (a kernel socket, or uwarp's TCP on DPDK).

use uwarp_stack::mpa::{
    ConnectRequest, Initiator, InitiatorOutcome, Micros, Responder, StartupError,
};

/// Which side of the startup a connection is on.
#[derive(Debug)]
pub enum Side {
    /// Sent a Request, waits for the Reply.
    Initiator(Initiator),
    /// Waits for a Request (and then for the application's decision).
    Responder(Responder),
}

/// What the startup phase did with the latest input.
#[derive(Debug)]
pub enum Progress {
    /// Nothing yet.
    Pending,
    /// The Reply arrived; the octets after it belong to Full Operation.
    Replied(InitiatorOutcome, Vec<u8>),
    /// The Request arrived; the octets after it belong to Full Operation.
    Requested(ConnectRequest, Vec<u8>),
    /// The startup failed.
    Failed(StartupError),
}

/// A connection in its startup phase: it reports one outcome, then only
/// [`Progress::Pending`].
#[derive(Debug)]
pub struct Startup {
    /// The initiator or responder it runs.
    pub side: Side,
    done: bool,
}

impl Startup {
    /// A startup on `side`.
    pub fn new(side: Side) -> Self {
        Startup { side, done: false }
    }

    /// The next octets of the stream.
    pub fn feed(&mut self, data: &[u8]) -> Progress {
        if self.done {
            return Progress::Pending;
        }
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

    /// Checks the deadline for the peer's frame at `now`.
    pub fn on_timer(&mut self, now: Micros) -> Progress {
        if self.done {
            return Progress::Pending;
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

    /// The peer closed (or the connection failed) before its frame was
    /// complete.
    pub fn on_closed(&mut self) -> Progress {
        if self.done {
            return Progress::Pending;
        }
        let err = match &self.side {
            Side::Initiator(initiator) => initiator.on_peer_closed(),
            Side::Responder(_) => StartupError::ClosedBeforeFrame {
                retry_with_revision_1: false,
            },
        };
        self.fail(err)
    }

    fn fail(&mut self, err: StartupError) -> Progress {
        self.done = true;
        Progress::Failed(err)
    }
}
