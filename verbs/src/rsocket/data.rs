//! The stream data path of rdma-core's rsockets in iWARP mode
//! (`RS_OPT_MSG_SEND`): data goes by RDMA Write into the buffer the peer
//! offered, followed by a 4-octet inline Send announcing it; credits and
//! new buffers go back the same way (`rs_send_credits`). The functions
//! follow `rs_poll_cq`, `rs_can_send`, `rs_give_credits`, `rsend`,
//! `rrecv` and `rshutdown`.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use uwarp::{Payload, SendOp, SendWr, WcStatus, WorkCompletion};

use super::iomap;
use super::stream::{state, Conn, Inner, Rsocket, SNDLOWAT, WR_ID_MSG_SEND, WR_ID_RECV};
use super::wire::{self, RemoteSge, IOMAP_SIZE, MSG_SIZE, SGE_SIZE, SGL_SIZE};
use crate::export::errno_of;

/// `RS_MAX_TRANSFER`: the largest transfer.
///
/// rdma-core's `rsend` starts a large send with a transfer of
/// `RS_OLAP_START_SIZE` (2 KiB) and doubles it up to this, so that a NIC
/// moves the first octets while the next ones are copied into the send
/// buffer. Here every transfer is as large as this from the start: the
/// socket transport writes each posted Write and its announcing Send in
/// one system call, and on loopback a TCP segment costs the peer's
/// receive path too, so five small transfers cost more than the overlap
/// gains (rstream's 64 KiB messages: 13 against 30 Gbit/s). The sizes of
/// transfers are the sender's own affair; the peer sees the same
/// messages.
const MAX_TRANSFER: u32 = 65536;
/// How long one wait sleeps at most before it looks again (rdma-core's
/// `wake_up_interval` is 500 ms; a shorter one bounds a wait that another
/// thread's drain of the channel robbed of its event).
const WAKE_UP_INTERVAL: Duration = Duration::from_millis(100);

/// A test of what an operation waits for (`rs_conn_have_rdata`, ...).
pub type Test = fn(&Inner) -> bool;

/// Why a socket without a connection cannot move data: `EAGAIN` while it
/// connects (rdma-core's `rrecv` and `rsend` on an `rs_opening` socket),
/// else `ENOTCONN`.
pub fn not_connected(inner: &Inner) -> i32 {
    if inner.state == state::OPENING {
        libc::EAGAIN
    } else {
        libc::ENOTCONN
    }
}

/// `rs_conn_have_rdata`: data to read, or nothing more will come.
pub fn have_data_or_eof(inner: &Inner) -> bool {
    inner.state & state::READABLE == 0 || inner.conn.as_ref().is_some_and(|c| !c.rmsg.is_empty())
}

/// `rs_conn_can_send`: room to send, or sending has ended.
pub fn can_send_or_closed(inner: &Inner) -> bool {
    inner.state & state::WRITABLE == 0 || inner.conn.as_ref().is_some_and(can_send)
}

/// `rs_conn_all_sends_done`.
pub fn all_sends_done(inner: &Inner) -> bool {
    inner.state & state::CONNECTED == 0
        || inner.conn.as_ref().is_none_or(|c| {
            c.ctrl_max_seqno.wrapping_sub(c.ctrl_seqno) + c.sqe_avail == c.sizes.sq_size
        })
}

/// `rs_conn_can_send_ctrl`.
fn can_send_ctrl_or_closed(inner: &Inner) -> bool {
    inner.state & state::CONNECTED == 0
        || inner
            .conn
            .as_ref()
            .is_some_and(|c| c.ctrl_seqno != c.ctrl_max_seqno)
}

/// `rs_can_send` in iWARP mode: two send queue entries (Write and
/// Send), [`SNDLOWAT`] octets of send buffer, a credit, and room in the
/// peer's current buffer.
pub fn can_send(conn: &Conn) -> bool {
    conn.sqe_avail >= 2
        && conn.sbuf_bytes_avail >= SNDLOWAT
        && conn.sseq_no != conn.sseq_comp
        && conn.target_entry(conn.target_sge).length != 0
}

impl Conn {
    /// Posts `wr`, mapping uwarp's refusal to `errno`.
    pub fn post(&self, wr: SendWr) -> Result<(), i32> {
        self.qp.post_send(wr).map_err(|e| errno_of(&e))
    }

    /// `rs_post_msg` in iWARP mode: the message alone, as an inline Send.
    pub(super) fn post_msg(&self, msg: u32) -> Result<(), i32> {
        let payload = Payload::Inline(msg.to_ne_bytes().to_vec());
        self.post(SendWr::new(u64::from(msg), SendOp::Send, payload))
    }

    /// `rs_post_write_msg` in iWARP mode: the RDMA Write of `payload` at
    /// `remote`, then `msg` as an inline Send (its completion carries the
    /// operation only, flagged as the message's).
    pub fn post_write_msg(
        &self,
        payload: Payload,
        msg: u32,
        remote: (u64, u32),
    ) -> Result<(), i32> {
        let write = SendOp::Write {
            remote_addr: remote.0,
            rkey: remote.1,
        };
        // The Write and its announcement go out together (one write on
        // the socket transport).
        uwarp::post_together(|| {
            self.post(SendWr::new(u64::from(msg), write, payload))?;
            let announce = u64::from(wire::message(wire::op_of(msg), 0)) | WR_ID_MSG_SEND;
            let payload = Payload::Inline(msg.to_ne_bytes().to_vec());
            self.post(SendWr::new(announce, SendOp::Send, payload))
        })
    }

    /// `rs_give_credits` in iWARP mode (two control slots free).
    fn should_give_credits(&self, connected: bool) -> bool {
        let half = self.sizes.rbuf_size >> 1;
        let due = (self.rseq_no.wrapping_sub(self.rseq_comp) as i16) >= 0;
        let two_ctrl = (self
            .ctrl_seqno
            .wrapping_add(1)
            .wrapping_sub(self.ctrl_max_seqno) as i32)
            < 0;
        (self.rbuf_bytes_avail >= half || due) && two_ctrl && connected
    }

    /// `rs_send_credits`: grants credits up to `rseq_no + rq_size`, with
    /// the next half of the receive buffer written into the peer's target
    /// SGL when it is free.
    fn send_credits(&mut self) {
        let half = self.sizes.rbuf_size >> 1;
        self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
        self.rseq_comp = self.rseq_no.wrapping_add((self.sizes.rq_size >> 1) as u16);
        let credits = u32::from(self.rseq_no.wrapping_add(self.sizes.rq_size as u16));
        let msg = wire::message(wire::OP_SGL, credits);
        if self.rbuf_bytes_avail >= half {
            self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
            let sge = RemoteSge {
                addr: self.rbuf.addr() + u64::from(self.rbuf_free_offset),
                key: self.rbuf.rkey(),
                length: half,
            };
            let slot = self.remote_sgl.addr + u64::from(self.remote_sge) * SGE_SIZE as u64;
            let payload = Payload::Inline(sge.to_host_bytes().to_vec());
            let _ = self.post_write_msg(payload, msg, (slot, self.remote_sgl.key));
            self.rbuf_bytes_avail -= half;
            self.rbuf_free_offset += half;
            if self.rbuf_free_offset >= self.sizes.rbuf_size {
                self.rbuf_free_offset = 0;
            }
            self.remote_sge += 1;
            if self.remote_sge == self.remote_sgl.length {
                self.remote_sge = 0;
            }
        } else {
            let _ = self.post_msg(msg);
        }
    }

    /// The 4-octet message a receive completion brought.
    fn received_message(&self, wr_id: u64) -> u32 {
        let index = (wr_id & 0xFFFF_FFFF) as usize;
        let mut bytes = [0; MSG_SIZE];
        let offset = self.sizes.rbuf_size as usize + index * MSG_SIZE;
        let _ = self.rbuf.buffer().read_at(offset, &mut bytes);
        u32::from_ne_bytes(bytes)
    }
}

/// `rs_update_credits`.
fn update_credits(inner: &mut Inner) {
    let connected = inner.state & state::CONNECTED != 0;
    if let Some(conn) = inner.conn.as_mut() {
        if conn.should_give_credits(connected) {
            conn.send_credits();
        }
    }
}

/// `rs_poll_cq`: takes every completion, updating the counters and the
/// state, and posts a receive for each message that arrived.
fn poll_cq(inner: &mut Inner) -> Result<(), i32> {
    let Some(conn) = inner.conn.as_mut() else {
        return Ok(());
    };
    let mut received = 0;
    while let Some(wc) = conn.cq.poll_one() {
        if wc.wr_id & WR_ID_RECV != 0 {
            if wc.status != WcStatus::Success {
                // A flushed receive: the connection is gone (a peer that
                // closed without a disconnect message, or died).
                if inner.state & state::CONNECTED != 0 {
                    inner.state = state::DISCONNECTED;
                }
                continue;
            }
            received += 1;
            take_message(&mut inner.state, conn, conn.received_message(wc.wr_id));
        } else {
            completed_send(&mut inner.state, &mut inner.err, conn, &wc);
        }
    }
    if inner.state & state::CONNECTED != 0 {
        for _ in 0..received {
            if let Err(errno) = conn.post_recv() {
                inner.state = state::ERROR;
                inner.err = errno;
                return Err(errno);
            }
        }
    }
    Ok(())
}

/// What an arrived message does (the receive half of `rs_poll_cq`).
fn take_message(state_bits: &mut u32, conn: &mut Conn, msg: u32) {
    match wire::op_of(msg) {
        wire::OP_SGL => conn.sseq_comp = wire::data_of(msg) as u16,
        wire::OP_IOMAP_SGL | wire::OP_WRITE => {}
        wire::OP_CTRL => match wire::data_of(msg) {
            wire::CTRL_DISCONNECT => *state_bits = state::DISCONNECTED,
            wire::CTRL_SHUTDOWN if *state_bits & state::WRITABLE != 0 => {
                *state_bits &= !state::READABLE
            }
            wire::CTRL_SHUTDOWN => *state_bits = state::DISCONNECTED,
            _ => {}
        },
        op => conn.rmsg.push_back((op, wire::data_of(msg))),
    }
}

/// What a send completion gives back (the send half of `rs_poll_cq`).
fn completed_send(state_bits: &mut u32, err: &mut i32, conn: &mut Conn, wc: &WorkCompletion) {
    let msg = (wc.wr_id & 0xFFFF_FFFF) as u32;
    match wire::op_of(msg) {
        wire::OP_SGL => conn.ctrl_max_seqno = conn.ctrl_max_seqno.wrapping_add(1),
        wire::OP_CTRL => {
            conn.ctrl_max_seqno = conn.ctrl_max_seqno.wrapping_add(1);
            if wire::data_of(msg) == wire::CTRL_DISCONNECT {
                *state_bits = state::DISCONNECTED;
            }
        }
        wire::OP_IOMAP_SGL => {
            // The Write's entry counted against the send buffer (as
            // rdma-core's); the Send after it carried the message alone.
            conn.sqe_avail += 1;
            if wc.wr_id & WR_ID_MSG_SEND == 0 {
                conn.sbuf_bytes_avail += IOMAP_SIZE as u32;
            }
        }
        _ => {
            conn.sqe_avail += 1;
            conn.sbuf_bytes_avail += wire::data_of(msg);
        }
    }
    if wc.status != WcStatus::Success && *state_bits & state::CONNECTED != 0 {
        *state_bits = state::ERROR;
        *err = libc::EIO;
    }
}

/// `rs_process_cq` and `rs_get_comp`: makes progress until `test` holds;
/// `EAGAIN` at once if `nonblock` and it does not, else waits on the
/// socket's channel (`EINTR` when a signal interrupts the wait). Answers
/// the state locked again.
pub fn progress<'a>(
    socket: &'a Rsocket,
    mut inner: MutexGuard<'a, Inner>,
    nonblock: bool,
    test: Test,
) -> Result<MutexGuard<'a, Inner>, (MutexGuard<'a, Inner>, i32)> {
    loop {
        update_credits(&mut inner);
        if let Err(errno) = poll_cq(&mut inner) {
            return Err((inner, errno));
        }
        if test(&inner) {
            update_credits(&mut inner);
            return Ok(inner);
        }
        if nonblock {
            update_credits(&mut inner);
            return Err((inner, libc::EAGAIN));
        }
        let Some(conn) = inner.conn.as_ref() else {
            return Err((inner, libc::ENOTCONN));
        };
        conn.cq.req_notify(false);
        drop(inner);
        let interrupted = !wait_readable(socket.fd(), WAKE_UP_INTERVAL);
        socket.drain_channel();
        inner = socket.lock();
        if interrupted {
            // A signal without SA_RESTART ends the wait, as it ends
            // rdma-core's read of the completion channel.
            return Err((inner, libc::EINTR));
        }
    }
}

/// What [`progress`] answered, as the state and the failure if any.
pub fn settle<'a>(
    outcome: Result<MutexGuard<'a, Inner>, (MutexGuard<'a, Inner>, i32)>,
) -> (MutexGuard<'a, Inner>, Option<i32>) {
    match outcome {
        Ok(inner) => (inner, None),
        Err((inner, errno)) => (inner, Some(errno)),
    }
}

/// Sleeps until `fd` is readable or `limit` passes: `false` if a signal
/// interrupted the sleep.
fn wait_readable(fd: i32, limit: Duration) -> bool {
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = limit.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    let got = unsafe { libc::poll(&mut pollfd, 1, millis) };
    got >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
}

/// `rs_poll_rs` for a connected (or formerly connected) socket: makes
/// progress without waiting and answers the `revents` for `events`.
/// `POLLHUP` (or `POLLERR`) comes once the data queued before the peer's
/// disconnect has been read: rdma-core reports it at once, alongside
/// `POLLIN`, and a program that stops at `POLLHUP` (rstream's `-T a`)
/// then loses the end of the stream when its peer closes first.
pub fn readiness(socket: &Rsocket, events: i16) -> i16 {
    let inner = socket.lock();
    let inner = match progress(socket, inner, true, |_| true) {
        Ok(inner) | Err((inner, _)) => inner,
    };
    let mut revents = 0;
    if events & libc::POLLIN != 0 && have_data_or_eof(&inner) {
        revents |= libc::POLLIN;
    }
    if events & libc::POLLOUT != 0
        && inner.conn.as_ref().is_some_and(can_send)
        && inner.state & state::WRITABLE != 0
    {
        revents |= libc::POLLOUT;
    }
    let drained = inner.conn.as_ref().is_none_or(|c| c.rmsg.is_empty());
    if inner.state & state::CONNECTED == 0 && drained {
        revents |= if inner.state == state::DISCONNECTED {
            libc::POLLHUP
        } else {
            libc::POLLERR
        };
    }
    revents
}

/// `rsend` for a stream socket: the octets of `chunks` in order, in
/// transfers of growing size; the count sent, or `errno` if none was.
pub fn send(socket: &Rsocket, chunks: &[&[u8]], flags: i32) -> Result<usize, i32> {
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let mut inner = socket.lock();
    if inner.conn.is_none() {
        return Err(not_connected(&inner));
    }
    let nonblock = inner.nonblocking(flags);
    let failure;
    (inner, failure) = iomap::send_pending(socket, inner, nonblock);
    if let Some(errno) = failure {
        return Err(errno);
    }
    let mut cursor = Cursor {
        chunks,
        index: 0,
        offset: 0,
    };
    let mut sent = 0usize;
    let mut failure = None;
    while sent < total {
        let left = (total - sent) as u32;
        let peer_room = |c: &Conn| c.target_entry(c.target_sge).length;
        let (back, size) = next_write(socket, inner, nonblock, left, peer_room);
        inner = back;
        let (conn, xfer) = match size {
            Ok(xfer) => (inner.conn.as_mut().expect("next_write found it"), xfer),
            Err(errno) => {
                failure = Some(errno);
                break;
            }
        };
        let payload = payload_of(conn, cursor.take(xfer as usize));
        if let Err(errno) = write_data(conn, payload, xfer) {
            failure = Some(errno);
            break;
        }
        sent += xfer as usize;
    }
    drop(inner);
    count_or_failure(sent, failure)
}

/// What a transfer answers (`(ret && left == len) ? ret : len - left`
/// in rdma-core): the count moved, or the failure if nothing was.
pub fn count_or_failure(count: usize, failure: Option<i32>) -> Result<usize, i32> {
    match failure {
        Some(errno) if count == 0 => Err(errno),
        _ => Ok(count),
    }
}

/// Waits, unless `nonblock`, until the socket can send (`rs_can_send`),
/// as `rsend` and `riowrite` do before each transfer: `ECONNRESET` once
/// sending has ended. On success the socket has its connection.
///
/// Polls the completion queue first even when the socket can send
/// (rdma-core's polls only when it cannot): the peer's buffer offers
/// arrive by RDMA Write, so a sender could go on for as many transfers as
/// it has credits while the credit updates announcing those offers wait
/// in the receive queue, beyond the receives reserved for them
/// ([`super::stream::RECV_RESERVE`]).
pub fn await_send<'a>(
    socket: &'a Rsocket,
    inner: MutexGuard<'a, Inner>,
    nonblock: bool,
) -> (MutexGuard<'a, Inner>, Option<i32>) {
    let (inner, failure) = settle(progress(socket, inner, nonblock, can_send_or_closed));
    if failure.is_none() && (inner.state & state::WRITABLE == 0 || inner.conn.is_none()) {
        return (inner, Some(libc::ECONNRESET));
    }
    (inner, failure)
}

/// Waits for room to send ([`await_send`]) and sizes the next transfer
/// of `left` octets: no more than `RS_MAX_TRANSFER` (64 KiB), the free send buffer
/// and `peer_room` (what the peer's buffer or mapping takes). On success
/// the socket has its connection.
pub fn next_write<'a>(
    socket: &'a Rsocket,
    inner: MutexGuard<'a, Inner>,
    nonblock: bool,
    left: u32,
    peer_room: impl FnOnce(&Conn) -> u32,
) -> (MutexGuard<'a, Inner>, Result<u32, i32>) {
    let (inner, failure) = await_send(socket, inner, nonblock);
    if let Some(errno) = failure {
        return (inner, Err(errno));
    }
    let conn = inner.conn.as_ref().expect("await_send found it");
    let size = left
        .min(MAX_TRANSFER)
        .min(conn.sbuf_bytes_avail)
        .min(peer_room(conn));
    (inner, Ok(size))
}

/// The payload of a Write of `data`: inline when it fits (`sq_inline`),
/// else staged in the send buffer.
pub fn payload_of(conn: &mut Conn, data: Vec<u8>) -> Payload {
    if data.len() <= conn.sizes.sq_inline as usize {
        Payload::Inline(data)
    } else {
        Payload::Sgl(stage(conn, &data))
    }
}

/// Copies `data` into the send buffer at its head (wrapping to its start,
/// as rdma-core's two-element `ssgl`), and answers the gather list.
fn stage(conn: &mut Conn, data: &[u8]) -> Vec<uwarp::Sge> {
    let size = conn.sizes.sbuf_size as usize;
    let head = conn.sbuf_head as usize;
    let first = data.len().min(size - head);
    let _ = conn.sbuf.buffer().write_at(head, &data[..first]);
    let mut sgl = vec![conn.sbuf.sge(head, first as u32)];
    if first < data.len() {
        let _ = conn.sbuf.buffer().write_at(0, &data[first..]);
        sgl.push(conn.sbuf.sge(0, (data.len() - first) as u32));
        conn.sbuf_head = (data.len() - first) as u32;
    } else {
        conn.sbuf_head = ((head + first) % size) as u32;
    }
    sgl
}

/// `rs_write_data`: takes `length` octets of the peer's current buffer
/// (moving to its next one when used up) and writes `payload` there.
fn write_data(conn: &mut Conn, payload: Payload, length: u32) -> Result<(), i32> {
    conn.sseq_no = conn.sseq_no.wrapping_add(1);
    conn.sqe_avail -= 2;
    conn.sbuf_bytes_avail -= length;
    let mut target = conn.target_entry(conn.target_sge);
    let remote = (target.addr, target.key);
    target.addr += u64::from(length);
    target.length -= length;
    conn.set_target(conn.target_sge, target);
    if target.length == 0 {
        conn.target_sge = (conn.target_sge + 1) % SGL_SIZE;
    }
    conn.post_write_msg(payload, wire::message(wire::OP_DATA, length), remote)
}

/// The octets of a list of buffers, taken in order.
struct Cursor<'a> {
    chunks: &'a [&'a [u8]],
    index: usize,
    offset: usize,
}

impl Cursor<'_> {
    /// The next `len` octets (fewer at the end).
    fn take(&mut self, mut len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while len > 0 && self.index < self.chunks.len() {
            let chunk = &self.chunks[self.index][self.offset..];
            let n = chunk.len().min(len);
            out.extend_from_slice(&chunk[..n]);
            len -= n;
            self.offset += n;
            if self.offset == self.chunks[self.index].len() {
                self.index += 1;
                self.offset = 0;
            }
        }
        out
    }
}

/// `rrecv` for a stream socket: copies into `out` (a list of buffers)
/// what has arrived, waiting for something unless non-blocking; 0 at end
/// of file. `MSG_PEEK` leaves it queued; `MSG_WAITALL` waits for all.
pub fn recv(socket: &Rsocket, out: &mut [&mut [u8]], flags: i32) -> Result<usize, i32> {
    let len: usize = out.iter().map(|c| c.len()).sum();
    let mut inner = socket.lock();
    if inner.conn.is_none() {
        return Err(not_connected(&inner));
    }
    let nonblock = inner.nonblocking(flags);
    let mut copied = 0;
    let mut failure = None;
    loop {
        if inner.conn.as_ref().is_some_and(|c| c.rmsg.is_empty()) {
            (inner, failure) = settle(progress(socket, inner, nonblock, have_data_or_eof));
            if failure.is_some() {
                break;
            }
        }
        // An rclose on another thread took the connection: end of file.
        let Some(conn) = inner.conn.as_mut() else {
            break;
        };
        if flags & libc::MSG_PEEK != 0 {
            copied = peek(conn, out);
            break;
        }
        copied += consume(conn, out, copied, len - copied);
        let readable = inner.state & state::READABLE != 0;
        if copied == len || flags & libc::MSG_WAITALL == 0 || !readable {
            break;
        }
    }
    drop(inner);
    count_or_failure(copied, failure)
}

/// Writes `data` at `at` octets into the list of buffers `out`.
fn scatter(out: &mut [&mut [u8]], mut at: usize, mut data: &[u8]) {
    for chunk in out.iter_mut() {
        if data.is_empty() {
            break;
        }
        if at >= chunk.len() {
            at -= chunk.len();
            continue;
        }
        let n = (chunk.len() - at).min(data.len());
        chunk[at..at + n].copy_from_slice(&data[..n]);
        data = &data[n..];
        at = 0;
    }
}

/// Reads `len` octets of the receive ring from `offset` (wrapping).
fn ring_read(conn: &Conn, offset: u32, len: u32) -> Vec<u8> {
    let size = conn.sizes.rbuf_size;
    let mut data = vec![0; len as usize];
    let first = len.min(size - offset);
    let _ = conn
        .rbuf
        .buffer()
        .read_at(offset as usize, &mut data[..first as usize]);
    if first < len {
        let _ = conn.rbuf.buffer().read_at(0, &mut data[first as usize..]);
    }
    data
}

/// Moves up to `room` queued octets into `out` at `at`, returning the
/// count, and frees their place in the ring (the loop of `rrecv`).
fn consume(conn: &mut Conn, out: &mut [&mut [u8]], mut at: usize, mut room: usize) -> usize {
    let start = at;
    while room > 0 {
        let Some(front) = conn.rmsg.front_mut() else {
            break;
        };
        let take = if (room as u32) < front.1 {
            front.1 -= room as u32;
            room as u32
        } else {
            let whole = front.1;
            conn.rmsg.pop_front();
            conn.rseq_no = conn.rseq_no.wrapping_add(1);
            whole
        };
        let data = ring_read(conn, conn.rbuf_offset, take);
        scatter(out, at, &data);
        conn.rbuf_offset = (conn.rbuf_offset + take) % conn.sizes.rbuf_size;
        conn.rbuf_bytes_avail += take;
        at += take as usize;
        room -= take as usize;
    }
    at - start
}

/// `rs_peek`: copies what is queued without consuming it.
fn peek(conn: &Conn, out: &mut [&mut [u8]]) -> usize {
    let mut room: usize = out.iter().map(|c| c.len()).sum();
    let mut offset = conn.rbuf_offset;
    let mut at = 0;
    for &(_, length) in &conn.rmsg {
        if room == 0 {
            break;
        }
        let take = length.min(room as u32);
        scatter(out, at, &ring_read(conn, offset, take));
        offset = (offset + take) % conn.sizes.rbuf_size;
        at += take as usize;
        room -= take as usize;
    }
    at
}

/// `rshutdown` for a connected socket: `how` is `SHUT_RD`, `SHUT_WR` or
/// `SHUT_RDWR`; tells the peer (`RS_CTRL_SHUTDOWN` or
/// `RS_CTRL_DISCONNECT`) and waits, within `limit`, for the sends
/// outstanding to complete. Blocking even on an `O_NONBLOCK` socket, as
/// rdma-core's.
pub fn shutdown(socket: &Rsocket, how: i32, limit: Duration) -> Result<(), i32> {
    let mut inner = socket.lock();
    if inner.state & state::CONNECTED == 0 {
        return Ok(());
    }
    let ctrl = match how {
        libc::SHUT_RDWR => {
            inner.state &= !(state::READABLE | state::WRITABLE);
            wire::CTRL_DISCONNECT
        }
        libc::SHUT_WR => {
            inner.state &= !state::WRITABLE;
            if inner.state & state::READABLE != 0 {
                wire::CTRL_SHUTDOWN
            } else {
                wire::CTRL_DISCONNECT
            }
        }
        libc::SHUT_RD => {
            inner.state &= !state::READABLE;
            if inner.state & state::WRITABLE != 0 {
                return Ok(());
            }
            wire::CTRL_DISCONNECT
        }
        _ => return Err(libc::EINVAL),
    };
    let deadline = Instant::now() + limit;
    inner = wait_until(socket, inner, can_send_ctrl_or_closed, deadline);
    if inner.state & state::CONNECTED != 0 {
        if let Some(conn) = inner.conn.as_mut() {
            if conn.ctrl_seqno != conn.ctrl_max_seqno {
                conn.ctrl_seqno = conn.ctrl_seqno.wrapping_add(1);
                let _ = conn.post_msg(wire::message(wire::OP_CTRL, ctrl));
            }
        }
    }
    drop(wait_until(socket, inner, all_sends_done, deadline));
    Ok(())
}

/// Makes progress until `test` holds or `deadline` passes.
fn wait_until<'a>(
    socket: &'a Rsocket,
    mut inner: MutexGuard<'a, Inner>,
    test: Test,
    deadline: Instant,
) -> MutexGuard<'a, Inner> {
    loop {
        inner = match progress(socket, inner, true, test) {
            Ok(inner) => return inner,
            Err((inner, _)) => inner,
        };
        let now = Instant::now();
        if now >= deadline {
            return inner;
        }
        if let Some(conn) = inner.conn.as_ref() {
            conn.cq.req_notify(false);
        }
        drop(inner);
        wait_readable(socket.fd(), (deadline - now).min(Duration::from_millis(10)));
        socket.drain_channel();
        inner = socket.lock();
    }
}
