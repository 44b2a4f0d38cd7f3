//! Every RDMAP operation between two devices, on both transports: over
//! loopback TCP sockets, and on DPDK over a net_ring pair. Payloads at the
//! sizes where segmentation changes (0, 1, MULPDU - 1, MULPDU, MULPDU + 1,
//! 1 MiB, 16 MiB), data checked octet for octet; Send with Invalidate and
//! solicited events, and the Terminate a Write to the invalidated STag
//! brings; 64 queue pairs at once; a graceful disconnect; registrations
//! and deregistrations on the receiving side while Writes are placed
//! (the STag table read lock-free by the dataplane); on DPDK, a listener
//! on a loopback address, which hears nothing.

use uwarp_testing::pair;

use pair::*;
use uwarp::*;

uwarp_testing::on_every_transport!(
    sends_of_every_size_arrive_intact,
    writes_and_reads_of_every_size_arrive_intact,
    send_with_invalidate_and_solicited_events_reach_the_peer,
    sixty_four_queue_pairs_run_at_once,
    graceful_disconnect_reaches_both_sides,
    a_dropped_listener_refuses_the_next_connect,
    regions_come_and_go_while_writes_stream,
);

/// A connection with default settings between `T`'s devices.
fn connect<T: Transport>() -> (End, End) {
    let (client, server) = (ConnectParams::default(), LocalParams::default());
    connect_devices(T::devices(), CQ_DEPTH, client, server, |_, _| {}).unwrap()
}

/// The payload sizes of the issue, around one segment's capacity.
fn sizes(end: &End) -> Vec<usize> {
    // The largest untagged payload of one FPDU: the connection's MULPDU
    // less the 18-octet untagged header.
    let emss_payload = end.connection.mulpdu - 18;
    vec![
        0,
        1,
        emss_payload - 1,
        emss_payload,
        emss_payload + 1,
        1 << 20,
        16 << 20,
    ]
}

fn sends_of_every_size_arrive_intact<T: Transport>() {
    let (client, server) = connect::<T>();
    for (i, len) in sizes(&client).into_iter().enumerate() {
        let src = client.pd.alloc_mr(len, Access::LOCAL_WRITE).unwrap();
        let dst = server.pd.alloc_mr(len, Access::LOCAL_WRITE).unwrap();
        let data = fill(&src, i as u8);
        server
            .qp
            .post_recv(RecvWr {
                wr_id: i as u64,
                sgl: vec![dst.whole()],
            })
            .unwrap();
        let wr = SendWr::new(i as u64, SendOp::Send, Payload::Sgl(vec![src.whole()]));
        client.qp.post_send(wr).unwrap();
        assert_eq!(client.expect_ok().opcode, WcOpcode::Send);
        let wc = server.expect_ok();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::Recv, len as u32));
        assert_eq!(contents(&dst), data, "Send of {len} octets");
    }
}

fn writes_and_reads_of_every_size_arrive_intact<T: Transport>() {
    let (client, server) = connect::<T>();
    let remote = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    for (i, len) in sizes(&client).into_iter().enumerate() {
        let local = client.pd.alloc_mr(len, Access::LOCAL_WRITE).unwrap();
        let target = server.pd.alloc_mr(len, remote).unwrap();
        let data = fill(&local, i as u8);
        let write = SendOp::Write {
            remote_addr: target.addr(),
            rkey: target.rkey(),
        };
        let wr = SendWr::new(1, write, Payload::Sgl(vec![local.whole()]));
        client.qp.post_send(wr).unwrap();
        assert_eq!(client.expect_ok().opcode, WcOpcode::Write);

        // Read it back into a fresh sink: proves the Write landed, and
        // moves the data the other way.
        let sink = client.pd.alloc_mr(len, Access::LOCAL_WRITE).unwrap();
        let read = SendOp::Read {
            remote_addr: target.addr(),
            rkey: target.rkey(),
        };
        let wr = SendWr::new(2, read, Payload::Sgl(vec![sink.whole()]));
        client.qp.post_send(wr).unwrap();
        let wc = client.expect_ok();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::Read, len as u32));
        assert_eq!(contents(&target), data, "Write of {len} octets");
        assert_eq!(contents(&sink), data, "Read of {len} octets");
    }
}

fn send_with_invalidate_and_solicited_events_reach_the_peer<T: Transport>() {
    let (client, server) = connect::<T>();
    // The server exposes a region and hands its rkey out; the client's
    // last message invalidates it, as NFS over RDMA does.
    let exposed = server
        .pd
        .alloc_mr(4096, Access::LOCAL_WRITE.union(Access::REMOTE_WRITE))
        .unwrap();
    let inbox = server.pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    server
        .qp
        .post_recv(RecvWr {
            wr_id: 10,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
    let write = SendOp::Write {
        remote_addr: exposed.addr(),
        rkey: exposed.rkey(),
    };
    let wr = SendWr::new(1, write, Payload::Inline(b"payload".to_vec()));
    client.qp.post_send(wr).unwrap();
    let mut wr = SendWr::new(
        11,
        SendOp::SendWithInvalidate {
            invalidate: exposed.rkey(),
        },
        Payload::Inline(b"done".to_vec()),
    );
    wr.solicited = true;
    server.cq.req_notify(true);
    client.qp.post_send(wr).unwrap();
    assert!(server.cq.wait_event(WAIT), "a solicited event");
    let wc = server.expect_ok();
    assert_eq!(wc.invalidated_rkey, Some(exposed.rkey()));
    assert!(wc.solicited);
    assert_eq!(wc.qp_num, server.qp.num());
    assert_ne!(server.qp.num(), client.qp.num());
    assert_eq!(&contents(&exposed)[..7], b"payload");
    client.expect_ok();
    client.expect_ok();

    // The STag is gone: a Write to it now is answered with a Terminate.
    let wr = SendWr::new(12, write, Payload::Inline(b"late".to_vec()));
    client.qp.post_send(wr).unwrap();
    server.expect_terminate_to(&client, TermError::DdpTaggedInvalidStag);
    assert!(client.qp.wait_closed(WAIT));
    assert!(server.qp.wait_closed(WAIT));
    assert_eq!(&contents(&exposed)[..7], b"payload");
    // The queue pairs' counters saw the Terminate too.
    let (sent, received) = (server.qp.counters(), client.qp.counters());
    assert_eq!((sent.terminates_sent, sent.terminates_received), (1, 0));
    assert_eq!(
        (received.terminates_sent, received.terminates_received),
        (0, 1)
    );
}

fn sixty_four_queue_pairs_run_at_once<T: Transport>() {
    let Devices {
        server: sdev,
        client: cdev,
        listen,
    } = T::devices();
    let (spd, scq) = (sdev.alloc_pd().unwrap(), sdev.create_cq(CQ_DEPTH));
    let (cpd, ccq) = (cdev.alloc_pd().unwrap(), cdev.create_cq(CQ_DEPTH));
    let listener = sdev.listen(listen).unwrap();
    let addr = listener.local_addr();
    const QPS: usize = 64;
    const LEN: usize = 100_000;
    let mut inboxes = Vec::new();
    let mut server_qps = Vec::new();
    for i in 0..QPS {
        let qp = sdev.create_qp(&spd, QpInit::new(&scq));
        let inbox = spd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
        qp.post_recv(RecvWr {
            wr_id: i as u64,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
        inboxes.push(inbox);
        server_qps.push(qp);
    }
    let acceptor = {
        let qps = server_qps.clone();
        std::thread::spawn(move || {
            for qp in &qps {
                let request = listener.get_request(WAIT).unwrap();
                request.accept(qp, LocalParams::default()).unwrap();
            }
        })
    };
    let mut client_qps = Vec::new();
    for _ in 0..QPS {
        let qp = cdev.create_qp(&cpd, QpInit::new(&ccq));
        cdev.connect(addr, &qp, ConnectParams::default()).unwrap();
        client_qps.push(qp);
    }
    acceptor.join().unwrap();
    let mut sources = Vec::new();
    for (i, qp) in client_qps.iter().enumerate() {
        let src = cpd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
        let data = fill(&src, i as u8);
        qp.post_send(SendWr::new(
            i as u64,
            SendOp::Send,
            Payload::Sgl(vec![src.whole()]),
        ))
        .unwrap();
        sources.push((src, data));
    }
    let mut received = [false; QPS];
    for _ in 0..QPS {
        let wc = scq.poll_blocking(WAIT).expect("every Send arrives");
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, LEN as u32));
        received[wc.wr_id as usize] = true;
    }
    assert!(received.iter().all(|&r| r));
    // Accepts happen in connect order, so queue pair i got client i's Send.
    for (inbox, (_, data)) in inboxes.iter().zip(&sources) {
        assert_eq!(&contents(inbox), data);
    }
    for _ in 0..QPS {
        assert_eq!(ccq.poll_blocking(WAIT).unwrap().status, WcStatus::Success);
    }
}

/// Dropping a listener closes its port before it returns: a connect right
/// after is refused, not taken by a listener on its way out and left to
/// time out (the drop-in librdmacm's `rdma_destroy_id` relies on it).
fn a_dropped_listener_refuses_the_next_connect<T: Transport>() {
    let Devices {
        server,
        client,
        listen,
    } = T::devices();
    let listener = server.listen(listen).unwrap();
    let addr = listener.local_addr();
    drop(listener);
    assert_refused(&client, addr);
}

/// A connect from `client` to `addr` is refused at once: an error, and not
/// the timeout of a listener that took it and never answered.
fn assert_refused(client: &Device, addr: std::net::SocketAddr) {
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(16);
    let qp = client.create_qp(&pd, QpInit::new(&cq));
    let params = ConnectParams {
        timeout: WAIT,
        ..ConnectParams::default()
    };
    let refused = client.connect(addr, &qp, params).unwrap_err();
    assert!(!matches!(refused, Error::Timeout), "{refused:?}");
}

/// On the DPDK transport, a listener on a loopback address opens (a
/// bind to one is a wildcard with no device on Linux's RDMA CM, and
/// libfabric binds "localhost" to learn its device), and hears nothing:
/// this host's own connections never reach the port, and a connect to
/// the device's address at its port is refused, not taken.
#[test]
fn a_loopback_listener_on_dpdk_opens_and_hears_nothing() {
    let Devices { server, client, .. } = Dpdk::devices();
    let listener = server.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert_refused(&client, ([10, 69, 0, 1], addr.port()).into());
    assert!(matches!(
        listener.get_request(std::time::Duration::from_millis(50)),
        Err(Error::Timeout)
    ));
}

fn graceful_disconnect_reaches_both_sides<T: Transport>() {
    let (client, server) = connect::<T>();
    let inbox = server.pd.alloc_mr(16, Access::LOCAL_WRITE).unwrap();
    server
        .qp
        .post_recv(RecvWr {
            wr_id: 5,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
    client.qp.disconnect();
    assert!(client.qp.wait_closed(WAIT));
    assert!(server.qp.wait_closed(WAIT));
    assert_eq!(server.qp.next_event(WAIT), Some(QpEvent::Disconnected));
    assert_eq!(client.qp.next_event(WAIT), Some(QpEvent::Disconnected));
    // The server's posted receive is flushed.
    let wc = server.next();
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::WrFlushError));
}

/// While 32 MiB of RDMA Writes stream into one region, another thread of
/// the receiving side registers and deregisters regions of its own as fast
/// as it can: the table the dataplane reads on every tagged placement
/// changes under it, and every Write still lands, intact and in place.
fn regions_come_and_go_while_writes_stream<T: Transport>() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    /// Stops the churn however the rounds end, so a failing check fails
    /// the test instead of leaving the scope waiting for the churn.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    const LEN: usize = 4 << 20;
    const CHUNK: usize = 64 << 10;
    const DEPTH: usize = 16;
    let (client, server) = connect::<T>();
    let target = server
        .pd
        .alloc_mr(LEN, Access::LOCAL_WRITE.union(Access::REMOTE_WRITE))
        .unwrap();
    let source = client.pd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let (stop, registered) = (AtomicBool::new(false), AtomicU64::new(0));
    let churned = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let len = 4096 << (registered.load(Ordering::Relaxed) % 4);
                let region = server.pd.alloc_mr(len, Access::ALL).unwrap();
                drop(region);
                registered.fetch_add(1, Ordering::Relaxed);
            }
        });
        let _stop = StopOnDrop(&stop);
        // The churn runs before the first Write goes out.
        while registered.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let before = registered.load(Ordering::Relaxed);
        for round in 0..8u8 {
            let data = fill(&source, round);
            let chunks = LEN / CHUNK;
            let (mut posted, mut done) = (0, 0);
            while done < chunks {
                while posted < chunks && posted - done < DEPTH {
                    let op = SendOp::Write {
                        remote_addr: target.addr() + (posted * CHUNK) as u64,
                        rkey: target.rkey(),
                    };
                    let sge = source.sge(posted * CHUNK, CHUNK as u32);
                    let wr = SendWr::new(posted as u64, op, Payload::Sgl(vec![sge]));
                    client.qp.post_send(wr).unwrap();
                    posted += 1;
                }
                assert_eq!(client.expect_ok().wr_id, done as u64);
                done += 1;
            }
            // A Send behind the Writes tells the receiver they are placed
            // (RFC 5040 section 5.5: placed before the Send completes).
            let inbox = server.pd.alloc_mr(1, Access::LOCAL_WRITE).unwrap();
            let recv = RecvWr {
                wr_id: u64::from(round),
                sgl: vec![inbox.whole()],
            };
            server.qp.post_recv(recv).unwrap();
            let wr = SendWr::new(99, SendOp::Send, Payload::Inline(vec![round]));
            client.qp.post_send(wr).unwrap();
            client.expect_ok();
            assert_eq!(server.expect_ok().wr_id, u64::from(round));
            assert!(
                contents(&target) == data,
                "round {round}: the region differs"
            );
        }
        registered.load(Ordering::Relaxed) - before
    });
    assert!(churned > 0, "nothing was registered while the Writes ran");
    assert_eq!(client.qp.counters().terminates_received, 0);
}
