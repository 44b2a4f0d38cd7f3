//! A queue pair's work across its connection's life, on both transports
//! (loopback TCP sockets, and DPDK over a net_ring pair): every work
//! request completes, flushed once the connection is gone (posted after
//! a disconnect, or before a connection that was rejected), and a
//! destroyed queue pair resets its connection, established or still
//! being set up, and puts nothing more in its completion queue; one
//! disconnected first closes gracefully, delivering what it sent.

use std::time::{Duration, Instant};

use uwarp_testing::pair;

use pair::*;
use uwarp::*;

uwarp_testing::on_every_transport!(
    work_posted_after_a_disconnect_completes_flushed,
    receives_posted_before_a_rejected_connection_complete_flushed,
    destroying_a_connected_queue_pair_resets_it_and_stops_its_completions,
    destroying_a_queue_pair_while_it_connects_resets_the_connection,
    a_queue_pair_destroyed_after_its_disconnect_delivers_what_it_sent,
);

/// How long a test watches for completions that must not come.
const QUIET: Duration = Duration::from_millis(500);

/// A connection with default settings between `T`'s devices; `prepare`
/// runs on each queue pair before it connects.
fn connect<T: Transport>(
    prepare: impl Fn(&ProtectionDomain, &QueuePair) + Send + Sync + Clone + 'static,
) -> (End, End) {
    let (client, server) = (ConnectParams::default(), LocalParams::default());
    connect_devices(T::devices(), CQ_DEPTH, client, server, prepare).unwrap()
}

/// `T`'s devices, the server's listening: (server, client, listener).
fn listening<T: Transport>() -> (Device, Device, Listener) {
    let devices = T::devices();
    let listener = devices.server.listen(devices.listen).unwrap();
    (devices.server, devices.client, listener)
}

fn recv(wr_id: u64) -> RecvWr {
    RecvWr {
        wr_id,
        sgl: Vec::new(),
    }
}

fn send(wr_id: u64) -> SendWr {
    SendWr::new(wr_id, SendOp::Send, Payload::Inline(b"late".to_vec()))
}

/// Checks that `end` got no completion within [`QUIET`].
fn expect_quiet(end: &End) {
    let wc = end.cq.poll_blocking(QUIET);
    assert!(wc.is_none(), "a completion after destruction: {wc:?}");
}

/// After a graceful disconnect both ends' work, posted at once or seconds
/// later (once the dataplane has let the connection go), completes
/// flushed with its `wr_id`: receives and sends, signaled or not.
fn work_posted_after_a_disconnect_completes_flushed<T: Transport>() {
    let (client, server) = connect::<T>(|_, _| {});
    client.qp.disconnect();
    assert!(client.qp.wait_closed(WAIT) && server.qp.wait_closed(WAIT));
    let until = Instant::now() + Duration::from_secs(3);
    let mut wr_id = 0;
    while Instant::now() < until {
        for end in [&client, &server] {
            wr_id += 1;
            end.qp.post_recv(recv(wr_id)).unwrap();
            let wc = end.next();
            assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::WrFlushError));
            wr_id += 1;
            let unsignaled = SendWr {
                signaled: false,
                ..send(wr_id)
            };
            end.qp.post_send(unsignaled).unwrap();
            let wc = end.next();
            assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::WrFlushError));
            assert_eq!(wc.qp_num, end.qp.num());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Receives posted before a connection the server rejects are flushed
/// when `connect` fails, as are sends posted after it.
fn receives_posted_before_a_rejected_connection_complete_flushed<T: Transport>() {
    let (_server, client, listener) = listening::<T>();
    let addr = listener.local_addr();
    let rejecting = std::thread::spawn(move || {
        let request = listener.get_request(WAIT).unwrap();
        request.reject(b"no").unwrap();
    });
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(16);
    let qp = client.create_qp(&pd, QpInit::new(&cq));
    for wr_id in 1..=3 {
        qp.post_recv(recv(wr_id)).unwrap();
    }
    let params = ConnectParams {
        timeout: WAIT,
        ..ConnectParams::default()
    };
    assert!(client.connect(addr, &qp, params).is_err());
    rejecting.join().unwrap();
    qp.post_send(send(4)).unwrap();
    let flushed: Vec<(u64, WcStatus)> = (0..4)
        .map(|_| cq.poll_blocking(WAIT).expect("a flush in time"))
        .map(|wc| (wc.wr_id, wc.status))
        .collect();
    let expected: Vec<(u64, WcStatus)> = (1..=4).map(|id| (id, WcStatus::WrFlushError)).collect();
    assert_eq!(flushed, expected);
}

/// Destroying an established queue pair with receives posted resets its
/// connection (the peer reaches Error) and flushes nothing into its queue
/// after `destroy` returns.
fn destroying_a_connected_queue_pair_resets_it_and_stops_its_completions<T: Transport>() {
    let (client, server) = connect::<T>(|_, qp| {
        for wr_id in 1..=4 {
            qp.post_recv(recv(wr_id)).unwrap();
        }
    });
    client.qp.destroy();
    assert!(server.qp.wait_closed(WAIT), "the peer saw no end");
    expect_quiet(&client);
    assert!(client.qp.post_recv(recv(5)).is_err());
}

/// Destroying a queue pair whose `connect` waits for the server's answer:
/// the connection the server then accepts is reset at once, and the
/// destroyed queue pair completes nothing.
fn destroying_a_queue_pair_while_it_connects_resets_the_connection<T: Transport>() {
    let (server, client, listener) = listening::<T>();
    let addr = listener.local_addr();
    let (cpd, ccq) = (client.alloc_pd().unwrap(), client.create_cq(16));
    let cqp = client.create_qp(&cpd, QpInit::new(&ccq));
    cqp.post_recv(recv(1)).unwrap();
    let (spd, scq) = (server.alloc_pd().unwrap(), server.create_cq(16));
    let sqp = server.create_qp(&spd, QpInit::new(&scq));
    sqp.post_recv(recv(2)).unwrap();
    std::thread::scope(|scope| {
        let connecting = scope.spawn(|| {
            let params = ConnectParams {
                timeout: WAIT,
                ..ConnectParams::default()
            };
            // Established and reset at once, or failed: either way the
            // queue pair goes nowhere.
            let _ = client.connect(addr, &cqp, params);
        });
        let request = listener.get_request(WAIT).unwrap();
        cqp.destroy();
        // The server's side may see the reset before its accept returns.
        let _ = request.accept(&sqp, LocalParams::default());
        connecting.join().unwrap();
    });
    assert!(sqp.wait_closed(WAIT), "the server's queue pair stayed up");
    let wc = scq
        .poll_blocking(WAIT)
        .expect("the server's receive flushed");
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::WrFlushError));
    let late = ccq.poll_blocking(QUIET);
    assert!(late.is_none(), "a completion after destruction: {late:?}");
}

/// `rdma_disconnect` then `rdma_destroy_qp` at once, as rdmacm-utils'
/// `rdma_server` ends: the destroyed queue pair's connection closes
/// gracefully, as the kernel's iWARP connection manager leaves one that
/// is closing, and everything its completed Sends framed reaches the
/// peer, which then sees the close. Before, the destroy reset the
/// connection and what TCP still held for the peer was lost.
fn a_queue_pair_destroyed_after_its_disconnect_delivers_what_it_sent<T: Transport>() {
    const SENDS: usize = 64;
    const LEN: usize = 2048;
    let inbox_len = SENDS * LEN;
    let (client, server) = connect::<T>(|_, _| {});
    let inbox = client.pd.alloc_mr(inbox_len, Access::LOCAL_WRITE).unwrap();
    for i in 0..SENDS {
        let sgl = vec![inbox.sge(i * LEN, LEN as u32)];
        client
            .qp
            .post_recv(RecvWr {
                wr_id: i as u64,
                sgl,
            })
            .unwrap();
    }
    // The initiator's FPDU first (RFC 5044 section 7.1.2).
    server.qp.post_recv(recv(1000)).unwrap();
    let first = SendWr::new(1000, SendOp::Send, Payload::Inline(Vec::new()));
    client.qp.post_send(first).unwrap();
    assert_eq!(client.expect_ok().wr_id, 1000);
    assert_eq!(server.expect_ok().wr_id, 1000);
    let data: Vec<u8> = (0..inbox_len).map(|i| (i * 7 + i / 251) as u8).collect();
    let outbox = server.pd.alloc_mr(inbox_len, Access::LOCAL_WRITE).unwrap();
    outbox.buffer().write_at(0, &data).unwrap();
    for i in 0..SENDS {
        let sge = outbox.sge(i * LEN, LEN as u32);
        let wr = SendWr::new(i as u64, SendOp::Send, Payload::Sgl(vec![sge]));
        server.qp.post_send(wr).unwrap();
    }
    for _ in 0..SENDS {
        server.expect_ok();
    }
    server.qp.disconnect();
    server.qp.destroy();
    for i in 0..SENDS {
        let wc = client.next();
        assert_eq!(
            (wc.wr_id, wc.status),
            (i as u64, WcStatus::Success),
            "{wc:?}"
        );
    }
    let mut received = vec![0; inbox_len];
    inbox.buffer().read_at(0, &mut received).unwrap();
    assert!(received == data, "what arrived differs from what was sent");
    assert!(client.qp.wait_closed(WAIT), "the client saw no close");
}
