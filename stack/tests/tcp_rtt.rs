//! RTT measurement with timestamps (RFC 7323 sections 4.1 and 4.3, RFC
//! 6298): the receiver echoes the timestamp of the copy that drew its
//! ACK, so a lost SYN-ACK or a lost ACK of data does not make the sender
//! take the time since the first copy for a round trip; PAWS (section 5)
//! still drops old timestamps without moving TS.Recent.

mod tcp_common;

use smoltcp::wire::{TcpControl, TcpTimestampRepr};
use tcp_common::*;
use uwarp_stack::tcp::{
    parse, Config, Connection, Duration, Event, Instant, IsnGenerator, ListenOutcome, Listener, Seq,
};

/// The one-way delay of the links below.
const DELAY: Duration = Duration(40);

/// The timestamp option of `wire`.
fn timestamp(wire: &Wire) -> TcpTimestampRepr {
    wire.repr().timestamp.expect("timestamps are in use")
}

/// The SYN-ACK answering A's first SYN is lost; A resends its SYN a
/// second later and B, in SYN-RECEIVED, answers it. The SYN-ACK must echo
/// the second SYN, so A's first RTT sample is the link's round trip, not
/// the second since the first SYN (which left A's RTO at 3 s).
#[test]
fn a_lost_syn_ack_does_not_count_in_the_first_rtt_sample() {
    let now = Instant(1_000);
    let mut a = Connection::connect(config(), A, B, A_ISN, now);
    let first_syn = drain(&mut a, now).remove(0);
    let mut listener = Listener::new(B, config(), IsnGenerator::new([1; 16]), 8);
    let at_b = now + DELAY;
    let repr = parse(A.addr, B.addr, &first_syn).unwrap();
    let ListenOutcome::Accepted(mut b) = listener.on_segment(at_b, A.addr, B.addr, &repr) else {
        panic!("listener refused the SYN");
    };
    assert_eq!(drain(&mut b, at_b).len(), 1, "the SYN-ACK, lost");

    let resend = a.poll_at().expect("SYN timer");
    a.on_timer(resend);
    let second_syn = drain(&mut a, resend).remove(0);
    let at_b = resend + DELAY;
    b.on_segment(
        at_b,
        &parse(A.addr, B.addr, &second_syn).unwrap(),
        &mut Recorder::default(),
    );
    let syn_ack = Wire {
        from_a: false,
        bytes: drain(&mut b, at_b).remove(0),
    };
    let second = parse(A.addr, B.addr, &second_syn).unwrap();
    assert_eq!(
        timestamp(&syn_ack).tsecr,
        second.timestamp.unwrap().tsval,
        "the SYN-ACK echoes the SYN it answers"
    );

    let at_a = at_b + DELAY;
    a.on_segment(at_a, &syn_ack.repr(), &mut Recorder::default());
    assert_eq!(a.poll_event(), Some(Event::Established));
    let srtt = a.srtt().expect("the handshake gives a sample");
    assert!(srtt < Duration::from_millis(2), "SRTT {srtt:?}");
    assert_eq!(a.rto(), Duration::from_millis(5), "the RTO floor");
}

/// A pair with A's first `segments` data segments sent, arrived at B and
/// acknowledged by B, that ACK lost; returns A's segments. A sends no
/// tail loss probe, so its retransmission timer expires.
fn data_with_lost_ack(segments: usize) -> (Pair, Vec<Wire>) {
    let sender = Config {
        tail_loss_probes: false,
        ..no_nagle()
    };
    let mut pair = Pair::connected(sender, config());
    let mss = pair.a.emss();
    pair.a.send(&stream(segments * mss));
    let sent = pair.take(true);
    assert_eq!(sent.len(), segments);
    pair.now = pair.now + DELAY;
    for wire in &sent {
        pair.deliver(wire);
    }
    // B's ACK (now or when its delayed-ACK timer runs) is lost.
    pair.advance(Duration::from_millis(1));
    assert!(!pair.take(false).is_empty(), "B acknowledged");
    (pair, sent)
}

/// A's retransmission timer expires; its retransmission reaches B, whose
/// ACK reaches A. Returns the retransmission and the ACK.
fn resend_after_timeout(pair: &mut Pair) -> (Wire, Wire) {
    let at = pair.a.poll_at().expect("the RTO runs");
    pair.advance(at.saturating_since(pair.now));
    let resent = pair.take(true).remove(0);
    assert_eq!(pair.a.stats().timeouts, 1);
    pair.now = pair.now + DELAY;
    pair.deliver(&resent);
    let ack = pair.take(false).remove(0);
    pair.now = pair.now + DELAY;
    pair.deliver(&ack);
    (resent, ack)
}

/// The ACK of the data is lost and A resends its only segment: the copy
/// ends at the ACK B last sent. B's new ACK echoes the copy's timestamp,
/// and A's RTO comes back to the link's round trip (the floor) instead of
/// growing by the timeout it waited.
#[test]
fn a_resent_segment_whose_ack_was_lost_is_echoed() {
    let (mut pair, sent) = data_with_lost_ack(1);
    let original = timestamp(&sent[0]).tsval;
    let (resent, ack) = resend_after_timeout(&mut pair);
    assert_ne!(timestamp(&resent).tsval, original, "a later tick");
    assert_eq!(timestamp(&ack).tsecr, timestamp(&resent).tsval);
    assert_eq!(pair.a.rto(), Duration::from_millis(5));
}

/// The same with several segments: the timeout resends the first, which
/// ends below the ACK B last sent. It is still a copy of what B
/// acknowledged, and its timestamp is the one to echo (RFC 7323 section
/// 4.3, Appendix D).
#[test]
fn the_first_of_several_resent_segments_is_echoed() {
    let (mut pair, sent) = data_with_lost_ack(3);
    let (resent, ack) = resend_after_timeout(&mut pair);
    assert_eq!(resent.repr().seq_number, sent[0].repr().seq_number);
    assert_eq!(timestamp(&ack).tsecr, timestamp(&resent).tsval);
    assert_eq!(pair.a.rto(), Duration::from_millis(5));
    pair.settle(Duration::from_secs(1));
    assert_eq!(reassembled(&pair.b_rx), stream(3 * pair.a.emss()));
}

/// PAWS keeps its place: a copy of old data with an older timestamp is
/// dropped without moving TS.Recent, and so is a copy with a newer one
/// from more than a window back (which no retransmission can be, while a
/// blind attacker pushing TS.Recent ahead could).
#[test]
fn old_timestamps_and_far_copies_leave_ts_recent_alone() {
    let mut pair = Pair::connected(config(), config());
    pair.b.send(b"abc");
    let data = pair.take(false).remove(0);
    pair.deliver(&data);
    pair.settle(Duration::from_millis(10));
    let recent = timestamp(&data).tsval;

    let older = retimed(&data.bytes, recent.wrapping_sub(5));
    let replies = inject(&mut pair, &older);
    assert_eq!(pair.a.stats().paws_rejected, 1);
    assert_eq!(timestamp(&replies[0]).tsecr, recent);

    let repr = data.repr();
    let far = forged(
        TcpControl::None,
        Seq::from(repr.seq_number) - 1_000_000,
        repr.ack_number.map(Seq::from),
        b"far",
    );
    let replies = inject(&mut pair, &retimed(&far, recent.wrapping_add(1 << 30)));
    assert_eq!(timestamp(&replies[0]).tsecr, recent, "TS.Recent unchanged");

    let newer = retimed(&data.bytes, recent.wrapping_add(7));
    let replies = inject(&mut pair, &newer);
    assert_eq!(
        timestamp(&replies[0]).tsecr,
        recent.wrapping_add(7),
        "a copy of the last segment is echoed"
    );
    assert_eq!(pair.a_rx.offered.len(), 1, "handed over once");
}
