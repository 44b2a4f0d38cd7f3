//! Every RDMAP operation end to end between two engines (RFC 5040 section
//! 5): Send, Send with Invalidate, Send with Solicited Event, Send with
//! Solicited Event and Invalidate, RDMA Write and RDMA Read, at the sizes
//! where segmentation changes (0, 1, and one either side of the largest
//! tagged and untagged payload a segment carries), 1 MiB and 16 MiB, with
//! CRC on and off and Markers on or off in each direction independently.
//! The data is checked octet for octet, the octets around every region are
//! checked untouched, and the number of FPDUs is checked against the
//! segmentation rule of RFC 5041 section 5.2.

mod common;

use common::{pair, pump, read_from, write_at, write_to, Region, Setup, Side, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::record::{FpduSink, VecSink};
use uwarp_stack::verbs::{Payload, SendOp, SendWr, WcOpcode, WcStatus};
use uwarp_stack::wire::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use uwarp_stack::wire::terminate::TermError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    SendInvalidate,
    SendSolicited,
    SendSolicitedInvalidate,
    Write,
    Read,
}

const OPS: [Op; 6] = [
    Op::Send,
    Op::SendInvalidate,
    Op::SendSolicited,
    Op::SendSolicitedInvalidate,
    Op::Write,
    Op::Read,
];

const MIB: usize = 1 << 20;

/// The eight stream setups: CRC on or off, Markers on or off each way,
/// each with a MULPDU of its own (odd ones included).
fn setups() -> Vec<Setup> {
    let mulpdus = [1448, 1001, 4096, 539];
    (0..8)
        .map(|i| Setup {
            crc: i & 1 != 0,
            markers_ab: i & 2 != 0,
            markers_ba: i & 4 != 0,
            mulpdu: mulpdus[i % 4],
            ..Setup::default()
        })
        .collect()
}

/// 0, 1, and one either side of the payload of one untagged and one
/// tagged segment.
fn boundary_sizes(mulpdu: usize) -> Vec<usize> {
    let untagged = mulpdu - UNTAGGED_HEADER_LEN;
    let tagged = mulpdu - TAGGED_HEADER_LEN;
    vec![
        0,
        1,
        untagged - 1,
        untagged,
        untagged + 1,
        tagged - 1,
        tagged,
        tagged + 1,
    ]
}

/// Segments a message of `len` octets takes with `room` payload octets each.
fn segments(len: usize, room: usize) -> u64 {
    len.div_ceil(room).max(1) as u64
}

/// Runs `op` with `len` octets from the initiator to the responder (or, for
/// a Read, from the responder's region into the initiator's) and checks
/// everything it should have done.
fn transfer(setup: Setup, op: Op, len: usize) {
    let ctx = format!("{op:?} of {len} octets over {setup:?}");
    let (mut a, mut b) = pair(setup);
    let mulpdu = setup.mulpdu;
    let (local, remote) = match op {
        Op::Read => (
            a.region(len, Access::LOCAL_WRITE),
            b.region(len, Access::REMOTE_READ),
        ),
        Op::Write => (a.region(len, Access::NONE), b.region(len, REMOTE_ALL)),
        _ => (
            a.region(len, Access::NONE),
            b.region(len, Access::LOCAL_WRITE),
        ),
    };
    let data = match op {
        Op::Read => remote.fill(3),
        _ => local.fill(3),
    };
    // A region of the responder that a Send with Invalidate invalidates.
    let victim = b.region(16, REMOTE_ALL);
    let (send_op, solicited) = match op {
        Op::Send => (SendOp::Send, false),
        Op::SendSolicited => (SendOp::Send, true),
        Op::SendInvalidate | Op::SendSolicitedInvalidate => (
            SendOp::SendWithInvalidate {
                invalidate: victim.stag.raw(),
            },
            op == Op::SendSolicitedInvalidate,
        ),
        Op::Write => (write_to(&remote, 0), false),
        Op::Read => (read_from(&remote, 0), false),
    };
    let is_send = !matches!(op, Op::Write | Op::Read);
    if is_send {
        b.post_recv(10, vec![remote.whole()]);
    }
    a.engine.post_send(SendWr {
        solicited,
        ..SendWr::new(20, send_op, Payload::Sgl(vec![local.whole()]))
    });
    pump(&mut a, &mut b);

    let (sink, opcode) = match op {
        Op::Read => (&local, WcOpcode::Read),
        Op::Write => (&remote, WcOpcode::Write),
        _ => (&remote, WcOpcode::Send),
    };
    assert!(sink.contents() == data, "data differs: {ctx}");
    for region in [&local, &remote, &victim] {
        region.assert_guards();
    }
    let sent = a.take(CqKind::Send);
    assert_eq!(sent.len(), 1, "{ctx}");
    assert_eq!(
        (sent[0].wr_id, sent[0].opcode, sent[0].status),
        (20, opcode, WcStatus::Success),
        "{ctx}"
    );
    if op == Op::Read {
        assert_eq!(sent[0].byte_len, len as u32, "{ctx}");
    }
    let received = b.take(CqKind::Recv);
    if is_send {
        assert_eq!(received.len(), 1, "{ctx}");
        let wc = received[0];
        assert_eq!(
            (wc.wr_id, wc.opcode, wc.status, wc.byte_len),
            (10, WcOpcode::Recv, WcStatus::Success, len as u32),
            "{ctx}"
        );
        assert_eq!(wc.solicited, solicited, "{ctx}");
        let invalidates = matches!(op, Op::SendInvalidate | Op::SendSolicitedInvalidate);
        assert_eq!(
            wc.invalidated_rkey,
            invalidates.then_some(victim.stag.raw()),
            "{ctx}"
        );
        assert_eq!(
            b.table.info(victim.stag).unwrap().valid,
            !invalidates,
            "{ctx}"
        );
    } else {
        assert!(received.is_empty(), "{ctx}");
    }
    assert!(
        a.completions.is_empty() && b.completions.is_empty(),
        "{ctx}"
    );
    assert!(a.events.is_empty() && b.events.is_empty(), "{ctx}");
    // Segmentation: FPDUs each end sent.
    let (a_fpdus, b_fpdus) = match op {
        Op::Read => (1, segments(len, mulpdu - TAGGED_HEADER_LEN)),
        Op::Write => (segments(len, mulpdu - TAGGED_HEADER_LEN), 0),
        _ => (segments(len, mulpdu - UNTAGGED_HEADER_LEN), 0),
    };
    assert_eq!(a.engine.counters().fpdus_sent, a_fpdus, "{ctx}");
    assert_eq!(b.engine.counters().fpdus_sent, b_fpdus, "{ctx}");
    assert_eq!(a.engine.counters().terminates_sent, 0, "{ctx}");
    assert_eq!(b.engine.counters().terminates_sent, 0, "{ctx}");
}

fn boundaries(op: Op) {
    for setup in setups() {
        for len in boundary_sizes(setup.mulpdu) {
            transfer(setup, op, len);
        }
    }
}

fn large(op: Op, len: usize) {
    for setup in setups() {
        transfer(setup, op, len);
    }
}

#[test]
fn send_at_segment_boundaries() {
    boundaries(Op::Send);
}

#[test]
fn send_with_invalidate_at_segment_boundaries() {
    boundaries(Op::SendInvalidate);
}

#[test]
fn send_with_solicited_event_at_segment_boundaries() {
    boundaries(Op::SendSolicited);
}

#[test]
fn send_with_solicited_event_and_invalidate_at_segment_boundaries() {
    boundaries(Op::SendSolicitedInvalidate);
}

#[test]
fn write_at_segment_boundaries() {
    boundaries(Op::Write);
}

#[test]
fn read_at_segment_boundaries() {
    boundaries(Op::Read);
}

#[test]
fn every_operation_of_1_mib() {
    for op in OPS {
        large(op, MIB);
    }
}

#[test]
fn send_of_16_mib() {
    large(Op::Send, 16 * MIB);
}

#[test]
fn send_with_invalidate_of_16_mib() {
    large(Op::SendInvalidate, 16 * MIB);
}

#[test]
fn send_with_solicited_event_of_16_mib() {
    large(Op::SendSolicited, 16 * MIB);
}

#[test]
fn send_with_solicited_event_and_invalidate_of_16_mib() {
    large(Op::SendSolicitedInvalidate, 16 * MIB);
}

#[test]
fn write_of_16_mib() {
    large(Op::Write, 16 * MIB);
}

#[test]
fn read_of_16_mib() {
    large(Op::Read, 16 * MIB);
}

/// The side that is not the initiator works the same way: every operation
/// from the responder to the initiator.
#[test]
fn every_operation_from_the_responder() {
    for op in OPS {
        let (mut a, mut b) = pair(Setup::default());
        reverse(&mut b, &mut a, op);
    }
}

fn reverse(from: &mut Side, to: &mut Side, op: Op) {
    let len = 3000;
    let src: Region;
    let dst: Region;
    match op {
        Op::Read => {
            src = to.region(len, Access::REMOTE_READ);
            dst = from.region(len, Access::LOCAL_WRITE);
        }
        Op::Write => {
            src = from.region(len, Access::NONE);
            dst = to.region(len, Access::REMOTE_WRITE);
        }
        _ => {
            src = from.region(len, Access::NONE);
            dst = to.region(len, Access::LOCAL_WRITE);
            to.post_recv(1, vec![dst.whole()]);
        }
    }
    let data = src.fill(9);
    let send_op = match op {
        Op::Read => read_from(&src, 0),
        Op::Write => write_to(&dst, 0),
        _ => SendOp::Send,
    };
    let local = if op == Op::Read { &dst } else { &src };
    from.post(2, send_op, vec![local.whole()]);
    // The responder waits for the initiator's first FPDU: a zero-length
    // Write to an STag nobody checks gets it going.
    to.post(3, write_at(0, 1), vec![]);
    pump(to, from);
    assert_eq!(dst.contents(), data, "{op:?}");
    let sent = from.take(CqKind::Send);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].status, WcStatus::Success);
}

/// `poll_fpdu` gives one whole FPDU per call, so a transport can queue
/// each as a TCP record (RFC 5044 section 5.2): every piece decodes to
/// exactly one ULPDU with nothing left over, with CRC and Markers on, and
/// the pieces in order carry a Write and a Send intact.
#[test]
fn poll_fpdu_gives_one_whole_fpdu_per_call() {
    let setup = Setup {
        crc: true,
        markers_ab: true,
        mulpdu: 1001,
        ..Setup::default()
    };
    let (mut a, mut b) = pair(setup);
    let write_src = a.region(10_000, Access::NONE);
    let write_dst = b.region(10_000, REMOTE_ALL);
    let send_src = a.region(3_000, Access::NONE);
    let send_dst = b.region(3_000, Access::LOCAL_WRITE);
    let written = write_src.fill(5);
    let sent = send_src.fill(6);
    b.post_recv(1, vec![send_dst.whole()]);
    a.post(2, write_to(&write_dst, 0), vec![write_src.whole()]);
    a.post(3, SendOp::Send, vec![send_src.whole()]);
    let mut pieces = Vec::new();
    let mut piece = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut piece)) {
        pieces.push(std::mem::take(&mut piece));
    }
    let tagged_room = 1001 - TAGGED_HEADER_LEN;
    let untagged_room = 1001 - UNTAGGED_HEADER_LEN;
    let expected = segments(10_000, tagged_room) + segments(3_000, untagged_room);
    assert_eq!(pieces.len() as u64, expected);
    // One reader over the whole stream, as the peer has: Markers sit at
    // stream offsets, so each piece is checked where it falls.
    let mut reader = uwarp_stack::mpa::FpduReader::new(true, true);
    for piece in &pieces {
        reader.push(piece);
        assert!(matches!(reader.next_ulpdu(), Some(Ok(_))));
        assert!(reader.next_ulpdu().is_none());
        assert_eq!(reader.buffered(), 0, "a piece held part of a second FPDU");
        b.engine.on_bytes(piece);
    }
    assert_eq!(write_dst.contents(), written);
    assert_eq!(send_dst.contents(), sent);
    let received = b.take(CqKind::Recv);
    assert_eq!((received[0].wr_id, received[0].byte_len), (1, 3_000));
}

/// A sink that has room only every third time it is asked, as a TCP send
/// queue that fills up: nothing is lost or sent twice, and a request
/// completes only once its last FPDU was taken.
struct Stingy {
    asked: u32,
    taken: Vec<u8>,
    reserved: Vec<u8>,
}

impl FpduSink for Stingy {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        self.asked += 1;
        if self.asked % 3 != 0 {
            return None;
        }
        self.reserved = vec![0xEE; len];
        Some(&mut self.reserved)
    }

    fn commit(&mut self) {
        self.taken.append(&mut self.reserved);
    }
}

#[test]
fn a_sink_without_room_holds_the_fpdu_and_its_completion() {
    let (mut a, mut b) = pair(Setup {
        crc: true,
        mulpdu: 1001,
        ..Setup::default()
    });
    let write_src = a.region(4_935, Access::NONE);
    let write_dst = b.region(4_935, REMOTE_ALL);
    let send_src = a.region(2_949, Access::NONE);
    let send_dst = b.region(2_949, Access::LOCAL_WRITE);
    let written = write_src.fill(8);
    let sent = send_src.fill(9);
    b.post_recv(1, vec![send_dst.whole()]);
    a.post(2, write_to(&write_dst, 0), vec![write_src.whole()]);
    a.post(3, SendOp::Send, vec![send_src.whole()]);
    let mut sink = Stingy {
        asked: 0,
        taken: Vec::new(),
        reserved: Vec::new(),
    };
    let mut framed = 0;
    for _ in 0..100 {
        if a.engine.poll_fpdu(&mut sink) {
            framed += 1;
        }
        a.collect();
        let done: Vec<u64> = a.completions.iter().map(|(_, wc)| wc.wr_id).collect();
        // Five Write segments of 987 octets then three Send segments of
        // 983: each request completes exactly when its last one was taken.
        let expect: &[u64] = match framed {
            0..=4 => &[],
            5..=7 => &[2],
            _ => &[2, 3],
        };
        assert_eq!(done, expect, "after {framed} FPDUs");
    }
    assert_eq!(framed, 8);
    b.engine.on_bytes(&sink.taken);
    assert_eq!(write_dst.contents(), written);
    assert_eq!(send_dst.contents(), sent);
    let received = b.take(CqKind::Recv);
    assert_eq!((received.len(), received[0].byte_len), (1, 2_949));
}

#[test]
fn a_region_gone_mid_message_fails_the_request_with_a_terminate() {
    let (mut a, b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    let src = a.region(5_000, Access::NONE);
    let dst = b.region(5_000, REMOTE_ALL);
    src.fill(3);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    a.record();
    let mut out = Vec::new();
    assert!(a.transmit(&mut out, 1) > 0);
    // The application deregisters the source while the Write is out.
    a.table.deregister(src.stag).unwrap();
    a.transmit(&mut out, 1 << 20);
    let ulpdus = a.take_sent();
    assert_eq!(ulpdus.len(), 2, "one Write segment, then the Terminate");
    let term = common::as_terminate(&ulpdus[1]).expect("a Terminate");
    assert_eq!(term.error, TermError::RdmapLocalCatastrophic);
    let sent = a.take(CqKind::Send);
    assert_eq!(sent[0].status, WcStatus::LocalProtectionError);
}
