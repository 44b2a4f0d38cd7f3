//! `rping`: the ping-pong of librdmacm's `rping` example
//! (rdma-core, `librdmacm/examples/rping.c`), over uwarp, octet for octet
//! on the wire so that uwarp and a real `rping` can talk to each other.
//!
//! The protocol, with `rping.c`'s names:
//!
//! 1. Each side registers a 16-octet receive buffer and posts one receive
//!    for it before connecting or accepting (`rping_setup_buffers`,
//!    `ibv_post_recv` ahead of `rping_accept`/`rping_connect_client`),
//!    and re-posts it as soon as a message has arrived in it
//!    (`rping_cq_event_handler`). Exactly one receive is outstanding on
//!    each side, and there is never more than one message in flight.
//! 2. The client fills its source buffer (`start_buf`) with the ping
//!    pattern ([`fill_ping`]) and advertises it in a 16-octet Send of
//!    [`RdmaInfo`] (`struct rping_rdma_info`, big endian:
//!    `__be64 buf; __be32 rkey; __be32 size`).
//! 3. The server RDMA-Reads `size` octets from it into its own buffer
//!    (`rdma_buf`) and, once the Read completes, sends the go-ahead: a
//!    16-octet Send of its never-formatted send buffer, all zeros.
//! 4. The client advertises its sink buffer (`rdma_buf`) the same way.
//! 5. The server RDMA-Writes `strlen(rdma_buf) + 1` octets (the ping text
//!    and its NUL) into it and, once the Write completes, sends the
//!    go-ahead again.
//! 6. With `-V` the client checks that sink and source are equal
//!    (`memcmp(start_buf, rdma_buf, size)`); with `-v` it prints the sink.
//!    It repeats `count` times (0: for ever), then disconnects; the server
//!    loops until the client disconnects.
//!
//! Every work request is signaled; Send completions are ignored. A received
//! message of any size other than 16 octets ends the run ("Received bogus
//! data"). Sizes follow `rping`: at least [`MIN_SIZE`], [`DEFAULT_SIZE`] by
//! default; `rping` refuses more than [`MAX_SIZE`] on its command line,
//! which the `rping` example enforces too, while these functions accept
//! any size up to 4 GiB - 1. The client asks for IRD 1 and ORD 1, the
//! values `rping_init_conn_param` gives `rdma_connect`.
//!
//! Where uwarp differs from `rping.c` on purpose, the run is stricter: a
//! client whose connection closes before its last ping fails (`rping`
//! returns 0 when its state is `DISCONNECTED`), and a server fails when
//! the advertised source is larger than its own buffer (`rping` would post
//! the Read and see it fail).

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smoltcp::wire::Ipv4Address;
use uwarp_stack::mem::Access;
use uwarp_stack::mpa::{LocalParams, RtrSet};
use uwarp_stack::rdmap::QpEvent;
use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use uwarp_stack::wire::mpa::Revision;

use uwarp::CompletionQueue;
use uwarp::Error;
use uwarp::HostConfig;
use uwarp::MemoryRegion;
use uwarp::{ConnectParams, Connection, IncomingRequest, Listener};
use uwarp::{CoreThreads, DpdkConfig, DpdkPort};
use uwarp::{Device, DeviceConfig};
use uwarp::{QpCaps, QpInit, QueuePair};

/// `rping`'s default port.
pub const DEFAULT_PORT: u16 = 7174;
/// `rping`'s default ping size (`cb->size = 64`).
pub const DEFAULT_SIZE: usize = 64;
/// `rping`'s smallest ping size, `RPING_MIN_BUFSIZE`:
/// `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`, 11 + 15.
pub const MIN_SIZE: usize = 26;
/// The largest size `rping` accepts on its command line,
/// `RPING_BUFSIZE - 1` (64 KiB - 1).
pub const MAX_SIZE: usize = 64 * 1024 - 1;
/// Octets in an advertisement, and in every Send of the protocol.
pub const INFO_LEN: usize = 16;
/// `RPING_SQ_DEPTH`; the completion queue holds twice as many.
pub const SQ_DEPTH: usize = 16;
/// The first character of the pattern after the text (`start = 65`, 'A').
const PATTERN_FIRST: u8 = 65;
/// The last character before the pattern wraps to 'A' (122, 'z').
const PATTERN_LAST: u8 = 122;

const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

/// `struct rping_rdma_info`: where a buffer is, in network byte order on
/// the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RdmaInfo {
    /// The buffer's Tagged Offset (`buf`, the virtual address in `rping`).
    pub buf: u64,
    /// The STag that names it (`rkey`).
    pub rkey: u32,
    /// Its size in octets (`size`).
    pub size: u32,
}

impl RdmaInfo {
    /// The 16 octets on the wire: `buf`, `rkey`, `size`, big endian.
    pub fn to_bytes(self) -> [u8; INFO_LEN] {
        let mut out = [0u8; INFO_LEN];
        out[..8].copy_from_slice(&self.buf.to_be_bytes());
        out[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        out[12..].copy_from_slice(&self.size.to_be_bytes());
        out
    }

    /// Parses exactly 16 octets; `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; INFO_LEN] = bytes.try_into().ok()?;
        let (buf, rest) = bytes.split_at(8);
        let (rkey, size) = rest.split_at(4);
        Some(Self {
            buf: u64::from_be_bytes(buf.try_into().ok()?),
            rkey: u32::from_be_bytes(rkey.try_into().ok()?),
            size: u32::from_be_bytes(size.try_into().ok()?),
        })
    }

    /// The advertisement of a whole memory region (`rping_format_send`).
    pub fn of(region: &MemoryRegion) -> Self {
        Self {
            buf: region.addr(),
            rkey: region.rkey(),
            size: u32::try_from(region.len()).unwrap_or(u32::MAX),
        }
    }
}

/// `stag` with its key (the low octet, RFC 5040 section 2.1) changed:
/// an STag the peer did not register ([`Options::bad_stag`]).
pub fn wrong_key(stag: u32) -> u32 {
    stag ^ 0xff
}

/// Fills `buf` with the source data of ping number `ping`, as
/// `rping_test_client` does: `snprintf(buf, size, "rdma-ping-%d: ", ping)`,
/// then the characters 'A' to 'z' in a cycle, starting at
/// `'A' + ping % 58` (the `start` counter that advances once per ping),
/// and a NUL in the last octet.
pub fn fill_ping(buf: &mut [u8], ping: u64) {
    let size = buf.len();
    if size == 0 {
        return;
    }
    let text = format!("rdma-ping-{ping}: ");
    // snprintf writes at most size - 1 characters and a NUL, and returns
    // the length it wanted to write.
    let written = text.len().min(size - 1);
    buf[..written].copy_from_slice(&text.as_bytes()[..written]);
    buf[written] = 0;
    let cycle = u64::from(PATTERN_LAST - PATTERN_FIRST) + 1;
    // In range: ping % 58 < 58.
    let mut c = PATTERN_FIRST + (ping % cycle) as u8;
    for octet in buf.iter_mut().skip(text.len()) {
        *octet = c;
        c = if c >= PATTERN_LAST {
            PATTERN_FIRST
        } else {
            c + 1
        };
    }
    buf[size - 1] = 0;
}

/// The C string at the start of `buf`: the octets before the first NUL
/// (all of them when there is none).
pub fn c_string(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

/// How to run, `rping`'s options plus uwarp's MPA settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Ping size in octets (`-S`): the client's source and sink buffers,
    /// the server's buffer.
    pub size: usize,
    /// Pings the client sends (`-C`); 0 pings for ever. The server ignores
    /// it, as `rping` does.
    pub count: u64,
    /// Print the ping data (`-v`): "ping data: ..." on the client,
    /// "server ping data: ..." on the server.
    pub verbose: bool,
    /// The client checks that the sink equals the source after each ping
    /// (`-V`).
    pub validate: bool,
    /// Print what happens (`-d`).
    pub debug: bool,
    /// The MPA revision to speak (1 or 2).
    pub revision: Revision,
    /// Ask for MPA CRCs.
    pub crc: bool,
    /// Ask the peer for MPA Markers.
    pub markers: bool,
    /// Peer-to-peer RTR types: those the client offers (`None`: the
    /// client-server model, as `rping` over siw uses by default), those the
    /// server accepts (`None`: every type).
    pub p2p: Option<RtrSet>,
    /// How long to wait for any one step (connecting, a completion, a
    /// request); `None` waits for ever, like `rping`.
    pub timeout: Option<Duration>,
    /// How long the client holds its first FPDU (its first Send, or the
    /// peer-to-peer RTR) back after the Reply
    /// ([`ConnectParams::first_fpdu_delay`]). Linux siw's passive side
    /// sends its MPA Reply before it starts reading the connection, and an
    /// FPDU that arrives in between stays unread: the exchange hangs
    /// (siw's accept race, see docs/siw-interop.md). Zero by default, as `rping`
    /// does; 200 ms is ample against siw.
    pub first_fpdu_delay: Duration,
    /// A testing aid for error interoperability, not in `rping`: the
    /// client advertises, and the server uses, STags with their key octet
    /// changed ([`wrong_key`]), so the peer's (or our) first RDMA Read is
    /// refused with a Terminate (RFC 5040 section 5.2: an invalid STag).
    pub bad_stag: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            size: DEFAULT_SIZE,
            count: 0,
            verbose: false,
            validate: false,
            debug: false,
            revision: Revision::Enhanced,
            crc: false,
            markers: false,
            p2p: None,
            timeout: None,
            first_fpdu_delay: Duration::ZERO,
            bad_stag: false,
        }
    }
}

impl Options {
    /// The client's MPA settings: IRD 1 and ORD 1 (`rping_init_conn_param`),
    /// no private data.
    pub fn client_params(&self) -> LocalParams {
        LocalParams {
            revision: self.revision,
            crc: self.crc,
            markers: self.markers,
            ird: 1,
            ord: 1,
            peer_to_peer: self.p2p,
            private_data: Vec::new(),
        }
    }

    /// The server's MPA settings: the default IRD and ORD (the negotiation
    /// lowers them to what the client can take), every RTR type unless
    /// restricted, no private data.
    pub fn server_params(&self) -> LocalParams {
        LocalParams {
            revision: self.revision,
            crc: self.crc,
            markers: self.markers,
            peer_to_peer: Some(self.p2p.unwrap_or(RtrSet::ALL)),
            private_data: Vec::new(),
            ..LocalParams::default()
        }
    }

    fn check(&self) -> Result<(), RpingError> {
        if self.size < MIN_SIZE || u32::try_from(self.size).is_err() {
            return Err(RpingError::BadSize(self.size));
        }
        Ok(())
    }

    /// `stag` as this side advertises or uses it: changed by
    /// [`Options::bad_stag`].
    fn stag(&self, stag: u32) -> u32 {
        if self.bad_stag {
            wrong_key(stag)
        } else {
            stag
        }
    }

    fn debug(&self, what: fmt::Arguments<'_>) {
        if self.debug {
            println!("{what}");
        }
    }
}

/// Opens a device on uwarp's TCP over DPDK on one virtual device `vdev`
/// (as `--vdev` gives it to the EAL, e.g. `net_af_packet0,iface=uwsiw0`:
/// the port's name is the text before the first comma), with this host's
/// address `ip`/`prefix_len`. Its cores run on whichever thread waits
/// (`CoreThreads::Inline`), so an idle rping takes no CPU. The EAL starts
/// at the first call, once per process, without hugepages; the virtual
/// device is created for this device and removed with it, so a process
/// may open one again later (once the previous one is dropped).
pub fn open_dpdk_vdev(vdev: &str, ip: Ipv4Address, prefix_len: u8) -> Result<Device, Error> {
    let port = DpdkPort::Vdev(vdev.to_owned());
    let host = HostConfig::new(ip, prefix_len);
    let dpdk = DpdkConfig::new(port, host, CoreThreads::Inline);
    Device::open(DeviceConfig::dpdk(dpdk))
}

/// What a finished client run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientReport {
    /// Pings completed (and verified, with [`Options::validate`]).
    pub pings: u64,
    /// The connection's parameters.
    pub connection: Connection,
}

/// What a finished server connection did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    /// Pings served (source read, sink written, both go-aheads sent).
    pub pings: u64,
    /// The connection's parameters.
    pub connection: Connection,
}

/// Why a run failed.
#[derive(Debug)]
pub enum RpingError {
    /// A uwarp call failed (connect, accept, registration, posting).
    Api(Error),
    /// The ping size is below [`MIN_SIZE`] or over 4 GiB - 1.
    BadSize(usize),
    /// A message of the wrong size arrived ("Received bogus data").
    Bogus {
        /// Its length.
        byte_len: u32,
    },
    /// Something other than the awaited step happened (`rping`'s
    /// "wait for ... state" errors).
    Unexpected {
        /// The awaited step.
        waiting_for: &'static str,
        /// What completed instead.
        got: WcOpcode,
    },
    /// A work request failed.
    Completion(WorkCompletion),
    /// A Terminate was sent or received.
    Terminated(QpEvent),
    /// The connection closed while a step was awaited.
    Disconnected {
        /// The awaited step.
        waiting_for: &'static str,
    },
    /// The sink differs from the source after ping `ping` ("data
    /// mismatch!").
    DataMismatch {
        /// The ping number.
        ping: u64,
    },
    /// The client advertised a source larger than the server's buffer.
    SourceTooLarge {
        /// The advertised size.
        advertised: u32,
        /// The server's buffer size.
        local: usize,
    },
    /// A step took longer than [`Options::timeout`].
    Timeout {
        /// The awaited step.
        waiting_for: &'static str,
    },
}

impl fmt::Display for RpingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Api(err) => write!(f, "{err}"),
            Self::BadSize(size) => write!(f, "invalid size {size} (at least {MIN_SIZE})"),
            Self::Bogus { byte_len } => write!(f, "received bogus data, size {byte_len}"),
            Self::Unexpected { waiting_for, got } => {
                write!(f, "waiting for {waiting_for}, got a {got:?} completion")
            }
            Self::Completion(wc) => write!(f, "cq completion failed: {wc:?}"),
            Self::Terminated(event) => write!(f, "stream terminated: {event:?}"),
            Self::Disconnected { waiting_for } => {
                write!(f, "disconnected while waiting for {waiting_for}")
            }
            Self::DataMismatch { ping } => write!(f, "data mismatch at ping {ping}"),
            Self::SourceTooLarge { advertised, local } => write!(
                f,
                "the client's source ({advertised} octets) exceeds this buffer ({local} octets)"
            ),
            Self::Timeout { waiting_for } => write!(f, "timed out waiting for {waiting_for}"),
        }
    }
}

impl std::error::Error for RpingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Api(err) => Some(err),
            _ => None,
        }
    }
}

impl From<Error> for RpingError {
    fn from(err: Error) -> Self {
        Self::Api(err)
    }
}

/// What [`Endpoint::next`] found.
enum Step {
    /// An advertisement (or go-ahead) arrived.
    Recv([u8; INFO_LEN]),
    /// The RDMA Read or Write completed.
    Rdma(WcOpcode),
    /// The connection closed (the posted receive was flushed).
    Disconnected,
}

/// One side's queue pair, completion queue and buffers (`struct rping_cb`).
struct Endpoint {
    qp: QueuePair,
    cq: CompletionQueue,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    rdma_mr: MemoryRegion,
    start_mr: Option<MemoryRegion>,
    timeout: Option<Duration>,
}

impl Endpoint {
    /// `rping_setup_qp` and `rping_setup_buffers`, then the first receive.
    fn new(device: &Device, options: &Options, client: bool) -> Result<Self, RpingError> {
        let pd = device.alloc_pd()?;
        let cq = device.create_cq(SQ_DEPTH * 2);
        let init = QpInit {
            caps: QpCaps {
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            ..QpInit::new(&cq)
        };
        let qp = device.create_qp(&pd, init);
        let remote = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let endpoint = Self {
            recv_mr: pd.alloc_mr(INFO_LEN, Access::LOCAL_WRITE)?,
            send_mr: pd.alloc_mr(INFO_LEN, Access::NONE)?,
            rdma_mr: pd.alloc_mr(options.size, remote)?,
            start_mr: client
                .then(|| pd.alloc_mr(options.size, remote))
                .transpose()?,
            qp,
            cq,
            timeout: options.timeout,
        };
        options.debug(format_args!(
            "allocated & registered buffers: rdma_buf rkey {:#x}, start_buf rkey {:#x?}",
            endpoint.rdma_mr.rkey(),
            endpoint.start_mr.as_ref().map(MemoryRegion::rkey)
        ));
        endpoint.post_recv()?;
        Ok(endpoint)
    }

    fn post_recv(&self) -> Result<(), RpingError> {
        let wr = RecvWr {
            wr_id: WR_RECV,
            sgl: vec![self.recv_mr.whole()],
        };
        Ok(self.qp.post_recv(wr)?)
    }

    /// Sends the 16 octets of the send buffer.
    fn post_send(&self) -> Result<(), RpingError> {
        let wr = SendWr::new(
            WR_SEND,
            SendOp::Send,
            Payload::Sgl(vec![self.send_mr.whole()]),
        );
        Ok(self.qp.post_send(wr)?)
    }

    /// `rping_format_send`: advertises `region` in the send buffer.
    fn format_send(&self, region: &MemoryRegion, options: &Options) -> Result<(), RpingError> {
        let mut info = RdmaInfo::of(region);
        info.rkey = options.stag(info.rkey);
        options.debug(format_args!(
            "RDMA addr {:x} rkey {:x} len {}",
            info.buf, info.rkey, info.size
        ));
        self.send_mr
            .buffer()
            .write_at(0, &info.to_bytes())
            .map_err(Error::Mem)?;
        Ok(())
    }

    /// The next step, as `rping_cq_event_handler` sees it: Send completions
    /// are skipped, a receive is checked and re-posted, a flushed receive
    /// means the connection closed.
    fn next(&self, waiting_for: &'static str) -> Result<Step, RpingError> {
        let deadline = self.timeout.map(|timeout| Instant::now() + timeout);
        loop {
            let wc = match self.cq.poll_one() {
                Some(wc) => wc,
                None => {
                    // Arm, then look again: a completion that lands after
                    // the second look raises the event the wait sleeps on.
                    self.cq.req_notify(false);
                    match self.cq.poll_one() {
                        Some(wc) => wc,
                        None => {
                            self.wait(deadline, waiting_for)?;
                            continue;
                        }
                    }
                }
            };
            match (wc.status, wc.opcode) {
                (WcStatus::Success, WcOpcode::Send) => continue,
                (WcStatus::Success, WcOpcode::Recv) => {
                    if wc.byte_len as usize != INFO_LEN {
                        return Err(RpingError::Bogus {
                            byte_len: wc.byte_len,
                        });
                    }
                    let mut info = [0u8; INFO_LEN];
                    self.recv_mr
                        .buffer()
                        .read_at(0, &mut info)
                        .map_err(Error::Mem)?;
                    self.post_recv()?;
                    return Ok(Step::Recv(info));
                }
                (WcStatus::Success, opcode) => return Ok(Step::Rdma(opcode)),
                (WcStatus::WrFlushError, _) => {
                    return match self.qp.take_terminate() {
                        Some(event) => Err(RpingError::Terminated(event)),
                        None => Ok(Step::Disconnected),
                    };
                }
                _ => return Err(RpingError::Completion(wc)),
            }
        }
    }

    /// Sleeps until the armed completion queue raises an event (or a short
    /// while passes); fails once `deadline` is behind.
    fn wait(&self, deadline: Option<Instant>, waiting_for: &'static str) -> Result<(), RpingError> {
        const SLICE: Duration = Duration::from_millis(50);
        let slice = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(RpingError::Timeout { waiting_for });
                }
                left.min(SLICE)
            }
            None => SLICE,
        };
        self.cq.wait_event(slice);
        Ok(())
    }

    /// `rping_disconnect`, then waits for the close to finish.
    fn close(&self) {
        self.qp.disconnect();
        let wait = self.timeout.unwrap_or(Duration::from_secs(10));
        if !self.qp.wait_closed(wait) {
            self.qp.abort();
            self.qp.wait_closed(Duration::from_secs(1));
        }
    }

    fn read_buffer(region: &MemoryRegion) -> Result<Vec<u8>, RpingError> {
        let mut data = vec![0u8; region.len()];
        region.buffer().read_at(0, &mut data).map_err(Error::Mem)?;
        Ok(data)
    }

    /// The next message: `None` when the connection closed instead.
    fn expect_recv(&self, waiting_for: &'static str) -> Result<Option<RdmaInfo>, RpingError> {
        match self.next(waiting_for)? {
            Step::Recv(bytes) => Ok(RdmaInfo::from_bytes(&bytes)),
            Step::Rdma(got) => Err(RpingError::Unexpected { waiting_for, got }),
            Step::Disconnected => Ok(None),
        }
    }

    /// The completion of the RDMA Read or Write just posted.
    fn expect_rdma(&self, want: WcOpcode, waiting_for: &'static str) -> Result<(), RpingError> {
        match self.next(waiting_for)? {
            Step::Rdma(got) if got == want => Ok(()),
            Step::Rdma(got) => Err(RpingError::Unexpected { waiting_for, got }),
            Step::Recv(_) => Err(RpingError::Unexpected {
                waiting_for,
                got: WcOpcode::Recv,
            }),
            Step::Disconnected => Err(RpingError::Disconnected { waiting_for }),
        }
    }
}

/// Runs the client side (`rping -c`): connects to `addr` and pings
/// [`Options::count`] times.
pub fn run_client(
    device: &Device,
    addr: SocketAddr,
    options: &Options,
) -> Result<ClientReport, RpingError> {
    options.check()?;
    let endpoint = Endpoint::new(device, options, true)?;
    let params = ConnectParams {
        mpa: options.client_params(),
        timeout: options.timeout.unwrap_or(ConnectParams::default().timeout),
        revision_1_fallback: false,
        first_fpdu_delay: options.first_fpdu_delay,
    };
    let connection = device.connect(addr, &endpoint.qp, params)?;
    options.debug(format_args!(
        "rdma_connect successful: {:?}",
        connection.negotiated
    ));
    let result = client_loop(&endpoint, options);
    endpoint.close();
    let pings = result?;
    Ok(ClientReport { pings, connection })
}

/// `rping_test_client`.
fn client_loop(endpoint: &Endpoint, options: &Options) -> Result<u64, RpingError> {
    let Some(start_mr) = endpoint.start_mr.as_ref() else {
        return Err(RpingError::Api(Error::WrongState(
            "a client needs a source buffer",
        )));
    };
    let mut source = vec![0u8; options.size];
    let mut ping = 0u64;
    while options.count == 0 || ping < options.count {
        // Put some ascii text in the buffer.
        fill_ping(&mut source, ping);
        start_mr.buffer().write_at(0, &source).map_err(Error::Mem)?;
        endpoint.format_send(start_mr, options)?;
        endpoint.post_send()?;

        // Wait for the server to ACK (its go-ahead after the RDMA Read).
        const WRITE_ADV: &str = "RDMA_WRITE_ADV (the go-ahead after the Read)";
        if endpoint.expect_recv(WRITE_ADV)?.is_none() {
            return Err(RpingError::Disconnected {
                waiting_for: WRITE_ADV,
            });
        }

        endpoint.format_send(&endpoint.rdma_mr, options)?;
        endpoint.post_send()?;

        // Wait for the server to say the RDMA Write is complete.
        const WRITE_COMPLETE: &str = "RDMA_WRITE_COMPLETE (the go-ahead after the Write)";
        if endpoint.expect_recv(WRITE_COMPLETE)?.is_none() {
            return Err(RpingError::Disconnected {
                waiting_for: WRITE_COMPLETE,
            });
        }

        let sink = Endpoint::read_buffer(&endpoint.rdma_mr)?;
        if options.validate && sink != source {
            return Err(RpingError::DataMismatch { ping });
        }
        if options.verbose {
            println!("ping data: {}", String::from_utf8_lossy(c_string(&sink)));
        }
        ping += 1;
    }
    Ok(ping)
}

/// Serves the next connection request on `listener` (`rping -s`):
/// waits up to [`Options::timeout`] for it, then runs
/// [`serve_connection`].
pub fn serve_one(
    device: &Device,
    listener: &Listener,
    options: &Options,
) -> Result<ServerReport, RpingError> {
    let request = next_request(listener, options.timeout)?;
    serve_connection(device, request, options)
}

/// Serves connections until `max_connections` have been accepted (`None`:
/// for ever), each on its own thread with its own queue pair and buffers,
/// as `rping -s -P` does. Returns each connection's outcome in the order
/// they finished; a failed connection is also reported on stderr as it
/// ends, like `rping`'s server threads.
pub fn serve_persistent(
    device: &Device,
    listener: &Listener,
    options: &Options,
    max_connections: Option<u64>,
) -> Result<Vec<Result<ServerReport, RpingError>>, RpingError> {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let mut accepted = 0u64;
        while max_connections.is_none_or(|max| accepted < max) {
            let request = next_request(listener, options.timeout)?;
            accepted += 1;
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                let result = serve_connection(device, request, options);
                if let Err(err) = &result {
                    eprintln!("rping server connection failed: {err}");
                }
                let _ = done_tx.send(result);
            });
        }
        Ok::<(), RpingError>(())
    })?;
    drop(done_tx);
    Ok(done_rx.into_iter().collect())
}

fn next_request(
    listener: &Listener,
    timeout: Option<Duration>,
) -> Result<IncomingRequest, RpingError> {
    match timeout {
        Some(timeout) => Ok(listener.get_request(timeout)?),
        None => loop {
            match listener.get_request(Duration::from_secs(1)) {
                Err(Error::Timeout) => continue,
                other => return Ok(other?),
            }
        },
    }
}

/// Serves one connection request (`rping_run_server` after
/// `CONNECT_REQUEST`): sets up a queue pair and buffers, posts the
/// receive, accepts, and answers pings until the client disconnects.
pub fn serve_connection(
    device: &Device,
    request: IncomingRequest,
    options: &Options,
) -> Result<ServerReport, RpingError> {
    options.check()?;
    options.debug(format_args!(
        "connect request from {}: {:?}",
        request.peer_addr, request.request
    ));
    let endpoint = Endpoint::new(device, options, false)?;
    let connection = request.accept(&endpoint.qp, options.server_params())?;
    options.debug(format_args!("accepted: {:?}", connection.negotiated));
    let result = server_loop(&endpoint, options);
    endpoint.close();
    let pings = result?;
    Ok(ServerReport { pings, connection })
}

/// `rping_test_server`: returns the pings served once the client has
/// disconnected.
fn server_loop(endpoint: &Endpoint, options: &Options) -> Result<u64, RpingError> {
    let mut pings = 0u64;
    loop {
        // Wait for the client's source STag/TO/length.
        const READ_ADV: &str = "RDMA_READ_ADV (the source advertisement)";
        let Some(source) = endpoint.expect_recv(READ_ADV)? else {
            options.debug(format_args!("server DISCONNECT EVENT..."));
            return Ok(pings);
        };
        options.debug(format_args!(
            "Received rkey {:x} addr {:x} len {} from peer",
            source.rkey, source.buf, source.size
        ));
        if source.size as usize > endpoint.rdma_mr.len() {
            return Err(RpingError::SourceTooLarge {
                advertised: source.size,
                local: endpoint.rdma_mr.len(),
            });
        }

        // Issue the RDMA Read.
        let read = SendWr::new(
            WR_RDMA,
            SendOp::Read {
                remote_addr: source.buf,
                rkey: options.stag(source.rkey),
            },
            Payload::Sgl(vec![endpoint.rdma_mr.sge(0, source.size)]),
        );
        endpoint.qp.post_send(read)?;
        options.debug(format_args!("server posted rdma read req"));
        endpoint.expect_rdma(WcOpcode::Read, "RDMA_READ_COMPLETE")?;
        options.debug(format_args!("server received read complete"));

        let data = Endpoint::read_buffer(&endpoint.rdma_mr)?;
        let text = c_string(&data);
        if options.verbose {
            println!("server ping data: {}", String::from_utf8_lossy(text));
        }

        // Tell the client to continue.
        endpoint.post_send()?;
        options.debug(format_args!("server posted go ahead"));

        // Wait for the client's sink STag/TO/length.
        const WRITE_ADV: &str = "RDMA_WRITE_ADV (the sink advertisement)";
        let Some(sink) = endpoint.expect_recv(WRITE_ADV)? else {
            return Err(RpingError::Disconnected {
                waiting_for: WRITE_ADV,
            });
        };
        options.debug(format_args!("server received sink adv"));

        // RDMA Write the echo: the string and its NUL.
        let len = (text.len() + 1).min(data.len());
        let write = SendWr::new(
            WR_RDMA,
            SendOp::Write {
                remote_addr: sink.buf,
                rkey: options.stag(sink.rkey),
            },
            // In range: len <= the buffer's size, which fits in a u32.
            Payload::Sgl(vec![endpoint.rdma_mr.sge(0, len as u32)]),
        );
        options.debug(format_args!(
            "rdma write from lkey {:x} laddr {:x} len {}",
            endpoint.rdma_mr.lkey().raw(),
            endpoint.rdma_mr.addr(),
            len
        ));
        endpoint.qp.post_send(write)?;
        endpoint.expect_rdma(WcOpcode::Write, "RDMA_WRITE_COMPLETE")?;
        options.debug(format_args!("server rdma write complete"));

        // Tell the client to begin again.
        endpoint.post_send()?;
        options.debug(format_args!("server posted go ahead"));
        pings += 1;
    }
}
