//! A hostile peer on a raw TCP connection: it speaks just enough MPA to
//! reach Full Operation, then sends frames a correct peer never would.
//! uwarp must answer each with the Terminate RFC 5040 section 7 names,
//! report it to the application, close, and leave registered memory
//! untouched. FPDUs its TCP cuts at arbitrary points, as a TCP unaware
//! of MPA may (RFC 5044 section 8), are still placed. Every case runs on
//! both transports: against the socket
//! transport from a kernel socket (`socket::CASE`), and against the DPDK
//! transport from uwarp's bare TCP on the other end of a net_ring pair
//! (`dpdk::CASE`), whose segments reach the dataplane core's in-place
//! placement. Every case runs again against a region of the application's
//! own memory (`app_memory::socket::CASE`, `app_memory::dpdk::CASE`): an
//! unaligned range of a `Vec<u8>` registered with
//! `ProtectionDomain::register_memory`, whose guard octets on both sides
//! must stay as they were. On DPDK alone, a peer whose receive window
//! stays below one FPDU gets a Write's FPDUs split across segments (RFC
//! 5044 appendix A.1), counted by the queue pair.

use uwarp_testing::dpdk_rig;
use uwarp_testing::pair;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use dpdk_rig::{device_beside_tcp_host, lock, small_pool, stream_until_closed, wait_for_log};
use dpdk_rig::{Log, TestApp};
use pair::*;
use uwarp::*;
use uwarp_control::TcpHost;
use uwarp_stack::mpa::{negotiation, FpduReader, FpduWriter};
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment};
use uwarp_stack::wire::terminate::{LayoutHint, TerminateRepr};

/// The hostile peer's end of its TCP connection.
trait RawStream {
    /// Sends `octets`.
    fn write_all(&mut self, octets: &[u8]);

    /// The next `len` octets received (within [`WAIT`]).
    fn read_exact(&mut self, len: usize) -> Vec<u8>;

    /// Every octet received until the other side closed (within
    /// [`WAIT`]).
    fn read_to_end(&mut self) -> Vec<u8>;

    /// Reads nothing more: the receive window closes once the buffers
    /// are full.
    fn stop_reading(&mut self);
}

impl RawStream for TcpStream {
    fn write_all(&mut self, octets: &[u8]) {
        Write::write_all(self, octets).unwrap();
    }

    fn read_exact(&mut self, len: usize) -> Vec<u8> {
        let mut octets = vec![0; len];
        Read::read_exact(self, &mut octets).unwrap();
        octets
    }

    fn read_to_end(&mut self) -> Vec<u8> {
        let mut octets = Vec::new();
        Read::read_to_end(self, &mut octets).unwrap();
        octets
    }

    fn stop_reading(&mut self) {
        // Not reading is all it takes: the kernel's buffers fill.
    }
}

/// A connection of uwarp's bare TCP on DPDK, driven through its
/// application's log: what it sends goes into the outbox (and the
/// doorbell makes its core send it), what it receives is the log's
/// stream.
struct BareStream {
    log: Log,
    /// Octets of the stream already read.
    read: usize,
    /// Keeps the host's cores running.
    _host: TcpHost<TestApp>,
}

impl RawStream for BareStream {
    fn write_all(&mut self, octets: &[u8]) {
        wait_for_log(&self.log, WAIT, "a connection on a dataplane core", |log| {
            log.doorbell.is_some()
        });
        let mut log = lock(&self.log);
        log.outbox.extend_from_slice(octets);
        log.doorbell.as_ref().expect("waited for").ring();
    }

    fn read_exact(&mut self, len: usize) -> Vec<u8> {
        let end = self.read + len;
        wait_for_log(&self.log, WAIT, "the octets", |log| {
            log.left_edge as usize >= end
        });
        let octets = lock(&self.log).stream()[self.read..end].to_vec();
        self.read = end;
        octets
    }

    fn read_to_end(&mut self) -> Vec<u8> {
        let octets = stream_until_closed(&self.log, WAIT)[self.read..].to_vec();
        self.read += octets.len();
        octets
    }

    fn stop_reading(&mut self) {
        lock(&self.log).hold = true;
    }
}

/// Where the cases run.
trait Transport {
    /// Whether the victim's region is the application's own memory
    /// ([`InAppMemory`]) rather than uwarp's.
    const APP_MEMORY: bool = false;

    /// A device for the victim, and where it listens.
    fn victim() -> (Device, &'static str, Box<dyn Dialer>);
}

/// Transport `T`, with the victim's region in the application's own
/// memory.
struct InAppMemory<T>(std::marker::PhantomData<T>);

impl<T: Transport> Transport for InAppMemory<T> {
    const APP_MEMORY: bool = true;

    fn victim() -> (Device, &'static str, Box<dyn Dialer>) {
        T::victim()
    }
}

/// How the hostile peer connects, sending `first` at once.
trait Dialer {
    fn dial(self: Box<Self>, addr: SocketAddr, first: &[u8]) -> Box<dyn RawStream>;
}

/// The socket transport, attacked from a kernel socket.
struct Socket;

impl Transport for Socket {
    fn victim() -> (Device, &'static str, Box<dyn Dialer>) {
        let device = Device::open(DeviceConfig::default()).unwrap();
        (device, "127.0.0.1:0", Box::new(KernelDialer))
    }
}

struct KernelDialer;

impl Dialer for KernelDialer {
    fn dial(self: Box<Self>, addr: SocketAddr, first: &[u8]) -> Box<dyn RawStream> {
        let mut raw = TcpStream::connect(addr).unwrap();
        raw.set_read_timeout(Some(WAIT)).unwrap();
        RawStream::write_all(&mut raw, first);
        Box::new(raw)
    }
}

/// The DPDK transport on a net_ring pair: the victim at 10.70.0.1, the
/// hostile peer's bare TCP at 10.70.0.2.
struct Dpdk;

impl Transport for Dpdk {
    fn victim() -> (Device, &'static str, Box<dyn Dialer>) {
        let (device, host) = device_beside_tcp_host(70, DeviceConfig::default(), small_pool);
        (device, "10.70.0.1:0", Box::new(BareDialer(host)))
    }
}

struct BareDialer(TcpHost<TestApp>);

impl Dialer for BareDialer {
    fn dial(self: Box<Self>, addr: SocketAddr, first: &[u8]) -> Box<dyn RawStream> {
        let SocketAddr::V4(addr) = addr else {
            panic!("the DPDK transport is IPv4 only")
        };
        let log = Log::default();
        lock(&log).outbox = first.to_vec();
        self.0.connect(addr, TestApp::new(log.clone())).unwrap();
        Box::new(BareStream {
            log,
            read: 0,
            _host: self.0,
        })
    }
}

/// The cases, on every transport.
macro_rules! every_case {
    () => {
        uwarp_testing::on_every_transport!(
            a_write_to_an_unknown_stag_is_terminated,
            a_write_past_the_region_is_terminated,
            a_wrapping_tagged_offset_is_terminated,
            a_read_beyond_the_region_is_terminated_with_its_header,
            a_send_with_no_receive_posted_is_terminated,
            a_bad_crc_is_terminated_without_headers,
            an_unknown_opcode_is_terminated,
            fpdus_cut_anywhere_by_the_peers_tcp_are_still_placed,
            a_peer_that_stops_reading_cannot_hold_a_terminated_queue_pair,
        );
    };
}

every_case!();

/// The same cases against a region of the application's own memory.
mod app_memory {
    use super::*;

    type Socket = InAppMemory<super::Socket>;
    type Dpdk = InAppMemory<super::Dpdk>;

    every_case!();
}

/// Octets in the victim's region.
const REGION_LEN: usize = 4096;

/// The uwarp side: a listening device with a queue pair holding a region
/// open to remote writes and reads, and one posted receive.
struct Victim {
    _device: Device,
    pd: ProtectionDomain,
    qp: QueuePair,
    cq: CompletionQueue,
    /// Dropped before `memory` (fields drop in order), as
    /// `register_memory` asks.
    region: MemoryRegion,
    /// The application's memory the region lies in, if it does.
    memory: Option<AppMemory>,
    _inbox: MemoryRegion,
    original: Vec<u8>,
}

/// Connects a hostile peer to a fresh uwarp listener on `T` (MPA revision
/// 2, CRC as `crc` says) and returns it with the accepted queue pair.
fn attack<T: Transport>(crc: bool) -> (Victim, Box<dyn RawStream>) {
    let (device, listen, dialer) = T::victim();
    let pd = device.alloc_pd().unwrap();
    let cq = device.create_cq(CQ_DEPTH);
    let listener = device.listen(listen).unwrap();
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let access = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    let memory = T::APP_MEMORY.then(|| AppMemory::new(REGION_LEN));
    let region = match &memory {
        // SAFETY: `memory` is dropped after `region`: here, being declared
        // first, and in the `Victim`, by its fields' order. Its range is
        // only reached through raw copies meanwhile (`AppMemory`).
        Some(memory) => unsafe { pd.register_memory(memory.range(), REGION_LEN, None, access) },
        None => pd.alloc_mr(REGION_LEN, access),
    }
    .unwrap();
    let original = fill(&region, 0x5A);
    let inbox = pd.alloc_mr(32, Access::LOCAL_WRITE).unwrap();
    qp.post_recv(RecvWr {
        wr_id: 1,
        sgl: vec![inbox.whole()],
    })
    .unwrap();
    let local = LocalParams {
        crc,
        ..LocalParams::default()
    };
    let request = negotiation::request(&local).to_vec().unwrap();
    let mut raw = dialer.dial(listener.local_addr(), &request);
    let request = listener.get_request(WAIT).unwrap();
    request.accept(&qp, LocalParams::default()).unwrap();
    // The Reply: 20 octets of header and 4 of enhanced block.
    let reply = raw.read_exact(24);
    let (repr, _) = StartupRepr::parse_bytes(&reply).unwrap();
    assert!(!repr.reject);
    let victim = Victim {
        _device: device,
        pd,
        qp,
        cq,
        region,
        memory,
        _inbox: inbox,
        original,
    };
    (victim, raw)
}

impl Victim {
    /// Whether the octets on both sides of the region in the
    /// application's memory are as they were (trivially, in uwarp's).
    fn guards_intact(&self) -> bool {
        self.memory.as_ref().is_none_or(AppMemory::guards_intact)
    }
}

fn tagged(opcode: Opcode, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    segment(opcode, BufferModel::Tagged { stag, to }, payload)
}

fn untagged(opcode: Opcode, qn: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    let model = BufferModel::Untagged {
        ulp_word: 0,
        qn,
        msn,
        mo: 0,
    };
    segment(opcode, model, payload)
}

fn segment(opcode: Opcode, model: BufferModel, payload: &[u8]) -> Vec<u8> {
    RdmapSegment::whole_message(opcode, model, payload).to_vec()
}

/// Sends one FPDU carrying `ulpdu` (CRC on), optionally corrupting one
/// octet of the frame, and returns the Terminate uwarp answers with.
fn terminate_for(raw: &mut dyn RawStream, ulpdu: &[u8], corrupt: bool) -> TerminateRepr<'static> {
    let mut frame = Vec::new();
    FpduWriter::new(true, false)
        .write(&[ulpdu], &mut frame)
        .unwrap();
    if corrupt {
        frame[4] ^= 0x01;
    }
    raw.write_all(&frame);
    let mut reader = FpduReader::new(true, false);
    reader.push(&raw.read_to_end());
    let answer = reader
        .next_ulpdu()
        .expect("a Terminate")
        .expect("a valid FPDU");
    let answer: &'static [u8] = Box::leak(answer.into_boxed_slice());
    let segment = RdmapSegment::parse(answer).unwrap();
    assert_eq!(segment.opcode(), Opcode::Terminate);
    TerminateRepr::parse(segment.payload, LayoutHint::Rfc5040).unwrap()
}

fn check(victim: &Victim, expected: TermError) {
    let counters = check_ended(victim, expected);
    assert_eq!(counters.terminates_sent, 1, "{counters:?}");
}

/// The queue pair reported `expected`, closed, and left its memory
/// untouched; its counters, as the perf tool prints them, count a CRC
/// error where that was the error. Returns the counters.
fn check_ended(victim: &Victim, expected: TermError) -> QpCounters {
    assert_eq!(
        victim.qp.next_event(WAIT),
        Some(QpEvent::TerminateSent(expected))
    );
    assert!(victim.qp.wait_closed(WAIT));
    assert_eq!(
        contents(&victim.region),
        victim.original,
        "memory untouched"
    );
    assert!(victim.guards_intact(), "an octet beside the region changed");
    let counters = victim.qp.counters();
    let crc_error = u64::from(expected == TermError::MpaCrcError);
    assert_eq!(counters.crc_errors, crc_error, "{counters:?}");
    counters
}

fn a_write_to_an_unknown_stag_is_terminated<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let bad = victim.region.rkey() ^ 0x0100_0000;
    let ulpdu = tagged(Opcode::RdmaWrite, bad, victim.region.addr(), b"evil");
    let terminate = terminate_for(raw.as_mut(), &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedInvalidStag);
    assert_eq!(terminate.ddp_header, Some(&ulpdu[..14]));
    assert_eq!(terminate.ddp_segment_len, Some(ulpdu.len() as u16));
    check(&victim, TermError::DdpTaggedInvalidStag);
}

fn a_write_past_the_region_is_terminated<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let to = victim.region.addr() + REGION_LEN as u64 - 2;
    let ulpdu = tagged(Opcode::RdmaWrite, victim.region.rkey(), to, b"evil");
    let terminate = terminate_for(raw.as_mut(), &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedBaseOrBounds);
    check(&victim, TermError::DdpTaggedBaseOrBounds);
}

fn a_wrapping_tagged_offset_is_terminated<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let ulpdu = tagged(
        Opcode::RdmaWrite,
        victim.region.rkey(),
        u64::MAX - 1,
        b"evil",
    );
    let terminate = terminate_for(raw.as_mut(), &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedToWrap);
    check(&victim, TermError::DdpTaggedToWrap);
}

fn a_read_beyond_the_region_is_terminated_with_its_header<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let request = uwarp_stack::wire::rdmap::ReadRequest {
        sink_stag: 0x1234,
        sink_to: 0,
        size: 2 * REGION_LEN as u32,
        source_stag: victim.region.rkey(),
        source_to: victim.region.addr(),
    };
    let ulpdu = untagged(Opcode::ReadRequest, 1, 1, &request.to_bytes());
    let terminate = terminate_for(raw.as_mut(), &ulpdu, false);
    assert_eq!(terminate.error, TermError::RdmapBaseOrBounds);
    assert_eq!(terminate.rdmap_header, Some(&request.to_bytes()[..]));
    check(&victim, TermError::RdmapBaseOrBounds);
}

fn a_send_with_no_receive_posted_is_terminated<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    // MSN 1 takes the one posted receive; MSN 2 finds none.
    let mut frame = Vec::new();
    let mut writer = FpduWriter::new(true, false);
    writer
        .write(&[&untagged(Opcode::Send, 0, 1, b"one")], &mut frame)
        .unwrap();
    raw.write_all(&frame);
    let terminate = terminate_for(raw.as_mut(), &untagged(Opcode::Send, 0, 2, b"two"), false);
    assert_eq!(terminate.error, TermError::DdpUntaggedNoBuffer);
    check(&victim, TermError::DdpUntaggedNoBuffer);
}

fn a_bad_crc_is_terminated_without_headers<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let ulpdu = tagged(
        Opcode::RdmaWrite,
        victim.region.rkey(),
        victim.region.addr(),
        b"evil",
    );
    let terminate = terminate_for(raw.as_mut(), &ulpdu, true);
    assert_eq!(terminate.error, TermError::MpaCrcError);
    assert_eq!(terminate.ddp_header, None);
    check(&victim, TermError::MpaCrcError);
}

fn an_unknown_opcode_is_terminated<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let mut ulpdu = untagged(Opcode::Send, 0, 1, b"x");
    ulpdu[1] = (ulpdu[1] & 0xF0) | 0x0C;
    let terminate = terminate_for(raw.as_mut(), &ulpdu, false);
    assert_eq!(terminate.error, TermError::RdmapUnexpectedOpcode);
    check(&victim, TermError::RdmapUnexpectedOpcode);
}

/// A correct Write and Send whose octets the peer's TCP sends cut at
/// arbitrary points, as a TCP unaware of MPA may, each piece sent once the
/// last was buffered: uwarp buffers each part (its counters say so),
/// places them all the same, and the stream goes on.
fn fpdus_cut_anywhere_by_the_peers_tcp_are_still_placed<T: Transport>() {
    let (victim, mut raw) = attack::<T>(true);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    let to = victim.region.addr() + 100;
    let write = tagged(Opcode::RdmaWrite, victim.region.rkey(), to, &data);
    let send = untagged(Opcode::Send, 0, 1, b"placed");
    let mut stream = Vec::new();
    let mut writer = FpduWriter::new(true, false);
    writer.write(&[&write], &mut stream).unwrap();
    writer.write(&[&send], &mut stream).unwrap();
    // Cuts inside the Write's header, its payload and its CRC (octets
    // 1016-1019), then inside the Send's length field (1020-1021).
    assert_eq!(stream.len(), 1020 + 32);
    let cuts = [0, 7, 500, 1018, 1021, stream.len()];
    for (i, piece) in cuts.windows(2).enumerate() {
        let before = victim.qp.counters().bytes_reassembled;
        raw.write_all(&stream[piece[0]..piece[1]]);
        if i + 2 < cuts.len() {
            // Each piece but the last leaves part of an FPDU, which the
            // victim buffers: once it has, the piece arrived on its own.
            let deadline = Instant::now() + WAIT;
            while victim.qp.counters().bytes_reassembled == before {
                assert!(Instant::now() < deadline, "piece {i} buffered");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    let wc = victim.cq.poll_blocking(WAIT).expect("the Send arrives");
    assert_eq!(
        (wc.status, wc.wr_id, wc.byte_len),
        (WcStatus::Success, 1, 6)
    );
    let mut expected = victim.original.clone();
    expected[100..1100].copy_from_slice(&data);
    assert!(
        contents(&victim.region) == expected,
        "the Write landed in place"
    );
    assert!(victim.guards_intact(), "and nowhere else");
    assert_eq!(victim.qp.counters().terminates_sent, 0);
}

/// A peer that stops reading while uwarp has data for it, then sends a
/// frame that needs a Terminate: the Terminate and the close wait behind
/// data the peer never takes, and nothing on the wire will end the
/// connection. uwarp resets it after its close timeout, and the queue
/// pair reaches Error with memory untouched.
fn a_peer_that_stops_reading_cannot_hold_a_terminated_queue_pair<T: Transport>() {
    const LEN: usize = 1 << 20;
    let (victim, mut raw) = attack::<T>(true);
    // A first FPDU lets the responder speak (RFC 5044 section 7.1.2); then
    // the peer stops reading.
    let mut writer = FpduWriter::new(true, false);
    let mut first = Vec::new();
    writer
        .write(&[&untagged(Opcode::Send, 0, 1, b"hi")], &mut first)
        .unwrap();
    raw.write_all(&first);
    raw.stop_reading();
    // More than the peer's buffers and ours take: 32 MiB of Writes.
    let source = victim.pd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
    for i in 0..32 {
        let op = SendOp::Write {
            remote_addr: 0,
            rkey: 0x4242,
        };
        let wr = SendWr::new(i, op, Payload::Sgl(vec![source.whole()]));
        victim.qp.post_send(wr).unwrap();
    }
    let deadline = Instant::now() + WAIT;
    while victim.qp.counters().fpdus_sent == 0 {
        assert!(Instant::now() < deadline, "the Writes go out");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Time for every buffer on the way to fill.
    std::thread::sleep(Duration::from_millis(300));
    let bad = victim.region.rkey() ^ 0x0100_0000;
    let ulpdu = tagged(Opcode::RdmaWrite, bad, victim.region.addr(), b"evil");
    let mut frame = Vec::new();
    writer.write(&[&ulpdu], &mut frame).unwrap();
    raw.write_all(&frame);
    let counters = check_ended(&victim, TermError::DdpTaggedInvalidStag);
    // Whether the Terminate found room behind the data the peer left
    // depends on the transport's buffers; it is counted once if it did.
    assert!(counters.terminates_sent <= 1, "{counters:?}");
}

/// The DPDK transport whose hosts' TCP receive buffers hold 1024 octets,
/// less than one full-sized FPDU: the victim at 10.71.0.1, the peer's
/// bare TCP at 10.71.0.2.
struct SmallWindowDpdk;

impl Transport for SmallWindowDpdk {
    fn victim() -> (Device, &'static str, Box<dyn Dialer>) {
        let tune = |host: &mut HostConfig| {
            small_pool(host);
            host.tcp.recv_buffer = 1024;
        };
        let (device, host) = device_beside_tcp_host(71, DeviceConfig::default(), tune);
        (device, "10.71.0.1:0", Box::new(BareDialer(host)))
    }
}

/// A peer whose receive window stays below one FPDU: uwarp's TCP splits
/// the FPDUs of a Write across segments once the persist timer runs out
/// (RFC 5044 appendix A.1's exception), the queue pair counts the splits
/// where the perf tool reads them, and the Write arrives whole.
#[test]
fn a_window_below_one_fpdu_splits_fpdus_and_the_queue_pair_counts_them() {
    let (victim, mut raw) = attack::<SmallWindowDpdk>(true);
    // A first FPDU lets the responder speak (RFC 5044 section 7.1.2).
    let mut first = Vec::new();
    FpduWriter::new(true, false)
        .write(&[&untagged(Opcode::Send, 0, 1, b"hi")], &mut first)
        .unwrap();
    raw.write_all(&first);
    let data: Vec<u8> = (0..2000u32).map(|i| (i * 11 + 5) as u8).collect();
    let source = victim.pd.alloc_mr(data.len(), Access::LOCAL_WRITE).unwrap();
    source.buffer().write_at(0, &data).unwrap();
    let op = SendOp::Write {
        remote_addr: 0x1000,
        rkey: 0x4242,
    };
    let wr = SendWr::new(7, op, Payload::Sgl(vec![source.whole()]));
    victim.qp.post_send(wr).unwrap();
    // FPDU by FPDU: its length field, then the ULPDU, pad and CRC.
    let mut reader = FpduReader::new(true, false);
    let mut written = Vec::new();
    loop {
        let length = raw.read_exact(2);
        let ulpdu_len = usize::from(u16::from_be_bytes([length[0], length[1]]));
        let rest = raw.read_exact((2 + ulpdu_len).next_multiple_of(4) - 2 + 4);
        reader.push(&length);
        reader.push(&rest);
        let ulpdu = reader.next_ulpdu().expect("an FPDU").expect("a valid FPDU");
        let segment = RdmapSegment::parse(&ulpdu).unwrap();
        assert_eq!(segment.opcode(), Opcode::RdmaWrite);
        written.extend_from_slice(segment.payload);
        if segment.ddp.last {
            break;
        }
    }
    assert!(written == data, "the Write arrived changed");
    // The count reaches the queue pair's counters at its next drive.
    let deadline = Instant::now() + WAIT;
    while victim.qp.counters().fpdus_split == 0 {
        let counters = victim.qp.counters();
        assert!(Instant::now() < deadline, "no split counted: {counters:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    let counters = victim.qp.counters();
    assert_eq!(counters.terminates_sent + counters.crc_errors, 0);
}
