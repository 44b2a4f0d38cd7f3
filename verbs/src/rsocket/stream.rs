//! A stream rsocket and its connection: the state machine of rdma-core's
//! `struct rsocket` (`rs_state`), the queue pair, completion queue and the
//! three registered buffers `rs_create_ep` and `rs_init_bufs` make, the
//! private data exchange of `rs_do_connect` and `rs_accept`, and the
//! graceful close of `rshutdown`.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use uwarp::{
    Access, CompletionChannel, CompletionQueue, ConnectParams, LocalParams, MemoryRegion,
    ProtectionDomain, QpCaps, QpInit, QueuePair, RecvWr, RtrSet,
};

use super::iomap::Mapping;
use super::wire::{ConnData, Iomap, RemoteSge, IOMAP_SIZE, MSG_SIZE, SGE_SIZE, SGL_SIZE};
use crate::export::errno_of;
use crate::provider;

/// `rs_state`'s bits, as rdma-core orders them.
pub mod state {
    /// Created, nothing more.
    pub const INIT: u32 = 0;
    /// `rbind` ran.
    pub const BOUND: u32 = 0x0001;
    /// `rlisten` ran.
    pub const LISTENING: u32 = 0x0002;
    /// A connection is being set up.
    pub const OPENING: u32 = 0x0004;
    /// Connected (and maybe readable and writable).
    pub const CONNECTED: u32 = 0x0100;
    /// Sending is allowed.
    pub const WRITABLE: u32 = 0x0200;
    /// Receiving is allowed.
    pub const READABLE: u32 = 0x0400;
    /// Connected both ways.
    pub const CONNECT_RDWR: u32 = CONNECTED | READABLE | WRITABLE;
    /// Connecting failed.
    pub const CONNECT_ERROR: u32 = 0x0800;
    /// The connection ended in order.
    pub const DISCONNECTED: u32 = 0x1000;
    /// The connection failed.
    pub const ERROR: u32 = 0x2000;
}

/// The unspecified address of `family` (`AF_INET6` or else `AF_INET`),
/// port 0: where an unbound socket listens, what `rgetsockname` answers
/// for it.
pub fn any_address(family: i32) -> SocketAddr {
    let ip: std::net::IpAddr = if family == libc::AF_INET6 {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(ip, 0)
}

/// `RS_QP_MIN_SIZE`.
const QP_MIN_SIZE: u32 = 16;
/// `RS_QP_MAX_SIZE`.
pub const QP_MAX_SIZE: u32 = 0xFFFE;
/// `RS_QP_CTRL_SIZE`: control messages in flight.
pub const QP_CTRL_SIZE: u32 = 4;
/// Receives posted beyond the credits granted (`RDMA_RQSIZE`), for the
/// peer's control messages: on iWARP each credit update, shutdown and
/// disconnect is a Send that takes a receive, and no credit bounds them.
/// rdma-core posts the granted count alone, relying on InfiniBand's
/// receiver-not-ready retries; on iWARP a Send that finds no receive ends
/// the connection with a Terminate (RFC 5041 section 7.2, no buffer for
/// an untagged message). A peer sends a credit update as it consumes
/// messages or frees half its buffer, so between two polls of the
/// completion queue (every `rsend` transfer polls first:
/// [`super::data::await_send`]) it sends at most a few: up to 3 while it
/// consumes the at most `RDMA_RQSIZE` messages it had unread, 4 for the
/// two halves of its buffer those filled and two whose offer waited for a
/// control slot, 2 for the one transfer since the poll; then a shutdown
/// and a disconnect. 11, and a margin.
pub const RECV_RESERVE: u32 = 4 * QP_CTRL_SIZE;
/// `RS_SNDLOWAT`: the send buffer space below which a socket is not
/// writable.
pub const SNDLOWAT: u32 = 2048;
/// Work request ids of receives (`RS_WR_ID_FLAG_RECV`).
pub const WR_ID_RECV: u64 = 1 << 63;
/// Work request ids of the 4-octet Sends that follow a Write
/// (`RS_WR_ID_FLAG_MSG_SEND`).
pub const WR_ID_MSG_SEND: u64 = 1 << 62;

/// The sizes an rsocket's connection is made with: rdma-core's defaults
/// (`def_sqsize`, `def_rqsize`, `def_inline`, `def_mem`, `def_wmem`),
/// changed by `rsetsockopt` before connecting and inherited by accepted
/// sockets from their listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Send queue depth (`RDMA_SQSIZE`).
    pub sq_size: u32,
    /// Receive queue depth (`RDMA_RQSIZE`).
    pub rq_size: u32,
    /// Inline data of a send (`RDMA_INLINE`).
    pub sq_inline: u32,
    /// Send buffer (`SO_SNDBUF`, doubled as Linux does).
    pub sbuf_size: u32,
    /// Receive buffer (`SO_RCVBUF`, doubled).
    pub rbuf_size: u32,
    /// Entries of the iomap the peer may fill (`RDMA_IOMAPSIZE`).
    pub iomap_size: u32,
}

impl Sizes {
    /// The receives a connection keeps posted, each with its message
    /// slot: the credits granted and [`RECV_RESERVE`].
    pub fn recv_depth(&self) -> u32 {
        self.rq_size + RECV_RESERVE
    }
}

impl Default for Sizes {
    fn default() -> Self {
        Self {
            sq_size: 384,
            rq_size: 384,
            sq_inline: 64,
            sbuf_size: 1 << 17,
            rbuf_size: 1 << 17,
            iomap_size: 0,
        }
    }
}

/// The socket options rdma-core keeps as bits (`so_opts`, `tcp_opts`,
/// `ipv6_opts`), by level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionBits {
    /// `SOL_SOCKET` options set (bit `1 << optname`).
    pub socket: u64,
    /// `IPPROTO_TCP` options set.
    pub tcp: u64,
    /// `IPPROTO_IPV6` options set.
    pub ipv6: u64,
}

/// Everything of an rsocket its mutex guards.
#[derive(Debug, Default)]
pub struct Inner {
    /// `rs_state` bits ([`state`]).
    pub state: u32,
    /// The error `SO_ERROR` reports (then clears).
    pub err: i32,
    /// `O_NONBLOCK` and the other status flags (`rfcntl(F_SETFL)`).
    pub fs_flags: i32,
    /// `FD_CLOEXEC` (`rfcntl(F_SETFD)`).
    pub fd_flags: i32,
    /// What the connection will be made with.
    pub sizes: Sizes,
    /// Option bits.
    pub option_bits: OptionBits,
    /// `TCP_KEEPIDLE`: seconds between keepalives; 0 until it is set or
    /// keepalive is turned on ([`keepalive`](super::keepalive)).
    pub keepalive_secs: u32,
    /// `IPV6_V6ONLY` for a listener.
    pub af_only: Option<bool>,
    /// The address family `rsocket` was given.
    pub family: i32,
    /// `rbind`'s address, or the connection's.
    pub local: Option<SocketAddr>,
    /// The peer's address.
    pub peer: Option<SocketAddr>,
    /// The connection, once there is one.
    pub conn: Option<Conn>,
}

impl Inner {
    /// Whether the socket must not wait: `O_NONBLOCK` or `MSG_DONTWAIT`
    /// (`rs_nonblocking`).
    pub fn nonblocking(&self, flags: i32) -> bool {
        self.fs_flags & libc::O_NONBLOCK != 0 || flags & libc::MSG_DONTWAIT != 0
    }
}

/// A stream rsocket: its descriptor (the read end of its completion
/// channel, so that `rpoll` can sleep on it) and its state.
#[derive(Debug)]
pub struct Rsocket {
    /// Where its completion queue raises events.
    pub channel: CompletionChannel,
    /// The mutable part.
    pub inner: Mutex<Inner>,
    /// The listener's part, for a listening socket.
    pub listening: Mutex<Option<Arc<super::listen::Listening>>>,
}

impl Rsocket {
    /// A new socket of `family`, in `rs_init` (`rsocket`): its channel's
    /// descriptor is non-blocking, since only `rpoll` and the waits of
    /// this module read it, after `poll` said it is readable.
    pub fn new(family: i32, sizes: Sizes) -> Result<Self, i32> {
        let channel = CompletionChannel::new().map_err(|e| errno_of(&e))?;
        // SAFETY: fcntl on the channel's own open descriptor.
        unsafe { libc::fcntl(channel.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        Ok(Self {
            channel,
            inner: Mutex::new(Inner {
                family,
                sizes,
                ..Inner::default()
            }),
            listening: Mutex::new(None),
        })
    }

    /// Its descriptor.
    pub fn fd(&self) -> RawFd {
        self.channel.as_raw_fd()
    }

    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Consumes whatever events the channel holds (the wait that follows
    /// arms the queue again).
    pub fn drain_channel(&self) {
        while self.channel.get_event().is_ok() {}
    }
}

/// A connection's verbs objects, buffers and rdma-core's flow-control
/// counters (the stream half of `struct rsocket`).
#[derive(Debug)]
pub struct Conn {
    /// The queue pair.
    pub qp: QueuePair,
    /// Its one completion queue (both directions, as rdma-core's).
    pub cq: CompletionQueue,
    /// The protection domain of the queue pair and buffers, kept as long
    /// as they are.
    pub pd: ProtectionDomain,
    /// The send buffer, then [`QP_CTRL_SIZE`] control slots.
    pub sbuf: MemoryRegion,
    /// The receive buffer, then one 4-octet message slot per receive.
    pub rbuf: MemoryRegion,
    /// The target SGL the peer writes its buffers into.
    pub target: MemoryRegion,
    /// The sizes it was made with (after `rs_set_qp_size`).
    pub sizes: Sizes,
    /// Control messages posted (`ctrl_seqno`).
    pub ctrl_seqno: u32,
    /// Control messages that may be posted (`ctrl_max_seqno`).
    pub ctrl_max_seqno: u32,
    /// Data messages sent (`sseq_no`).
    pub sseq_no: u16,
    /// The peer's credit limit (`sseq_comp`).
    pub sseq_comp: u16,
    /// Data messages consumed (`rseq_no`).
    pub rseq_no: u16,
    /// When to grant credits again (`rseq_comp`).
    pub rseq_comp: u16,
    /// The peer's target SGL.
    pub remote_sgl: RemoteSge,
    /// The next entry of it to write (`remote_sge`).
    pub remote_sge: u32,
    /// The next entry of the own target SGL to send into (`target_sge`).
    pub target_sge: usize,
    /// The message slot of the next receive (`rbuf_msg_index`).
    pub rbuf_msg_index: u32,
    /// Receive buffer space not yet offered (`rbuf_bytes_avail`).
    pub rbuf_bytes_avail: u32,
    /// Where the next offered half starts (`rbuf_free_offset`).
    pub rbuf_free_offset: u32,
    /// Where the next received octet is (`rbuf_offset`).
    pub rbuf_offset: u32,
    /// Send buffer space free (`sbuf_bytes_avail`).
    pub sbuf_bytes_avail: u32,
    /// Where the next send is copied in the send buffer (`ssgl[0].addr`).
    pub sbuf_head: u32,
    /// Send queue entries free (`sqe_avail`).
    pub sqe_avail: u32,
    /// Data arrived and not yet read: `(op, octets)` (`rmsg`).
    pub rmsg: std::collections::VecDeque<(u32, u32)>,
    /// The peer's iomap, where `riomap`'s writable mappings are announced.
    pub remote_iomap: RemoteSge,
    /// This side's `riomap` mappings.
    pub mappings: Vec<Mapping>,
}

/// Clamps the queue sizes as `rs_set_qp_size` does, and gives iWARP's
/// 4-octet messages room inline (`rs_create_ep`).
fn clamp_sizes(mut sizes: Sizes) -> Sizes {
    sizes.sq_size = sizes.sq_size.clamp(QP_MIN_SIZE, QP_MAX_SIZE);
    sizes.rq_size = sizes.rq_size.clamp(QP_MIN_SIZE, QP_MAX_SIZE);
    sizes.sq_inline = sizes.sq_inline.max(MSG_SIZE as u32);
    sizes.sbuf_size = sizes.sbuf_size.max(SNDLOWAT);
    sizes.rbuf_size = sizes.rbuf_size.max(2 * SNDLOWAT) & !1;
    sizes
}

impl Conn {
    /// `rs_create_ep` and `rs_init_bufs`: the queue pair in iWARP mode
    /// (`RS_OPT_MSG_SEND`), its completion queue on `channel`, the
    /// buffers, and every receive posted. Not yet connected.
    pub fn create(sizes: Sizes, channel: &CompletionChannel) -> Result<Self, i32> {
        let sizes = clamp_sizes(sizes);
        let device = provider::device()?;
        let pd: ProtectionDomain = device.alloc_pd().map_err(|e| errno_of(&e))?;
        let depth = (sizes.sq_size + sizes.recv_depth()) as usize;
        let cq = device.create_cq_with_channel(depth, channel, 0);
        let mut init = QpInit::new(&cq);
        // Control writes (a target SGL entry, an iomap entry) always go
        // inline, whatever inline size the data was given (rdma-core
        // copies them to a control buffer when it is smaller).
        init.caps = QpCaps {
            max_send_sge: 2,
            max_recv_sge: 1,
            max_inline_data: (sizes.sq_inline as usize).max(IOMAP_SIZE),
        };
        init.max_send_wr = sizes.sq_size as usize;
        init.max_recv_wr = sizes.recv_depth() as usize;
        let qp = device.create_qp(&pd, init);
        let region = |len: usize, access| pd.alloc_mr(len, access).map_err(|e| errno_of(&e));
        let remote = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let sbuf = region(
            sizes.sbuf_size as usize + SGE_SIZE * QP_CTRL_SIZE as usize,
            Access::LOCAL_WRITE,
        )?;
        let target = region(
            SGE_SIZE * SGL_SIZE + IOMAP_SIZE * sizes.iomap_size as usize,
            remote,
        )?;
        let rbuf = region(
            sizes.rbuf_size as usize + MSG_SIZE * sizes.recv_depth() as usize,
            remote,
        )?;
        let mut conn = Self {
            qp,
            cq,
            pd,
            sbuf,
            rbuf,
            target,
            sizes,
            ctrl_seqno: 0,
            ctrl_max_seqno: QP_CTRL_SIZE,
            sseq_no: 0,
            sseq_comp: 0,
            rseq_no: 0,
            rseq_comp: (sizes.rq_size >> 1) as u16,
            remote_sgl: RemoteSge::default(),
            remote_sge: 0,
            target_sge: 0,
            rbuf_msg_index: 0,
            rbuf_bytes_avail: sizes.rbuf_size >> 1,
            rbuf_free_offset: sizes.rbuf_size >> 1,
            rbuf_offset: 0,
            sbuf_bytes_avail: sizes.sbuf_size,
            sbuf_head: 0,
            sqe_avail: sizes.sq_size - QP_CTRL_SIZE,
            rmsg: Default::default(),
            remote_iomap: RemoteSge::default(),
            mappings: Vec::new(),
        };
        for _ in 0..sizes.recv_depth() {
            conn.post_recv()?;
        }
        conn.cq.req_notify(false);
        Ok(conn)
    }

    /// `rs_post_recv` in iWARP mode: a receive for one 4-octet message, in
    /// the next message slot.
    pub fn post_recv(&mut self) -> Result<(), i32> {
        let index = self.rbuf_msg_index;
        let offset = self.sizes.rbuf_size as usize + index as usize * MSG_SIZE;
        let wr = RecvWr {
            wr_id: WR_ID_RECV | u64::from(index),
            sgl: vec![self.rbuf.sge(offset, MSG_SIZE as u32)],
        };
        self.rbuf_msg_index = (index + 1) % self.sizes.recv_depth();
        self.qp.post_recv(wr).map_err(|e| errno_of(&e))
    }

    /// `rs_format_conn_data`: what this side tells the peer.
    pub fn conn_data(&self) -> ConnData {
        ConnData {
            credits: self.sizes.rq_size as u16,
            target_sgl: RemoteSge {
                addr: self.target.addr(),
                key: self.target.rkey(),
                length: SGL_SIZE as u32,
            },
            data_buf: RemoteSge {
                addr: self.rbuf.addr(),
                key: self.rbuf.rkey(),
                length: self.sizes.rbuf_size >> 1,
            },
            iomap_size: self.sizes.iomap_size,
        }
    }

    /// `rs_save_conn_data`: the peer's target SGL and the iomap after it,
    /// its first buffer (the own target SGL's entry 0) and its credits.
    pub fn save_peer(&mut self, peer: &ConnData) {
        self.remote_sgl = peer.target_sgl;
        self.remote_iomap = RemoteSge {
            addr: peer.target_sgl.addr + SGE_SIZE as u64 * u64::from(peer.target_sgl.length),
            key: peer.target_sgl.key,
            length: peer.iomap_size,
        };
        self.remote_sge = 1;
        self.set_target(0, peer.data_buf);
        self.sseq_comp = peer.credits;
    }

    /// Entry `index` of the own target SGL (the peer writes it too).
    pub fn target_entry(&self, index: usize) -> RemoteSge {
        let mut bytes = [0; SGE_SIZE];
        let _ = self.target.buffer().read_at(index * SGE_SIZE, &mut bytes);
        RemoteSge::from_host_bytes(&bytes)
    }

    /// Entry `index` of the own iomap (the peer writes it).
    pub fn iomap_entry(&self, index: usize) -> Iomap {
        let mut bytes = [0; IOMAP_SIZE];
        let at = SGE_SIZE * SGL_SIZE + index * IOMAP_SIZE;
        let _ = self.target.buffer().read_at(at, &mut bytes);
        Iomap::from_host_bytes(&bytes)
    }

    /// Writes entry `index` of the own target SGL.
    pub fn set_target(&self, index: usize, entry: RemoteSge) {
        let _ = self
            .target
            .buffer()
            .write_at(index * SGE_SIZE, &entry.to_host_bytes());
    }
}

/// The MPA settings of an rsocket connection: iWARP's work-around of
/// `rs_do_connect` (`initiator_depth` 1: the first RDMA Read of some
/// RNICs), no inbound Reads, the conn data as private data, and the
/// peer-to-peer model (RFC 6581 section 9) whenever the peer speaks it,
/// as the drop-in's connection manager (`cm/connect.rs`): a passive
/// rsocket sends first (its credits, on its first `rrecv` or `rpoll`),
/// which the client-server model of RFC 5044 section 7.1.2 forbids before
/// the initiator's first FPDU.
pub fn mpa_params(ird: u16, ord: u16, data: &ConnData) -> LocalParams {
    LocalParams {
        ird,
        ord,
        private_data: data.encode().to_vec(),
        peer_to_peer: Some(RtrSet::ALL),
        ..LocalParams::default()
    }
}

/// `rs_do_connect`: makes the connection's resources with `sizes`,
/// connects to `peer` with this side's conn data, saves the peer's, and
/// answers the connection with its addresses. Holds no lock: the socket
/// stays usable (`rpoll`, `rclose`) meanwhile.
pub fn connect(
    sizes: Sizes,
    channel: &CompletionChannel,
    peer: SocketAddr,
) -> Result<Connected, i32> {
    let mut conn = Conn::create(sizes, channel)?;
    let device = provider::device()?;
    let params = ConnectParams {
        mpa: mpa_params(0, 1, &conn.conn_data()),
        first_fpdu_delay: provider::first_fpdu_delay(),
        ..ConnectParams::default()
    };
    let connection = device
        .connect(peer, &conn.qp, params)
        .map_err(|e| errno_of(&e))?;
    let Some(peer_data) = ConnData::decode(&connection.private_data) else {
        conn.qp.abort();
        return Err(libc::ENOTSUP);
    };
    conn.save_peer(&peer_data);
    Ok((conn, connection.local_addr, connection.peer_addr))
}

/// A connection [`connect`] made: it, this end's address, the peer's.
pub type Connected = (Conn, SocketAddr, SocketAddr);

/// Ends a connect of `socket` (in `rs_opening`) with its `outcome`:
/// connected both ways, or `rs_connect_error` with `SO_ERROR` set. A
/// socket closed meanwhile gets nothing: the connection is released.
pub fn finish_connect(socket: &Rsocket, outcome: Result<Connected, i32>) -> Result<(), i32> {
    let mut inner = socket.lock();
    if inner.state != state::OPENING {
        if let Ok((conn, ..)) = outcome {
            drop(inner);
            release(conn);
        }
        return Err(libc::ECONNABORTED);
    }
    match outcome {
        Ok((conn, local, peer)) => {
            inner.local = Some(local);
            inner.peer = Some(peer);
            inner.conn = Some(conn);
            inner.state = state::CONNECT_RDWR;
            Ok(())
        }
        Err(errno) => {
            inner.state = state::CONNECT_ERROR;
            inner.err = errno;
            Err(errno)
        }
    }
}

/// `rs_accept` for one request: a new socket inheriting the listener's
/// sizes and flags, connected with the request's conn data; `None`
/// (request rejected) if the request is not an rsocket's or the
/// resources cannot be made.
pub fn accept(request: uwarp::IncomingRequest, template: &Inner) -> Option<Rsocket> {
    let Some(peer_data) = ConnData::decode(request.private_data()) else {
        let _ = request.reject(&[]);
        return None;
    };
    let socket = Rsocket::new(template.family, template.sizes).ok()?;
    let mut conn = match Conn::create(template.sizes, &socket.channel) {
        Ok(conn) => conn,
        Err(_) => {
            let _ = request.reject(&[]);
            return None;
        }
    };
    conn.save_peer(&peer_data);
    // The Reply answers the peer's IRD with an ORD no larger, and its ORD
    // with the IRD it asked for, as the kernel's iWARP CM echoes them.
    let (peer_ird, peer_ord) = request.ird_ord().unwrap_or((1, 1));
    let params = mpa_params(peer_ord, peer_ird, &conn.conn_data());
    let connection = request.accept(&conn.qp, params).ok()?;
    {
        let mut inner = socket.lock();
        inner.fs_flags = template.fs_flags;
        inner.fd_flags = template.fd_flags;
        inner.option_bits = template.option_bits;
        inner.keepalive_secs = template.keepalive_secs;
        inner.local = Some(connection.local_addr);
        inner.peer = Some(connection.peer_addr);
        inner.conn = Some(conn);
        inner.state = state::CONNECT_RDWR;
    }
    Some(socket)
}

/// Ends the connection's queue pair: a graceful close of the stream
/// (the peer reads what was sent, then its end of file), as
/// `rdma_disconnect` does after `rshutdown`.
pub fn release(conn: Conn) {
    conn.qp.disconnect();
    let _ = conn.qp.wait_closed(std::time::Duration::from_secs(1));
    conn.qp.destroy();
}
