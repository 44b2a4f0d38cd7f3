//! The two queues of RDMA Read (RFC 5040 sections 5.2 and 6.4, with the
//! IRD/ORD of RFC 6581 section 9.1): the requester's outstanding Reads,
//! limited by its ORD, and the responder's inbound Read Request queue,
//! limited by its IRD and answered strictly in request order, each
//! response cut into tagged segments no longer than the MULPDU allows.

use std::collections::VecDeque;

use crate::wire::ddp::{BufferModel, DdpRepr, TAGGED_HEADER_LEN};
use crate::wire::rdmap::{Opcode, RdmapControl, ReadRequest};
use crate::wire::terminate::TermError;

/// The requester's side: Reads sent and not yet answered in full.
#[derive(Debug)]
pub struct OutboundReads<T> {
    ord: usize,
    outstanding: VecDeque<Outstanding<T>>,
}

#[derive(Debug)]
struct Outstanding<T> {
    request: ReadRequest,
    /// Octets of the response received so far.
    received: u32,
    context: T,
}

impl<T> OutboundReads<T> {
    /// A queue allowing `ord` Reads in flight.
    pub fn new(ord: u16) -> Self {
        Self {
            ord: usize::from(ord),
            outstanding: VecDeque::new(),
        }
    }

    /// Whether another Read may be sent now.
    pub fn can_send(&self) -> bool {
        self.outstanding.len() < self.ord
    }

    /// Records a Read Request being sent; `context` comes back when its
    /// response is complete. Refuses when ORD Reads are already in flight
    /// (the caller holds the work request until one completes).
    pub fn send(&mut self, request: ReadRequest, context: T) -> Result<(), T> {
        if !self.can_send() {
            return Err(context);
        }
        self.push(request, context);
        Ok(())
    }

    /// Records a Read Request sent outside the ORD limit: the Read RTR of
    /// RFC 6581 section 9.2, which the responder answers like any Read.
    pub fn send_unlimited(&mut self, request: ReadRequest, context: T) {
        self.push(request, context);
    }

    fn push(&mut self, request: ReadRequest, context: T) {
        self.outstanding.push_back(Outstanding {
            request,
            received: 0,
            context,
        });
    }

    /// Checks a Read Response segment of `len` octets to `sink_stag` at
    /// `sink_to` with the L bit `last`. Responses come in request order, so
    /// the segment belongs to the oldest outstanding Read and must continue
    /// its response exactly where the previous segment ended, inside the
    /// requested size; the last segment completes the Read and returns its
    /// context. A response nobody asked for, to the wrong buffer, or
    /// outside the requested range is an error, found before anything is
    /// placed.
    pub fn on_response(
        &mut self,
        sink_stag: u32,
        sink_to: u64,
        len: u32,
        last: bool,
    ) -> Result<Option<T>, TermError> {
        let oldest = self
            .outstanding
            .front_mut()
            .ok_or(TermError::RdmapUnexpectedOpcode)?;
        if oldest.request.sink_stag != sink_stag {
            return Err(TermError::DdpTaggedStagNotAssociated);
        }
        let expected_to = oldest
            .request
            .sink_to
            .wrapping_add(u64::from(oldest.received));
        let end = oldest.received.checked_add(len);
        let in_range = end
            .is_some_and(|end| end <= oldest.request.size && (!last || end == oldest.request.size));
        if sink_to != expected_to || !in_range {
            return Err(TermError::DdpTaggedBaseOrBounds);
        }
        oldest.received += len;
        if !last {
            return Ok(None);
        }
        Ok(self.outstanding.pop_front().map(|o| o.context))
    }

    /// Whether `len` octets at `sink_to` of `sink_stag` lie inside the sink
    /// buffer of an outstanding Read: what a response segment that arrived
    /// ahead of the in-order stream must satisfy before it is placed. The
    /// order checks of [`on_response`](Self::on_response) follow when the
    /// stream reaches the segment.
    pub fn covers(&self, sink_stag: u32, sink_to: u64, len: u32) -> bool {
        let Some(end) = sink_to.checked_add(u64::from(len)) else {
            return false;
        };
        self.outstanding.iter().any(|o| {
            let start = o.request.sink_to;
            o.request.sink_stag == sink_stag
                && sink_to >= start
                && start
                    .checked_add(u64::from(o.request.size))
                    .is_some_and(|limit| end <= limit)
        })
    }

    /// Reads in flight.
    pub fn in_flight(&self) -> usize {
        self.outstanding.len()
    }

    /// Takes back every outstanding Read's context (a QP in the error state
    /// flushes them).
    pub fn flush(&mut self) -> impl Iterator<Item = T> + '_ {
        self.outstanding.drain(..).map(|o| o.context)
    }
}

/// One tagged segment of a Read Response, ready to be filled from the
/// source buffer and sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseSegment {
    /// The data sink's STag.
    pub sink_stag: u32,
    /// Where the segment goes in the sink buffer.
    pub sink_to: u64,
    /// The data source's STag.
    pub source_stag: u32,
    /// Where the segment's data comes from in the source buffer.
    pub source_to: u64,
    /// The segment's payload length.
    pub len: u32,
    /// L: the last segment of the response.
    pub last: bool,
    /// The Read Request the segment answers, as it arrived.
    pub request: ReadRequest,
}

impl ResponseSegment {
    /// The segment's tagged DDP header, RDMAP opcode Read Response.
    pub fn header(&self) -> [u8; TAGGED_HEADER_LEN] {
        let ddp = DdpRepr {
            last: self.last,
            reserved: 0,
            ulp_control: RdmapControl::new(Opcode::ReadResponse).to_u8(),
            model: BufferModel::Tagged {
                stag: self.sink_stag,
                to: self.sink_to,
            },
        };
        let mut header = [0u8; TAGGED_HEADER_LEN];
        ddp.emit(&mut header).expect("a tagged header is 14 octets");
        header
    }
}

/// The responder's side: Read Requests received and not yet answered.
#[derive(Debug)]
pub struct InboundReads {
    ird: usize,
    queue: VecDeque<ReadRequest>,
    /// Octets of the oldest request already answered.
    sent: u32,
}

impl InboundReads {
    /// A queue holding up to `ird` Read Requests.
    pub fn new(ird: u16) -> Self {
        Self {
            ird: usize::from(ird),
            queue: VecDeque::new(),
            sent: 0,
        }
    }

    /// Queues a Read Request. More than IRD outstanding requests is the
    /// peer overrunning what was negotiated: a Terminate with RDMAP remote
    /// operation error, catastrophic error localized to the stream (what
    /// Linux siw sends).
    pub fn receive(&mut self, request: ReadRequest) -> Result<(), TermError> {
        if self.queue.len() >= self.ird {
            return Err(TermError::RdmapCatastrophicStream);
        }
        self.queue.push_back(request);
        Ok(())
    }

    /// Requests waiting for (the rest of) their response.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// The next segment to send, at most `mulpdu` octets including its
    /// 14-octet tagged header; `None` when nothing is queued. A zero-length
    /// Read is answered with one zero-length segment. The same segment
    /// comes again until [`segment_sent`](Self::segment_sent) counts it.
    pub fn peek_segment(&self, mulpdu: usize) -> Option<ResponseSegment> {
        let request = *self.queue.front()?;
        let room = u32::try_from(mulpdu.saturating_sub(TAGGED_HEADER_LEN)).unwrap_or(u32::MAX);
        if room == 0 && request.size > 0 {
            return None;
        }
        let len = (request.size - self.sent).min(room);
        Some(ResponseSegment {
            sink_stag: request.sink_stag,
            sink_to: request.sink_to.wrapping_add(u64::from(self.sent)),
            source_stag: request.source_stag,
            source_to: request.source_to.wrapping_add(u64::from(self.sent)),
            len,
            last: self.sent + len == request.size,
            request,
        })
    }

    /// Counts `segment`, the one [`peek_segment`](Self::peek_segment)
    /// gave last, as sent; the Read is answered with its last segment.
    pub fn segment_sent(&mut self, segment: &ResponseSegment) {
        if segment.last {
            self.queue.pop_front();
            self.sent = 0;
        } else {
            self.sent += segment.len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(size: u32, sink_stag: u32) -> ReadRequest {
        ReadRequest {
            sink_stag,
            sink_to: 0x1000,
            size,
            source_stag: 0xabcd_0100,
            source_to: 0x7f00_0000,
        }
    }

    #[test]
    fn ord_limits_reads_in_flight() {
        let mut reads = OutboundReads::new(2);
        reads.send(read(10, 1), "a").unwrap();
        reads.send(read(10, 2), "b").unwrap();
        assert_eq!(reads.send(read(10, 3), "c"), Err("c"));
        assert_eq!(reads.on_response(1, 0x1000, 4, false), Ok(None));
        assert_eq!(reads.on_response(1, 0x1004, 6, true), Ok(Some("a")));
        assert!(reads.can_send());
        assert_eq!(
            reads.on_response(1, 0x1000, 10, true),
            Err(TermError::DdpTaggedStagNotAssociated)
        );
        assert_eq!(reads.on_response(2, 0x1000, 10, true), Ok(Some("b")));
        assert_eq!(
            reads.on_response(2, 0x1000, 10, true),
            Err(TermError::RdmapUnexpectedOpcode)
        );
    }

    #[test]
    fn responses_outside_the_requested_range_are_refused() {
        let mut reads = OutboundReads::new(1);
        reads.send(read(10, 1), ()).unwrap();
        // A gap, an overlap, an overrun and an early L are all refused.
        for (to, len, last) in [
            (0x1001, 4, false),
            (0x0fff, 4, false),
            (0x1000, 11, true),
            (0x1000, 4, true),
        ] {
            assert_eq!(
                reads.on_response(1, to, len, last),
                Err(TermError::DdpTaggedBaseOrBounds)
            );
        }
        assert_eq!(reads.on_response(1, 0x1000, 10, true), Ok(Some(())));
    }

    #[test]
    fn covers_any_outstanding_sink_range_without_advancing() {
        let mut reads = OutboundReads::new(2);
        reads.send(read(10, 1), ()).unwrap();
        reads.send(read(u32::MAX, 2), ()).unwrap();
        assert!(reads.covers(1, 0x1006, 4));
        assert!(reads.covers(1, 0x1000, 10));
        assert!(!reads.covers(1, 0x1006, 5), "past the end");
        assert!(!reads.covers(1, 0x0fff, 2), "before the start");
        assert!(!reads.covers(3, 0x1000, 1), "no Read names this STag");
        assert!(reads.covers(2, 0x1000 + u64::from(u32::MAX) - 1, 1));
        assert!(!reads.covers(2, u64::MAX, 1), "the end overflows");
        // Nothing moved: the in-order response still starts at 0x1000.
        assert_eq!(reads.on_response(1, 0x1000, 10, true), Ok(Some(())));
        assert!(!reads.covers(1, 0x1000, 1), "answered in full");
    }

    #[test]
    fn responses_are_cut_at_mulpdu_in_request_order() {
        let mut reads = InboundReads::new(4);
        reads.receive(read(3000, 1)).unwrap();
        reads.receive(read(0, 2)).unwrap();
        let segments: Vec<_> = std::iter::from_fn(|| {
            let segment = reads.peek_segment(1456)?;
            reads.segment_sent(&segment);
            Some(segment)
        })
        .collect();
        assert_eq!(
            segments
                .iter()
                .map(|s| (s.sink_stag, s.len, s.last))
                .collect::<Vec<_>>(),
            [
                (1, 1442, false),
                (1, 1442, false),
                (1, 116, true),
                (2, 0, true)
            ]
        );
        assert_eq!(segments[1].sink_to, 0x1000 + 1442);
        assert_eq!(segments[2].source_to, 0x7f00_0000 + 2884);
        assert_eq!(reads.pending(), 0);
    }

    #[test]
    fn ird_overrun_is_a_terminate() {
        let mut reads = InboundReads::new(1);
        reads.receive(read(1, 1)).unwrap();
        assert_eq!(
            reads.receive(read(1, 1)),
            Err(TermError::RdmapCatastrophicStream)
        );
        let mut none = InboundReads::new(0);
        assert!(none.receive(read(1, 1)).is_err());
    }

    #[test]
    fn flush_returns_contexts() {
        let mut reads = OutboundReads::new(4);
        reads.send(read(1, 1), 1).unwrap();
        reads.send(read(1, 2), 2).unwrap();
        assert_eq!(reads.flush().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(reads.in_flight(), 0);
    }
}
