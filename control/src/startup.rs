//! One connection's MPA startup phase, sans-IO (RFC 5044 section 7.1,
//! RFC 6581 sections 5 and 10): the initiator or responder of
//! `uwarp-stack` fed with octets as they arrive, whichever transport
//! carries them (a kernel socket, or uwarp's TCP on DPDK), and the
//! connection manager's policy for an active open once its startup is
//! over ([`Startup::initiator_decision`]: accept, reject, retry once in
//! revision 1, or fail with the Terminate RFC 6581 sections 8 and 9 ask
//! for).

use uwarp_stack::mpa::{
    ConnectRequest, Initiator, InitiatorOutcome, LocalParams, Micros, Negotiated, Responder,
    StartupError,
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

/// One attempt of an active open, as its startup policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attempt {
    /// The application allows one retry in revision 1 when the responder
    /// closes before its Reply (RFC 6581 section 10).
    pub revision_1_fallback: bool,
    /// This attempt is that retry.
    pub retry: bool,
}

/// An accepting Reply: what an initiator's Full Operation starts from.
#[derive(Debug)]
pub struct Accepted {
    /// What the Request and Reply negotiated.
    pub negotiated: Negotiated,
    /// The responder's private data.
    pub private_data: Vec<u8>,
    /// The octets after the Reply, the first of Full Operation.
    pub leftover: Vec<u8>,
}

/// What the connection manager does with an active open whose startup
/// phase is over: the one policy every transport carries out.
#[derive(Debug)]
pub enum InitiatorDecision {
    /// The responder accepted: Full Operation starts.
    Accepted(Accepted),
    /// The responder rejected the connection.
    Rejected {
        /// The responder's private data.
        private_data: Vec<u8>,
    },
    /// The responder closed before its Reply, as a revision-1 responder
    /// facing an enhanced Request does (RFC 6581 section 10): connect
    /// again, once, with these settings (revision 1, no enhanced block).
    /// The retry is an [`Attempt`] with `retry` set.
    RetryInRevision1(LocalParams),
    /// The startup failed: the connection closes, after `terminate` when
    /// there is one (RFC 6581 sections 8 and 9: the responder, in Full
    /// Operation already, hears why), and the application hears `error`.
    Failed {
        /// The FPDU to send before closing.
        terminate: Option<Vec<u8>>,
        /// Why the startup failed.
        error: StartupError,
    },
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

    /// What an initiator does once its startup reported `progress` in
    /// `attempt`: the Reply's outcome, one retry in revision 1 when the
    /// responder closed first and `attempt` allows it (it is not a retry
    /// already), else the failure. `None` while the startup is pending,
    /// and on a responder's side (the application decides there).
    pub fn initiator_decision(
        &self,
        progress: Progress,
        attempt: Attempt,
    ) -> Option<InitiatorDecision> {
        let Side::Initiator(initiator) = &self.side else {
            return None;
        };
        let decision = match progress {
            Progress::Pending | Progress::Requested(..) => return None,
            Progress::Replied(
                InitiatorOutcome::Accepted {
                    negotiated,
                    private_data,
                },
                leftover,
            ) => InitiatorDecision::Accepted(Accepted {
                negotiated,
                private_data,
                leftover,
            }),
            Progress::Replied(InitiatorOutcome::Rejected { private_data, .. }, _) => {
                InitiatorDecision::Rejected { private_data }
            }
            Progress::Failed(StartupError::ClosedBeforeFrame {
                retry_with_revision_1: true,
            }) if attempt.revision_1_fallback && !attempt.retry => {
                InitiatorDecision::RetryInRevision1(initiator.revision_1_fallback())
            }
            Progress::Failed(error) => InitiatorDecision::Failed {
                terminate: initiator.failure_terminate(error),
                error,
            },
        };
        Some(decision)
    }

    fn fail(&mut self, err: StartupError) -> Progress {
        self.done = true;
        Progress::Failed(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uwarp_stack::mpa::{NegotiationError, Rtr, RtrSet};
    use uwarp_stack::wire::mpa::Revision;

    /// The startup's deadline: none of these cases reaches it.
    const TIMEOUT: Micros = 1_000_000;

    /// An initiator with `local`, and a responder that took its Request.
    fn request(local: LocalParams) -> (Startup, Responder) {
        let initiator = Initiator::new(local, 0, TIMEOUT).unwrap();
        let mut responder = Responder::new(0, TIMEOUT);
        let (used, request) = responder.on_bytes(initiator.request()).unwrap();
        assert_eq!(used, initiator.request().len());
        assert!(request.is_some());
        (Startup::new(Side::Initiator(initiator)), responder)
    }

    /// The decision after the responder closed before its Reply, the
    /// initiator's Request being of `revision`.
    fn closed_first(revision: Revision, attempt: Attempt) -> InitiatorDecision {
        let local = LocalParams {
            revision,
            ..LocalParams::default()
        };
        let (mut startup, _) = request(local);
        let progress = startup.on_closed();
        startup.initiator_decision(progress, attempt).unwrap()
    }

    #[test]
    fn an_accepting_reply_starts_full_operation_with_what_followed_it() {
        let (mut startup, mut responder) = request(LocalParams::default());
        let local = LocalParams {
            private_data: b"welcome".to_vec(),
            ..LocalParams::default()
        };
        let (mut reply, negotiated) = responder.accept(&local).unwrap();
        reply.extend_from_slice(b"FPDU");
        let progress = startup.feed(&reply);
        match startup.initiator_decision(progress, Attempt::default()) {
            Some(InitiatorDecision::Accepted(accepted)) => {
                assert_eq!(accepted.negotiated.revision, negotiated.revision);
                assert_eq!(accepted.private_data, b"welcome");
                assert_eq!(accepted.leftover, b"FPDU");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_rejecting_reply_carries_the_private_data() {
        let (mut startup, mut responder) = request(LocalParams::default());
        let reply = responder.reject(&LocalParams::default(), b"busy").unwrap();
        let progress = startup.feed(&reply);
        assert!(matches!(
            startup.initiator_decision(progress, Attempt::default()),
            Some(InitiatorDecision::Rejected { private_data }) if private_data == b"busy"
        ));
    }

    #[test]
    fn an_enhanced_request_refused_by_a_close_is_retried_once_in_revision_1() {
        let first = Attempt {
            revision_1_fallback: true,
            retry: false,
        };
        match closed_first(Revision::Enhanced, first) {
            InitiatorDecision::RetryInRevision1(params) => {
                assert_eq!(params.revision, Revision::Rfc5044);
                assert_eq!(params.peer_to_peer, None);
            }
            other => panic!("{other:?}"),
        }
        // The retry is not retried, even if it were enhanced again.
        let retry = Attempt {
            retry: true,
            ..first
        };
        for revision in [Revision::Enhanced, Revision::Rfc5044] {
            assert!(matches!(
                closed_first(revision, retry),
                InitiatorDecision::Failed {
                    terminate: None,
                    error: StartupError::ClosedBeforeFrame { .. }
                }
            ));
        }
    }

    #[test]
    fn without_the_fallback_a_close_before_the_reply_fails() {
        let closed = StartupError::ClosedBeforeFrame {
            retry_with_revision_1: true,
        };
        assert!(matches!(
            closed_first(Revision::Enhanced, Attempt::default()),
            InitiatorDecision::Failed { terminate: None, error } if error == closed
        ));
    }

    #[test]
    fn a_negotiation_failure_sends_a_terminate() {
        let (mut startup, mut responder) = request(LocalParams {
            peer_to_peer: Some(RtrSet::only(Rtr::Send)),
            ..LocalParams::default()
        });
        let server = LocalParams {
            peer_to_peer: Some(RtrSet::only(Rtr::Write)),
            ..LocalParams::default()
        };
        let (reply, _) = responder.accept(&server).unwrap();
        let progress = startup.feed(&reply);
        let fallback = Attempt {
            revision_1_fallback: true,
            retry: false,
        };
        match startup.initiator_decision(progress, fallback) {
            Some(InitiatorDecision::Failed {
                terminate: Some(frame),
                error: StartupError::Negotiation(NegotiationError::NoMatchingRtr),
            }) => assert!(!frame.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_is_decided_while_pending_nor_for_a_responder() {
        let (mut startup, _) = request(LocalParams::default());
        let progress = startup.feed(b"MPA ID Rep");
        assert!(startup
            .initiator_decision(progress, Attempt::default())
            .is_none());
        let mut responder = Startup::new(Side::Responder(Responder::new(0, TIMEOUT)));
        let progress = responder.on_closed();
        assert!(responder
            .initiator_decision(progress, Attempt::default())
            .is_none());
    }
}
