//! The send and receive queues (RFC 5040 sections 5 and 6, RDMAC verbs):
//! scatter/gather lists on both sides, inline data, unsignaled work
//! requests, the fence, the ORD limit on RDMA Reads, completion order, and
//! shared receive queues.

mod common;

use std::sync::Arc;

use common::{
    opcodes, pair, pump, read_from, summary, wr, write_to, Region, Setup, Side, REMOTE_ALL,
};
use uwarp_stack::mem::{Access, ProtectionDomains, Stag, StagTable};
use uwarp_stack::rdmap::{CqKind, QpEvent, Role, SharedReceiveQueue};
use uwarp_stack::verbs::{Payload, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use uwarp_stack::wire::rdmap::Opcode;
use uwarp_stack::wire::terminate::TermError;

/// Concatenates what `sgl` names in the regions it points into.
fn gathered(regions: &[&Region], sgl: &[Sge]) -> Vec<u8> {
    let mut out = Vec::new();
    for sge in sgl {
        let region = regions.iter().find(|r| r.stag == sge.lkey).unwrap();
        let at = (sge.addr - region.to) as usize;
        out.extend_from_slice(&region.contents()[at..at + sge.length as usize]);
    }
    out
}

#[test]
fn scatter_gather_lists_on_both_sides() {
    // A small MULPDU, so that segment boundaries fall inside elements.
    let (mut a, mut b) = pair(Setup {
        mulpdu: 97,
        ..Setup::default()
    });
    let src1 = a.region(2000, Access::NONE);
    let src2 = a.region(1500, Access::NONE);
    src1.fill(1);
    src2.fill(2);
    let gather = vec![
        src1.sge(3, 7),
        src2.sge(101, 1000),
        src1.sge(500, 333),
        src2.sge(0, 1),
        src1.sge(1999, 1),
    ];
    let message = gathered(&[&src1, &src2], &gather);
    assert_eq!(message.len(), 1342);
    let dst1 = b.region(1000, Access::LOCAL_WRITE);
    let dst2 = b.region(1000, Access::LOCAL_WRITE);
    // 1343 octets of room in five elements over two regions.
    let scatter = vec![
        dst1.sge(1, 5),
        dst2.sge(999, 1),
        dst1.sge(17, 700),
        dst2.sge(3, 600),
        dst1.sge(900, 37),
    ];
    b.post_recv(1, scatter.clone());
    a.post(2, SendOp::Send, gather.clone());
    pump(&mut a, &mut b);
    let recv = b.take(CqKind::Recv);
    assert_eq!(
        summary(&recv[0]),
        (1, WcOpcode::Recv, WcStatus::Success, 1342)
    );
    let mut expected = message.clone();
    expected.push(0); // the last octet of room stays unwritten
    assert_eq!(gathered(&[&dst1, &dst2], &scatter), expected);
    // Octets of the regions outside the scatter list were not written.
    let touched: usize = scatter.iter().map(|s| s.length as usize).sum();
    let nonzero = dst1
        .contents()
        .iter()
        .chain(&dst2.contents())
        .filter(|&&x| x != 0)
        .count();
    assert!(nonzero <= touched);
    let mut zeroed = dst1.contents();
    for s in &scatter {
        if s.lkey == dst1.stag {
            let at = (s.addr - dst1.to) as usize;
            zeroed[at..at + s.length as usize].fill(0);
        }
    }
    assert!(zeroed.iter().all(|&x| x == 0));
    for r in [&src1, &src2, &dst1, &dst2] {
        r.assert_guards();
    }

    // The same gather list as an RDMA Write into the middle of a region,
    // and an RDMA Read of it back into an offset of a local region.
    let target = b.region(4000, REMOTE_ALL);
    a.post(3, write_to(&target, 1234), gather);
    let sink = a.region(3000, Access::LOCAL_WRITE);
    a.engine.post_send(SendWr {
        fence: true,
        ..wr(4, read_from(&target, 1234), vec![sink.sge(77, 1342)])
    });
    pump(&mut a, &mut b);
    assert_eq!(&target.contents()[1234..1234 + 1342], &message[..]);
    assert_eq!(&sink.contents()[77..77 + 1342], &message[..]);
    assert!(sink.contents()[..77].iter().all(|&x| x == 0));
    assert!(sink.contents()[77 + 1342..].iter().all(|&x| x == 0));
    let done: Vec<_> = a.take(CqKind::Send).iter().map(summary).collect();
    assert_eq!(
        done,
        [
            (2, WcOpcode::Send, WcStatus::Success, 1342),
            (3, WcOpcode::Write, WcStatus::Success, 1342),
            (4, WcOpcode::Read, WcStatus::Success, 1342),
        ]
    );
    target.assert_guards();
    sink.assert_guards();
}

#[test]
fn a_read_into_two_sink_elements_is_refused_locally() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(100, REMOTE_ALL);
    let sink = a.region(100, Access::LOCAL_WRITE);
    a.post(
        1,
        read_from(&remote, 0),
        vec![sink.sge(0, 50), sink.sge(50, 50)],
    );
    a.post(2, SendOp::Send, vec![]);
    pump(&mut a, &mut b);
    let done = a.statuses(CqKind::Send);
    assert_eq!(
        done,
        [
            (1, WcStatus::LocalQpOperationError),
            (2, WcStatus::WrFlushError)
        ]
    );
    assert!(sink.contents().iter().all(|&x| x == 0));
}

#[test]
fn inline_sends_and_writes() {
    let (mut a, mut b) = pair(Setup {
        mulpdu: 300,
        ..Setup::default()
    });
    let dst = b.region(5000, Access::LOCAL_WRITE);
    let target = b.region(5000, REMOTE_ALL);
    for (i, len) in [0usize, 1, 282, 283, 3000].into_iter().enumerate() {
        let data = common::pattern(len, i as u8);
        b.post_recv(i as u64, vec![dst.whole()]);
        let mut inline = data.clone();
        a.engine.post_send(SendWr::new(
            100 + i as u64,
            SendOp::Send,
            Payload::Inline(inline.clone()),
        ));
        // The caller's copy is its own again at once.
        inline.fill(0xEE);
        a.engine.post_send(SendWr::new(
            200 + i as u64,
            write_to(&target, 7),
            Payload::Inline(data.clone()),
        ));
        pump(&mut a, &mut b);
        assert_eq!(&dst.contents()[..len], &data[..]);
        assert_eq!(&target.contents()[7..7 + len], &data[..]);
        let recv = b.take(CqKind::Recv);
        assert_eq!(
            summary(&recv[0]),
            (i as u64, WcOpcode::Recv, WcStatus::Success, len as u32)
        );
        let sent = a.statuses(CqKind::Send);
        assert_eq!(
            sent,
            [
                (100 + i as u64, WcStatus::Success),
                (200 + i as u64, WcStatus::Success)
            ]
        );
    }
    dst.assert_guards();
    target.assert_guards();
}

#[test]
fn unsignaled_requests_complete_silently_but_in_order() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(4096, REMOTE_ALL);
    let data = remote.fill(5);
    let sink = a.region(4096, Access::LOCAL_WRITE);
    let src = a.region(100, Access::NONE);
    src.fill(6);
    // An unsignaled Read, then a signaled Write.
    a.engine.post_send(SendWr {
        signaled: false,
        ..wr(1, read_from(&remote, 0), vec![sink.sge(0, 3000)])
    });
    a.engine
        .post_send(wr(2, write_to(&remote, 3000), vec![src.whole()]));
    // Everything a has to send goes out, nothing comes back yet.
    let mut out = Vec::new();
    a.transmit(&mut out, 1 << 20);
    a.collect();
    assert!(
        a.completions.is_empty(),
        "the Write waits for the Read before it"
    );
    b.engine.on_bytes(&out);
    pump(&mut a, &mut b);
    assert!(sink.contents()[..3000] == data[..3000]);
    assert!(remote.contents()[3000..3100] == src.contents()[..]);
    let sent: Vec<_> = a.take(CqKind::Send).iter().map(summary).collect();
    assert_eq!(sent, [(2, WcOpcode::Write, WcStatus::Success, 100)]);

    // Only the signaled ones of a run of unsignaled Sends, Writes and Reads.
    let dst = b.region(64, Access::LOCAL_WRITE);
    for id in 10..20u64 {
        let signaled = id % 3 == 0;
        let op = match id % 3 {
            0 => SendOp::Send,
            1 => write_to(&remote, 0),
            _ => read_from(&remote, 0),
        };
        if id % 3 == 0 {
            b.post_recv(id, vec![dst.whole()]);
        }
        let sgl = if id % 3 == 2 {
            vec![sink.sge(0, 64)]
        } else {
            vec![src.sge(0, 64)]
        };
        a.engine.post_send(SendWr {
            signaled,
            ..wr(id, op, sgl)
        });
    }
    pump(&mut a, &mut b);
    let sent: Vec<_> = a.take(CqKind::Send).iter().map(|w| w.wr_id).collect();
    assert_eq!(sent, [12, 15, 18]);
    assert_eq!(
        b.take(CqKind::Recv).len(),
        3,
        "receives are always signaled"
    );
}

#[test]
fn an_unsignaled_request_that_fails_still_completes() {
    let (mut a, mut b) = pair(Setup::default());
    let dst = b.region(64, Access::LOCAL_WRITE);
    b.post_recv(1, vec![dst.whole()]);
    let bad = Sge {
        addr: 0,
        length: 10,
        lkey: Stag(0x00ab_cd07),
    };
    a.engine.post_send(SendWr {
        signaled: false,
        ..wr(1, SendOp::Send, vec![bad])
    });
    a.engine.post_send(SendWr {
        signaled: false,
        ..wr(2, SendOp::Send, vec![])
    });
    pump(&mut a, &mut b);
    let sent = a.statuses(CqKind::Send);
    assert_eq!(
        sent,
        [
            (1, WcStatus::LocalProtectionError),
            (2, WcStatus::WrFlushError)
        ]
    );
    assert!(dst.contents().iter().all(|&x| x == 0));
}

#[test]
fn the_fence_holds_a_send_until_earlier_reads_complete() {
    for fence in [false, true] {
        let (mut a, mut b) = pair(Setup::default());
        a.record();
        let remote = b.region(5000, REMOTE_ALL);
        remote.fill(1);
        let sink = a.region(5000, Access::LOCAL_WRITE);
        let dst = b.region(16, Access::LOCAL_WRITE);
        b.post_recv(1, vec![dst.whole()]);
        a.post(1, read_from(&remote, 0), vec![sink.whole()]);
        a.engine.post_send(SendWr {
            fence,
            ..SendWr::new(2, SendOp::Send, Payload::Inline(b"fenced".to_vec()))
        });
        // Turn 1: a sends what it may.
        let mut out = Vec::new();
        a.transmit(&mut out, 1 << 20);
        let first = opcodes(&a.take_sent());
        if fence {
            assert_eq!(first, [Opcode::ReadRequest]);
        } else {
            assert_eq!(first, [Opcode::ReadRequest, Opcode::Send]);
        }
        // Turn 2: b answers; a sends the fenced Send only once the whole
        // response has arrived.
        b.engine.on_bytes(&out);
        let mut back = Vec::new();
        b.transmit(&mut back, 1 << 20);
        let (head, tail) = back.split_at(back.len() / 2);
        a.engine.on_bytes(head);
        let mut more = Vec::new();
        a.transmit(&mut more, 1 << 20);
        assert!(
            more.is_empty(),
            "nothing goes out while the Read is incomplete"
        );
        a.engine.on_bytes(tail);
        a.transmit(&mut more, 1 << 20);
        let second = opcodes(&a.take_sent());
        assert_eq!(second, if fence { vec![Opcode::Send] } else { vec![] });
        b.engine.on_bytes(&more);
        pump(&mut a, &mut b);
        assert_eq!(&dst.contents()[..6], b"fenced");
        let sent = a.statuses(CqKind::Send);
        assert_eq!(sent, [(1, WcStatus::Success), (2, WcStatus::Success)]);
    }
}

#[test]
fn reads_beyond_ord_wait_and_complete_in_order() {
    let ord = 2;
    let (mut a, mut b) = pair(Setup {
        ird_ord: ord,
        mulpdu: 512,
        ..Setup::default()
    });
    a.record();
    let remote = b.region(8000, REMOTE_ALL);
    let data = remote.fill(7);
    let sink = a.region(8000, Access::LOCAL_WRITE);
    let reads = 7usize;
    let chunk = 8000 / reads;
    for i in 0..reads {
        a.post(
            i as u64,
            read_from(&remote, i * chunk),
            vec![sink.sge(i * chunk, chunk)],
        );
    }
    // Step by step, small pieces: never more than ORD Reads in flight.
    let mut requests = 0usize;
    let mut done = Vec::new();
    for _ in 0..1000 {
        let mut ab = Vec::new();
        a.transmit(&mut ab, 600);
        requests += opcodes(&a.take_sent())
            .iter()
            .filter(|&&o| o == Opcode::ReadRequest)
            .count();
        done.extend(a.take(CqKind::Send).iter().map(|w| w.wr_id));
        assert!(requests - done.len() <= usize::from(ord), "ORD exceeded");
        b.engine.on_bytes(&ab);
        let mut ba = Vec::new();
        b.transmit(&mut ba, 600);
        a.engine.on_bytes(&ba);
        done.extend(a.take(CqKind::Send).iter().map(|w| w.wr_id));
        if ab.is_empty() && ba.is_empty() {
            break;
        }
    }
    assert_eq!(requests, reads);
    assert_eq!(done, (0..reads as u64).collect::<Vec<_>>());
    assert_eq!(&sink.contents()[..reads * chunk], &data[..reads * chunk]);
}

#[test]
fn completions_follow_the_send_queue_while_a_read_is_outstanding() {
    let (mut a, mut b) = pair(Setup::default());
    let remote = b.region(3000, REMOTE_ALL);
    let data = remote.fill(3);
    let sink = a.region(3000, Access::LOCAL_WRITE);
    let src = a.region(10, Access::NONE);
    let dst = b.region(10, Access::LOCAL_WRITE);
    b.post_recv(9, vec![dst.whole()]);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    a.post(2, write_to(&remote, 0), vec![src.whole()]);
    a.post(3, write_to(&remote, 10), vec![src.whole()]);
    a.post(4, SendOp::Send, vec![src.whole()]);
    let mut out = Vec::new();
    a.transmit(&mut out, 1 << 20);
    a.collect();
    assert!(a.completions.is_empty(), "the Writes wait for the Read");
    b.engine.on_bytes(&out);
    pump(&mut a, &mut b);
    let sent: Vec<_> = a
        .take(CqKind::Send)
        .iter()
        .map(|w| (w.wr_id, w.opcode))
        .collect();
    assert_eq!(
        sent,
        [
            (1, WcOpcode::Read),
            (2, WcOpcode::Write),
            (3, WcOpcode::Write),
            (4, WcOpcode::Send)
        ]
    );
    // Writes posted after a Read may land before the Read is answered (RFC
    // 5040 section 5.5), so only the octets they did not touch are known.
    assert_eq!(&sink.contents()[20..], &data[20..]);
}

/// Two queue pairs of the same PD on one side, drawing from one SRQ.
fn srq_pairs(srq: &Arc<SharedReceiveQueue>, mulpdu: usize) -> [(Side, Side); 2] {
    let setup = Setup {
        mulpdu,
        ..Setup::default()
    };
    let table = Arc::new(StagTable::default());
    let pds = ProtectionDomains::new();
    let (pd_a, pd_b) = (pds.allocate().unwrap(), pds.allocate().unwrap());
    let make = || {
        (
            Side::with_srq(&setup, Role::Initiator, pd_a, &table, None),
            Side::with_srq(&setup, Role::Responder, pd_b, &table, Some(srq.clone())),
        )
    };
    [make(), make()]
}

#[test]
fn two_queue_pairs_share_a_receive_queue() {
    let srq = Arc::new(SharedReceiveQueue::new());
    let [(mut a1, mut b1), (mut a2, mut b2)] = srq_pairs(&srq, 200);
    let slots: Vec<Region> = (0..6)
        .map(|_| b1.region(1000, Access::LOCAL_WRITE))
        .collect();
    for (i, slot) in slots.iter().enumerate() {
        srq.post(RecvWr {
            wr_id: i as u64,
            sgl: vec![slot.whole()],
        });
    }
    assert_eq!(srq.len(), 6);
    // Three messages each way, multi-segment, interleaved a segment at a
    // time between the two queue pairs.
    let src1 = a1.region(1000, Access::NONE);
    let src2 = a2.region(1000, Access::NONE);
    let d1 = src1.fill(11);
    let d2 = src2.fill(22);
    for (i, len) in [900usize, 1, 500].into_iter().enumerate() {
        a1.post(i as u64, SendOp::Send, vec![src1.sge(0, len)]);
        a2.post(i as u64, SendOp::Send, vec![src2.sge(0, len)]);
    }
    loop {
        let mut moved = 0;
        for (a, b) in [(&mut a1, &mut b1), (&mut a2, &mut b2)] {
            let mut out = Vec::new();
            moved += a.transmit(&mut out, 1);
            b.engine.on_bytes(&out);
        }
        if moved == 0 {
            break;
        }
    }
    assert!(srq.is_empty());
    let mut seen = Vec::new();
    for (b, data) in [(&mut b1, &d1), (&mut b2, &d2)] {
        let recv = b.take(CqKind::Recv);
        let lens: Vec<u32> = recv.iter().map(|w| w.byte_len).collect();
        assert_eq!(
            lens,
            [900, 1, 500],
            "each queue pair delivers its own in order"
        );
        for wc in recv {
            assert_eq!(wc.status, WcStatus::Success);
            let got = slots[wc.wr_id as usize].contents();
            assert_eq!(&got[..wc.byte_len as usize], &data[..wc.byte_len as usize]);
            seen.push(wc.wr_id);
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
    slots.iter().for_each(Region::assert_guards);

    // With the SRQ empty, the next Send finds no buffer.
    a1.post(9, SendOp::Send, vec![]);
    common::pump(&mut a1, &mut b1);
    assert_eq!(
        b1.events,
        [QpEvent::TerminateSent(TermError::DdpUntaggedNoBuffer)]
    );
    assert_eq!(b1.engine.state(), QpState::Terminate);
    // The other queue pair carries on.
    srq.post(RecvWr {
        wr_id: 42,
        sgl: vec![slots[0].whole()],
    });
    a2.post(9, SendOp::Send, vec![src2.sge(0, 3)]);
    common::pump(&mut a2, &mut b2);
    assert_eq!(b2.take(CqKind::Recv)[0].wr_id, 42);
}

/// The ULPDUs `side` sends in one call of `poll_transmit`.
fn one_transmit(side: &mut Side) -> Vec<Vec<u8>> {
    side.record();
    side.transmit(&mut Vec::new(), 1 << 20);
    side.take_sent()
}

#[test]
fn a_local_error_sends_its_terminate_at_once() {
    // Regression: a Terminate raised while transmitting went out only on
    // the next call, so a transport that stops when a call returns 0 never
    // sent it (nor closed).
    let (mut a, _b) = pair(Setup::default());
    let bad = Sge {
        addr: 0,
        length: 10,
        lkey: Stag(0x00ab_cd07),
    };
    a.post(1, SendOp::Send, vec![bad]);
    let sent = one_transmit(&mut a);
    let terms: Vec<_> = sent
        .iter()
        .filter_map(|u| common::as_terminate(u))
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(terms[0].error, TermError::RdmapLocalCatastrophic);
    assert_eq!(
        (terms[0].segment_len, terms[0].rdmap_header.as_ref()),
        (None, None)
    );
    assert_eq!(
        a.engine.llp_close(),
        Some(uwarp_stack::rdmap::LlpClose::Graceful)
    );
    assert_eq!(
        a.take(CqKind::Send)[0].status,
        WcStatus::LocalProtectionError
    );
}

#[test]
fn a_read_with_ord_zero_fails_instead_of_waiting_forever() {
    // Regression: with ORD 0 a Read waited for room that never came, and
    // held everything posted after it.
    let (mut a, mut b) = pair(Setup {
        ird_ord: 0,
        ..Setup::default()
    });
    let remote = b.region(16, REMOTE_ALL);
    let sink = a.region(16, Access::LOCAL_WRITE);
    a.post(1, read_from(&remote, 0), vec![sink.whole()]);
    a.post(2, SendOp::Send, vec![]);
    pump(&mut a, &mut b);
    let sent = a.statuses(CqKind::Send);
    assert_eq!(
        sent,
        [
            (1, WcStatus::LocalQpOperationError),
            (2, WcStatus::WrFlushError)
        ]
    );
    assert_eq!(
        b.events,
        [QpEvent::TerminateReceived(
            TermError::RdmapLocalCatastrophic
        )]
    );
}

#[test]
fn any_mulpdu_is_clamped_to_one_the_engine_can_frame() {
    // Regression: a MULPDU over 65535 made every FPDU fail to frame and
    // silently dropped it; one below the headers split a Read Request
    // across segments, which the peer refuses.
    for (asked, used) in [(0, 70), (1, 70), (45, 70), (70, 70), (100_000, 65_535)] {
        let (mut a, mut b) = pair(Setup {
            mulpdu: asked,
            ..Setup::default()
        });
        assert_eq!(a.engine.mulpdu(), used);
        a.engine.set_mulpdu(asked);
        assert_eq!(a.engine.mulpdu(), used);
        let len = 150_000;
        let src = a.region(len, Access::NONE);
        let data = src.fill(1);
        let remote = b.region(len, REMOTE_ALL);
        let dst = b.region(len, Access::LOCAL_WRITE);
        let sink = a.region(len, Access::LOCAL_WRITE);
        b.post_recv(1, vec![dst.whole()]);
        a.post(1, SendOp::Send, vec![src.whole()]);
        a.post(2, write_to(&remote, 0), vec![src.whole()]);
        a.engine.post_send(SendWr {
            fence: true,
            ..wr(3, read_from(&remote, 0), vec![sink.whole()])
        });
        pump(&mut a, &mut b);
        assert!(dst.contents() == data && remote.contents() == data && sink.contents() == data);
        assert_eq!(a.take(CqKind::Send).len(), 3, "MULPDU {asked}");
        assert!(a.events.is_empty() && b.events.is_empty());
    }
}
