//! `uwarp-perf decode` end to end: the JSON it prints, what it does with
//! corrupt and hostile input, and connections that use Markers and RFC 8797
//! private data (which no bundled capture has), written with uwarp's own
//! emitters into a pcap.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use uwarp_bench::capture::{read_capture_bytes, PcapTcpWriter};
use uwarp_bench::decode::{decode_streams, DecodeOptions, Record, RecordKind};
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::marker;
use uwarp_stack::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupRepr};
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment};
use uwarp_stack::wire::rpcrdma::RpcRdmaPrivateData;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/siw")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uwarp-perf"))
        .args(args)
        .output()
        .expect("run uwarp-perf")
}

/// This test run's scratch directory.
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("uwarp-decode-cli-{}", std::process::id()))
}

/// A file in the scratch directory.
fn scratch(name: &str) -> PathBuf {
    std::fs::create_dir_all(scratch_dir()).unwrap();
    scratch_dir().join(name)
}

#[test]
fn json_lines_carry_the_documented_fields() {
    let path = capture("lo/lo-rping-v2-crc.pcap");
    let out = run(&["decode", "--json", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect();
    assert_eq!(lines.len(), 23);
    for line in &lines {
        for field in ["kind", "src", "dst", "tcp_seq", "frame"] {
            assert!(line.get(field).is_some(), "{field} missing in {line}");
        }
        assert!(line["src"]
            .as_str()
            .unwrap()
            .parse::<std::net::SocketAddr>()
            .is_ok());
        if line["kind"] == "fpdu" {
            assert_eq!(line["crc"], "good", "{line}");
            assert!(
                line["ulpdu_len"].is_u64() && line["opcode"].is_u64(),
                "{line}"
            );
        }
    }
    assert_eq!(lines[0]["kind"], "mpa_request");
    assert_eq!(lines[1]["kind"], "mpa_reply");
    let opcodes: Vec<u64> = lines[2..]
        .iter()
        .map(|l| l["opcode"].as_u64().unwrap())
        .collect();
    assert!(
        opcodes.contains(&0)
            && opcodes.contains(&1)
            && opcodes.contains(&2)
            && opcodes.contains(&3)
    );
}

#[test]
fn text_output_names_the_operations() {
    let path = capture("tap/tap-7326-rev-probe-term-write-badstag.pcap");
    let out = run(&["decode", path.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("MPA Request rev 2"), "{text}");
    assert!(text.contains("RDMA Write L stag 0xdeadbe00"), "{text}");
    assert!(text.contains("DDP tagged buffer: invalid STag"), "{text}");
}

#[test]
fn corrupt_files_are_reported_never_a_crash() {
    let real = std::fs::read(capture("lo/lo-rping-v2-crc.pcap")).unwrap();
    let mut inputs: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("text".into(), b"this is not a capture\n".to_vec()),
    ];
    for cut in [10, 24, 40, 100, real.len() / 2, real.len() - 1] {
        inputs.push((format!("cut-{cut}"), real[..cut].to_vec()));
    }
    // Corrupt the TCP payloads: the pcap stays valid, the MPA inside not.
    let mut scrambled = real.clone();
    for i in (200..scrambled.len()).step_by(7) {
        scrambled[i] = scrambled[i].wrapping_mul(31).wrapping_add(7);
    }
    inputs.push(("scrambled".into(), scrambled));
    for (name, bytes) in inputs {
        let path = scratch(&format!("{name}.pcap"));
        std::fs::write(&path, &bytes).unwrap();
        let out = run(&["decode", "--json", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: {:?}",
            out.status
        );
        if !out.status.success() {
            assert!(stderr.starts_with("uwarp-perf: "), "{name}: {stderr}");
        }
    }
    let missing = run(&["decode", "/nonexistent/capture.pcap"]);
    assert_eq!(missing.status.code(), Some(1));
    std::fs::remove_dir_all(scratch_dir()).unwrap();
}

/// A startup frame of `kind` that asks for Markers and CRCs.
fn startup(kind: FrameKind, private_data: &[u8]) -> Vec<u8> {
    StartupRepr {
        kind,
        markers: true,
        crc: true,
        reject: false,
        reserved_flags: 0,
        revision: Revision::Enhanced,
        enhanced: Some(EnhancedBlock {
            ird: 16,
            ord: 16,
            ..EnhancedBlock::default()
        }),
        private_data,
    }
    .to_vec()
    .unwrap()
}

/// The ULPDU of an untagged Send carrying `payload`.
fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
    let model = BufferModel::Untagged {
        ulp_word: 0,
        qn: 0,
        msn,
        mo: 0,
    };
    RdmapSegment::whole_message(Opcode::Send, model, payload).to_vec()
}

/// A connection whose FPDUs carry Markers in both directions.
fn marker_connection(corrupt_marker: bool) -> Vec<Record> {
    let rpc = RpcRdmaPrivateData {
        remote_invalidation: true,
        send_size: 4096,
        receive_size: 8192,
        reserved: 0,
    };
    let mut pcap = PcapTcpWriter::new(
        Vec::new(),
        SocketAddrV4::new([127, 0, 0, 1].into(), 40000),
        SocketAddrV4::new([127, 0, 0, 1].into(), 4791),
    )
    .unwrap();
    pcap.handshake().unwrap();
    pcap.send(true, &startup(FrameKind::Request, &rpc.to_bytes().unwrap()))
        .unwrap();
    pcap.send(false, &startup(FrameKind::Reply, &[])).unwrap();
    let mut offsets = [0u64; 2];
    for msn in 1..=6u32 {
        for (side, from_client) in [(0, true), (1, false)] {
            let payload: Vec<u8> = (0..300 * msn).map(|i| (i * 7 + msn) as u8).collect();
            let mut wire = marker::to_vec(offsets[side], &[&send(msn, &payload)], true).unwrap();
            if corrupt_marker && msn == 4 && from_client {
                // The first Marker inside this FPDU: point it elsewhere.
                let first = (512 - offsets[side] % 512) as usize % 512;
                wire[first + 3] ^= 0x40;
            }
            offsets[side] += wire.len() as u64;
            pcap.send(from_client, &wire).unwrap();
        }
    }
    let bytes = pcap.finish().unwrap();
    decode_streams(
        &read_capture_bytes(&bytes).unwrap(),
        &DecodeOptions::default(),
    )
}

#[test]
fn markers_and_rpcrdma_private_data_decode() {
    let records = marker_connection(false);
    let request = &records[0];
    assert_eq!(request.kind, RecordKind::MpaRequest);
    assert_eq!(request.fields["M"], true);
    assert_eq!(request.fields["rpcrdma"]["send_size"], 4096);
    assert_eq!(request.fields["rpcrdma"]["receive_size"], 8192);
    assert_eq!(request.fields["rpcrdma"]["remote_invalidation"], true);
    let fpdus: Vec<_> = records
        .iter()
        .filter(|r| r.kind == RecordKind::Fpdu)
        .collect();
    assert_eq!(fpdus.len(), 12);
    for record in fpdus {
        let json = record.to_json();
        assert_eq!(json["markers"], true, "{json}");
        assert_eq!(json["crc"], "good", "{json}");
        let msn = json["msn"].as_u64().unwrap();
        assert_eq!(json["payload_len"], 300 * msn, "{json}");
        assert!(
            record.len > json["ulpdu_len"].as_u64().unwrap() as usize + 6,
            "{json}"
        );
    }
    assert!(records.iter().all(|r| r.kind != RecordKind::Undecoded));
}

#[test]
fn a_bad_marker_stops_decoding_that_direction_with_a_reason() {
    let records = marker_connection(true);
    let undecoded: Vec<_> = records
        .iter()
        .filter(|r| r.kind == RecordKind::Undecoded)
        .collect();
    assert_eq!(undecoded.len(), 1);
    let reason = undecoded[0].fields["reason"].as_str().unwrap();
    assert!(reason.contains("Marker"), "{reason}");
    // The other direction decodes in full.
    let other = records
        .iter()
        .filter(|r| r.kind == RecordKind::Fpdu && r.key != undecoded[0].key)
        .count();
    assert_eq!(other, 6);
}
