//! The receive side of a stream: every ULPDU parsed, checked and placed in
//! the order of RFC 5041 section 7.1 and RFC 5040 section 7, or answered
//! with the Terminate those sections name. Nothing is placed when a check
//! fails, and nothing is ever written outside a registered region: tagged
//! placement and receive scatter both go through the STag table. Once a
//! Terminate has been sent or received, only the peer's Terminates are
//! still heard (RFC 5040 section 6.6); everything else is dropped.

use super::terminate;
use super::{CqKind, QpEngine, QpEvent, SRQ_LOOKAHEAD};
use crate::ddp::UntaggedError;
use crate::mem::{Access, Stag, TaggedError};
use crate::mpa::{FpduReader, FramingError, Rtr};
use crate::rdmap::RecvSlot;
use crate::verbs::{QpState, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::ddp::BufferModel;
use crate::wire::rdmap::{
    Opcode, RdmapSegment, ReadRequest, QN_READ_REQUEST, QN_SEND, QN_TERMINATE,
};
use crate::wire::terminate::{LayoutHint, TermError, TerminateRepr};
use crate::wire::terminate_cause::for_parse_error;
use crate::wire::terminate_ulpdu::Fault;

impl QpEngine {
    /// Takes stream octets from the LLP, in order. Whole FPDUs at the
    /// front are read where they lie; the rest waits in the reader for the
    /// octets that complete it. FPDUs placed out of order that the stream
    /// now reaches are delivered after them.
    pub fn on_bytes(&mut self, data: &[u8]) {
        self.rx_offset += data.len() as u64;
        let mut rest = data;
        loop {
            // Whole FPDUs where they lie (RFC 5044 appendix A.3)...
            while self.hears_peer() {
                match self.reader.next_in_place(&mut rest) {
                    None => break,
                    Some(Ok(ulpdu)) => self.on_fpdu(ulpdu),
                    Some(Err(err)) => self.on_framing_error(err),
                }
            }
            if rest.is_empty() || !self.hears_peer() {
                break;
            }
            // ... then a partial FPDU through the buffer: what completes
            // it, and the rest in place again.
            let before = rest.len();
            self.reader.top_up(&mut rest);
            self.counters.bytes_buffered += (before - rest.len()) as u64;
            // Read where they lie in the reader's buffer, which is set
            // aside meanwhile (handling an FPDU never reads it).
            let mut reader = std::mem::replace(&mut self.reader, FpduReader::new(false, false));
            while self.hears_peer() {
                match reader.next_ulpdu_in_buffer() {
                    None => break,
                    Some(Ok(ulpdu)) => self.on_fpdu(&ulpdu),
                    Some(Err(err)) => self.on_framing_error(err),
                }
            }
            self.reader = reader;
            if self.reader.buffered() > 0 {
                break;
            }
        }
        self.deliver_early();
    }

    /// One whole FPDU's ULPDU, in order.
    fn on_fpdu(&mut self, ulpdu: &[u8]) {
        self.counters.fpdus_received += 1;
        if self.state == QpState::Terminate {
            self.on_ulpdu_terminated(ulpdu);
        } else {
            self.on_ulpdu(ulpdu);
        }
    }

    /// The reader stopped. It repeats its error on every call: the error is
    /// counted and answered once, in Full Operation, and nothing more is
    /// read.
    fn on_framing_error(&mut self, err: FramingError) {
        if self.state != QpState::Terminate {
            if matches!(err, FramingError::Crc { .. }) {
                self.counters.crc_errors += 1;
            }
            self.send_terminate(Fault::new(err.terminate_error()), &[]);
        }
        // Terminate no longer hears a broken stream either.
        self.reader_failed = true;
    }

    /// Whether stream octets are still read: in Full Operation and, for
    /// the peer's Terminate, in the Terminate state, while the framing
    /// holds.
    fn hears_peer(&self) -> bool {
        !self.reader_failed && (self.accepts_work() || self.state == QpState::Terminate)
    }

    /// Handles one whole ULPDU.
    fn on_ulpdu(&mut self, ulpdu: &[u8]) {
        let first = !std::mem::replace(&mut self.peer_started, true);
        // A match, not `map_err` and `and_then`: those pass the parsed
        // segment through a `Result` on the stack, which is read back in
        // pieces the store buffer cannot forward (a stall per FPDU).
        let result = match RdmapSegment::parse(ulpdu) {
            Err(err) => Err(Fault::new(for_parse_error(err, ulpdu))),
            Ok(segment) if first && self.is_expected_rtr(&segment) => self.consume_rtr(&segment),
            Ok(segment) => self.dispatch(&segment, Payload::Octets(segment.payload)),
        };
        if let Err(fault) = result {
            self.send_terminate(fault, ulpdu);
        }
    }

    /// Handles one whole ULPDU in the Terminate state: a Terminate from the
    /// peer is reported, anything else is dropped.
    fn on_ulpdu_terminated(&mut self, ulpdu: &[u8]) {
        let Ok(segment) = RdmapSegment::parse(ulpdu) else {
            return;
        };
        let on_terminate_queue = matches!(
            segment.ddp.model,
            BufferModel::Untagged {
                qn: QN_TERMINATE,
                ..
            }
        );
        if segment.opcode() == Opcode::Terminate && on_terminate_queue {
            self.on_terminate(&segment);
        }
    }

    /// Whether the responder's first FPDU is the zero-length RTR it waits
    /// for (RFC 6581 section 9.2).
    fn is_expected_rtr(&self, segment: &RdmapSegment) -> bool {
        let zero_length = segment.payload.is_empty() && segment.ddp.last;
        let send_queue = matches!(segment.ddp.model, BufferModel::Untagged { qn: QN_SEND, .. });
        match (self.expected_rtr, segment.opcode()) {
            (Some(Rtr::Send), Opcode::Send) => zero_length && send_queue,
            (Some(Rtr::Write), Opcode::RdmaWrite) => zero_length,
            // A Read RTR is a normal zero-length Read Request.
            _ => false,
        }
    }

    /// Takes the RTR out of the stream: a Send RTR uses its MSN but no
    /// posted receive; a Write RTR places nothing.
    fn consume_rtr(&mut self, segment: &RdmapSegment) -> Result<(), Fault> {
        if let BufferModel::Untagged { msn, mo, .. } = segment.ddp.model {
            if msn != self.rq.next_msn() {
                return Err(Fault::new(TermError::DdpUntaggedMsnRange));
            }
            if mo != 0 {
                return Err(Fault::new(TermError::DdpUntaggedInvalidMo));
            }
            self.rq.skip_next();
        }
        Ok(())
    }

    /// Checks and places one segment, then does what its arrival means
    /// in order (completions, the Read's progress, invalidation). `payload`
    /// says whether its octets are still to be placed or were placed out
    /// of order (only Writes, Read Responses and Sends ever are).
    pub(super) fn dispatch(
        &mut self,
        segment: &RdmapSegment,
        payload: Payload,
    ) -> Result<(), Fault> {
        match (segment.ddp.model, segment.opcode()) {
            (BufferModel::Tagged { stag, to }, Opcode::RdmaWrite) => {
                let placed = match payload {
                    Payload::Octets(octets) => self.table.place(Stag(stag), self.pd, to, octets),
                    Payload::Placed(len) => {
                        self.table
                            .check(Stag(stag), self.pd, Access::REMOTE_WRITE, to, len)
                    }
                };
                placed.map_err(|e| Fault::new(e.ddp_error()))?;
                self.count_placed(payload);
                Ok(())
            }
            (BufferModel::Tagged { stag, to }, Opcode::ReadResponse) => {
                self.on_read_response(stag, to, segment.ddp.last, payload)
            }
            (BufferModel::Untagged { qn, msn, mo, .. }, opcode) => {
                let expected_qn = opcode.queue_number();
                if expected_qn != Some(qn) {
                    return Err(Fault::new(TermError::DdpUntaggedInvalidQn));
                }
                match qn {
                    QN_SEND if carries_send_payload(opcode) => {
                        self.on_send(segment, msn, mo, payload)
                    }
                    QN_READ_REQUEST if opcode == Opcode::ReadRequest => {
                        self.on_read_request(segment, msn, mo)
                    }
                    QN_TERMINATE => {
                        self.on_terminate(segment);
                        Ok(())
                    }
                    _ => Err(Fault::new(TermError::RdmapUnexpectedOpcode)),
                }
            }
            (BufferModel::Tagged { .. }, _) => Err(Fault::new(TermError::RdmapUnexpectedOpcode)),
        }
    }

    /// Counts octets placed now (those placed out of order were counted
    /// when they were).
    fn count_placed(&mut self, payload: Payload) {
        if let Payload::Octets(octets) = payload {
            self.counters.bytes_placed += octets.len() as u64;
        }
    }

    fn on_read_response(
        &mut self,
        stag: u32,
        to: u64,
        last: bool,
        payload: Payload,
    ) -> Result<(), Fault> {
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        // Every check before anything moves: the sink region, then the
        // outstanding Read (only the range this end asked for may be
        // written, even in its own region), then the copy, and only then
        // the Read's completion: a copy that fails (the sink's memory is
        // gone) leaves the Read to complete in error when the Terminate
        // ends the stream, not with success.
        self.table
            .check(Stag(stag), self.pd, Access::LOCAL_WRITE, to, payload.len())
            .map_err(|e| Fault::new(e.ddp_error()))?;
        let (table, pd) = (&self.table, self.pd);
        self.sq
            .on_read_response(stag, to, len, last, || match payload {
                Payload::Octets(octets) => table
                    .local_write(Stag(stag), pd, to, octets)
                    .map_err(TaggedError::ddp_error),
                Payload::Placed(_) => Ok(()),
            })
            .map_err(Fault::new)?;
        self.count_placed(payload);
        Ok(())
    }

    fn on_send(
        &mut self,
        segment: &RdmapSegment,
        msn: u32,
        mo: u32,
        payload: Payload,
    ) -> Result<(), Fault> {
        self.take_from_srq(msn);
        let last = segment.ddp.last;
        let placed = match payload {
            Payload::Octets(octets) => self.rq.place(msn, mo, last, octets),
            Payload::Placed(len) => self.rq.account(msn, mo, last, len),
        };
        if let Err(err) = placed {
            let error = err.terminate_error();
            // A receive too small for its message completes with a length
            // error; the other untagged errors are the peer's alone.
            if err == UntaggedError::TooLong {
                if let Some(slot) = self.rq.buffer_mut(msn) {
                    slot.fail(WcStatus::LocalLengthError, error);
                }
            }
            return Err(Fault::new(error));
        }
        self.count_placed(payload);
        if last {
            if let Some(slot) = self.rq.buffer_mut(msn) {
                slot.solicited = segment.opcode().solicited();
                slot.invalidate = segment.invalidate_stag();
            }
        }
        while let Some(delivered) = self.rq.deliver() {
            self.complete_receive(delivered.buffer, delivered.len)?;
        }
        Ok(())
    }

    /// Moves receives from the shared receive queue to this stream's
    /// untagged queue until message `msn` has one (or the SRQ is empty).
    pub(super) fn take_from_srq(&mut self, msn: u32) {
        let Some(srq) = &self.srq else {
            return;
        };
        let ahead = msn.wrapping_sub(self.rq.next_msn()) as usize;
        if ahead >= SRQ_LOOKAHEAD {
            return;
        }
        while self.rq.posted() <= ahead {
            let Some(wr) = srq.take() else {
                return;
            };
            self.rq.post(RecvSlot::new(wr, self.table.clone(), self.pd));
        }
    }

    /// Completes a whole received message, invalidating the STag a Send
    /// with Invalidate named (RFC 5040 section 5.3). A receive whose own
    /// scatter list failed invalidates nothing.
    fn complete_receive(&mut self, slot: RecvSlot, len: u32) -> Result<(), Fault> {
        let mut wc = WorkCompletion::new(slot.wr.wr_id, WcOpcode::Recv, WcStatus::Success);
        wc.byte_len = len;
        wc.solicited = slot.solicited;
        let outcome = match (slot.fault, slot.invalidate) {
            (Some(_), _) => Err((
                WcStatus::LocalProtectionError,
                TermError::RdmapLocalCatastrophic,
            )),
            (None, Some(stag)) => self
                .table
                .invalidate_remote(Stag(stag), self.pd)
                .map(|()| wc.invalidated_rkey = Some(stag))
                .map_err(|err| (WcStatus::RemoteInvalidRequest, err.rdmap_error())),
            (None, None) => Ok(()),
        };
        if let Err((status, error)) = outcome {
            wc.status = status;
            wc.terminate = Some(error);
        }
        self.completions.push_back((CqKind::Recv, wc));
        outcome.map_err(|(_, error)| Fault::new(error))
    }

    fn on_read_request(&mut self, segment: &RdmapSegment, msn: u32, mo: u32) -> Result<(), Fault> {
        if msn != self.read_msn_rx {
            return Err(Fault::new(TermError::DdpUntaggedMsnRange));
        }
        if mo != 0 || !segment.ddp.last {
            return Err(Fault::new(TermError::DdpUntaggedInvalidMo));
        }
        let request = ReadRequest::parse(segment.payload)
            .map_err(|_| Fault::new(TermError::RdmapCatastrophicStream))?;
        self.read_msn_rx = self.read_msn_rx.wrapping_add(1);
        let with_header = |error: TermError| Fault {
            error,
            rdmap_header: Some(request.to_bytes()),
        };
        self.table
            .check(
                Stag(request.source_stag),
                self.pd,
                Access::REMOTE_READ,
                request.source_to,
                request.size as usize,
            )
            .map_err(|e: TaggedError| with_header(e.rdmap_error()))?;
        self.inbound_reads.receive(request).map_err(with_header)
    }

    /// The peer's Terminate: reported, and unless the stream is already
    /// terminated, it fails the oldest unfinished send work request and
    /// flushes the rest.
    fn on_terminate(&mut self, segment: &RdmapSegment) {
        self.counters.terminates_received += 1;
        let error = TerminateRepr::parse(segment.payload, LayoutHint::Auto)
            .map(|t| t.error)
            // An unreadable Terminate still ends the stream.
            .unwrap_or(TermError::RdmapOperationUnspecified);
        self.events.push_back(QpEvent::TerminateReceived(error));
        if self.state != QpState::Terminate {
            self.enter_error(Some(terminate::completion_for(error)));
            self.state = QpState::Terminate;
            self.llp_close.get_or_insert(super::LlpClose::Graceful);
        }
    }
}

/// A segment's payload as its checks see it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Payload<'a> {
    /// Octets still to be placed.
    Octets(&'a [u8]),
    /// This many octets, already placed out of order.
    Placed(usize),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Octets(octets) => octets.len(),
            Self::Placed(len) => *len,
        }
    }
}

/// Whether a message with `opcode` on the Send queue carries a payload a
/// posted receive takes (RFC 7306's Immediate Data does not).
pub(super) fn carries_send_payload(opcode: Opcode) -> bool {
    opcode.queue_number() == Some(QN_SEND)
        && !matches!(
            opcode,
            Opcode::ImmediateData | Opcode::ImmediateDataSolicited
        )
}
