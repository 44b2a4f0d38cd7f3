//! The MPA startup phase (RFC 5044 section 7.1, RFC 6581): byte-exact
//! agreement with the frames Linux siw sent and answered in
//! `tests/data/siw/tap/`, the negotiation matrix run initiator against
//! responder, the revision-1 fallback, timeouts, and hostile input.

use std::path::Path;

use uwarp_stack::mpa::startup::DEFAULT_STARTUP_TIMEOUT;
use uwarp_stack::mpa::{
    Initiator, InitiatorOutcome, LocalParams, Negotiated, NegotiationError, Responder, Rtr, RtrSet,
    StartupError,
};
use uwarp_stack::wire::mpa::{Revision, StartupRepr, IRD_ORD_MAX};
use uwarp_stack::wire::WireError;

fn siw_file(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/siw/tap")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Settings that make uwarp's initiator behave like rping on siw.
fn like_siw() -> LocalParams {
    LocalParams {
        ird: 1,
        ord: 1,
        ..LocalParams::default()
    }
}

#[test]
fn initiator_requests_equal_siw_requests() {
    let cases = [
        ("mpa-req-from-siw-7301.bin", like_siw()),
        (
            "mpa-req-from-siw-7302.bin",
            LocalParams {
                crc: true,
                ..like_siw()
            },
        ),
        (
            "mpa-req-from-siw-7303.bin",
            LocalParams {
                revision: Revision::Rfc5044,
                ..like_siw()
            },
        ),
        (
            "mpa-req-from-siw-7304.bin",
            LocalParams {
                peer_to_peer: Some(RtrSet::WRITE_AND_READ),
                ..like_siw()
            },
        ),
    ];
    for (file, local) in cases {
        let initiator = Initiator::new(local, 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
        assert_eq!(initiator.request(), siw_file(file), "{file}");
    }
}

/// Runs `request` through a responder with `local` and returns its Reply.
fn reply_to(request: &[u8], local: &LocalParams) -> Result<(Vec<u8>, Negotiated), StartupError> {
    let mut responder = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    let (used, connect) = responder.on_bytes(request)?;
    assert_eq!(used, request.len());
    assert!(connect.is_some());
    responder.accept(local)
}

#[test]
fn responder_replies_equal_siw_replies() {
    // Revision 1 Request: a revision-1 Reply without private data.
    let (reply, negotiated) = reply_to(&siw_file("probe-7323-rev1.tx.bin"), &like_siw()).unwrap();
    assert_eq!(reply, siw_file("probe-7323-rev1.rx.bin"));
    assert_eq!(negotiated.revision, Revision::Rfc5044);
    assert_eq!(negotiated.peer_ird, None);
    // Revision 2 without S: a revision-2 Reply without S.
    let (reply, _) = reply_to(&siw_file("probe-7325-rev2-noH.tx.bin"), &like_siw()).unwrap();
    assert_eq!(reply, siw_file("probe-7325-rev2-noH.rx.bin"));
}

#[test]
fn peer_to_peer_reply_chooses_the_write_rtr_like_siw() {
    // siw as responder answers siw's 8001 c001 with 8001 8001
    // (tests/data/siw/lo/lo-rping-v2-p2p.pcap).
    let request = siw_file("mpa-req-from-siw-7304.bin");
    let (reply, negotiated) = reply_to(&request, &like_siw()).unwrap();
    let (repr, _) = StartupRepr::parse_bytes(&reply).unwrap();
    assert_eq!(
        repr.enhanced.unwrap().to_bytes().unwrap(),
        [0x80, 0x01, 0x80, 0x01]
    );
    assert_eq!(negotiated.rtr, Some(Rtr::Write));
}

/// Runs a whole startup, initiator against responder, delivering the
/// frames in pieces of `chunk` octets.
fn handshake(
    initiator: LocalParams,
    responder: LocalParams,
    chunk: usize,
) -> Result<(Negotiated, Negotiated), StartupError> {
    let mut init = Initiator::new(initiator, 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    let request = init.request().to_vec();
    let mut connect = None;
    for piece in request.chunks(chunk) {
        let (used, event) = resp.on_bytes(piece)?;
        assert_eq!(used, piece.len());
        connect = connect.or(event);
    }
    assert!(
        connect.is_some(),
        "the Request completes the responder's reader"
    );
    let (reply, theirs) = resp.accept(&responder)?;
    let mut outcome = None;
    for piece in reply.chunks(chunk) {
        let (used, event) = init.on_bytes(piece)?;
        assert_eq!(used, piece.len());
        outcome = outcome.or(event);
    }
    match outcome {
        Some(InitiatorOutcome::Accepted { negotiated, .. }) => Ok((negotiated, theirs)),
        other => panic!("unexpected outcome {other:?}"),
    }
}

#[test]
fn negotiation_matrix() {
    let rtr_sets = [
        None,
        Some(RtrSet::only(Rtr::Send)),
        Some(RtrSet::only(Rtr::Write)),
        Some(RtrSet::only(Rtr::Read)),
        Some(RtrSet::WRITE_AND_READ),
        Some(RtrSet::ALL),
    ];
    let ird_ord = [0u16, 1, 4, 128, IRD_ORD_MAX];
    let mut runs = 0;
    for init_rev in [Revision::Rfc5044, Revision::Enhanced] {
        for resp_rev in [Revision::Rfc5044, Revision::Enhanced] {
            for (init_crc, resp_crc, init_m, resp_m) in flag_combinations() {
                for offered in rtr_sets {
                    for supported in rtr_sets {
                        for (ird, ord) in ird_ord.iter().flat_map(|&i| ird_ord.map(|o| (i, o))) {
                            let initiator = LocalParams {
                                revision: init_rev,
                                crc: init_crc,
                                markers: init_m,
                                ird,
                                ord,
                                peer_to_peer: offered,
                                private_data: b"hello".to_vec(),
                            };
                            let responder = LocalParams {
                                revision: resp_rev,
                                crc: resp_crc,
                                markers: resp_m,
                                ird: 8,
                                ord: 2,
                                peer_to_peer: supported,
                                private_data: Vec::new(),
                            };
                            check_pair(&initiator, &responder);
                            runs += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(runs, 2 * 2 * 16 * 6 * 6 * 25);
}

fn flag_combinations() -> impl Iterator<Item = (bool, bool, bool, bool)> {
    (0..16u8).map(|b| (b & 1 != 0, b & 2 != 0, b & 4 != 0, b & 8 != 0))
}

/// The rules every pair of settings must satisfy (RFC 5044 7.1, RFC 6581).
fn check_pair(initiator: &LocalParams, responder: &LocalParams) {
    let result = handshake(initiator.clone(), responder.clone(), 7);
    let enhanced = initiator.revision == Revision::Enhanced;
    if enhanced && responder.revision == Revision::Rfc5044 {
        // A revision-1 responder cannot answer an enhanced Request.
        assert_eq!(
            result.unwrap_err(),
            StartupError::Negotiation(NegotiationError::InvalidFrame)
        );
        return;
    }
    let offered = initiator.peer_to_peer.filter(|_| enhanced);
    let supported = responder.peer_to_peer.unwrap_or(RtrSet::WRITE_AND_READ);
    let common = offered.map(|o| o.intersect(supported));
    if common.is_some_and(|c| c.choose(&[Rtr::Send, Rtr::Write, Rtr::Read]).is_none()) {
        assert_eq!(
            result.unwrap_err(),
            StartupError::Negotiation(NegotiationError::NoMatchingRtr),
            "{initiator:?} {responder:?}"
        );
        return;
    }
    let (init, resp) = result.unwrap_or_else(|e| panic!("{e:?}: {initiator:?} {responder:?}"));
    assert_eq!(init.revision, initiator.revision);
    assert_eq!(init.crc, initiator.crc || responder.crc);
    assert_eq!(resp.crc, init.crc);
    assert_eq!(init.markers_rx, initiator.markers);
    assert_eq!(init.markers_tx, responder.markers);
    assert_eq!(
        (resp.markers_tx, resp.markers_rx),
        (init.markers_rx, init.markers_tx)
    );
    assert_eq!(init.rtr, resp.rtr);
    if let Some(rtr) = init.rtr {
        assert!(offered.unwrap().contains(rtr) && supported.contains(rtr));
    } else {
        assert!(offered.is_none());
    }
    if enhanced {
        // RFC 6581 9.1: initiator ORD <= responder IRD, responder ORD <=
        // initiator IRD, unless either left it to the application.
        if initiator.ord != IRD_ORD_MAX {
            assert!(init.ord <= resp.ird, "{init:?} {resp:?}");
        }
        if initiator.ird != IRD_ORD_MAX {
            assert!(resp.ord <= init.ird, "{init:?} {resp:?}");
        }
        assert_eq!(resp.peer_ird, Some(initiator.ird));
        assert_eq!(resp.peer_ord, Some(initiator.ord));
        if init.rtr == Some(Rtr::Read) {
            assert!(
                resp.ird >= 1,
                "a Read RTR needs an IRD slot at the responder"
            );
        }
    } else {
        assert_eq!((init.peer_ird, resp.peer_ird), (None, None));
    }
}

#[test]
fn no_automatic_negotiation_leaves_local_values() {
    let initiator = LocalParams {
        ird: IRD_ORD_MAX,
        ord: IRD_ORD_MAX,
        ..LocalParams::default()
    };
    let responder = LocalParams {
        ird: 5,
        ord: 3,
        ..LocalParams::default()
    };
    let (init, resp) = handshake(initiator, responder, 64).unwrap();
    assert_eq!(
        (resp.ird, resp.ord),
        (5, 3),
        "responder keeps its local values"
    );
    assert_eq!(
        (init.peer_ird, init.peer_ord),
        (Some(IRD_ORD_MAX), Some(IRD_ORD_MAX))
    );
    assert_eq!((init.ird, init.ord), (IRD_ORD_MAX, IRD_ORD_MAX));
}

#[test]
fn responder_ord_never_exceeds_initiator_ird() {
    let initiator = LocalParams {
        ird: 2,
        ord: 100,
        ..LocalParams::default()
    };
    let responder = LocalParams {
        ird: 16,
        ord: 64,
        ..LocalParams::default()
    };
    let (init, resp) = handshake(initiator, responder, 3).unwrap();
    assert_eq!(resp.ord, 2);
    assert_eq!(resp.ird, 16, "responder IRD is capped by its resources");
    assert_eq!(init.ord, 16, "initiator ORD drops to the responder's IRD");
}

#[test]
fn reject_carries_private_data_and_the_enhanced_block() {
    let mut init = Initiator::new(LocalParams::default(), 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    resp.on_bytes(init.request()).unwrap();
    let local = LocalParams {
        ird: 3,
        ord: 9,
        ..LocalParams::default()
    };
    let reply = resp.reject(&local, b"go away").unwrap();
    assert_eq!(resp.accept(&local).unwrap_err(), StartupError::WrongState);
    match init.on_bytes(&reply).unwrap() {
        (
            _,
            Some(InitiatorOutcome::Rejected {
                private_data,
                enhanced,
            }),
        ) => {
            assert_eq!(private_data, b"go away");
            let block = enhanced.unwrap();
            assert_eq!((block.ird, block.ord), (3, 9));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn enhanced_initiator_falls_back_to_revision_1() {
    let init = Initiator::new(LocalParams::default(), 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    let rev1_only = LocalParams {
        revision: Revision::Rfc5044,
        ..LocalParams::default()
    };
    let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    resp.on_bytes(init.request()).unwrap();
    // The revision-1 responder cannot answer and closes the connection.
    assert!(resp.accept(&rev1_only).is_err());
    let closed = init.on_peer_closed();
    assert_eq!(
        closed,
        StartupError::ClosedBeforeFrame {
            retry_with_revision_1: true
        }
    );
    let (init, _) = handshake(init.revision_1_fallback(), rev1_only.clone(), 20).unwrap();
    assert_eq!(init.revision, Revision::Rfc5044);
    let rev1 = Initiator::new(rev1_only, 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    assert_eq!(
        rev1.on_peer_closed(),
        StartupError::ClosedBeforeFrame {
            retry_with_revision_1: false
        }
    );
}

#[test]
fn timers_fire_only_while_waiting() {
    let mut init = Initiator::new(LocalParams::default(), 1_000, 5_000).unwrap();
    let mut resp = Responder::new(1_000, 5_000);
    assert_eq!(init.deadline(), 6_000);
    assert!(init.on_timer(5_999).is_ok() && resp.on_timer(5_999).is_ok());
    assert_eq!(init.on_timer(6_000).unwrap_err(), StartupError::Timeout);
    assert_eq!(resp.on_timer(6_000).unwrap_err(), StartupError::Timeout);
    resp.on_bytes(init.request()).unwrap();
    assert!(resp.on_timer(1 << 40).is_ok());
    let (reply, _) = resp.accept(&LocalParams::default()).unwrap();
    init.on_bytes(&reply).unwrap();
    assert!(init.on_timer(1 << 40).is_ok());
}

#[test]
fn octets_after_the_reply_are_left_for_full_operation() {
    let mut init = Initiator::new(LocalParams::default(), 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    let mut stream = init.request().to_vec();
    stream.extend_from_slice(b"FPDU...");
    let (used, connect) = resp.on_bytes(&stream).unwrap();
    assert_eq!(used, init.request().len());
    assert!(connect.is_some());
    assert_eq!(resp.on_bytes(b"more").unwrap(), (0, None));
    let (mut reply, _) = resp.accept(&LocalParams::default()).unwrap();
    let reply_len = reply.len();
    reply.extend_from_slice(&[0, 0x12]);
    let (used, outcome) = init.on_bytes(&reply).unwrap();
    assert_eq!(used, reply_len);
    assert!(matches!(outcome, Some(InitiatorOutcome::Accepted { .. })));
}

#[test]
fn hostile_frames_are_errors_not_panics() {
    let good = Initiator::new(LocalParams::default(), 0, DEFAULT_STARTUP_TIMEOUT)
        .unwrap()
        .request()
        .to_vec();
    // A bad key, an unknown revision, a PD_Length over 512.
    let mut bad_key = good.clone();
    bad_key[7] = b'X';
    let mut bad_rev = good.clone();
    bad_rev[17] = 9;
    let mut long_pd = good.clone();
    long_pd[18..20].copy_from_slice(&600u16.to_be_bytes());
    for (name, frame, expected) in [
        ("key", bad_key, WireError::BadMpaKey),
        ("rev", bad_rev, WireError::UnknownMpaRevision(9)),
        ("pd", long_pd, WireError::PrivateDataTooLong(600)),
    ] {
        let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(
            resp.on_bytes(&frame).unwrap_err(),
            StartupError::Malformed(expected),
            "{name}"
        );
    }
    // A Reply sent to a responder, a Request sent to an initiator.
    let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
    let (reply, _) = {
        let mut other = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
        other.on_bytes(&good).unwrap();
        other.accept(&LocalParams::default()).unwrap()
    };
    assert!(resp.on_bytes(&reply).is_err());
    let mut init = Initiator::new(LocalParams::default(), 0, DEFAULT_STARTUP_TIMEOUT).unwrap();
    assert_eq!(
        init.on_bytes(&good).unwrap_err(),
        StartupError::Negotiation(NegotiationError::InvalidFrame)
    );
    // Every truncation and every single-octet corruption of a Request.
    for cut in 0..good.len() {
        let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(resp.on_bytes(&good[..cut]).unwrap(), (cut, None));
    }
    for at in 0..good.len() {
        for value in [0u8, 0x01, 0x7f, 0x80, 0xff] {
            let mut frame = good.clone();
            frame[at] = value;
            let mut resp = Responder::new(0, DEFAULT_STARTUP_TIMEOUT);
            if let Ok((_, Some(_))) = resp.on_bytes(&frame) {
                let _ = resp.accept(&LocalParams::default());
            }
        }
    }
}

#[test]
fn private_data_limits() {
    let too_long = LocalParams {
        private_data: vec![0; 509],
        ..LocalParams::default()
    };
    assert_eq!(
        Initiator::new(too_long, 0, 1).unwrap_err(),
        WireError::PrivateDataTooLong(513)
    );
    let max = LocalParams {
        private_data: vec![7; 508],
        ..LocalParams::default()
    };
    let (_, _) = handshake(max.clone(), max, 100).unwrap();
}
