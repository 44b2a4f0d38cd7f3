//! The RFC 8797 example: private data in the MPA Request and Reply, the
//! thresholds and remote invalidation both ends derive, and calls that
//! honour them, through `uwarp_interop::nfs`.

use std::time::Duration;

use uwarp::{
    Access, ConnectParams, Device, DeviceConfig, LocalParams, Payload, QpEvent, QpInit, RecvWr,
    SendOp, SendWr, WcOpcode, WcStatus,
};
use uwarp_interop::nfs::{self, Agreement, Call, ClientOutcome, ServerOutcome, Settings};
use uwarp_stack::wire::rpcrdma::RpcRdmaPrivateData;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the example's client and server, each on its own device.
fn exchange(client: Settings, server: Settings, calls: &[Call]) -> (ClientOutcome, ServerOutcome) {
    let server_device = Device::open(DeviceConfig::default()).unwrap();
    let listener = server_device.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let calls = calls.to_vec();
    let client = std::thread::spawn(move || {
        let device = Device::open(DeviceConfig::default()).unwrap();
        nfs::run_client(&device, addr, &client, &calls, TIMEOUT).map_err(|e| e.to_string())
    });
    let server = nfs::run_server(&server_device, &listener, &server, TIMEOUT).unwrap();
    let client = client.join().unwrap().unwrap();
    (client, server)
}

fn client_settings() -> Settings {
    Settings {
        announce: true,
        remote_invalidation: true,
        send_size: 8192,
        receive_size: 4096,
    }
}

fn server_settings() -> Settings {
    Settings {
        announce: true,
        remote_invalidation: true,
        send_size: 16384,
        receive_size: 2048,
    }
}

/// Checks what is true of every exchange: both ends agree, every Send fits
/// its threshold, and each call travelled the way its size demands.
fn check_common(client: &ClientOutcome, server: &ServerOutcome, calls: &[Call]) {
    assert_eq!(client.agreement, server.agreement);
    let agreement = client.agreement;
    assert_eq!(client.calls.len(), calls.len());
    assert_eq!(server.replies.len(), calls.len());
    for (call, reply) in client.calls.iter().zip(&server.replies) {
        assert_eq!(call.xid, reply.xid);
        assert!(call.call_send_len <= agreement.call_threshold as usize);
        assert!(call.reply_send_len <= agreement.reply_threshold);
        assert_eq!(call.call_send_len, reply.call_send_len as usize);
        assert_eq!(call.reply_send_len as usize, reply.reply_send_len);
        assert_eq!(call.long_call, reply.long_call);
        assert_eq!(call.write_chunk, reply.wrote_data_chunk);
        assert_eq!(call.reply_in_chunk, reply.wrote_reply_chunk);
        // What the server invalidated is what the client saw invalidated.
        assert_eq!(call.invalidated, reply.invalidated);
        if agreement.remote_invalidation {
            // One STag of this XID, whenever the call advertised one.
            assert_eq!(call.invalidated, call.advertised.first().copied());
        } else {
            assert_eq!(call.invalidated, None);
        }
    }
}

#[test]
fn thresholds_are_the_smaller_sizes_and_invalidation_needs_both() {
    let client = RpcRdmaPrivateData {
        remote_invalidation: true,
        send_size: 8192,
        receive_size: 4096,
        reserved: 0,
    };
    let server = RpcRdmaPrivateData {
        remote_invalidation: false,
        send_size: 16384,
        receive_size: 2048,
        reserved: 0,
    };
    assert_eq!(
        Agreement::between(&client, &server),
        Agreement {
            call_threshold: 2048,
            reply_threshold: 4096,
            remote_invalidation: false,
        }
    );
    let server = RpcRdmaPrivateData {
        remote_invalidation: true,
        ..server
    };
    assert!(Agreement::between(&client, &server).remote_invalidation);
    // A silent peer has 1 KiB both ways and no R.
    let silent = RpcRdmaPrivateData::default();
    assert_eq!(
        Agreement::between(&silent, &server),
        Agreement {
            call_threshold: 1024,
            reply_threshold: 1024,
            remote_invalidation: false,
        }
    );
}

#[test]
fn private_data_travels_in_request_and_reply() {
    let calls = [Call::Null];
    let (client, server) = exchange(client_settings(), server_settings(), &calls);
    assert_eq!(server.client_announced, Some(client_settings().announced()));
    assert_eq!(client.server_announced, Some(server_settings().announced()));
    check_common(&client, &server, &calls);
}

#[test]
fn remote_invalidation_agreed() {
    let calls = nfs::demo_calls();
    let (client, server) = exchange(client_settings(), server_settings(), &calls);
    assert_eq!(
        client.agreement,
        Agreement {
            call_threshold: 2048,
            reply_threshold: 4096,
            remote_invalidation: true,
        }
    );
    check_common(&client, &server, &calls);
    let c = &client.calls;
    // NULL: inline both ways, nothing advertised, nothing invalidated.
    assert!(!c[0].long_call && !c[0].write_chunk && !c[0].reply_chunk);
    assert_eq!(c[0].invalidated, None);
    // WRITE of 6000 octets exceeds the 2048-octet call threshold: a Long
    // Call, whose read chunk the reply invalidates.
    assert!(c[1].long_call);
    assert_eq!(c[1].advertised.len(), 1);
    assert_eq!(c[1].invalidated, Some(c[1].advertised[0]));
    // A 200-octet READ fits the reply threshold: inline, no chunk.
    assert!(!c[2].write_chunk && !c[2].reply_chunk);
    assert!(c[2].reply_send_len > 200);
    assert_eq!(c[2].invalidated, None);
    // A 64 KiB READ: the data by RDMA Write into the write chunk, which the
    // reply's Send with Invalidate invalidates.
    assert!(c[3].write_chunk && !c[3].long_call);
    assert!(c[3].reply_send_len < 200);
    assert_eq!(c[3].invalidated, Some(c[3].advertised[0]));
    // LIST of 300 entries (9.6 KB): the reply through the reply chunk.
    assert!(c[4].reply_chunk && c[4].reply_in_chunk);
    assert_eq!(c[4].invalidated, Some(c[4].advertised[0]));
}

#[test]
fn remote_invalidation_refused_by_the_server() {
    let server = Settings {
        remote_invalidation: false,
        ..server_settings()
    };
    let calls = nfs::demo_calls();
    let (client, server) = exchange(client_settings(), server, &calls);
    assert!(!client.agreement.remote_invalidation);
    check_common(&client, &server, &calls);
    assert!(client.calls.iter().all(|call| call.invalidated.is_none()));
    // The chunks were still used.
    assert!(client.calls[1].long_call && client.calls[3].write_chunk);
}

#[test]
fn remote_invalidation_not_offered_by_the_client() {
    let client = Settings {
        remote_invalidation: false,
        ..client_settings()
    };
    let calls = nfs::demo_calls();
    let (client, server) = exchange(client, server_settings(), &calls);
    assert!(!server.agreement.remote_invalidation);
    check_common(&client, &server, &calls);
    assert!(server
        .replies
        .iter()
        .all(|reply| reply.invalidated.is_none()));
}

#[test]
fn a_silent_client_gets_the_defaults() {
    let client = Settings {
        announce: false,
        ..client_settings()
    };
    let calls = nfs::demo_calls();
    let (client, server) = exchange(client, server_settings(), &calls);
    assert_eq!(server.client_announced, None);
    assert_eq!(
        server.agreement,
        Agreement {
            call_threshold: 1024,
            reply_threshold: 1024,
            remote_invalidation: false,
        }
    );
    check_common(&client, &server, &calls);
    // With 1 KiB both ways the 200-octet READ still fits inline.
    assert!(!client.calls[2].write_chunk);
}

#[test]
fn large_thresholds_carry_everything_inline() {
    let big = Settings {
        announce: true,
        remote_invalidation: true,
        send_size: 256 * 1024,
        receive_size: 256 * 1024,
    };
    let calls = [
        Call::Write { len: 6000 },
        Call::Read { len: 64 * 1024 },
        Call::List { entries: 300 },
    ];
    let (client, server) = exchange(big, big, &calls);
    assert_eq!(client.agreement.call_threshold, 256 * 1024);
    assert_eq!(client.agreement.reply_threshold, 256 * 1024);
    check_common(&client, &server, &calls);
    for call in &client.calls {
        assert!(!call.long_call && !call.write_chunk && !call.reply_chunk);
        assert!(call.advertised.is_empty());
        assert_eq!(call.invalidated, None);
    }
}

#[test]
fn private_data_found_after_other_octets() {
    // RFC 8797 section 5.2: the message may sit at any offset.
    let message = client_settings().announced().to_bytes().unwrap();
    let mut private_data = b"other".to_vec();
    private_data.extend_from_slice(&message);
    assert_eq!(
        nfs::peer_announced(&private_data),
        Some(client_settings().announced())
    );
    assert_eq!(nfs::peer_announced(b"nothing here"), None);
}

#[test]
fn rpc_rdma_header_round_trips() {
    let header = nfs::Header {
        xid: 7,
        credit: 4,
        proc_: 1,
        reads: vec![(
            0,
            nfs::Segment {
                handle: 0x1234,
                length: 6000,
                offset: 0xdead_beef_0000,
            },
        )],
        writes: vec![vec![nfs::Segment {
            handle: 0x5678,
            length: 65536,
            offset: 0x1000,
        }]],
        reply: Some(vec![nfs::Segment {
            handle: 0x9abc,
            length: 100,
            offset: 0x2000,
        }]),
    };
    let mut bytes = header.encode();
    // xid, vers, credit, proc, read list (1 entry + end), write list (1
    // chunk of 1 segment + end), reply chunk (1 segment).
    assert_eq!(
        bytes.len(),
        16 + (4 + 4 + 16) + 4 + (4 + 4 + 16) + 4 + (4 + 4 + 16)
    );
    assert_eq!(&bytes[..8], &[0, 0, 0, 7, 0, 0, 0, 1]);
    bytes.extend_from_slice(b"rest");
    let (decoded, rest) = nfs::Header::decode(&bytes).unwrap();
    assert_eq!(decoded, header);
    assert_eq!(rest, b"rest");
    assert_eq!(decoded.handles(), [0x1234, 0x5678, 0x9abc]);
}

/// What the example relies on, checked directly on the API: after a Send
/// with Invalidate, the client's STag refuses the server's RDMA Write.
#[test]
fn an_invalidated_stag_refuses_rdma() {
    let device = Device::open(DeviceConfig::default()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let server_cq = device.create_cq(16);
    let server_qp = device.create_qp(&pd, QpInit::new(&server_cq));
    let listener = device.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();

    let client_device = Device::open(DeviceConfig::default()).unwrap();
    let client_pd = client_device.alloc_pd().unwrap();
    let client_cq = client_device.create_cq(16);
    let client_qp = client_device.create_qp(&client_pd, QpInit::new(&client_cq));
    let inbox = client_pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    let chunk = client_pd
        .alloc_mr(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    client_qp
        .post_recv(RecvWr {
            wr_id: 1,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
    let server_inbox = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    server_qp
        .post_recv(RecvWr {
            wr_id: 2,
            sgl: vec![server_inbox.whole()],
        })
        .unwrap();
    let accept = {
        let server_qp = server_qp.clone();
        std::thread::spawn(move || {
            let request = listener.get_request(TIMEOUT).unwrap();
            request.accept(&server_qp, LocalParams::default()).unwrap();
        })
    };
    client_device
        .connect(addr, &client_qp, ConnectParams::default())
        .unwrap();
    accept.join().unwrap();

    // The client's "call" (the responder may not send first).
    client_qp
        .post_send(SendWr::new(
            3,
            SendOp::Send,
            Payload::Inline(b"call".to_vec()),
        ))
        .unwrap();
    let wc = server_cq.poll_blocking(TIMEOUT).unwrap();
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Success));

    // A Write to the chunk works, then the reply invalidates it.
    let write = |wr_id, data: &[u8]| {
        SendWr::new(
            wr_id,
            SendOp::Write {
                remote_addr: chunk.addr(),
                rkey: chunk.rkey(),
            },
            Payload::Inline(data.to_vec()),
        )
    };
    server_qp.post_send(write(4, b"data")).unwrap();
    let reply = SendWr::new(
        5,
        SendOp::SendWithInvalidate {
            invalidate: chunk.rkey(),
        },
        Payload::Inline(b"reply".to_vec()),
    );
    server_qp.post_send(reply).unwrap();
    let mut server_wcs: Vec<_> = (0..2)
        .map(|_| server_cq.poll_blocking(TIMEOUT).unwrap())
        .collect();
    server_wcs.sort_by_key(|wc| wc.wr_id);
    assert_eq!(
        server_wcs
            .iter()
            .map(|wc| (wc.wr_id, wc.status))
            .collect::<Vec<_>>(),
        [(4, WcStatus::Success), (5, WcStatus::Success)]
    );
    let mut client_wcs: Vec<_> = (0..2)
        .map(|_| client_cq.poll_blocking(TIMEOUT).unwrap())
        .collect();
    client_wcs.sort_by_key(|wc| wc.wr_id);
    let received = client_wcs[0];
    assert_eq!((received.wr_id, received.opcode), (1, WcOpcode::Recv));
    assert_eq!(received.invalidated_rkey, Some(chunk.rkey()));
    let mut got = [0u8; 4];
    chunk.buffer().read_at(0, &mut got).unwrap();
    assert_eq!(&got, b"data");

    // Now the STag is invalid: the next Write is refused. An RDMA Write
    // completes locally once sent (RFC 5040 has no acknowledgement), so the
    // refusal arrives as the client's Terminate.
    server_qp.post_send(write(6, b"late")).unwrap();
    let event = client_qp.next_event(TIMEOUT).unwrap();
    assert!(matches!(event, QpEvent::TerminateSent(_)), "{event:?}");
    let event = server_qp.next_event(TIMEOUT).unwrap();
    assert!(matches!(event, QpEvent::TerminateReceived(_)), "{event:?}");
    chunk.buffer().read_at(0, &mut got).unwrap();
    assert_eq!(&got, b"data");
}

/// The example binary itself: both sides in one process, then as two
/// processes (`-s` and `-c`); each exits 0.
#[test]
fn example_binary_runs() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let binary = uwarp_testing::example_binary("uwarp-interop", "nfs_private_data");

    let one = Command::new(&binary).args(["-p", "0"]).output().unwrap();
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(
        text.contains(
            "call threshold 2048 octets, reply threshold 4096 octets, remote invalidation yes"
        ),
        "{text}"
    );

    let mut server = Command::new(&binary)
        .args([
            "-s",
            "-p",
            "0",
            "--send-size",
            "16384",
            "--receive-size",
            "2048",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let port = first.rsplit(':').next().unwrap().to_string();
    let client = Command::new(&binary)
        .args(["-c", "-p", &port, "--send-size", "8192"])
        .output()
        .unwrap();
    let server_out: Vec<String> = lines.map_while(Result::ok).collect();
    let server_status = server.wait().unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server_status.success());
    assert!(server_out
        .iter()
        .any(|line| line.contains("reply written to the reply chunk")));
}
