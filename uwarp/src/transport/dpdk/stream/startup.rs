//! The startup phase of an `RdmaStream`, on the control core: MPA's
//! connection setup (RFC 5044 section 7.1, RFC 6581 sections 5, 9 and 10).
//! The initiator sends its Request once TCP is established and carries
//! out what the connection manager's policy decides once the Reply (or a
//! close, or the deadline) came ([`Startup::initiator_decision`]): Full
//! Operation after the hold [`ConnectParams::first_fpdu_delay`] asks for,
//! a reject, one retry in revision 1, or a failure, with a Terminate
//! when the negotiation failed (RFC 6581 sections 8 and 9). The responder
//! waits for the Request, hands it to the application as an
//! [`IncomingRequest`] and answers as the application decides.
//!
//! Each step takes the phase and says where it leads ([`Next`]): on in
//! the startup phase, into Full Operation, or to the end.

use std::net::{SocketAddr, SocketAddrV4};

use crossbeam_channel::Sender;
use smoltcp::wire::Ipv4Address;
use uwarp_dataplane::net::FourTuple;
use uwarp_stack::mpa::{LocalParams, Micros, Negotiated, Responder};
use uwarp_stack::rdmap::Role;
use uwarp_stack::tcp::{Connection, Endpoint, Instant, State};

use crate::cm::{Connect, Connection as Established, ControlCmd, ControlLine, IncomingRequest};
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::QueuePair;
use uwarp_control::startup::{InitiatorDecision, Progress, Side, Startup};

/// Where a stream's answer to the application goes: `connect` and
/// `accept` wait on it.
pub(super) type Answer = Sender<Result<Established, Error>>;

/// What the startup phase hands Full Operation.
pub(super) struct Start {
    pub(super) negotiated: Negotiated,
    pub(super) role: Role,
    pub(super) qp: QueuePair,
    /// The peer's private data.
    pub(super) private_data: Vec<u8>,
    pub(super) answer: Answer,
}

/// A stream in its startup phase.
pub(super) enum StartupPhase {
    /// An active open, waiting for the Reply.
    Initiating(Box<Initiating>),
    /// A passive open, waiting for the Request.
    Responding(Responding),
    /// A passive open, waiting for the application's decision.
    Deciding(Box<Deciding>),
    /// An accepted active open, holding its first FPDU back.
    Holding(Box<Holding>),
}

/// Where a step of the startup phase leads.
pub(super) enum Next {
    /// On in the startup phase.
    Startup(StartupPhase),
    /// Into Full Operation, from the octets that followed the last
    /// startup frame.
    Operate(Start, Vec<u8>),
    /// Rejected or failed (the connection is closing), or the peer
    /// closed: nothing more to do.
    Finished,
}

/// An active open, waiting for the Reply.
pub(super) struct Initiating {
    startup: Startup,
    request_sent: bool,
    connect: Connect,
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
    start: Start,
    /// Octets that followed the Reply, and what arrived since.
    leftover: Vec<u8>,
    delay: Micros,
    /// When the hold ends, set when the stream is first driven after the
    /// Reply.
    until: Option<Micros>,
}

impl StartupPhase {
    /// The active side of `connect`, started at `now`: sends the Request
    /// once TCP is up.
    pub(super) fn initiator(now: Micros, connect: Connect) -> Result<Self, (Error, Answer)> {
        let initiator = match connect.initiator(now) {
            Ok(initiator) => initiator,
            Err(err) => return Err((err, connect.reply)),
        };
        Ok(StartupPhase::Initiating(Box::new(Initiating {
            startup: Startup::new(Side::Initiator(initiator)),
            request_sent: false,
            connect,
        })))
    }

    /// The passive side, waiting `timeout` for the Request; it goes to
    /// `requests`.
    pub(super) fn responder(
        now: Micros,
        timeout: Micros,
        requests: Sender<IncomingRequest>,
    ) -> Self {
        StartupPhase::Responding(Responding {
            startup: Startup::new(Side::Responder(Responder::new(now, timeout))),
            requests,
        })
    }

    /// The next octets of the stream; `control` is the control core's
    /// command queue.
    pub(super) fn input(self, conn: &mut Connection, control: &ControlLine, data: &[u8]) -> Next {
        match self {
            StartupPhase::Initiating(mut initiating) => {
                let progress = initiating.startup.feed(data);
                initiating.on_progress(conn, control, progress)
            }
            StartupPhase::Responding(mut responding) => {
                let progress = responding.startup.feed(data);
                responding.on_progress(conn, control, progress)
            }
            StartupPhase::Deciding(mut deciding) => {
                deciding.leftover.extend_from_slice(data);
                Next::Startup(StartupPhase::Deciding(deciding))
            }
            StartupPhase::Holding(mut holding) => {
                holding.leftover.extend_from_slice(data);
                Next::Startup(StartupPhase::Holding(holding))
            }
        }
    }

    /// Startup deadlines, the Request once TCP is up, the end of a hold.
    pub(super) fn drive(self, now: Instant, conn: &mut Connection, control: &ControlLine) -> Next {
        match self {
            StartupPhase::Initiating(mut initiating) => {
                if !initiating.request_sent && conn.state() == State::Established {
                    let Side::Initiator(initiator) = &initiating.startup.side else {
                        unreachable!("an initiating stream has an initiator");
                    };
                    let request = initiator.request();
                    initiating.request_sent = conn.send(request) == request.len();
                }
                let progress = initiating.startup.on_timer(now.micros());
                initiating.on_progress(conn, control, progress)
            }
            StartupPhase::Responding(mut responding) => {
                let progress = responding.startup.on_timer(now.micros());
                responding.on_progress(conn, control, progress)
            }
            StartupPhase::Holding(mut holding) => {
                let until = *holding.until.get_or_insert(now.micros() + holding.delay);
                if now.micros() >= until {
                    holding.operate()
                } else {
                    Next::Startup(StartupPhase::Holding(holding))
                }
            }
            deciding @ StartupPhase::Deciding(_) => Next::Startup(deciding),
        }
    }

    /// The peer closed or the connection failed. A holding stream starts
    /// Full Operation: what the peer sent before it closed is Full
    /// Operation's.
    pub(super) fn closed(self, conn: &mut Connection, control: &ControlLine) -> Next {
        match self {
            StartupPhase::Initiating(mut initiating) => {
                let progress = initiating.startup.on_closed();
                initiating.on_progress(conn, control, progress)
            }
            StartupPhase::Responding(mut responding) => {
                let progress = responding.startup.on_closed();
                responding.on_progress(conn, control, progress)
            }
            StartupPhase::Deciding(_) => Next::Finished,
            StartupPhase::Holding(holding) => holding.operate(),
        }
    }

    /// The application accepted the Request onto `qp`: the Reply goes out
    /// and Full Operation begins; `answer` hears once the stream runs on
    /// its dataplane core, or at once why it cannot.
    pub(super) fn accept(
        self,
        conn: &mut Connection,
        qp: QueuePair,
        params: &LocalParams,
        answer: Answer,
    ) -> Next {
        let StartupPhase::Deciding(mut deciding) = self else {
            let _ = answer.send(Err(Error::WrongState("the request is no longer pending")));
            return Next::Startup(self);
        };
        let sent = deciding
            .responder
            .accept(params)
            .map_err(Error::Startup)
            .and_then(|(reply, negotiated)| {
                if conn.send(&reply) == reply.len() {
                    Ok(negotiated)
                } else {
                    Err(Error::WrongState("the connection no longer sends"))
                }
            });
        match sent {
            Ok(negotiated) => {
                let start = Start {
                    negotiated,
                    role: Role::Responder,
                    qp,
                    private_data: deciding.private_data,
                    answer,
                };
                Next::Operate(start, deciding.leftover)
            }
            Err(err) => {
                let _ = answer.send(Err(err));
                Next::Startup(StartupPhase::Deciding(deciding))
            }
        }
    }

    /// The application rejected the Request: the Reply carries
    /// `private_data`, then the connection closes.
    pub(super) fn reject(
        self,
        conn: &mut Connection,
        private_data: &[u8],
    ) -> (Next, Result<(), Error>) {
        let StartupPhase::Deciding(mut deciding) = self else {
            let err = Error::WrongState("the request is no longer pending");
            return (Next::Startup(self), Err(err));
        };
        match deciding
            .responder
            .reject(&LocalParams::default(), private_data)
        {
            Ok(reply) => {
                conn.send(&reply);
                conn.close();
                (Next::Finished, Ok(()))
            }
            Err(err) => (
                Next::Startup(StartupPhase::Deciding(deciding)),
                Err(err.into()),
            ),
        }
    }

    /// The connection ended with `error` (or the stream was dropped): a
    /// `connect` still waiting hears it.
    pub(super) fn end(self, error: Error) {
        let answer = match self {
            StartupPhase::Initiating(initiating) => initiating.connect.reply,
            StartupPhase::Holding(holding) => holding.start.answer,
            StartupPhase::Responding(_) | StartupPhase::Deciding(_) => return,
        };
        let _ = answer.send(Err(error));
    }
}

impl Initiating {
    /// Carries out the connection manager's decision on `progress`, if
    /// there is one yet.
    fn on_progress(
        self: Box<Self>,
        conn: &mut Connection,
        control: &ControlLine,
        progress: Progress,
    ) -> Next {
        let attempt = self.connect.attempt();
        let Some(decision) = self.startup.initiator_decision(progress, attempt) else {
            return Next::Startup(StartupPhase::Initiating(self));
        };
        let connect = self.connect;
        match decision {
            InitiatorDecision::Accepted(accepted) => {
                let holding = Holding {
                    start: Start {
                        negotiated: accepted.negotiated,
                        role: Role::Initiator,
                        qp: connect.qp,
                        private_data: accepted.private_data,
                        answer: connect.reply,
                    },
                    leftover: accepted.leftover,
                    delay: connect.params.first_fpdu_delay.as_micros() as Micros,
                    until: None,
                };
                return Next::Startup(StartupPhase::Holding(Box::new(holding)));
            }
            InitiatorDecision::Rejected { private_data } => {
                let _ = connect.reply.send(Err(Error::Rejected { private_data }));
            }
            InitiatorDecision::RetryInRevision1(mpa) => {
                let retry = ControlCmd::Connect(connect.retry_with(mpa));
                if let Err(crossbeam_channel::SendError(ControlCmd::Connect(connect))) =
                    control.send(retry)
                {
                    let _ = connect.reply.send(Err(Error::DeviceClosed));
                }
            }
            InitiatorDecision::Failed { terminate, error } => {
                if let Some(frame) = terminate {
                    // The responder is in Full Operation already and
                    // reports it (RFC 6581 section 9).
                    conn.send(&frame);
                }
                let _ = connect.reply.send(Err(Error::Startup(error)));
            }
        }
        conn.close();
        Next::Finished
    }
}

impl Responding {
    /// Hands the Request to the application once it is in; closes if the
    /// startup failed.
    fn on_progress(self, conn: &mut Connection, control: &ControlLine, progress: Progress) -> Next {
        match progress {
            Progress::Pending => Next::Startup(StartupPhase::Responding(self)),
            Progress::Requested(request, leftover) => {
                let incoming = IncomingRequest {
                    request: request.clone(),
                    peer_addr: socket_addr(conn.remote()),
                    id: request_id(conn.local(), conn.remote()),
                    control: control.clone(),
                    decided: false,
                    driver: Driver::default(),
                };
                let Side::Responder(responder) = self.startup.side else {
                    unreachable!("a responding stream has a responder");
                };
                if self.requests.send(incoming).is_err() {
                    // The listener is gone.
                    conn.abort();
                    return Next::Finished;
                }
                Next::Startup(StartupPhase::Deciding(Box::new(Deciding {
                    responder,
                    private_data: request.private_data,
                    leftover,
                })))
            }
            Progress::Failed(_) => {
                conn.close();
                Next::Finished
            }
            Progress::Replied(..) => unreachable!("a responder gets no Reply"),
        }
    }
}

impl Holding {
    /// The hold is over: Full Operation starts.
    fn operate(self) -> Next {
        let Holding {
            start, leftover, ..
        } = self;
        Next::Operate(start, leftover)
    }
}

/// `endpoint` as a socket address.
pub(super) fn socket_addr(endpoint: Endpoint) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(endpoint.addr, endpoint.port))
}

/// The identifier of a connection request: the 4-tuple less our own
/// address, which is the host's.
fn request_id(local: Endpoint, remote: Endpoint) -> u64 {
    (u64::from(u32::from(remote.addr)) << 32)
        | (u64::from(remote.port) << 16)
        | u64::from(local.port)
}

/// The connection a request identifier names (see [`request_id`]), on the
/// host's address `local_ip`: where the application's accept or reject
/// goes.
pub(crate) fn request_tuple(local_ip: Ipv4Address, id: u64) -> FourTuple {
    FourTuple {
        local_ip,
        local_port: id as u16,
        remote_ip: Ipv4Address::from((id >> 32) as u32),
        remote_port: (id >> 16) as u16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_identifier_names_its_connection() {
        let local = Endpoint::new(Ipv4Address::new(10, 0, 0, 1), 4791);
        let remote = Endpoint::new(Ipv4Address::new(192, 168, 7, 200), 50123);
        let tuple = request_tuple(local.addr, request_id(local, remote));
        assert_eq!(
            tuple,
            FourTuple {
                local_ip: local.addr,
                local_port: 4791,
                remote_ip: remote.addr,
                remote_port: 50123,
            }
        );
    }
}
