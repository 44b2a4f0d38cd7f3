//! A hostile peer: ULPDUs made by hand, framed with CRCs, written into an
//! engine. For every malformed or forbidden segment the engine must send
//! the Terminate RFC 5040 section 7 and RFC 5041 section 7.2 name, echo
//! the offending DDP header (M and D) and, for a Read Request, its RDMAP
//! header (R), enter Terminate, flush every outstanding work request, and
//! leave every octet of registered memory (and the octets around it)
//! unchanged.

mod common;

use common::{read_at, read_request, send, tagged, untagged, Hostile, Region, Setup, REMOTE_ALL};
use uwarp_stack::mem::{Access, PdId, Stag};
use uwarp_stack::rdmap::{CqKind, LlpClose, QpEvent, Role};
use uwarp_stack::verbs::{QpState, RecvWr, SendOp, WcOpcode, WcStatus};
use uwarp_stack::wire::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use uwarp_stack::wire::rdmap::{Opcode, ReadRequest, QN_SEND};
use uwarp_stack::wire::terminate::TermError;

/// An engine with registered regions of every kind and outstanding work
/// of every kind: two receives, an RDMA Read waiting for its response and
/// a fenced Send held behind it.
struct Victim {
    h: Hostile,
    /// Remote read and write.
    rw: Region,
    /// Remote read only.
    ro: Region,
    /// Remote write only.
    wo: Region,
    /// Local write only: the receives.
    local: Region,
    /// The outstanding Read's sink.
    sink: Region,
    /// Remote read and write, but in another protection domain.
    other: Region,
    /// Whether the two receives were posted.
    receives: bool,
    before: Vec<Vec<u8>>,
}

/// What the Terminate must echo of the offending segment.
#[derive(Debug, Clone, Copy)]
enum Echo {
    /// Nothing (MPA errors, and segments whose header layout is unknown).
    Nothing,
    /// M and D: the segment's length and DDP header.
    Ddp,
    /// M, D and R: also the Read Request's 28 octets.
    DdpAndRead,
}

const READ_LEN: u32 = 256;

impl Victim {
    fn new() -> Self {
        Self::with(Hostile::default_initiator(), true)
    }

    fn with(mut h: Hostile, receives: bool) -> Self {
        let side = &h.victim;
        let other_pd = PdId::from_raw(side.pd.raw() + 1000);
        let rw = side.region(4096, REMOTE_ALL);
        let ro = side.region(4096, Access::REMOTE_READ);
        let wo = side.region(4096, Access::REMOTE_WRITE);
        let local = side.region(200, Access::LOCAL_WRITE);
        let sink = side.region(READ_LEN as usize, Access::LOCAL_WRITE);
        let other = side.region_in(other_pd, 4096, REMOTE_ALL, true);
        for (i, r) in [&rw, &ro, &wo, &local, &sink, &other].iter().enumerate() {
            r.fill(i as u8 * 40 + 1);
        }
        if receives {
            h.victim.post_recv(1, vec![local.sge(0, 100)]);
            h.victim.post_recv(2, vec![local.sge(100, 100)]);
        }
        h.victim
            .post(10, read_at(0x5000, 0x1234_5600), vec![sink.whole()]);
        h.victim.post_fenced_inline(11, b"held".to_vec());
        h.flush();
        assert_eq!(h.received.len(), 1, "only the Read Request went out");
        let mut victim = Self {
            h,
            rw,
            ro,
            wo,
            local,
            sink,
            other,
            receives,
            before: Vec::new(),
        };
        victim.before = victim.regions().iter().map(|r| r.snapshot()).collect();
        victim
    }

    fn regions(&self) -> [&Region; 6] {
        [
            &self.rw,
            &self.ro,
            &self.wo,
            &self.local,
            &self.sink,
            &self.other,
        ]
    }

    /// A Write of `len` octets to `stag` at `to`.
    fn write(stag: Stag, to: u64, len: usize) -> Vec<u8> {
        tagged(Opcode::RdmaWrite, true, stag.raw(), to, &vec![0xEE; len])
    }

    /// Feeds `ulpdus` one by one and checks the answer to the last.
    fn attack(self, ulpdus: &[Vec<u8>], expected: TermError, echo: Echo) {
        self.attack_with(ulpdus, expected, echo, [WcStatus::WrFlushError; 2]);
    }

    fn attack_with(
        mut self,
        ulpdus: &[Vec<u8>],
        expected: TermError,
        echo: Echo,
        receives: [WcStatus; 2],
    ) {
        for ulpdu in ulpdus {
            self.h.inject(ulpdu);
        }
        self.check(ulpdus.last().unwrap(), expected, echo, receives);
    }

    /// Feeds raw stream octets and checks the answer.
    fn attack_raw(mut self, bytes: &[u8], offending: &[u8], expected: TermError, echo: Echo) {
        self.h.inject_raw(bytes);
        self.check(offending, expected, echo, [WcStatus::WrFlushError; 2]);
    }

    fn check(mut self, offending: &[u8], expected: TermError, echo: Echo, receives: [WcStatus; 2]) {
        let ctx = format!("{expected:?}");
        self.h.flush();
        let term = self.h.terminate();
        assert_eq!(term.error, expected, "{ctx}");
        assert_eq!(term.msn, 1, "{ctx}");
        match echo {
            Echo::Nothing => {
                assert_eq!(term.segment_len, None, "{ctx}");
                assert_eq!(term.ddp_header, None, "{ctx}");
            }
            Echo::Ddp | Echo::DdpAndRead => {
                let header_len = if offending[0] & 0x80 != 0 {
                    TAGGED_HEADER_LEN
                } else {
                    UNTAGGED_HEADER_LEN
                };
                assert_eq!(term.segment_len, Some(offending.len() as u16), "{ctx}");
                assert_eq!(
                    term.ddp_header.as_deref(),
                    Some(&offending[..header_len]),
                    "{ctx}"
                );
            }
        }
        let read = match echo {
            Echo::DdpAndRead => Some(&offending[UNTAGGED_HEADER_LEN..UNTAGGED_HEADER_LEN + 28]),
            _ => None,
        };
        assert_eq!(term.rdmap_header.as_deref(), read, "{ctx}");

        let v = &mut self.h.victim;
        assert_eq!(v.events, [QpEvent::TerminateSent(expected)], "{ctx}");
        assert_eq!(v.engine.state(), QpState::Terminate, "{ctx}");
        assert_eq!(v.engine.llp_close(), Some(LlpClose::Graceful), "{ctx}");
        let sends = v.outcomes(CqKind::Send);
        assert_eq!(
            sends,
            [
                (10, WcOpcode::Read, WcStatus::WrFlushError),
                (11, WcOpcode::Send, WcStatus::WrFlushError)
            ],
            "{ctx}"
        );
        let recvs = v.statuses(CqKind::Recv);
        let expected_recvs: Vec<_> = if self.receives {
            [1, 2].into_iter().zip(receives).collect()
        } else {
            vec![]
        };
        assert_eq!(recvs, expected_recvs, "{ctx}");
        let after: Vec<_> = self.regions().iter().map(|r| r.snapshot()).collect();
        assert!(after == self.before, "memory changed: {ctx}");

        // Work posted now is flushed at once, and nothing more is placed or
        // answered.
        let v = &mut self.h.victim;
        v.post(20, SendOp::Send, vec![]);
        v.post_recv(21, vec![]);
        let flushed = v.all_statuses();
        assert_eq!(
            flushed,
            [(20, WcStatus::WrFlushError), (21, WcStatus::WrFlushError)],
            "{ctx}"
        );
        let later = Self::write(self.rw.stag, self.rw.to, 8);
        self.h.inject(&later);
        assert_eq!(self.h.terminates().len(), 1, "{ctx}");
        assert!(self.rw.snapshot() == self.before[0], "{ctx}");
    }
}

fn request(source: &Region, offset: u64, size: u32) -> ReadRequest {
    ReadRequest {
        sink_stag: 0x0abc_de00,
        sink_to: 0x7000,
        size,
        source_stag: source.stag.raw(),
        source_to: source.to + offset,
    }
}

// ----- tagged placement (RFC 5041 section 7.1, DDP tagged buffer errors) --

#[test]
fn write_to_an_unknown_stag() {
    let v = Victim::new();
    let ulpdu = Victim::write(Stag(0x00ff_ff07), 0, 16);
    v.attack(&[ulpdu], TermError::DdpTaggedInvalidStag, Echo::Ddp);
}

#[test]
fn write_with_the_wrong_key() {
    let v = Victim::new();
    let wrong = Stag(v.rw.stag.raw() ^ 0x01);
    let ulpdu = Victim::write(wrong, v.rw.to, 16);
    v.attack(&[ulpdu], TermError::DdpTaggedInvalidStag, Echo::Ddp);
}

#[test]
fn write_to_another_protection_domain() {
    let v = Victim::new();
    let ulpdu = Victim::write(v.other.stag, v.other.to, 16);
    v.attack(&[ulpdu], TermError::DdpTaggedStagNotAssociated, Echo::Ddp);
}

#[test]
fn write_without_remote_write_access() {
    for read_only in [true, false] {
        let v = Victim::new();
        // Remote read only, and local write only (the receive buffers).
        let region = if read_only { &v.ro } else { &v.local };
        let ulpdu = Victim::write(region.stag, region.to, 16);
        // RFC 5041 has no code for the access check: an invalid STag, as
        // siw answers.
        v.attack(&[ulpdu], TermError::DdpTaggedInvalidStag, Echo::Ddp);
    }
}

#[test]
fn write_out_of_bounds() {
    for (offset, len) in [(4094i64, 4usize), (-1, 4), (0, 4097), (4096, 1)] {
        let v = Victim::new();
        let to = (v.wo.to as i64 + offset) as u64;
        let ulpdu = Victim::write(v.wo.stag, to, len);
        v.attack(&[ulpdu], TermError::DdpTaggedBaseOrBounds, Echo::Ddp);
    }
}

#[test]
fn write_whose_tagged_offset_wraps() {
    for to in [u64::MAX - 1, u64::MAX] {
        let v = Victim::new();
        let ulpdu = Victim::write(v.wo.stag, to, 4);
        v.attack(&[ulpdu], TermError::DdpTaggedToWrap, Echo::Ddp);
    }
}

#[test]
fn write_whose_later_segment_goes_out_of_bounds() {
    let v = Victim::new();
    let first = tagged(
        Opcode::RdmaWrite,
        false,
        v.wo.stag.raw(),
        v.wo.to + 4000,
        &[1; 90],
    );
    let second = tagged(
        Opcode::RdmaWrite,
        true,
        v.wo.stag.raw(),
        v.wo.to + 4090,
        &[2; 90],
    );
    let mut v = v;
    v.h.inject(&first);
    // The first segment was placed: it was valid.
    assert_eq!(&v.wo.contents()[4000..4090], &[1; 90][..]);
    v.before[2] = v.wo.snapshot();
    v.attack(&[second], TermError::DdpTaggedBaseOrBounds, Echo::Ddp);
}

// ----- RDMA Read Requests (RFC 5040 section 5.2, remote protection) -------

#[test]
fn read_request_beyond_the_region() {
    for (offset, size) in [(0, 4097), (4095, 2), (4096, 1)] {
        let v = Victim::new();
        let ulpdu = read_request(1, &request(&v.rw, offset, size));
        v.attack(&[ulpdu], TermError::RdmapBaseOrBounds, Echo::DdpAndRead);
    }
}

#[test]
fn read_request_with_a_bad_source_stag() {
    let v = Victim::new();
    let mut req = request(&v.rw, 0, 16);
    req.source_stag = 0x00ee_ee00;
    v.attack(
        &[read_request(1, &req)],
        TermError::RdmapInvalidStag,
        Echo::DdpAndRead,
    );

    let v = Victim::new();
    let mut req = request(&v.rw, 0, 16);
    req.source_stag ^= 0x80;
    v.attack(
        &[read_request(1, &req)],
        TermError::RdmapInvalidStag,
        Echo::DdpAndRead,
    );
}

#[test]
fn read_request_of_another_protection_domain() {
    let v = Victim::new();
    let ulpdu = read_request(1, &request(&v.other, 0, 16));
    v.attack(
        &[ulpdu],
        TermError::RdmapStagNotAssociated,
        Echo::DdpAndRead,
    );
}

#[test]
fn read_request_without_remote_read_access() {
    let v = Victim::new();
    let ulpdu = read_request(1, &request(&v.wo, 0, 16));
    v.attack(&[ulpdu], TermError::RdmapAccessRights, Echo::DdpAndRead);
}

#[test]
fn read_request_whose_tagged_offset_wraps() {
    let v = Victim::new();
    let mut req = request(&v.rw, 0, 16);
    req.source_to = u64::MAX - 4;
    v.attack(
        &[read_request(1, &req)],
        TermError::RdmapToWrap,
        Echo::DdpAndRead,
    );
}

#[test]
fn more_read_requests_than_ird() {
    // IRD 8: nine requests in one burst, before the engine answers any.
    let mut v = Victim::new();
    let ulpdus: Vec<_> = (1..=9)
        .map(|msn| read_request(msn, &request(&v.rw, 0, 16)))
        .collect();
    let mut bytes = Vec::new();
    for ulpdu in &ulpdus {
        v.h.writer.write(&[ulpdu], &mut bytes).unwrap();
    }
    let last = ulpdus.last().unwrap().clone();
    // No Read Response goes out ahead of the Terminate.
    v.h.victim.engine.on_bytes(&bytes);
    v.h.flush();
    let kinds: Vec<_> = v.h.received[1..]
        .iter()
        .map(|u| {
            uwarp_stack::wire::rdmap::RdmapSegment::parse(u)
                .unwrap()
                .opcode()
        })
        .collect();
    assert_eq!(kinds, [Opcode::Terminate]);
    v.check(
        &last,
        TermError::RdmapCatastrophicStream,
        Echo::DdpAndRead,
        [WcStatus::WrFlushError; 2],
    );
}

#[test]
fn read_request_with_a_bad_msn_or_mo() {
    let v = Victim::new();
    let ulpdu = read_request(2, &request(&v.rw, 0, 16));
    v.attack(&[ulpdu], TermError::DdpUntaggedMsnRange, Echo::Ddp);

    let v = Victim::new();
    let req = request(&v.rw, 0, 16).to_bytes();
    let ulpdu = untagged(Opcode::ReadRequest, true, (1, 1, 4), 0, &req);
    v.attack(&[ulpdu], TermError::DdpUntaggedInvalidMo, Echo::Ddp);
}

#[test]
fn truncated_read_request() {
    let v = Victim::new();
    let req = request(&v.rw, 0, 16).to_bytes();
    let ulpdu = untagged(Opcode::ReadRequest, true, (1, 1, 0), 0, &req[..20]);
    v.attack(&[ulpdu], TermError::RdmapCatastrophicStream, Echo::Ddp);
}

// ----- untagged placement (RFC 5041 section 7.1, untagged buffer errors) --

#[test]
fn bad_queue_numbers() {
    for qn in [3, 4, 0x8000_0000] {
        let v = Victim::new();
        let ulpdu = untagged(Opcode::Send, true, (qn, 1, 0), 0, b"x");
        v.attack(&[ulpdu], TermError::DdpUntaggedInvalidQn, Echo::Ddp);
    }
    // A Send on the Read Request queue, a Read Request on the Send queue.
    let v = Victim::new();
    let ulpdu = untagged(Opcode::Send, true, (1, 1, 0), 0, b"x");
    v.attack(&[ulpdu], TermError::DdpUntaggedInvalidQn, Echo::Ddp);
    let v = Victim::new();
    let req = request(&v.rw, 0, 1).to_bytes();
    let ulpdu = untagged(Opcode::ReadRequest, true, (QN_SEND, 1, 0), 0, &req);
    v.attack(&[ulpdu], TermError::DdpUntaggedInvalidQn, Echo::Ddp);
}

#[test]
fn send_with_an_msn_out_of_range() {
    // Two receives are posted: MSNs 1 and 2 have buffers, 3 is the next
    // one that could, anything else is out of range.
    for msn in [0, 4, 1000, u32::MAX] {
        let v = Victim::new();
        v.attack(
            &[send(msn, b"x")],
            TermError::DdpUntaggedMsnRange,
            Echo::Ddp,
        );
    }
}

#[test]
fn send_with_no_posted_receive() {
    let mut v = Victim::new();
    v.h.inject(&send(1, b"a"));
    v.h.inject(&send(2, b"b"));
    v.before[3] = v.local.snapshot();
    v.attack_with(
        &[send(3, b"c")],
        TermError::DdpUntaggedNoBuffer,
        Echo::Ddp,
        [WcStatus::Success; 2],
    );
    let v = Victim::with(Hostile::default_initiator(), false);
    v.attack(&[send(1, b"")], TermError::DdpUntaggedNoBuffer, Echo::Ddp);
}

#[test]
fn send_too_long_for_its_receive() {
    // 101 octets into a receive of 100, in one segment and in two.
    let v = Victim::new();
    v.attack_with(
        &[send(1, &[9; 101])],
        TermError::DdpUntaggedTooLong,
        Echo::Ddp,
        [WcStatus::LocalLengthError, WcStatus::WrFlushError],
    );
    let v = Victim::new();
    let first = untagged(Opcode::Send, false, (QN_SEND, 1, 0), 0, &[1; 60]);
    let second = untagged(Opcode::Send, true, (QN_SEND, 1, 60), 0, &[2; 41]);
    let mut v = v;
    v.h.inject(&first);
    v.before[3] = v.local.snapshot();
    v.attack_with(
        &[second],
        TermError::DdpUntaggedTooLong,
        Echo::Ddp,
        [WcStatus::LocalLengthError, WcStatus::WrFlushError],
    );
}

#[test]
fn send_with_an_invalid_message_offset() {
    // An MO past the receive's end, and MO + length past 2^32.
    for (mo, len) in [(101u32, 0usize), (5000, 1), (u32::MAX - 1, 4)] {
        let v = Victim::new();
        let ulpdu = untagged(Opcode::Send, true, (QN_SEND, 1, mo), 0, &vec![7; len]);
        v.attack(&[ulpdu], TermError::DdpUntaggedInvalidMo, Echo::Ddp);
    }
}

// ----- versions and opcodes -----------------------------------------------

#[test]
fn bad_ddp_version() {
    for version in [0u8, 2, 3] {
        // Tagged: a Write; untagged: a Send. Layout unknown: no echo.
        let v = Victim::new();
        let mut ulpdu = Victim::write(v.wo.stag, v.wo.to, 4);
        ulpdu[0] = (ulpdu[0] & !0x03) | version;
        v.attack(&[ulpdu], TermError::DdpTaggedInvalidVersion, Echo::Nothing);
        let v = Victim::new();
        let mut ulpdu = send(1, b"abc");
        ulpdu[0] = (ulpdu[0] & !0x03) | version;
        v.attack(
            &[ulpdu],
            TermError::DdpUntaggedInvalidVersion,
            Echo::Nothing,
        );
    }
}

#[test]
fn bad_rdmap_version() {
    for rv in [0u8, 2, 3] {
        let v = Victim::new();
        let mut ulpdu = send(1, b"abc");
        ulpdu[1] = (ulpdu[1] & 0x3F) | rv << 6;
        v.attack(&[ulpdu], TermError::RdmapInvalidVersion, Echo::Ddp);
        let v = Victim::new();
        let mut ulpdu = Victim::write(v.wo.stag, v.wo.to, 4);
        ulpdu[1] = (ulpdu[1] & 0x3F) | rv << 6;
        v.attack(&[ulpdu], TermError::RdmapInvalidVersion, Echo::Ddp);
    }
}

#[test]
fn unknown_and_unsupported_opcodes() {
    let mut cases: Vec<Vec<u8>> = Vec::new();
    // Opcodes no RFC defines, untagged and tagged.
    for opcode in 0xC..=0xF {
        let mut u = send(1, b"x");
        u[1] = 0x40 | opcode;
        cases.push(u);
        let mut t = tagged(Opcode::RdmaWrite, true, 1, 0, b"x");
        t[1] = 0x40 | opcode;
        cases.push(t);
    }
    // RFC 7306 atomics and immediate data, which uwarp does not offer.
    cases.push(untagged(
        Opcode::AtomicRequest,
        true,
        (1, 1, 0),
        0,
        &[0; 52],
    ));
    cases.push(untagged(
        Opcode::AtomicResponse,
        true,
        (3, 1, 0),
        0,
        &[0; 8],
    ));
    cases.push(untagged(
        Opcode::ImmediateData,
        true,
        (QN_SEND, 1, 0),
        0,
        &[0; 8],
    ));
    cases.push(untagged(
        Opcode::ImmediateDataSolicited,
        true,
        (QN_SEND, 1, 0),
        0,
        &[0; 8],
    ));
    // Opcodes in the wrong buffer model.
    let mut write_untagged = send(1, b"x");
    write_untagged[1] = 0x40;
    cases.push(write_untagged);
    let mut send_tagged = tagged(Opcode::RdmaWrite, true, 1, 0, b"x");
    send_tagged[1] = 0x43;
    cases.push(send_tagged);
    for ulpdu in cases {
        let v = Victim::new();
        v.attack(&[ulpdu], TermError::RdmapUnexpectedOpcode, Echo::Ddp);
    }
}

// ----- Read Responses ------------------------------------------------------

#[test]
fn read_response_nobody_asked_for() {
    let h = Hostile::default_initiator();
    let region = h.victim.region(64, Access::LOCAL_WRITE);
    let before = region.snapshot();
    let mut h = h;
    let ulpdu = tagged(
        Opcode::ReadResponse,
        true,
        region.stag.raw(),
        region.to,
        &[1; 8],
    );
    h.inject(&ulpdu);
    let term = h.terminate();
    assert_eq!(term.error, TermError::RdmapUnexpectedOpcode);
    assert_eq!(term.ddp_header.as_deref(), Some(&ulpdu[..14]));
    assert!(region.snapshot() == before);
    assert_eq!(h.victim.engine.state(), QpState::Terminate);
}

#[test]
fn read_response_to_the_wrong_place() {
    // The outstanding Read asked for READ_LEN octets into `sink`.
    let v = Victim::new();
    let ulpdu = tagged(
        Opcode::ReadResponse,
        true,
        v.local.stag.raw(),
        v.local.to,
        &[1; 8],
    );
    v.attack(&[ulpdu], TermError::DdpTaggedStagNotAssociated, Echo::Ddp);
    let v = Victim::new();
    let ulpdu = tagged(
        Opcode::ReadResponse,
        true,
        v.sink.stag.raw(),
        v.sink.to + 1,
        &[1; 8],
    );
    v.attack(&[ulpdu], TermError::DdpTaggedBaseOrBounds, Echo::Ddp);
    let v = Victim::new();
    let too_much = vec![1; READ_LEN as usize + 1];
    let ulpdu = tagged(
        Opcode::ReadResponse,
        true,
        v.sink.stag.raw(),
        v.sink.to,
        &too_much,
    );
    v.attack(&[ulpdu], TermError::DdpTaggedBaseOrBounds, Echo::Ddp);
}

// ----- MPA (RFC 5044 section 8, LLP errors) --------------------------------

#[test]
fn bad_crc() {
    let mut v = Victim::new();
    let ulpdu = Victim::write(v.rw.stag, v.rw.to, 16);
    let mut bytes = Vec::new();
    v.h.writer.write(&[&ulpdu], &mut bytes).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    v.attack_raw(&bytes, &ulpdu, TermError::MpaCrcError, Echo::Nothing);
}

#[test]
fn bad_crc_in_the_payload() {
    let mut v = Victim::new();
    let ulpdu = Victim::write(v.rw.stag, v.rw.to, 16);
    let mut bytes = Vec::new();
    v.h.writer.write(&[&ulpdu], &mut bytes).unwrap();
    bytes[2 + 14 + 3] ^= 0x80;
    assert_eq!(v.h.victim.engine.counters().crc_errors, 0);
    v.h.victim.engine.on_bytes(&bytes);
    assert_eq!(v.h.victim.engine.counters().crc_errors, 1);
    // More octets after the error are not more errors.
    v.h.victim.engine.on_bytes(&bytes);
    assert_eq!(v.h.victim.engine.counters().crc_errors, 1);
    v.attack_raw(&[], &ulpdu, TermError::MpaCrcError, Echo::Nothing);
}

#[test]
fn marker_mismatch() {
    // The victim receives Markers: a FPDU long enough to hold one.
    let setup = Setup {
        markers_ba: true,
        ..Setup::default()
    };
    let mut v = Victim::with(Hostile::new(setup, Role::Initiator), true);
    let ulpdu = Victim::write(v.rw.stag, v.rw.to, 1000);
    let mut bytes = Vec::new();
    v.h.writer.write(&[&ulpdu], &mut bytes).unwrap();
    // The first Marker is at stream offset 0 (it points at this FPDU),
    // the next at 512.
    bytes[512 + 3] ^= 0x04;
    v.attack_raw(&bytes, &ulpdu, TermError::MpaMarkerMismatch, Echo::Nothing);
}

#[test]
fn truncated_ulpdus() {
    // Shorter than the DDP header its T bit announces: nothing can be
    // echoed.
    for len in [0usize, 1, 2, 13] {
        let v = Victim::new();
        let ulpdu = Victim::write(v.rw.stag, v.rw.to, 0)[..len].to_vec();
        v.attack(&[ulpdu], TermError::DdpLocalCatastrophic, Echo::Nothing);
    }
    let v = Victim::new();
    let ulpdu = send(1, b"")[..17].to_vec();
    v.attack(&[ulpdu], TermError::DdpLocalCatastrophic, Echo::Nothing);
}

#[test]
fn a_stream_split_anywhere_gives_the_same_answer() {
    for piece in [1, 2, 3, 7, 64] {
        let mut v = Victim::new();
        let mut bytes = Vec::new();
        let good = Victim::write(v.rw.stag, v.rw.to, 100);
        let bad = Victim::write(v.ro.stag, v.ro.to, 100);
        v.h.writer.write(&[&good], &mut bytes).unwrap();
        v.h.writer.write(&[&bad], &mut bytes).unwrap();
        for chunk in bytes.chunks(piece) {
            v.h.victim.engine.on_bytes(chunk);
        }
        assert_eq!(&v.rw.contents()[..100], &[0xEE; 100][..]);
        v.before[0] = v.rw.snapshot();
        v.check(
            &bad,
            TermError::DdpTaggedInvalidStag,
            Echo::Ddp,
            [WcStatus::WrFlushError; 2],
        );
    }
}

#[test]
fn a_receive_that_names_memory_it_may_not_write() {
    // The application's own mistake: a receive whose element points at a
    // region without local write. The Send arrives, nothing is written,
    // and the receive completes with a local protection error.
    let mut h = Hostile::default_initiator();
    let region = h.victim.region(64, Access::REMOTE_READ);
    region.fill(3);
    let before = region.snapshot();
    h.victim.engine.post_recv(RecvWr {
        wr_id: 5,
        sgl: vec![region.whole()],
    });
    let ulpdu = send(1, b"payload");
    h.inject(&ulpdu);
    assert!(region.snapshot() == before);
    let recvs = h.victim.statuses(CqKind::Recv);
    assert_eq!(recvs, [(5, WcStatus::LocalProtectionError)]);
    assert_eq!(h.terminate().error, TermError::RdmapLocalCatastrophic);
}

#[test]
fn a_region_invalidated_before_its_read_response() {
    // The Read Request was valid when it arrived; the application then
    // invalidated the region. The Terminate names the request (R).
    let mut v = Victim::new();
    let req = request(&v.rw, 100, 64);
    v.h.victim.engine.on_bytes(&{
        let mut bytes = Vec::new();
        v.h.writer
            .write(&[&read_request(1, &req)], &mut bytes)
            .unwrap();
        bytes
    });
    v.h.victim.table.invalidate_local(v.rw.stag).unwrap().wait();
    v.h.flush();
    let term = v.h.terminate();
    assert_eq!(term.error, TermError::RdmapInvalidStag);
    assert_eq!(term.rdmap_header.as_deref(), Some(&req.to_bytes()[..]));
    assert_eq!((term.segment_len, term.ddp_header), (None, None));
    assert_eq!(
        v.h.victim.events,
        [QpEvent::TerminateSent(TermError::RdmapInvalidStag)]
    );
    assert_eq!(v.h.victim.engine.state(), QpState::Terminate);
    let after: Vec<_> = v.regions().iter().map(|r| r.snapshot()).collect();
    assert!(after == v.before);
}
