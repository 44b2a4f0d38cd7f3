//! Early retransmit (RFC 5827) between two engines: a flight of fewer
//! than four segments that no new data can follow, whose oldest segment
//! is lost, is resent after one duplicate ACK fewer than it has segments
//! (with SACK, once the others are SACKed), not after a retransmission
//! timeout; with SACK and without. A flight of four or more, or one that
//! new data can follow, keeps the duplicate threshold of 3. An early
//! retransmit that a D-SACK shows spurious is undone, and turns early
//! retransmit off for flights it would have misled (section 4).

mod tcp_common;

use tcp_common::*;
use uwarp_stack::tcp::{Config, Duration};

/// A connected pair with A's settings `a_config` (SACK on or off at A is
/// so for the connection), A's send window already updated by a segment
/// from B (an ACK changing the window is no duplicate).
fn connected(a_config: Config) -> Pair {
    let mut pair = Pair::connected(a_config, config());
    b_next(&mut pair);
    pair
}

/// [`connected`] with SACK on or off, Nagle off.
fn pair(sack: bool) -> Pair {
    connected(Config { sack, ..no_nagle() })
}

/// A sends `segments` full segments, all it has; returns them, not
/// delivered.
fn flight(pair: &mut Pair, segments: usize) -> Vec<Wire> {
    let emss = pair.a.emss();
    pair.a.send(&stream(segments * emss));
    let burst = pair.take(true);
    assert_eq!(burst.len(), segments);
    burst
}

/// The first of `burst` is lost; the others reach B, whose duplicate
/// ACKs reach A at once (no time passes). Returns what A sent after each.
fn lose_first(pair: &mut Pair, burst: &[Wire]) -> Vec<Vec<Wire>> {
    burst[1..].iter().map(|wire| through(pair, wire)).collect()
}

/// A resent the first segment of `burst` after the last duplicate ACK
/// and nothing before; the repair completes the transfer intact, with
/// one fast recovery and no timeout.
fn repaired_early(mut pair: Pair, burst: &[Wire], sent: &[Vec<Wire>]) {
    let (last, before) = sent.split_last().expect("duplicate ACKs came");
    assert!(before.iter().all(Vec::is_empty), "nothing before");
    assert_eq!(last.len(), 1, "one retransmission");
    assert!(last[0].same_segment(&burst[0]), "the lost segment");
    through(&mut pair, &last[0]);
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.a.send_queue_len(), 0, "everything acknowledged");
    let emss = pair.a.emss();
    assert_eq!(reassembled(&pair.b_rx), stream(burst.len() * emss));
    let stats = pair.a.stats();
    assert_eq!(stats.timeouts, 0);
    assert_eq!(stats.tail_loss_probes, 0);
    assert_eq!(stats.fast_recoveries, 1);
    assert_eq!(stats.early_retransmits, 1);
    assert_eq!(stats.retransmissions, 1);
}

/// A flight of `segments`, with SACK and without, whose first is lost, is
/// repaired early.
fn first_of_flight_lost(segments: usize) {
    for sack in [true, false] {
        let mut pair = pair(sack);
        let burst = flight(&mut pair, segments);
        let sent = lose_first(&mut pair, &burst);
        repaired_early(pair, &burst, &sent);
    }
}

#[test]
fn two_segments_first_lost_resent_on_the_first_duplicate_ack() {
    first_of_flight_lost(2);
}

#[test]
fn three_segments_first_lost_resent_on_the_second_duplicate_ack() {
    first_of_flight_lost(3);
}

#[test]
fn four_segments_keep_the_threshold_of_three() {
    for sack in [true, false] {
        let mut pair = pair(sack);
        let burst = flight(&mut pair, 4);
        let sent = lose_first(&mut pair, &burst);
        assert_eq!(sent.len(), 3);
        assert!(sent[..2].iter().all(Vec::is_empty), "not before the third");
        assert!(sent[2][0].same_segment(&burst[0]), "fast retransmit");
        assert_eq!(pair.a.stats().early_retransmits, 0);
        assert_eq!(pair.a.stats().fast_recoveries, 1);
    }
}

#[test]
fn new_data_that_may_go_goes_instead() {
    // A congestion window of two segments and four to send: the first
    // duplicate ACK lets the third out (the pipe with SACK, limited
    // transmit without), so the flight is not one early retransmit is for.
    for sack in [true, false] {
        let a_config = Config {
            sack,
            initial_window: 2,
            ..no_nagle()
        };
        let mut pair = connected(a_config);
        let emss = pair.a.emss();
        pair.a.send(&stream(4 * emss));
        let burst = pair.take(true);
        assert_eq!(burst.len(), 2);
        let sent = through(&mut pair, &burst[1]);
        assert_eq!(sent.len(), 1, "sack {sack}");
        assert_eq!(sent[0].payload_len(), emss);
        let third = sent[0].repr().seq_number;
        let second = burst[1].repr().seq_number;
        assert_eq!(third.0.wrapping_sub(second.0) as usize, emss, "new data");
        assert_eq!(pair.a.stats().fast_recoveries, 0);
    }
}

#[test]
fn data_nagle_holds_back_does_not_stop_it() {
    // Two full segments and a small rest that Nagle keeps while they are
    // out: no new data can go, so early retransmit applies.
    let mut pair = connected(config());
    let emss = pair.a.emss();
    let data = stream(2 * emss + 10);
    pair.a.send(&data);
    let burst = pair.take(true);
    assert_eq!(burst.len(), 2, "Nagle holds the rest");
    let sent = through(&mut pair, &burst[1]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].same_segment(&burst[0]));
    // The ACK of the repair lets the rest go.
    for wire in through(&mut pair, &sent[0]) {
        pair.deliver(&wire);
    }
    pair.settle(Duration::from_millis(50));
    assert_eq!(reassembled(&pair.b_rx), data);
    assert_eq!(pair.a.stats().timeouts, 0);
    assert_eq!(pair.a.stats().early_retransmits, 1);
}

#[test]
fn a_spurious_early_retransmit_is_undone_and_not_repeated() {
    let mut pair = pair(true);
    let burst = flight(&mut pair, 2);
    let cwnd_before = pair.a.cwnd();
    // The first segment is only late: the second overtakes it.
    let sent = through(&mut pair, &burst[1]);
    assert_eq!(sent.len(), 1, "early retransmit");
    assert!(pair.a.cwnd() < cwnd_before, "the window was cut");
    through(&mut pair, &burst[0]);
    // The retransmission arrives as a duplicate; its D-SACK undoes the cut.
    through(&mut pair, &sent[0]);
    pair.settle(Duration::from_millis(50));
    let stats = *pair.a.stats();
    assert_eq!(stats.spurious_recoveries, 1);
    assert!(pair.a.cwnd() >= cwnd_before, "the cut undone");
    // The same displacement again: no early retransmit now.
    let burst = flight(&mut pair, 2);
    assert!(
        through(&mut pair, &burst[1]).is_empty(),
        "no retransmission"
    );
    through(&mut pair, &burst[0]);
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.a.send_queue_len(), 0);
    let after = pair.a.stats();
    assert_eq!(after.retransmissions, stats.retransmissions);
    assert_eq!(after.early_retransmits, 1);
    // A three-segment flight, whose threshold of two the displacement of
    // one would not mislead, still has it.
    let burst = flight(&mut pair, 3);
    let sent = lose_first(&mut pair, &burst);
    assert!(sent[0].is_empty());
    assert!(sent[1][0].same_segment(&burst[0]));
    assert_eq!(pair.a.stats().early_retransmits, 2);
}

#[test]
fn off_in_the_config_the_loss_waits() {
    let mut pair = connected(Config {
        early_retransmit: false,
        ..no_nagle()
    });
    let burst = flight(&mut pair, 2);
    assert!(
        through(&mut pair, &burst[1]).is_empty(),
        "no retransmission"
    );
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.a.stats().timeouts, 1, "the RTO resends it");
    assert_eq!(pair.a.stats().early_retransmits, 0);
    assert_eq!(reassembled(&pair.b_rx), stream(2 * pair.a.emss()));
}
