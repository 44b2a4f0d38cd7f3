//! How the control core transmits: on a transmit queue of its own, or,
//! when the device has no queue to spare (one queue pair per dataplane
//! core and no more, as with af_packet or memif set up with one queue),
//! through dataplane core 0, which sends the control core's frames on its
//! own queue at its next poll. Either way no queue is ever shared.

use std::sync::Arc;

use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::net::FrameSink;
use crate::runtime::link::CoreLink;
use crate::runtime::tx_batch::{build_frame, TxBatch, TxCounters};

/// The control core's way to the wire.
#[derive(Debug)]
pub enum ControlTx<F> {
    /// A transmit queue of its own.
    Queue(TxBatch),
    /// Through the ring to a dataplane core.
    ViaCore {
        /// Where frames are allocated.
        pool: Arc<Mempool>,
        /// The dataplane core that sends them.
        link: Arc<CoreLink<F>>,
        /// Frames handed over, and frames dropped (no mbuf, ring full).
        counters: TxCounters,
    },
}

impl<F> ControlTx<F> {
    /// Queues a ready frame; false (and the frame dropped) when there is
    /// no room.
    pub fn push(&mut self, mbuf: Mbuf) -> bool {
        match self {
            ControlTx::Queue(batch) => batch.push(mbuf),
            ControlTx::ViaCore { link, counters, .. } => match link.to_wire.push(mbuf) {
                Ok(()) => {
                    counters.sent += 1;
                    true
                }
                Err(_dropped) => {
                    counters.backlog_full += 1;
                    false
                }
            },
        }
    }

    /// Sends what is queued (a no-op through a core, which sends at its
    /// own pace).
    pub fn flush(&mut self) {
        if let ControlTx::Queue(batch) = self {
            batch.flush();
        }
    }

    /// Drops frames not yet handed to the device (at shutdown).
    pub fn discard_pending(&mut self) -> usize {
        match self {
            ControlTx::Queue(batch) => batch.discard_pending(),
            ControlTx::ViaCore { .. } => 0,
        }
    }

    /// The counters so far (`sent` counts frames handed to the core when
    /// sending through one).
    pub fn counters(&self) -> &TxCounters {
        match self {
            ControlTx::Queue(batch) => batch.counters(),
            ControlTx::ViaCore { counters, .. } => counters,
        }
    }
}

impl<F> FrameSink for ControlTx<F> {
    fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match self {
            ControlTx::Queue(batch) => batch.send_frame(len, fill),
            ControlTx::ViaCore { pool, counters, .. } => match build_frame(pool, len, fill) {
                Some(mbuf) => self.push(mbuf),
                None => {
                    counters.no_buffer += 1;
                    false
                }
            },
        }
    }

    /// Offloads checksums on a queue of its own that does; a frame sent
    /// through a core carries its checksums.
    fn send_tcp_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8], bool)) -> bool {
        match self {
            ControlTx::Queue(batch) => batch.send_tcp_frame(len, fill),
            ControlTx::ViaCore { .. } => self.send_frame(len, &mut |frame| fill(frame, false)),
        }
    }
}
