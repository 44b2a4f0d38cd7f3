//! Hostile input: blind reset, SYN and data injection (RFC 5961), segments
//! outside the window, ACKs of unsent data, PAWS (RFC 7323 section 5),
//! bad checksums, bogus options, and arbitrary bytes that must never
//! panic the parser or a connection.

mod tcp_common;

use proptest::prelude::*;
use smoltcp::wire::{IpAddress, TcpControl, TcpPacket};
use tcp_common::*;
use uwarp_stack::tcp::{parse, Config, Duration, Instant, ParseError, Seq, State};

fn a_next(pair: &Pair) -> Seq {
    let last = pair.log.iter().rev().find(|w| w.from_a).expect("A sent");
    let repr = last.repr();
    Seq::from(repr.seq_number) + repr.segment_len() as u32
}

#[test]
fn reset_in_window_but_not_exact_gets_a_challenge_ack() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    let replies = inject(&mut pair, &forged(TcpControl::Rst, next + 1000, None, &[]));
    assert_eq!(pair.a.state(), State::Established);
    assert_eq!(replies.len(), 1);
    let ack = replies[0].repr();
    assert_eq!(ack.control, TcpControl::None);
    assert_eq!(ack.ack_number.map(Seq::from), Some(next));
    assert_eq!(pair.a.stats().challenge_acks, 1);
    // Outside the window: dropped silently.
    let replies = inject(
        &mut pair,
        &forged(TcpControl::Rst, next + 10_000_000, None, &[]),
    );
    assert!(replies.is_empty());
    assert_eq!(pair.a.state(), State::Established);
    // Exactly RCV.NXT: the connection resets.
    inject(&mut pair, &forged(TcpControl::Rst, next, None, &[]));
    assert_eq!(pair.a.state(), State::Closed);
}

#[test]
fn syn_on_a_synchronized_connection_gets_a_challenge_ack() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    for seq in [next, next + 5, next - 5000] {
        let replies = inject(&mut pair, &forged(TcpControl::Syn, seq, None, &[]));
        assert_eq!(pair.a.state(), State::Established);
        assert_eq!(replies.len(), 1, "an ACK answers the SYN at {seq:?}");
    }
    assert_eq!(
        pair.a.stats().challenge_acks,
        2,
        "the old one is merely unacceptable"
    );
}

#[test]
fn challenge_acks_are_rate_limited() {
    let mut cfg = config();
    cfg.challenge_ack_limit = 10;
    let mut pair = Pair::connected(cfg, config());
    let next = b_next(&mut pair);
    for i in 0..50u32 {
        inject(&mut pair, &forged(TcpControl::Rst, next + 1 + i, None, &[]));
    }
    assert_eq!(pair.a.stats().challenge_acks, 10);
    pair.advance(Duration::from_secs(1));
    inject(&mut pair, &forged(TcpControl::Rst, next + 7, None, &[]));
    assert_eq!(pair.a.stats().challenge_acks, 11);
}

#[test]
fn ack_of_unsent_data_is_dropped_with_an_ack() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    let beyond = a_next(&pair) + 100_000;
    let replies = inject(
        &mut pair,
        &forged(TcpControl::Psh, next, Some(beyond), b"evil"),
    );
    assert_eq!(replies.len(), 1);
    assert!(pair.a_rx.offered.iter().all(|(_, data, _)| data != b"evil"));
    assert_eq!(pair.a.received(), Some((0, &b"x"[..])));
    // A too-old ACK (before SND.UNA - MAX.SND.WND) is dropped the same way.
    let stale = a_next(&pair) - 2_000_000_000;
    inject(
        &mut pair,
        &forged(TcpControl::Psh, next, Some(stale), b"evil"),
    );
    assert_eq!(pair.a.received_len(), 1);
    assert_eq!(pair.a.state(), State::Established);
}

#[test]
fn data_outside_the_window_is_not_delivered() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    let ack = a_next(&pair);
    for seq in [next + 0x4000_0000, next - 100_000, next + 300_000] {
        let replies = inject(
            &mut pair,
            &forged(TcpControl::None, seq, Some(ack), b"blind"),
        );
        assert_eq!(replies.len(), 1, "a duplicate ACK answers");
        assert_eq!(Seq::from(replies[0].repr().ack_number.unwrap()), next);
    }
    assert_eq!(
        pair.a_rx.offered.len(),
        1,
        "only the real octet was handed over"
    );
    assert!(pair.a.stats().unacceptable >= 3);
    // The connection still works (once the delayed ACK lets Nagle go).
    pair.b.send(b"yz");
    pair.settle(Duration::from_millis(10));
    assert_eq!(pair.a.received(), Some((0, &b"xyz"[..])));
}

#[test]
fn paws_drops_old_timestamps() {
    let mut pair = Pair::connected(config(), config());
    let next = b_next(&mut pair);
    let ack = a_next(&pair);
    let last_b = pair.log.iter().rev().find(|w| !w.from_a).unwrap().repr();
    let recent = last_b.timestamp.unwrap().tsval;
    let bytes = retimed(
        &forged(TcpControl::None, next, Some(ack), b"old"),
        recent.wrapping_sub(1000),
    );
    let replies = inject(&mut pair, &bytes);
    assert_eq!(replies.len(), 1);
    assert_eq!(pair.a.stats().paws_rejected, 1);
    assert_eq!(pair.a.received_len(), 1);
}

#[test]
fn bad_checksums_and_malformed_headers_are_refused() {
    let mut bytes = forged(TcpControl::None, Seq(1), Some(Seq(2)), b"data");
    bytes[20] ^= 0xff;
    assert_eq!(parse(B.addr, A.addr, &bytes), Err(ParseError::Checksum));
    assert_eq!(
        parse(B.addr, A.addr, &bytes[..10]),
        Err(ParseError::Malformed)
    );
    // Data offset beyond the segment.
    let mut short = forged(TcpControl::None, Seq(1), Some(Seq(2)), &[]);
    short[12] = 0xf0;
    assert_eq!(parse(B.addr, A.addr, &short), Err(ParseError::Malformed));
}

/// A segment from B to A with `options` and a correct checksum.
fn with_options(options: &[u8]) -> Vec<u8> {
    let padded = options.len().div_ceil(4) * 4;
    let mut bytes = vec![0u8; 20 + padded];
    bytes[20..20 + options.len()].copy_from_slice(options);
    let mut packet = TcpPacket::new_unchecked(&mut bytes);
    packet.set_src_port(B.port);
    packet.set_dst_port(A.port);
    packet.set_header_len((20 + padded) as u8);
    packet.set_ack(true);
    packet.fill_checksum(&IpAddress::Ipv4(B.addr), &IpAddress::Ipv4(A.addr));
    bytes
}

#[test]
fn bogus_options_never_panic() {
    let cases: [&[u8]; 9] = [
        &[2, 0],
        &[2, 1, 0, 0],
        &[2, 40],
        &[3, 3],
        &[5, 2],
        &[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        &[8, 9, 0, 0, 0, 0, 0, 0, 0],
        &[99, 0, 1],
        &[
            5, 34, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0,
            7, 0, 0, 0, 8,
        ],
    ];
    let mut pair = Pair::connected(config(), config());
    for options in cases {
        let bytes = with_options(options);
        if let Ok(repr) = parse(B.addr, A.addr, &bytes) {
            let now = pair.now;
            pair.a.on_segment(now, &repr, &mut pair.a_rx);
        }
    }
    assert_eq!(pair.a.state(), State::Established);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = parse(B.addr, A.addr, &bytes);
    }

    #[test]
    fn arbitrary_segments_never_panic_a_connection(
        segments in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 20..80), any::<u8>(), any::<u32>(), any::<u32>()),
            1..20,
        ),
        timer_steps in 0u64..5,
    ) {
        let mut pair = Pair::connected(config(), config());
        pair.a.send(&stream(5000));
        pair.take(true);
        for (mut bytes, offset, seq, ack) in segments {
            // Aim at A: right ports, a plausible data offset, a fixed checksum.
            bytes[0..2].copy_from_slice(&B.port.to_be_bytes());
            bytes[2..4].copy_from_slice(&A.port.to_be_bytes());
            bytes[4..8].copy_from_slice(&seq.to_be_bytes());
            bytes[8..12].copy_from_slice(&ack.to_be_bytes());
            let max_words = (bytes.len() / 4).min(15) as u8;
            bytes[12] = (5 + offset % (max_words - 4)) << 4;
            let mut packet = TcpPacket::new_unchecked(&mut bytes);
            packet.fill_checksum(&IpAddress::Ipv4(B.addr), &IpAddress::Ipv4(A.addr));
            if let Ok(repr) = parse(B.addr, A.addr, &bytes) {
                let now = pair.now;
                pair.a.on_segment(now, &repr, &mut pair.a_rx);
                pair.take(true);
            }
        }
        for _ in 0..timer_steps {
            pair.advance(Duration::from_millis(700));
            pair.take(true);
        }
        let _ = pair.a.poll_at();
        prop_assert!(pair.now >= Instant(0));
    }
}

#[test]
fn out_of_order_fragments_are_bounded() {
    for consume in [false, true] {
        let cfg = Config {
            max_ooo_ranges: 8,
            ..config()
        };
        let mut pair = Pair::connected(cfg, config());
        pair.a_rx.consume = consume;
        let next = b_next(&mut pair);
        let ack = a_next(&pair);
        // One octet every other position: each would be a separate range.
        for i in 0..100u32 {
            inject(
                &mut pair,
                &forged(TcpControl::None, next + 2 + 2 * i, Some(ack), b"z"),
            );
        }
        let offered = pair.a_rx.offered.len() - 1;
        if consume {
            assert_eq!(
                offered, 8,
                "placed data beyond the range limit is not offered"
            );
        } else {
            // The unread "x" holds one of the eight runs of the buffer.
            assert_eq!(pair.a.stats().declined_dropped, 93);
        }
        // The real data still arrives.
        pair.b.send(b"y");
        pair.settle(Duration::from_millis(10));
        assert_eq!(pair.a_rx.left_edges.last(), Some(&2));
        let blocks = pair
            .log
            .iter()
            .rev()
            .find(|w| w.from_a)
            .unwrap()
            .repr()
            .sack_ranges;
        assert!(
            blocks.iter().flatten().count() == 3,
            "SACK blocks report the fragments"
        );
    }
}
