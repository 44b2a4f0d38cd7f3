//! The startup phase of an [`RdmaStream`], on the control core: MPA's
//! connection setup (RFC 5044 section 7.1, RFC 6581 sections 5, 9 and 10).
//! The initiator sends its Request once TCP is established and carries
//! out what the connection manager's policy decides once the Reply (or a
//! close, or the deadline) came ([`Startup::initiator_decision`]): Full
//! Operation after the hold [`ConnectParams::first_fpdu_delay`] asks for,
//! a reject, one retry in revision 1, or a failure, with a Terminate
//! when the negotiation failed (RFC 6581 sections 8 and 9). The responder
//! waits for the Request, hands it to the application as an
//! [`IncomingRequest`] and answers as the application decides.

use crossbeam_channel::Sender;
use uwarp_stack::mpa::{Initiator, LocalParams, Micros, Responder};
use uwarp_stack::rdmap::Role;
use uwarp_stack::tcp::{Connection, Instant, State};

use super::operation::Start;
use super::{request_id, socket_addr, Answer, Phase, RdmaStream, StreamContext};
use crate::cm::{ConnectParams, ControlCmd, IncomingRequest};
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::QueuePair;
use uwarp_control::startup::{Attempt, InitiatorDecision, Progress, Side, Startup};

/// An active open, waiting for the Reply.
pub(super) struct Initiating {
    startup: Startup,
    request_sent: bool,
    qp: QueuePair,
    params: ConnectParams,
    /// Whether this is the one retry in revision 1.
    retry: bool,
    pub(super) answer: Answer,
}

/// A passive open, waiting for the Request.
pub(super) struct Responding {
    startup: Startup,
    requests: Sender<IncomingRequest>,
}

/// A Request handed to the application, waiting for its decision.
pub(super) struct Deciding {
    responder: Responder,
    private_data: Vec<u8>,
    /// Octets that followed the Request.
    leftover: Vec<u8>,
}

/// An accepted active open holding its first FPDU back for `delay`
/// ([`ConnectParams::first_fpdu_delay`]); Full Operation starts then.
pub(super) struct Holding {
    pub(super) start: Start,
    /// Octets that followed the Reply, and what arrived since.
    leftover: Vec<u8>,
    delay: Micros,
    /// When the hold ends, set when the stream is first driven after the
    /// Reply.
    until: Option<Micros>,
}

impl RdmaStream {
    /// The active side: sends the Request for `params` once TCP is up;
    /// `retry` if this is the one retry in revision 1.
    pub(crate) fn initiator(
        context: StreamContext,
        now: Micros,
        qp: QueuePair,
        params: ConnectParams,
        retry: bool,
        answer: Answer,
    ) -> Result<Self, (Error, Answer)> {
        let timeout = params.timeout.as_micros() as Micros;
        let initiator = match Initiator::new(params.mpa.clone(), now, timeout) {
            Ok(initiator) => initiator,
            Err(err) => {
                let err = Error::Startup(uwarp_stack::mpa::StartupError::Malformed(err));
                return Err((err, answer));
            }
        };
        Ok(Self::in_phase(
            context,
            Phase::Initiating(Box::new(Initiating {
                startup: Startup::new(Side::Initiator(initiator)),
                request_sent: false,
                qp,
                params,
                retry,
                answer,
            })),
        ))
    }

    /// The passive side: its Request goes to `requests`.
    pub(crate) fn responder(
        context: StreamContext,
        now: Micros,
        requests: Sender<IncomingRequest>,
    ) -> Self {
        let responder = Responder::new(now, context.startup_timeout);
        Self::in_phase(
            context,
            Phase::Responding(Responding {
                startup: Startup::new(Side::Responder(responder)),
                requests,
            }),
        )
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
        let Phase::Deciding(deciding) = &mut self.phase else {
            let _ = answer.send(Err(Error::WrongState("the request is no longer pending")));
            return;
        };
        let (reply, negotiated) = match deciding.responder.accept(params) {
            Ok(accepted) => accepted,
            Err(err) => {
                let _ = answer.send(Err(Error::Startup(err)));
                return;
            }
        };
        if conn.send(&reply) != reply.len() {
            let _ = answer.send(Err(Error::WrongState("the connection no longer sends")));
            return;
        }
        let Phase::Deciding(deciding) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            unreachable!("matched above");
        };
        let Deciding {
            private_data,
            leftover,
            ..
        } = *deciding;
        let start = Start {
            negotiated,
            role: Role::Responder,
            qp,
            private_data,
            answer,
        };
        self.operate(conn, start, &leftover);
    }

    /// The application rejected the Request: the Reply carries
    /// `private_data`, then the connection closes.
    pub(crate) fn reject(
        &mut self,
        conn: &mut Connection,
        private_data: &[u8],
    ) -> Result<(), Error> {
        let Phase::Deciding(deciding) = &mut self.phase else {
            return Err(Error::WrongState("the request is no longer pending"));
        };
        let reply = deciding
            .responder
            .reject(&LocalParams::default(), private_data)?;
        self.phase = Phase::Finished;
        conn.send(&reply);
        conn.close();
        Ok(())
    }

    /// Octets of the stream, in order, in a startup phase.
    pub(super) fn startup_input(&mut self, conn: &mut Connection, data: &[u8]) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                let progress = initiating.startup.feed(data);
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.feed(data);
                self.on_responder_progress(conn, progress);
            }
            Phase::Deciding(deciding) => deciding.leftover.extend_from_slice(data),
            Phase::Holding(holding) => holding.leftover.extend_from_slice(data),
            Phase::Operating(_) | Phase::Finished => {}
        }
    }

    /// Carries out the connection manager's decision on an initiator's
    /// `progress`, if there is one yet.
    fn on_initiator_progress(&mut self, conn: &mut Connection, progress: Progress) {
        let Phase::Initiating(initiating) = &self.phase else {
            return;
        };
        let attempt = Attempt {
            revision_1_fallback: initiating.params.revision_1_fallback,
            retry: initiating.retry,
        };
        let Some(decision) = initiating.startup.initiator_decision(progress, attempt) else {
            return;
        };
        let Phase::Initiating(initiating) = std::mem::replace(&mut self.phase, Phase::Finished)
        else {
            unreachable!("matched above");
        };
        let Initiating {
            qp,
            mut params,
            answer,
            ..
        } = *initiating;
        match decision {
            InitiatorDecision::Accepted(accepted) => {
                self.phase = Phase::Holding(Box::new(Holding {
                    start: Start {
                        negotiated: accepted.negotiated,
                        role: Role::Initiator,
                        qp,
                        private_data: accepted.private_data,
                        answer,
                    },
                    leftover: accepted.leftover,
                    delay: params.first_fpdu_delay.as_micros() as Micros,
                    until: None,
                }));
            }
            InitiatorDecision::Rejected { private_data } => {
                let _ = answer.send(Err(Error::Rejected { private_data }));
                self.finish(conn);
            }
            InitiatorDecision::RetryInRevision1(mpa) => {
                params.mpa = mpa;
                let retry = ControlCmd::Connect {
                    addr: socket_addr(conn.remote()),
                    qp,
                    params,
                    reply: answer,
                    retry: true,
                };
                if let Err(crossbeam_channel::SendError(ControlCmd::Connect { reply, .. })) =
                    self.context.control.send(retry)
                {
                    let _ = reply.send(Err(Error::DeviceClosed));
                }
                self.finish(conn);
            }
            InitiatorDecision::Failed { terminate, error } => {
                if let Some(frame) = terminate {
                    // The responder is in Full Operation already and
                    // reports it (RFC 6581 section 9).
                    conn.send(&frame);
                }
                let _ = answer.send(Err(Error::Startup(error)));
                self.finish(conn);
            }
        }
    }

    fn on_responder_progress(&mut self, conn: &mut Connection, progress: Progress) {
        let Phase::Responding(responding) = &mut self.phase else {
            return;
        };
        match progress {
            Progress::Pending => {}
            Progress::Requested(request, leftover) => {
                let incoming = IncomingRequest {
                    request: request.clone(),
                    peer_addr: socket_addr(conn.remote()),
                    id: request_id(conn.local(), conn.remote()),
                    control: self.context.control.clone(),
                    decided: false,
                    driver: Driver::default(),
                };
                let requests = responding.requests.clone();
                let Phase::Responding(responding) =
                    std::mem::replace(&mut self.phase, Phase::Finished)
                else {
                    unreachable!("matched above");
                };
                let Side::Responder(responder) = responding.startup.side else {
                    unreachable!("a responding stream has a responder");
                };
                self.phase = Phase::Deciding(Box::new(Deciding {
                    responder,
                    private_data: request.private_data,
                    leftover,
                }));
                if requests.send(incoming).is_err() {
                    // The listener is gone.
                    self.phase = Phase::Finished;
                    conn.abort();
                }
            }
            Progress::Failed(_) => self.finish(conn),
            Progress::Replied(..) => unreachable!("a responder gets no Reply"),
        }
    }

    /// Ends the stream after a failed or refused startup.
    fn finish(&mut self, conn: &mut Connection) {
        self.phase = Phase::Finished;
        conn.close();
    }

    /// Startup deadlines, and the Request once TCP is up.
    pub(super) fn drive_startup(&mut self, now: Instant, conn: &mut Connection) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                if !initiating.request_sent && conn.state() == State::Established {
                    let Side::Initiator(initiator) = &initiating.startup.side else {
                        unreachable!("an initiating stream has an initiator");
                    };
                    let request = initiator.request();
                    initiating.request_sent = conn.send(request) == request.len();
                }
                let progress = initiating.startup.on_timer(now.micros());
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.on_timer(now.micros());
                self.on_responder_progress(conn, progress);
            }
            Phase::Holding(holding) => {
                let until = *holding.until.get_or_insert(now.micros() + holding.delay);
                if now.micros() >= until {
                    self.end_hold(conn);
                }
            }
            _ => {}
        }
    }

    /// Starts the Full Operation a holding stream waits for.
    fn end_hold(&mut self, conn: &mut Connection) {
        if let Phase::Holding(holding) = std::mem::replace(&mut self.phase, Phase::Finished) {
            self.operate(conn, holding.start, &holding.leftover);
        }
    }

    /// The peer closed or the connection failed during the startup. A
    /// holding stream starts Full Operation: what the peer sent before
    /// it closed is Full Operation's.
    pub(super) fn startup_closed(&mut self, conn: &mut Connection) {
        match &mut self.phase {
            Phase::Initiating(initiating) => {
                let progress = initiating.startup.on_closed();
                self.on_initiator_progress(conn, progress);
            }
            Phase::Responding(responding) => {
                let progress = responding.startup.on_closed();
                self.on_responder_progress(conn, progress);
            }
            Phase::Deciding(_) => self.phase = Phase::Finished,
            Phase::Holding(_) => self.end_hold(conn),
            Phase::Operating(_) | Phase::Finished => {}
        }
    }
}
