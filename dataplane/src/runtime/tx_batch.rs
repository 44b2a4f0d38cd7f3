//! [`TxBatch`]: frames built into mbufs and sent in bursts on one queue.
//!
//! Each core owns one `TxBatch` over its own transmit queue, so no queue
//! is shared. Frames collect in a vector until a burst is full or the core
//! flushes at the end of its poll; what the device does not take stays
//! queued, in order, for the next flush, up to a bound past which new
//! frames are dropped and counted (TCP retransmits; ARP and ICMP retry).

use std::sync::Arc;

use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::net::FrameSink;
use crate::queue::TxQueue;

/// Packets per `tx_burst`.
pub const BURST: usize = 32;

/// How many frames may wait for the device before new ones are dropped.
pub const BACKLOG_LIMIT: usize = 4096;

/// Transmit counters of one [`TxBatch`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames the device took.
    pub sent: u64,
    /// Frames dropped because the backlog was full.
    pub backlog_full: u64,
    /// Frames dropped because no mbuf was free or the frame did not fit one.
    pub no_buffer: u64,
}

/// A transmit queue with its mempool and the frames waiting for it.
#[derive(Debug)]
pub struct TxBatch {
    queue: TxQueue,
    pool: Arc<Mempool>,
    pending: Vec<Mbuf>,
    counters: TxCounters,
}

impl TxBatch {
    /// Sends on `queue`, allocating frames from `pool`.
    pub fn new(queue: TxQueue, pool: Arc<Mempool>) -> Self {
        TxBatch {
            queue,
            pool,
            pending: Vec::with_capacity(BURST),
            counters: TxCounters::default(),
        }
    }

    /// Queues a ready mbuf; flushes when a burst is full. Returns false
    /// (and drops the mbuf) when the backlog is full.
    pub fn push(&mut self, mbuf: Mbuf) -> bool {
        if self.pending.len() >= BACKLOG_LIMIT {
            self.counters.backlog_full += 1;
            return false;
        }
        self.pending.push(mbuf);
        if self.pending.len() >= BURST {
            self.flush();
        }
        true
    }

    /// Hands what is queued to the device; returns how many it took.
    pub fn flush(&mut self) -> usize {
        let mut sent = 0;
        while !self.pending.is_empty() {
            let n = self.queue.tx_burst(&mut self.pending);
            if n == 0 {
                break;
            }
            sent += n;
        }
        self.counters.sent += sent as u64;
        sent
    }

    /// Drops every frame still waiting (at shutdown), returning how many.
    pub fn discard_pending(&mut self) -> usize {
        let n = self.pending.len();
        self.pending.clear();
        n
    }

    /// The counters so far.
    pub fn counters(&self) -> &TxCounters {
        &self.counters
    }
}

impl FrameSink for TxBatch {
    fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match build_frame(&self.pool, len, fill) {
            Some(mbuf) => self.push(mbuf),
            None => {
                self.counters.no_buffer += 1;
                false
            }
        }
    }
}

/// An mbuf from `pool` holding a frame of `len` octets written by `fill`;
/// `None` when no mbuf is free or the frame does not fit one.
pub(crate) fn build_frame(
    pool: &Mempool,
    len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
) -> Option<Mbuf> {
    let len = u16::try_from(len).ok()?;
    let mut mbuf = Mbuf::alloc(pool).ok()?;
    fill(mbuf.append(len).ok()?);
    Some(mbuf)
}
