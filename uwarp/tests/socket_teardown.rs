//! Dropping a socket-transport device always finishes: it resets every
//! connection still open, even one whose completion queue is full and
//! never polled again, or whose peer stopped reading, and every
//! completion the application polls for while it closes still reaches
//! it, in order.

use uwarp_testing::pair;

use std::mem::ManuallyDrop;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pair::*;
use uwarp::*;

/// Receives each end posts before it connects.
const RECEIVES: u64 = 8;
/// Room for fewer completions than the close flushes.
const SMALL_CQ: usize = 2;
/// How long a drop may take: the device's own wait for room in a full
/// completion queue, and slack for a loaded machine.
const DROP_DEADLINE: Duration = Duration::from_secs(15);

/// Posts [`RECEIVES`] receives of 64 octets, `wr_id`s 0 to 7.
fn post_receives(pd: &ProtectionDomain, qp: &QueuePair) {
    let inbox = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    for wr_id in 0..RECEIVES {
        qp.post_recv(RecvWr {
            wr_id,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
    }
    // The region must outlive the receives: keep it for the process.
    std::mem::forget(inbox);
}

/// Drops `device` on a thread of its own; fails unless that finishes
/// within [`DROP_DEADLINE`]. (The ends a test drops this way are kept in
/// `ManuallyDrop` until then, so that a failing test does not hang in
/// its unwinding.)
fn drop_in_time(device: Device) {
    let (done, finished) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        drop(device);
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(DROP_DEADLINE).is_ok(),
        "Device::drop still runs after {:?}",
        started.elapsed()
    );
}

/// A connection whose ends have [`RECEIVES`] receives posted and
/// completion queues of [`SMALL_CQ`]: (client, server).
fn small_queues() -> (End, ManuallyDrop<End>) {
    let (client, server) = connect_with_cq(
        SMALL_CQ,
        ConnectParams::default(),
        LocalParams::default(),
        post_receives,
    )
    .unwrap();
    (client, ManuallyDrop::new(server))
}

#[test]
fn a_full_completion_queue_nobody_polls_does_not_hold_the_drop() {
    let (client, server) = small_queues();
    let End { device, cq, qp, .. } = client;
    drop_in_time(device);
    assert_eq!(qp.state(), QpState::Error);
    // The queue holds what fit, the oldest flushed receives, and says it
    // overran: the rest could not be delivered.
    let mut polled = Vec::new();
    cq.poll(&mut polled, usize::MAX);
    let got: Vec<_> = polled.iter().map(|wc| (wc.wr_id, wc.status)).collect();
    assert_eq!(
        got,
        [(0, WcStatus::WrFlushError), (1, WcStatus::WrFlushError)]
    );
    assert!(cq.overflowed() > 0);
    // The server's queue pair was reset by the client and flushed its
    // receives into a full queue too: its drop finishes as well.
    drop_in_time(ManuallyDrop::into_inner(server).device);
}

#[test]
fn an_application_polling_while_the_device_closes_gets_every_completion() {
    let (client, server) = small_queues();
    let End { device, cq, .. } = client;
    let poller = std::thread::spawn(move || {
        let mut ids = Vec::new();
        while let Some(wc) = cq.poll_blocking(WAIT) {
            assert_eq!(wc.status, WcStatus::WrFlushError, "{wc:?}");
            ids.push(wc.wr_id);
            if ids.len() as u64 == RECEIVES {
                break;
            }
        }
        ids
    });
    drop_in_time(device);
    let ids = poller.join().unwrap();
    assert_eq!(ids, (0..RECEIVES).collect::<Vec<_>>());
    // The server's queue pair was reset by the client and flushed its
    // receives into a full queue too: its drop finishes as well.
    drop_in_time(ManuallyDrop::into_inner(server).device);
}

#[test]
fn a_peer_that_stopped_reading_does_not_hold_the_drop() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || hand_made_responder(listener, (16, 16)));
    let (device, pd, cq) = device();
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    device.connect(addr, &qp, ConnectParams::default()).unwrap();
    let peer = peer.join().unwrap();
    // More than the kernel buffers on both sides of loopback hold: the
    // Write cannot all be handed to TCP while the peer does not read.
    let source = pd.alloc_mr(64 << 20, Access::LOCAL_WRITE).unwrap();
    let op = SendOp::Write {
        remote_addr: 0,
        rkey: 1,
    };
    let wr = SendWr::new(1, op, Payload::Sgl(vec![source.whole()]));
    qp.post_send(wr).unwrap();
    assert_eq!(cq.poll_blocking(Duration::from_millis(300)), None);
    drop_in_time(device);
    let wc = cq.poll_one().expect("the Write's completion");
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::WrFlushError));
    drop(peer);
}
