//! D-SACK (RFC 2883) both ways between two engines: the receiver reports
//! the first duplicate run of a segment in a block ahead of the others
//! (section 4), once; the sender matches D-SACKs to the retransmissions of
//! its last fast recovery and, when all came back as duplicates, undoes
//! the window cut (RFC 3708 section 3, RFC 4015 section 3) and raises its
//! duplicate threshold past the displacement that misled it. D-SACK blocks
//! that match nothing (outside the window, below SND.UNA, partial,
//! inverted, for data never resent) undo nothing and never panic.

mod tcp_common;

use proptest::prelude::*;
use smoltcp::wire::TcpControl;
use tcp_common::*;
use uwarp_stack::tcp::{bare_header, Config, Duration, Segment, Seq};

/// The SACK blocks of `wire`, relative to `base`.
fn blocks(wire: &Wire, base: Seq) -> Vec<(i64, i64)> {
    let repr = wire.repr();
    repr.sack_ranges
        .iter()
        .flatten()
        .map(|&(l, r)| (Seq(l).diff(base), Seq(r).diff(base)))
        .collect()
}

#[test]
fn duplicates_are_reported_first_and_once() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    let ack = Seq::from(pair.log.last().unwrap().repr().ack_number.unwrap());
    let data = stream(400);
    let from_b = |seq: Seq, range: core::ops::Range<usize>| {
        forged(TcpControl::None, seq, Some(ack), &data[range])
    };
    inject(&mut pair, &from_b(next, 0..100));
    // The same segment again: a D-SACK block below the cumulative ACK.
    let reply = inject(&mut pair, &from_b(next, 0..100));
    assert_eq!(blocks(&reply[0], next), vec![(0, 100)]);
    // Half old, half new: the old half is reported, the new half taken.
    let reply = inject(&mut pair, &from_b(next + 50, 50..150));
    assert_eq!(blocks(&reply[0], next), vec![(50, 100)]);
    assert_eq!(
        Seq::from(reply[0].repr().ack_number.unwrap()).diff(next),
        150
    );
    // Out of order, then again: the D-SACK block, then the block holding
    // it (rule 4).
    inject(&mut pair, &from_b(next + 300, 300..400));
    let reply = inject(&mut pair, &from_b(next + 320, 320..350));
    assert_eq!(blocks(&reply[0], next), vec![(320, 350), (300, 400)]);
    // Each duplicate is reported once.
    pair.a.send(b"data");
    let later = pair.take(true);
    assert_eq!(blocks(&later[0], next), vec![(300, 400)]);
    assert_eq!(pair.a.stats().dsacks_sent, 3);
    assert_eq!(
        pair.a_rx.offered.iter().map(|o| o.1.len()).sum::<usize>(),
        1 + 150 + 100
    );
}

#[test]
fn no_dsack_without_sack() {
    let plain = Config {
        sack: false,
        ..config()
    };
    let mut pair = Pair::connected(plain, config());
    let next = b_next(&mut pair);
    let ack = Seq::from(pair.log.last().unwrap().repr().ack_number.unwrap());
    let segment = forged(TcpControl::None, next, Some(ack), b"again");
    inject(&mut pair, &segment);
    let reply = inject(&mut pair, &segment);
    assert_eq!(blocks(&reply[0], next), vec![]);
    assert_eq!(pair.a.stats().dsacks_sent, 0);
}

#[test]
fn a_spurious_fast_retransmit_is_undone_and_the_displacement_learned() {
    let Spurious {
        mut pair,
        retransmission,
        cwnd_before,
    } = spurious_recovery();
    let cut = pair.a.cwnd();
    assert_eq!(pair.a.reordering(), 3);
    // B gets the retransmission after the original: a duplicate.
    pair.deliver(&retransmission);
    let answer = pair.take(false);
    let hole = Seq::from(retransmission.repr().seq_number);
    let len = retransmission.payload_len() as i64;
    assert_eq!(blocks(&answer[0], hole), vec![(0, len)]);
    pair.deliver(&answer[0]);
    let stats = pair.a.stats();
    assert_eq!((stats.dsacks_received, stats.spurious_recoveries), (1, 1));
    // Three segments arrived before the hole's original: four next time.
    assert_eq!(pair.a.reordering(), 4);
    // Slow start again up to where it was, as before the cut.
    assert_eq!(pair.a.ssthresh(), u32::MAX);
    assert!(pair.a.cwnd() > cut && pair.a.cwnd() <= cwnd_before);
    // The same displacement again is no loss any more.
    pair.a.send(&stream(10 * pair.a.emss()));
    let burst = pair.take(true);
    for i in [0, 2, 3, 4] {
        assert!(through(&mut pair, &burst[i])
            .iter()
            .all(|w| w.repr().seq_number != burst[1].repr().seq_number));
    }
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    assert_eq!(pair.a.stats().retransmissions, 1);
}

/// An ACK from B as its last one, with `blocks` as its SACK option.
fn ack_with_blocks(pair: &Pair, blocks: [Option<(u32, u32)>; 3]) -> Vec<u8> {
    let last = pair.log.iter().rev().find(|w| !w.from_a).expect("B sent");
    ack_like(last, blocks, 0)
}

#[test]
fn dsack_blocks_that_match_no_retransmission_undo_nothing() {
    let Spurious {
        mut pair,
        retransmission,
        ..
    } = spurious_recovery();
    let cwnd = pair.a.cwnd();
    let h = retransmission.repr().seq_number.0 as u32;
    let len = retransmission.payload_len() as u32;
    let una = pair
        .log
        .iter()
        .rev()
        .find(|w| !w.from_a)
        .unwrap()
        .repr()
        .ack_number
        .unwrap()
        .0 as u32;
    let never_resent = h.wrapping_add(len);
    let hostile: [[Option<(u32, u32)>; 3]; 9] = [
        // Below SND.UNA, covering only part of the retransmission.
        [Some((h, h + len - 1)), None, None],
        [Some((h + 10, h + len + 100)), Some((h, h + len + 50)), None],
        // Data that was never resent.
        [Some((never_resent, never_resent + len)), None, None],
        // Far outside the window, and before the stream began.
        [
            Some((h.wrapping_sub(1 << 30), h.wrapping_sub(1 << 30) + len)),
            None,
            None,
        ],
        [Some((h.wrapping_sub(100_000), h + len)), None, None],
        // Inverted and empty blocks.
        [Some((h + len, h)), Some((h + 2 * len, h)), None],
        [Some((h, h)), Some((h, h)), Some((h, h))],
        // Inside a second block beyond SND.NXT.
        [Some((una + 100, una + 200)), Some((una, una + 5000)), None],
        // Garbage everywhere.
        [
            Some((0, u32::MAX)),
            Some((u32::MAX, 0)),
            Some((una, una.wrapping_sub(1))),
        ],
    ];
    for option in hostile {
        let bytes = ack_with_blocks(&pair, option);
        inject(&mut pair, &bytes);
        assert_eq!(pair.a.stats().spurious_recoveries, 0, "{option:?}");
        assert_eq!(pair.a.cwnd(), cwnd, "{option:?}");
        assert_eq!(pair.a.reordering(), 3, "{option:?}");
    }
    // The first three were read as D-SACKs, the rest fell outside.
    assert_eq!(pair.a.stats().dsacks_received, 3);
    // The genuine D-SACK still works: nothing above was taken for it.
    pair.deliver(&retransmission);
    for answer in pair.take(false) {
        pair.deliver(&answer);
    }
    assert_eq!(pair.a.stats().spurious_recoveries, 1);
    // And it counts once.
    let again = ack_with_blocks(&pair, [Some((h, h + len)), None, None]);
    inject(&mut pair, &again);
    assert_eq!(pair.a.stats().spurious_recoveries, 1);
}

/// A spurious recovery whose D-SACK ACK B sends, then a pure ACK
/// `later(&pair)` ticks after it, which reaches A first; returns the pair
/// and the D-SACK ACK.
fn overtaken_dsack(later: fn(&Pair) -> u32) -> (Pair, Wire) {
    let Spurious {
        mut pair,
        retransmission,
        ..
    } = spurious_recovery();
    pair.deliver(&retransmission);
    let dsack = pair.take(false).remove(0);
    let overtaking = ack_like(&dsack, [None; 3], later(&pair));
    inject(&mut pair, &overtaking);
    pair.deliver(&dsack);
    (pair, dsack)
}

/// Regression: a D-SACK ACK overtaken by a later pure ACK of B carries an
/// older timestamp, and PAWS dropped it, so the spurious recovery stayed
/// in place. A pure ACK at RCV.NXT for SND.UNA within one RTO of
/// TS.Recent is accepted (Linux's disordered ACK).
#[test]
fn a_reordered_dsack_ack_still_undoes_the_recovery() {
    // B's next ACK (a window update, say) two ticks later arrives first.
    let (pair, _) = overtaken_dsack(|_| 2);
    let stats = pair.a.stats();
    assert_eq!(stats.paws_rejected, 0);
    assert_eq!((stats.dsacks_received, stats.spurious_recoveries), (1, 1));
    assert_eq!(pair.a.reordering(), 4);
}

/// Only ACKs within one RTO of TS.Recent pass as disordered; older ones
/// and data segments with old timestamps are still PAWS's.
#[test]
fn paws_still_drops_old_acks_and_data() {
    let (mut pair, dsack) = overtaken_dsack(|pair| (pair.a.rto().micros() / 1000) as u32 + 1);
    assert_eq!(pair.a.stats().paws_rejected, 1);
    assert_eq!(pair.a.stats().spurious_recoveries, 0);
    // Data with a timestamp just behind TS.Recent is no pure ACK.
    let repr = dsack.repr();
    let mut header = bare_header(
        B.port,
        A.port,
        TcpControl::None,
        Seq::from(repr.seq_number),
        repr.ack_number.map(Seq::from),
        repr.window_len,
    );
    header.timestamp = repr.timestamp;
    let data = Segment {
        src: B.addr,
        dst: A.addr,
        header,
        payload: uwarp_stack::tcp::Payload::of(b"old"),
    }
    .to_bytes();
    inject(&mut pair, &data);
    assert_eq!(pair.a.stats().paws_rejected, 2);
    assert!(pair.a_rx.offered.iter().all(|o| o.1 != b"old"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Any SACK option on an ACK, with blocks near the window or
    /// anywhere, leaves the connection able to finish its transfer.
    #[test]
    fn arbitrary_sack_options_never_panic_or_stall(
        options in proptest::collection::vec(
            proptest::array::uniform3(proptest::option::of((-20_000i64..20_000, -3000i64..3000))),
            1..12,
        ),
    ) {
        let Spurious { mut pair, retransmission, .. } = spurious_recovery();
        let h = Seq::from(retransmission.repr().seq_number);
        pair.a.send(&stream(5 * pair.a.emss()));
        let in_flight = pair.take(true);
        for blocks in options {
            let blocks = blocks.map(|b| b.map(|(start, len)| {
                let left = h + start as u32;
                (left.0, (left + len as u32).0)
            }));
            let bytes = ack_with_blocks(&pair, blocks);
            inject(&mut pair, &bytes);
        }
        for wire in &in_flight {
            pair.deliver(wire);
        }
        pair.settle(Duration::from_secs(5));
        prop_assert_eq!(pair.a.send_queue_len(), 0);
        prop_assert_eq!(pair.b.received_len(), 15 * pair.a.emss());
    }
}
