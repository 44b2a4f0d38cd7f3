//! Out-of-order placement between two engines (RFC 5041 section 5.3, RFC
//! 5044 appendix A.3): one direction of the stream runs over a link that
//! reorders whole-FPDU segments, as an MPA-aware TCP sees them. What the
//! receiving engine cannot place early is held and handed over in order,
//! as TCP's reassembly buffer would.
//!
//! Every scenario is checked against the same work over an in-order link:
//! the same data in memory, the same completions in the same order, the
//! same events. Completions never come before the in-order stream reaches
//! their message, and with CRCs every aligned segment is placed early.

mod common;

use std::collections::BTreeMap;

use common::{pair, read_from, write_to, Region, Setup, Side, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::mpa::{FpduWriter, Rtr};
use uwarp_stack::rdmap::{CqKind, QpEvent};
use uwarp_stack::tcp::sim::SimRng;
use uwarp_stack::verbs::{RecvWr, SendOp, WcStatus};
use uwarp_stack::wire::rdmap::Opcode;
use uwarp_stack::wire::terminate::TermError;

/// Two engines past the responder's send fence: the initiator's Write RTR
/// has arrived in order, so the responder may place early (nothing is
/// placed before the peer's first FPDU).
fn started_pair(setup: Setup) -> (Side, Side) {
    let (mut a, mut b) = pair(Setup {
        rtr: Some(Rtr::Write),
        ..setup
    });
    common::pump(&mut a, &mut b);
    (a, b)
}

/// One direction of a stream over a link that reorders segments.
struct ReorderingLink {
    /// The stream offset of the next octet the sender makes.
    sent: u64,
    /// Segments the receiver could not place early, by stream offset.
    held: BTreeMap<u64, Vec<u8>>,
    /// Octets that went through `held`.
    held_octets: u64,
    /// Where the link started: the receiver's offset then.
    start: u64,
    /// Segments placed early before any octet arrived in order.
    placed_before_first: u64,
}

impl ReorderingLink {
    /// The link into `to`, whose stream has reached its current offset.
    fn new(to: &Side) -> Self {
        Self {
            sent: to.engine.rx_offset(),
            held: BTreeMap::new(),
            held_octets: 0,
            start: to.engine.rx_offset(),
            placed_before_first: 0,
        }
    }

    /// Everything `from` has to send, cut into segments of one to
    /// `max_fpdus` whole FPDUs: (stream offset, octets).
    fn segments(
        &mut self,
        from: &mut Side,
        max_fpdus: u64,
        rng: &mut SimRng,
    ) -> Vec<(u64, Vec<u8>)> {
        let mut segments = Vec::new();
        loop {
            let mut octets = Vec::new();
            for _ in 0..rng.between(1, max_fpdus) {
                if from.engine.poll_transmit(&mut octets, 1) == 0 {
                    break;
                }
            }
            if octets.is_empty() {
                return segments;
            }
            segments.push((self.sent, octets.clone()));
            self.sent += octets.len() as u64;
        }
    }

    /// One segment reaches `to`: in order, placed early, or held until
    /// the octets before it have arrived.
    fn arrive(&mut self, to: &mut Side, offset: u64, octets: Vec<u8>) {
        if offset == to.engine.rx_offset() {
            to.engine.on_bytes(&octets);
        } else if to.engine.place_out_of_order(offset, &octets) {
            if to.engine.rx_offset() == self.start {
                self.placed_before_first += 1;
            }
        } else {
            self.held_octets += octets.len() as u64;
            self.held.insert(offset, octets);
        }
        while let Some(octets) = self.held.remove(&to.engine.rx_offset()) {
            to.engine.on_bytes(&octets);
        }
    }
}

/// `segments` in an order where each may move up to `reach` places
/// earlier, like a link that reorders within a window.
fn reorder<T>(mut segments: Vec<T>, reach: u64, rng: &mut SimRng) -> Vec<T> {
    for i in (1..segments.len()).rev() {
        let j = i.saturating_sub(rng.below(reach + 1) as usize);
        segments.swap(i, j);
    }
    segments
}

/// What one run produced, for comparing runs.
#[derive(Debug, PartialEq)]
struct Outcome {
    sink: Vec<u8>,
    inbox: Vec<u8>,
    a: Vec<(CqKind, u64, WcStatus, u32)>,
    b: Vec<(CqKind, u64, WcStatus, u32)>,
    events_b: Vec<QpEvent>,
}

/// The work of one scenario: Writes into `sink`, Sends into `inbox`'s
/// receives, in a mix `seed` picks.
struct Scenario {
    sink: Region,
    inbox: Region,
    source: Region,
}

const SINK: usize = 256 << 10;
const MESSAGES: usize = 40;

impl Scenario {
    fn new(a: &Side, b: &Side) -> Self {
        let source = a.region(SINK, Access::LOCAL_WRITE);
        source.fill(3);
        Scenario {
            sink: b.region(SINK, REMOTE_ALL),
            inbox: b.region(MESSAGES * 8192, Access::LOCAL_WRITE),
            source,
        }
    }

    /// Posts the work: each message is a Write or a Send of up to 8 KiB.
    fn post(&self, a: &mut Side, b: &mut Side, seed: u64) {
        let mut rng = SimRng::new(seed);
        let mut sends = 0;
        for i in 0..MESSAGES {
            let len = rng.between(0, 8192) as usize;
            let at = rng.below((SINK - len) as u64) as usize;
            if rng.chance(0.5) {
                a.post(
                    i as u64,
                    write_to(&self.sink, at),
                    vec![self.source.sge(at, len)],
                );
            } else {
                b.post_recv(
                    1000 + sends,
                    vec![self.inbox.sge(sends as usize * 8192, 8192)],
                );
                a.post(i as u64, SendOp::Send, vec![self.source.sge(at, len)]);
                sends += 1;
            }
        }
    }

    fn outcome(&self, a: &mut Side, b: &mut Side) -> Outcome {
        a.collect();
        b.collect();
        let summary = |side: &mut Side| {
            side.completions
                .iter()
                .map(|(cq, wc)| (*cq, wc.wr_id, wc.status, wc.byte_len))
                .collect()
        };
        self.sink.assert_guards();
        self.inbox.assert_guards();
        Outcome {
            sink: self.sink.contents(),
            inbox: self.inbox.contents(),
            a: summary(a),
            b: summary(b),
            events_b: b.events.clone(),
        }
    }
}

/// The scenario over an in-order link.
fn in_order(setup: Setup, seed: u64) -> Outcome {
    let (mut a, mut b) = started_pair(setup);
    let scenario = Scenario::new(&a, &b);
    scenario.post(&mut a, &mut b, seed);
    common::pump(&mut a, &mut b);
    scenario.outcome(&mut a, &mut b)
}

/// The scenario over a reordering link; returns the outcome and the
/// octets held for in-order delivery.
fn reordered(setup: Setup, seed: u64, reach: u64) -> (Outcome, u64, Side) {
    let (a, b) = started_pair(setup);
    let (outcome, link, b) = over_reordering_link(a, b, seed, reach);
    (outcome, link.held_octets, b)
}

/// The scenario from the connection's start, the initiator's first FPDU
/// (its RTR, if any) among the segments the link reorders within
/// `reach`; returns the outcome and the link.
fn from_the_start(setup: Setup, seed: u64, reach: u64) -> (Outcome, ReorderingLink) {
    let (a, b) = pair(setup);
    let (outcome, link, _) = over_reordering_link(a, b, seed, reach);
    (outcome, link)
}

/// The work of `seed` from `a` to `b` over a link that reorders segments
/// within `reach`; the outcome, the link and the receiving side.
fn over_reordering_link(
    mut a: Side,
    mut b: Side,
    seed: u64,
    reach: u64,
) -> (Outcome, ReorderingLink, Side) {
    let scenario = Scenario::new(&a, &b);
    scenario.post(&mut a, &mut b, seed);
    let mut rng = SimRng::new(seed ^ 0x5eed);
    let mut link = ReorderingLink::new(&b);
    let segments = link.segments(&mut a, 3, &mut rng);
    for (offset, octets) in reorder(segments, reach, &mut rng) {
        link.arrive(&mut b, offset, octets);
    }
    assert!(link.held.is_empty(), "everything was handed over");
    common::pump(&mut a, &mut b);
    (scenario.outcome(&mut a, &mut b), link, b)
}

/// What follows the initiator's first FPDU is placed even when it comes
/// first, unless that first FPDU is a Send RTR: until the RTR has taken
/// its MSN, which receive a Send fills is not known, and the segment
/// waits for it.
#[test]
fn placement_starts_before_the_first_fpdu_unless_a_send_rtr_is_awaited() {
    for rtr in [None, Some(Rtr::Write), Some(Rtr::Read), Some(Rtr::Send)] {
        let setup = Setup {
            rtr,
            ..Setup::default()
        };
        let (mut before_first, mut held) = (0, 0);
        for seed in 0..10 {
            let (expected, _) = from_the_start(setup, seed, 0);
            let (got, link) = from_the_start(setup, seed, 6);
            assert_eq!(got, expected, "{rtr:?} seed {seed}");
            before_first += link.placed_before_first;
            held += link.held_octets;
        }
        if rtr == Some(Rtr::Send) {
            assert_eq!(before_first, 0);
            assert!(held > 0, "some segment came before the RTR");
        } else {
            assert!(before_first > 0, "{rtr:?}");
            assert_eq!(held, 0, "{rtr:?}: aligned FPDUs never wait");
        }
    }
}

#[test]
fn with_crcs_every_reordered_segment_is_placed_early_and_nothing_is_held() {
    for seed in 0..20 {
        let expected = in_order(Setup::default(), seed);
        let (got, held, b) = reordered(Setup::default(), seed, 6);
        assert_eq!(got, expected, "seed {seed}");
        assert_eq!(held, 0, "seed {seed}: aligned FPDUs never wait in a buffer");
        let counters = b.engine.counters();
        assert!(counters.fpdus_placed_out_of_order > 0, "seed {seed}");
        assert_eq!(counters.crc_errors + counters.terminates_sent, 0);
    }
}

#[test]
fn without_crcs_or_with_markers_reordered_segments_wait_in_order() {
    let setups = [
        Setup {
            crc: false,
            ..Setup::default()
        },
        Setup {
            markers_ab: true,
            ..Setup::default()
        },
    ];
    for setup in setups {
        for seed in 0..5 {
            let expected = in_order(setup, seed);
            let (got, held, b) = reordered(setup, seed, 6);
            assert_eq!(got, expected, "{setup:?} seed {seed}");
            assert!(held > 0, "{setup:?} seed {seed}");
            assert_eq!(b.engine.counters().fpdus_placed_out_of_order, 0);
        }
    }
}

/// Sends placed early complete only once the in-order stream reaches
/// them, and then in MSN order.
#[test]
fn completions_wait_for_the_in_order_stream() {
    let (mut a, mut b) = started_pair(Setup::default());
    let source = a.region(8192, Access::LOCAL_WRITE);
    source.fill(9);
    let inbox = b.region(4 * 8192, Access::LOCAL_WRITE);
    for i in 0..4u64 {
        b.post_recv(100 + i, vec![inbox.sge(i as usize * 8192, 8192)]);
        a.post(i, SendOp::Send, vec![source.sge(0, 3000 + i as usize)]);
    }
    let mut link = ReorderingLink::new(&b);
    let mut rng = SimRng::new(1);
    let mut segments = link.segments(&mut a, 1, &mut rng);
    let (first_offset, first) = segments.remove(0);
    for (offset, octets) in segments.into_iter().rev() {
        link.arrive(&mut b, offset, octets);
    }
    b.collect();
    assert!(b.completions.is_empty(), "nothing before the first FPDU");
    assert_eq!(
        &inbox.contents()[8192..8192 + 3001],
        &source.contents()[..3001]
    );
    link.arrive(&mut b, first_offset, first);
    b.collect();
    let order: Vec<_> = b
        .completions
        .iter()
        .map(|(_, wc)| (wc.wr_id, wc.byte_len))
        .collect();
    assert_eq!(order, [(100, 3000), (101, 3001), (102, 3002), (103, 3003)]);
    assert_eq!(link.held_octets, 0);
}

/// Read Responses placed early: the Read completes when all of its
/// response has arrived in order, and the data is whole.
#[test]
fn read_responses_are_placed_early_and_the_read_completes_in_order() {
    let (mut a, mut b) = pair(Setup::default());
    let exposed = b.region(64 << 10, REMOTE_ALL);
    exposed.fill(77);
    let sink = a.region(64 << 10, Access::LOCAL_WRITE);
    a.post(1, read_from(&exposed, 0), vec![sink.whole()]);
    common::deliver(&mut a, &mut b);
    let mut link = ReorderingLink::new(&a);
    let mut rng = SimRng::new(2);
    let segments = link.segments(&mut b, 2, &mut rng);
    assert!(segments.len() > 10);
    let mut reversed: Vec<_> = segments.into_iter().rev().collect();
    let first = reversed.pop().unwrap();
    for (offset, octets) in reversed {
        link.arrive(&mut a, offset, octets);
    }
    a.collect();
    assert!(a.completions.is_empty());
    link.arrive(&mut a, first.0, first.1);
    a.collect();
    assert_eq!(a.statuses(CqKind::Send), [(1, WcStatus::Success)]);
    assert_eq!(sink.contents(), exposed.contents());
    assert_eq!(link.held_octets, 0);
    sink.assert_guards();
}

/// A segment that cannot be placed early (a bad STag, a bad CRC, a
/// receive that is not posted) is held and answered in order, exactly
/// as it would have been without reordering.
#[test]
fn segments_that_cannot_be_placed_are_answered_in_order() {
    type Spoil = fn(&mut Vec<u8>);
    let spoilers: [(Spoil, TermError); 2] = [
        // The last octet of the CRC.
        (
            |octets| *octets.last_mut().unwrap() ^= 1,
            TermError::MpaCrcError,
        ),
        // The STag's key octet, CRC fixed up.
        (
            |octets| {
                octets[2 + 5] ^= 0x40;
                refresh_crc(octets);
            },
            TermError::DdpTaggedInvalidStag,
        ),
    ];
    for (spoil, error) in spoilers {
        let (mut a, mut b) = started_pair(Setup::default());
        let sink = b.region(16 << 10, REMOTE_ALL);
        let source = a.region(16 << 10, Access::LOCAL_WRITE);
        source.fill(5);
        a.post(1, write_to(&sink, 0), vec![source.whole()]);
        let mut link = ReorderingLink::new(&b);
        let mut rng = SimRng::new(3);
        let mut segments = link.segments(&mut a, 1, &mut rng);
        spoil(&mut segments[5].1);
        let (first_offset, first) = segments.remove(0);
        for (offset, octets) in segments {
            link.arrive(&mut b, offset, octets);
        }
        b.collect();
        assert!(b.events.is_empty(), "nothing is answered out of order");
        assert!(link.held_octets > 0);
        assert!(b.engine.counters().fpdus_placed_out_of_order > 0);
        link.arrive(&mut b, first_offset, first);
        b.collect();
        assert_eq!(b.events[0], QpEvent::TerminateSent(error), "{error:?}");
        sink.assert_guards();
    }
}

/// A Write placed early whose STag a Send with Invalidate earlier in the
/// stream invalidates: when the stream reaches the Write it is refused as
/// it would have been in order.
#[test]
fn a_write_behind_an_invalidate_fails_in_order_like_without_reordering() {
    let run = |reorder_it: bool| {
        let (mut a, mut b) = started_pair(Setup::default());
        let sink = b.region(8192, REMOTE_ALL);
        let inbox = b.region(64, Access::LOCAL_WRITE);
        let source = a.region(8192, Access::LOCAL_WRITE);
        source.fill(8);
        b.post_recv(7, vec![inbox.whole()]);
        a.post(
            1,
            SendOp::SendWithInvalidate {
                invalidate: sink.stag.raw(),
            },
            vec![source.sge(0, 8)],
        );
        a.post(2, write_to(&sink, 0), vec![source.sge(0, 1000)]);
        let mut link = ReorderingLink::new(&b);
        let mut rng = SimRng::new(4);
        let mut segments = link.segments(&mut a, 1, &mut rng);
        if reorder_it {
            segments.reverse();
        }
        for (offset, octets) in segments {
            link.arrive(&mut b, offset, octets);
        }
        b.collect();
        let early = b.engine.counters().fpdus_placed_out_of_order;
        (b.events.clone(), b.statuses(CqKind::Recv), early)
    };
    let (events, receives, early) = run(false);
    assert_eq!(
        events[0],
        QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag)
    );
    assert_eq!(early, 0);
    assert_eq!(
        run(true),
        (events, receives, 1),
        "the Write was placed early"
    );
}

/// A peer whose in-order octets claim an FPDU that runs over one placed
/// early: the early FPDU did not start at a boundary, and the stream ends
/// with a Terminate, nothing written outside the region.
#[test]
fn an_early_fpdu_inside_another_ends_the_stream() {
    let (mut a, mut b) = started_pair(Setup::default());
    let sink = b.region(4096, REMOTE_ALL);
    let source = a.region(4096, Access::LOCAL_WRITE);
    source.fill(1);
    a.post(1, write_to(&sink, 0), vec![source.sge(0, 100)]);
    let mut link = ReorderingLink::new(&b);
    let mut rng = SimRng::new(5);
    let segments = link.segments(&mut a, 1, &mut rng);
    let (_, write) = &segments[0];
    // The early FPDU sits 64 octets ahead; the in-order octets before it
    // announce a ULPDU of 200 octets, which would run past it.
    let start = b.engine.rx_offset();
    assert!(b.engine.place_out_of_order(start + 64, write));
    let mut bogus = vec![0u8; 64];
    bogus[..2].copy_from_slice(&200u16.to_be_bytes());
    b.engine.on_bytes(&bogus);
    b.collect();
    assert_eq!(
        b.events,
        [QpEvent::TerminateSent(TermError::MpaLocalCatastrophic)]
    );
    assert_eq!(b.engine.rx_offset(), start + 64 + write.len() as u64);
    sink.assert_guards();
}

#[test]
fn early_placement_is_refused_in_order_and_for_what_is_not_whole() {
    let (mut a, mut b) = pair(Setup::default());
    let sink = b.region(4096, REMOTE_ALL);
    let source = a.region(4096, Access::LOCAL_WRITE);
    a.post(1, write_to(&sink, 0), vec![source.sge(0, 10)]);
    let mut fpdu = Vec::new();
    assert!(a.engine.poll_transmit(&mut fpdu, 1) > 0);
    // In order is never out of order.
    assert!(!b.engine.place_out_of_order(0, &fpdu));
    // Ahead of the initiator's first FPDU it places (no Send RTR is
    // awaited); an FPDU must still be whole.
    assert!(b.engine.place_out_of_order(100, &fpdu));
    b.engine.on_bytes(&fpdu);
    assert!(!b.engine.place_out_of_order(300, &fpdu[..fpdu.len() - 1]));
    // A Read Request is kept whole for the in-order stream; a Terminate
    // waits in the LLP.
    let request = common::read_request(1, &Default::default());
    assert!(b.engine.place_out_of_order(400, &frame(&request)));
    let terminate = common::untagged(Opcode::Terminate, true, (2, 1, 0), 0, &[0; 4]);
    assert!(!b.engine.place_out_of_order(500, &frame(&terminate)));
}

/// `ulpdu` in one FPDU with a CRC.
fn frame(ulpdu: &[u8]) -> Vec<u8> {
    let mut framed = Vec::new();
    FpduWriter::new(true, false)
        .write(&[ulpdu], &mut framed)
        .unwrap();
    framed
}

/// Recomputes the CRC of the one FPDU in `octets` after its ULPDU changed.
fn refresh_crc(octets: &mut [u8]) {
    let ulpdu_len = usize::from(u16::from_be_bytes([octets[0], octets[1]]));
    let framed = frame(&octets[2..2 + ulpdu_len]);
    octets.copy_from_slice(&framed);
}

/// A receive that is not posted yet when its Send arrives early: held,
/// then placed in order once the stream reaches it.
#[test]
fn a_send_without_a_posted_receive_is_held() {
    let (mut a, mut b) = started_pair(Setup::default());
    let source = a.region(100, Access::LOCAL_WRITE);
    source.fill(4);
    let inbox = b.region(200, Access::LOCAL_WRITE);
    b.post_recv(1, vec![inbox.sge(0, 100)]);
    a.post(1, SendOp::Send, vec![source.sge(0, 100)]);
    a.post(2, SendOp::Send, vec![source.sge(0, 50)]);
    let mut link = ReorderingLink::new(&b);
    let mut rng = SimRng::new(6);
    let mut segments = link.segments(&mut a, 1, &mut rng);
    let second = segments.pop().unwrap();
    link.arrive(&mut b, second.0, second.1);
    assert!(link.held_octets > 0, "no receive for MSN 2 yet");
    b.engine.post_recv(RecvWr {
        wr_id: 2,
        sgl: vec![inbox.sge(100, 100)],
    });
    let first = segments.pop().unwrap();
    link.arrive(&mut b, first.0, first.1);
    b.collect();
    assert_eq!(
        b.statuses(CqKind::Recv),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(&inbox.contents()[100..150], &source.contents()[..50]);
}
