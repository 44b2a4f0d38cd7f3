//! Work requests: what an application posts to a queue pair's send and
//! receive queues (RDMAC verbs section 7; libibverbs' `ibv_send_wr` and
//! `ibv_recv_wr`).

use super::WcOpcode;
use crate::mem::Stag;

/// One scatter/gather element: `length` octets at Tagged Offset `addr` of
/// the local region named by `lkey` (for a [`MemoryBuffer`] registered
/// whole, `addr` is `buffer.addr() + offset`).
///
/// [`MemoryBuffer`]: crate::mem::MemoryBuffer
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Tagged Offset of the first octet in the local region.
    pub addr: u64,
    /// Number of octets.
    pub length: u32,
    /// The local region's STag.
    pub lkey: Stag,
}

/// Where the data of a send work request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// A gather list of registered memory, read when the request is
    /// transmitted.
    Sgl(Vec<Sge>),
    /// Inline data, copied when the request is posted: the caller's memory
    /// needs no registration and may be reused at once.
    Inline(Vec<u8>),
}

impl Payload {
    /// Total length in octets (saturating at `u64::MAX`).
    pub fn len(&self) -> u64 {
        match self {
            Self::Sgl(sgl) => sgl.iter().map(|s| u64::from(s.length)).sum(),
            Self::Inline(data) => data.len() as u64,
        }
    }

    /// Whether the payload carries no octet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The operation of a send work request (RFC 5040 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// Send: an untagged message into the peer's next posted receive.
    Send,
    /// Send with Invalidate: a Send that also invalidates the peer's STag
    /// `invalidate` when it is delivered.
    SendWithInvalidate {
        /// The remote STag to invalidate.
        invalidate: u32,
    },
    /// RDMA Write of the payload at Tagged Offset `remote_addr` of the
    /// peer's region `rkey`.
    Write {
        /// Remote Tagged Offset.
        remote_addr: u64,
        /// Remote STag.
        rkey: u32,
    },
    /// RDMA Read of `payload.len()` octets from the peer's region `rkey` at
    /// `remote_addr` into the (single-element) local gather list, which
    /// acts as the Data Sink.
    Read {
        /// Remote Tagged Offset.
        remote_addr: u64,
        /// Remote STag.
        rkey: u32,
    },
}

impl SendOp {
    /// The opcode its completion reports.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::Send | Self::SendWithInvalidate { .. } => WcOpcode::Send,
            Self::Write { .. } => WcOpcode::Write,
            Self::Read { .. } => WcOpcode::Read,
        }
    }
}

/// A send queue work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// The data (Send, Write) or the sink (Read).
    pub payload: Payload,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Solicited event: the peer's completion raises an event on a
    /// completion queue armed for solicited completions (Send only).
    pub solicited: bool,
    /// Do not start until every earlier RDMA Read has completed.
    pub fence: bool,
}

impl SendWr {
    /// A signaled, unsolicited, unfenced request.
    pub fn new(wr_id: u64, op: SendOp, payload: Payload) -> Self {
        Self {
            wr_id,
            op,
            payload,
            signaled: true,
            solicited: false,
            fence: false,
        }
    }
}

/// A receive queue work request: where the next incoming Send lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// The scatter list, filled in order.
    pub sgl: Vec<Sge>,
}
