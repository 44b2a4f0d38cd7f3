//! A hostile peer on a raw socket: it speaks just enough MPA to reach Full
//! Operation, then sends frames a correct peer never would. uwarp must
//! answer each with the Terminate RFC 5040 section 7 names, report it to
//! the application, close, and leave registered memory untouched.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;
use uwarp_control::*;
use uwarp_stack::mpa::{negotiation, FpduReader, FpduWriter};
use uwarp_stack::wire::ddp::{BufferModel, DdpRepr};
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapControl, RdmapSegment};
use uwarp_stack::wire::terminate::{LayoutHint, TerminateRepr};

/// The uwarp side: a listening device with a queue pair holding a region
/// open to remote writes and reads, and one posted receive.
struct Victim {
    _device: Device,
    qp: QueuePair,
    region: MemoryRegion,
    _inbox: MemoryRegion,
    original: Vec<u8>,
}

/// Connects a raw socket to a fresh uwarp listener (MPA revision 2, CRC
/// on) and returns it with the accepted queue pair.
fn attack(crc: bool) -> (Victim, TcpStream) {
    let (device, pd, cq) = device();
    let listener = device.listen("127.0.0.1:0").unwrap();
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let region = pd
        .alloc_mr(
            4096,
            Access::LOCAL_WRITE
                .union(Access::REMOTE_WRITE)
                .union(Access::REMOTE_READ),
        )
        .unwrap();
    let original = fill(&region, 0x5A);
    let inbox = pd.alloc_mr(32, Access::LOCAL_WRITE).unwrap();
    qp.post_recv(RecvWr {
        wr_id: 1,
        sgl: vec![inbox.whole()],
    })
    .unwrap();
    let mut raw = TcpStream::connect(listener.local_addr()).unwrap();
    raw.set_read_timeout(Some(WAIT)).unwrap();
    let local = LocalParams {
        crc,
        ..LocalParams::default()
    };
    raw.write_all(&negotiation::request(&local).to_vec().unwrap())
        .unwrap();
    let request = listener.get_request(WAIT).unwrap();
    request.accept(&qp, LocalParams::default()).unwrap();
    // The Reply: 20 octets of header and 4 of enhanced block.
    let mut reply = [0u8; 24];
    raw.read_exact(&mut reply).unwrap();
    let (repr, _) = StartupRepr::parse_bytes(&reply).unwrap();
    assert!(!repr.reject);
    let victim = Victim {
        _device: device,
        qp,
        region,
        _inbox: inbox,
        original,
    };
    (victim, raw)
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
    RdmapSegment {
        ddp: DdpRepr {
            last: true,
            reserved: 0,
            ulp_control: 0,
            model,
        },
        control: RdmapControl::new(opcode),
        payload,
    }
    .to_vec()
}

/// Sends one FPDU carrying `ulpdu` (CRC on), optionally corrupting one
/// octet of the frame, and returns the Terminate uwarp answers with.
fn terminate_for(raw: &mut TcpStream, ulpdu: &[u8], corrupt: bool) -> TerminateRepr<'static> {
    let mut frame = Vec::new();
    FpduWriter::new(true, false)
        .write(&[ulpdu], &mut frame)
        .unwrap();
    if corrupt {
        frame[4] ^= 0x01;
    }
    raw.write_all(&frame).unwrap();
    let mut reader = FpduReader::new(true, false);
    let mut stream = Vec::new();
    raw.read_to_end(&mut stream).unwrap();
    reader.push(&stream);
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
}

#[test]
fn a_write_to_an_unknown_stag_is_terminated() {
    let (victim, mut raw) = attack(true);
    let bad = victim.region.rkey() ^ 0x0100_0000;
    let ulpdu = tagged(Opcode::RdmaWrite, bad, victim.region.addr(), b"evil");
    let terminate = terminate_for(&mut raw, &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedInvalidStag);
    assert_eq!(terminate.ddp_header, Some(&ulpdu[..14]));
    assert_eq!(terminate.ddp_segment_len, Some(ulpdu.len() as u16));
    check(&victim, TermError::DdpTaggedInvalidStag);
}

#[test]
fn a_write_past_the_region_is_terminated() {
    let (victim, mut raw) = attack(true);
    let to = victim.region.addr() + 4094;
    let ulpdu = tagged(Opcode::RdmaWrite, victim.region.rkey(), to, b"evil");
    let terminate = terminate_for(&mut raw, &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedBaseOrBounds);
    check(&victim, TermError::DdpTaggedBaseOrBounds);
}

#[test]
fn a_wrapping_tagged_offset_is_terminated() {
    let (victim, mut raw) = attack(true);
    let ulpdu = tagged(
        Opcode::RdmaWrite,
        victim.region.rkey(),
        u64::MAX - 1,
        b"evil",
    );
    let terminate = terminate_for(&mut raw, &ulpdu, false);
    assert_eq!(terminate.error, TermError::DdpTaggedToWrap);
    check(&victim, TermError::DdpTaggedToWrap);
}

#[test]
fn a_read_beyond_the_region_is_terminated_with_its_header() {
    let (victim, mut raw) = attack(true);
    let request = uwarp_stack::wire::rdmap::ReadRequest {
        sink_stag: 0x1234,
        sink_to: 0,
        size: 8192,
        source_stag: victim.region.rkey(),
        source_to: victim.region.addr(),
    };
    let ulpdu = untagged(Opcode::ReadRequest, 1, 1, &request.to_bytes());
    let terminate = terminate_for(&mut raw, &ulpdu, false);
    assert_eq!(terminate.error, TermError::RdmapBaseOrBounds);
    assert_eq!(terminate.rdmap_header, Some(&request.to_bytes()[..]));
    check(&victim, TermError::RdmapBaseOrBounds);
}

#[test]
fn a_send_with_no_receive_posted_is_terminated() {
    let (victim, mut raw) = attack(true);
    // MSN 1 takes the one posted receive; MSN 2 finds none.
    let mut frame = Vec::new();
    let mut writer = FpduWriter::new(true, false);
    writer
        .write(&[&untagged(Opcode::Send, 0, 1, b"one")], &mut frame)
        .unwrap();
    raw.write_all(&frame).unwrap();
    let terminate = terminate_for(&mut raw, &untagged(Opcode::Send, 0, 2, b"two"), false);
    assert_eq!(terminate.error, TermError::DdpUntaggedNoBuffer);
    check(&victim, TermError::DdpUntaggedNoBuffer);
}

#[test]
fn a_bad_crc_is_terminated_without_headers() {
    let (victim, mut raw) = attack(true);
    let ulpdu = tagged(
        Opcode::RdmaWrite,
        victim.region.rkey(),
        victim.region.addr(),
        b"evil",
    );
    let terminate = terminate_for(&mut raw, &ulpdu, true);
    assert_eq!(terminate.error, TermError::MpaCrcError);
    assert_eq!(terminate.ddp_header, None);
    check(&victim, TermError::MpaCrcError);
}

#[test]
fn an_unknown_opcode_is_terminated() {
    let (victim, mut raw) = attack(true);
    let mut ulpdu = untagged(Opcode::Send, 0, 1, b"x");
    ulpdu[1] = (ulpdu[1] & 0xF0) | 0x0C;
    let terminate = terminate_for(&mut raw, &ulpdu, false);
    assert_eq!(terminate.error, TermError::RdmapUnexpectedOpcode);
    check(&victim, TermError::RdmapUnexpectedOpcode);
}
