//! Send with Invalidate (RFC 5040 sections 5.3 and 7): the STag it names
//! is invalid once the Send is delivered, so a later RDMA Write to it is
//! answered with a Terminate; an STag of another protection domain, one
//! registered as not remotely invalidatable, or one that is not valid is
//! refused with the RDMAP Terminate the STag table names, and the receive
//! completes with an error.

mod common;

use common::{as_terminate, pair, pump, write_to, Region, Setup, Side, REMOTE_ALL};
use uwarp_stack::mem::{Access, PdId, Stag};
use uwarp_stack::rdmap::{CqKind, LlpClose, QpEvent};
use uwarp_stack::verbs::{QpState, SendOp, SendWr, WcStatus};
use uwarp_stack::wire::terminate::TermError;

/// The initiator sends a Send with Invalidate of `stag`, with or without a
/// Solicited Event, into a posted receive of the responder.
fn send_invalidate(a: &mut Side, b: &mut Side, stag: u32, solicited: bool) -> Region {
    let dst = b.region(32, Access::LOCAL_WRITE);
    b.post_recv(1, vec![dst.whole()]);
    let src = a.region(32, Access::NONE);
    src.fill(8);
    a.engine.post_send(SendWr {
        solicited,
        ..common::wr(
            2,
            SendOp::SendWithInvalidate { invalidate: stag },
            vec![src.whole()],
        )
    });
    pump(a, b);
    dst
}

#[test]
fn an_invalidated_stag_refuses_later_writes() {
    for solicited in [false, true] {
        let (mut a, mut b) = pair(Setup::default());
        b.record();
        let target = b.region(64, REMOTE_ALL);
        target.fill(1);
        // A Write before the invalidation lands.
        let src = a.region(8, Access::NONE);
        src.fill(2);
        let write = write_to(&target, 0);
        a.post(1, write, vec![src.whole()]);
        pump(&mut a, &mut b);
        assert_eq!(&target.contents()[..8], &src.contents()[..]);
        send_invalidate(&mut a, &mut b, target.stag.raw(), solicited);
        let recv = b.take(CqKind::Recv);
        assert_eq!(recv[0].status, WcStatus::Success);
        assert_eq!(recv[0].invalidated_rkey, Some(target.stag.raw()));
        assert_eq!(recv[0].solicited, solicited);
        assert!(!b.table.info(target.stag).unwrap().valid);
        let before = target.snapshot();
        // The same Write again is refused and places nothing.
        a.post(3, write, vec![src.whole()]);
        pump(&mut a, &mut b);
        assert!(target.snapshot() == before);
        let term = b.take_sent().iter().find_map(|u| as_terminate(u)).unwrap();
        assert_eq!(term.error, TermError::DdpTaggedInvalidStag);
        assert_eq!(
            b.events,
            [QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag)]
        );
        assert_eq!(
            a.events,
            [QpEvent::TerminateReceived(TermError::DdpTaggedInvalidStag)]
        );
        assert_eq!(b.engine.state(), QpState::Terminate);
        assert_eq!(a.engine.state(), QpState::Terminate);
    }
}

/// A Send with Invalidate of `stag` that the responder must refuse with
/// `expected`; the STag's validity must not change.
fn refused(make: impl FnOnce(&Side) -> Stag, expected: TermError) {
    let (mut a, mut b) = pair(Setup::default());
    b.record();
    let stag = make(&b);
    let valid_before = b.table.info(stag).map(|i| i.valid);
    let dst = send_invalidate(&mut a, &mut b, stag.raw(), false);
    assert_eq!(
        b.table.info(stag).map(|i| i.valid),
        valid_before,
        "{expected:?}"
    );
    let recv = b.take(CqKind::Recv);
    assert_eq!(recv.len(), 1, "{expected:?}");
    assert_eq!(
        recv[0].status,
        WcStatus::RemoteInvalidRequest,
        "{expected:?}"
    );
    assert_eq!(recv[0].terminate, Some(expected), "{expected:?}");
    assert_eq!(recv[0].invalidated_rkey, None);
    let sent = b.take_sent();
    let term = sent.iter().find_map(|u| as_terminate(u)).unwrap();
    assert_eq!(term.error, expected);
    // The Terminate echoes the Send with Invalidate's header: untagged,
    // opcode 4, the STag in RsvdULP[8:39].
    let header = term.ddp_header.expect("D is set");
    assert_eq!(header.len(), 18);
    assert_eq!(header[1], 0x44);
    assert_eq!(&header[2..6], &stag.raw().to_be_bytes());
    assert_eq!(term.segment_len, Some(18 + 32));
    assert_eq!(term.rdmap_header, None);
    assert_eq!(b.events, [QpEvent::TerminateSent(expected)]);
    assert_eq!(b.engine.state(), QpState::Terminate);
    assert_eq!(b.engine.llp_close(), Some(LlpClose::Graceful));
    assert_eq!(a.events, [QpEvent::TerminateReceived(expected)]);
    dst.assert_guards();
}

#[test]
fn invalidating_an_stag_of_another_protection_domain() {
    // RDMAP remote protection, "STag cannot be invalidated", as siw
    // reports a PD mismatch (see `InvalidateError::rdmap_error`).
    refused(
        |b| {
            let other = PdId::from_raw(b.pd.raw() + 100);
            b.region_in(other, 16, REMOTE_ALL, true).stag
        },
        TermError::RdmapProtectionCannotInvalidate,
    );
}

#[test]
fn invalidating_an_stag_that_is_not_invalidatable() {
    refused(
        |b| b.region_in(b.pd, 16, REMOTE_ALL, false).stag,
        TermError::RdmapOperationCannotInvalidate,
    );
}

#[test]
fn invalidating_an_stag_that_is_not_valid() {
    refused(|_| Stag(0x00ab_cd07), TermError::RdmapInvalidStag);
    refused(
        |b| {
            let stag = b.region(16, REMOTE_ALL).stag;
            b.table.invalidate_local(stag).unwrap().wait();
            stag
        },
        TermError::RdmapInvalidStag,
    );
    refused(
        |b| Stag(b.region(16, REMOTE_ALL).stag.raw() ^ 0xFF),
        TermError::RdmapInvalidStag,
    );
}

#[test]
fn a_receive_that_fails_invalidates_nothing() {
    // Regression: the STag was invalidated before the receive's own
    // protection fault was looked at.
    let (mut a, mut b) = pair(Setup::default());
    let target = b.region(16, REMOTE_ALL);
    let unwritable = b.region(32, Access::REMOTE_READ);
    b.post_recv(1, vec![unwritable.whole()]);
    let invalidate = SendOp::SendWithInvalidate {
        invalidate: target.stag.raw(),
    };
    a.post(2, invalidate, vec![]);
    let src = a.region(4, Access::NONE);
    a.post(3, SendOp::Send, vec![src.whole()]);
    b.post_recv(4, vec![unwritable.whole()]);
    pump(&mut a, &mut b);
    let recv: Vec<_> = b
        .take(CqKind::Recv)
        .iter()
        .map(|w| (w.wr_id, w.status, w.terminate))
        .collect();
    assert_eq!(
        recv,
        [
            (1, WcStatus::Success, None),
            (
                4,
                WcStatus::LocalProtectionError,
                Some(TermError::RdmapLocalCatastrophic)
            )
        ]
    );
    assert!(
        !b.table.info(target.stag).unwrap().valid,
        "the first one was fine"
    );

    let (mut a, mut b) = pair(Setup::default());
    let target = b.region(16, REMOTE_ALL);
    let unwritable = b.region(32, Access::REMOTE_READ);
    b.post_recv(1, vec![unwritable.whole()]);
    let src = a.region(4, Access::NONE);
    let invalidate = SendOp::SendWithInvalidate {
        invalidate: target.stag.raw(),
    };
    a.post(2, invalidate, vec![src.whole()]);
    pump(&mut a, &mut b);
    assert_eq!(
        b.take(CqKind::Recv)[0].status,
        WcStatus::LocalProtectionError
    );
    assert!(b.table.info(target.stag).unwrap().valid);
    assert_eq!(
        b.events,
        [QpEvent::TerminateSent(TermError::RdmapLocalCatastrophic)]
    );
}
