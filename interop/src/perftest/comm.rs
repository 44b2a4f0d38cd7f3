//! The comm channel (perftest's `user_comm` with `-R`): a queue pair of
//! its own, on its own connection, with one receive of [`DEST_LEN`]
//! octets outstanding at all times (`post_one_recv_wqe`, posted before
//! connecting or accepting and again as soon as a message is read) and
//! one Send at a time. Messages cross in lock step: the client sends,
//! then waits for the server's; the server waits for the client's, then
//! sends (`ctx_xchg_data_rdma`).

use std::time::Duration;

use uwarp_stack::mem::Access;
use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};

use super::completions::{checked, next, next_any};
use super::script::Message;
use super::wire::DEST_LEN;
use super::{PerftestError, Role};
use uwarp::CompletionQueue;
use uwarp::Device;
use uwarp::Error;
use uwarp::MemoryRegion;
use uwarp::{QpInit, QueuePair};

const WR_SEND: u64 = 1;
const WR_RECV: u64 = 2;

/// One side's comm channel.
pub(crate) struct Comm {
    qp: QueuePair,
    cq: CompletionQueue,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    role: Role,
    timeout: Duration,
    /// A receive that completed while this side waited for its Send.
    arrived: Option<WorkCompletion>,
}

impl Comm {
    /// The queue pair and buffers, with the receive posted.
    pub(crate) fn new(device: &Device, role: Role, timeout: Duration) -> Result<Self, Error> {
        let pd = device.alloc_pd()?;
        let cq = device.create_cq(8);
        let qp = device.create_qp(&pd, QpInit::new(&cq));
        let comm = Self {
            recv_mr: pd.alloc_mr(DEST_LEN, Access::LOCAL_WRITE)?,
            send_mr: pd.alloc_mr(DEST_LEN, Access::NONE)?,
            qp,
            cq,
            role,
            timeout,
            arrived: None,
        };
        comm.post_recv()?;
        Ok(comm)
    }

    /// The queue pair, to connect or accept.
    pub(crate) fn qp(&self) -> &QueuePair {
        &self.qp
    }

    fn post_recv(&self) -> Result<(), Error> {
        self.qp.post_recv(RecvWr {
            wr_id: WR_RECV,
            sgl: vec![self.recv_mr.whole()],
        })
    }

    /// Sends `mine` as `message` and returns the peer's `message`, in the
    /// role's order.
    pub(crate) fn exchange(
        &mut self,
        message: Message,
        mine: &[u8],
    ) -> Result<Vec<u8>, PerftestError> {
        match self.role {
            Role::Client => {
                self.send(mine)?;
                self.receive(message)
            }
            Role::Server => {
                let theirs = self.receive(message)?;
                self.send(mine)?;
                Ok(theirs)
            }
        }
    }

    fn send(&mut self, mine: &[u8]) -> Result<(), PerftestError> {
        self.send_mr
            .buffer()
            .write_at(0, mine)
            .map_err(Error::Mem)?;
        // In range: a message is at most DEST_LEN octets.
        let sge = self.send_mr.sge(0, mine.len() as u32);
        let wr = SendWr::new(WR_SEND, SendOp::Send, Payload::Sgl(vec![sge]));
        self.qp.post_send(wr)?;
        let waiting_for = "the Send of this side's message to complete";
        loop {
            let wc = next(&self.qp, &self.cq, self.timeout, waiting_for)?;
            match wc.opcode {
                WcOpcode::Send => return Ok(()),
                WcOpcode::Recv if self.arrived.is_none() => self.arrived = Some(wc),
                got => return Err(PerftestError::Unexpected { waiting_for, got }),
            }
        }
    }

    fn receive(&mut self, message: Message) -> Result<Vec<u8>, PerftestError> {
        let what = message.name();
        let wc = match self.arrived.take() {
            Some(wc) => wc,
            None => self.next_receive(what)?,
        };
        if wc.byte_len as usize != message.octets() {
            return Err(PerftestError::MessageLength {
                what,
                expected: message.octets(),
                got: wc.byte_len,
            });
        }
        let mut bytes = vec![0u8; message.octets()];
        self.recv_mr
            .buffer()
            .read_at(0, &mut bytes)
            .map_err(Error::Mem)?;
        self.post_recv()?;
        Ok(bytes)
    }

    fn next_receive(&self, what: &'static str) -> Result<WorkCompletion, PerftestError> {
        let waiting_for = "the peer's next comm channel message";
        let wc = next_any(&self.cq, self.timeout, waiting_for)?;
        if wc.opcode == WcOpcode::Recv && wc.status == WcStatus::LocalLengthError {
            return Err(PerftestError::MessageTooLong {
                what,
                limit: DEST_LEN,
            });
        }
        let wc = checked(&self.qp, wc, waiting_for)?;
        match wc.opcode {
            WcOpcode::Recv => Ok(wc),
            got => Err(PerftestError::Unexpected { waiting_for, got }),
        }
    }

    /// Disconnects and waits (a bounded while) for the close.
    pub(crate) fn close(&self) {
        close_qp(&self.qp);
    }
}

/// `rdma_disconnect`, then waits for the close to finish, resetting the
/// connection if the peer does not close its end in time.
pub(crate) fn close_qp(qp: &QueuePair) {
    qp.disconnect();
    if !qp.wait_closed(Duration::from_secs(5)) {
        qp.abort();
        qp.wait_closed(Duration::from_secs(1));
    }
}
