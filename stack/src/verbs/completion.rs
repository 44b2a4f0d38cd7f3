//! Work completions: what a completion queue returns for a finished work
//! request (RDMAC verbs section 8; libibverbs' `ibv_wc`).

use crate::wire::terminate::TermError;

/// How a work request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Done.
    Success,
    /// A receive was too small for the message, or a request was longer
    /// than the protocol can carry.
    LocalLengthError,
    /// The request is malformed for this queue pair (a Read with more than
    /// one sink element, say).
    LocalQpOperationError,
    /// A local scatter/gather element names memory the queue pair may not
    /// use (bad lkey, PD, bounds or access).
    LocalProtectionError,
    /// The queue pair went to the error state before the request finished.
    WrFlushError,
    /// The peer reported a protection error (its Terminate is attached).
    RemoteAccessError,
    /// The peer reported an operation or buffer error.
    RemoteOperationError,
    /// The peer's message was invalid here: a Send with Invalidate naming
    /// an STag this end may not invalidate.
    RemoteInvalidRequest,
    /// The stream failed under the request (CRC, framing, connection lost).
    FatalError,
}

/// The operation a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A Send (any variant) left this side.
    Send,
    /// An RDMA Write left this side.
    Write,
    /// An RDMA Read's data arrived.
    Read,
    /// A Send (any variant) arrived into a posted receive.
    Recv,
}

/// One completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The request's identifier.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Octets transferred (received Sends and completed Reads).
    pub byte_len: u32,
    /// For a received Send with Invalidate: the local STag it invalidated.
    pub invalidated_rkey: Option<u32>,
    /// For a received Send: whether it asked for a solicited event.
    pub solicited: bool,
    /// For errors caused by a Terminate, sent or received: its error.
    pub terminate: Option<TermError>,
    /// The number of the queue pair it belongs to (`ibv_wc.qp_num`): 0
    /// until the layer that knows the queue pair delivers it.
    pub qp_num: u32,
}

impl WorkCompletion {
    /// A completion with no extra information.
    pub fn new(wr_id: u64, opcode: WcOpcode, status: WcStatus) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            invalidated_rkey: None,
            solicited: false,
            terminate: None,
            qp_num: 0,
        }
    }
}
