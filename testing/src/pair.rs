//! Shared set-up for the socket-transport tests: two queue pairs joined
//! over loopback TCP, each on its own device (so each end has its own
//! control and dataplane threads, as two hosts would); connected pairs on
//! any transport ([`connect_devices`]); and memory the application owns,
//! with guard octets around it ([`AppMemory`]).

use std::time::Duration;

use uwarp::*;

/// How long any single wait in a test may take before it fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// One end of a connection.
#[derive(Debug)]
pub struct End {
    /// The end's own device.
    pub device: Device,
    /// Its protection domain.
    pub pd: ProtectionDomain,
    /// The completion queue of both its directions.
    pub cq: CompletionQueue,
    /// Its queue pair, connected.
    pub qp: QueuePair,
    /// What the connection manager said of the connection.
    pub connection: Connection,
}

impl End {
    /// Waits for the next completion and checks it succeeded.
    pub fn expect_ok(&self) -> WorkCompletion {
        let wc = self.cq.poll_blocking(WAIT).expect("a completion in time");
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        wc
    }

    /// Checks that this end sent a Terminate with `error` and `peer`
    /// received it (each end's next queue-pair event).
    pub fn expect_terminate_to(&self, peer: &End, error: TermError) {
        assert_eq!(
            self.qp.next_event(WAIT),
            Some(QpEvent::TerminateSent(error))
        );
        assert_eq!(
            peer.qp.next_event(WAIT),
            Some(QpEvent::TerminateReceived(error))
        );
    }

    /// Waits for the next completion, whatever its status.
    pub fn next(&self) -> WorkCompletion {
        self.cq.poll_blocking(WAIT).expect("a completion in time")
    }
}

/// The depth of the completion queues [`device`] makes.
pub const CQ_DEPTH: usize = 4096;

/// A device with one protection domain and a completion queue.
pub fn device() -> (Device, ProtectionDomain, CompletionQueue) {
    device_with_cq(CQ_DEPTH)
}

/// A device with one protection domain and a completion queue of `depth`.
pub fn device_with_cq(depth: usize) -> (Device, ProtectionDomain, CompletionQueue) {
    let device = Device::open(DeviceConfig::default()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let cq = device.create_cq(depth);
    (device, pd, cq)
}

/// Connects a client with `client` settings to a server accepting with
/// `server` settings; `prepare` runs on each queue pair before it connects
/// (to post receives). Returns (client, server).
pub fn connect_with(
    client: ConnectParams,
    server: LocalParams,
    prepare: impl Fn(&ProtectionDomain, &QueuePair) + Send + Sync + Clone + 'static,
) -> Result<(End, End), Error> {
    connect_with_cq(CQ_DEPTH, client, server, prepare)
}

/// [`connect_with`], with completion queues of `depth` on both ends.
pub fn connect_with_cq(
    depth: usize,
    client: ConnectParams,
    server: LocalParams,
    prepare: impl Fn(&ProtectionDomain, &QueuePair) + Send + Sync + Clone + 'static,
) -> Result<(End, End), Error> {
    connect_devices(Devices::sockets()?, depth, client, server, prepare)
}

/// Two devices that reach each other, and where the server listens.
pub struct Devices {
    /// The passive side's device.
    pub server: Device,
    /// The active side's device.
    pub client: Device,
    /// The server's listening address (port 0: any free port).
    pub listen: &'static str,
}

impl Devices {
    /// Two socket-transport devices with default settings, the server
    /// listening on loopback.
    pub fn sockets() -> Result<Self, Error> {
        Ok(Devices {
            server: Device::open(DeviceConfig::default())?,
            client: Device::open(DeviceConfig::default())?,
            listen: "127.0.0.1:0",
        })
    }
}

/// [`connect_with_cq`] between `devices`, on any transport.
pub fn connect_devices(
    devices: Devices,
    depth: usize,
    client: ConnectParams,
    server: LocalParams,
    prepare: impl Fn(&ProtectionDomain, &QueuePair) + Send + Sync + Clone + 'static,
) -> Result<(End, End), Error> {
    let make_cq = move |device: &Device, _: Role| device.create_cq(depth);
    connect_devices_with_cqs(devices, make_cq, client, server, prepare)
}

/// Which end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The passive side.
    Server,
    /// The active side.
    Client,
}

/// [`connect_devices`], each end's completion queue made by `make_cq`
/// from its device and role.
pub fn connect_devices_with_cqs(
    devices: Devices,
    make_cq: impl Fn(&Device, Role) -> CompletionQueue,
    client: ConnectParams,
    server: LocalParams,
    prepare: impl Fn(&ProtectionDomain, &QueuePair) + Send + Sync + Clone + 'static,
) -> Result<(End, End), Error> {
    let Devices {
        server: sdev,
        client: cdev,
        listen,
    } = devices;
    let (spd, scq) = (sdev.alloc_pd()?, make_cq(&sdev, Role::Server));
    let listener = sdev.listen(listen)?;
    let addr = listener.local_addr();
    let sqp = sdev.create_qp(&spd, QpInit::new(&scq));
    prepare(&spd, &sqp);
    let server_qp = sqp.clone();
    let accept = std::thread::spawn(move || {
        let request = listener.get_request(WAIT)?;
        request.accept(&server_qp, server)
    });
    let (cpd, ccq) = (cdev.alloc_pd()?, make_cq(&cdev, Role::Client));
    let cqp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    prepare(&cpd, &cqp);
    let client_result = cdev.connect(addr, &cqp, client);
    let server_result = accept.join().unwrap();
    let cconn = client_result?;
    let sconn = server_result?;
    Ok((
        End {
            device: cdev,
            pd: cpd,
            cq: ccq,
            qp: cqp,
            connection: cconn,
        },
        End {
            device: sdev,
            pd: spd,
            cq: scq,
            qp: sqp,
            connection: sconn,
        },
    ))
}

/// Where a case generic over the transport runs (see
/// [`on_every_transport!`](crate::on_every_transport)).
pub trait Transport {
    /// Two devices that reach each other.
    fn devices() -> Devices;
}

/// The socket transport over loopback.
pub struct Socket;

impl Transport for Socket {
    fn devices() -> Devices {
        Devices::sockets().unwrap()
    }
}

/// The DPDK transport on a net_ring pair of this process: 10.69.0.1 (the
/// server) and 10.69.0.2, cores on threads of their own.
pub struct Dpdk;

impl Transport for Dpdk {
    fn devices() -> Devices {
        let (server, client) =
            crate::dpdk_rig::device_pair(69, 1024, CoreThreads::Spawned, |dpdk| {
                crate::dpdk_rig::small_pool(&mut dpdk.host)
            });
        Devices {
            server,
            client,
            listen: "10.69.0.1:0",
        }
    }
}

/// A connection with default settings and nothing prepared.
pub fn connect() -> (End, End) {
    connect_with(ConnectParams::default(), LocalParams::default(), |_, _| {}).unwrap()
}

/// A hand-made MPA Reply that accepts a revision-2 Request without CRCs,
/// Markers or peer-to-peer, with IRD and ORD `ird_ord` in its enhanced
/// block and no other private data (RFC 5044 section 7.1, RFC 6581
/// section 9).
pub fn hand_made_reply(ird_ord: (u16, u16)) -> Vec<u8> {
    let mut reply = b"MPA ID Rep Frame".to_vec();
    // Flags: only S (the enhanced block follows); revision 2; 4 octets of
    // private data.
    reply.extend_from_slice(&[0x10, 2, 0, 4]);
    reply.extend_from_slice(&ird_ord.0.to_be_bytes());
    reply.extend_from_slice(&ird_ord.1.to_be_bytes());
    reply
}

/// A hand-made MPA responder on a kernel socket: accepts one connection,
/// reads the revision-2 Request (no private data), answers with
/// [`hand_made_reply`], and hands back the socket, read no further.
pub fn hand_made_responder(
    listener: std::net::TcpListener,
    ird_ord: (u16, u16),
) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let (mut stream, _) = listener.accept().unwrap();
    let mut request = [0u8; 24];
    stream.read_exact(&mut request).unwrap();
    stream.write_all(&hand_made_reply(ird_ord)).unwrap();
    stream
}

/// Fills a region with a pattern derived from `seed`; returns the octets.
pub fn fill(mr: &MemoryRegion, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..mr.len())
        .map(|i| {
            (i as u8)
                .wrapping_mul(29)
                .wrapping_add(seed ^ (i >> 8) as u8)
        })
        .collect();
    mr.buffer().write_at(0, &data).unwrap();
    data
}

/// The contents of a region.
pub fn contents(mr: &MemoryRegion) -> Vec<u8> {
    let mut out = vec![0; mr.len()];
    mr.buffer().read_at(0, &mut out).unwrap();
    out
}

/// Guard octets of an [`AppMemory`] before its range: an odd number, so
/// the range is unaligned.
pub const APP_HEAD: usize = 3;
/// Guard octets of an [`AppMemory`] after its range.
pub const APP_TAIL: usize = 13;
/// What an [`AppMemory`]'s guard octets hold.
pub const APP_GUARD: u8 = 0xC3;

/// Memory the application owns, to register with
/// [`ProtectionDomain::register_memory`]: a heap `Vec<u8>` with `len`
/// octets at offset [`APP_HEAD`] (unaligned), between guard octets that
/// must never change. Every octet starts as [`APP_GUARD`].
///
/// While it is registered the `Vec` is only reached through the raw
/// pointer taken once at the start ([`range`](Self::range)): no reference
/// to its octets is made, as the access contract of [`MemoryBuffer`]
/// asks. Dropping it frees the memory.
#[derive(Debug)]
pub struct AppMemory {
    /// The allocation, guards included; not touched until it is dropped.
    octets: Vec<u8>,
    /// `octets.as_mut_ptr()`, taken once.
    base: *mut u8,
    /// Octets of the range.
    len: usize,
}

impl AppMemory {
    /// `len` octets between guards.
    pub fn new(len: usize) -> Self {
        let mut octets = vec![APP_GUARD; APP_HEAD + len + APP_TAIL];
        let base = octets.as_mut_ptr();
        Self { octets, base, len }
    }

    /// The address of the range's first octet, to register.
    pub fn range(&self) -> *mut u8 {
        self.base.wrapping_add(APP_HEAD)
    }

    /// Octets of the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every octet of the allocation, guards included, copied through the
    /// raw pointer.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0; self.octets.len()];
        // SAFETY: `base` points at the `octets.len()` octets of the live
        // allocation; `out` is a distinct allocation. Reading through the
        // raw pointer makes no reference to the octets, which a placement
        // may be writing (it would tear values, which the tests' checks
        // would catch, nothing else).
        unsafe { std::ptr::copy_nonoverlapping(self.base, out.as_mut_ptr(), out.len()) };
        out
    }

    /// Whether every guard octet still holds [`APP_GUARD`].
    pub fn guards_intact(&self) -> bool {
        let all = self.snapshot();
        let (head, rest) = all.split_at(APP_HEAD);
        head.iter()
            .chain(&rest[self.len..])
            .all(|&octet| octet == APP_GUARD)
    }
}

/// Runs each named case, a function generic over a `Transport` of the
/// test file, on every transport: `socket::CASE` with the file's
/// `Socket` and `dpdk::CASE` with its `Dpdk`.
#[macro_export]
macro_rules! on_every_transport {
    ($($case:ident),* $(,)?) => {
        mod socket {
            $(#[test] fn $case() { super::$case::<super::Socket>() })*
        }
        mod dpdk {
            $(#[test] fn $case() { super::$case::<super::Dpdk>() })*
        }
    };
}
