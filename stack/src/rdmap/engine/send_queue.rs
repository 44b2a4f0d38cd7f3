//! The send queue (RFC 5040 sections 5.1-5.3 and 6): work requests turned
//! into RDMAP messages in posting order, each cut into DDP segments of at
//! most the MULPDU, the fence, the ORD limit on RDMA Reads, and completions
//! released strictly in send queue order.

use crate::mem::{Access, BufferSlice, Lent, PdId, Stag, StagTable, TaggedError};
use crate::mpa::Rtr;
use crate::rdmap::OutboundReads;
use crate::verbs::{Payload, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use crate::wire::ddp::{BufferModel, DdpRepr, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use crate::wire::rdmap::{Opcode, RdmapControl, ReadRequest, QN_READ_REQUEST, QN_SEND};
use crate::wire::terminate::TermError;
use std::collections::VecDeque;

/// The STag (and TO 0) uwarp puts in its zero-length RTR frames: not 0,
/// which Chelsio refuses, and the value Linux siw uses.
pub const RTR_STAG: u32 = 1;

/// Largest DDP header, for header scratch space.
pub const MAX_HEADER_LEN: usize = UNTAGGED_HEADER_LEN;

/// The next DDP segment of the message being sent: its header, and how
/// much of the message's data follows it. The data is read from where it
/// lies ([`SendQueue::copy_payload`]) straight into the frame, and the
/// segment counts as sent only once [`SendQueue::segment_sent`] says so.
#[derive(Debug)]
pub struct TxSegment {
    /// The emitted DDP/RDMAP header.
    pub header: [u8; MAX_HEADER_LEN],
    /// How many octets of `header` are used.
    pub header_len: usize,
    /// Octets of payload after the header.
    pub payload_len: usize,
    /// The message's last segment.
    last: bool,
}

impl TxSegment {
    /// The ULPDU's length: header and payload.
    pub fn ulpdu_len(&self) -> usize {
        self.header_len + self.payload_len
    }
}

/// Where a message's data lies.
#[derive(Debug)]
enum Source {
    /// In the engine: inline data, a Read Request, an empty RTR.
    Bytes(Vec<u8>),
    /// In registered memory, read segment by segment as it is framed.
    Gather(Vec<Sge>),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Bytes(data) => data.len(),
            Source::Gather(sgl) => sgl.iter().map(|sge| sge.length as usize).sum(),
        }
    }
}

/// A work request's place in the completion order.
#[derive(Debug)]
struct Pending {
    seq: u64,
    signaled: bool,
    completion: WorkCompletion,
    done: bool,
    /// Done, but its data was sent by reference: it completes once the
    /// LLP acknowledged the stream up to this offset.
    until: Option<u64>,
}

/// The message being segmented.
#[derive(Debug)]
struct Outgoing {
    /// The work request's sequence number, `None` for an RTR.
    seq: Option<u64>,
    kind: OutKind,
    source: Source,
    /// The message's length.
    len: usize,
    sent: usize,
    /// The last segment has been handed out.
    finished: bool,
    /// The stream offset after the last segment sent by reference, if any
    /// was.
    referenced_until: Option<u64>,
}

impl Outgoing {
    /// A message of `kind` carrying what `source` holds, nothing of it
    /// sent yet.
    fn new(seq: Option<u64>, kind: OutKind, source: Source) -> Self {
        Self {
            seq,
            kind,
            len: source.len(),
            source,
            sent: 0,
            finished: false,
            referenced_until: None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum OutKind {
    Untagged {
        opcode: Opcode,
        qn: u32,
        msn: u32,
        ulp_word: u32,
    },
    Tagged {
        stag: u32,
        to: u64,
    },
}

/// A work request failed before anything of it was sent; its completion,
/// already recorded, carries the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalFault;

/// A posted work request not started yet.
#[derive(Debug)]
struct Waiting {
    wr: SendWr,
    /// Posted while closing: it completes flushed when its turn comes.
    refused: bool,
}

/// The send queue of one stream.
#[derive(Debug)]
pub struct SendQueue {
    waiting: VecDeque<Waiting>,
    current: Option<Outgoing>,
    order: VecDeque<Pending>,
    next_seq: u64,
    /// Outstanding Reads: the work request's sequence number and size, or
    /// `None` for the Read RTR.
    reads: OutboundReads<Option<(u64, u32)>>,
    send_msn: u32,
    read_msn: u32,
    /// Successful unsignaled work requests passed over so far.
    unsignaled_completed: u64,
}

impl SendQueue {
    /// An empty queue whose Reads are limited to `ord` in flight.
    pub fn new(ord: u16) -> Self {
        Self {
            waiting: VecDeque::new(),
            current: None,
            order: VecDeque::new(),
            next_seq: 0,
            reads: OutboundReads::new(ord),
            send_msn: 1,
            read_msn: 1,
            unsignaled_completed: 0,
        }
    }

    /// Queues a work request.
    pub fn post(&mut self, wr: SendWr) {
        self.waiting.push_back(Waiting { wr, refused: false });
    }

    /// Queues a work request that completes flushed, in its turn, without
    /// being sent (it was posted while the stream was closing): at once if
    /// nothing waits ahead of it.
    pub fn refuse(&mut self, wr: SendWr) {
        if self.waiting.is_empty() {
            let seq = self.record(&wr);
            self.mark_done(seq, WcStatus::WrFlushError, 0);
        } else {
            self.waiting.push_back(Waiting { wr, refused: true });
        }
    }

    /// Queues the initiator's RTR frame (RFC 6581 section 9.2) ahead of
    /// every work request.
    pub fn queue_rtr(&mut self, rtr: Rtr) {
        let kind = match rtr {
            Rtr::Write => OutKind::Tagged {
                stag: RTR_STAG,
                to: 0,
            },
            Rtr::Send => OutKind::Untagged {
                opcode: Opcode::Send,
                qn: QN_SEND,
                msn: self.take_send_msn(),
                ulp_word: 0,
            },
            Rtr::Read => {
                let request = ReadRequest {
                    sink_stag: RTR_STAG,
                    sink_to: 0,
                    size: 0,
                    source_stag: RTR_STAG,
                    source_to: 0,
                };
                self.reads.send_unlimited(request, None);
                return self.current_read_request(None, request);
            }
        };
        self.current = Some(Outgoing::new(None, kind, Source::Bytes(Vec::new())));
    }

    fn current_read_request(&mut self, seq: Option<u64>, request: ReadRequest) {
        let kind = OutKind::Untagged {
            opcode: Opcode::ReadRequest,
            qn: QN_READ_REQUEST,
            msn: self.read_msn,
            ulp_word: 0,
        };
        let source = Source::Bytes(request.to_bytes().to_vec());
        self.current = Some(Outgoing::new(seq, kind, source));
        self.read_msn = self.read_msn.wrapping_add(1);
    }

    fn take_send_msn(&mut self) -> u32 {
        let msn = self.send_msn;
        self.send_msn = self.send_msn.wrapping_add(1);
        msn
    }

    /// Whether nothing is waiting, being sent, or awaiting a Read Response.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.current.as_ref().is_none_or(|out| out.finished)
            && self.reads.in_flight() == 0
    }

    /// The next segment to send, of at most `mulpdu` octets with its
    /// header, starting the next work request when the previous one is out
    /// (unless the fence or the ORD holds it). A work request that cannot
    /// start fails with a [`LocalFault`]; its completion is recorded. The
    /// same segment comes again until [`segment_sent`](Self::segment_sent).
    pub fn next_segment(
        &mut self,
        mulpdu: usize,
        table: &StagTable,
        pd: PdId,
    ) -> Result<Option<TxSegment>, LocalFault> {
        if self.current.as_ref().is_some_and(|out| out.finished) {
            self.current = None;
        }
        if self.current.is_none() && !self.start_next(table, pd)? {
            return Ok(None);
        }
        let Some(out) = self.current.as_ref() else {
            return Ok(None);
        };
        let start = out.sent;
        let (opcode, model, header_len) = match out.kind {
            OutKind::Untagged {
                opcode,
                qn,
                msn,
                ulp_word,
            } => {
                let mo = start as u32;
                let model = BufferModel::Untagged {
                    ulp_word,
                    qn,
                    msn,
                    mo,
                };
                (opcode, model, UNTAGGED_HEADER_LEN)
            }
            OutKind::Tagged { stag, to } => {
                let to = to.wrapping_add(start as u64);
                let model = BufferModel::Tagged { stag, to };
                (Opcode::RdmaWrite, model, TAGGED_HEADER_LEN)
            }
        };
        // The engine keeps the MULPDU above every header.
        let room = mulpdu - header_len;
        let payload_len = (out.len - start).min(room);
        let last = start + payload_len == out.len;
        let mut header = [0u8; MAX_HEADER_LEN];
        let ddp = DdpRepr {
            last,
            reserved: 0,
            ulp_control: RdmapControl::new(opcode).to_u8(),
            model,
        };
        let header_len = ddp
            .emit(&mut header)
            .expect("the scratch header fits either header");
        Ok(Some(TxSegment {
            header,
            header_len,
            payload_len,
            last,
        }))
    }

    /// Copies the payload of `segment`, the one [`next_segment`] gave last,
    /// into `out` (exactly its length), from registered memory through the
    /// STag table or from the engine's own copy. Fails when a region of
    /// the gather list went away since the request started.
    ///
    /// [`next_segment`]: Self::next_segment
    pub fn copy_payload(
        &self,
        segment: &TxSegment,
        table: &StagTable,
        pd: PdId,
        out: &mut [u8],
    ) -> Result<(), TaggedError> {
        let Some(current) = self.current.as_ref() else {
            return Ok(());
        };
        let start = current.sent;
        match &current.source {
            Source::Bytes(data) => {
                out.copy_from_slice(&data[start..start + segment.payload_len]);
                Ok(())
            }
            Source::Gather(sgl) => read_gather(sgl, start, table, pd, out),
        }
    }

    /// The payload of `segment`, the one [`next_segment`] gave last, held
    /// in place: `None` when it is not one piece of memory uwarp may hold
    /// (inline data, a span of two elements of the gather list, or
    /// foreign memory, see [`StagTable::local_slice`]), an error when its
    /// region went away since the request started.
    ///
    /// [`next_segment`]: Self::next_segment
    pub fn payload_slice(
        &self,
        segment: &TxSegment,
        table: &StagTable,
        pd: PdId,
    ) -> Option<Result<BufferSlice, TaggedError>> {
        let (lkey, to, len) = self.one_piece(segment)?;
        table.local_slice(lkey, pd, to, len).transpose()
    }

    /// Lends the payload of `segment`, the one [`next_segment`] gave
    /// last, to `lend` where it lies, for the length of the call
    /// ([`StagTable::lend`]): `None` when it is not one piece of
    /// registered memory (inline data, a span of two elements of the
    /// gather list), an error when its region went away since the
    /// request started. Foreign memory is lent too.
    ///
    /// [`next_segment`]: Self::next_segment
    pub fn lend_payload<R>(
        &self,
        segment: &TxSegment,
        table: &StagTable,
        pd: PdId,
        lend: impl FnOnce(Lent<'_>) -> R,
    ) -> Option<Result<R, TaggedError>> {
        let (lkey, to, len) = self.one_piece(segment)?;
        Some(table.lend(lkey, pd, Access::NONE, (to, len), lend))
    }

    /// Where the payload of `segment`, the one [`next_segment`] gave
    /// last, lies when it is one piece of registered memory: its STag,
    /// Tagged Offset and length.
    ///
    /// [`next_segment`]: Self::next_segment
    fn one_piece(&self, segment: &TxSegment) -> Option<(Stag, u64, usize)> {
        let current = self.current.as_ref()?;
        let Source::Gather(sgl) = &current.source else {
            return None;
        };
        let (sge, skip, take) = gather_pieces(sgl, current.sent, segment.payload_len).next()?;
        (take == segment.payload_len).then_some((sge.lkey, sge.addr + skip as u64, take))
    }

    /// Counts `segment`, the one [`next_segment`] gave last, as handed to
    /// the LLP. A Send or Write completes with its last segment: the LLP
    /// delivers it reliably (RFC 5040 section 5.1). When any of its
    /// segments went by reference (`referenced_until` is the stream
    /// offset after this one's, when it did), it completes only once the
    /// LLP acknowledged those: until then a retransmission reads the
    /// application's memory again.
    ///
    /// [`next_segment`]: Self::next_segment
    pub fn segment_sent(&mut self, segment: &TxSegment, referenced_until: Option<u64>) {
        let Some(out) = self.current.as_mut() else {
            return;
        };
        out.sent += segment.payload_len;
        out.finished = segment.last;
        out.referenced_until = referenced_until.or(out.referenced_until);
        let until = out.referenced_until;
        let is_read = matches!(
            out.kind,
            OutKind::Untagged {
                opcode: Opcode::ReadRequest,
                ..
            }
        );
        if let Some(seq) = out.seq.filter(|_| segment.last && !is_read) {
            let len = len_u32(out.len);
            if let Some(pending) = self.mark_done(seq, WcStatus::Success, len) {
                pending.until = until;
            }
        }
    }

    /// Ends the message being sent with `status` (its gather list failed
    /// after part of it was sent).
    pub fn fail_current(&mut self, status: WcStatus) {
        if let Some(out) = self.current.take() {
            if let Some(pending) = out.seq.and_then(|seq| self.mark_done(seq, status, 0)) {
                // Its segments already sent by reference may be sent again.
                pending.until = out.referenced_until;
            }
        }
    }

    /// Starts the next waiting work request; `false` when there is none or
    /// it must wait (fence, ORD). Refused requests on the way complete.
    fn start_next(&mut self, table: &StagTable, pd: PdId) -> Result<bool, LocalFault> {
        while self.waiting.front().is_some_and(|w| w.refused) {
            let refused = self.waiting.pop_front().expect("checked above");
            let seq = self.record(&refused.wr);
            self.mark_done(seq, WcStatus::WrFlushError, 0);
        }
        let Some(Waiting { wr, .. }) = self.waiting.front() else {
            return Ok(false);
        };
        let is_read = matches!(wr.op, SendOp::Read { .. });
        // With ORD 0 (no Reads negotiated) a Read can never be sent.
        let never = is_read && !self.reads.can_send() && self.reads.in_flight() == 0;
        let held = (wr.fence && self.reads.in_flight() > 0) || (is_read && !self.reads.can_send());
        if held && !never {
            return Ok(false);
        }
        let wr = self.waiting.pop_front().expect("checked above").wr;
        let seq = self.record(&wr);
        let fail = |queue: &mut Self, status| {
            queue.mark_done(seq, status, 0);
            Err(LocalFault)
        };
        if never {
            return fail(self, WcStatus::LocalQpOperationError);
        }
        let Ok(len) = u32::try_from(wr.payload.len()) else {
            return fail(self, WcStatus::LocalLengthError);
        };
        if let SendOp::Read { remote_addr, rkey } = wr.op {
            let sink = match &wr.payload {
                Payload::Sgl(sgl) if sgl.len() <= 1 => sgl.first().copied(),
                _ => return fail(self, WcStatus::LocalQpOperationError),
            };
            let (sink_stag, sink_to) = sink.map_or((RTR_STAG, 0), |s| (s.lkey.raw(), s.addr));
            if table
                .check(
                    Stag(sink_stag),
                    pd,
                    Access::LOCAL_WRITE,
                    sink_to,
                    len as usize,
                )
                .is_err()
            {
                return fail(self, WcStatus::LocalProtectionError);
            }
            let request = ReadRequest {
                sink_stag,
                sink_to,
                size: len,
                source_stag: rkey,
                source_to: remote_addr,
            };
            self.reads
                .send(request, Some((seq, len)))
                .expect("ORD room was checked");
            self.current_read_request(Some(seq), request);
            return Ok(true);
        }
        if let Err(status) = check_gather(&wr.payload, table, pd) {
            return fail(self, status);
        }
        let kind = match wr.op {
            SendOp::Write { remote_addr, rkey } => OutKind::Tagged {
                stag: rkey,
                to: remote_addr,
            },
            SendOp::Send | SendOp::SendWithInvalidate { .. } => {
                let (opcode, ulp_word) = match (wr.op, wr.solicited) {
                    (SendOp::SendWithInvalidate { invalidate }, false) => {
                        (Opcode::SendInvalidate, invalidate)
                    }
                    (SendOp::SendWithInvalidate { invalidate }, true) => {
                        (Opcode::SendSolicitedInvalidate, invalidate)
                    }
                    (_, true) => (Opcode::SendSolicited, 0),
                    (_, false) => (Opcode::Send, 0),
                };
                OutKind::Untagged {
                    opcode,
                    qn: QN_SEND,
                    msn: self.take_send_msn(),
                    ulp_word,
                }
            }
            SendOp::Read { .. } => unreachable!("handled above"),
        };
        let source = match wr.payload {
            Payload::Inline(data) => Source::Bytes(data),
            Payload::Sgl(sgl) => Source::Gather(sgl),
        };
        self.current = Some(Outgoing::new(Some(seq), kind, source));
        Ok(true)
    }

    /// Gives a work request leaving the waiting list its place in the
    /// completion order.
    fn record(&mut self, wr: &SendWr) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back(Pending {
            seq,
            signaled: wr.signaled,
            completion: WorkCompletion::new(wr.wr_id, wr.op.wc_opcode(), WcStatus::Success),
            done: false,
            until: None,
        });
        seq
    }

    /// Notes a Read Response segment; see [`OutboundReads::on_response`].
    /// Once the segment is known to belong where it lands, `place` copies
    /// it into the sink; the Read completes on its last segment, if that
    /// copy succeeded (a sink whose memory is gone fails it, and the Read
    /// is left to be flushed).
    pub fn on_read_response(
        &mut self,
        sink_stag: u32,
        sink_to: u64,
        len: u32,
        last: bool,
        place: impl FnOnce() -> Result<(), TermError>,
    ) -> Result<(), TermError> {
        let finished = self.reads.on_response(sink_stag, sink_to, len, last)?;
        place()?;
        if let Some(Some((seq, size))) = finished {
            self.mark_done(seq, WcStatus::Success, size);
        }
        Ok(())
    }

    /// Whether a Read Response segment placed ahead of the in-order stream
    /// would land inside an outstanding Read's sink buffer.
    pub fn expects_read_response(&self, sink_stag: u32, sink_to: u64, len: u32) -> bool {
        self.reads.covers(sink_stag, sink_to, len)
    }

    fn mark_done(&mut self, seq: u64, status: WcStatus, byte_len: u32) -> Option<&mut Pending> {
        // Sequence numbers are consecutive in `order`: the index follows
        // from the oldest one, with no search on the per-message path.
        let index = self
            .order
            .front()
            .and_then(|oldest| usize::try_from(seq.checked_sub(oldest.seq)?).ok());
        let pending = index.and_then(|i| self.order.get_mut(i))?;
        pending.done = true;
        pending.completion.status = status;
        pending.completion.byte_len = byte_len;
        Some(pending)
    }

    /// The next completion in send queue order, if the oldest work request
    /// has finished (and, if it was sent by reference, the LLP has
    /// acknowledged the stream up to `acknowledged`, at least as far as
    /// its data). Successful unsignaled requests are passed over.
    pub fn next_completion(&mut self, acknowledged: u64) -> Option<WorkCompletion> {
        let ready = |p: &Pending| p.done && p.until.is_none_or(|until| until <= acknowledged);
        while self.order.front().is_some_and(ready) {
            let pending = self.order.pop_front().expect("checked above");
            if pending.signaled || pending.completion.status != WcStatus::Success {
                return Some(pending.completion);
            }
            self.unsignaled_completed += 1;
        }
        None
    }

    /// How many successful unsignaled work requests
    /// [`next_completion`](Self::next_completion) has passed over: they
    /// made no completion, and are done.
    pub fn unsignaled_completed(&self) -> u64 {
        self.unsignaled_completed
    }

    /// Ends every work request: those already finished keep their status,
    /// the oldest unfinished one gets `first` (the error that stopped the
    /// stream, if it names one), the rest are flushed. They come out of
    /// [`next_completion`](Self::next_completion) in order; one whose data
    /// went by reference still waits for the LLP's ACK (after a FIN or a
    /// Terminate TCP goes on retransmitting it from the application's
    /// memory), or for the LLP to end.
    pub fn flush(&mut self, first: Option<WorkCompletion>) {
        let mut first = first;
        for pending in self.order.iter_mut().filter(|pending| !pending.done) {
            let error = first.take().unwrap_or(WorkCompletion {
                status: WcStatus::WrFlushError,
                ..pending.completion
            });
            pending.completion.status = error.status;
            pending.completion.terminate = error.terminate;
            pending.done = true;
        }
        for Waiting { wr, .. } in std::mem::take(&mut self.waiting) {
            let seq = self.record(&wr);
            self.mark_done(seq, WcStatus::WrFlushError, 0);
        }
        self.current = None;
        self.reads.flush().for_each(drop);
    }
}

/// Checks that every element of a Send's or Write's gather list lies in a
/// region the stream may read, before anything of it is sent.
fn check_gather(payload: &Payload, table: &StagTable, pd: PdId) -> Result<(), WcStatus> {
    let Payload::Sgl(sgl) = payload else {
        return Ok(());
    };
    for sge in sgl {
        table
            .check(sge.lkey, pd, Access::NONE, sge.addr, sge.length as usize)
            .map_err(|_| WcStatus::LocalProtectionError)?;
    }
    Ok(())
}

/// Reads `out.len()` octets of the data a gather list describes, starting
/// `offset` octets into it.
fn read_gather(
    sgl: &[Sge],
    offset: usize,
    table: &StagTable,
    pd: PdId,
    out: &mut [u8],
) -> Result<(), TaggedError> {
    let mut at = 0;
    for (sge, skip, take) in gather_pieces(sgl, offset, out.len()) {
        table.local_read(
            sge.lkey,
            pd,
            sge.addr + skip as u64,
            &mut out[at..at + take],
        )?;
        at += take;
    }
    Ok(())
}

/// The pieces of the data a gather list describes that hold its `len`
/// octets from `offset` on: each element, the offset into it, and how many
/// of its octets.
fn gather_pieces(
    sgl: &[Sge],
    offset: usize,
    len: usize,
) -> impl Iterator<Item = (&Sge, usize, usize)> {
    let (mut skip, mut left) = (offset, len);
    sgl.iter().filter_map(move |sge| {
        let sge_len = sge.length as usize;
        if left == 0 {
            return None;
        }
        if skip >= sge_len {
            skip -= sge_len;
            return None;
        }
        let piece = (sge, skip, (sge_len - skip).min(left));
        left -= piece.2;
        skip = 0;
        Some(piece)
    })
}

/// A message length as the completion reports it (messages over 4 GiB are
/// refused when posted, so this never saturates).
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
