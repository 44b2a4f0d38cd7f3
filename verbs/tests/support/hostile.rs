//! A hostile iWARP peer the tests play over the kernel's TCP against a
//! program on the drop-in library: an MPA Request, then FPDUs a real
//! peer would never send, and the Terminate the program's uwarp answers
//! with (RFC 5040 section 7, RFC 5044 section 7).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use uwarp::LocalParams;
use uwarp_stack::mpa::{negotiation, FpduReader, FpduWriter};
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};
use uwarp_stack::wire::terminate::{LayoutHint, TermError, TerminateRepr};

/// A hostile peer's connection to `port` on loopback: an MPA Request
/// (CRCs asked for), and the Reply read (the server must accept).
pub fn hostile_peer(port: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    let local = LocalParams {
        crc: true,
        ..LocalParams::default()
    };
    let request = negotiation::request(&local).to_vec().expect("a Request");
    stream.write_all(&request).expect("the Request goes");
    let mut reply = [0u8; 24]; // 20 octets of header, 4 of enhanced block
    stream.read_exact(&mut reply).expect("the Reply");
    let (reply, _) = StartupRepr::parse_bytes(&reply).expect("a valid Reply");
    assert!(!reply.reject, "the server accepts");
    stream
}

/// Sends `ulpdu` in one FPDU (its CRC corrupted when `corrupt`), and
/// returns the error of the Terminate the server's uwarp answers with
/// before it closes.
pub fn terminated_by(stream: &mut TcpStream, ulpdu: &[u8], corrupt: bool) -> TermError {
    send_fpdu(stream, ulpdu, corrupt);
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the server closes");
    let mut reader = FpduReader::new(true, false);
    reader.push(&answer);
    let ulpdu = reader
        .next_ulpdu()
        .expect("a Terminate")
        .expect("a valid FPDU");
    let segment = RdmapSegment::parse(&ulpdu).expect("an RDMAP message");
    assert_eq!(segment.opcode(), Opcode::Terminate);
    TerminateRepr::parse(segment.payload, LayoutHint::Rfc5040)
        .expect("a Terminate")
        .error
}

/// Sends `ulpdu` in one FPDU with a CRC (corrupted when `corrupt`).
pub fn send_fpdu(stream: &mut TcpStream, ulpdu: &[u8], corrupt: bool) {
    let mut frame = Vec::new();
    FpduWriter::new(true, false)
        .write(&[ulpdu], &mut frame)
        .expect("an FPDU");
    if corrupt {
        frame[4] ^= 0x01;
    }
    stream.write_all(&frame).expect("the FPDU goes");
}

/// One ULPDU: `opcode` on the buffer `model`, carrying `payload`.
pub fn ulpdu(opcode: Opcode, model: BufferModel, payload: &[u8]) -> Vec<u8> {
    RdmapSegment::whole_message(opcode, model, payload).to_vec()
}

/// An RDMA Write to an STag nobody advertised.
pub fn write_to_unknown_stag() -> Vec<u8> {
    let tagged = BufferModel::Tagged {
        stag: 0xDEAD_BE00,
        to: 0,
    };
    ulpdu(Opcode::RdmaWrite, tagged, &[1; 64])
}

/// An RDMA Read Request for 64 octets of an STag nobody advertised.
pub fn read_of_unknown_stag() -> Vec<u8> {
    let request = ReadRequest {
        sink_stag: 0x1000,
        sink_to: 0,
        size: 64,
        source_stag: 0xDEAD_BE00,
        source_to: 0,
    };
    ulpdu(Opcode::ReadRequest, first_untagged(1), &request.to_bytes())
}

/// The first message on untagged queue `qn` (RFC 5040 section 5.1: 0
/// Sends, 1 Read Requests, 2 Terminates).
pub fn first_untagged(qn: u32) -> BufferModel {
    BufferModel::Untagged {
        ulp_word: 0,
        qn,
        msn: 1,
        mo: 0,
    }
}

/// A Terminate carrying `error`, as a peer that found it would send.
pub fn terminate(error: TermError) -> Vec<u8> {
    let payload = TerminateRepr::new(error).to_vec().expect("a Terminate");
    ulpdu(Opcode::Terminate, first_untagged(2), &payload)
}
