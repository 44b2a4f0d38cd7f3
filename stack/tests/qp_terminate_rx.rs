//! Receiving a Terminate (RFC 5040 sections 4.8 and 6.6): the oldest
//! unfinished send work request completes with the status the error maps
//! to and carries the error, the rest of the send queue and every receive
//! are flushed, the application hears `TerminateReceived`, and the engine
//! asks for the LLP to be closed. Linux siw's little-endian control word
//! is recognised. A Terminate is handled in every state the stream can be
//! in when one arrives.

mod common;

use common::{read_at, untagged, write_at, Hostile, Region, Setup, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::rdmap::{CqKind, LlpClose, QpEvent, Role};
use uwarp_stack::verbs::{QpState, SendOp, WcOpcode, WcStatus, WorkCompletion};
use uwarp_stack::wire::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use uwarp_stack::wire::rdmap::{Opcode, QN_TERMINATE};
use uwarp_stack::wire::terminate::{ErrorType, TermError, TerminateLayout, TerminateRepr};
use uwarp_stack::wire::testing::hex;

/// A Terminate ULPDU with `payload`, MSN 1.
fn terminate_ulpdu(payload: &[u8]) -> Vec<u8> {
    untagged(Opcode::Terminate, true, (QN_TERMINATE, 1, 0), 0, payload)
}

/// A Terminate for `error` in `layout`, with the headers its type calls
/// for.
fn terminate_for(error: TermError, layout: TerminateLayout) -> Vec<u8> {
    let tagged_header = [0xC1, 0x40, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
    let untagged_header = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    let read = [3u8; 28];
    let mut repr = TerminateRepr {
        layout,
        ..TerminateRepr::new(error)
    };
    match error.error_type() {
        ErrorType::TaggedBuffer => {
            repr.ddp_segment_len = Some(20);
            repr.ddp_header = Some(&tagged_header[..TAGGED_HEADER_LEN]);
        }
        ErrorType::UntaggedBuffer | ErrorType::RemoteOperation => {
            repr.ddp_segment_len = Some(20);
            repr.ddp_header = Some(&untagged_header[..UNTAGGED_HEADER_LEN]);
        }
        ErrorType::RemoteProtection => {
            repr.ddp_segment_len = Some(46);
            repr.ddp_header = Some(&untagged_header[..]);
            repr.rdmap_header = Some(&read);
        }
        ErrorType::LocalCatastrophic | ErrorType::Mpa => {}
    }
    terminate_ulpdu(&repr.to_vec().unwrap())
}

/// An initiator with an outstanding Read (the oldest unfinished request),
/// a Write already handed to the LLP, a fenced Send held behind the Read,
/// and two receives.
struct Busy {
    h: Hostile,
    sink: Region,
}

impl Busy {
    fn new() -> Self {
        let mut h = Hostile::default_initiator();
        let sink = h.victim.region(64, Access::LOCAL_WRITE);
        let local = h.victim.region(64, Access::LOCAL_WRITE);
        let src = h.victim.region(8, Access::NONE);
        h.victim.post_recv(1, vec![local.sge(0, 32)]);
        h.victim.post_recv(2, vec![local.sge(32, 32)]);
        h.victim
            .post(10, read_at(0x1000, 0x0000_2200), vec![sink.whole()]);
        h.victim
            .post(11, write_at(0x2000, 0x0000_3300), vec![src.whole()]);
        h.victim.post_fenced_inline(12, vec![1, 2, 3]);
        h.flush();
        assert_eq!(h.received.len(), 2, "the Read Request and the Write");
        assert!(
            h.victim.take(CqKind::Send).is_empty(),
            "the Write waits for the Read"
        );
        Self { h, sink }
    }

    fn check(mut self, ulpdu: &[u8], error: TermError, status: WcStatus) {
        let ctx = format!("{error:?}");
        let before = self.sink.snapshot();
        self.h.inject(ulpdu);
        let v = &mut self.h.victim;
        assert_eq!(v.events, [QpEvent::TerminateReceived(error)], "{ctx}");
        assert_eq!(v.engine.state(), QpState::Terminate, "{ctx}");
        assert_eq!(v.engine.llp_close(), Some(LlpClose::Graceful), "{ctx}");
        assert_eq!(v.engine.counters().terminates_received, 1);
        let sends = v.take(CqKind::Send);
        let expected = [
            (10, WcOpcode::Read, status, Some(error)),
            (11, WcOpcode::Write, WcStatus::Success, None),
            (12, WcOpcode::Send, WcStatus::WrFlushError, None),
        ];
        let got: Vec<_> = sends
            .iter()
            .map(|w: &WorkCompletion| (w.wr_id, w.opcode, w.status, w.terminate))
            .collect();
        assert_eq!(got, expected, "{ctx}");
        let recvs = v.statuses(CqKind::Recv);
        assert_eq!(
            recvs,
            [(1, WcStatus::WrFlushError), (2, WcStatus::WrFlushError)],
            "{ctx}"
        );
        assert!(self.sink.snapshot() == before);
        // Nothing is sent back: no Terminate answers a Terminate.
        assert!(self.h.terminates().is_empty(), "{ctx}");
        // Posting now flushes at once.
        self.h.victim.post(20, SendOp::Send, vec![]);
        assert_eq!(
            self.h.victim.take(CqKind::Send)[0].status,
            WcStatus::WrFlushError
        );
    }
}

fn mapped(error: TermError) -> WcStatus {
    match error.error_type() {
        ErrorType::RemoteProtection | ErrorType::TaggedBuffer => WcStatus::RemoteAccessError,
        ErrorType::RemoteOperation | ErrorType::UntaggedBuffer => WcStatus::RemoteOperationError,
        ErrorType::LocalCatastrophic | ErrorType::Mpa => WcStatus::FatalError,
    }
}

#[test]
fn every_terminate_error_completes_the_oldest_request() {
    for &error in TermError::ALL {
        Busy::new().check(
            &terminate_for(error, TerminateLayout::Rfc5040),
            error,
            mapped(error),
        );
    }
}

#[test]
fn siw_terminates_are_recognised() {
    // siw's answers to a Write with a bad STag (probe-7326), a bad CRC
    // (probe-7332) and a bad queue number (probe-7333), octet for octet.
    let cases: [(&str, TermError); 3] = [
        (
            "110003000010c140deadbe000000000000001000",
            TermError::DdpTaggedInvalidStag,
        ),
        ("02020000", TermError::MpaCrcError),
        (
            "210103000010414300000000000000050000000100000000",
            TermError::DdpUntaggedInvalidQn,
        ),
    ];
    for (digits, error) in cases {
        Busy::new().check(&terminate_ulpdu(&hex(digits)), error, mapped(error));
    }
    // Every error in siw's layout where it cannot be read as RFC 5040.
    for &error in TermError::ALL {
        let ulpdu = terminate_for(error, TerminateLayout::Siw);
        let payload = &ulpdu[UNTAGGED_HEADER_LEN..];
        let auto = TerminateRepr::parse(payload, Default::default()).unwrap();
        if auto.ambiguous {
            continue;
        }
        Busy::new().check(&ulpdu, error, mapped(error));
    }
}

#[test]
fn an_unreadable_terminate_still_ends_the_stream() {
    let ulpdu = terminate_ulpdu(&[0x33, 0x77, 0, 0]);
    Busy::new().check(
        &ulpdu,
        TermError::RdmapOperationUnspecified,
        WcStatus::RemoteOperationError,
    );
    let ulpdu = terminate_ulpdu(&[0x01]);
    Busy::new().check(
        &ulpdu,
        TermError::RdmapOperationUnspecified,
        WcStatus::RemoteOperationError,
    );
}

#[test]
fn a_terminate_while_closing() {
    let mut busy = Busy::new();
    busy.h.victim.engine.disconnect();
    assert_eq!(busy.h.victim.engine.state(), QpState::Closing);
    busy.h.flush();
    assert_eq!(
        busy.h.victim.engine.llp_close(),
        None,
        "the Read is outstanding"
    );
    let error = TermError::RdmapInvalidStag;
    busy.check(
        &terminate_for(error, TerminateLayout::Rfc5040),
        error,
        mapped(error),
    );
}

#[test]
fn a_terminate_after_sending_one() {
    let mut h = Hostile::default_initiator();
    let dst = h.victim.region(8, REMOTE_ALL);
    h.victim.post_recv(1, vec![dst.whole()]);
    // A Send with MSN 5, out of range: the engine sends a Terminate.
    h.inject(&common::send(5, b"x"));
    assert_eq!(h.terminate().error, TermError::DdpUntaggedMsnRange);
    // The peer's own Terminate is reported but changes nothing else.
    let error = TermError::RdmapCatastrophicStream;
    h.inject(&terminate_for(error, TerminateLayout::Rfc5040));
    assert_eq!(
        h.victim.events,
        [
            QpEvent::TerminateSent(TermError::DdpUntaggedMsnRange),
            QpEvent::TerminateReceived(error)
        ]
    );
    assert_eq!(h.victim.engine.state(), QpState::Terminate);
    assert_eq!(h.terminates().len(), 1, "no Terminate answers a Terminate");
    let recvs = h.victim.statuses(CqKind::Recv);
    assert_eq!(recvs, [(1, WcStatus::WrFlushError)]);
    // Anything but a Terminate is dropped silently, even garbage.
    h.inject(&common::tagged(
        Opcode::RdmaWrite,
        true,
        dst.stag.raw(),
        dst.to,
        &[1; 8],
    ));
    h.inject_raw(&[0xff; 64]);
    assert!(dst.contents().iter().all(|&x| x == 0));
    assert_eq!(h.victim.events.len(), 2);
    assert_eq!(h.terminates().len(), 1);
    h.victim.engine.on_llp_closed();
    h.flush();
    assert_eq!(h.victim.engine.state(), QpState::Error);
    assert_eq!(h.victim.events.last(), Some(&QpEvent::Disconnected));
}

#[test]
fn a_terminate_after_receiving_one() {
    let mut busy = Busy::new();
    let first = TermError::DdpTaggedBaseOrBounds;
    busy.h
        .inject(&terminate_for(first, TerminateLayout::Rfc5040));
    let second = TermError::MpaCrcError;
    let mut ulpdu = terminate_for(second, TerminateLayout::Rfc5040);
    ulpdu[13] = 2; // MSN 2
    busy.h.inject(&ulpdu);
    let v = &mut busy.h.victim;
    assert_eq!(
        v.events,
        [
            QpEvent::TerminateReceived(first),
            QpEvent::TerminateReceived(second)
        ]
    );
    let sends = v.statuses(CqKind::Send);
    assert_eq!(
        sends,
        [
            (10, WcStatus::RemoteAccessError),
            (11, WcStatus::Success),
            (12, WcStatus::WrFlushError)
        ]
    );
    assert!(busy.h.terminates().is_empty());
}

#[test]
fn a_terminate_in_the_error_state_is_ignored() {
    let mut busy = Busy::new();
    busy.h.victim.engine.on_llp_closed();
    busy.h.flush();
    let events = busy.h.victim.events.clone();
    assert_eq!(events, [QpEvent::Disconnected]);
    busy.h.inject(&terminate_for(
        TermError::MpaCrcError,
        TerminateLayout::Rfc5040,
    ));
    assert_eq!(busy.h.victim.events, events);
    assert_eq!(busy.h.victim.engine.state(), QpState::Error);
}

#[test]
fn a_terminate_as_the_responders_first_fpdu() {
    // A responder waiting for the RTR gets a Terminate instead: the peer
    // gave up. The responder reports it and sends nothing.
    let setup = Setup {
        rtr: Some(uwarp_stack::mpa::Rtr::Write),
        ..Setup::default()
    };
    let mut h = Hostile::new(setup, Role::Responder);
    h.victim.post(1, SendOp::Send, vec![]);
    h.flush();
    assert!(h.received.is_empty());
    let error = TermError::MpaNoMatchingRtr;
    h.inject(&terminate_for(error, TerminateLayout::Rfc5040));
    assert_eq!(h.victim.events, [QpEvent::TerminateReceived(error)]);
    assert!(h.received.is_empty(), "nothing follows a Terminate");
    // Nothing of the Send reached the peer: it is flushed, not failed.
    let sends = h.victim.statuses(CqKind::Send);
    assert_eq!(sends, [(1, WcStatus::WrFlushError)]);
}
