//! [`Recorder`]: a consumer that writes down every hand-off, for tests
//! that check what the receiver offered (RFC 5044 A.3) and when its left
//! edge moved.

use crate::tcp::receive::receiver::{Consumer, Disposition};

/// A consumer recording every hand-off; it consumes what it is offered
/// when `consume` is set and keeps it (in the reassembly buffer)
/// otherwise.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Every offer: stream position, octets, whether it was in order.
    pub offered: Vec<(u64, Vec<u8>, bool)>,
    /// Every left-edge signal, in order.
    pub left_edges: Vec<u64>,
    /// Consume offers (`true`) or keep them (`false`).
    pub consume: bool,
}

impl Consumer for Recorder {
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
        self.offered.push((pos, data.to_vec(), in_order));
        if self.consume {
            Disposition::Consumed
        } else {
            Disposition::Keep
        }
    }

    fn on_left_edge(&mut self, left_edge: u64) {
        self.left_edges.push(left_edge);
    }
}
