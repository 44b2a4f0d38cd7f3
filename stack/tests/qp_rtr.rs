//! Peer-to-peer mode (RFC 6581 section 9.2, RFC 5044 section 7.1.2): the
//! initiator's first FPDU is the negotiated zero-length RTR, with STag 1 as
//! siw sends it; the responder sends nothing until the initiator's first
//! FPDU has arrived; a Send RTR takes no posted receive and a Read RTR is
//! answered with a zero-length Read Response.

mod common;

use common::{opcodes, pair, pump, read_from, write_at, write_to, Setup, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::mpa::{FpduWriter, Rtr};
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::verbs::{SendOp, WcOpcode, WcStatus};
use uwarp_stack::wire::rdmap::Opcode;

/// The RTR ULPDUs uwarp sends, octet for octet.
fn expected_rtr(rtr: Rtr) -> Vec<u8> {
    match rtr {
        // Tagged, L, DV 1; RDMA Write; STag 1; TO 0.
        Rtr::Write => [&[0xC1, 0x40, 0, 0, 0, 1][..], &[0; 8]].concat(),
        // Untagged, L, DV 1; Send; Inv STag 0; QN 0; MSN 1; MO 0.
        Rtr::Send => [
            &[0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1][..],
            &[0; 4],
        ]
        .concat(),
        // Read Request on QN 1, MSN 1: sink STag 1, TO 0, size 0, source
        // STag 1, TO 0.
        Rtr::Read => [
            &[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0][..],
            &[0, 0, 0, 1],
            &[0; 8],
            &[0; 4],
            &[0, 0, 0, 1],
            &[0; 8],
        ]
        .concat(),
    }
}

fn setup(rtr: Rtr, crc: bool) -> Setup {
    Setup {
        rtr: Some(rtr),
        crc,
        ..Setup::default()
    }
}

#[test]
fn the_initiators_first_fpdu_is_the_rtr() {
    for rtr in [Rtr::Write, Rtr::Send, Rtr::Read] {
        for crc in [false, true] {
            let (mut a, _b) = pair(setup(rtr, crc));
            // Work posted before the first transmit still goes after the RTR.
            let src = a.region(8, Access::NONE);
            a.post(1, SendOp::Send, vec![src.whole()]);
            let mut out = Vec::new();
            a.transmit(&mut out, 1 << 20);
            // The whole FPDU, framing and CRC included.
            let mut rtr_fpdu = Vec::new();
            FpduWriter::new(crc, false)
                .write(&[&expected_rtr(rtr)], &mut rtr_fpdu)
                .unwrap();
            assert_eq!(&out[..rtr_fpdu.len()], &rtr_fpdu[..], "{rtr:?} crc {crc}");
            assert!(out.len() > rtr_fpdu.len(), "the Send follows");
        }
    }
}

#[test]
fn the_initiator_sends_the_rtr_with_nothing_posted() {
    for rtr in [Rtr::Write, Rtr::Send, Rtr::Read] {
        let (mut a, _b) = pair(setup(rtr, true));
        a.record();
        a.transmit(&mut Vec::new(), 1 << 20);
        assert_eq!(a.take_sent(), [expected_rtr(rtr)]);
        assert!(
            a.take(CqKind::Send).is_empty(),
            "the RTR is no work request"
        );
    }
}

#[test]
fn the_responder_sends_nothing_before_the_initiators_first_fpdu() {
    for rtr in [None, Some(Rtr::Write), Some(Rtr::Send), Some(Rtr::Read)] {
        let (mut a, mut b) = pair(Setup {
            rtr,
            ..Setup::default()
        });
        let remote = a.region(64, REMOTE_ALL);
        let src = b.region(64, Access::NONE);
        let dst = a.region(64, Access::LOCAL_WRITE);
        a.post_recv(1, vec![dst.whole()]);
        b.post(1, SendOp::Send, vec![src.whole()]);
        b.post(2, write_to(&remote, 0), vec![src.whole()]);
        for _ in 0..3 {
            let mut out = Vec::new();
            assert_eq!(b.transmit(&mut out, 1 << 20), 0, "{rtr:?}");
            assert!(out.is_empty());
        }
        if rtr.is_none() {
            // Without peer-to-peer the initiator's first FPDU is its first
            // message: give it one.
            a.post(9, write_at(0, 1), vec![]);
        }
        // Half of the initiator's first FPDU is not enough.
        let mut first = Vec::new();
        a.transmit(&mut first, 1 << 20);
        b.engine.on_bytes(&first[..first.len() / 2]);
        assert_eq!(b.transmit(&mut Vec::new(), 1 << 20), 0, "{rtr:?}");
        b.engine.on_bytes(&first[first.len() / 2..]);
        pump(&mut a, &mut b);
        let sent = b.statuses(CqKind::Send);
        assert_eq!(
            sent,
            [(1, WcStatus::Success), (2, WcStatus::Success)],
            "{rtr:?}"
        );
        assert_eq!(a.take(CqKind::Recv)[0].byte_len, 64);
        assert_eq!(dst.contents(), src.contents());
        assert_eq!(remote.contents(), src.contents());
    }
}

#[test]
fn a_send_rtr_takes_no_posted_receive() {
    let (mut a, mut b) = pair(setup(Rtr::Send, true));
    let dst = b.region(100, Access::LOCAL_WRITE);
    b.post_recv(7, vec![dst.whole()]);
    pump(&mut a, &mut b);
    assert!(
        b.take(CqKind::Recv).is_empty(),
        "the RTR was consumed silently"
    );
    // The receive is still there for the first real Send (MSN 2).
    let src = a.region(100, Access::NONE);
    let data = src.fill(4);
    a.post(1, SendOp::Send, vec![src.whole()]);
    pump(&mut a, &mut b);
    let recv = b.take(CqKind::Recv);
    assert_eq!(
        recv.iter().map(common::summary).collect::<Vec<_>>(),
        [(7, WcOpcode::Recv, WcStatus::Success, 100)]
    );
    assert_eq!(dst.contents(), data);
    assert!(b.events.is_empty() && a.events.is_empty());
}

#[test]
fn a_read_rtr_gets_a_zero_length_read_response() {
    let (mut a, mut b) = pair(setup(Rtr::Read, true));
    b.record();
    pump(&mut a, &mut b);
    // Tagged, L; Read Response; sink STag 1; TO 0; nothing else.
    let response = [&[0xC1, 0x42, 0, 0, 0, 1][..], &[0; 8]].concat();
    assert_eq!(b.take_sent(), [response]);
    assert!(a.take(CqKind::Send).is_empty());
    assert!(a.events.is_empty() && b.events.is_empty());
    // Reads work normally afterwards, under an ORD the RTR no longer holds.
    let remote = b.region(3000, REMOTE_ALL);
    let data = remote.fill(6);
    let sink = a.region(3000, Access::LOCAL_WRITE);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    pump(&mut a, &mut b);
    assert_eq!(sink.contents(), data);
    assert_eq!(a.take(CqKind::Send)[0].status, WcStatus::Success);
}

#[test]
fn a_read_rtr_holds_the_only_ord_slot_until_answered() {
    let (mut a, mut b) = pair(Setup {
        ird_ord: 1,
        ..setup(Rtr::Read, true)
    });
    a.record();
    let remote = b.region(16, REMOTE_ALL);
    let data = remote.fill(1);
    let sink = a.region(16, Access::LOCAL_WRITE);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    let mut out = Vec::new();
    a.transmit(&mut out, 1 << 20);
    assert_eq!(
        a.take_sent(),
        [expected_rtr(Rtr::Read)],
        "the Read waits for the RTR"
    );
    b.engine.on_bytes(&out);
    pump(&mut a, &mut b);
    assert_eq!(opcodes(&a.take_sent()), [Opcode::ReadRequest]);
    assert_eq!(sink.contents(), data);
    assert!(b.events.is_empty(), "IRD 1 was never exceeded");
}

#[test]
fn a_malformed_send_rtr_is_refused() {
    use common::{untagged, Hostile};
    use uwarp_stack::rdmap::{QpEvent, Role};
    use uwarp_stack::wire::terminate::TermError;
    // Regression: a zero-length Send on another queue was taken for the
    // RTR and answered with an MSN error.
    let cases = [
        ((5, 1, 0), TermError::DdpUntaggedInvalidQn),
        ((0, 2, 0), TermError::DdpUntaggedMsnRange),
        ((0, 1, 4), TermError::DdpUntaggedInvalidMo),
    ];
    for ((qn, msn, mo), error) in cases {
        let mut h = Hostile::new(setup(Rtr::Send, true), Role::Responder);
        let dst = h.victim.region(8, Access::LOCAL_WRITE);
        h.victim.post_recv(1, vec![dst.whole()]);
        let rtr = untagged(Opcode::Send, true, (qn, msn, mo), 0, &[]);
        h.inject(&rtr);
        let term = h.terminate();
        assert_eq!(term.error, error);
        assert_eq!(term.ddp_header.as_deref(), Some(&rtr[..]));
        assert_eq!(h.victim.events, [QpEvent::TerminateSent(error)]);
    }
}
