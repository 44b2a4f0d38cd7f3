//! Random traffic between two engines: random sequences of Sends (plain,
//! solicited, with Invalidate, inline), RDMA Writes and RDMA Reads of
//! random sizes, in both directions, signaled or not, fenced or not, over
//! random MULPDUs, CRC and Markers settings, peer-to-peer RTRs, ORDs,
//! transmit budgets and splits of the byte stream. Every operation must
//! complete with the right data in its place, completions must come in
//! posting order, and nothing may be written outside the regions.

mod common;

use common::{pair, read_from, write_at, write_to, Region, Setup, Side, REMOTE_ALL};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use uwarp_stack::mem::Access;
use uwarp_stack::mpa::Rtr;
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::verbs::{Payload, SendOp, SendWr, WcOpcode, WcStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Send,
    SendSolicited,
    SendInvalidate,
    InlineSend,
    Write,
    InlineWrite,
    Read,
}

#[derive(Debug, Clone)]
struct Op {
    kind: Kind,
    len: usize,
    /// Posted by the initiator (else by the responder).
    from_initiator: bool,
    signaled: bool,
    fence: bool,
}

#[derive(Debug, Clone)]
struct Traffic {
    setup: Setup,
    budget: usize,
    piece: usize,
    ops: Vec<Op>,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Send),
        Just(Kind::SendSolicited),
        Just(Kind::SendInvalidate),
        Just(Kind::InlineSend),
        Just(Kind::Write),
        Just(Kind::InlineWrite),
        Just(Kind::Read),
    ]
}

/// Sizes biased towards the small and the segment boundaries.
fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0usize..64,
        3 => 0usize..3000,
        1 => 3000usize..40_000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    (kind(), len(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(kind, len, from_initiator, signaled, fence)| Op {
            kind,
            len,
            from_initiator,
            signaled,
            fence,
        },
    )
}

fn traffic() -> impl Strategy<Value = Traffic> {
    let rtr = prop_oneof![
        Just(None),
        Just(Some(Rtr::Write)),
        Just(Some(Rtr::Send)),
        Just(Some(Rtr::Read)),
    ];
    let mulpdu = prop_oneof![70usize..200, 200usize..9000, Just(65_535)];
    (
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            mulpdu,
            1u16..8,
            rtr,
        ),
        prop_oneof![Just(1usize), 1usize..5000, Just(1 << 20)],
        prop_oneof![Just(usize::MAX), 1usize..2000],
        proptest::collection::vec(op(), 1..12),
    )
        .prop_map(
            |((crc, markers_ab, markers_ba, mulpdu, ird_ord, rtr), budget, piece, ops)| Traffic {
                setup: Setup {
                    crc,
                    markers_ab,
                    markers_ba,
                    mulpdu,
                    ird_ord,
                    rtr,
                },
                budget,
                piece,
                ops,
            },
        )
}

/// What one operation left to check.
struct Posted {
    op: Op,
    wr_id: u64,
    data: Vec<u8>,
    /// Where the data must end up.
    sink: Region,
    /// The region a Send with Invalidate invalidates.
    victim: Option<Region>,
}

/// Moves octets both ways in pieces of at most `piece`, `budget` octets a
/// turn, until both ends are quiet.
fn pump(a: &mut Side, b: &mut Side, budget: usize, piece: usize) {
    fn turn(from: &mut Side, to: &mut Side, budget: usize, piece: usize) -> usize {
        let mut out = Vec::new();
        let moved = from.transmit(&mut out, budget);
        for chunk in out.chunks(piece) {
            to.engine.on_bytes(chunk);
        }
        moved
    }
    loop {
        let moved = turn(a, b, budget, piece) + turn(b, a, budget, piece);
        a.collect();
        b.collect();
        if moved == 0 {
            break;
        }
    }
}

fn run(traffic: Traffic) {
    let (mut a, mut b) = pair(traffic.setup);
    let mut posted = Vec::new();
    if traffic.setup.rtr.is_none() {
        // The responder sends nothing before the initiator's first FPDU.
        let kick = SendWr {
            signaled: false,
            ..SendWr::new(u64::MAX, write_at(0, 1), Payload::Inline(vec![]))
        };
        a.engine.post_send(kick);
    }
    for (i, op) in traffic.ops.iter().enumerate() {
        let (from, to) = if op.from_initiator {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        posted.push(post(from, to, op.clone(), i as u64));
    }
    pump(&mut a, &mut b, traffic.budget, traffic.piece);

    for side in [&a, &b] {
        assert!(side.events.is_empty(), "{:?}", side.events);
    }
    for p in &posted {
        assert!(
            p.sink.contents() == p.data,
            "{:?} of {} octets: data differs",
            p.op.kind,
            p.op.len
        );
        p.sink.assert_guards();
        if let Some(victim) = &p.victim {
            assert!(!a.table.info(victim.stag).unwrap().valid);
        }
    }
    for (side, initiator) in [(&mut a, true), (&mut b, false)] {
        let sent = side.outcomes(CqKind::Send);
        let expected: Vec<_> = posted
            .iter()
            .filter(|p| p.op.from_initiator == initiator && p.op.signaled)
            .map(|p| (p.wr_id, opcode(p.op.kind), WcStatus::Success))
            .collect();
        assert_eq!(sent, expected);
        let received: Vec<_> = side
            .take(CqKind::Recv)
            .iter()
            .map(|w| {
                (
                    w.wr_id,
                    w.status,
                    w.byte_len,
                    w.solicited,
                    w.invalidated_rkey,
                )
            })
            .collect();
        let expected: Vec<_> = posted
            .iter()
            .filter(|p| p.op.from_initiator != initiator && is_send(p.op.kind))
            .map(|p| {
                (
                    p.wr_id,
                    WcStatus::Success,
                    p.op.len as u32,
                    p.op.kind == Kind::SendSolicited,
                    p.victim.as_ref().map(|v| v.stag.raw()),
                )
            })
            .collect();
        assert_eq!(received, expected);
    }
}

fn is_send(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Send | Kind::SendSolicited | Kind::SendInvalidate | Kind::InlineSend
    )
}

fn opcode(kind: Kind) -> WcOpcode {
    match kind {
        Kind::Write | Kind::InlineWrite => WcOpcode::Write,
        Kind::Read => WcOpcode::Read,
        _ => WcOpcode::Send,
    }
}

/// Registers the regions `op` needs, posts the receive its Send needs on
/// `to`, and posts the work request on `from`.
fn post(from: &mut Side, to: &mut Side, op: Op, wr_id: u64) -> Posted {
    let len = op.len;
    let (source, sink) = match op.kind {
        Kind::Read => (
            to.region(len, Access::REMOTE_READ),
            from.region(len, Access::LOCAL_WRITE),
        ),
        Kind::Write | Kind::InlineWrite => {
            (from.region(len, Access::NONE), to.region(len, REMOTE_ALL))
        }
        _ => (
            from.region(len, Access::NONE),
            to.region(len, Access::LOCAL_WRITE),
        ),
    };
    let data = source.fill(wr_id as u8);
    let victim = (op.kind == Kind::SendInvalidate).then(|| to.region(8, REMOTE_ALL));
    let send_op = match op.kind {
        Kind::Send | Kind::SendSolicited | Kind::InlineSend => SendOp::Send,
        Kind::SendInvalidate => SendOp::SendWithInvalidate {
            invalidate: victim.as_ref().unwrap().stag.raw(),
        },
        Kind::Write | Kind::InlineWrite => write_to(&sink, 0),
        Kind::Read => read_from(&source, 0),
    };
    if is_send(op.kind) {
        to.post_recv(wr_id, vec![sink.whole()]);
    }
    let payload = match op.kind {
        Kind::InlineSend | Kind::InlineWrite => Payload::Inline(data.clone()),
        Kind::Read => Payload::Sgl(vec![sink.whole()]),
        _ => Payload::Sgl(vec![source.whole()]),
    };
    from.engine.post_send(SendWr {
        signaled: op.signaled,
        solicited: op.kind == Kind::SendSolicited,
        fence: op.fence,
        ..SendWr::new(wr_id, send_op, payload)
    });
    Posted {
        op,
        wr_id,
        data,
        sink,
        victim,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn random_traffic_arrives_intact(traffic in traffic()) {
        run(traffic);
    }
}
