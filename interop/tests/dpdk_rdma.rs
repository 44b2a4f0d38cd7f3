//! iWARP on uwarp's TCP over DPDK, end to end: two devices on a net_ring
//! pair in one process, with the MPA startup on each control core and Full
//! Operation on each dataplane core. The rping protocol (Send, RDMA Read,
//! RDMA Write, data validated every ping) runs with the cores on threads
//! and with the cores stepped inline by the application's own threads;
//! the connection manager's reject and refusal paths report what
//! happened.

use uwarp_testing::dpdk_rig;

use std::net::SocketAddr;
use std::time::Duration;

use dpdk_rig::{device_pair, small_pool};
use uwarp::{ConnectParams, CoreThreads, Device, DpdkConfig, Error, LocalParams, QpInit};
use uwarp_interop::rping::{self, Options};

const PINGS: u64 = 100;

/// Two devices joined by a net_ring pair: 10.66.0.1 and 10.66.0.2.
fn devices(threads: CoreThreads) -> (Device, Device) {
    devices_tuned(threads, |_| {})
}

/// [`devices`] with each device's settings changed by `tune` too.
fn devices_tuned(threads: CoreThreads, tune: impl Fn(&mut DpdkConfig)) -> (Device, Device) {
    device_pair(66, 1024, threads, |dpdk| {
        small_pool(&mut dpdk.host);
        tune(dpdk);
    })
}

fn options(size: usize) -> Options {
    Options {
        size,
        count: PINGS,
        validate: true,
        timeout: Some(Duration::from_secs(30)),
        ..Options::default()
    }
}

/// rping between the two devices, the server on its own thread.
fn rping_between(server: Device, client: Device, size: usize) {
    let listener = server.listen("10.66.0.1:0").expect("listen");
    let addr: SocketAddr = listener.local_addr();
    let served = std::thread::spawn(move || {
        let report = rping::serve_one(&server, &listener, &options(size));
        drop(listener);
        (report, server)
    });
    let client_report = rping::run_client(&client, addr, &options(size)).expect("the client");
    let (server_report, _server) = served.join().expect("the server thread");
    let server_report = server_report.expect("the server");
    assert_eq!(client_report.pings, PINGS);
    assert_eq!(server_report.pings, PINGS);
}

#[test]
fn rping_on_threaded_cores_at_every_size() {
    for size in [64, 3000, 65536] {
        let (server, client) = devices(CoreThreads::Spawned);
        rping_between(server, client, size);
    }
}

/// RDMA Reads and Writes whose payloads go from registered memory by
/// reference (rping's Sends, 16 octets, are copied): rping validates
/// every ping's data. The link loses nothing, so no retransmission reads
/// the memory again; `dpdk_impaired.rs` tests that.
#[test]
fn rping_with_zero_copy_transmit() {
    for size in [3000, 65536] {
        // Below the default, which MTU 1500's segments never reach.
        let (server, client) = devices_tuned(CoreThreads::Spawned, |dpdk| {
            dpdk.zero_copy_from = Some(1024);
        });
        rping_between(server, client, size);
    }
}

#[test]
fn rping_with_cores_stepped_by_the_application() {
    let (server, client) = devices(CoreThreads::Inline);
    rping_between(server, client, 3000);
}

#[test]
fn a_reject_carries_its_private_data_back() {
    let (server, client) = devices(CoreThreads::Spawned);
    let listener = server.listen("0.0.0.0:4791").expect("listen");
    assert_eq!(listener.local_addr().to_string(), "10.66.0.1:4791");
    let refused = std::thread::spawn(move || {
        let request = listener
            .get_request(Duration::from_secs(10))
            .expect("a request");
        assert_eq!(request.private_data(), b"who is it?");
        request.reject(b"not today").expect("reject");
        (listener, server)
    });
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(8);
    let qp = client.create_qp(&pd, QpInit::new(&cq));
    let params = ConnectParams {
        mpa: LocalParams {
            private_data: b"who is it?".to_vec(),
            ..LocalParams::default()
        },
        ..ConnectParams::default()
    };
    match client.connect("10.66.0.1:4791", &qp, params) {
        Err(Error::Rejected { private_data }) => assert_eq!(private_data, b"not today"),
        other => panic!("expected a reject, got {other:?}"),
    }
    let _ = refused.join().expect("the server thread");
}

#[test]
fn a_port_without_a_listener_refuses() {
    let (_server, client) = devices(CoreThreads::Spawned);
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(8);
    let qp = client.create_qp(&pd, QpInit::new(&cq));
    match client.connect("10.66.0.1:9", &qp, ConnectParams::default()) {
        Err(Error::Io(err)) => assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn listening_elsewhere_than_the_device_address_is_refused() {
    let (server, _client) = devices(CoreThreads::Spawned);
    match server.listen("10.66.0.9:5000") {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("expected an invalid argument, got {other:?}"),
    }
}

/// One end of the ping-pong: a queue pair and a region whose first half
/// the peer writes into and whose second half is the source.
struct PingEnd {
    qp: uwarp::QueuePair,
    cq: uwarp::CompletionQueue,
    mr: uwarp::MemoryRegion,
}

fn ping_end(device: &Device, size: usize) -> PingEnd {
    let pd = device.alloc_pd().unwrap();
    let cq = device.create_cq(64);
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let mr = pd.alloc_mr(2 * size, uwarp::Access::ALL).unwrap();
    PingEnd { qp, cq, mr }
}

/// A ping end on each device, the client's connected to the server's.
fn connected_ends(server: &Device, client: &Device, size: usize) -> (PingEnd, PingEnd) {
    let listener = server.listen("10.66.0.1:0").unwrap();
    let addr = listener.local_addr();
    let server_end = ping_end(server, size);
    let client_end = ping_end(client, size);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let request = listener.get_request(Duration::from_secs(10)).unwrap();
            request
                .accept(&server_end.qp, LocalParams::default())
                .unwrap();
        });
        client
            .connect(addr, &client_end.qp, ConnectParams::default())
            .unwrap();
    });
    (server_end, client_end)
}

/// Writes `round` at the end of `from`'s source half into `to`'s sink
/// half, unsignaled.
fn ping(from: &PingEnd, to: &PingEnd, size: usize, round: u8) {
    from.mr.buffer().write_at(2 * size - 1, &[round]).unwrap();
    let op = uwarp::SendOp::Write {
        remote_addr: to.mr.addr(),
        rkey: to.mr.rkey(),
    };
    let sge = from.mr.sge(size, size as u32);
    let wr = uwarp::SendWr {
        signaled: false,
        ..uwarp::SendWr::new(u64::from(round), op, uwarp::Payload::Sgl(vec![sge]))
    };
    from.qp.post_send(wr).unwrap();
}

/// Waits for `round` at the end of `end`'s sink half, running `device`.
fn await_ping(device: &Device, end: &PingEnd, size: usize, round: u8) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = [0u8];
    loop {
        end.mr.buffer().read_at(size - 1, &mut seen).unwrap();
        if seen[0] == round {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "round {round} never arrived"
        );
        device.progress();
    }
}

/// Unsignaled small RDMA Writes both ways, each answering the last (the
/// latency workload of `uwarp-perf`): every round arrives, on threaded and
/// on inline cores.
#[test]
fn unsignaled_write_ping_pong_both_ways() {
    for threads in [CoreThreads::Spawned, CoreThreads::Inline] {
        let (server, client) = devices(threads);
        let size = 8;
        let (server_end, client_end) = connected_ends(&server, &client, size);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for round in 1..=200u8 {
                    await_ping(&server, &server_end, size, round);
                    ping(&server_end, &client_end, size, round);
                }
                // Inline cores send the last reply only when stepped.
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    server.progress();
                }
            });
            for round in 1..=200u8 {
                ping(&client_end, &server_end, size, round);
                await_ping(&client, &client_end, size, round);
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
    }
}

/// Dropping a device ends its connected queue pairs as the socket
/// transport does: each goes to Error and its posted receives complete,
/// flushed, on the CQ the application still holds.
#[test]
fn dropping_a_device_flushes_its_connected_queue_pairs() {
    let (server, client) = devices(CoreThreads::Spawned);
    let (_server_end, client_end) = connected_ends(&server, &client, 64);
    for wr_id in 0..8 {
        let sgl = vec![client_end.mr.sge(0, 64)];
        client_end
            .qp
            .post_recv(uwarp::RecvWr { wr_id, sgl })
            .unwrap();
    }
    drop(client);
    assert_eq!(client_end.qp.state(), uwarp::QpState::Error);
    let mut flushed = Vec::new();
    while let Some(wc) = client_end.cq.poll_one() {
        flushed.push((wc.wr_id, wc.status));
    }
    let expected: Vec<_> = (0..8)
        .map(|id| (id, uwarp::WcStatus::WrFlushError))
        .collect();
    assert_eq!(flushed, expected);
    drop(server);
}

/// Closing a device resets the connections it still has, as a kernel
/// does for a process that exits: the peer's queue pair hears the RST and
/// goes to Error, instead of waiting on a host gone silent.
#[test]
fn closing_a_device_resets_its_connections_for_the_peer() {
    let (server, client) = devices(CoreThreads::Spawned);
    let (server_end, _client_end) = connected_ends(&server, &client, 64);
    let report = client.close().expect("a DPDK device reports");
    assert_eq!(report.reset_at_shutdown(), 1, "{report:#?}");
    assert!(
        server_end.qp.wait_closed(Duration::from_secs(10)),
        "the server's queue pair never heard of the close"
    );
    drop(server);
}
