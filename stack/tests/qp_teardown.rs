//! Stream teardown (RFC 5041 section 6, RFC 5040 section 6.6, the RDMAC
//! verbs Closing and Error states): a graceful disconnect lets posted work
//! finish before asking for a FIN; the LLP closing flushes everything and
//! reports the disconnection; an abort flushes and asks for a reset; work
//! posted once the stream is closing or gone completes at once, flushed,
//! and in send queue order.

mod common;

use common::{deliver, pair, pump, pump_budget, read_from, write_at, write_to, Setup, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::rdmap::{CqKind, LlpClose, QpEvent};
use uwarp_stack::verbs::{QpState, SendOp, WcOpcode, WcStatus};
use uwarp_stack::wire::terminate::TermError;

#[test]
fn disconnect_lets_posted_work_finish_then_closes() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(100_000, REMOTE_ALL);
    let from_b = remote.fill(1);
    let src = a.region(100_000, Access::NONE);
    let data = src.fill(2);
    let sink = a.region(100_000, Access::LOCAL_WRITE);
    let dst = b.region(100, Access::LOCAL_WRITE);
    b.post_recv(1, vec![dst.whole()]);
    let write = SendOp::Write {
        remote_addr: remote.to + 50_000,
        rkey: remote.stag.raw(),
    };
    let read = read_from(&remote, 0);
    a.post(1, read, vec![sink.sge(0, 50_000)]);
    a.post(2, write, vec![src.sge(0, 50_000)]);
    a.post(3, SendOp::Send, vec![src.sge(0, 100)]);
    a.engine.disconnect();
    assert_eq!(a.engine.state(), QpState::Closing);
    // Work posted after the disconnect is refused, after the work before.
    a.post(4, SendOp::Send, vec![]);
    // A receive posted now still takes what the peer sends.
    let back = a.region(10, Access::LOCAL_WRITE);
    a.post_recv(5, vec![back.whole()]);
    let mut rounds = 0;
    while a.engine.llp_close().is_none() {
        pump_budget(&mut a, &mut b, 3000);
        rounds += 1;
        assert!(rounds < 1000);
    }
    assert_eq!(a.engine.llp_close(), Some(LlpClose::Graceful));
    assert_eq!(&sink.contents()[..50_000], &from_b[..50_000]);
    assert_eq!(&remote.contents()[50_000..], &data[..50_000]);
    assert_eq!(&dst.contents()[..], &data[..100]);
    let sent = a.outcomes(CqKind::Send);
    assert_eq!(
        sent,
        [
            (1, WcOpcode::Read, WcStatus::Success),
            (2, WcOpcode::Write, WcStatus::Success),
            (3, WcOpcode::Send, WcStatus::Success),
            (4, WcOpcode::Send, WcStatus::WrFlushError),
        ]
    );
    // The peer still sends; the closing end still receives.
    b.post(9, SendOp::Send, vec![dst.sge(0, 10)]);
    pump(&mut a, &mut b);
    let recv: Vec<_> = a
        .take(CqKind::Recv)
        .iter()
        .map(|w| (w.wr_id, w.byte_len))
        .collect();
    assert_eq!(recv, [(5, 10)]);
    assert_eq!(back.contents(), dst.contents()[..10]);
    // The FIN reaches b, which closes too; then a learns the LLP closed.
    b.engine.on_llp_closed();
    a.engine.on_llp_closed();
    a.collect();
    b.collect();
    assert_eq!(a.engine.state(), QpState::Error);
    assert_eq!(b.engine.state(), QpState::Error);
    assert_eq!(a.events, [QpEvent::Disconnected]);
    assert_eq!(b.events, [QpEvent::Disconnected]);
    assert!(a.completions.is_empty());
}

#[test]
fn disconnect_waits_for_read_responses_owed_to_the_peer() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(20_000, REMOTE_ALL);
    let data = remote.fill(4);
    let sink = a.region(20_000, Access::LOCAL_WRITE);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    deliver(&mut a, &mut b);
    b.engine.disconnect();
    // b owes the response: it sends it, then asks for the close.
    let mut back = Vec::new();
    b.transmit(&mut back, 2000);
    assert_eq!(b.engine.llp_close(), None);
    a.engine.on_bytes(&back);
    pump(&mut a, &mut b);
    assert_eq!(b.engine.llp_close(), Some(LlpClose::Graceful));
    assert_eq!(sink.contents(), data);
}

#[test]
fn a_responder_that_never_heard_from_the_initiator_can_still_close() {
    // Regression: the close was only decided once the peer had started.
    let (_a, mut b) = pair(Setup::default());
    b.engine.disconnect();
    b.post(1, SendOp::Send, vec![]);
    assert_eq!(b.transmit(&mut Vec::new(), 1 << 20), 0);
    assert_eq!(b.engine.llp_close(), Some(LlpClose::Graceful));
    let sent = b.statuses(CqKind::Send);
    assert_eq!(sent, [(1, WcStatus::WrFlushError)]);
}

#[test]
fn the_llp_closing_flushes_everything() {
    let (mut a, b) = pair(Setup::default());
    let remote = b.region(100, REMOTE_ALL);
    let sink = a.region(100, Access::LOCAL_WRITE);
    let dst = a.region(100, Access::LOCAL_WRITE);
    a.post_recv(1, vec![dst.whole()]);
    a.post_recv(2, vec![dst.whole()]);
    a.post(3, read_from(&remote, 0), vec![sink.whole()]);
    a.post(4, SendOp::Send, vec![]);
    a.transmit(&mut Vec::new(), 1 << 20);
    a.engine.on_llp_closed();
    a.engine.on_llp_closed();
    a.collect();
    assert_eq!(a.engine.state(), QpState::Error);
    assert_eq!(a.events, [QpEvent::Disconnected]);
    let all = a.all_statuses();
    assert_eq!(
        all,
        [
            (3, WcStatus::WrFlushError),
            (4, WcStatus::Success),
            (1, WcStatus::WrFlushError),
            (2, WcStatus::WrFlushError),
        ]
    );
    assert_eq!(a.engine.llp_close(), Some(LlpClose::Graceful));
    // Posting now completes at once, flushed.
    a.post(5, SendOp::Send, vec![]);
    a.post_recv(6, vec![]);
    let late = a.all_statuses();
    assert_eq!(
        late,
        [(5, WcStatus::WrFlushError), (6, WcStatus::WrFlushError)]
    );
    assert_eq!(a.transmit(&mut Vec::new(), 1 << 20), 0);
}

#[test]
fn the_llp_closing_in_the_middle_of_an_fpdu_loses_the_connection() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(100, REMOTE_ALL);
    let sink = a.region(100, Access::LOCAL_WRITE);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    deliver(&mut a, &mut b);
    let mut back = Vec::new();
    b.transmit(&mut back, 1 << 20);
    a.engine.on_bytes(&back[..back.len() - 1]);
    a.engine.on_llp_closed();
    let sent = a.take(CqKind::Send);
    assert_eq!(sent[0].status, WcStatus::FatalError);
    assert_eq!(sent[0].terminate, Some(TermError::MpaConnectionLost));
    assert!(sink.contents().iter().all(|&x| x == 0));
}

#[test]
fn abort_flushes_and_resets() {
    let (mut a, _b) = pair(Setup::default());
    let dst = a.region(10, Access::LOCAL_WRITE);
    a.post_recv(1, vec![dst.whole()]);
    a.post(2, SendOp::Send, vec![]);
    a.post(3, SendOp::Send, vec![]);
    a.engine.abort();
    a.collect();
    assert_eq!(a.engine.state(), QpState::Error);
    assert_eq!(a.engine.llp_close(), Some(LlpClose::Abortive));
    assert_eq!(a.events, [QpEvent::Disconnected]);
    let all = a.all_statuses();
    assert_eq!(
        all,
        [
            (2, WcStatus::WrFlushError),
            (3, WcStatus::WrFlushError),
            (1, WcStatus::WrFlushError)
        ]
    );
    assert_eq!(
        a.transmit(&mut Vec::new(), 1 << 20),
        0,
        "nothing is sent after a reset"
    );
    // The LLP reports the reset; nothing changes.
    a.engine.on_llp_closed();
    a.engine.abort();
    a.collect();
    assert_eq!(a.events, [QpEvent::Disconnected]);
    a.post(4, SendOp::Send, vec![]);
    assert_eq!(a.take(CqKind::Send)[0].status, WcStatus::WrFlushError);
}

#[test]
fn abort_after_a_terminate_still_resets() {
    let (mut a, mut b) = pair(Setup::default());
    // b sends a Terminate (a Write to a bogus STag).
    a.post(1, write_at(0, 0x00ee_ee00), vec![]);
    let src = a.region(4, Access::NONE);
    a.post(2, write_at(0, 0x00ee_ee00), vec![src.whole()]);
    pump(&mut a, &mut b);
    assert_eq!(b.engine.state(), QpState::Terminate);
    assert_eq!(a.engine.state(), QpState::Terminate);
    b.engine.abort();
    b.collect();
    assert_eq!(b.engine.state(), QpState::Error);
    assert_eq!(b.engine.llp_close(), Some(LlpClose::Abortive));
    assert_eq!(
        b.events,
        [
            QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag),
            QpEvent::Disconnected
        ]
    );
}

#[test]
fn abort_drops_a_terminate_not_yet_sent() {
    // Regression: a Terminate queued before an abort still went out.
    let (mut a, mut b) = pair(Setup::default());
    let src = b.region(4, Access::NONE);
    b.post(1, write_at(0, 0x00ee_ee00), vec![src.whole()]);
    b.post(2, write_at(0, 1), vec![]);
    a.post(3, write_at(0, 1), vec![]);
    deliver(&mut a, &mut b);
    deliver(&mut b, &mut a);
    a.collect();
    assert_eq!(
        a.events,
        [QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag)]
    );
    a.engine.abort();
    assert_eq!(a.transmit(&mut Vec::new(), 1 << 20), 0);
    assert_eq!(a.engine.llp_close(), Some(LlpClose::Abortive));
}

#[test]
fn the_llp_closing_after_a_framing_error() {
    // Regression: after a CRC error the reader dropped its buffer but not
    // its position in it, and the close asked it how much it held: an
    // arithmetic overflow (a panic in debug builds).
    let (mut a, mut b) = pair(Setup::default());
    let dst = a.region(10, Access::LOCAL_WRITE);
    let target = a.region(100, REMOTE_ALL);
    let src = b.region(100, Access::NONE);
    a.post_recv(1, vec![dst.whole()]);
    // A short FPDU the reader consumes, then a longer one with a bad CRC.
    b.post(2, SendOp::Send, vec![]);
    let write = write_to(&target, 0);
    b.post(3, write, vec![src.whole()]);
    a.post(4, write_at(0, 1), vec![]);
    deliver(&mut a, &mut b);
    let mut back = Vec::new();
    b.transmit(&mut back, 1 << 20);
    let last = back.len() - 1;
    back[last] ^= 1;
    back.extend_from_slice(&[0; 40]);
    a.engine.on_bytes(&back);
    a.engine.on_llp_closed();
    a.collect();
    assert_eq!(
        a.events,
        [
            QpEvent::TerminateSent(TermError::MpaCrcError),
            QpEvent::Disconnected
        ]
    );
    let recv = a.statuses(CqKind::Recv);
    assert_eq!(recv, [(1, WcStatus::Success)]);
    assert!(target.contents().iter().all(|&x| x == 0));
}
