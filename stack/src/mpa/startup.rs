//! The MPA startup phase as two sans-IO state machines (RFC 5044 section
//! 7.1, RFC 6581 sections 5 and 10): the initiator sends a Request and
//! waits for the Reply; the responder waits for the Request, hands it to the
//! application, and answers with an accepting or rejecting Reply.
//!
//! Both consume bytes as TCP delivers them, in pieces of any size, and say
//! how many they used: whatever follows the startup frame is already Full
//! Operation data for the FPDU layer. Time is the caller's: a monotonic
//! clock in microseconds, checked with `on_timer`. What the caller must
//! still enforce afterwards is in [`Negotiated`]: the initiator sends the
//! RTR (if any) before anything else, and the responder sends no FPDU before
//! it has received the initiator's first.

use core::fmt;

use super::framer::FpduWriter;
use super::negotiation::{self, LocalParams, Negotiated, NegotiationError};
use crate::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupFrame, StartupRepr};
use crate::wire::terminate_ulpdu;
use crate::wire::WireError;

/// Microseconds on the caller's monotonic clock.
pub type Micros = u64;

/// How long each side waits for the other's startup frame by default
/// (implementations use about 10 s).
pub const DEFAULT_STARTUP_TIMEOUT: Micros = 10_000_000;

/// Why the startup phase failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupError {
    /// The peer's frame could not be parsed (bad key, PD_Length over 512,
    /// unknown revision, missing enhanced block): close the connection.
    Malformed(WireError),
    /// The frame parsed but is not an acceptable answer.
    Negotiation(NegotiationError),
    /// The peer's frame did not arrive in time.
    Timeout,
    /// The peer closed the connection before its frame was complete. An
    /// enhanced initiator may retry with revision 1 when the application
    /// allows it, since that is how a revision-1-only responder refuses an
    /// enhanced Request (RFC 6581 section 10).
    ClosedBeforeFrame {
        /// Retrying with revision 1 could succeed.
        retry_with_revision_1: bool,
    },
    /// The call does not fit the state (e.g. accepting twice).
    WrongState,
}

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(err) => write!(f, "malformed MPA startup frame: {err}"),
            Self::Negotiation(err) => write!(f, "MPA negotiation failed: {err:?}"),
            Self::Timeout => write!(f, "MPA startup timed out"),
            Self::ClosedBeforeFrame { .. } => write!(f, "peer closed during MPA startup"),
            Self::WrongState => write!(f, "call not valid in this MPA startup state"),
        }
    }
}

impl std::error::Error for StartupError {}

/// Collects one startup frame from stream data that arrives in pieces.
#[derive(Debug, Default)]
struct FrameReader {
    buf: Vec<u8>,
    complete: bool,
}

impl FrameReader {
    /// Takes what it needs of `data`; returns the octets used.
    fn push(&mut self, data: &[u8]) -> Result<usize, StartupError> {
        if self.complete {
            return Ok(0);
        }
        let mut used = 0;
        loop {
            let needed = match StartupFrame::new_checked(&self.buf[..]) {
                Ok(_) => {
                    self.complete = true;
                    return Ok(used);
                }
                Err(WireError::Truncated { needed, .. }) => needed,
                Err(err) => return Err(StartupError::Malformed(err)),
            };
            let take = (needed - self.buf.len()).min(data.len() - used);
            if take == 0 {
                return Ok(used);
            }
            self.buf.extend_from_slice(&data[used..used + take]);
            used += take;
        }
    }

    fn frame(&self) -> Option<Result<StartupRepr<'_>, StartupError>> {
        self.complete.then(|| {
            StartupRepr::parse_bytes(&self.buf)
                .map(|(repr, _)| repr)
                .map_err(StartupError::Malformed)
        })
    }
}

/// How an initiator's startup ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitiatorOutcome {
    /// The responder accepted; Full Operation begins.
    Accepted {
        /// The parameters to run the connection with.
        negotiated: Negotiated,
        /// The responder's private data.
        private_data: Vec<u8>,
    },
    /// The responder rejected the connection.
    Rejected {
        /// The responder's private data.
        private_data: Vec<u8>,
        /// The responder's enhanced block, if it sent one (its IRD/ORD tell
        /// what it would accept).
        enhanced: Option<EnhancedBlock>,
    },
}

/// The initiator's side of the startup phase.
#[derive(Debug)]
pub struct Initiator {
    local: LocalParams,
    request: Vec<u8>,
    reader: FrameReader,
    deadline: Micros,
    finished: bool,
}

impl Initiator {
    /// Builds the Request for `local`; refuses private data the frame
    /// cannot carry. The reply is due `timeout` after `now`.
    pub fn new(local: LocalParams, now: Micros, timeout: Micros) -> Result<Self, WireError> {
        let request = negotiation::request(&local).to_vec()?;
        Ok(Self {
            local,
            request,
            reader: FrameReader::default(),
            deadline: now.saturating_add(timeout),
            finished: false,
        })
    }

    /// The Request to send right after the TCP handshake.
    pub fn request(&self) -> &[u8] {
        &self.request
    }

    /// The settings this initiator was built with.
    pub fn local(&self) -> &LocalParams {
        &self.local
    }

    /// When [`Self::on_timer`] fails if no Reply has come.
    pub fn deadline(&self) -> Micros {
        self.deadline
    }

    /// Feeds stream data; returns the octets used and, once the Reply is
    /// complete, the outcome. Octets after the Reply are not used.
    pub fn on_bytes(
        &mut self,
        data: &[u8],
    ) -> Result<(usize, Option<InitiatorOutcome>), StartupError> {
        if self.finished {
            return Ok((0, None));
        }
        let used = self.reader.push(data)?;
        let Some(reply) = self.reader.frame() else {
            return Ok((used, None));
        };
        let reply = reply?;
        self.finished = true;
        let (request, _) =
            StartupRepr::parse_bytes(&self.request).map_err(StartupError::Malformed)?;
        if reply.reject {
            return Ok((
                used,
                Some(InitiatorOutcome::Rejected {
                    private_data: reply.private_data.to_vec(),
                    enhanced: reply.enhanced,
                }),
            ));
        }
        let negotiated = negotiation::complete(&self.local, &request, &reply)
            .map_err(StartupError::Negotiation)?;
        Ok((
            used,
            Some(InitiatorOutcome::Accepted {
                negotiated,
                private_data: reply.private_data.to_vec(),
            }),
        ))
    }

    /// Fails with [`StartupError::Timeout`] once `now` passes the deadline
    /// without a Reply.
    pub fn on_timer(&self, now: Micros) -> Result<(), StartupError> {
        if !self.finished && now >= self.deadline {
            Err(StartupError::Timeout)
        } else {
            Ok(())
        }
    }

    /// How Full Operation frames this side's FPDUs once the Reply has
    /// arrived: (CRC, Markers). An initiator whose negotiation failed
    /// after an accepting Reply (insufficient IRD, no matching RTR) frames
    /// the Terminate it then owes the responder this way (RFC 6581
    /// section 9).
    pub fn reply_framing(&self) -> Option<(bool, bool)> {
        let reply = self.reader.frame()?.ok()?;
        Some((self.local.crc || reply.crc, reply.markers))
    }

    /// The Terminate FPDU an initiator owes the responder when `err` is a
    /// negotiation failure after an accepting Reply (RFC 6581 section 9),
    /// framed as the Reply set Full Operation up; `None` for any other
    /// failure, which is answered by closing alone.
    pub fn failure_terminate(&self, err: StartupError) -> Option<Vec<u8>> {
        let StartupError::Negotiation(failure) = err else {
            return None;
        };
        let (crc, markers) = self.reply_framing()?;
        let ulpdu = terminate_ulpdu::standalone(failure.terminate_error());
        let mut frame = Vec::new();
        FpduWriter::new(crc, markers)
            .write(&[&ulpdu], &mut frame)
            .ok()?;
        Some(frame)
    }

    /// The peer closed the connection before the Reply was complete.
    pub fn on_peer_closed(&self) -> StartupError {
        StartupError::ClosedBeforeFrame {
            retry_with_revision_1: self.local.revision == Revision::Enhanced,
        }
    }

    /// The settings for a retry with revision 1 after
    /// [`StartupError::ClosedBeforeFrame`]: no enhanced block, so IRD/ORD
    /// and the peer-to-peer model are left to the application.
    pub fn revision_1_fallback(&self) -> LocalParams {
        LocalParams {
            revision: Revision::Rfc5044,
            peer_to_peer: None,
            ..self.local.clone()
        }
    }
}

/// What the responder hands the application to decide on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The Request's revision.
    pub revision: Revision,
    /// The initiator asks for CRCs.
    pub crc: bool,
    /// The initiator asks for Markers.
    pub markers: bool,
    /// The initiator's enhanced block: its IRD/ORD and RTR options.
    pub enhanced: Option<EnhancedBlock>,
    /// The initiator's private data.
    pub private_data: Vec<u8>,
}

/// The responder's side of the startup phase.
#[derive(Debug)]
pub struct Responder {
    reader: FrameReader,
    deadline: Micros,
    answered: bool,
}

impl Responder {
    /// A responder whose Request is due `timeout` after `now`.
    pub fn new(now: Micros, timeout: Micros) -> Self {
        Self {
            reader: FrameReader::default(),
            deadline: now.saturating_add(timeout),
            answered: false,
        }
    }

    /// When [`Self::on_timer`] fails if no Request has come.
    pub fn deadline(&self) -> Micros {
        self.deadline
    }

    /// Feeds stream data; returns the octets used and, once the Request is
    /// complete, what it asks for.
    pub fn on_bytes(
        &mut self,
        data: &[u8],
    ) -> Result<(usize, Option<ConnectRequest>), StartupError> {
        let was_complete = self.reader.complete;
        let used = self.reader.push(data)?;
        if was_complete {
            return Ok((used, None));
        }
        let Some(request) = self.reader.frame() else {
            return Ok((used, None));
        };
        let request = request?;
        if request.kind != FrameKind::Request {
            return Err(StartupError::Negotiation(NegotiationError::InvalidFrame));
        }
        Ok((
            used,
            Some(ConnectRequest {
                revision: request.revision,
                crc: request.crc,
                markers: request.markers,
                enhanced: request.enhanced,
                private_data: request.private_data.to_vec(),
            }),
        ))
    }

    /// Fails with [`StartupError::Timeout`] once `now` passes the deadline
    /// without a Request.
    pub fn on_timer(&self, now: Micros) -> Result<(), StartupError> {
        if !self.reader.complete && now >= self.deadline {
            Err(StartupError::Timeout)
        } else {
            Ok(())
        }
    }

    fn request(&self) -> Result<StartupRepr<'_>, StartupError> {
        if self.answered {
            return Err(StartupError::WrongState);
        }
        self.reader.frame().ok_or(StartupError::WrongState)?
    }

    /// Accepts with `local`'s settings and private data: the Reply to send
    /// and the parameters to run with. A Request this responder cannot
    /// answer (an enhanced Request to a revision-1 responder) is an error:
    /// the caller closes the connection, as RFC 6581 section 10 says.
    pub fn accept(&mut self, local: &LocalParams) -> Result<(Vec<u8>, Negotiated), StartupError> {
        let request = self.request()?;
        let (reply, negotiated) =
            negotiation::accept(local, &request).map_err(StartupError::Negotiation)?;
        let bytes = reply.to_vec().map_err(StartupError::Malformed)?;
        self.answered = true;
        Ok((bytes, negotiated))
    }

    /// Rejects with `private_data`: the Reply to send before closing.
    pub fn reject(
        &mut self,
        local: &LocalParams,
        private_data: &[u8],
    ) -> Result<Vec<u8>, StartupError> {
        let request = self.request()?;
        let bytes = negotiation::reject(local, &request, private_data)
            .to_vec()
            .map_err(StartupError::Malformed)?;
        self.answered = true;
        Ok(bytes)
    }
}
