//! The untagged queues of one direction of a connection: every message on
//! the queue its opcode belongs to (RFC 5040 section 5.1, RFC 7306
//! section 5.1), and MSNs that start at 1 on each queue and count its
//! messages (RFC 5041 section 4.4).

use std::collections::HashMap;

use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::rdmap::RdmapSegment;

/// The MSN each untagged queue of one direction expects next.
#[derive(Debug)]
pub struct Queues {
    next_msn: HashMap<u32, u32>,
    /// Whether the capture holds the direction from its first FPDU, so
    /// that every queue's first MSN must be 1.
    from_start: bool,
}

impl Queues {
    /// The queues of a direction; `from_start` when the capture has its
    /// startup frame, so that every queue starts at MSN 1.
    pub fn new(from_start: bool) -> Self {
        Self {
            next_msn: HashMap::new(),
            from_start,
        }
    }

    /// What is wrong with the queue number or MSN of `segment`, if it is
    /// untagged and anything is. A segment on the wrong queue leaves the
    /// count alone; a wrong MSN restarts it from the segment's.
    pub fn check(&mut self, segment: &RdmapSegment<'_>) -> Option<String> {
        let BufferModel::Untagged { qn, msn, .. } = segment.ddp.model else {
            return None;
        };
        let opcode = segment.opcode();
        if let Some(queue) = opcode.queue_number().filter(|&q| q != qn) {
            return Some(format!(
                "queue number {qn}: a {} goes to queue {queue}",
                opcode.name()
            ));
        }
        let expected = self
            .next_msn
            .get(&qn)
            .copied()
            .or(self.from_start.then_some(1));
        let next = if segment.ddp.last {
            msn.wrapping_add(1)
        } else {
            msn
        };
        self.next_msn.insert(qn, next);
        expected
            .filter(|&e| e != msn)
            .map(|e| format!("MSN {msn} on queue {qn}, expected {e}"))
    }
}
