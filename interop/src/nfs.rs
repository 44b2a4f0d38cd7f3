//! RFC 8797 connection private data, the way NFS over RDMA uses it.
//!
//! The client (the RPC-over-RDMA requester) puts its RFC 8797 message in
//! the private data of its MPA Request: the largest Send it will transmit,
//! the largest it can receive, and the R flag (it supports remote
//! invalidation). The server (the responder) finds it in the
//! [`IncomingRequest`] and answers with its own in the MPA Reply. Both then
//! derive the same [`Agreement`] (RFC 8797 section 5.1.3 and 5.1.2):
//!
//! - the call threshold, client to server: the smaller of the client's
//!   Send Size and the server's Receive Size;
//! - the reply threshold, server to client: the smaller of the server's
//!   Send Size and the client's Receive Size;
//! - remote invalidation when both set R: the server may then answer with
//!   Send with Invalidate of one STag the call advertised, and the client
//!   sees it in its receive completion's `invalidated_rkey`. When either
//!   clears R, replies are plain Sends and the client invalidates locally.
//!
//! A peer that sends no such message has the RFC 8166 defaults: 1 KiB both
//! ways, no remote invalidation.
//!
//! Then the client makes a few calls over an RPC-over-RDMA version 1
//! transport header (RFC 8166 section 4: XID, version, credits, procedure,
//! read list, write list, reply chunk, in XDR), carrying a small made-up
//! RPC program (NULL, WRITE, READ, LIST), and honours the thresholds the
//! way RFC 8166 section 3.5 says:
//!
//! - a call that fits the call threshold goes inline (`RDMA_MSG`); a larger
//!   one is a Long Call: `RDMA_NOMSG` with the whole call in a
//!   position-zero read chunk, which the server RDMA-Reads;
//! - when a reply might not fit the reply threshold, the client provides a
//!   write chunk for READ's data (the server RDMA-Writes it there) or a
//!   reply chunk for LIST's whole reply (the server RDMA-Writes the reply
//!   there and sends `RDMA_NOMSG`);
//! - every Send is checked against the threshold by both ends.
//!
//! The `nfs_private_data` example runs it in one process (`cargo run -p
//! uwarp-interop --example nfs_private_data`), or as `-s` and `-c -a ADDR`
//! in two.

use std::error::Error as StdError;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use uwarp::{
    Access, CompletionQueue, ConnectParams, Device, IncomingRequest, Listener, LocalParams,
    MemoryRegion, Payload, ProtectionDomain, QpInit, QueuePair, RecvWr, SendOp, SendWr, WcOpcode,
    WcStatus, WorkCompletion,
};
use uwarp_stack::wire::rpcrdma::{self, RpcRdmaPrivateData};

/// Errors of this example, as text.
pub type Result<T> = std::result::Result<T, Box<dyn StdError + Send + Sync>>;

/// Receives each side keeps posted, and the credits it grants.
pub const CREDITS: u32 = 4;
/// RPC-over-RDMA version 1.
const RPCRDMA_VERSION: u32 = 1;
/// `rdma_proc`: the RPC message follows the header.
pub const RDMA_MSG: u32 = 0;
/// `rdma_proc`: the RPC message is in a chunk.
pub const RDMA_NOMSG: u32 = 1;
/// RPC message types.
const CALL: u32 = 0;
const REPLY: u32 = 1;
/// Octets of one LIST entry: an 8-octet cookie and a 24-octet name.
const ENTRY_LEN: usize = 32;

/// One side's RFC 8797 settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Put the RFC 8797 message in the private data at all.
    pub announce: bool,
    /// Set R: this side supports remote invalidation.
    pub remote_invalidation: bool,
    /// The largest Send this side transmits (1 KiB to 256 KiB, a multiple
    /// of 1 KiB).
    pub send_size: u32,
    /// The largest Send this side can receive: the size of each posted
    /// receive buffer.
    pub receive_size: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            announce: true,
            remote_invalidation: true,
            send_size: 4096,
            receive_size: 4096,
        }
    }
}

impl Settings {
    /// What this side announces (the defaults when it announces nothing).
    pub fn announced(&self) -> RpcRdmaPrivateData {
        if !self.announce {
            return RpcRdmaPrivateData::default();
        }
        RpcRdmaPrivateData {
            remote_invalidation: self.remote_invalidation,
            send_size: self.send_size,
            receive_size: self.receive_size,
            reserved: 0,
        }
    }

    /// The MPA private data: the eight octets of RFC 8797, or nothing.
    pub fn private_data(&self) -> Result<Vec<u8>> {
        if !self.announce {
            return Ok(Vec::new());
        }
        // The sizes must be what the peer may rely on: exact multiples.
        for size in [self.send_size, self.receive_size] {
            if size % rpcrdma::SIZE_UNIT != 0 {
                return Err(format!("{size} is not a multiple of 1 KiB").into());
            }
        }
        Ok(self.announced().to_bytes()?.to_vec())
    }
}

/// What both ends derive from the two messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// The largest inline call: client's Send Size, server's Receive Size.
    pub call_threshold: u32,
    /// The largest inline reply: server's Send Size, client's Receive Size.
    pub reply_threshold: u32,
    /// Both set R: replies may be Sends with Invalidate.
    pub remote_invalidation: bool,
}

impl Agreement {
    /// RFC 8797 sections 5.1.2 and 5.1.3.
    pub fn between(client: &RpcRdmaPrivateData, server: &RpcRdmaPrivateData) -> Self {
        Self {
            call_threshold: client.inline_threshold_to(server),
            reply_threshold: server.inline_threshold_to(client),
            remote_invalidation: client.remote_invalidation && server.remote_invalidation,
        }
    }
}

/// A call the client makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// No arguments, no results.
    Null,
    /// Sends `len` octets; the reply carries their count and checksum.
    Write {
        /// Octets to write.
        len: usize,
    },
    /// Asks for `len` octets; the data is eligible for a write chunk.
    Read {
        /// Octets to read.
        len: u32,
    },
    /// Asks for `entries` directory entries of 32 octets; a large reply
    /// needs a reply chunk.
    List {
        /// Entries to return.
        entries: u32,
    },
}

impl Call {
    fn procedure(self) -> u32 {
        match self {
            Self::Null => 0,
            Self::Write { .. } => 1,
            Self::Read { .. } => 2,
            Self::List { .. } => 3,
        }
    }
}

/// How one call travelled, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The transaction ID.
    pub xid: u32,
    /// The call.
    pub call: Call,
    /// Octets of the inline call Send.
    pub call_send_len: usize,
    /// Sent as a Long Call (position-zero read chunk).
    pub long_call: bool,
    /// A write chunk was provided for the reply's data.
    pub write_chunk: bool,
    /// A reply chunk was provided for the whole reply.
    pub reply_chunk: bool,
    /// The reply came back in the reply chunk (`RDMA_NOMSG`).
    pub reply_in_chunk: bool,
    /// Octets of the inline reply Send.
    pub reply_send_len: u32,
    /// The STags the call advertised.
    pub advertised: Vec<u32>,
    /// The STag the reply's Send with Invalidate invalidated.
    pub invalidated: Option<u32>,
}

/// How one reply travelled, as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRecord {
    /// The transaction ID.
    pub xid: u32,
    /// Octets of the inline call Send received.
    pub call_send_len: u32,
    /// The call came as a Long Call and was RDMA-Read.
    pub long_call: bool,
    /// READ data was RDMA-Written into the write chunk.
    pub wrote_data_chunk: bool,
    /// The reply was RDMA-Written into the reply chunk.
    pub wrote_reply_chunk: bool,
    /// Octets of the inline reply Send.
    pub reply_send_len: usize,
    /// The STag the reply invalidated with Send with Invalidate.
    pub invalidated: Option<u32>,
}

/// What the client ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOutcome {
    /// What the server's Reply private data announced (`None`: nothing, so
    /// the defaults apply).
    pub server_announced: Option<RpcRdmaPrivateData>,
    /// The agreement the client derived.
    pub agreement: Agreement,
    /// Each call, in order.
    pub calls: Vec<CallRecord>,
}

/// What the server ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOutcome {
    /// What the client's Request private data announced (`None`: nothing).
    pub client_announced: Option<RpcRdmaPrivateData>,
    /// The agreement the server derived.
    pub agreement: Agreement,
    /// Each reply, in order.
    pub replies: Vec<ReplyRecord>,
}

// ---------------------------------------------------------------------
// XDR and the RPC-over-RDMA version 1 header (RFC 8166 section 4.2).

/// An RDMA segment: `rdma_handle`, `rdma_length`, `rdma_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The STag.
    pub handle: u32,
    /// Octets.
    pub length: u32,
    /// Tagged Offset.
    pub offset: u64,
}

impl Segment {
    fn of(region: &MemoryRegion, length: usize) -> Self {
        Self {
            handle: region.rkey(),
            length: length as u32,
            offset: region.addr(),
        }
    }
}

/// The transport header of RFC 8166 section 4.2 (without `RDMA_MSGP`,
/// `RDMA_DONE` and `RDMA_ERROR`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// `rdma_xid`, equal to the RPC message's XID.
    pub xid: u32,
    /// `rdma_credit`.
    pub credit: u32,
    /// `rdma_proc`: [`RDMA_MSG`] or [`RDMA_NOMSG`].
    pub proc_: u32,
    /// The read list: (position, segment).
    pub reads: Vec<(u32, Segment)>,
    /// The write list: chunks of segments.
    pub writes: Vec<Vec<Segment>>,
    /// The reply chunk.
    pub reply: Option<Vec<Segment>>,
}

#[derive(Default)]
struct Xdr(Vec<u8>);

impl Xdr {
    fn u32(&mut self, value: u32) -> &mut Self {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn segment(&mut self, s: &Segment) -> &mut Self {
        self.u32(s.handle).u32(s.length).u64(s.offset)
    }
    fn segments(&mut self, chunk: &[Segment]) -> &mut Self {
        self.u32(chunk.len() as u32);
        chunk.iter().for_each(|s| {
            self.segment(s);
        });
        self
    }
    fn fixed(&mut self, data: &[u8]) -> &mut Self {
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }
    fn opaque(&mut self, data: &[u8]) -> &mut Self {
        self.u32(data.len() as u32).fixed(data)
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.data.len());
        let end = end.ok_or("XDR: truncated")?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into()?))
    }
    fn segment(&mut self) -> Result<Segment> {
        Ok(Segment {
            handle: self.u32()?,
            length: self.u32()?,
            offset: self.u64()?,
        })
    }
    fn segments(&mut self) -> Result<Vec<Segment>> {
        let count = self.u32()?;
        if count as usize > self.data.len() / 16 {
            return Err("XDR: too many segments".into());
        }
        (0..count).map(|_| self.segment()).collect()
    }
    fn fixed(&mut self, len: usize) -> Result<&'a [u8]> {
        let data = self.take(len)?;
        self.take(len.next_multiple_of(4) - len)?;
        Ok(data)
    }
    fn opaque(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.fixed(len)
    }
    fn rest(&mut self) -> &'a [u8] {
        let out = &self.data[self.at..];
        self.at = self.data.len();
        out
    }
    fn present(&mut self) -> Result<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("XDR: bad optional discriminant {other}").into()),
        }
    }
}

impl Header {
    /// The XDR encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut x = Xdr::default();
        x.u32(self.xid)
            .u32(RPCRDMA_VERSION)
            .u32(self.credit)
            .u32(self.proc_);
        for (position, segment) in &self.reads {
            x.u32(1).u32(*position).segment(segment);
        }
        x.u32(0);
        for chunk in &self.writes {
            x.u32(1).segments(chunk);
        }
        x.u32(0);
        match &self.reply {
            Some(chunk) => x.u32(1).segments(chunk),
            None => x.u32(0),
        };
        x.0
    }

    /// Parses a header; returns it and the octets after it.
    pub fn decode(data: &[u8]) -> Result<(Self, &[u8])> {
        let mut r = Reader::new(data);
        let xid = r.u32()?;
        if r.u32()? != RPCRDMA_VERSION {
            return Err("not RPC-over-RDMA version 1".into());
        }
        let credit = r.u32()?;
        let proc_ = r.u32()?;
        if proc_ != RDMA_MSG && proc_ != RDMA_NOMSG {
            return Err(format!("unsupported rdma_proc {proc_}").into());
        }
        let mut header = Self {
            xid,
            credit,
            proc_,
            ..Self::default()
        };
        while r.present()? {
            let position = r.u32()?;
            header.reads.push((position, r.segment()?));
        }
        while r.present()? {
            header.writes.push(r.segments()?);
        }
        if r.present()? {
            header.reply = Some(r.segments()?);
        }
        Ok((header, r.rest()))
    }

    /// Every STag the header names, in order.
    pub fn handles(&self) -> Vec<u32> {
        let reads = self.reads.iter().map(|(_, s)| s.handle);
        let writes = self.writes.iter().flatten().map(|s| s.handle);
        let reply = self.reply.iter().flatten().map(|s| s.handle);
        reads.chain(writes).chain(reply).collect()
    }
}

/// The data READ returns: a pattern seeded by the XID.
fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize).wrapping_mul(31).wrapping_add(i * 7) as u8)
        .collect()
}

/// FNV-1a, the checksum WRITE replies with.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn list_entries(entries: u32) -> Vec<u8> {
    let mut x = Xdr::default();
    x.u32(entries);
    for i in 0..entries {
        let mut name = format!("entry-{i:018}").into_bytes();
        name.resize(ENTRY_LEN - 8, b' ');
        x.u64(u64::from(i)).fixed(&name);
    }
    x.0
}

/// The RPC call message (a simplified ONC RPC call: XID, CALL,
/// procedure, arguments).
fn call_message(xid: u32, call: Call) -> Vec<u8> {
    let mut x = Xdr::default();
    x.u32(xid).u32(CALL).u32(call.procedure());
    match call {
        Call::Null => {}
        Call::Write { len } => {
            x.opaque(&pattern(xid, len));
        }
        Call::Read { len } => {
            x.u32(len);
        }
        Call::List { entries } => {
            x.u32(entries);
        }
    }
    x.0
}

/// Octets of the reply message for `call` when all of it is in the XDR
/// stream (READ's data included).
fn reply_len(call: Call) -> usize {
    let results = match call {
        Call::Null => 0,
        Call::Write { .. } => 4 + 8,
        Call::Read { len } => 4 + (len as usize).next_multiple_of(4),
        Call::List { entries } => 4 + entries as usize * ENTRY_LEN,
    };
    12 + results
}

// ---------------------------------------------------------------------
// The queue pair side shared by both ends.

/// A connected end: queue pair, completion queues, receive and send
/// buffers.
struct End {
    pd: ProtectionDomain,
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    receive_size: usize,
    next_wr: u64,
    timeout: Duration,
}

impl End {
    /// Creates the queue pair and posts [`CREDITS`] receives of
    /// `settings.receive_size` octets, before the connection exists.
    fn new(device: &Device, settings: &Settings, timeout: Duration) -> Result<Self> {
        let pd = device.alloc_pd()?;
        let send_cq = device.create_cq(64);
        let recv_cq = device.create_cq(64);
        let init = QpInit {
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            ..QpInit::new(&send_cq)
        };
        let qp = device.create_qp(&pd, init);
        let receive_size = settings.announced().receive_size as usize;
        let recv_mr = pd.alloc_mr(receive_size * CREDITS as usize, Access::LOCAL_WRITE)?;
        let send_mr = pd.alloc_mr(settings.announced().send_size as usize, Access::NONE)?;
        let end = Self {
            pd,
            qp,
            send_cq,
            recv_cq,
            recv_mr,
            send_mr,
            receive_size,
            next_wr: 100,
            timeout,
        };
        for slot in 0..u64::from(CREDITS) {
            end.post_recv(slot)?;
        }
        Ok(end)
    }

    fn post_recv(&self, slot: u64) -> Result<()> {
        let sge = self
            .recv_mr
            .sge(slot as usize * self.receive_size, self.receive_size as u32);
        self.qp.post_recv(RecvWr {
            wr_id: slot,
            sgl: vec![sge],
        })?;
        Ok(())
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    /// Waits for the send queue completion of `wr_id`.
    fn wait_send(&self, wr_id: u64) -> Result<WorkCompletion> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let wc = self
                .send_cq
                .poll_blocking(left)
                .ok_or("timed out waiting for a send completion")?;
            if wc.status != WcStatus::Success {
                return Err(format!("send queue completion failed: {wc:?}").into());
            }
            if wc.wr_id == wr_id {
                return Ok(wc);
            }
        }
    }

    /// Waits for the next message; returns its completion and a copy of
    /// its octets, and re-posts the receive. `None` when the connection
    /// closed.
    fn wait_recv(&self) -> Result<Option<(WorkCompletion, Vec<u8>)>> {
        let wc = self
            .recv_cq
            .poll_blocking(self.timeout)
            .ok_or("timed out waiting for a message")?;
        match wc.status {
            WcStatus::Success => {}
            WcStatus::WrFlushError => return Ok(None),
            _ => return Err(format!("receive failed: {wc:?}").into()),
        }
        let mut data = vec![0u8; wc.byte_len as usize];
        self.recv_mr
            .buffer()
            .read_at(wc.wr_id as usize * self.receive_size, &mut data)?;
        self.post_recv(wc.wr_id)?;
        Ok(Some((wc, data)))
    }

    /// Sends `message` (header and inline part) from the send buffer,
    /// with Invalidate of `invalidate` if given; waits for its completion.
    fn send(&mut self, message: &[u8], invalidate: Option<u32>, threshold: u32) -> Result<()> {
        if message.len() > threshold as usize {
            return Err(format!(
                "a {}-octet Send exceeds the {threshold}-octet inline threshold",
                message.len()
            )
            .into());
        }
        self.send_mr.buffer().write_at(0, message)?;
        let op = match invalidate {
            Some(stag) => SendOp::SendWithInvalidate { invalidate: stag },
            None => SendOp::Send,
        };
        let wr_id = self.wr_id();
        let sge = self.send_mr.sge(0, message.len() as u32);
        self.qp
            .post_send(SendWr::new(wr_id, op, Payload::Sgl(vec![sge])))?;
        self.wait_send(wr_id)?;
        Ok(())
    }

    /// RDMA-Reads `segment` into fresh local memory.
    fn rdma_read(&mut self, segment: &Segment) -> Result<Vec<u8>> {
        let sink = self
            .pd
            .alloc_mr(segment.length as usize, Access::LOCAL_WRITE)?;
        let wr_id = self.wr_id();
        let op = SendOp::Read {
            remote_addr: segment.offset,
            rkey: segment.handle,
        };
        self.qp
            .post_send(SendWr::new(wr_id, op, Payload::Sgl(vec![sink.whole()])))?;
        let wc = self.wait_send(wr_id)?;
        if wc.opcode != WcOpcode::Read {
            return Err(format!("expected a Read completion, got {wc:?}").into());
        }
        let mut data = vec![0u8; segment.length as usize];
        sink.buffer().read_at(0, &mut data)?;
        Ok(data)
    }

    /// RDMA-Writes `data` at `segment`, which must be large enough.
    fn rdma_write(&mut self, segment: &Segment, data: &[u8]) -> Result<()> {
        if data.len() > segment.length as usize {
            return Err("the chunk is too small".into());
        }
        let source = self.pd.alloc_mr(data.len().max(1), Access::NONE)?;
        source.buffer().write_at(0, data)?;
        let wr_id = self.wr_id();
        let op = SendOp::Write {
            remote_addr: segment.offset,
            rkey: segment.handle,
        };
        let sge = source.sge(0, data.len() as u32);
        self.qp
            .post_send(SendWr::new(wr_id, op, Payload::Sgl(vec![sge])))?;
        self.wait_send(wr_id)?;
        Ok(())
    }

    fn close(&self) {
        self.qp.disconnect();
        if !self.qp.wait_closed(self.timeout) {
            self.qp.abort();
        }
    }
}

/// Reads the peer's RFC 8797 message from its private data: `Some` when
/// one is there, `None` (the defaults apply) when not. A malformed one
/// counts as absent, as RFC 8797 section 5.2 asks.
pub fn peer_announced(private_data: &[u8]) -> Option<RpcRdmaPrivateData> {
    RpcRdmaPrivateData::find(private_data).and_then(|found| found.ok())
}

// ---------------------------------------------------------------------
// The client.

/// Connects to `addr` with `settings` in the Request's private data and
/// makes `calls`, one at a time.
pub fn run_client(
    device: &Device,
    addr: SocketAddr,
    settings: &Settings,
    calls: &[Call],
    timeout: Duration,
) -> Result<ClientOutcome> {
    let mut end = End::new(device, settings, timeout)?;
    let params = ConnectParams {
        mpa: LocalParams {
            private_data: settings.private_data()?,
            ..LocalParams::default()
        },
        timeout,
        ..ConnectParams::default()
    };
    let connection = device.connect(addr, &end.qp, params)?;
    let server_announced = peer_announced(&connection.private_data);
    let agreement =
        Agreement::between(&settings.announced(), &server_announced.unwrap_or_default());
    let mut records = Vec::new();
    let result = (|| {
        for (xid, &call) in (1u32..).zip(calls) {
            records.push(client_call(&mut end, &agreement, xid, call)?);
        }
        Ok::<_, Box<dyn StdError + Send + Sync>>(())
    })();
    end.close();
    result?;
    Ok(ClientOutcome {
        server_announced,
        agreement,
        calls: records,
    })
}

fn client_call(end: &mut End, agreement: &Agreement, xid: u32, call: Call) -> Result<CallRecord> {
    let message = call_message(xid, call);
    let mut header = Header {
        xid,
        credit: CREDITS,
        proc_: RDMA_MSG,
        ..Header::default()
    };
    // Chunks stay registered until the reply is in.
    let mut chunks: Vec<MemoryRegion> = Vec::new();

    // The reply: a write chunk for READ's data, a reply chunk for any
    // other reply that may not fit inline.
    let empty_header_len = header.encode().len();
    let reply_inline = empty_header_len + reply_len(call);
    let (mut write_chunk, mut reply_chunk) = (false, false);
    if reply_inline > agreement.reply_threshold as usize {
        match call {
            Call::Read { len } => {
                let sink = end
                    .pd
                    .alloc_mr(len as usize, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
                header.writes.push(vec![Segment::of(&sink, len as usize)]);
                chunks.push(sink);
                write_chunk = true;
            }
            _ => {
                let sink = end
                    .pd
                    .alloc_mr(reply_len(call), Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
                header.reply = Some(vec![Segment::of(&sink, reply_len(call))]);
                chunks.push(sink);
                reply_chunk = true;
            }
        }
    }

    // The call: inline when header and message fit, else a Long Call.
    let mut send = header.encode();
    let long_call = send.len() + message.len() > agreement.call_threshold as usize;
    if long_call {
        let source = end.pd.alloc_mr(message.len(), Access::REMOTE_READ)?;
        source.buffer().write_at(0, &message)?;
        header.proc_ = RDMA_NOMSG;
        header
            .reads
            .insert(0, (0, Segment::of(&source, message.len())));
        chunks.insert(0, source);
        send = header.encode();
    } else {
        send.extend_from_slice(&message);
    }
    let advertised = header.handles();
    end.send(&send, None, agreement.call_threshold)?;

    let (wc, reply) = end.wait_recv()?.ok_or("the server closed the connection")?;
    if wc.byte_len > agreement.reply_threshold {
        return Err("the reply exceeds the reply threshold".into());
    }
    if let Some(stag) = wc.invalidated_rkey {
        if !agreement.remote_invalidation {
            return Err("Send with Invalidate without agreement".into());
        }
        // RFC 8797 section 5.1.2: only an STag of this XID.
        if !advertised.contains(&stag) {
            return Err(format!("the reply invalidated {stag:#x}, not ours").into());
        }
    }
    let (reply_header, inline) = Header::decode(&reply)?;
    if reply_header.xid != xid {
        return Err("the reply's XID is not the call's".into());
    }
    let reply_in_chunk = reply_header.proc_ == RDMA_NOMSG;
    let reply_message = if reply_in_chunk {
        let returned = reply_header
            .reply
            .as_ref()
            .and_then(|chunk| chunk.first())
            .ok_or("RDMA_NOMSG reply without a reply chunk")?;
        let sink = chunks.last().ok_or("no reply chunk was offered")?;
        let mut data = vec![0u8; returned.length as usize];
        sink.buffer().read_at(0, &mut data)?;
        data
    } else {
        inline.to_vec()
    };
    let data_chunk = if write_chunk {
        let returned = reply_header
            .writes
            .first()
            .and_then(|chunk| chunk.first())
            .ok_or("the reply does not return the write chunk")?;
        let sink = chunks.last().ok_or("no write chunk was offered")?;
        let mut data = vec![0u8; returned.length as usize];
        sink.buffer().read_at(0, &mut data)?;
        Some(data)
    } else {
        None
    };
    check_reply(xid, call, &reply_message, data_chunk.as_deref())?;
    // Chunks not invalidated remotely are invalidated here, by
    // deregistration.
    drop(chunks);
    Ok(CallRecord {
        xid,
        call,
        call_send_len: send.len(),
        long_call,
        write_chunk,
        reply_chunk,
        reply_in_chunk,
        reply_send_len: wc.byte_len,
        advertised,
        invalidated: wc.invalidated_rkey,
    })
}

/// Checks the results of `call` in `message` (READ's data from `data`
/// when it came in a write chunk).
fn check_reply(xid: u32, call: Call, message: &[u8], data: Option<&[u8]>) -> Result<()> {
    let mut r = Reader::new(message);
    if r.u32()? != xid || r.u32()? != REPLY || r.u32()? != 0 {
        return Err("a malformed or failed reply".into());
    }
    match call {
        Call::Null => {}
        Call::Write { len } => {
            let count = r.u32()? as usize;
            let sum = r.u64()?;
            if count != len || sum != checksum(&pattern(xid, len)) {
                return Err("WRITE: the server got other data".into());
            }
        }
        Call::Read { len } => {
            let count = r.u32()?;
            let got = match data {
                Some(data) => data,
                None => r.opaque()?,
            };
            if count != len || got != pattern(xid, len as usize).as_slice() {
                return Err("READ: wrong data".into());
            }
        }
        Call::List { entries } => {
            if message[12..] != list_entries(entries)[..] {
                return Err("LIST: wrong entries".into());
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------
// The server.

/// Accepts the next request on `listener`, answering its RFC 8797
/// message with `settings`, and serves calls until the client
/// disconnects.
pub fn run_server(
    device: &Device,
    listener: &Listener,
    settings: &Settings,
    timeout: Duration,
) -> Result<ServerOutcome> {
    let request: IncomingRequest = listener.get_request(timeout)?;
    let client_announced = peer_announced(request.private_data());
    let agreement =
        Agreement::between(&client_announced.unwrap_or_default(), &settings.announced());
    let mut end = End::new(device, settings, timeout)?;
    let params = LocalParams {
        private_data: settings.private_data()?,
        ..LocalParams::default()
    };
    request.accept(&end.qp, params)?;
    let mut replies = Vec::new();
    let result = (|| {
        while let Some((wc, call)) = end.wait_recv()? {
            replies.push(serve_call(&mut end, &agreement, wc.byte_len, &call)?);
        }
        Ok::<_, Box<dyn StdError + Send + Sync>>(())
    })();
    end.close();
    result?;
    Ok(ServerOutcome {
        client_announced,
        agreement,
        replies,
    })
}

fn serve_call(end: &mut End, agreement: &Agreement, len: u32, call: &[u8]) -> Result<ReplyRecord> {
    if len > agreement.call_threshold {
        return Err("the call exceeds the call threshold".into());
    }
    let (header, inline) = Header::decode(call)?;
    let long_call = header.proc_ == RDMA_NOMSG;
    let message = if long_call {
        let (position, segment) = header
            .reads
            .first()
            .ok_or("RDMA_NOMSG call without a read chunk")?;
        if *position != 0 {
            return Err("only position-zero read chunks are supported".into());
        }
        end.rdma_read(segment)?
    } else {
        inline.to_vec()
    };

    // Run the procedure.
    let mut r = Reader::new(&message);
    let xid = r.u32()?;
    if xid != header.xid || r.u32()? != CALL {
        return Err("a malformed call".into());
    }
    let procedure = r.u32()?;
    let mut results = Xdr::default();
    results.u32(xid).u32(REPLY).u32(0);
    let mut reply_header = Header {
        xid,
        credit: CREDITS,
        proc_: RDMA_MSG,
        ..Header::default()
    };
    let mut wrote_data_chunk = false;
    match procedure {
        0 => {}
        1 => {
            let data = r.opaque()?;
            results.u32(data.len() as u32).u64(checksum(data));
        }
        2 => {
            let count = r.u32()?;
            let data = pattern(xid, count as usize);
            results.u32(count);
            match header.writes.first().and_then(|chunk| chunk.first()) {
                Some(segment) => {
                    // The data goes by RDMA Write; the returned write list
                    // says how much of the chunk was used.
                    end.rdma_write(segment, &data)?;
                    reply_header.writes = vec![vec![Segment {
                        length: count,
                        ..*segment
                    }]];
                    wrote_data_chunk = true;
                }
                None => {
                    results.opaque(&data);
                }
            }
        }
        3 => {
            let entries = r.u32()?;
            results.fixed(&list_entries(entries));
        }
        other => return Err(format!("unknown procedure {other}").into()),
    }

    // The reply: inline if it fits, else in the reply chunk.
    let mut send = reply_header.encode();
    let mut wrote_reply_chunk = false;
    if send.len() + results.0.len() > agreement.reply_threshold as usize {
        let segment = header
            .reply
            .as_ref()
            .and_then(|chunk| chunk.first())
            .ok_or("the reply does not fit inline and there is no reply chunk")?;
        end.rdma_write(segment, &results.0)?;
        reply_header.proc_ = RDMA_NOMSG;
        reply_header.reply = Some(vec![Segment {
            length: results.0.len() as u32,
            ..*segment
        }]);
        send = reply_header.encode();
        wrote_reply_chunk = true;
    } else {
        send.extend_from_slice(&results.0);
    }

    // RFC 8797 section 5.1.2: Send with Invalidate of one STag of this XID
    // when both sides set R.
    let invalidate = agreement
        .remote_invalidation
        .then(|| header.handles().first().copied())
        .flatten();
    end.send(&send, invalidate, agreement.reply_threshold)?;
    Ok(ReplyRecord {
        xid,
        call_send_len: len,
        long_call,
        wrote_data_chunk,
        wrote_reply_chunk,
        reply_send_len: send.len(),
        invalidated: invalidate,
    })
}

/// The calls the example makes: one of each kind of transfer.
pub fn demo_calls() -> Vec<Call> {
    vec![
        // Inline call, inline reply, nothing to invalidate.
        Call::Null,
        // A Long Call: the server RDMA-Reads it.
        Call::Write { len: 6000 },
        // A small READ fits inline; a large one uses a write chunk.
        Call::Read { len: 200 },
        Call::Read { len: 64 * 1024 },
        // A large LIST reply comes back through the reply chunk.
        Call::List { entries: 300 },
    ]
}

/// The agreement in words, as the example prints it.
impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call threshold {} octets, reply threshold {} octets, remote invalidation {}",
            self.call_threshold,
            self.reply_threshold,
            if self.remote_invalidation {
                "yes"
            } else {
                "no"
            }
        )
    }
}
