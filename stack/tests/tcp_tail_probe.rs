//! Tail loss probes (RFC 8985 section 7) between two engines, on a path
//! that has shown reordering (the duplicate threshold learned past 3, so
//! NextSeg rules 3 and 4 are off): the last segments of a flight are lost
//! and no later segment draws SACKs. About two round trips later the
//! sender resends the last segment, whole; its SACK shows the hole below
//! it lost and fast recovery repairs it, with no retransmission timeout.
//! A probe the receiver already had comes back as a D-SACK and costs
//! nothing; one that repaired a loss costs a window cut.

mod tcp_common;

use tcp_common::*;
use uwarp_stack::tcp::{Config, Duration};

/// A pair whose sender learned a reordering depth of 4 (from a spurious
/// fast recovery, undone), then sent five segments, returned.
fn reordering_path_with_five_out() -> (Pair, Vec<Wire>) {
    let Spurious {
        mut pair,
        retransmission,
        ..
    } = spurious_recovery();
    through(&mut pair, &retransmission);
    assert_eq!(pair.a.reordering(), 4, "reordering seen");
    pair.a.send(&stream(5 * pair.a.emss()));
    let burst = pair.take(true);
    assert_eq!(burst.len(), 5);
    (pair, burst)
}

/// Fires A's next timer, which must be the probe's; returns the probe.
fn fire_probe(pair: &mut Pair) -> Wire {
    let probes = pair.a.stats().tail_loss_probes;
    let at = pair.a.poll_at().expect("a timer runs");
    pair.now = at;
    pair.a.on_timer(at);
    let mut sent = pair.take(true);
    assert_eq!(sent.len(), 1, "one probe");
    assert_eq!(pair.a.stats().tail_loss_probes, probes + 1);
    sent.remove(0)
}

#[test]
fn a_lost_tail_is_probed_and_repaired_without_a_timeout() {
    let (mut pair, burst) = reordering_path_with_five_out();
    let before = *pair.a.stats();
    // The last two segments are lost.
    for wire in &burst[..3] {
        through(&mut pair, wire);
    }
    let probe = fire_probe(&mut pair);
    assert!(probe.same_segment(&burst[4]), "the last segment, whole");
    // B SACKs the probe above the hole; A takes the hole for lost (it
    // was sent a probe timeout before a segment that arrived) and
    // resends it at once.
    let repair = through(&mut pair, &probe);
    assert_eq!(repair.len(), 1);
    assert!(repair[0].same_segment(&burst[3]));
    through(&mut pair, &repair[0]);
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.a.send_queue_len(), 0, "everything acknowledged");
    assert_eq!(pair.b.received_len(), 15 * pair.a.emss());
    let after = pair.a.stats();
    assert_eq!(after.timeouts, 0);
    assert_eq!(after.fast_recoveries, before.fast_recoveries + 1);
    assert_eq!(after.retransmissions, before.retransmissions + 2);
}

#[test]
fn a_needless_probe_is_reported_as_a_duplicate_and_cuts_nothing() {
    let (mut pair, burst) = reordering_path_with_five_out();
    // Everything arrives; B's ACKs for the last segments are lost.
    for wire in &burst[..3] {
        through(&mut pair, wire);
    }
    for wire in &burst[3..] {
        pair.deliver(wire);
    }
    pair.take(false);
    let cwnd = pair.a.cwnd();
    let probe = fire_probe(&mut pair);
    assert!(probe.same_segment(&burst[4]));
    through(&mut pair, &probe);
    assert_eq!(pair.a.send_queue_len(), 0);
    let stats = pair.a.stats();
    assert_eq!(pair.b.stats().dsacks_sent, 2, "the spurious one and this");
    assert_eq!(stats.dsacks_received, 2);
    assert_eq!(stats.timeouts, 0);
    assert!(pair.a.cwnd() >= cwnd, "no window cut");
    // The episode is over: the next flight is probed again.
    pair.a.send(&stream(3 * pair.a.emss()));
    let next = pair.take(true);
    let probe = fire_probe(&mut pair);
    assert!(probe.same_segment(next.last().unwrap()));
}

#[test]
fn a_probe_that_repaired_a_loss_cuts_the_window() {
    let (mut pair, burst) = reordering_path_with_five_out();
    // Only the last segment is lost, and B's ACKs for the others (with
    // one segment in flight, the RTO would come before a probe that
    // waits for a delayed ACK); the probe brings it.
    for wire in &burst[..4] {
        pair.deliver(wire);
    }
    pair.take(false);
    let probe = fire_probe(&mut pair);
    assert!(probe.same_segment(&burst[4]));
    through(&mut pair, &probe);
    // B's delayed ACK.
    pair.settle(Duration::from_millis(2));
    assert_eq!(pair.a.send_queue_len(), 0);
    // Without a D-SACK the probe may have been the only copy: once data
    // beyond it is acknowledged, the loss is certain (RFC 8985 section
    // 7.4.2) and the window is cut once, as by a fast recovery.
    assert_eq!(pair.a.ssthresh(), u32::MAX, "not yet");
    pair.a.send(&stream(2 * pair.a.emss()));
    for wire in pair.take(true) {
        through(&mut pair, &wire);
    }
    assert!(pair.a.ssthresh() < u32::MAX, "the window was cut");
    assert_eq!(pair.a.stats().timeouts, 0);
}

#[test]
fn no_probe_without_sack() {
    let plain = Config {
        sack: false,
        ..no_nagle()
    };
    let mut pair = Pair::connected(plain, config());
    pair.a.send(&stream(3 * pair.a.emss()));
    pair.take(true);
    let at = pair.a.poll_at().expect("RTO armed");
    pair.now = at;
    pair.a.on_timer(at);
    assert_eq!(pair.take(true).len(), 1);
    assert_eq!(pair.a.stats().timeouts, 1);
    assert_eq!(pair.a.stats().tail_loss_probes, 0);
}
