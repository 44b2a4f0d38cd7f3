//! Two queue-pair engines joined back to back in memory: the smoke test of
//! the engine, a Send, an RDMA Write and an RDMA Read through MPA framing,
//! DDP placement and the STag table, with the data checked octet for
//! octet. The `qp_*` files next to this one test each part in depth:
//!
//! - `qp_ops.rs`: every operation at every size and stream setting;
//! - `qp_queue.rs`: scatter/gather, inline, unsignaled, fence, ORD,
//!   completion order, shared receive queues;
//! - `qp_invalidate.rs`: Send with Invalidate;
//! - `qp_rtr.rs`: peer-to-peer RTRs and the responder's send fence;
//! - `qp_hostile.rs`: a peer sending what it must not, and the Terminates;
//! - `qp_terminate_rx.rs`: Terminates received in every state;
//! - `qp_teardown.rs`: graceful and abortive closes, the LLP going away;
//! - `qp_random.rs`: random traffic (proptest);
//! - `qp_fuzz.rs`: the fuzz oracle under `cargo test`.

mod common;

use common::{pair, pump, read_from, write_to, Setup, REMOTE_ALL};
use uwarp_stack::mem::Access;
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::verbs::{SendOp, WcOpcode, WcStatus};

#[test]
fn send_write_read_move_data() {
    let (mut a, mut b) = pair(Setup::default());
    let len = 5000;
    let src = a.region(len, Access::NONE);
    let data = src.fill(3);
    let dst = b.region(len, Access::LOCAL_WRITE);
    let remote = b.region(len, REMOTE_ALL);
    let sink = a.region(len, Access::LOCAL_WRITE);
    b.post_recv(1, vec![dst.whole()]);
    a.post(2, SendOp::Send, vec![src.whole()]);
    let write = write_to(&remote, 0);
    a.post(3, write, vec![src.whole()]);
    pump(&mut a, &mut b);
    assert_eq!(dst.contents(), data);
    assert_eq!(remote.contents(), data);
    let recv = b.take(CqKind::Recv);
    assert_eq!(
        (recv[0].wr_id, recv[0].status, recv[0].byte_len),
        (1, WcStatus::Success, len as u32)
    );

    let rdata = remote.fill(9);
    let read = read_from(&remote, 0);
    a.post(4, read, vec![sink.whole()]);
    pump(&mut a, &mut b);
    assert_eq!(sink.contents(), rdata);
    let sent = a.outcomes(CqKind::Send);
    assert_eq!(
        sent,
        [
            (2, WcOpcode::Send, WcStatus::Success),
            (3, WcOpcode::Write, WcStatus::Success),
            (4, WcOpcode::Read, WcStatus::Success),
        ]
    );
}
