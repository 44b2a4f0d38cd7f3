//! The MPA negotiation matrix (RFC 5044 section 7.1, RFC 6581 sections 9
//! and 10): revisions, CRC and Markers in each direction, peer-to-peer
//! with each RTR, IRD/ORD, rejects with private data, startup timeouts on
//! both sides, a responder that breaks the IRD/ORD rule, and the
//! revision-1 fallback (retried once, however often the responder hangs
//! up), on both transports (module `socket`: devices
//! over loopback; module `dpdk`: devices on a net_ring pair in this
//! process, their cores on threads). Every connection that comes up
//! carries a Send each way, checked octet for octet, and closes.
//!
//! The cases that need a peer that is not uwarp (a hand-made Reply, a
//! client that never sends its Request, a server that hangs up on every
//! Request) play it on a [`RawPeer`]: kernel
//! sockets beside a socket-transport device, uwarp's bare TCP on DPDK
//! (no MPA) beside a DPDK device.

use uwarp_testing::dpdk_rig;
use uwarp_testing::pair;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk_rig::{device_beside_tcp_host, device_pair, lock, small_pool, stream_until_closed};
use dpdk_rig::{Log, TestApp};
use pair::*;
use uwarp::*;
use uwarp_control::TcpHost;
use uwarp_stack::mpa::{NegotiationError, StartupError};
use uwarp_stack::wire::mpa::{StartupFrame, HEADER_LEN};

/// Two devices that reach each other, and where the server listens.
struct Testbed {
    server: Device,
    client: Device,
    /// The server's listening address (port 0: any free port).
    listen: &'static str,
}

/// A TCP peer that is not uwarp's iWARP, on the network of a device.
trait RawPeer {
    /// Listens; its first connection sends `first` as soon as it is up.
    /// Returns where it listens, and a wait for the other side to close
    /// that returns every octet that came before.
    fn serve_one(&self, first: Vec<u8>) -> (SocketAddr, Box<dyn FnOnce() -> Vec<u8> + '_>);

    /// Connects to `addr` and sends nothing; returns the octets that came
    /// before the other side closed.
    fn connect_silent(&self, addr: SocketAddr) -> Vec<u8>;

    /// Listens; hangs up on each of its first `most` connections once
    /// their MPA Request is in, without a Reply (as a revision-1
    /// responder does with an enhanced Request, RFC 6581 section 10), and
    /// answers none after those. Returns where it listens, and a stop
    /// that returns the revision of every Request it hung up on, in
    /// order.
    fn hang_up_on_requests(
        &self,
        most: usize,
    ) -> (SocketAddr, Box<dyn FnOnce() -> Vec<Revision> + '_>);
}

/// Where the cases run.
trait Transport {
    /// Two devices that reach each other.
    fn testbed() -> Testbed;

    /// A device opened with `config`, a raw peer on its network, and where
    /// the device listens.
    fn beside_a_raw_peer(config: DeviceConfig) -> (Device, Box<dyn RawPeer>, &'static str);
}

/// The socket transport over loopback.
struct Socket;

impl Transport for Socket {
    fn testbed() -> Testbed {
        Testbed {
            server: Device::open(DeviceConfig::default()).unwrap(),
            client: Device::open(DeviceConfig::default()).unwrap(),
            listen: "127.0.0.1:0",
        }
    }

    fn beside_a_raw_peer(config: DeviceConfig) -> (Device, Box<dyn RawPeer>, &'static str) {
        (
            Device::open(config).unwrap(),
            Box::new(KernelPeer),
            "127.0.0.1:0",
        )
    }
}

/// Kernel sockets on loopback.
struct KernelPeer;

impl RawPeer for KernelPeer {
    fn serve_one(&self, first: Vec<u8>) -> (SocketAddr, Box<dyn FnOnce() -> Vec<u8> + '_>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.write_all(&first).unwrap();
            read_until_closed(stream)
        });
        (addr, Box::new(move || served.join().unwrap()))
    }

    fn connect_silent(&self, addr: SocketAddr) -> Vec<u8> {
        read_until_closed(TcpStream::connect(addr).unwrap())
    }

    fn hang_up_on_requests(
        &self,
        most: usize,
    ) -> (SocketAddr, Box<dyn FnOnce() -> Vec<Revision> + '_>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let served = std::thread::spawn(move || {
            let mut revisions = Vec::new();
            // Past `most` the listener closes: later connections are
            // refused.
            while revisions.len() < most && !stopped.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        revisions.push(read_request(&mut stream));
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(err) => panic!("accept: {err}"),
                }
            }
            revisions
        });
        let stop = move || {
            stop.store(true, Ordering::Release);
            served.join().unwrap()
        };
        (addr, Box::new(stop))
    }
}

/// Reads the MPA Request that opens `stream`, all of it (so that closing
/// sends a FIN, not a RST), and returns its revision.
fn read_request(stream: &mut TcpStream) -> Revision {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut frame = vec![0; HEADER_LEN];
    stream.read_exact(&mut frame).unwrap();
    frame.resize(StartupFrame::new_unchecked(&frame).frame_len(), 0);
    stream.read_exact(&mut frame[HEADER_LEN..]).unwrap();
    revision_of(&frame)
}

/// The revision of the Request `frame`.
fn revision_of(frame: &[u8]) -> Revision {
    let frame = StartupFrame::new_checked(frame).expect("a whole Request");
    Revision::from_u8(frame.revision()).unwrap()
}

/// What `stream` receives until its peer closes (within [`WAIT`]).
fn read_until_closed(mut stream: TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut received = Vec::new();
    stream
        .read_to_end(&mut received)
        .expect("the peer closes in time");
    received
}

/// The subnet of the DPDK cases: 10.67.0.1 is the device (the server of
/// a testbed), 10.67.0.2 the other end.
const SUBNET: u8 = 67;

/// The DPDK transport on net_ring pairs.
struct Dpdk;

impl Transport for Dpdk {
    fn testbed() -> Testbed {
        let (server, client) = device_pair(SUBNET, 1024, CoreThreads::Spawned, |dpdk| {
            small_pool(&mut dpdk.host)
        });
        Testbed {
            server,
            client,
            listen: "10.67.0.1:0",
        }
    }

    fn beside_a_raw_peer(config: DeviceConfig) -> (Device, Box<dyn RawPeer>, &'static str) {
        let (device, host) = device_beside_tcp_host(SUBNET, config, small_pool);
        (device, Box::new(BareTcp(host)), "10.67.0.1:0")
    }
}

/// uwarp's bare TCP on DPDK, at 10.67.0.2.
struct BareTcp(TcpHost<TestApp>);

/// The port a [`BareTcp`] peer serves on.
const BARE_PORT: u16 = 7000;

impl RawPeer for BareTcp {
    fn serve_one(&self, first: Vec<u8>) -> (SocketAddr, Box<dyn FnOnce() -> Vec<u8> + '_>) {
        let log = Log::default();
        lock(&log).outbox = first;
        let app_log = log.clone();
        self.0
            .listen(BARE_PORT, move |_| TestApp::new(app_log.clone()))
            .unwrap();
        let addr = SocketAddrV4::new(Ipv4Addr::new(10, SUBNET, 0, 2), BARE_PORT);
        (
            addr.into(),
            Box::new(move || stream_until_closed(&log, WAIT)),
        )
    }

    fn connect_silent(&self, addr: SocketAddr) -> Vec<u8> {
        let SocketAddr::V4(addr) = addr else {
            panic!("the DPDK transport is IPv4 only")
        };
        let log = Log::default();
        self.0.connect(addr, TestApp::new(log.clone())).unwrap();
        stream_until_closed(&log, WAIT)
    }

    fn hang_up_on_requests(
        &self,
        most: usize,
    ) -> (SocketAddr, Box<dyn FnOnce() -> Vec<Revision> + '_>) {
        let logs = Arc::new(Mutex::new(Vec::<Log>::new()));
        let made = Arc::clone(&logs);
        self.0
            .listen(BARE_PORT, move |_| {
                let log = Log::default();
                let mut made = made.lock().unwrap();
                if made.len() < most {
                    // The shortest Request is its header.
                    lock(&log).close_after = Some(HEADER_LEN as u64);
                }
                made.push(log.clone());
                TestApp::new(log)
            })
            .unwrap();
        let addr = SocketAddrV4::new(Ipv4Addr::new(10, SUBNET, 0, 2), BARE_PORT);
        let stop = move || {
            let logs = logs.lock().unwrap();
            logs.iter()
                .map(|log| revision_of(&lock(log).stream()))
                .collect()
        };
        (addr.into(), Box::new(stop))
    }
}

uwarp_testing::on_every_transport!(
    revisions_crc_and_markers_in_every_combination,
    peer_to_peer_with_each_rtr_lets_the_server_speak_first,
    peer_to_peer_without_a_common_rtr_fails_on_the_initiator,
    a_responder_ord_above_the_initiator_ird_is_insufficient_ird,
    ird_and_ord_follow_rfc_6581,
    a_reject_carries_private_data_back,
    the_initiator_times_out_when_no_reply_comes,
    the_responder_closes_when_no_request_comes,
    an_enhanced_initiator_falls_back_to_revision_1_when_allowed,
    the_revision_1_retry_is_made_once,
    the_initiator_holds_its_first_fpdu_back_for_the_delay,
    a_send_behind_the_reply_finds_a_receive_posted_before_connect,
);

/// One end of a connection on a testbed's device.
struct Side {
    _pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    connection: Connection,
}

impl Side {
    /// Waits for the next completion and checks it succeeded.
    fn expect_ok(&self) -> WorkCompletion {
        let wc = self.cq.poll_blocking(WAIT).expect("a completion in time");
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        wc
    }
}

/// A protection domain, a completion queue and a queue pair on `device`,
/// with one receive of 64 octets posted.
fn queue_pair(device: &Device) -> (ProtectionDomain, CompletionQueue, QueuePair) {
    let pd = device.alloc_pd().unwrap();
    let cq = device.create_cq(64);
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let inbox = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    qp.post_recv(RecvWr {
        wr_id: 100,
        sgl: vec![inbox.whole()],
    })
    .unwrap();
    // The region must outlive the receive: keep it for the process.
    std::mem::forget(inbox);
    (pd, cq, qp)
}

/// Connects a client with `client` settings to a server that accepts
/// the first request with `server` settings. Returns (client, server).
fn connect(
    bed: &Testbed,
    client: ConnectParams,
    server: LocalParams,
) -> Result<(Side, Side), Error> {
    let listener = bed.server.listen(bed.listen)?;
    let addr = listener.local_addr();
    let (spd, scq, sqp) = queue_pair(&bed.server);
    let (cpd, ccq, cqp) = queue_pair(&bed.client);
    let (client_result, server_result) = std::thread::scope(|scope| {
        let accept = scope.spawn(|| listener.get_request(WAIT)?.accept(&sqp, server));
        let client_result = bed.client.connect(addr, &cqp, client);
        (client_result, accept.join().unwrap())
    });
    let client = Side {
        _pd: cpd,
        cq: ccq,
        qp: cqp,
        connection: client_result?,
    };
    let server = Side {
        _pd: spd,
        cq: scq,
        qp: sqp,
        connection: server_result?,
    };
    Ok((client, server))
}

/// A Send each way (the server's first when peer-to-peer lets it), then
/// the client closes and both ends see the stream closed.
fn exchange_and_close(client: &Side, server: &Side, server_first: bool) {
    let to_client = SendWr::new(1, SendOp::Send, Payload::Inline(b"from server".to_vec()));
    let to_server = SendWr::new(2, SendOp::Send, Payload::Inline(b"from client".to_vec()));
    if server_first {
        server.qp.post_send(to_client.clone()).unwrap();
        let wc = client.expect_ok();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::Recv, 11));
    }
    client.qp.post_send(to_server).unwrap();
    if !server_first {
        server.qp.post_send(to_client).unwrap();
    }
    let want_client = if server_first { 1 } else { 2 };
    for (side, want) in [(client, want_client), (server, 2)] {
        for _ in 0..want {
            side.expect_ok();
        }
    }
    client.qp.disconnect();
    assert!(client.qp.wait_closed(WAIT));
    assert!(server.qp.wait_closed(WAIT));
}

fn params(revision: Revision, crc: bool, markers: bool) -> LocalParams {
    LocalParams {
        revision,
        crc,
        markers,
        ..LocalParams::default()
    }
}

/// `mpa` for a connect, with the default timeout.
fn connect_params(mpa: LocalParams) -> ConnectParams {
    ConnectParams {
        mpa,
        ..ConnectParams::default()
    }
}

/// Whether a connect failed in negotiation with `expected`.
fn failed_with(result: &Result<Connection, Error>, expected: NegotiationError) -> bool {
    matches!(result, Err(Error::Startup(StartupError::Negotiation(e))) if *e == expected)
}

fn revisions_crc_and_markers_in_every_combination<T: Transport>() {
    let bed = &T::testbed();
    for client_rev in [Revision::Rfc5044, Revision::Enhanced] {
        for server_rev in [Revision::Rfc5044, Revision::Enhanced] {
            for bits in 0..16u8 {
                let client = params(client_rev, bits & 1 != 0, bits & 2 != 0);
                let server = params(server_rev, bits & 4 != 0, bits & 8 != 0);
                let label = format!("{client_rev:?}/{server_rev:?} bits {bits:04b}");
                let result = connect(bed, connect_params(client.clone()), server.clone());
                if client_rev == Revision::Enhanced && server_rev == Revision::Rfc5044 {
                    // A revision-1 responder cannot answer an enhanced
                    // Request and closes (RFC 6581 section 10): the
                    // initiator hears it at once, not by its timeout.
                    let closed = StartupError::ClosedBeforeFrame {
                        retry_with_revision_1: true,
                    };
                    assert!(
                        matches!(&result, Err(Error::Startup(e)) if *e == closed),
                        "{label}: {:?}",
                        result.err()
                    );
                    continue;
                }
                let (c, s) = result.unwrap_or_else(|e| panic!("{label}: {e}"));
                let n = c.connection.negotiated;
                assert_eq!(n.crc, client.crc || server.crc, "{label}");
                assert_eq!(
                    (n.markers_tx, n.markers_rx),
                    (server.markers, client.markers),
                    "{label}"
                );
                assert_eq!(
                    s.connection.negotiated.markers_tx, client.markers,
                    "{label}"
                );
                assert_eq!(n.revision, client_rev.min(server_rev), "{label}");
                exchange_and_close(&c, &s, false);
            }
        }
    }
}

fn peer_to_peer_with_each_rtr_lets_the_server_speak_first<T: Transport>() {
    let bed = &T::testbed();
    for rtr in [Rtr::Write, Rtr::Read, Rtr::Send] {
        let client = LocalParams {
            peer_to_peer: Some(RtrSet::only(rtr)),
            ..LocalParams::default()
        };
        let server = LocalParams {
            peer_to_peer: Some(RtrSet::ALL),
            ..LocalParams::default()
        };
        let (c, s) = connect(bed, connect_params(client), server).unwrap();
        assert_eq!(c.connection.negotiated.rtr, Some(rtr));
        assert_eq!(s.connection.negotiated.rtr, Some(rtr));
        exchange_and_close(&c, &s, true);
    }
}

fn peer_to_peer_without_a_common_rtr_fails_on_the_initiator<T: Transport>() {
    let bed = &T::testbed();
    let listener = bed.server.listen(bed.listen).unwrap();
    let addr = listener.local_addr();
    let (_spd, _scq, sqp) = queue_pair(&bed.server);
    let (_cpd, _ccq, cqp) = queue_pair(&bed.client);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let params = LocalParams {
                peer_to_peer: Some(RtrSet::only(Rtr::Write)),
                ..LocalParams::default()
            };
            let request = listener.get_request(WAIT).unwrap();
            request.accept(&sqp, params).unwrap();
        });
        let client = LocalParams {
            peer_to_peer: Some(RtrSet::only(Rtr::Send)),
            ..LocalParams::default()
        };
        bed.client.connect(addr, &cqp, connect_params(client))
    });
    assert!(
        failed_with(&result, NegotiationError::NoMatchingRtr),
        "{result:?}"
    );
    // The responder hears why (RFC 6581 section 9.2) and closes.
    assert_eq!(
        sqp.next_event(WAIT),
        Some(QpEvent::TerminateReceived(TermError::MpaNoMatchingRtr))
    );
    assert!(sqp.wait_closed(WAIT));
}

fn ird_and_ord_follow_rfc_6581<T: Transport>() {
    let bed = &T::testbed();
    // The responder lowers its ORD to the initiator's IRD and sizes its
    // IRD to the initiator's ORD within its means.
    let client = LocalParams {
        ird: 2,
        ord: 3,
        ..LocalParams::default()
    };
    let server = LocalParams {
        ird: 16,
        ord: 8,
        ..LocalParams::default()
    };
    let (c, s) = connect(bed, connect_params(client), server).unwrap();
    let (cn, sn) = (c.connection.negotiated, s.connection.negotiated);
    assert_eq!((sn.ird, sn.ord), (3, 2));
    assert_eq!((cn.ird, cn.ord), (2, 3));
    exchange_and_close(&c, &s, false);

    // 0x3FFF leaves IRD/ORD to the application on both sides.
    let unlimited = LocalParams {
        ird: 0x3FFF,
        ord: 0x3FFF,
        ..LocalParams::default()
    };
    let (c, s) = connect(bed, connect_params(unlimited.clone()), unlimited).unwrap();
    assert_eq!(c.connection.negotiated.peer_ird, Some(0x3FFF));
    assert_eq!(s.connection.negotiated.peer_ord, Some(0x3FFF));
    exchange_and_close(&c, &s, false);
}

fn a_reject_carries_private_data_back<T: Transport>() {
    let bed = &T::testbed();
    let listener = bed.server.listen(bed.listen).unwrap();
    let addr = listener.local_addr();
    let (_cpd, _ccq, qp) = queue_pair(&bed.client);
    let client = LocalParams {
        private_data: b"may I?".to_vec(),
        ..LocalParams::default()
    };
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let request = listener.get_request(WAIT).unwrap();
            assert_eq!(request.private_data(), b"may I?");
            assert_eq!(request.ird_ord(), Some((16, 16)));
            request.reject(b"no, busy").unwrap();
        });
        bed.client.connect(addr, &qp, connect_params(client))
    });
    match result {
        Err(Error::Rejected { private_data }) => assert_eq!(private_data, b"no, busy"),
        other => panic!("expected a reject, got {other:?}"),
    }
}

fn the_initiator_times_out_when_no_reply_comes<T: Transport>() {
    let bed = &T::testbed();
    // The server's application holds the request and never decides: no
    // Reply comes.
    let listener = bed.server.listen(bed.listen).unwrap();
    let addr = listener.local_addr();
    let (_cpd, _ccq, qp) = queue_pair(&bed.client);
    let connect = ConnectParams {
        timeout: Duration::from_millis(300),
        ..ConnectParams::default()
    };
    let result = bed.client.connect(addr, &qp, connect);
    assert!(
        matches!(result, Err(Error::Startup(StartupError::Timeout))),
        "{result:?}"
    );
    let undecided = listener.get_request(WAIT).unwrap();
    drop(undecided);
}

fn an_enhanced_initiator_falls_back_to_revision_1_when_allowed<T: Transport>() {
    let bed = &T::testbed();
    let listener = bed.server.listen(bed.listen).unwrap();
    let addr = listener.local_addr();
    let (spd, scq, sqp) = queue_pair(&bed.server);
    // A failed accept leaves its queue pair in Error, as the kernel's
    // rdma_accept does: the retry is accepted onto another.
    let (_refused_pd, _refused_cq, refused_qp) = queue_pair(&bed.server);
    let (cpd, ccq, cqp) = queue_pair(&bed.client);
    let (connection, sconn) = std::thread::scope(|scope| {
        let server = scope.spawn(|| {
            let revision_1 = params(Revision::Rfc5044, false, false);
            // The enhanced Request is refused by closing...
            let first = listener.get_request(WAIT).unwrap();
            assert_eq!(first.request.revision, Revision::Enhanced);
            assert!(first.accept(&refused_qp, revision_1.clone()).is_err());
            // ...and the retry in revision 1 is accepted.
            let second = listener.get_request(WAIT).unwrap();
            assert_eq!(second.request.revision, Revision::Rfc5044);
            second.accept(&sqp, revision_1).unwrap()
        });
        let connect = ConnectParams {
            revision_1_fallback: true,
            ..ConnectParams::default()
        };
        let connection = bed.client.connect(addr, &cqp, connect).unwrap();
        (connection, server.join().unwrap())
    });
    assert_eq!(connection.negotiated.revision, Revision::Rfc5044);
    let c = Side {
        _pd: cpd,
        cq: ccq,
        qp: cqp,
        connection,
    };
    let s = Side {
        _pd: spd,
        cq: scq,
        qp: sqp,
        connection: sconn,
    };
    exchange_and_close(&c, &s, false);
}

/// A responder that hangs up on every Request, revision 1 or 2: the
/// initiator retries the enhanced Request once in revision 1 and then
/// reports the close; there is no third attempt.
fn the_revision_1_retry_is_made_once<T: Transport>() {
    let (device, peer, _) = T::beside_a_raw_peer(DeviceConfig::default());
    // One more than the initiator should make: a third attempt would be
    // counted (and refused, or left to time out).
    let (addr, stop) = peer.hang_up_on_requests(3);
    let (_pd, _cq, qp) = queue_pair(&device);
    let connect = ConnectParams {
        revision_1_fallback: true,
        ..ConnectParams::default()
    };
    let result = device.connect(addr, &qp, connect);
    let closed = StartupError::ClosedBeforeFrame {
        retry_with_revision_1: false,
    };
    assert!(
        matches!(&result, Err(Error::Startup(e)) if *e == closed),
        "{result:?}"
    );
    assert_eq!(stop(), [Revision::Enhanced, Revision::Rfc5044]);
}

fn a_responder_ord_above_the_initiator_ird_is_insufficient_ird<T: Transport>() {
    let (device, peer, _) = T::beside_a_raw_peer(DeviceConfig::default());
    // A responder that insists on more Reads than the initiator can take:
    // its Reply names an ORD above the initiator's IRD (IRD 4, ORD 9; the
    // initiator's IRD is 2).
    let (addr, received) = peer.serve_one(hand_made_reply((4, 9)));
    let (_pd, _cq, qp) = queue_pair(&device);
    let client = LocalParams {
        ird: 2,
        ord: 2,
        ..LocalParams::default()
    };
    let result = device.connect(addr, &qp, connect_params(client));
    assert!(
        failed_with(&result, NegotiationError::InsufficientIrd),
        "{result:?}"
    );
    // What reached the peer after the 24-octet Request is one FPDU: a
    // Terminate with LLP/MPA error 6; then the initiator closed.
    let ulpdu = first_ulpdu_after_the_request(&received());
    let segment = uwarp_stack::wire::rdmap::RdmapSegment::parse(&ulpdu).unwrap();
    let terminate = uwarp_stack::wire::terminate::TerminateRepr::parse(
        segment.payload,
        uwarp_stack::wire::terminate::LayoutHint::Rfc5040,
    )
    .unwrap();
    assert_eq!(terminate.error, TermError::MpaInsufficientIrd);
}

fn the_responder_closes_when_no_request_comes<T: Transport>() {
    let startup_timeout = Duration::from_millis(300);
    let config = DeviceConfig {
        startup_timeout,
        ..DeviceConfig::default()
    };
    let (device, peer, listen) = T::beside_a_raw_peer(config);
    let listener = device.listen(listen).unwrap();
    let started = Instant::now();
    // The responder gives up and closes: end of stream, nothing sent, and
    // not before its timeout.
    assert_eq!(peer.connect_silent(listener.local_addr()), b"");
    assert!(started.elapsed() >= startup_timeout);
    assert!(matches!(
        listener.get_request(Duration::from_millis(10)),
        Err(Error::Timeout)
    ));
}

/// `first_fpdu_delay` (siw's accept race): the initiator's first FPDU
/// leaves only after the hold, and what the responder sent in the
/// meantime (a Send right behind its Reply) is delivered, not lost.
fn the_initiator_holds_its_first_fpdu_back_for_the_delay<T: Transport>() {
    send_behind_the_reply::<T>(Duration::from_millis(300));
}

/// A Send that arrives with the Reply (here in the same segment, as the
/// octets that follow the startup frame) lands in the receive posted
/// before `connect`. (It used to reach the engine before the posted
/// receives did, and was answered with a "no buffer" Terminate.)
fn a_send_behind_the_reply_finds_a_receive_posted_before_connect<T: Transport>() {
    send_behind_the_reply::<T>(Duration::ZERO);
}

/// A raw responder sends its Reply and a Send at once; the initiator
/// holds its first FPDU back for `delay`, receives the Send, and sends.
fn send_behind_the_reply<T: Transport>(delay: Duration) {
    let (device, peer, _) = T::beside_a_raw_peer(DeviceConfig::default());
    let early = b"sent during the hold";
    let mut first = hand_made_reply((1, 1));
    let send = uwarp_stack::wire::rdmap::RdmapSegment::whole_message(
        uwarp_stack::wire::rdmap::Opcode::Send,
        uwarp_stack::wire::ddp::BufferModel::Untagged {
            ulp_word: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        },
        early,
    )
    .to_vec();
    uwarp_stack::mpa::FpduWriter::new(false, false)
        .write(&[&send], &mut first)
        .unwrap();
    let (addr, received) = peer.serve_one(first);
    let (_pd, cq, qp) = queue_pair(&device);
    let started = Instant::now();
    let connect = ConnectParams {
        first_fpdu_delay: delay,
        ..ConnectParams::default()
    };
    device.connect(addr, &qp, connect).unwrap();
    // The Reply cannot have come before `connect` was called: the hold
    // alone makes it this late.
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    let wc = cq.poll_blocking(WAIT).expect("the early Send");
    assert_eq!(
        (wc.status, wc.opcode, wc.byte_len),
        (WcStatus::Success, WcOpcode::Recv, early.len() as u32)
    );
    // Our first FPDU follows the Request on the wire.
    qp.post_send(SendWr::new(
        1,
        SendOp::Send,
        Payload::Inline(b"after".to_vec()),
    ))
    .unwrap();
    assert_eq!(cq.poll_blocking(WAIT).unwrap().status, WcStatus::Success);
    qp.disconnect();
    let ulpdu = first_ulpdu_after_the_request(&received());
    let segment = uwarp_stack::wire::rdmap::RdmapSegment::parse(&ulpdu).unwrap();
    assert_eq!(segment.payload, b"after");
}

/// The ULPDU of the first FPDU (CRC off) that follows a 24-octet
/// revision-2 Request in `received`.
fn first_ulpdu_after_the_request(received: &[u8]) -> Vec<u8> {
    assert!(received.starts_with(b"MPA ID Req Frame"), "{received:?}");
    let mut reader = uwarp_stack::mpa::FpduReader::new(false, false);
    reader.push(&received[24..]);
    reader.next_ulpdu().unwrap().unwrap().to_vec()
}
