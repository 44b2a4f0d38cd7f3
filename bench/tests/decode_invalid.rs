//! `uwarp-perf decode` on peers that misbehave: every field of an invalid
//! FPDU or startup frame beside the error, and Terminates whose control
//! word reads both ways, decided by their context (issue 30).
//!
//! Each invalid FPDU is a real capture of siw answering it
//! (`tests/data/siw/tap/`: the bad queue number and RDMAP version from
//! the project's start, the unknown opcode, bad DDP version, bad MSN, Send
//! too long and Read Request with a bad STag written by
//! `interop/tests/siw_invalid_fpdus.rs`). Two cases are synthesised here
//! with uwarp's emitters and capture writer, as no single siw exchange
//! holds them: a Terminate that only an earlier connection's Terminate of
//! the same peer decides, and invalid startup frames. There a host
//! (10.99.0.1) sends and siw's side (10.99.0.2) answers as siw does, in
//! its layout and with the headers it echoes (see
//! `tests/data/siw/README.md`).

use std::net::SocketAddrV4;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use uwarp_bench::capture::{read_capture, read_capture_bytes, PcapTcpWriter};
use uwarp_bench::decode::{decode_streams, DecodeOptions, Record, RecordKind};
use uwarp_stack::wire::ddp::{BufferModel, DdpRepr};
use uwarp_stack::wire::fpdu;
use uwarp_stack::wire::mpa::FrameKind;
use uwarp_stack::wire::terminate::TermError;
use uwarp_testing::siw_frames::{startup, untagged};

const HOST: [u8; 4] = [10, 99, 0, 1];
const SIW: [u8; 4] = [10, 99, 0, 2];

/// siw's Terminate ULPDU: `control` in siw's layout, then what it echoes.
fn siw_terminate(control: [u8; 4], echo: &[u8]) -> Vec<u8> {
    untagged(0x47, 2, 1, &[&control[..], echo].concat())
}

/// A capture of connections from the host to siw, each the startup
/// frames and then `(from_host, ulpdu)` FPDUs without CRC.
fn capture(connections: &[&[(bool, Vec<u8>)]]) -> Vec<Record> {
    let ends = |port| {
        (
            SocketAddrV4::new(HOST.into(), 40000 + port),
            SocketAddrV4::new(SIW.into(), 7400),
        )
    };
    let (client, server) = ends(0);
    let mut pcap = PcapTcpWriter::new(Vec::new(), client, server).unwrap();
    for (i, fpdus) in connections.iter().enumerate() {
        if i > 0 {
            let (client, server) = ends(i as u16);
            pcap.next_connection(client, server).unwrap();
        }
        pcap.handshake().unwrap();
        pcap.send(true, &startup(FrameKind::Request)).unwrap();
        pcap.send(false, &startup(FrameKind::Reply)).unwrap();
        for (from_host, ulpdu) in fpdus.iter() {
            pcap.send(*from_host, &fpdu::to_vec(&[ulpdu], false).unwrap())
                .unwrap();
        }
    }
    let bytes = pcap.finish().unwrap();
    decode_streams(
        &read_capture_bytes(&bytes).unwrap(),
        &DecodeOptions::default(),
    )
}

/// The FPDU records as JSON: the host's invalid one, siw's Terminate.
fn fpdus(records: &[Record]) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r.kind == RecordKind::Fpdu)
        .map(Record::to_json)
        .collect()
}

/// Checks `record` has every field of `expected` with its value.
fn has_fields(record: &Value, expected: &Value) {
    for (name, value) in expected.as_object().unwrap() {
        assert_eq!(&record[name], value, "field {name} of {record}");
    }
}

/// Checks the host's FPDU and siw's Terminate that answers it.
fn check_exchange(fpdus: &[Value], fields: Value, error: Option<&str>, term: TermError, by: &str) {
    let [sent, answer] = fpdus else {
        panic!("expected two FPDUs: {fpdus:?}");
    };
    has_fields(sent, &fields);
    match error {
        Some(error) => assert_eq!(sent["error"], error, "{sent}"),
        None => assert!(sent.get("error").is_none(), "{sent}"),
    }
    assert_eq!(answer["term"]["name"], term.name(), "{answer}");
    assert_eq!(answer["term"]["layout"], "siw", "{answer}");
    assert_eq!(answer["term"]["evidence"], by, "{answer}");
    assert_eq!(answer["term"]["ambiguous"], false, "{answer}");
    assert_eq!(answer["term"]["answers"], sent["frame"], "{answer}");
    assert_eq!(
        sent["terminated_by"],
        json!({ "frame": answer["frame"].clone(), "error": term.name() })
    );
}

#[test]
fn unknown_opcode_keeps_its_fields_and_siw_answer_is_read_from_it() {
    // siw answers with only the control word, valid in both layouts:
    // RDMAP unexpected opcode as siw means it, insufficient IRD as RFC.
    let fpdus = siw_capture("tap-7401-probe-unknown-opcode.pcap");
    let fields = json!({
        "ddp_ver": 1, "rdmap_ver": 1, "opcode": 12, "T": false, "L": true,
        "qn": 0, "msn": 1, "mo": 0, "payload_len": 16, "mpa_len": 34, "pad": "", "crc": "off",
    });
    assert!(fpdus[0].get("op").is_none());
    check_exchange(
        &fpdus,
        fields,
        Some("unknown RDMAP opcode 0xc"),
        TermError::RdmapUnexpectedOpcode,
        "answered frame",
    );
}

#[test]
fn bad_ddp_version_keeps_every_other_field() {
    let fields = json!({
        "ddp_ver": 2, "rdmap_ver": 1, "opcode": 3, "op": "Send", "L": true,
        "qn": 0, "msn": 1, "mo": 0, "payload_len": 16,
    });
    check_exchange(
        &siw_capture("tap-7402-probe-bad-ddp-version.pcap"),
        fields,
        Some("DDP version 2, expected 1"),
        TermError::DdpUntaggedInvalidVersion,
        "control word",
    );
}

#[test]
fn bad_msn_is_named_against_the_queue_count() {
    check_exchange(
        &siw_capture("tap-7403-probe-bad-msn.pcap"),
        json!({ "op": "Send", "qn": 0, "msn": 7 }),
        Some("MSN 7 on queue 0, expected 1"),
        TermError::DdpUntaggedMsnRange,
        "control word",
    );
}

#[test]
fn a_send_longer_than_the_receive_is_named_by_the_terminate() {
    // Nothing on the wire says how long the receive was (rping's is 16
    // octets): the Send is valid, and siw's Terminate ("no buffer", where
    // RFC 5041 has "too long") marks it.
    check_exchange(
        &siw_capture("tap-7404-probe-send-too-long.pcap"),
        json!({ "op": "Send", "qn": 0, "msn": 1, "payload_len": 200 }),
        None,
        TermError::DdpUntaggedNoBuffer,
        "control word",
    );
}

#[test]
fn invalid_stag_in_a_read_request_is_decided_by_the_echoed_headers() {
    // M, D and R in siw's layout; as RFC 5040 the same control word is a
    // DDP local catastrophic error with reserved bits set.
    let fpdus = siw_capture("tap-7405-probe-read-request-bad-stag.pcap");
    check_exchange(
        &fpdus,
        json!({
            "op": "RDMA Read Request", "qn": 1, "msn": 1,
            "rreq": {
                "sink_stag": "0x12345600", "sink_to": "0x7f0000002000", "size": 64,
                "src_stag": "0xdead0000", "src_to": "0x1000",
            },
        }),
        None,
        TermError::RdmapInvalidStag,
        "echoed headers",
    );
    assert_eq!(fpdus[1]["term"]["R"], true);
}

#[test]
fn earlier_terminates_of_the_same_peer_decide_and_nothing_else_leaves_it_ambiguous() {
    // siw's answer to a bad-STag Write settles its layout; its next
    // Terminate, RDMAP invalid version after a valid Send, answers
    // nothing the Send could cause in either reading.
    let write = {
        let ddp = DdpRepr {
            last: true,
            reserved: 0,
            ulp_control: 0x40,
            model: BufferModel::Tagged {
                stag: 0xdead_be00,
                to: 0x1000,
            },
        };
        let mut ulpdu = vec![0; ddp.header_len()];
        ddp.emit(&mut ulpdu).unwrap();
        [ulpdu, vec![0x5a; 16]].concat()
    };
    let bad_stag = siw_terminate([0x11, 0x00, 0x03, 0], &[&[0, 16], &write[..14]].concat());
    let first: &[(bool, Vec<u8>)] = &[(true, write), (false, bad_stag)];
    let send = untagged(0x43, 0, 1, &[0x5a; 16]);
    let second: &[(bool, Vec<u8>)] = &[
        (true, send),
        (false, siw_terminate([0x20, 0x05, 0, 0], &[])),
    ];

    let both = fpdus(&capture(&[first, second]));
    assert_eq!(both[1]["term"]["evidence"], "echoed headers", "{}", both[1]);
    let decided = &both[3]["term"];
    assert_eq!(decided["evidence"], "earlier terminate", "{decided}");
    assert_eq!(decided["name"], TermError::RdmapInvalidVersion.name());
    assert_eq!(decided["layout"], "siw");
    assert!(decided.get("answers").is_none(), "{decided}");

    let alone = fpdus(&capture(&[second]));
    let term = &alone[1]["term"];
    assert_eq!(term["ambiguous"], true, "{term}");
    assert!(term.get("evidence").is_none(), "{term}");
    assert_eq!(term["layout"], "rfc5040");
    assert_eq!(term["name"], TermError::MpaLocalCatastrophic.name());
}

/// A real siw capture's records, by the default options.
fn siw_capture(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/siw/tap")
        .join(name);
    fpdus(&decode_streams(
        &read_capture(&path).unwrap(),
        &DecodeOptions::default(),
    ))
}

#[test]
fn siw_bad_queue_number_capture() {
    check_exchange(
        &siw_capture("tap-7333-rev-probe-term-bad-qn.pcap"),
        json!({ "ddp_ver": 1, "rdmap_ver": 1, "opcode": 3, "op": "Send", "qn": 5, "msn": 1 }),
        Some("queue number 5: a Send goes to queue 0"),
        TermError::DdpUntaggedInvalidQn,
        "control word",
    );
}

#[test]
fn siw_bad_rdmap_version_capture_is_decided_by_the_answered_frame() {
    check_exchange(
        &siw_capture("tap-7335-rev-probe-term-bad-rdmap-version.pcap"),
        json!({
            "ddp_ver": 1, "rdmap_ver": 0, "opcode": 3, "op": "Send",
            "qn": 0, "msn": 1, "mo": 0, "payload_len": 16,
        }),
        Some("RDMAP version 0, expected 1"),
        TermError::RdmapInvalidVersion,
        "answered frame",
    );
}

#[test]
fn invalid_startup_frames_show_their_fields() {
    let mut request = startup(FrameKind::Request);
    request[16] |= 0x40;
    request[17] = 3;
    // Revision 3, and a Reply whose PD_Length announces more than follows.
    let mut reply = startup(FrameKind::Reply);
    reply[19] = 8;
    let mut pcap = PcapTcpWriter::new(
        Vec::new(),
        SocketAddrV4::new(HOST.into(), 40000),
        SocketAddrV4::new(SIW.into(), 7400),
    )
    .unwrap();
    pcap.handshake().unwrap();
    pcap.send(true, &request).unwrap();
    pcap.send(false, &reply).unwrap();
    let bytes = pcap.finish().unwrap();
    let records = decode_streams(
        &read_capture_bytes(&bytes).unwrap(),
        &DecodeOptions::default(),
    );
    let request = records[0].to_json();
    has_fields(
        &request,
        &json!({
            "kind": "mpa_request", "key": "MPA ID Req Frame", "rev": 3, "flags": "0x50",
            "C": true, "S_enhanced": true, "M": false, "pd_len": 4, "pd": "00010001",
            "ird": 1, "ord": 1, "error": "unknown MPA revision 3",
        }),
    );
    let reply = records[1].to_json();
    has_fields(
        &reply,
        &json!({
            "kind": "mpa_reply", "rev": 2, "pd_len": 8, "pd": "00010001", "pd_present": 4,
            "ird": 1, "ord": 1,
        }),
    );
    assert!(
        reply["error"].as_str().unwrap().contains("truncated"),
        "{reply}"
    );
}

#[test]
fn text_output_shows_raw_fields_and_the_deciding_evidence() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/siw/tap/tap-7335-rev-probe-term-bad-rdmap-version.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(["decode", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "| rdmap v0 Send L qn 0 msn 1 mo 0 | 16 octets \
             | TERMINATED by #9: RDMAP remote operation: invalid RDMAP version \
             | ERROR RDMAP version 0, expected 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("(0/2/0x05, siw layout by answered frame, answers #8)"),
        "{text}"
    );
}
