//! F-RTO (RFC 5682) between two engines: a flight held up past the
//! sender's RTO (a delay spike, nothing lost) costs one retransmission,
//! and the timeout is found spurious and undone (the congestion window
//! comes back) instead of the whole flight being resent; a real loss
//! after the timeout is still repaired, and every octet arrives. Where
//! F-RTO cannot tell, because the first ACK acknowledges everything sent
//! before the timeout, the timestamp echo does (RFC 3522). On the
//! simulator, bulk transfers over a link that stalls now and then (a
//! descheduled host) resend one segment per timeout instead of hundreds.

mod tcp_common;

use std::collections::VecDeque;
use tcp_common::*;
use uwarp_stack::tcp::sim::{LinkConfig, Stall};
use uwarp_stack::tcp::{Config, CongestionControl, Duration, Seq, Stats};

/// Segments A's initial window holds.
const FLIGHT: usize = 10;

/// The settings of A in these tests: Nagle off, timestamps as asked.
fn sender(timestamps: bool) -> Config {
    Config {
        timestamps,
        ..no_nagle()
    }
}

/// A queues `segments` full segments and sends what its window allows;
/// returns the pair and the flight, not delivered.
fn flight(config: Config, segments: usize) -> (Pair, Vec<Wire>) {
    let mut pair = Pair::connected(config, tcp_common::config());
    pair.a.send(&stream(segments * pair.a.emss()));
    let flight = pair.take(true);
    assert_eq!(flight.len(), segments.min(FLIGHT));
    (pair, flight)
}

/// Delivers `wires` to B one at a time, in order, B's answers straight to
/// A, and what A sends then after them, until nothing is left.
fn deliver_in_order(pair: &mut Pair, wires: Vec<Wire>) {
    let mut pending: VecDeque<Wire> = wires.into();
    while let Some(wire) = pending.pop_front() {
        pending.extend(through(pair, &wire));
    }
}

/// [`deliver_in_order`], then timers and exchanges until both sides are
/// idle.
fn play(pair: &mut Pair, wires: Vec<Wire>) {
    deliver_in_order(pair, wires);
    pair.settle(Duration::from_millis(50));
}

/// A's counters and congestion window once its timer expired.
struct AtTimeout {
    stats: Stats,
    cwnd: u32,
}

/// The flight arrives late, after its timer expired `timeouts` times, and
/// what A sent meanwhile follows it.
fn held_past_the_timeout(pair: &mut Pair, flight: Vec<Wire>, timeouts: u64) -> AtTimeout {
    let late = time_out(pair, timeouts);
    let at_timeout = AtTimeout {
        stats: *pair.a.stats(),
        cwnd: pair.a.cwnd(),
    };
    play(pair, flight.into_iter().chain(late).collect());
    at_timeout
}

#[test]
fn a_delay_spike_costs_one_retransmission_and_is_undone() {
    for timestamps in [true, false] {
        let (mut pair, flight) = flight(sender(timestamps), 40);
        let (cwnd, emss) = (pair.a.cwnd(), pair.a.emss());
        let at_timeout = held_past_the_timeout(&mut pair, flight, 1);
        assert_eq!(at_timeout.stats.retransmissions, 1, "the first segment");
        assert_eq!(at_timeout.cwnd as usize, emss, "the loss window");
        let stats = pair.a.stats();
        let context = format!("timestamps {timestamps}: {stats:?}");
        assert_eq!(stats.timeouts, 1, "{context}");
        assert_eq!(stats.spurious_timeouts, 1, "{context}");
        // No go-back-N: the one retransmission arrived as a duplicate.
        assert_eq!(stats.retransmissions, 1, "{context}");
        assert_eq!(stats.fast_recoveries, 0, "{context}");
        assert_eq!(pair.b.stats().dsacks_sent, 1, "{context}");
        // The window as before the timeout, still in slow start.
        assert!(pair.a.cwnd() >= cwnd, "{context}");
        assert_eq!(pair.a.ssthresh(), u32::MAX, "{context}");
        assert_eq!(pair.a.send_queue_len(), 0, "{context}");
        assert_eq!(pair.b.received_len(), 40 * emss, "{context}");
    }
}

#[test]
fn a_longer_spike_times_out_twice_and_is_still_undone() {
    let (mut pair, flight) = flight(sender(true), 40);
    let cwnd = pair.a.cwnd();
    let at_timeout = held_past_the_timeout(&mut pair, flight, 2);
    assert_eq!(
        at_timeout.stats.retransmissions, 2,
        "the first segment twice"
    );
    let stats = pair.a.stats();
    assert_eq!(
        (stats.timeouts, stats.spurious_timeouts),
        (2, 2),
        "{stats:?}"
    );
    assert_eq!(stats.retransmissions, 2, "{stats:?}");
    assert_eq!(pair.b.stats().dsacks_sent, 2);
    assert!(pair.a.cwnd() >= cwnd);
    assert_eq!(pair.b.received_len(), 40 * pair.a.emss());
}

/// A flight of one segment, or one ACK for the whole flight: F-RTO's
/// step 2 has no verdict. The timestamp echo has one, and so has the
/// D-SACK the ACK carries when the retransmission arrived before it
/// (RFC 3708), with the same undo, counted once; with neither the
/// timeout stands.
#[test]
fn a_stalled_flight_acknowledged_at_once_is_judged_by_its_echo_or_dsack() {
    for (timestamps, sack) in [(true, false), (false, true), (true, true), (false, false)] {
        let config = Config {
            sack,
            ..sender(timestamps)
        };
        let (mut pair, flight) = flight(config, 1);
        let cwnd = pair.a.cwnd();
        held_past_the_timeout(&mut pair, flight, 1);
        let stats = pair.a.stats();
        let context = format!("timestamps {timestamps}, SACK {sack}: {stats:?}");
        assert_eq!(stats.retransmissions, 1, "{context}");
        assert_eq!(pair.b.received_len(), pair.a.emss());
        if timestamps || sack {
            assert_eq!(stats.spurious_timeouts, 1, "{context}");
            assert_eq!(pair.a.cwnd(), cwnd, "the initial window again");
        } else {
            // The timeout stands: slow start from the loss window.
            assert_eq!(stats.spurious_timeouts, 0, "{context}");
            assert!(pair.a.cwnd() < cwnd);
        }
    }
}

/// A's first segments arrive (those at `arrive`), the rest of the flight
/// and whatever A sends until its timer expires are lost; then the
/// exchange runs without loss.
fn lost_after(config: Config, segments: usize, arrive: usize) -> Pair {
    let (mut pair, flight) = flight(config, segments);
    deliver_in_order(&mut pair, flight[..arrive].to_vec());
    let mut late = time_out(&mut pair, 1);
    let resent = late.pop().expect("the timeout resent");
    play(&mut pair, vec![resent]);
    pair
}

/// The segments A sent with data, in order, each as its first octet's
/// position divided by the EMSS.
fn segments_sent(pair: &Pair) -> Vec<u32> {
    let data = || pair.log.iter().filter(|w| w.from_a && w.payload_len() > 0);
    let Some(first) = data().next() else {
        return Vec::new();
    };
    let base = Seq::from(first.repr().seq_number);
    data()
        .map(|w| Seq::from(w.repr().seq_number).diff(base) as u32 / pair.a.emss() as u32)
        .collect()
}

#[test]
fn a_real_loss_is_repaired_after_the_timeout() {
    for sack in [true, false] {
        // A blackout: the whole flight is lost, and more data waits, so
        // F-RTO sends two new segments, which arrive above the holes.
        // Then the tail of a transfer: no new data to send after the
        // first ACK, so F-RTO gives up at once.
        for (segments, arrive) in [(40, 0), (FLIGHT, 7)] {
            let config = Config {
                sack,
                tail_loss_probes: false,
                ..sender(true)
            };
            let pair = lost_after(config, segments, arrive);
            let stats = pair.a.stats();
            let context = format!("SACK {sack}, {segments} segments: {stats:?}");
            assert_eq!(stats.spurious_timeouts, 0, "{context}");
            assert_eq!(stats.timeouts, 1, "{context}");
            // Every lost segment resent once, nothing else.
            assert_eq!(stats.retransmissions, (FLIGHT - arrive) as u64, "{context}");
            if segments > FLIGHT {
                // Step 2b: after the first ACK, new data before the holes.
                let after_timeout = &segments_sent(&pair)[FLIGHT..FLIGHT + 4];
                assert_eq!(after_timeout, [0, 10, 11, 1], "{context}");
            }
            assert_eq!(pair.a.send_queue_len(), 0, "{context}");
            assert_eq!(pair.b.received_len(), segments * pair.a.emss(), "{context}");
        }
    }
}

/// Without F-RTO the timeout resends the flight (in slow start, from one
/// segment); every copy arrives as a duplicate and comes back in a
/// D-SACK (RFC 2883). Once all have, the timeout is undone (RFC 3708,
/// with RFC 4015's response): the window and the threshold from before
/// it come back. A spike outlasting the backed-off RTO too is undone
/// once, counted twice. Regression: the timeout stood, and the
/// connection went on from the loss window.
#[test]
fn without_frto_the_timeout_resends_the_flight_and_dsacks_undo_it() {
    for timeouts in [1, 2] {
        let config = Config {
            frto: false,
            ..sender(true)
        };
        let (mut pair, flight) = flight(config, 40);
        let (cwnd, emss) = (pair.a.cwnd(), pair.a.emss());
        let at_timeout = held_past_the_timeout(&mut pair, flight, timeouts);
        assert_eq!(at_timeout.cwnd as usize, emss, "the loss window");
        let stats = pair.a.stats();
        let context = format!("{timeouts} timeouts: {stats:?}");
        assert!(stats.retransmissions > timeouts, "{context}");
        assert_eq!(pair.b.stats().dsacks_sent, stats.retransmissions);
        assert_eq!(stats.dsacks_received, stats.retransmissions);
        assert_eq!(stats.timeouts, timeouts, "{context}");
        assert_eq!(stats.spurious_timeouts, timeouts, "{context}");
        assert!(pair.a.cwnd() >= cwnd, "{} against {cwnd}", pair.a.cwnd());
        assert_eq!(pair.a.ssthresh(), u32::MAX, "still in slow start");
        assert_eq!(pair.b.received_len(), 40 * emss);
    }
}

/// A link stalling for `length` ms every `every` ms.
fn stalling(every: u64, length: u64) -> LinkConfig {
    LinkConfig {
        stall: Some(Stall {
            every: Duration::from_millis(every),
            length: Duration::from_millis(length),
        }),
        ..LinkConfig::default()
    }
}

/// Bulk transfers over a link that stalls for longer than the RTO (8 ms,
/// one timeout each time; 25 ms, two), nothing lost. With F-RTO each
/// timeout costs one retransmission and is found spurious, and no fast
/// recovery follows; without it each timeout resends the flight, every
/// copy arriving twice, and the D-SACKs for them show almost every
/// timeout spurious only then.
#[test]
fn stalls_cost_one_retransmission_per_timeout_with_frto() {
    for congestion in [CongestionControl::NewReno, CongestionControl::Cubic] {
        for (every, length) in [(40, 8), (30, 25)] {
            for seed in 0..2 {
                let scenario = bulk(seed, congestion, stalling(every, length));
                let with = played(&scenario);
                let mut scenario = scenario;
                scenario.client.frto = false;
                let without = played(&scenario);
                let (client, server) = (with.client, with.server);
                let context = format!(
                    "{congestion:?} {length} ms every {every} ms, seed {seed}: with F-RTO \
                     {} retransmissions ({} timeouts, {} spurious) in {} ms, without {} \
                     ({} timeouts, {} spurious) in {} ms",
                    client.retransmissions,
                    client.timeouts,
                    client.spurious_timeouts,
                    with.elapsed.micros() / 1000,
                    without.client.retransmissions,
                    without.client.timeouts,
                    without.client.spurious_timeouts,
                    without.elapsed.micros() / 1000,
                );
                eprintln!("{context}");
                assert!(client.timeouts > 0, "{context}");
                assert_eq!(client.spurious_timeouts, client.timeouts, "{context}");
                assert_eq!(client.retransmissions, client.timeouts, "{context}");
                assert_eq!(client.fast_recoveries, 0, "{context}");
                assert_eq!(server.dsacks_sent, client.retransmissions, "{context}");
                assert!(
                    client.retransmissions * 10 < without.client.retransmissions,
                    "{context}"
                );
                assert!(
                    without.client.spurious_timeouts * 10 >= without.client.timeouts * 9,
                    "{context}"
                );
            }
        }
    }
}
