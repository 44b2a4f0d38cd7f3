//! The socket transport's connections run by the application's own
//! threads (`transport/socket/conn_cell.rs`): an application that waits
//! by spinning on its completion queue is left its sockets, posts and
//! reads on its own thread, and hands them back when it sleeps. Checked
//! here: a spinning ping-pong of every size (up to messages larger than
//! one read or one write of a round) arrives intact and ran on the
//! application's threads; switching between spinning and sleeping on
//! either side, many times, loses nothing; several threads posting to and
//! polling one queue pair at once, while the dataplane thread runs it
//! too, lose and repeat nothing; a chain posted together arrives whole.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use uwarp_testing::pair::*;

use uwarp::*;

/// Polls `end`'s queue without ever sleeping until a completion comes,
/// as perftest and MPI progress loops do; fails after [`WAIT`].
fn spin_for(end: &End) -> WorkCompletion {
    spin_for_queue(&end.cq)
}

/// How an end waits for its completions in a phase.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Spin,
    Sleep,
}

impl Wait {
    fn next(self, end: &End) -> WorkCompletion {
        match self {
            Wait::Spin => spin_for(end),
            Wait::Sleep => end.expect_ok(),
        }
    }
}

/// Sizes across one FPDU, one read of a round (256 KiB) and several.
const SIZES: [usize; 7] = [0, 1, 1400, 4096, 65_536, 300_000, 1_500_000];

/// `rounds` round trips of Sends: the client sends, the server answers
/// with the same octets, each end waiting as `waits(round)` says; every
/// message checked. Returns both ends.
fn ping_pong(rounds: usize, waits: impl Fn(usize) -> (Wait, Wait) + Sync) -> (End, End) {
    let (client, server) = connect();
    let largest = *SIZES.iter().max().unwrap();
    let flags = Access::LOCAL_WRITE;
    let (c_out, c_in) = (
        client.pd.alloc_mr(largest, flags).unwrap(),
        client.pd.alloc_mr(largest, flags).unwrap(),
    );
    let s_bufs = [
        server.pd.alloc_mr(largest, flags).unwrap(),
        server.pd.alloc_mr(largest, flags).unwrap(),
    ];
    // Two buffers in turn, a receive always posted ahead: the client's
    // next Send may come as soon as the answer is out.
    let post_recv = |round: usize| {
        let recv = RecvWr {
            wr_id: round as u64,
            sgl: vec![s_bufs[round % 2].sge(0, largest as u32)],
        };
        server.qp.post_recv(recv).unwrap();
    };
    post_recv(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..rounds {
                let len = SIZES[round % SIZES.len()];
                let wait = waits(round).1;
                let wc = wait.next(&server);
                assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::Recv, len as u32));
                post_recv(round + 1);
                let sge = s_bufs[round % 2].sge(0, len as u32);
                let echo = SendWr::new(round as u64, SendOp::Send, Payload::Sgl(vec![sge]));
                server.qp.post_send(echo).unwrap();
                assert_eq!(wait.next(&server).opcode, WcOpcode::Send);
            }
        });
        for round in 0..rounds {
            let len = SIZES[round % SIZES.len()];
            let wait = waits(round).0;
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + round) as u8).collect();
            c_out.buffer().write_at(0, &data).unwrap();
            let recv = RecvWr {
                wr_id: round as u64,
                sgl: vec![c_in.sge(0, largest as u32)],
            };
            client.qp.post_recv(recv).unwrap();
            let send = SendWr::new(
                round as u64,
                SendOp::Send,
                Payload::Sgl(vec![c_out.sge(0, len as u32)]),
            );
            client.qp.post_send(send).unwrap();
            // The Send's and the answer's completions, in either order.
            let (a, b) = (wait.next(&client), wait.next(&client));
            let answer = if a.opcode == WcOpcode::Recv { a } else { b };
            assert_eq!(answer.byte_len, len as u32, "round {round}");
            let mut back = vec![0; len];
            c_in.buffer().read_at(0, &mut back).unwrap();
            assert!(
                back == data,
                "round {round}: the answer of {len} octets differs"
            );
        }
    });
    (client, server)
}

#[test]
fn a_spinning_ping_pong_of_every_size_runs_on_the_application_threads() {
    let (client, server) = ping_pong(10 * SIZES.len(), |_| (Wait::Spin, Wait::Spin));
    for (end, name) in [(&client, "client"), (&server, "server")] {
        let counters = end.qp.counters();
        assert!(
            counters.application_rounds > 0,
            "the {name}'s application thread ran no round: {counters:?}"
        );
        assert_eq!(counters.terminates_received + counters.terminates_sent, 0);
    }
}

#[test]
fn an_application_that_sleeps_leaves_its_connection_to_the_dataplane_thread() {
    let (client, server) = ping_pong(3 * SIZES.len(), |_| (Wait::Sleep, Wait::Sleep));
    for end in [&client, &server] {
        assert_eq!(
            end.qp.counters().application_rounds,
            0,
            "{:?}",
            end.qp.counters()
        );
    }
}

#[test]
fn switching_between_spinning_and_sleeping_loses_nothing() {
    // Phases of a few rounds, each end switching on its own beat, so
    // every pairing meets every hand-over.
    let waits = |round: usize| {
        let pick = |beat: usize| {
            if (round / beat) % 2 == 0 {
                Wait::Spin
            } else {
                Wait::Sleep
            }
        };
        (pick(5), pick(3))
    };
    let (client, server) = ping_pong(30 * SIZES.len(), waits);
    assert!(client.qp.counters().application_rounds > 0);
    assert!(server.qp.counters().application_rounds > 0);
}

#[test]
fn threads_posting_and_polling_one_queue_pair_at_once_lose_and_repeat_nothing() {
    const POSTERS: u64 = 4;
    const EACH: u64 = 400;
    let (client, server) = connect();
    let inbox = server
        .pd
        .alloc_mr(8 * (POSTERS * EACH) as usize, Access::LOCAL_WRITE)
        .unwrap();
    for i in 0..POSTERS * EACH {
        let recv = RecvWr {
            wr_id: i,
            sgl: vec![inbox.sge((8 * i) as usize, 8)],
        };
        server.qp.post_recv(recv).unwrap();
    }
    let completed = AtomicU64::new(0);
    let received = std::thread::scope(|scope| {
        let receiver = scope.spawn(|| {
            (0..POSTERS * EACH)
                .map(|_| spin_for(&server).wr_id)
                .collect::<BTreeSet<_>>()
        });
        // Two threads poll the client's queue while four post to its
        // queue pair, taking turns with the dataplane thread.
        for _ in 0..2 {
            scope.spawn(|| {
                let deadline = Instant::now() + WAIT;
                while completed.load(Ordering::Relaxed) < POSTERS * EACH {
                    if let Some(wc) = client.cq.poll_one() {
                        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                        completed.fetch_add(1, Ordering::Relaxed);
                    }
                    assert!(Instant::now() < deadline, "sends not completed in time");
                }
            });
        }
        for poster in 0..POSTERS {
            let client = &client;
            scope.spawn(move || {
                for n in 0..EACH {
                    let tag = poster << 32 | n;
                    let wr = SendWr::new(
                        tag,
                        SendOp::Send,
                        Payload::Inline(tag.to_le_bytes().to_vec()),
                    );
                    // A full send queue answers ENOMEM: try again.
                    let deadline = Instant::now() + WAIT;
                    while client.qp.post_send(wr.clone()).is_err() {
                        assert!(Instant::now() < deadline, "no room to post in time");
                        std::thread::yield_now();
                    }
                }
            });
        }
        receiver.join().unwrap()
    });
    assert_eq!(
        received.len() as u64,
        POSTERS * EACH,
        "a receive completed twice"
    );
    // Every message arrived once, each poster's in the order it posted.
    let mut tags: Vec<u64> = (0..POSTERS * EACH)
        .map(|i| {
            let mut octets = [0; 8];
            inbox
                .buffer()
                .read_at((8 * i) as usize, &mut octets)
                .unwrap();
            u64::from_le_bytes(octets)
        })
        .collect();
    for poster in 0..POSTERS {
        let own: Vec<u64> = tags
            .iter()
            .copied()
            .filter(|tag| tag >> 32 == poster)
            .collect();
        let expected: Vec<u64> = (0..EACH).map(|n| poster << 32 | n).collect();
        assert_eq!(own, expected, "poster {poster}'s messages");
    }
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len() as u64, POSTERS * EACH);
}

#[test]
fn a_chain_posted_together_arrives_whole_and_in_order() {
    let (client, server) = connect();
    let inbox = server.pd.alloc_mr(64 * 8, Access::LOCAL_WRITE).unwrap();
    for i in 0..64u64 {
        let recv = RecvWr {
            wr_id: i,
            sgl: vec![inbox.sge((8 * i) as usize, 8)],
        };
        server.qp.post_recv(recv).unwrap();
    }
    // Spin first, so the connection is the application's and the posts
    // below are held until the chain ends.
    let ping = SendWr::new(100, SendOp::Send, Payload::Inline(vec![0; 8]));
    client.qp.post_send(ping).unwrap();
    spin_for(&client);
    assert_eq!(spin_for(&server).wr_id, 0);
    uwarp::post_together(|| {
        for i in 1..64u64 {
            let wr = SendWr::new(i, SendOp::Send, Payload::Inline(i.to_le_bytes().to_vec()));
            client.qp.post_send(wr).unwrap();
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut done = 0;
    while done < 63 {
        if let Some(wc) = server.cq.poll_one() {
            assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, done + 1));
            done += 1;
        }
        let _ = client.cq.poll_one();
        assert!(
            Instant::now() < deadline,
            "the chain did not arrive in time"
        );
    }
    for i in 1..64u64 {
        let mut octets = [0; 8];
        inbox
            .buffer()
            .read_at((8 * i) as usize, &mut octets)
            .unwrap();
        assert_eq!(u64::from_le_bytes(octets), i);
    }
}

#[test]
fn connections_ending_beside_a_spinning_one_on_a_shared_queue_lose_nothing() {
    // The server spins on one queue that a busy connection and a stream
    // of short-lived ones share: each short one ends (its client
    // disconnects) while the server's polls run the queue's sockets.
    const ROUNDS: u64 = 2000;
    const CHURN: usize = 40;
    let Devices {
        server: sdev,
        client: cdev,
        listen,
    } = Devices::sockets().unwrap();
    let (spd, scq) = (sdev.alloc_pd().unwrap(), sdev.create_cq(CQ_DEPTH));
    let (cpd, ccq) = (cdev.alloc_pd().unwrap(), cdev.create_cq(CQ_DEPTH));
    let listener = sdev.listen(listen).unwrap();
    let addr = listener.local_addr();
    let busy_server = sdev.create_qp(&spd, QpInit::new(&scq));
    let busy_client = cdev.create_qp(&cpd, QpInit::new(&ccq));
    let (s_box, c_box) = (
        spd.alloc_mr(8, Access::LOCAL_WRITE).unwrap(),
        cpd.alloc_mr(8, Access::LOCAL_WRITE).unwrap(),
    );
    let recv = |qp: &QueuePair, mr: &MemoryRegion, id: u64| {
        let sgl = vec![mr.whole()];
        qp.post_recv(RecvWr { wr_id: id, sgl }).unwrap();
    };
    recv(&busy_server, &s_box, 0);
    std::thread::scope(|scope| {
        let accepting = scope.spawn(|| {
            let request = listener.get_request(WAIT).unwrap();
            request
                .accept(&busy_server, LocalParams::default())
                .unwrap();
            // The short-lived ones, on the same queue.
            (0..CHURN)
                .map(|_| {
                    let qp = sdev.create_qp(&spd, QpInit::new(&scq));
                    let request = listener.get_request(WAIT).unwrap();
                    request.accept(&qp, LocalParams::default()).unwrap();
                    qp
                })
                .collect::<Vec<_>>()
        });
        cdev.connect(addr, &busy_client, ConnectParams::default())
            .unwrap();
        // The server: echoes every message of the busy connection,
        // spinning; the short ones' completions (none) and flushes pass.
        scope.spawn(|| {
            let deadline = Instant::now() + WAIT;
            let mut echoed = 0;
            while echoed < ROUNDS {
                assert!(Instant::now() < deadline, "the server stalled at {echoed}");
                let Some(wc) = scq.poll_one() else {
                    continue;
                };
                if wc.qp_num != busy_server.num() || wc.opcode != WcOpcode::Recv {
                    continue;
                }
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                echoed += 1;
                recv(&busy_server, &s_box, echoed);
                let echo = SendWr::new(echoed, SendOp::Send, Payload::Sgl(vec![s_box.whole()]));
                busy_server.post_send(echo).unwrap();
            }
        });
        scope.spawn(|| {
            for _ in 0..CHURN {
                let cq = cdev.create_cq(16);
                let qp = cdev.create_qp(&cpd, QpInit::new(&cq));
                cdev.connect(addr, &qp, ConnectParams::default()).unwrap();
                qp.disconnect();
                assert_eq!(qp.next_event(WAIT), Some(QpEvent::Disconnected));
            }
        });
        for round in 0..ROUNDS {
            recv(&busy_client, &c_box, round);
            c_box.buffer().write_at(0, &round.to_le_bytes()).unwrap();
            let wr = SendWr::new(round, SendOp::Send, Payload::Sgl(vec![c_box.whole()]));
            busy_client.post_send(wr).unwrap();
            let mut answered = false;
            while !answered {
                let wc = spin_for_queue(&ccq);
                answered = wc.opcode == WcOpcode::Recv;
            }
            let mut octets = [0; 8];
            c_box.buffer().read_at(0, &mut octets).unwrap();
            assert_eq!(u64::from_le_bytes(octets), round, "round {round}'s echo");
        }
        accepting.join().unwrap();
    });
}

/// Polls `cq` without ever sleeping until a completion comes; fails
/// after [`WAIT`].
fn spin_for_queue(cq: &CompletionQueue) -> WorkCompletion {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(wc) = cq.poll_one() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            return wc;
        }
        assert!(Instant::now() < deadline, "no completion in time");
    }
}
