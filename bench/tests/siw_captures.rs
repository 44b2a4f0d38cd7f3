//! The Linux siw captures in `tests/data/siw/` decoded with uwarp's parsers:
//! every frame decodes, CRCs verify, fields match the golden decode and the
//! captures' README, and re-emitting each parsed frame gives back the
//! captured bytes exactly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use uwarp_bench::capture::{read_capture, FlowKey, TcpStream};
use uwarp_bench::decode::{decode_streams, DecodeOptions, Record, RecordKind};
use uwarp_stack::wire::fpdu::{self, Fpdu};
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};
use uwarp_stack::wire::terminate::{LayoutHint, TermError, TerminateRepr};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/siw")
}

/// One capture: its streams and its records.
struct Decoded {
    name: String,
    streams: HashMap<FlowKey, TcpStream>,
    records: Vec<Record>,
}

impl Decoded {
    fn open(path: &Path, options: &DecodeOptions) -> Self {
        let streams = read_capture(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let records = decode_streams(&streams, options);
        Self {
            name: path.file_name().unwrap().to_string_lossy().into_owned(),
            streams: streams.into_iter().map(|s| (s.key, s)).collect(),
            records,
        }
    }

    fn bytes(&self, record: &Record) -> &[u8] {
        &self.streams[&record.key].bytes[record.offset..record.offset + record.len]
    }

    fn field(record: &Record, name: &str) -> Value {
        record.fields.get(name).cloned().unwrap_or(Value::Null)
    }
}

/// The captures with an invalid FPDU, by the number in their name, and
/// siw's port there.
const INVALID_FPDUS: [(&str, u16); 5] = [
    ("7333", 7333),
    ("7335", 7335),
    ("7401", 7400),
    ("7402", 7400),
    ("7403", 7400),
];

fn all_captures(options: &DecodeOptions) -> Vec<Decoded> {
    let mut paths = Vec::new();
    for dir in ["lo", "tap"] {
        for entry in std::fs::read_dir(data_dir().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "pcap") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    assert_eq!(paths.len(), 29, "expected the 29 bundled siw captures");
    paths.iter().map(|p| Decoded::open(p, options)).collect()
}

#[test]
fn every_capture_decodes_without_surprises() {
    let mut fpdus = 0;
    for capture in all_captures(&DecodeOptions::default()) {
        assert!(
            !capture.records.is_empty(),
            "{}: nothing decoded",
            capture.name
        );
        for record in &capture.records {
            let crc = Decoded::field(record, "crc");
            let error = record.fields.get("error");
            match record.kind {
                RecordKind::Undecoded => assert!(
                    capture.name.contains("7328-rev-probe-badkey"),
                    "{}: undecoded {:?}",
                    capture.name,
                    record.fields
                ),
                RecordKind::Fpdu => {
                    fpdus += 1;
                    let expected_bad_crc =
                        capture.name.contains("7332") && record.key.dst.port() == 7332;
                    assert_eq!(
                        crc == "bad",
                        expected_bad_crc,
                        "{}: {:?}",
                        capture.name,
                        record
                    );
                    // The probes' bad RDMAP version and bad queue number,
                    // unknown opcode, bad DDP version and bad MSN, sent to
                    // siw's port (a Send too long for its receive and a
                    // Read Request for an unknown STag are valid FPDUs).
                    let expected_error = INVALID_FPDUS.iter().any(|&(name, port)| {
                        capture.name.contains(name) && record.key.dst.port() == port
                    });
                    assert_eq!(
                        error.is_some(),
                        expected_error,
                        "{}: {:?}",
                        capture.name,
                        record
                    );
                }
                RecordKind::MpaRequest | RecordKind::MpaReply => {
                    assert!(error.is_none(), "{}: {:?}", capture.name, record)
                }
            }
        }
    }
    assert!(fpdus > 250, "only {fpdus} FPDUs decoded");
}

#[test]
fn every_frame_re_emits_byte_for_byte() {
    let mut checked = 0;
    for capture in all_captures(&DecodeOptions::default()) {
        for record in &capture.records {
            let bytes = capture.bytes(record);
            match record.kind {
                RecordKind::MpaRequest | RecordKind::MpaReply => {
                    let (repr, len) = StartupRepr::parse_bytes(bytes).unwrap();
                    assert_eq!(len, bytes.len());
                    assert_eq!(repr.to_vec().unwrap(), bytes, "{}", capture.name);
                }
                RecordKind::Fpdu if Decoded::field(record, "crc") != "bad" => {
                    let crc_on = Decoded::field(record, "crc") == "good";
                    re_emit_fpdu(bytes, crc_on, &capture.name);
                }
                _ => continue,
            }
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} frames re-emitted");
}

/// Parses an FPDU down to RDMAP and builds it again from the parsed parts.
fn re_emit_fpdu(bytes: &[u8], crc_on: bool, name: &str) {
    let fpdu = Fpdu::new_checked(bytes).unwrap();
    let ulpdu = fpdu.ulpdu();
    if let Ok(segment) = RdmapSegment::parse(ulpdu) {
        assert_eq!(segment.to_vec(), ulpdu, "{name}");
        match segment.opcode() {
            Opcode::ReadRequest => {
                let request = ReadRequest::parse(segment.payload).unwrap();
                assert_eq!(request.to_bytes(), segment.payload, "{name}");
            }
            Opcode::Terminate => {
                let term = TerminateRepr::parse(segment.payload, LayoutHint::Auto).unwrap();
                assert_eq!(term.to_vec().unwrap(), segment.payload, "{name}");
            }
            _ => {}
        }
    }
    let mut pad = [0u8; 3];
    pad[..fpdu.pad().len()].copy_from_slice(fpdu.pad());
    let mut out = vec![0; bytes.len()];
    fpdu::emit_with_pad(&[ulpdu], pad, crc_on, &mut out).unwrap();
    assert_eq!(out, bytes, "{name}");
}

#[test]
fn golden_vectors_match_the_decoder() {
    let golden: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(data_dir().join("golden-vectors.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(golden.len(), 59);
    let captures = all_captures(&DecodeOptions::default());
    for vector in &golden {
        let name = vector["name"].as_str().unwrap();
        let hex = vector["hex"].as_str().unwrap();
        let found = captures.iter().find_map(|c| {
            c.records
                .iter()
                .find(|r| hex_of(c.bytes(r)) == hex)
                .map(|r| (c, r))
        });
        let (capture, record) = found.unwrap_or_else(|| panic!("{name}: not found in any capture"));
        compare(vector, record, &format!("{name} in {}", capture.name));
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks every field the golden decode names (except its Terminate decode,
/// which reads siw's control word in the RFC layout; see the next test).
fn compare(vector: &Value, record: &Record, what: &str) {
    let decoded = vector["decoded"].as_object().unwrap();
    let json = record.to_json();
    if decoded["kind"] == "mpa"
        && !["MPA ID Req Frame", "MPA ID Rep Frame"].contains(&decoded["key"].as_str().unwrap())
    {
        assert_eq!(json["kind"], "undecoded", "{what}");
        let reason = json["reason"].as_str().unwrap();
        assert!(
            reason.contains("invalid key") && reason.contains(decoded["key"].as_str().unwrap()),
            "{what}: {reason}"
        );
        return;
    }
    if decoded["kind"] == "mpa" {
        let kind = if decoded["key"] == "MPA ID Req Frame" {
            "mpa_request"
        } else {
            "mpa_reply"
        };
        assert_eq!(json["kind"], kind, "{what}");
        assert_eq!(
            json["reserved_flags"].as_u64().unwrap() & 0x08 != 0,
            decoded["siw_gso"] == true,
            "{what}"
        );
    } else {
        assert_eq!(json["kind"], "fpdu", "{what}");
        let crc_expected = match vector["crc_on"].as_bool().unwrap() {
            false => "off",
            true if vector.get("crc_ok") == Some(&Value::Bool(false)) => "bad",
            true => "good",
        };
        assert_eq!(json["crc"], crc_expected, "{what}");
    }
    if decoded.get("rdmap_ver") == Some(&Value::from(0)) {
        let error = json["error"].as_str().unwrap_or_default();
        assert!(error.contains("RDMAP version 0"), "{what}: {error}");
    }
    for (field, expected) in decoded {
        let skip = ["kind", "key", "siw_gso", "payload", "term"].contains(&field.as_str());
        if !skip {
            assert_eq!(&json[field], expected, "{what}: field {field}");
        }
    }
}

/// What siw meant by each Terminate it sent (tests/data/siw/README.md).
#[test]
fn siw_terminates_mean_what_the_readme_says() {
    let cases = [
        (
            "tap-7326-rev-probe-term-write-badstag.pcap",
            TermError::DdpTaggedInvalidStag,
            LayoutHint::Auto,
        ),
        (
            "tap-7332-rev-probe-term-bad-crc.pcap",
            TermError::MpaCrcError,
            LayoutHint::Auto,
        ),
        (
            "tap-7333-rev-probe-term-bad-qn.pcap",
            TermError::DdpUntaggedInvalidQn,
            LayoutHint::Auto,
        ),
        // As RFC 5040 these four octets are also valid (LLP local
        // catastrophic): alone they need the siw hint, in the capture the
        // frame they answer decides.
        (
            "tap-7335-rev-probe-term-bad-rdmap-version.pcap",
            TermError::RdmapInvalidVersion,
            LayoutHint::Siw,
        ),
        (
            "tap-7335-rev-probe-term-bad-rdmap-version.pcap",
            TermError::RdmapInvalidVersion,
            LayoutHint::Auto,
        ),
    ];
    for (file, expected, hint) in cases {
        let options = DecodeOptions {
            terminate_layout: hint,
            ..DecodeOptions::default()
        };
        let capture = Decoded::open(&data_dir().join("tap").join(file), &options);
        let terminate = capture
            .records
            .iter()
            .find(|r| Decoded::field(r, "opcode") == Opcode::Terminate as u8)
            .unwrap_or_else(|| panic!("{file}: no Terminate"));
        assert_eq!(terminate.fields["term"]["name"], expected.name(), "{file}");
        assert_eq!(terminate.fields["term"]["layout"], "siw", "{file}");
        assert_eq!(terminate.fields["term"]["ambiguous"], false, "{file}");
    }
}

#[test]
fn peer_to_peer_exchange_matches_the_readme() {
    for file in [
        "tap/tap-7312-fwd-rping-siwclient-pyserver-v2-p2p.pcap",
        "lo/lo-rping-v2-p2p.pcap",
    ] {
        let capture = Decoded::open(&data_dir().join(file), &DecodeOptions::default());
        let request = capture
            .records
            .iter()
            .find(|r| r.kind == RecordKind::MpaRequest)
            .unwrap();
        assert_eq!(request.fields["pd"], "8001c001", "{file}");
        let reply = capture
            .records
            .iter()
            .find(|r| r.kind == RecordKind::MpaReply)
            .unwrap();
        if file.starts_with("lo") {
            // siw as responder chooses the Write RTR.
            assert_eq!(reply.fields["pd"], "80018001", "{file}");
        }
        // The initiator's first FPDU is the RTR: a zero-length RDMA Write
        // to STag 1, TO 0.
        let rtr = capture
            .records
            .iter()
            .find(|r| r.kind == RecordKind::Fpdu && r.key == request.key)
            .unwrap();
        let json = rtr.to_json();
        assert_eq!(json["op"], "RDMA Write", "{file}");
        assert_eq!(json["stag"], "0x1", "{file}");
        assert_eq!(json["to"], "0x0", "{file}");
        assert_eq!(json["payload_len"], 0, "{file}");
    }
}

#[test]
fn large_messages_use_full_fpdus_split_across_segments() {
    let capture = Decoded::open(
        &data_dir().join("lo/lo-ib_write_bw-crc-8KiB-mtu1500.pcap"),
        &DecodeOptions::default(),
    );
    let fpdus: Vec<_> = capture
        .records
        .iter()
        .filter(|r| r.kind == RecordKind::Fpdu)
        .collect();
    let largest = fpdus.iter().map(|r| r.len).max().unwrap();
    assert_eq!(largest, 1448, "siw's FPDUs are at most one MSS at MTU 1500");
    assert!(fpdus.iter().all(|r| Decoded::field(r, "crc") == "good"));
    // Some FPDU starts in one TCP segment and ends in another.
    let split = fpdus.iter().any(|r| {
        let stream = &capture.streams[&r.key];
        let start = stream.offset_to_seq(r.offset);
        !stream.segments.iter().any(|s| {
            let rel = start.wrapping_sub(s.seq) as usize;
            rel < s.len as usize && rel + r.len <= s.len as usize
        })
    });
    assert!(
        split,
        "expected at least one FPDU split across TCP segments"
    );
}

#[test]
fn rejects_and_revision_one_match_the_readme() {
    let markers = Decoded::open(
        &data_dir().join("tap/tap-7324-rev-probe-markers-reject.pcap"),
        &DecodeOptions::default(),
    );
    let reply = markers
        .records
        .iter()
        .find(|r| r.kind == RecordKind::MpaReply)
        .unwrap();
    assert_eq!(reply.fields["R"], true);
    assert_eq!(reply.fields["pd"], "00000000");
    let rev1 = Decoded::open(
        &data_dir().join("lo/lo-rping-v1-nocrc.pcap"),
        &DecodeOptions::default(),
    );
    for record in rev1.records.iter().filter(|r| r.kind != RecordKind::Fpdu) {
        assert_eq!(record.fields["rev"], 1);
        assert_eq!(record.fields["pd_len"], 0);
    }
}
