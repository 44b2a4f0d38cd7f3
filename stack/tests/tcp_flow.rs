//! Flow and congestion control and the timers: the initial window (RFC
//! 6928), NewReno fast recovery (RFC 5681, RFC 6582), SACK recovery (RFC
//! 6675), the restart window after idle (RFC 5681 section 4.1), RTO and
//! its backoff (RFC 6298), delayed ACKs, Nagle, window scaling and
//! timestamps (RFC 7323), zero-window probes and keep-alive.

mod tcp_common;

use smoltcp::wire::TcpControl;
use tcp_common::*;
use uwarp_stack::tcp::{Config, CongestionControl, Duration, Event, KeepAlive, Seq, State};

#[test]
fn initial_window_is_ten_segments() {
    let mut pair = Pair::connected(no_nagle(), config());
    assert_eq!(pair.a.cwnd(), 14480);
    pair.a.send(&stream(100_000));
    let burst = pair.take(true);
    assert_eq!(burst.len(), 10);
    assert!(burst.iter().all(|w| w.payload_len() == 1448));
}

/// Octets A puts on the wire at once for `len` octets queued now; they
/// are delivered.
fn burst(pair: &mut Pair, len: usize) -> usize {
    pair.a.send(&stream(len));
    let wires = pair.take(true);
    for wire in &wires {
        pair.deliver(wire);
    }
    wires.iter().map(Wire::payload_len).sum()
}

#[test]
fn an_idle_sender_restarts_from_the_initial_window() {
    for congestion in [CongestionControl::NewReno, CongestionControl::Cubic] {
        let cfg = Config {
            congestion,
            ..no_nagle()
        };
        let mut pair = Pair::connected(cfg, config());
        pair.b_rx.consume = true;
        // Everything acknowledged (the last ACK delayed by 1 ms).
        let settle = Duration::from_millis(2);
        pair.a.send(&stream(100_000));
        pair.settle(settle);
        let grown = pair.a.cwnd() as usize;
        assert!(grown > 14480, "{congestion:?}: slow start grew {grown}");
        // Idle for less than the RTO (5 ms): the whole window goes out.
        pair.advance(Duration::from_millis(3));
        assert_eq!(burst(&mut pair, 100_000), grown, "{congestion:?}");
        pair.settle(settle);
        let grown = pair.a.cwnd();
        // Idle for longer: cwnd = min(cwnd, initial window) first.
        pair.advance(Duration::from_millis(6));
        assert_eq!(pair.a.cwnd(), grown, "{congestion:?}: only when sending");
        assert_eq!(burst(&mut pair, 100_000), 14480, "{congestion:?}");
        assert_eq!(pair.a.cwnd(), 14480, "{congestion:?}");
        assert_eq!(pair.a.stats().timeouts, 0, "{congestion:?}");
    }
}

/// Sends `segments` full segments from A and delivers all but `lost`;
/// returns the burst.
fn burst_with_losses(pair: &mut Pair, segments: usize, lost: &[usize]) -> Vec<Wire> {
    pair.a.send(&stream(segments * pair.a.emss()));
    let burst = pair.take(true);
    assert_eq!(burst.len(), segments);
    for (i, wire) in burst.iter().enumerate() {
        if !lost.contains(&i) {
            pair.deliver(wire);
        }
    }
    burst
}

#[test]
fn newreno_fast_recovery_without_sack() {
    let plain = Config {
        sack: false,
        ..no_nagle()
    };
    let mut pair = Pair::connected(plain.clone(), plain);
    let burst = burst_with_losses(&mut pair, 10, &[2, 5]);
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    assert_eq!(pair.a.ssthresh(), 5792, "half the eight segments in flight");
    let resent = pair.take(true);
    assert_eq!(resent[0].repr().seq_number, burst[2].repr().seq_number);
    // The partial ACK for the first hole triggers the second retransmission.
    pair.deliver(&resent[0]);
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    let resent = pair.take(true);
    assert_eq!(resent[0].repr().seq_number, burst[5].repr().seq_number);
    for wire in &resent {
        pair.deliver(wire);
    }
    pair.settle(Duration::from_millis(100));
    assert_eq!(pair.b.received_len(), 14480);
    assert_eq!(pair.a.stats().timeouts, 0);
    assert_eq!(pair.a.stats().retransmissions, 2);
}

/// Regression (issue 6): without SACK, a window of three segments with the
/// first lost drew two duplicate ACKs, one short of fast retransmit, and
/// the loss waited for the RTO. Limited transmit (RFC 3042 section 2)
/// sends one new segment on each of the first two duplicate ACKs,
/// leaving the window unchanged; their duplicate ACKs make the third.
/// With SACK the pipe does the same (RFC 6675 section 5): each duplicate
/// ACK SACKs a segment and takes it out of the pipe.
#[test]
fn limited_transmit_reaches_fast_retransmit_in_a_small_window() {
    for sack in [false, true] {
        let cfg = Config {
            sack,
            initial_window: 3,
            ..no_nagle()
        };
        let mut pair = Pair::connected(cfg.clone(), cfg);
        pair.b_rx.consume = true;
        // B's first segment after its SYN updates A's send window: an
        // ACK changing the window is no duplicate.
        b_next(&mut pair);
        let emss = pair.a.emss();
        let data = stream(8 * emss);
        assert_eq!(pair.a.send(&data), data.len());
        let burst = pair.take(true);
        assert_eq!(burst.len(), 3);
        let cwnd = pair.a.cwnd();
        let mut sent = Vec::new();
        for wire in &burst[1..] {
            let new = through(&mut pair, wire);
            assert_eq!(new.len(), 1, "sack {sack}: one segment per duplicate ACK");
            assert!(new[0].payload_len() > 0);
            assert_eq!(pair.a.cwnd(), cwnd, "sack {sack}: the window is unchanged");
            sent.extend(new);
        }
        assert_eq!(pair.a.stats().fast_recoveries, 0);
        let resent = through(&mut pair, &sent[0]);
        assert_eq!(pair.a.stats().fast_recoveries, 1, "sack {sack}");
        assert_eq!(resent[0].repr().seq_number, burst[0].repr().seq_number);
        if !sack {
            // RFC 5681 section 3.2 step 2: ssthresh is half the three
            // segments of FlightSize without the two limited transmit
            // sent, at least two segments.
            assert_eq!(pair.a.ssthresh(), 2 * emss as u32);
        }
        for wire in resent.iter().chain(&sent[1..]) {
            pair.deliver(wire);
        }
        pair.settle(Duration::from_millis(100));
        assert_eq!(reassembled(&pair.b_rx), data, "sack {sack}");
        assert_eq!(pair.a.stats().timeouts, 0, "sack {sack}");
        assert_eq!(pair.a.stats().retransmissions, 1, "sack {sack}");
    }
}

#[test]
fn sack_recovery_resends_only_the_holes() {
    let mut pair = Pair::connected(no_nagle(), config());
    let burst = burst_with_losses(&mut pair, 10, &[1, 4]);
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    let resent = pair.take(true);
    let seqs: Vec<Seq> = resent
        .iter()
        .map(|w| Seq::from(w.repr().seq_number))
        .collect();
    assert_eq!(
        seqs[..2],
        [
            Seq::from(burst[1].repr().seq_number),
            Seq::from(burst[4].repr().seq_number)
        ]
    );
    for wire in &resent {
        pair.deliver(wire);
    }
    pair.settle(Duration::from_millis(100));
    assert_eq!(pair.b.received_len(), 14480);
    assert_eq!(pair.a.stats().retransmissions, 2);
    assert_eq!(pair.a.stats().timeouts, 0);
}

#[test]
fn tail_loss_gets_the_rescue_retransmission() {
    let mut pair = Pair::connected(no_nagle(), config());
    let burst = burst_with_losses(&mut pair, 10, &[2, 9]);
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    let resent: Vec<_> = pair
        .take(true)
        .iter()
        .map(|w| w.repr().seq_number)
        .collect();
    assert_eq!(
        resent,
        vec![burst[2].repr().seq_number, burst[9].repr().seq_number],
        "the hole (RFC 6675 rule 1), then the tail (rule 4)"
    );
}

/// Regression (issue 6): a SACK block reports data, and ours ends before
/// the FIN, so a segment carrying data and the FIN was never marked
/// SACKed: the rescue retransmission (RFC 6675 rule 4) took it for an
/// unreported tail and resent it although it had arrived.
#[test]
fn a_sacked_segment_carrying_the_fin_is_not_resent() {
    let mut pair = Pair::connected(no_nagle(), config());
    pair.a.send(&stream(10 * pair.a.emss()));
    pair.a.close();
    let burst = pair.take(true);
    assert_eq!(burst.len(), 10);
    assert_eq!(burst[9].repr().control, TcpControl::Fin);
    for (i, wire) in burst.iter().enumerate() {
        if i != 2 {
            pair.deliver(wire);
        }
    }
    for ack in pair.take(false) {
        pair.deliver(&ack);
    }
    let resent = pair.take(true);
    assert_eq!(resent.len(), 1, "the hole only");
    assert_eq!(resent[0].repr().seq_number, burst[2].repr().seq_number);
    pair.deliver(&resent[0]);
    pair.settle(Duration::from_millis(100));
    assert_eq!(pair.b.received_len(), 14480);
    assert!(pair.b.peer_closed());
    assert_eq!(pair.a.stats().retransmissions, 1);
    assert_eq!(pair.b.stats().dsacks_sent, 0, "nothing arrived twice");
}

#[test]
fn rto_backs_off_and_respects_the_minimum() {
    let mut pair = Pair::connected(no_nagle(), config());
    // The handshake measured a zero RTT: the RTO sits at its 5 ms floor.
    assert_eq!(pair.a.rto(), Duration::from_millis(5));
    pair.a.send(b"lost");
    pair.take(true);
    let first = pair.a.poll_at().unwrap();
    assert_eq!(first, pair.now + Duration::from_millis(5));
    pair.now = first;
    pair.a.on_timer(first);
    assert_eq!(pair.take(true).len(), 1);
    assert_eq!(pair.a.poll_at(), Some(first + Duration::from_millis(10)));
    assert_eq!(pair.a.stats().timeouts, 1);
}

#[test]
fn data_retries_give_up_with_a_timeout() {
    let cfg = Config {
        max_retransmits: 3,
        ..no_nagle()
    };
    let mut pair = Pair::connected(cfg, config());
    pair.a.send(b"void");
    pair.take(true);
    while let Some(at) = pair.a.poll_at() {
        pair.now = at;
        pair.a.on_timer(at);
        pair.take(true);
    }
    assert_eq!(pair.a.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.a), vec![Event::TimedOut]);
}

#[test]
fn delayed_ack_waits_for_a_second_segment_or_the_timer() {
    let mut pair = Pair::connected(no_nagle(), config());
    pair.a.send(b"one");
    let one = pair.take(true);
    pair.deliver(&one[0]);
    assert!(pair.take(false).is_empty(), "ACK delayed");
    pair.a.send(b"two");
    let two = pair.take(true);
    pair.deliver(&two[0]);
    assert_eq!(
        pair.take(false).len(),
        1,
        "every second segment is acknowledged"
    );
    pair.a.send(b"three");
    let three = pair.take(true);
    pair.deliver(&three[0]);
    assert!(pair.take(false).is_empty());
    pair.advance(Duration::from_millis(1));
    assert_eq!(pair.take(false).len(), 1, "the delayed-ACK timer fired");
}

#[test]
fn nagle_holds_small_segments_while_data_is_unacknowledged() {
    let mut pair = Pair::connected(config(), config());
    pair.a.send(b"first");
    assert_eq!(pair.take(true).len(), 1);
    pair.a.send(b"second");
    assert!(pair.take(true).is_empty(), "held by Nagle");
    pair.a.set_nagle(false);
    assert_eq!(pair.take(true).len(), 1, "TCP_NODELAY sends at once");
}

#[test]
fn zero_window_is_probed_until_it_opens() {
    let mut pair = pair_with_small_receiver(4096);
    pair.a.send(&stream(10_000));
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.b.received_len(), 4096);
    assert!(pair.a.stats().window_probes > 0);
    let probe = pair.log.iter().rev().find(|w| w.from_a).unwrap().repr();
    assert!(probe.payload.is_empty());
    let mut buf = vec![0; 10_000];
    let mut total = 0;
    for _ in 0..100 {
        total += pair.b.recv(&mut buf[total..]);
        pair.settle(Duration::from_millis(500));
        if total == 10_000 {
            break;
        }
    }
    assert_eq!(total, 10_000);
    assert_eq!(buf, stream(10_000));
}

#[test]
fn a_linger_ends_a_close_the_peer_never_lets_finish() {
    // The peer stops reading: its window closes with our data, and our
    // FIN waits behind the rest. Its answers to the probes keep FIN-WAIT-1
    // going for good.
    let mut pair = pair_with_small_receiver(4096);
    pair.a.send(&stream(10_000));
    pair.a.close();
    pair.settle(Duration::from_secs(30));
    assert_eq!(pair.a.state(), State::FinWait1);
    assert!(pair.a.stats().window_probes > 0);
    // Two seconds of linger end it with a reset.
    pair.a.set_linger(pair.now, Duration::from_secs(2));
    pair.advance(Duration::from_millis(1900));
    pair.exchange();
    assert_eq!(pair.a.state(), State::FinWait1);
    pair.advance(Duration::from_millis(100));
    assert_eq!(pair.a.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.a), vec![Event::TimedOut]);
    pair.exchange();
    assert_eq!(pair.b.state(), State::Closed, "the peer got the reset");

    // A close that finishes in time is not disturbed: TIME-WAIT ends the
    // linger, and no time-out or reset follows.
    let mut pair = Pair::connected(config(), config());
    pair.a.set_linger(pair.now, Duration::from_secs(2));
    pair.a.close();
    pair.b.close();
    pair.settle(Duration::from_millis(100));
    assert!(matches!(pair.a.state(), State::TimeWait | State::Closed));
    pair.advance(Duration::from_secs(5));
    assert_eq!(
        Pair::events(&mut pair.a),
        vec![Event::PeerClosed, Event::Closed]
    );
    assert!(pair.take(true).is_empty(), "no reset");
}

#[test]
fn keep_alive_probes_then_times_out_a_silent_peer() {
    let cfg = Config {
        keep_alive: Some(KeepAlive {
            idle: Duration::from_secs(1),
            interval: Duration::from_millis(100),
            probes: 3,
        }),
        ..config()
    };
    let mut pair = Pair::connected(cfg, config());
    // An answering peer keeps the connection up.
    pair.settle(Duration::from_secs(5));
    assert_eq!(pair.a.state(), State::Established);
    assert!(pair.a.stats().keepalive_probes >= 4);
    // A silent one does not.
    while let Some(at) = pair.a.poll_at() {
        pair.now = at;
        pair.a.on_timer(at);
        pair.take(true);
    }
    assert_eq!(pair.a.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.a), vec![Event::TimedOut]);
}

#[test]
fn window_scaling_advertises_large_windows() {
    let big = Config {
        recv_buffer: 1 << 20,
        window_scale: 5,
        ..config()
    };
    let mut pair = Pair::connected(config(), big);
    assert_eq!(pair.log[1].repr().window_scale, Some(5));
    assert_eq!(
        pair.log[1].repr().window_len,
        65535,
        "SYN windows are never scaled"
    );
    pair.a.send(b"x");
    pair.settle(Duration::from_millis(10));
    let ack = pair.log.iter().rev().find(|w| !w.from_a).unwrap().repr();
    assert_eq!(u32::from(ack.window_len) << 5, (1 << 20) - 32);
}

#[test]
fn timestamps_are_echoed() {
    let mut pair = Pair::connected(config(), config());
    pair.a.send(b"x");
    let data = pair.take(true).remove(0);
    let tsval = data.repr().timestamp.unwrap().tsval;
    pair.deliver(&data);
    pair.advance(Duration::from_millis(1));
    let ack = pair.take(false).remove(0);
    assert_eq!(ack.repr().timestamp.unwrap().tsecr, tsval);
}
