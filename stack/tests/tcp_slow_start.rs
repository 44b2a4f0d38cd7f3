//! Slow start against stretch ACKs (RFC 3465 section 2.2, appropriate
//! byte counting with L = 2*SMSS): a receiver acknowledging many segments
//! at once, as a dataplane core servicing a flow once per receive burst
//! does, still lets the window grow quickly.

mod tcp_common;

use tcp_common::*;
use uwarp_stack::tcp::{Config, CongestionControl, Duration};

/// Segments each ACK that reaches the sender covers.
const STRETCH: usize = 8;
/// The window, in segments, the sender is to reach.
const TARGET: u32 = 100;

/// Round trips for A's window to grow from the initial window to
/// [`TARGET`] segments when A sends all the window allows each round
/// and only every ACK covering [`STRETCH`] segments reaches it; checks
/// that B received the stream intact.
fn rounds_to_target(congestion: CongestionControl) -> usize {
    let cfg = Config {
        congestion,
        ..no_nagle()
    };
    let mut pair = Pair::connected(cfg.clone(), cfg);
    pair.b_rx.consume = true;
    let data = stream(4 << 20);
    let mut queued = 0;
    let target = TARGET * pair.a.emss() as u32;
    for round in 1..=40 {
        queued += pair.a.send(&data[queued..]);
        let burst = pair.take(true);
        for chunk in burst.chunks(STRETCH) {
            for wire in chunk {
                pair.deliver(wire);
            }
            // B acknowledges every second segment; only its last ACK for
            // the chunk goes on, a stretch ACK.
            if let Some(ack) = pair.take(false).pop() {
                pair.deliver(&ack);
            }
        }
        // A chunk with an odd segment at the end: B's delayed ACK.
        pair.advance(Duration::from_millis(1));
        for ack in pair.take(false) {
            pair.deliver(&ack);
        }
        if pair.a.cwnd() >= target {
            let received = reassembled(&pair.b_rx);
            assert_eq!(received, data[..received.len()], "{congestion:?}");
            assert_eq!(pair.a.stats().retransmissions, 0, "{congestion:?}");
            return round;
        }
    }
    panic!("{congestion:?}: the window stayed at {}", pair.a.cwnd());
}

#[test]
fn slow_start_grows_by_two_segments_per_stretch_ack() {
    // From 10 segments to 100: doubling per round trip would take 4
    // rounds. With one ACK per 8 segments, one segment of growth per ACK
    // (RFC 5681's L = 1*SMSS) grows the window by about 1/8 per round
    // (18 rounds); two (L = 2*SMSS) by 1/4 (10 rounds).
    for congestion in [CongestionControl::NewReno, CongestionControl::Cubic] {
        let rounds = rounds_to_target(congestion);
        assert!(rounds <= 12, "{congestion:?}: {rounds} round trips");
    }
}
