//! The round-trip oracles of [`uwarp_stack::wire::check`], which the
//! cargo-fuzz targets in `stack/fuzz/` call, run as ordinary tests over
//! (a) a seed corpus of Linux siw frames from
//! `tests/data/siw/golden-vectors.json` and what can be derived from them
//! (ULPDUs, Terminate payloads, Marker-framed FPDUs, MPA private data),
//! plus deterministic mutations of every seed (bit flips, overwritten
//! octets, truncations, extensions), and (b) a bounded proptest run of
//! random input shaped like each oracle's format. A few thousand inputs
//! per oracle; the file runs in a few seconds in debug builds.
//!
//! A crash found by `cargo fuzz` replays here by adding its artifact to the
//! seeds of the matching oracle.

use std::collections::BTreeSet;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::Value;
use uwarp_stack::wire::check;
use uwarp_stack::wire::ddp::BufferModel;
use uwarp_stack::wire::fpdu::Fpdu;
use uwarp_stack::wire::marker;
use uwarp_stack::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupRepr, REQUEST_KEY};
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};
use uwarp_stack::wire::rpcrdma::{RpcRdmaPrivateData, FORMAT_IDENTIFIER};
use uwarp_stack::wire::terminate::{TermError, TerminateLayout, TerminateRepr};
use uwarp_stack::wire::testing::hex;

/// `cases` cases; failures are saved next to this file, in
/// `<file>.proptest-regressions`, and replayed first on the next run.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::with_cases(cases)
    }
}

/// One frame of the golden vectors.
struct Golden {
    name: String,
    kind: String,
    bytes: Vec<u8>,
    /// The RDMAP version the vector's decode names (FPDUs only).
    rdmap_version: Option<u64>,
}

fn golden_vectors() -> Vec<Golden> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/siw/golden-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("golden vectors");
    let json: Value = serde_json::from_str(&text).expect("golden vectors are JSON");
    let vectors: Vec<Golden> = json
        .as_array()
        .expect("a list of vectors")
        .iter()
        .map(|v| Golden {
            name: v["name"].as_str().expect("name").to_owned(),
            kind: v["decoded"]["kind"].as_str().expect("kind").to_owned(),
            bytes: hex(v["hex"].as_str().expect("hex")),
            rdmap_version: v["decoded"]["rdmap_ver"].as_u64(),
        })
        .collect();
    assert_eq!(vectors.len(), 59, "the README lists 59 frames");
    vectors
}

/// Seeds for each oracle.
#[derive(Default)]
struct Seeds {
    mpa_startup: BTreeSet<Vec<u8>>,
    fpdu: BTreeSet<Vec<u8>>,
    marker: BTreeSet<Vec<u8>>,
    ddp_rdmap: BTreeSet<Vec<u8>>,
    terminate: BTreeSet<Vec<u8>>,
    rpcrdma: BTreeSet<Vec<u8>>,
    tcp_segment: BTreeSet<Vec<u8>>,
}

/// Stream offsets the Marker seeds use: the start of Full Operation, the
/// RFC 5044 figures, just around a Marker, and far into a stream.
const MARKER_OFFSETS: [u64; 8] = [
    0,
    4,
    0x1ec,
    468,
    508,
    512 * 1000 - 8,
    1 << 40,
    0x7fff_ffff_fe00,
];

fn rpcrdma_message(send_kib: u32, receive_kib: u32, remote_invalidation: bool) -> [u8; 8] {
    RpcRdmaPrivateData {
        remote_invalidation,
        send_size: send_kib * 1024,
        receive_size: receive_kib * 1024,
        reserved: 0,
    }
    .to_bytes()
    .expect("valid sizes")
}

fn seeds(golden: &[Golden]) -> Seeds {
    let mut seeds = Seeds::default();
    for (i, frame) in golden.iter().enumerate() {
        let bytes = &frame.bytes;
        if let Ok((repr, _)) = StartupRepr::parse_bytes(bytes) {
            seeds.mpa_startup.insert(bytes.clone());
            seeds.rpcrdma.insert(repr.private_data.to_vec());
        } else if frame.kind == "mpa" {
            seeds.mpa_startup.insert(bytes.clone());
        }
        let Ok(fpdu) = Fpdu::new_checked(&bytes[..]) else {
            continue;
        };
        seeds.fpdu.insert(bytes.clone());
        let ulpdu = fpdu.ulpdu();
        seeds.ddp_rdmap.insert(ulpdu.to_vec());
        let offset = MARKER_OFFSETS[i % MARKER_OFFSETS.len()];
        let crc_on = i % 2 == 0;
        let marked = marker::to_vec(offset, &[ulpdu], crc_on).expect("small ULPDU");
        seeds.marker.insert(check::with_offset(offset, &marked));
        // The siw FPDU as sent, where no Marker falls inside it.
        seeds.marker.insert(check::with_offset(4, bytes));
        if let Ok(segment) = RdmapSegment::parse(ulpdu) {
            if segment.opcode() == Opcode::Terminate {
                seeds.terminate.insert(segment.payload.to_vec());
            }
        }
    }

    // Terminates in the RFC 5040 layout with each optional header, and in
    // siw's with all three, built from siw's own DDP and Read Request
    // headers.
    let ddp = &golden_ulpdu(golden, "RDMA Read Request from siw")[..];
    let (ddp_header, read_request) = ddp.split_at(18);
    for (error, m, d, r, layout) in [
        (
            TermError::RdmapInvalidStag,
            false,
            false,
            true,
            TerminateLayout::Rfc5040,
        ),
        (
            TermError::DdpUntaggedInvalidQn,
            true,
            true,
            false,
            TerminateLayout::Rfc5040,
        ),
        (
            TermError::DdpUntaggedInvalidMo,
            false,
            true,
            false,
            TerminateLayout::Rfc5040,
        ),
        (
            TermError::MpaCrcError,
            true,
            false,
            false,
            TerminateLayout::Rfc5040,
        ),
        (
            TermError::RdmapLocalCatastrophic,
            true,
            true,
            true,
            TerminateLayout::Siw,
        ),
        (
            TermError::MpaNoMatchingRtr,
            false,
            false,
            false,
            TerminateLayout::Siw,
        ),
    ] {
        let term = TerminateRepr {
            ddp_segment_len: m.then_some(46),
            ddp_header: d.then_some(ddp_header),
            rdmap_header: r.then_some(read_request),
            layout,
            ..TerminateRepr::new(error)
        };
        let payload = term.to_vec().expect("valid Terminate");
        seeds.terminate.insert(payload.clone());
        // And inside a whole ULPDU, for ddp_rdmap.
        let model = BufferModel::Untagged {
            ulp_word: 0,
            qn: 2,
            msn: 1,
            mo: 0,
        };
        let segment = RdmapSegment::whole_message(Opcode::Terminate, model, &payload);
        seeds.ddp_rdmap.insert(segment.to_vec());
    }
    let request = ReadRequest::parse(read_request).expect("siw's Read Request");
    assert_eq!(request.to_bytes()[..], read_request[..]);

    // RPC-over-RDMA messages at several offsets of MPA private data, and
    // MPA frames carrying them after the enhanced block.
    for (at, message) in [
        (0, rpcrdma_message(1, 1, false)),
        (3, rpcrdma_message(4, 8, true)),
        (17, rpcrdma_message(256, 1, false)),
        (500, rpcrdma_message(32, 32, true)),
    ] {
        let mut private_data: Vec<u8> = (0..at).map(|i| (i * 7) as u8).collect();
        private_data.extend_from_slice(&message);
        private_data.push(0xa5);
        seeds.rpcrdma.insert(private_data.clone());
        let room = 508.min(private_data.len());
        let frame = StartupRepr {
            kind: FrameKind::Request,
            markers: false,
            crc: true,
            reject: false,
            reserved_flags: 0,
            revision: Revision::Enhanced,
            enhanced: Some(EnhancedBlock {
                ird: 16,
                ord: 16,
                ..EnhancedBlock::default()
            }),
            private_data: &private_data[..room],
        };
        seeds
            .mpa_startup
            .insert(frame.to_vec().expect("valid frame"));
    }
    let mut two = FORMAT_IDENTIFIER.to_be_bytes().to_vec();
    two.extend_from_slice(&[2, 0, 0, 0]);
    two.extend_from_slice(&rpcrdma_message(2, 2, false));
    seeds.rpcrdma.insert(two);
    seeds.tcp_segment = tcp_segments();
    seeds
}

/// TCP segments with the option layouts peers send: Linux's SYN (MSS,
/// SACK-permitted, timestamps, window scale), its SYN-ACK and ACKs (NOP
/// NOP timestamps, then a SACK block), uwarp's data segment (timestamps,
/// End of Option List padding, a short FPDU as payload), and a reset
/// without options.
fn tcp_segments() -> BTreeSet<Vec<u8>> {
    let timestamps = [8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78];
    let syn_options = [&[2, 4, 0x05, 0xb4, 4, 2][..], &timestamps, &[1, 3, 3, 7]].concat();
    let ack_options = [&[1, 1][..], &timestamps].concat();
    let sack_block = [1, 1, 5, 10, 0, 0, 0x10, 0, 0, 0, 0x15, 0xa8];
    let sack_options = [&ack_options[..], &sack_block].concat();
    let uwarp_options = [&timestamps[..], &[0, 0]].concat();
    let fpdu = [
        0x00, 0x06, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0xde, 0xad, 0xbe, 0xef,
    ];
    [
        (0x02, &syn_options[..], &[][..]),
        (0x12, &ack_options[..], &[][..]),
        (0x10, &sack_options[..], &[][..]),
        (0x18, &uwarp_options[..], &fpdu[..]),
        (0x04, &[][..], &[][..]),
    ]
    .iter()
    .map(|(flags, options, payload)| {
        let mut segment = vec![0xc0, 0x00, 0x12, 0xb7, 0, 0, 0x10, 0, 0, 0, 0x20, 0];
        segment.push((((20 + options.len()) / 4) as u8) << 4);
        segment.push(*flags);
        segment.extend_from_slice(&[0x01, 0xf6, 0, 0, 0, 0]);
        segment.extend_from_slice(options);
        segment.extend_from_slice(payload);
        segment
    })
    .collect()
}

fn golden_ulpdu(golden: &[Golden], name: &str) -> Vec<u8> {
    let frame = golden
        .iter()
        .find(|g| g.name.starts_with(name))
        .expect("named vector");
    Fpdu::new_checked(&frame.bytes[..])
        .expect("an FPDU")
        .ulpdu()
        .to_vec()
}

/// xorshift64: deterministic, dependency-free choice of mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bit flips, overwritten octets, truncations and extensions of `seed`.
/// `keep` octets at the start are left alone (a Marker input's offset).
fn mutations(seed: &[u8], keep: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = vec![seed.to_vec()];
    let body = seed.len().saturating_sub(keep);
    if body > 0 {
        for _ in 0..12 {
            let bit = rng.below(body * 8);
            let mut m = seed.to_vec();
            m[keep + bit / 8] ^= 1 << (bit % 8);
            out.push(m);
        }
        for value in [0x00, 0xff, rng.next() as u8, rng.next() as u8] {
            let mut m = seed.to_vec();
            m[keep + rng.below(body)] = value;
            out.push(m);
        }
    }
    let step = (seed.len() / 6).max(1);
    for len in (0..seed.len())
        .step_by(step)
        .chain(seed.len().saturating_sub(3)..seed.len())
    {
        out.push(seed[..len].to_vec());
    }
    for extra in [1usize, 4, 33] {
        let mut m = seed.to_vec();
        m.extend((0..extra).map(|_| rng.next() as u8));
        out.push(m);
    }
    out.push([seed, &seed[keep..]].concat());
    out
}

/// Runs `oracle` over every seed and its mutations; returns (inputs,
/// accepted).
fn run(seeds: &BTreeSet<Vec<u8>>, keep: usize, oracle: fn(&[u8]) -> bool) -> (usize, usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut inputs, mut accepted) = (0, 0);
    for seed in seeds {
        for input in mutations(seed, keep, &mut rng) {
            inputs += 1;
            accepted += usize::from(oracle(&input));
        }
    }
    (inputs, accepted)
}

#[test]
fn every_golden_frame_round_trips() {
    let golden = golden_vectors();
    for frame in &golden {
        let bytes = &frame.bytes[..];
        match frame.kind.as_str() {
            "mpa" => {
                let valid_key =
                    bytes.starts_with(REQUEST_KEY) || bytes.starts_with(b"MPA ID Rep Frame");
                assert_eq!(check::mpa_startup(bytes), valid_key, "{}", frame.name);
            }
            "fpdu" => {
                assert!(check::fpdu(bytes), "{}", frame.name);
                let ulpdu = Fpdu::new_checked(bytes).unwrap().ulpdu().to_vec();
                assert_eq!(
                    check::ddp_rdmap(&ulpdu),
                    frame.rdmap_version == Some(1),
                    "{}",
                    frame.name
                );
                for offset in MARKER_OFFSETS {
                    let marked = marker::to_vec(offset, &[&ulpdu], true).unwrap();
                    assert!(
                        check::marker(&check::with_offset(offset, &marked)),
                        "{}",
                        frame.name
                    );
                }
            }
            other => panic!("unknown kind {other}"),
        }
    }
}

#[test]
fn seed_corpus_and_mutations() {
    let golden = golden_vectors();
    let seeds = seeds(&golden);
    let mut total = 0;
    for (name, set, keep, oracle) in [
        (
            "mpa_startup",
            &seeds.mpa_startup,
            0,
            check::mpa_startup as fn(&[u8]) -> bool,
        ),
        ("fpdu", &seeds.fpdu, 0, check::fpdu),
        (
            "marker",
            &seeds.marker,
            check::OFFSET_PREFIX_LEN,
            check::marker,
        ),
        ("ddp_rdmap", &seeds.ddp_rdmap, 0, check::ddp_rdmap),
        ("terminate", &seeds.terminate, 0, check::terminate),
        ("rpcrdma", &seeds.rpcrdma, 0, check::rpcrdma),
        ("tcp_segment", &seeds.tcp_segment, 0, check::tcp_segment),
    ] {
        assert!(!set.is_empty(), "{name}: no seeds");
        for seed in set {
            // The probes of a bad key and of RDMAP version 0, and siw's
            // private data, which holds no RPC-over-RDMA message, are seeds
            // that must not parse; every other seed must.
            let identifier = FORMAT_IDENTIFIER.to_be_bytes();
            let invalid = match name {
                "mpa_startup" => !seed.starts_with(b"MPA ID Re"),
                "ddp_rdmap" => seed[1] >> 6 != 1,
                "rpcrdma" => !seed.windows(4).any(|w| w == identifier),
                _ => false,
            };
            assert_eq!(oracle(seed), !invalid, "{name}: seed {seed:02x?}");
        }
        let (inputs, accepted) = run(set, keep, oracle);
        eprintln!(
            "{name}: {} seeds, {inputs} inputs, {accepted} parsed",
            set.len()
        );
        assert!(accepted > set.len(), "{name}: mutations never parse");
        total += inputs;
    }
    eprintln!("{total} inputs in all");
}

// ---------------------------------------------------------------- random input

/// Stream offsets of Marker inputs: anywhere, and around Marker positions.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u64..(1 << 40), 0u64..16).prop_map(|(k, d)| (k * 512 + 512 - 8 + d) & !3),
        0u64..2048,
    ]
}

fn mpa_input() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        any::<u8>(),
        prop_oneof![3 => 0u8..3, 1 => any::<u8>()],
        prop_oneof![3 => 0u16..40, 1 => any::<u16>()],
        vec(any::<u8>(), 0..64),
    )
        .prop_map(|(request, flags, rev, pd_len, rest)| {
            let key: &[u8] = if request {
                REQUEST_KEY
            } else {
                b"MPA ID Rep Frame"
            };
            [key, &[flags, rev], &pd_len.to_be_bytes(), &rest].concat()
        })
}

fn fpdu_input() -> impl Strategy<Value = Vec<u8>> {
    (any::<u16>(), vec(any::<u8>(), 0..120), any::<bool>()).prop_map(|(len, body, fix)| {
        let len = len % (body.len() as u16 + 4);
        let mut bytes = [&len.to_be_bytes()[..], &body].concat();
        let total = uwarp_stack::wire::fpdu::fpdu_len(usize::from(len));
        if fix && bytes.len() >= total {
            let crc = uwarp_stack::wire::crc::crc32c(&bytes[..total - 4]);
            bytes[total - 4..total].copy_from_slice(&crc.to_le_bytes());
        }
        bytes
    })
}

fn marker_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (offset(), vec(any::<u8>(), 0..80)).prop_map(|(o, rest)| check::with_offset(o, &rest)),
        (
            offset(),
            vec(any::<u8>(), 0..700),
            any::<bool>(),
            any::<u16>()
        )
            .prop_map(|(o, ulpdu, crc_on, flip)| {
                // FPDUs start at multiples of 4 in an MPA stream.
                let o = o & !3;
                let mut marked = marker::to_vec(o, &[&ulpdu], crc_on).unwrap();
                if flip % 3 == 0 {
                    let bit = usize::from(flip) % (marked.len() * 8);
                    marked[bit / 8] ^= 1 << (bit % 8);
                }
                check::with_offset(o, &marked)
            }),
    ]
}

fn ddp_rdmap_input() -> impl Strategy<Value = Vec<u8>> {
    (0u8..4, 0u8..16, vec(any::<u8>(), 0..60))
        .prop_map(|(t_l, op, rest)| [&[t_l << 6 | 1, 0x40 | op][..], &rest].concat())
}

fn terminate_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..80),
        (
            0u8..3,
            0u8..3,
            any::<u8>(),
            any::<u8>(),
            vec(any::<u8>(), 0..60)
        )
            .prop_map(|(layer, etype, code, flags, rest)| {
                [&[layer << 4 | etype, code % 10, flags, 0][..], &rest].concat()
            }),
    ]
}

fn rpcrdma_input() -> impl Strategy<Value = Vec<u8>> {
    (
        vec(any::<u8>(), 0..40),
        any::<[u8; 4]>(),
        vec(any::<u8>(), 0..12),
        any::<bool>(),
    )
        .prop_map(|(before, message, after, version_one)| {
            let mut message = message;
            if version_one {
                message[0] = 1;
            }
            [
                &before[..],
                &FORMAT_IDENTIFIER.to_be_bytes(),
                &message,
                &after,
            ]
            .concat()
        })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn random_mpa_startup(data in mpa_input()) {
        check::mpa_startup(&data);
        check::rpcrdma(&data);
    }

    #[test]
    fn random_fpdu(data in fpdu_input()) {
        check::fpdu(&data);
    }

    #[test]
    fn random_marker(data in marker_input()) {
        check::marker(&data);
    }

    #[test]
    fn random_ddp_rdmap(data in ddp_rdmap_input()) {
        check::ddp_rdmap(&data);
    }

    #[test]
    fn random_terminate(data in terminate_input()) {
        check::terminate(&data);
    }

    #[test]
    fn random_rpcrdma(data in rpcrdma_input()) {
        check::rpcrdma(&data);
    }

    #[test]
    fn random_octets_in_every_oracle(data in vec(any::<u8>(), 0..200)) {
        check::mpa_startup(&data);
        check::fpdu(&data);
        check::ddp_rdmap(&data);
        check::terminate(&data);
        check::rpcrdma(&data);
        check::marker(&data);
        check::tcp_segment(&data);
    }
}

/// Writes the seed corpus (not the mutations) for `cargo fuzz` to
/// `$UWARP_FUZZ_CORPUS/<target>/`, one file per seed:
///
/// ```text
/// UWARP_FUZZ_CORPUS=$PWD/stack/fuzz/corpus \
///     cargo test -p uwarp-stack --test fuzz_inputs -- --ignored write_seed_corpus
/// ```
#[test]
#[ignore = "writes files; run by hand to seed cargo fuzz"]
fn write_seed_corpus() {
    let Some(root) = std::env::var_os("UWARP_FUZZ_CORPUS") else {
        eprintln!("UWARP_FUZZ_CORPUS is not set: nothing written");
        return;
    };
    let root = std::path::PathBuf::from(root);
    let seeds = seeds(&golden_vectors());
    for (target, set) in [
        ("mpa_startup", &seeds.mpa_startup),
        ("fpdu", &seeds.fpdu),
        ("marker", &seeds.marker),
        ("ddp_rdmap", &seeds.ddp_rdmap),
        ("terminate", &seeds.terminate),
        ("rpcrdma", &seeds.rpcrdma),
        ("tcp_segment", &seeds.tcp_segment),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for seed in set {
            // Not the CRC32c: FPDUs that end in their own CRC all share one.
            let fnv = seed.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &octet| {
                (hash ^ u64::from(octet)).wrapping_mul(0x0100_0000_01b3)
            });
            let name = format!("siw-{fnv:016x}");
            std::fs::write(dir.join(name), seed).expect("seed file");
        }
        eprintln!("{}: {} seeds", dir.display(), set.len());
    }
}

/// Regression: the crash `cargo fuzz run marker` found within a second,
/// offset `u64::MAX` and nothing else. `MarkedFpdu::parse(u64::MAX, &[])`
/// overflowed in `marker::marked_len` instead of returning
/// `WireError::Truncated`.
#[test]
fn marker_fuzz_crash_at_the_largest_offset() {
    let crash = [0xff; 8];
    assert!(!check::marker(&crash));
}

/// Regression: a 45-octet input `cargo fuzz run tcp_segment` found, a
/// segment without ACK (PSH only) that carries one SACK block. The parser
/// keeps the block, as smoltcp does, and the emitter writes SACK blocks
/// only on a segment with ACK, so the block does not come back; the
/// oracle expected it to.
#[test]
fn tcp_segment_fuzz_crash_sack_without_ack() {
    let input = hex(concat!(
        "01156bde00fdff0104322627ab08080800f8f608050a0200fdff9dff",
        "26ffab08085a08080808000000019a1e00",
    ));
    assert_eq!(input.len(), 45);
    assert!(check::tcp_segment(&input));
}
