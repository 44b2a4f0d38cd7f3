//! The MPA negotiation matrix over real sockets (RFC 5044 section 7.1,
//! RFC 6581 sections 9 and 10): revisions, CRC and Markers in each
//! direction, peer-to-peer with each RTR, IRD/ORD, rejects with private
//! data, startup timeouts and the revision-1 fallback. Every connection
//! that comes up carries a Send each way, checked octet for octet.

mod common;

/// Whether a connect failed in negotiation with `expected`.
fn failed_with(result: &Result<Connection, Error>, expected: NegotiationError) -> bool {
    matches!(result, Err(Error::Startup(StartupError::Negotiation(e))) if *e == expected)
}

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use uwarp_control::*;
use uwarp_stack::mpa::{NegotiationError, StartupError};

/// Posts one receive of 64 octets on each queue pair before it connects.
fn post_inbox(pd: &ProtectionDomain, qp: &QueuePair) {
    let inbox = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    qp.post_recv(RecvWr {
        wr_id: 100,
        sgl: vec![inbox.whole()],
    })
    .unwrap();
    // The region must outlive the receive: keep it for the process.
    std::mem::forget(inbox);
}

/// A Send each way; the server's goes first when peer-to-peer lets it.
fn exchange(client: &End, server: &End, server_first: bool) {
    let to_client = SendWr::new(1, SendOp::Send, Payload::Inline(b"from server".to_vec()));
    let to_server = SendWr::new(2, SendOp::Send, Payload::Inline(b"from client".to_vec()));
    if server_first {
        server.qp.post_send(to_client.clone()).unwrap();
        let wc = client.expect_ok();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::Recv, 11));
    }
    client.qp.post_send(to_server).unwrap();
    if !server_first {
        server.qp.post_send(to_client).unwrap();
    }
    let mut ends = [client, server];
    for end in &mut ends {
        let mut seen = Vec::new();
        let want = if server_first && std::ptr::eq(*end, client) {
            1
        } else {
            2
        };
        while seen.len() < want {
            seen.push(end.expect_ok().opcode);
        }
    }
}

fn params(revision: Revision, crc: bool, markers: bool) -> LocalParams {
    LocalParams {
        revision,
        crc,
        markers,
        ..LocalParams::default()
    }
}

#[test]
fn revisions_crc_and_markers_in_every_combination() {
    for client_rev in [Revision::Rfc5044, Revision::Enhanced] {
        for server_rev in [Revision::Rfc5044, Revision::Enhanced] {
            for bits in 0..16u8 {
                let client = params(client_rev, bits & 1 != 0, bits & 2 != 0);
                let server = params(server_rev, bits & 4 != 0, bits & 8 != 0);
                let label = format!("{client_rev:?}/{server_rev:?} bits {bits:04b}");
                let connect = ConnectParams {
                    mpa: client.clone(),
                    ..ConnectParams::default()
                };
                let result = connect_with(connect, server.clone(), post_inbox);
                if client_rev == Revision::Enhanced && server_rev == Revision::Rfc5044 {
                    // A revision-1 responder cannot answer an enhanced
                    // Request and closes (RFC 6581 section 10).
                    assert!(result.is_err(), "{label}");
                    continue;
                }
                let (c, s) = result.unwrap_or_else(|e| panic!("{label}: {e}"));
                let n = c.connection.negotiated;
                assert_eq!(n.crc, client.crc || server.crc, "{label}");
                assert_eq!(
                    (n.markers_tx, n.markers_rx),
                    (server.markers, client.markers),
                    "{label}"
                );
                assert_eq!(
                    s.connection.negotiated.markers_tx, client.markers,
                    "{label}"
                );
                assert_eq!(n.revision, client_rev.min(server_rev), "{label}");
                exchange(&c, &s, false);
            }
        }
    }
}

#[test]
fn peer_to_peer_with_each_rtr_lets_the_server_speak_first() {
    for rtr in [Rtr::Write, Rtr::Read, Rtr::Send] {
        let client = LocalParams {
            peer_to_peer: Some(RtrSet::only(rtr)),
            ..LocalParams::default()
        };
        let server = LocalParams {
            peer_to_peer: Some(RtrSet::ALL),
            ..LocalParams::default()
        };
        let connect = ConnectParams {
            mpa: client,
            ..ConnectParams::default()
        };
        let (c, s) = connect_with(connect, server, post_inbox).unwrap();
        assert_eq!(c.connection.negotiated.rtr, Some(rtr));
        assert_eq!(s.connection.negotiated.rtr, Some(rtr));
        exchange(&c, &s, true);
    }
}

#[test]
fn peer_to_peer_without_a_common_rtr_fails_on_the_initiator() {
    let (sdev, spd, scq) = device();
    let listener = sdev.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let sqp = sdev.create_qp(&spd, QpInit::new(&scq));
    let server_qp = sqp.clone();
    let server = std::thread::spawn(move || {
        let params = LocalParams {
            peer_to_peer: Some(RtrSet::only(Rtr::Write)),
            ..LocalParams::default()
        };
        let request = listener.get_request(WAIT).unwrap();
        request.accept(&server_qp, params).unwrap();
    });
    let (cdev, cpd, ccq) = device();
    let cqp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    let connect = ConnectParams {
        mpa: LocalParams {
            peer_to_peer: Some(RtrSet::only(Rtr::Send)),
            ..LocalParams::default()
        },
        ..ConnectParams::default()
    };
    let result = cdev.connect(addr, &cqp, connect);
    assert!(
        failed_with(&result, NegotiationError::NoMatchingRtr),
        "{result:?}"
    );
    server.join().unwrap();
    // The responder hears why (RFC 6581 section 9.2) and closes.
    assert_eq!(
        sqp.next_event(WAIT),
        Some(QpEvent::TerminateReceived(TermError::MpaNoMatchingRtr))
    );
    assert!(sqp.wait_closed(WAIT));
}

#[test]
fn a_responder_ord_above_the_initiator_ird_is_insufficient_ird() {
    // A responder that insists on more Reads than the initiator can take:
    // its Reply names an ORD above the initiator's IRD.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        // IRD 4, ORD 9 (the initiator's IRD is 2).
        let mut stream = hand_made_responder(listener, (4, 9));
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        rest
    });
    let (cdev, cpd, ccq) = device();
    let cqp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    let connect = ConnectParams {
        mpa: LocalParams {
            ird: 2,
            ord: 2,
            ..LocalParams::default()
        },
        ..ConnectParams::default()
    };
    let result = cdev.connect(addr, &cqp, connect);
    assert!(
        failed_with(&result, NegotiationError::InsufficientIrd),
        "{result:?}"
    );
    // What reached the peer after the Reply is one FPDU: a Terminate with
    // LLP/MPA error 6.
    let rest = peer.join().unwrap();
    let mut reader = uwarp_stack::mpa::FpduReader::new(false, false);
    reader.push(&rest);
    let ulpdu = reader.next_ulpdu().unwrap().unwrap();
    let segment = uwarp_stack::wire::rdmap::RdmapSegment::parse(&ulpdu).unwrap();
    let terminate = uwarp_stack::wire::terminate::TerminateRepr::parse(
        segment.payload,
        uwarp_stack::wire::terminate::LayoutHint::Rfc5040,
    )
    .unwrap();
    assert_eq!(terminate.error, TermError::MpaInsufficientIrd);
}

#[test]
fn ird_and_ord_follow_rfc_6581() {
    // The responder lowers its ORD to the initiator's IRD and sizes its
    // IRD to the initiator's ORD within its means.
    let client = LocalParams {
        ird: 2,
        ord: 3,
        ..LocalParams::default()
    };
    let server = LocalParams {
        ird: 16,
        ord: 8,
        ..LocalParams::default()
    };
    let connect = ConnectParams {
        mpa: client,
        ..ConnectParams::default()
    };
    let (c, s) = connect_with(connect, server, post_inbox).unwrap();
    let (cn, sn) = (c.connection.negotiated, s.connection.negotiated);
    assert_eq!((sn.ird, sn.ord), (3, 2));
    assert_eq!((cn.ird, cn.ord), (2, 3));
    exchange(&c, &s, false);

    // 0x3FFF leaves IRD/ORD to the application on both sides.
    let unlimited = LocalParams {
        ird: 0x3FFF,
        ord: 0x3FFF,
        ..LocalParams::default()
    };
    let connect = ConnectParams {
        mpa: unlimited.clone(),
        ..ConnectParams::default()
    };
    let (c, s) = connect_with(connect, unlimited, post_inbox).unwrap();
    assert_eq!(c.connection.negotiated.peer_ird, Some(0x3FFF));
    assert_eq!(s.connection.negotiated.peer_ord, Some(0x3FFF));
    exchange(&c, &s, false);
}

#[test]
fn a_reject_carries_private_data_back() {
    let (sdev, _spd, _scq) = device();
    let listener = sdev.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        let request = listener.get_request(WAIT).unwrap();
        assert_eq!(request.private_data(), b"may I?");
        assert_eq!(request.ird_ord(), Some((16, 16)));
        request.reject(b"no, busy").unwrap();
    });
    let (cdev, cpd, ccq) = device();
    let qp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    let connect = ConnectParams {
        mpa: LocalParams {
            private_data: b"may I?".to_vec(),
            ..LocalParams::default()
        },
        ..ConnectParams::default()
    };
    match cdev.connect(addr, &qp, connect) {
        Err(Error::Rejected { private_data }) => assert_eq!(private_data, b"no, busy"),
        other => panic!("expected a reject, got {other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn the_initiator_times_out_when_no_reply_comes() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let (cdev, cpd, ccq) = device();
    let qp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    let connect = ConnectParams {
        timeout: Duration::from_millis(300),
        ..ConnectParams::default()
    };
    let result = cdev.connect(addr, &qp, connect);
    assert!(
        matches!(result, Err(Error::Startup(StartupError::Timeout))),
        "{result:?}"
    );
    drop(silent);
}

#[test]
fn the_responder_closes_when_no_request_comes() {
    let device = Device::open(DeviceConfig {
        startup_timeout: Duration::from_millis(300),
        ..DeviceConfig::default()
    })
    .unwrap();
    let listener = device.listen("127.0.0.1:0").unwrap();
    let mut silent = TcpStream::connect(listener.local_addr()).unwrap();
    silent.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 16];
    // The responder gives up and closes: end of stream, nothing sent.
    assert_eq!(silent.read(&mut buf).unwrap(), 0);
    assert!(matches!(
        listener.get_request(Duration::from_millis(10)),
        Err(Error::Timeout)
    ));
    let _ = silent.write_all(b"late");
}

#[test]
fn an_enhanced_initiator_falls_back_to_revision_1_when_allowed() {
    let (sdev, spd, scq) = device();
    let listener = sdev.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let sqp = sdev.create_qp(&spd, QpInit::new(&scq));
    post_inbox(&spd, &sqp);
    let server_qp = sqp.clone();
    let server = std::thread::spawn(move || {
        let revision_1 = params(Revision::Rfc5044, false, false);
        // The enhanced Request is refused by closing...
        let first = listener.get_request(WAIT).unwrap();
        assert_eq!(first.request.revision, Revision::Enhanced);
        assert!(first.accept(&server_qp, revision_1.clone()).is_err());
        // ...and the retry in revision 1 is accepted.
        let second = listener.get_request(WAIT).unwrap();
        assert_eq!(second.request.revision, Revision::Rfc5044);
        second.accept(&server_qp, revision_1).unwrap()
    });
    let (cdev, cpd, ccq) = device();
    let cqp = cdev.create_qp(&cpd, QpInit::new(&ccq));
    post_inbox(&cpd, &cqp);
    let connect = ConnectParams {
        revision_1_fallback: true,
        ..ConnectParams::default()
    };
    let connection = cdev.connect(addr, &cqp, connect).unwrap();
    assert_eq!(connection.negotiated.revision, Revision::Rfc5044);
    let sconn = server.join().unwrap();
    let c = End {
        device: cdev,
        pd: cpd,
        cq: ccq,
        qp: cqp,
        connection,
    };
    let s = End {
        device: sdev,
        pd: spd,
        cq: scq,
        qp: sqp,
        connection: sconn,
    };
    exchange(&c, &s, false);
}
