//! D-SACK (RFC 2883): the receiver reports the first duplicate run of a
//! segment in a block ahead of the others (section 4), once.

mod tcp_common;

use smoltcp::wire::TcpControl;
use tcp_common::*;
use uwarp_stack::tcp::{Config, Seq};

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
