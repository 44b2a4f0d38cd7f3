//! Loss recovery after a retransmission timeout between two engines.
//!
//! A fast recovery whose retransmissions are lost too ends in a timeout
//! that F-RTO (RFC 5682) leaves alone: holes were reported. From then
//! on the sender is in slow start from one segment (RFC 5681 section
//! 3.1) and starts no fast recovery until everything sent before the
//! timeout is acknowledged (RFC 6675 section 5.1's RecoveryPoint, RFC
//! 6582 section 3.2's `recover`). With SACK it resends only the holes
//! the scoreboard shows (RFC 6675 section 5.1 keeps using SACK
//! information after the timeout), unless the receiver shows it
//! discarded data it SACKed (RFC 2018 section 8). Without SACK,
//! duplicate ACKs before then start a fast retransmit only when RFC 6582
//! section 4.1's ACK heuristic shows a lost retransmission, not needless
//! ones.

mod tcp_common;

use std::collections::VecDeque;
use tcp_common::*;
use uwarp_stack::tcp::{Config, Duration, Event, Seq};

/// Segments of the clean transfer that opens A's window first.
const WARM_UP: usize = 80;
/// Segments of the flight that loses some.
const FLIGHT: usize = 40;
/// The segments of that flight lost, each leaving a SACK range above it.
const HOLES: [u32; 5] = [3, 10, 17, 24, 31];

/// A's settings: Nagle off, SACK as asked, F-RTO on (the default).
fn sender(sack: bool) -> Config {
    Config { sack, ..no_nagle() }
}

/// A pair after a clean transfer of [`WARM_UP`] segments, with A's
/// window opened by slow start, and [`FLIGHT`] more segments sent and
/// not delivered.
fn warmed_up_flight(config: Config) -> (Pair, Vec<Wire>) {
    let mut pair = Pair::connected(config, tcp_common::config());
    let emss = pair.a.emss();
    let data = stream((WARM_UP + FLIGHT) * emss);
    pair.a.send(&data[..WARM_UP * emss]);
    let burst = pair.take(true);
    play(&mut pair, burst, |_, _| {});
    assert_eq!(pair.a.send_queue_len(), 0);
    assert!(pair.a.cwnd() as usize >= FLIGHT * emss, "{}", pair.a.cwnd());
    pair.a.send(&data[WARM_UP * emss..]);
    let flight = pair.take(true);
    assert_eq!(flight.len(), FLIGHT);
    (pair, flight)
}

/// The flight arrives without its [`HOLES`], B's ACKs reach A, and all A
/// sends in answer (its fast retransmits) is lost; then A's
/// retransmission timer expires. Returns what A sent at the timeout.
fn holes_and_lost_retransmissions(pair: &mut Pair, flight: &[Wire]) -> Vec<Wire> {
    for (i, wire) in flight.iter().enumerate() {
        if !HOLES.contains(&(i as u32)) {
            through(pair, wire);
        }
    }
    time_out(pair, 1)
}

/// Segment 0 of the flight is lost, segments 1 to 3 arrive, and A's fast
/// retransmit is lost too, like everything after segment 3 (B gets none
/// of it, though a test may deliver some late); then A's retransmission
/// timer expires. Returns what A sent at the timeout.
fn lost_fast_retransmit(pair: &mut Pair, flight: &[Wire]) -> Vec<Wire> {
    for wire in &flight[1..4] {
        through(pair, wire);
    }
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    time_out(pair, 1)
}

/// Duplicate ACKs B sent from `log_index` of the log on: pure ACKs
/// repeating the acknowledgment number of B's segment before.
fn duplicate_acks(pair: &Pair, log_index: usize) -> usize {
    let acks: Vec<_> = pair.log[..]
        .iter()
        .enumerate()
        .filter(|(_, w)| !w.from_a)
        .map(|(i, w)| (i, w.repr().ack_number, w.payload_len()))
        .collect();
    acks.windows(2)
        .filter(|pair| pair[1].0 >= log_index && pair[1].1 == pair[0].1 && pair[1].2 == 0)
        .count()
}

/// The data segments A sent from `log_index` of the log on, as indexes
/// of the flight's segments.
fn flight_segments_sent(pair: &Pair, flight: &[Wire], log_index: usize) -> Vec<u32> {
    let base = Seq::from(flight[0].repr().seq_number);
    let emss = pair.a.emss() as i64;
    pair.log[log_index..]
        .iter()
        .filter(|w| w.from_a && w.payload_len() > 0)
        .map(|w| (Seq::from(w.repr().seq_number).diff(base) / emss) as u32)
        .collect()
}

/// Delivers `wires` to B one at a time, in order, each of B's answers
/// straight to A, and what A sends then after them, until nothing is
/// left; then timers run until both sides are idle. After each ACK A
/// takes, `check` sees the pair and A's queued octets before the ACK.
fn play(pair: &mut Pair, wires: Vec<Wire>, check: impl FnMut(&Pair, usize)) {
    play_losing(pair, wires, |_| false, check);
}

/// [`play`], losing the segments of A that `lose` picks.
fn play_losing(
    pair: &mut Pair,
    wires: Vec<Wire>,
    mut lose: impl FnMut(&Wire) -> bool,
    mut check: impl FnMut(&Pair, usize),
) {
    let mut pending: VecDeque<Wire> = wires.into();
    while let Some(wire) = pending.pop_front() {
        if lose(&wire) {
            continue;
        }
        pair.deliver(&wire);
        for ack in pair.take(false) {
            let queued = pair.a.send_queue_len();
            pair.deliver(&ack);
            check(pair, queued);
        }
        pending.extend(pair.take(true));
    }
    pair.settle(Duration::from_millis(50));
}

/// Plays `wires` and all that follows without loss; after each ACK that
/// leaves data unacknowledged, checks A's window against slow start
/// from one segment (one segment more per ACK acknowledging new data),
/// allowing three segments more.
fn recover_in_slow_start(pair: &mut Pair, wires: Vec<Wire>) {
    let emss = pair.a.emss();
    let mut advancing_acks = 0;
    play(pair, wires, |pair, queued| {
        let now_queued = pair.a.send_queue_len();
        if now_queued == 0 {
            return;
        }
        advancing_acks += usize::from(now_queued < queued);
        let slow_start = (1 + advancing_acks) * emss;
        assert!(
            pair.a.cwnd() as usize <= slow_start + 3 * emss,
            "after {advancing_acks} ACKs: cwnd {} against {slow_start} in slow start: {:?}",
            pair.a.cwnd(),
            pair.a.stats()
        );
    });
}

/// All B holds, in order, is the stream A sent.
fn arrived_intact(pair: &mut Pair) {
    let emss = pair.a.emss();
    let mut received = vec![0; (WARM_UP + FLIGHT) * emss + 1];
    let len = pair.b.recv(&mut received);
    assert_eq!(len, (WARM_UP + FLIGHT) * emss);
    assert!(
        received[..len] == stream(len)[..],
        "the data arrived intact"
    );
}

/// Regression: the first partial ACK after such a timeout found the next
/// hole marked lost and started a fast recovery, the window jumping from
/// one segment to half the flight, and the timeout had dropped the SACK
/// marks, so segments the receiver had reported were resent.
#[test]
fn after_a_timeout_with_holes_reported_only_the_holes_are_resent_in_slow_start() {
    let (mut pair, flight) = warmed_up_flight(sender(true));
    let resent = holes_and_lost_retransmissions(&mut pair, &flight);
    let at_timeout = *pair.a.stats();
    let context = format!("{at_timeout:?}");
    assert_eq!(at_timeout.fast_recoveries, 1, "{context}");
    assert!(at_timeout.retransmissions >= 1, "{context}");
    assert_eq!(pair.a.cwnd() as usize, pair.a.emss(), "the loss window");
    let ssthresh = pair.a.ssthresh();
    let log_index = pair.log.len() - resent.len();
    let before_timeout = at_timeout.retransmissions - resent.len() as u64;
    recover_in_slow_start(&mut pair, resent);
    let stats = pair.a.stats();
    let context = format!("{stats:?}");
    // Each hole once, nothing the receiver had SACKed.
    assert_eq!(
        flight_segments_sent(&pair, &flight, log_index),
        HOLES,
        "{context}"
    );
    assert_eq!(
        stats.retransmissions,
        before_timeout + HOLES.len() as u64,
        "{context}"
    );
    assert_eq!(stats.fast_recoveries, 1, "{context}");
    assert_eq!(
        (stats.timeouts, stats.spurious_timeouts),
        (1, 0),
        "{context}"
    );
    assert_eq!(pair.a.ssthresh(), ssthresh, "no second cut");
    arrived_intact(&mut pair);
}

/// Without SACK the timeout resends everything from the first hole on
/// (go-back-N); the copies of segments B already had draw duplicate
/// ACKs, which must not start a fast recovery before everything sent
/// before the timeout is acknowledged (RFC 6582 section 3.2, steps 2 and
/// 4): each follows a cumulative ACK that jumped over seven segments B
/// held, so RFC 6582 section 4.1's heuristic takes them for the
/// unnecessary retransmissions they are.
#[test]
fn without_sack_duplicates_after_a_timeout_start_no_fast_recovery() {
    let (mut pair, flight) = warmed_up_flight(sender(false));
    let resent = holes_and_lost_retransmissions(&mut pair, &flight);
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    let ssthresh = pair.a.ssthresh();
    let log_index = pair.log.len();
    recover_in_slow_start(&mut pair, resent);
    let stats = pair.a.stats();
    assert!(duplicate_acks(&pair, log_index) >= 3, "{stats:?}");
    assert_eq!(stats.fast_recoveries, 1, "{stats:?}");
    assert_eq!(stats.timeouts, 1, "{stats:?}");
    assert_eq!(pair.a.ssthresh(), ssthresh, "no second cut");
    arrived_intact(&mut pair);
}

/// The segment of the flight whose go-back-N retransmission is lost.
const LOST_AGAIN: u32 = 20;

/// Without SACK, after a timeout the go-back-N resends the flight in slow
/// start, each cumulative ACK advancing a segment or two; one of those
/// retransmissions is lost, and the ones after it draw duplicate ACKs.
/// RFC 6582 section 4.1: the window is above one segment and the last
/// advance at most four, so they tell of a new loss, and A fast
/// retransmits the hole instead of waiting for a second timeout.
#[test]
fn without_sack_a_retransmission_lost_after_a_timeout_is_fast_retransmitted() {
    let (mut pair, flight) = warmed_up_flight(sender(false));
    let resent = lost_fast_retransmit(&mut pair, &flight);
    let log_index = pair.log.len() - resent.len();
    let before_timeout = pair.a.stats().retransmissions - resent.len() as u64;
    let hole = flight[LOST_AGAIN as usize].repr().seq_number;
    let mut lost = 0;
    play_losing(
        &mut pair,
        resent,
        |wire| {
            let hit = lost == 0 && wire.payload_len() > 0 && wire.repr().seq_number == hole;
            lost += usize::from(hit);
            hit
        },
        |_, _| {},
    );
    assert_eq!(lost, 1);
    let stats = pair.a.stats();
    let context = format!("{stats:?}");
    assert_eq!(stats.timeouts, 1, "no second timeout: {context}");
    assert_eq!(stats.fast_recoveries, 2, "{context}");
    // Segment 0 at the timeout, then each segment B did not have once,
    // in order, and the lost one again by fast retransmit, after three
    // duplicate ACKs. Regression: the partial ACKs of that recovery
    // resent the go-back-N retransmissions still on their way.
    let sent = flight_segments_sent(&pair, &flight, log_index);
    let second = sent.iter().rposition(|&i| i == LOST_AGAIN).unwrap_or(0);
    let above = sent[..second].iter().filter(|&&i| i > LOST_AGAIN).count();
    assert!(above >= 3, "three duplicate ACKs came first: {sent:?}");
    let mut once = sent.clone();
    once.remove(second);
    let each: Vec<u32> = [0].into_iter().chain(4..FLIGHT as u32).collect();
    assert_eq!(once, each, "{sent:?}");
    // Regression: the threshold was half of all that was unacknowledged,
    // the segments the go-back-N had not reached too, and the window
    // opened to resend them in one burst. It is half of what the
    // go-back-N had resent from the hole on.
    let first = sent.iter().position(|&i| i == LOST_AGAIN).unwrap_or(0);
    let in_network = (second - first) * pair.a.emss();
    assert_eq!(pair.a.ssthresh() as usize, in_network / 2, "{sent:?}");
    assert_eq!(
        stats.retransmissions,
        before_timeout + sent.len() as u64,
        "{context}"
    );
    arrived_intact(&mut pair);
}

/// Without SACK, segments B got late (delayed, not lost) draw duplicate
/// ACKs just after the timeout resent the hole below them: the window is
/// one segment, and RFC 6582 section 4.1 takes them for no new loss; a
/// fast retransmit would resend the segment the timeout just resent.
#[test]
fn without_sack_duplicates_right_after_a_timeout_start_no_fast_retransmit() {
    let (mut pair, flight) = warmed_up_flight(sender(false));
    let resent = lost_fast_retransmit(&mut pair, &flight);
    let at_timeout = *pair.a.stats();
    assert_eq!(pair.a.cwnd() as usize, pair.a.emss(), "the loss window");
    for wire in &flight[4..7] {
        assert!(through(&mut pair, wire).is_empty(), "{:?}", pair.a.stats());
    }
    let stats = pair.a.stats();
    assert_eq!(
        (stats.retransmissions, stats.fast_recoveries),
        (at_timeout.retransmissions, 1),
        "three duplicate ACKs resent nothing: {stats:?}"
    );
    let mut wires = resent;
    wires.extend(flight[7..].iter().cloned());
    play(&mut pair, wires, |_, _| {});
    let stats = pair.a.stats();
    assert_eq!((stats.fast_recoveries, stats.timeouts), (1, 1), "{stats:?}");
    arrived_intact(&mut pair);
}

/// B SACKs segments 2 to 4 of a flight of ten, then discards them: its
/// cumulative ACK stops at segment 2, SACKed. The timeout finds the
/// receiver reneged, drops the SACK marks and resends everything; kept,
/// the marks would have kept segments 2 to 4 from ever being resent.
#[test]
fn a_receiver_discarding_sacked_data_is_found_at_the_timeout() {
    let mut pair = Pair::connected(sender(true), tcp_common::config());
    let emss = pair.a.emss();
    pair.a.send(&stream(10 * emss));
    let flight = pair.take(true);
    let seq = |i: usize| Seq::from(flight[i].repr().seq_number);
    // B gets segment 0 and acknowledges it, with a SACK block for
    // segments 2 to 4, which it then discards.
    pair.deliver(&flight[0]);
    pair.advance(Duration::from_millis(1));
    let ack = pair.take(false).remove(0);
    let sacked = [Some((seq(2).0, seq(5).0)), None, None];
    inject(&mut pair, &ack_like(&ack, sacked, 0));
    // Segment 1 arrives: B acknowledges up to segment 2, SACKed.
    through(&mut pair, &flight[1]);
    // Segments 5 to 9 are lost, and what A sent in answer; the timeout
    // resends the rest.
    pair.settle(Duration::from_secs(5));
    let stats = pair.a.stats();
    assert!(stats.timeouts >= 1, "{stats:?}");
    assert_eq!(pair.a.send_queue_len(), 0, "{stats:?}");
    assert_eq!(pair.b.received_len(), 10 * emss);
    assert!(!Pair::events(&mut pair.a).contains(&Event::TimedOut));
}
