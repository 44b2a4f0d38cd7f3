//! MPA awareness (RFC 5044 Appendix A): segments cut only at record
//! boundaries and packed, retransmissions on the original boundaries, the
//! A.1 exceptions counted, and the receive hand-off of every new octet,
//! once, with its stream position, SACK blocks and the left edge.

mod tcp_common;

use std::collections::BTreeSet;
use tcp_common::*;
use uwarp_stack::tcp::{Config, Duration, Seq, WindowPolicy};

/// Queues records of `sizes` on A; returns their start positions.
fn queue_records(pair: &mut Pair, sizes: &[usize]) -> BTreeSet<u64> {
    let data = stream(sizes.iter().sum());
    let mut starts = BTreeSet::new();
    let mut at = 0;
    for &size in sizes {
        pair.a.send_record(&data[at..at + size]).expect("room");
        starts.insert(at as u64);
        at += size;
    }
    starts.insert(at as u64);
    starts
}

/// Stream position of a segment from A.
fn position(wire: &Wire) -> u64 {
    Seq::from(wire.repr().seq_number).diff(A_ISN + 1) as u64
}

#[test]
fn segments_start_on_records_and_pack_whole_records() {
    let mut pair = Pair::connected(no_nagle(), config());
    assert_eq!(pair.a.emss(), 1448);
    let sizes = [500, 500, 500, 1000, 1448, 200, 100, 100];
    let starts = queue_records(&mut pair, &sizes);
    let segments = pair.take(true);
    let cuts: Vec<(u64, usize)> = segments
        .iter()
        .map(|w| (position(w), w.payload_len()))
        .collect();
    assert_eq!(
        cuts,
        vec![
            (0, 1000),
            (1000, 500),
            (1500, 1000),
            (2500, 1448),
            (3948, 400)
        ]
    );
    for (start, len) in cuts {
        assert!(starts.contains(&start) && starts.contains(&(start + len as u64)));
    }
    assert_eq!(pair.a.stats().records_split, 0);
    assert_eq!(pair.a.stats().unaligned_segments, 0);
}

#[test]
fn fast_retransmit_resends_the_original_segment() {
    let mut pair = Pair::connected(no_nagle(), config());
    queue_records(&mut pair, &[700, 700, 300, 900, 1000, 1000, 1000]);
    let segments = pair.take(true);
    let lens: Vec<usize> = segments.iter().map(Wire::payload_len).collect();
    assert_eq!(lens, vec![1400, 1200, 1000, 1000, 1000]);
    for (i, wire) in segments.iter().enumerate() {
        if i != 1 {
            pair.deliver(wire);
        }
    }
    // B acknowledges with SACK blocks; A retransmits the hole at once.
    let acks = pair.take(false);
    assert!(acks[0].repr().sack_ranges[0].is_some());
    for ack in &acks {
        pair.deliver(ack);
    }
    let resent = pair.take(true);
    assert_eq!(resent[0].repr().seq_number, segments[1].repr().seq_number);
    assert_eq!(resent[0].repr().payload, segments[1].repr().payload);
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    for wire in &resent {
        pair.deliver(wire);
    }
    pair.settle(Duration::from_millis(50));
    assert_eq!(pair.b.received_len(), 5600);
    assert_eq!(pair.a.stats().retransmissions, 1);
}

#[test]
fn timeout_retransmission_keeps_boundaries() {
    let mut pair = Pair::connected(no_nagle(), config());
    let starts = queue_records(&mut pair, &[1000, 400, 400, 1448, 30]);
    let first = pair.take(true);
    // The tail loss probe first (RFC 8985 section 7.3): nothing new to
    // send, so the last segment again, whole.
    let probe_at = pair.a.poll_at().expect("probe armed");
    pair.now = probe_at;
    pair.a.on_timer(probe_at);
    let probe = pair.take(true);
    assert_eq!(pair.a.stats().tail_loss_probes, 1);
    let (last, probe) = (first.last().unwrap().repr(), probe[0].repr());
    assert!(
        last.seq_number == probe.seq_number && last.payload == probe.payload,
        "the probe keeps the last segment's boundaries"
    );
    let deadline = pair.a.poll_at().expect("RTO armed");
    pair.now = deadline;
    pair.a.on_timer(deadline);
    let again = pair.take(true);
    assert_eq!(pair.a.stats().timeouts, 1);
    assert_eq!(pair.a.cwnd() as usize, pair.a.emss(), "loss window");
    assert_eq!(again.len(), 1);
    let (old, new) = (first[0].repr(), again[0].repr());
    assert!(
        old.seq_number == new.seq_number && old.payload == new.payload,
        "same boundaries"
    );
    pair.deliver(&again[0]);
    pair.settle(Duration::from_secs(5));
    assert_eq!(pair.b.received_len(), 3278);
    assert_eq!(pair.a.stats().unaligned_segments, 0);
    for wire in pair.log.iter().filter(|w| w.from_a && w.payload_len() > 0) {
        assert!(starts.contains(&position(wire)));
    }
}

#[test]
fn shrinking_mss_splits_records_and_counts_them() {
    let mut pair = Pair::connected(no_nagle(), config());
    queue_records(&mut pair, &[1400, 300]);
    pair.a.set_mss(600);
    assert_eq!(pair.a.emss(), 588);
    let segments = pair.take(true);
    let lens: Vec<usize> = segments.iter().map(Wire::payload_len).collect();
    // The tail of the split record packs with the next record.
    assert_eq!(lens, vec![588, 588, 524]);
    assert_eq!(pair.a.stats().records_split, 2);
    assert_eq!(pair.a.stats().unaligned_segments, 2);
}

#[test]
fn a_window_below_one_record_splits_it_after_the_persist_timer() {
    let mut pair = pair_with_small_receiver(1000);
    queue_records(&mut pair, &[1200]);
    assert!(pair.take(true).is_empty(), "waits for the window to open");
    let at = pair.a.poll_at().expect("persist timer");
    pair.now = at;
    pair.a.on_timer(at);
    let split = pair.take(true);
    assert_eq!(split.len(), 1);
    assert_eq!(split[0].payload_len(), 1000);
    assert_eq!(pair.a.stats().records_split, 1);
    pair.deliver(&split[0]);
    let mut buf = [0; 2000];
    assert_eq!(pair.b.recv(&mut buf), 1000);
    pair.settle(Duration::from_millis(100));
    assert_eq!(pair.b.recv(&mut buf), 200);
}

#[test]
fn receiver_hands_each_octet_over_once_in_any_order() {
    let mut pair = Pair::connected(no_nagle(), config());
    pair.b_rx.consume = true;
    queue_records(&mut pair, &[1000, 1000, 1000]);
    let segments = pair.take(true);
    pair.deliver(&segments[2]);
    let sack = pair.take(false);
    let blocks = sack[0].repr().sack_ranges;
    let b_irs = A_ISN + 1;
    assert_eq!(blocks[0], Some(((b_irs + 2000).0, (b_irs + 3000).0)));
    pair.deliver(&segments[0]);
    pair.deliver(&segments[1]);
    pair.deliver(&segments[1]);
    pair.deliver(&segments[2]);
    let offered: Vec<(u64, usize, bool)> = pair
        .b_rx
        .offered
        .iter()
        .map(|(p, d, o)| (*p, d.len(), *o))
        .collect();
    assert_eq!(
        offered,
        vec![(2000, 1000, false), (0, 1000, true), (1000, 1000, true)]
    );
    assert_eq!(pair.b_rx.left_edges, vec![1000, 3000]);
    assert_eq!(pair.b.received(), None, "consumed data is not held");
    assert_eq!(
        pair.b.stats().unacceptable,
        2,
        "old duplicates fail the window test"
    );
}

#[test]
fn overlapping_retransmission_offers_only_the_gaps() {
    let mut pair = Pair::connected(no_nagle(), config());
    pair.a.send(&stream(3000));
    let segments = pair.take(true);
    pair.deliver(&segments[1]);
    // A middlebox-merged copy of all segments arrives next.
    let b_isn = Seq::from(pair.log[1].repr().seq_number);
    let whole = forged_from_a(b_isn + 1, &stream(3000)[..2896]);
    let repr = uwarp_stack::tcp::parse(A.addr, B.addr, &whole).unwrap();
    let now = pair.now;
    pair.b.on_segment(now, &repr, &mut pair.b_rx);
    let offered: Vec<(u64, usize)> = pair
        .b_rx
        .offered
        .iter()
        .map(|(p, d, _)| (*p, d.len()))
        .collect();
    assert_eq!(offered, vec![(1448, 1448), (0, 1448)]);
}

/// A data segment from A to B at the stream start, acknowledging `ack`.
fn forged_from_a(ack: Seq, payload: &[u8]) -> Vec<u8> {
    let mut bytes = forged(
        smoltcp::wire::TcpControl::None,
        A_ISN + 1,
        Some(ack),
        payload,
    );
    bytes[0..2].copy_from_slice(&A.port.to_be_bytes());
    bytes[2..4].copy_from_slice(&B.port.to_be_bytes());
    let mut packet = smoltcp::wire::TcpPacket::new_unchecked(&mut bytes);
    packet.fill_checksum(
        &smoltcp::wire::IpAddress::Ipv4(A.addr),
        &smoltcp::wire::IpAddress::Ipv4(B.addr),
    );
    bytes
}

#[test]
fn declined_data_beyond_the_reassembly_buffer_is_not_received() {
    let small = Config {
        recv_buffer: 32 * 1024,
        ..config()
    };
    let mut pair = Pair::connected(no_nagle(), small);
    pair.b.set_window_policy(WindowPolicy::Fixed(1 << 20));
    pair.exchange();
    pair.a.send(&stream(200_000));
    let mut delivered = 0;
    for _ in 0..100 {
        let segments = pair.take(true);
        if segments.is_empty() {
            break;
        }
        // Lose the first segment of every burst so data piles up unread.
        for wire in segments.iter().skip(usize::from(delivered == 0)) {
            pair.deliver(wire);
        }
        delivered += segments.len();
        let acks = pair.take(false);
        for ack in &acks {
            pair.deliver(ack);
        }
    }
    assert!(pair.b.stats().declined_dropped > 0);
    pair.settle(Duration::from_secs(60));
    let mut total = 0;
    let mut buf = vec![0; 65536];
    for _ in 0..10_000 {
        let n = pair.b.recv(&mut buf);
        if n == 0 {
            pair.settle(Duration::from_secs(60));
            if pair.b.received_len() == 0 {
                break;
            }
        }
        assert_eq!(buf[..n], stream(200_000)[total..total + n]);
        total += n;
    }
    assert_eq!(total, 200_000);
}

mod arrival_order {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Whatever the order and duplication of arrivals, every octet is
        /// handed over exactly once and the left edge only moves forward.
        #[test]
        fn every_octet_is_handed_over_exactly_once(
            order in proptest::collection::vec(0usize..64, 1..120),
            consume in any::<bool>(),
        ) {
            let mut pair = Pair::connected(no_nagle(), config());
            pair.b_rx.consume = consume;
            pair.a.send(&stream(10 * 1448));
            let segments = pair.take(true);
            prop_assert_eq!(segments.len(), 10, "the initial window");
            for &i in &order {
                pair.deliver(&segments[i % segments.len()]);
            }
            for wire in &segments {
                pair.deliver(wire);
            }
            let mut offered: Vec<(u64, usize)> =
                pair.b_rx.offered.iter().map(|(p, d, _)| (*p, d.len())).collect();
            offered.sort();
            let mut next = 0;
            for (pos, len) in offered {
                prop_assert_eq!(pos, next, "a gap or an overlap at {}", pos);
                next = pos + len as u64;
            }
            prop_assert_eq!(next, 10 * 1448);
            for (pos, data, _) in &pair.b_rx.offered {
                let at = *pos as usize;
                prop_assert_eq!(&data[..], &stream(10 * 1448)[at..at + data.len()]);
            }
            prop_assert!(pair.b_rx.left_edges.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(pair.b_rx.left_edges.last().copied(), Some(10 * 1448));
        }
    }
}
