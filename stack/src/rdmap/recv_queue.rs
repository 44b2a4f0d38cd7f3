//! Posted receives as the untagged queue of RFC 5041 section 5.3 sees them,
//! and the shared receive queue several queue pairs draw them from.
//!
//! A [`RecvSlot`] scatters a Send's octets over its receive work request's
//! gather list through the STag table, so a receive can only ever land in
//! memory registered with local write access in the queue pair's
//! protection domain; a fault is remembered and reported when the message
//! completes. A receive that the stream fails on (a message too long for
//! it) remembers its error for the completion the flush gives it.

use std::sync::Arc;

use crossbeam_queue::SegQueue;

use crate::ddp::UntaggedBuffer;
use crate::mem::{PdId, StagTable, TaggedError};
use crate::verbs::{RecvWr, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::terminate::TermError;

/// A posted receive, matched to one incoming Send message.
#[derive(Debug)]
pub struct RecvSlot {
    /// The work request.
    pub wr: RecvWr,
    table: Arc<StagTable>,
    pd: PdId,
    capacity: usize,
    /// The first local protection fault met while scattering.
    pub fault: Option<TaggedError>,
    /// The message asked for a solicited event (set on its last segment).
    pub solicited: bool,
    /// The STag a Send with Invalidate named (set on its last segment).
    pub invalidate: Option<u32>,
    /// The status and Terminate error of a failure that is this receive's.
    error: Option<(WcStatus, TermError)>,
}

impl RecvSlot {
    /// Wraps a receive work request for the stream of `pd`.
    pub fn new(wr: RecvWr, table: Arc<StagTable>, pd: PdId) -> Self {
        let capacity = wr
            .sgl
            .iter()
            .map(|sge| sge.length as usize)
            .fold(0usize, usize::saturating_add);
        Self {
            wr,
            table,
            pd,
            capacity,
            fault: None,
            solicited: false,
            invalidate: None,
            error: None,
        }
    }

    /// Records that the stream failed on this receive's message with the
    /// Terminate error `cause`: its completion reports `status` instead of
    /// a flush.
    pub fn fail(&mut self, status: WcStatus, cause: TermError) {
        self.error = Some((status, cause));
    }

    /// The completion of a receive the queue pair ends without delivering:
    /// flushed, or the failure recorded with [`fail`](Self::fail).
    pub fn into_flushed(self) -> WorkCompletion {
        let (status, terminate) = self
            .error
            .map_or((WcStatus::WrFlushError, None), |(s, t)| (s, Some(t)));
        WorkCompletion {
            terminate,
            ..WorkCompletion::new(self.wr.wr_id, WcOpcode::Recv, status)
        }
    }
}

impl UntaggedBuffer for RecvSlot {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn write_at(&mut self, offset: usize, data: &[u8]) {
        let mut skip = offset;
        let mut rest = data;
        for sge in &self.wr.sgl {
            if rest.is_empty() {
                break;
            }
            let len = sge.length as usize;
            if skip >= len {
                skip -= len;
                continue;
            }
            let take = (len - skip).min(rest.len());
            let to = sge.addr.wrapping_add(skip as u64);
            if let Err(fault) = self.table.local_write(sge.lkey, self.pd, to, &rest[..take]) {
                self.fault.get_or_insert(fault);
            }
            rest = &rest[take..];
            skip = 0;
        }
    }
}

/// A shared receive queue: receives posted once and consumed by whichever
/// of its queue pairs gets a Send first (RDMAC verbs' SRQ). Lock-free;
/// share it with `Arc`.
#[derive(Debug, Default)]
pub struct SharedReceiveQueue {
    queue: SegQueue<RecvWr>,
}

impl SharedReceiveQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Posts a receive.
    pub fn post(&self, wr: RecvWr) {
        self.queue.push(wr);
    }

    /// Takes the oldest posted receive.
    pub fn take(&self) -> Option<RecvWr> {
        self.queue.pop()
    }

    /// Receives posted and not yet taken.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no receive is posted.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
