//! Reordering tolerance (issue 6) on the simulator: a bulk transfer over a
//! link that displaces 1 % of the segments by 1 to 3 positions, as the
//! dataplane's impairment stage does, with each side answering every
//! segment at once; and a receive burst taken in before answering, as a
//! dataplane core does, which must not turn reordering into duplicate
//! ACKs. The sender learns how deep
//! the reordering goes from the holes its cumulative ACKs fill and from
//! D-SACKs (RFC 2883) reporting its retransmissions as duplicates; the few
//! fast recoveries it makes before that are undone (RFC 3708, RFC 4015).
//! Real loss on the same link is still repaired by fast retransmit.
//!
//! Everything runs in virtual time: what is asserted is counted, not
//! timed on this machine.

mod tcp_common;

use tcp_common::{bulk, config, no_nagle, played, reassembled, stream, through, Pair, Wire};
use uwarp_stack::tcp::sim::LinkConfig;
use uwarp_stack::tcp::{CongestionControl, Duration, Seq};

/// Spurious fast retransmits a connection may make over the displacing
/// link before it no longer takes reordering for loss. Each one teaches
/// the sender a deeper displacement: 3, then 4 or 5 when two displaced
/// segments overlap (a few percent of them), so a handful at most.
const MAX_SPURIOUS: u64 = 6;

fn displaced() -> LinkConfig {
    LinkConfig {
        displace: 0.01,
        ..LinkConfig::default()
    }
}

const ALGORITHMS: [CongestionControl; 2] = [CongestionControl::NewReno, CongestionControl::Cubic];

#[test]
fn displacement_is_learned_and_the_recoveries_it_caused_undone() {
    for congestion in ALGORITHMS {
        for seed in 0..4 {
            let clean = played(&bulk(seed, congestion, LinkConfig::default()));
            let report = played(&bulk(seed, congestion, displaced()));
            let (client, server) = (report.client, report.server);
            let context = format!("{congestion:?} seed {seed}: {report:?}");
            assert!(client.retransmissions <= MAX_SPURIOUS, "{context}");
            assert_eq!(client.timeouts, 0, "{context}");
            // Every retransmission arrived as a duplicate and was reported.
            assert_eq!(server.dsacks_sent, client.retransmissions, "{context}");
            // Every window cut was undone, unless the ACK carrying its
            // D-SACK was itself displaced behind newer ones and dropped by
            // PAWS (RFC 7323 section 5.3: its timestamp was older).
            let kept = client.fast_recoveries - client.spurious_recoveries;
            assert!(kept <= client.paws_rejected, "{context}");
            assert!(report.reordering[0] >= 4, "{context}");
            // The transfer takes as long as over the clean link, within 1 %.
            let (slow, fast) = (report.elapsed.micros(), clean.elapsed.micros());
            assert!(
                slow * 100 <= fast * 101,
                "{slow} us against {fast} us: {context}"
            );
        }
    }
}

#[test]
fn real_loss_is_still_repaired_by_fast_retransmit() {
    let lossy = LinkConfig {
        loss: 0.01,
        ..LinkConfig::default()
    };
    let displaced_and_lossy = LinkConfig {
        loss: 0.01,
        ..displaced()
    };
    for congestion in ALGORITHMS {
        let mut timeouts = [0; 2];
        for seed in 0..4 {
            for (i, link) in [&lossy, &displaced_and_lossy].into_iter().enumerate() {
                let report = played(&bulk(seed, congestion, link.clone()));
                let client = report.client;
                let context = format!("{congestion:?} seed {seed} {link:?}: {report:?}");
                // About 1 % of 14 000 segments lost, most repaired by fast
                // retransmit; a lost retransmission or tail needs the timer.
                let repaired = client.fast_recoveries - client.spurious_recoveries;
                assert!(repaired >= 100, "{context}");
                assert!(client.timeouts * 10 <= repaired, "{context}");
                timeouts[i] += client.timeouts;
            }
        }
        // The learned threshold leaves no more losses to the timer.
        let [plain, reordered] = timeouts;
        assert!(
            reordered <= plain + plain / 2 + 2,
            "{congestion:?}: {timeouts:?}"
        );
    }
}

#[test]
fn without_sack_nothing_is_learned_and_data_still_arrives() {
    let mut scenario = bulk(0, CongestionControl::NewReno, displaced());
    scenario.client.sack = false;
    scenario.client_bytes = 2_000_000;
    let report = played(&scenario);
    assert!(report.client.fast_recoveries > 0, "{report:?}");
    assert_eq!(report.client.spurious_recoveries, 0);
    assert_eq!(report.server.dsacks_sent, 0);
    assert_eq!(report.reordering, [3, 3]);
}

/// Short transfers of 60 000 octets on a link that displaces 5 % of the
/// segments and loses 3 %: the last segments of a transfer are now and
/// then lost with nothing after them to draw SACKs, after the sender
/// learned the path reorders. Tail loss probes (RFC 8985 section 7)
/// repair such tails without the retransmission timer; the same seeds
/// without probes wait for it.
#[test]
fn tail_losses_on_a_reordering_path_are_probed_not_timed_out() {
    let short = |seed: u64, probes: bool| {
        let lossy = LinkConfig {
            loss: 0.03,
            displace: 0.05,
            ..LinkConfig::default()
        };
        let mut scenario = bulk(seed, CongestionControl::NewReno, lossy);
        scenario.client_bytes = 60_000;
        scenario.client.tail_loss_probes = probes;
        played(&scenario)
    };
    let (mut timeouts, mut probes, mut rescued) = ([0; 2], 0, 0);
    for seed in 0..200 {
        let without = short(seed, false);
        let with = short(seed, true);
        assert_eq!(without.client.tail_loss_probes, 0);
        timeouts[0] += without.client.timeouts;
        timeouts[1] += with.client.timeouts;
        probes += with.client.tail_loss_probes;
        // A run the probe spared a timeout. (Whether the sender had
        // learned a higher threshold by then is not asked: the one such
        // run in these seeds had its probe go first only because stale
        // timestamp echoes had inflated the RTO, issue 6.)
        if with.client.tail_loss_probes > 0 && with.client.timeouts < without.client.timeouts {
            rescued += 1;
        }
    }
    let context = format!(
        "timeouts without and with probes {timeouts:?}, {probes} probes, \
         {rescued} runs spared a timeout"
    );
    eprintln!("{context}");
    assert!(rescued > 0, "{context}");
    assert!(timeouts[1] < timeouts[0], "{context}");
}

/// A connection from A that has sent ten segments of a stream, not yet
/// delivered: the pair, the stream and the segments.
fn ten_segments() -> (Pair, Vec<u8>, Vec<Wire>) {
    let mut pair = Pair::connected(no_nagle(), config());
    let data = stream(10 * pair.a.emss());
    pair.a.send(&data);
    let flight = pair.take(true);
    assert_eq!(flight.len(), 10);
    (pair, data, flight)
}

/// Runs `pair` until idle; everything was acknowledged and B has `data`.
fn settled_intact(pair: &mut Pair, data: &[u8]) {
    pair.settle(Duration::from_millis(10));
    assert_eq!(pair.a.send_queue_len(), 0, "everything acknowledged");
    assert_eq!(reassembled(&pair.b_rx), data);
}

/// A receive burst, as a dataplane core takes one in before answering:
/// segments 1 to 3 of a flight, then segment 0 they overtook, then 5 and
/// 6, then 4 they overtook, then 7. The duplicate ACKs segments 1-3 and
/// 5-6 owed were for holes filled later in the burst; sent after it, at
/// the new cumulative ACK, they would be duplicates of data that arrived
/// in order (RFC 5681 section 4.2 owes one immediate ACK for the segment
/// filling a gap), and the sender, taking in five identical ACKs, would
/// fast-retransmit segment 8, never lost. Regression (issue 6): hundreds of spurious recoveries per
/// run since the dataplane services each flow once per burst.
#[test]
fn a_hole_filled_within_a_receive_burst_owes_no_duplicate_acks() {
    let (mut pair, data, flight) = ten_segments();
    for i in [1, 2, 3, 0, 5, 6, 4, 7] {
        pair.deliver(&flight[i]);
    }
    let answers = pair.take(false);
    let end = Seq::from(flight[8].repr().seq_number);
    let acks: Vec<Seq> = answers
        .iter()
        .map(|w| Seq::from(w.repr().ack_number.unwrap()))
        .collect();
    assert_eq!(acks, vec![end], "one cumulative ACK, no stale duplicates");
    for answer in &answers {
        pair.deliver(answer);
    }
    let resent = pair.take(true);
    assert_eq!(pair.a.stats().fast_recoveries, 0);
    assert_eq!(pair.a.stats().retransmissions, 0);
    for wire in flight[8..].iter().chain(&resent) {
        pair.deliver(wire);
    }
    settled_intact(&mut pair, &data);
    assert_eq!(pair.a.stats().retransmissions, 0);
}

/// A burst of ACKs, as a dataplane core takes one in before sending:
/// three duplicate ACKs SACKing segments 1 to 3 start a fast recovery,
/// and the next ACK of the same burst acknowledges segment 0, which they
/// overtook, before its retransmission could go out. Nothing is ever
/// resent: when the recovery ends every original has arrived, and its
/// window cut is undone as a spurious recovery's (RFC 4015 section 3.2),
/// with the displacement learned.
#[test]
fn a_recovery_whose_hole_arrives_before_it_resends_anything_is_undone() {
    let (mut pair, data, flight) = ten_segments();
    let ssthresh = pair.a.ssthresh();
    let mut acks = Vec::new();
    for i in [1, 2, 3, 0] {
        pair.deliver(&flight[i]);
        acks.extend(pair.take(false));
    }
    for ack in &acks {
        pair.deliver(ack);
    }
    assert_eq!(pair.a.stats().fast_recoveries, 1);
    assert!(pair.a.ssthresh() < ssthresh, "the window was cut");
    assert_eq!(pair.a.reordering(), 4, "the displacement was measured");
    let mut pending: Vec<_> = flight[4..].to_vec();
    pending.extend(pair.take(true));
    while !pending.is_empty() {
        let wire = pending.remove(0);
        pending.extend(through(&mut pair, &wire));
    }
    settled_intact(&mut pair, &data);
    let stats = pair.a.stats();
    assert_eq!((stats.retransmissions, stats.spurious_recoveries), (0, 1));
    assert_eq!(pair.a.ssthresh(), ssthresh, "the cut was undone");
}
