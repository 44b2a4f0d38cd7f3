//! The engine's fuzz oracle, `uwarp_stack::rdmap::check::engine`, under
//! `cargo test`: over hand-made streams a well-behaved peer would send
//! (which must leave the stream open), over every single-octet mutation
//! and truncation of them, and over bounded random input. The streams are
//! also the seed corpus of the `engine` fuzz target (see the ignored test
//! at the end and `stack/fuzz/README.md`).

mod common;

use common::{read_request, send, tagged, untagged};
use proptest::prelude::*;
use uwarp_stack::mpa::FpduWriter;
use uwarp_stack::rdmap::check::{engine, REGION_LEN, REGION_TO_STEP};
use uwarp_stack::wire::rdmap::{Opcode, ReadRequest, QN_SEND};

fn stag(region: u32) -> u32 {
    (region + 1) << 8
}

fn to(region: u64, offset: u64) -> u64 {
    (region + 1) * REGION_TO_STEP + offset
}

/// The settings octet of an oracle input.
fn settings(crc: bool, markers: bool, responder: bool, rtr: u8) -> u8 {
    u8::from(crc) | u8::from(markers) << 1 | u8::from(responder) << 2 | rtr << 3
}

/// The settings bit that reorders the pieces.
const REORDER: u8 = 0x20;
/// The settings bit that has the engine send payloads by reference.
const ZERO_COPY: u8 = 0x40;

/// What a well-behaved peer sends: Writes, a two-segment Send, a Send with
/// Invalidate, a Read Request and, when the engine is the initiator (whose
/// Read Request is out before any input arrives), the response to its Read.
fn peer_ulpdus(rtr: u8, respond: bool) -> Vec<Vec<u8>> {
    let mut ulpdus = Vec::new();
    let rtr_response = tagged(Opcode::ReadResponse, true, 1, 0, &[]);
    let mut send_msn = 1;
    let mut read_msn = 1;
    // The peer sends an RTR when it is the initiator (`!respond`).
    match if respond { 0 } else { rtr } {
        1 => ulpdus.push(tagged(Opcode::RdmaWrite, true, 1, 0, &[])),
        2 => {
            ulpdus.push(send(1, &[]));
            send_msn = 2;
        }
        3 => {
            ulpdus.push(read_request(
                1,
                &ReadRequest {
                    sink_stag: 1,
                    source_stag: 1,
                    ..ReadRequest::default()
                },
            ));
            read_msn = 2;
        }
        _ => {}
    }
    ulpdus.push(tagged(
        Opcode::RdmaWrite,
        true,
        stag(0),
        to(0, 5),
        &[1; 100],
    ));
    ulpdus.push(tagged(
        Opcode::RdmaWrite,
        false,
        stag(2),
        to(2, 0),
        &[2; 50],
    ));
    ulpdus.push(tagged(
        Opcode::RdmaWrite,
        true,
        stag(2),
        to(2, 50),
        &[3; 50],
    ));
    ulpdus.push(untagged(
        Opcode::Send,
        false,
        (QN_SEND, send_msn, 0),
        0,
        &[4; 60],
    ));
    ulpdus.push(untagged(
        Opcode::Send,
        true,
        (QN_SEND, send_msn, 60),
        0,
        &[5; 68],
    ));
    ulpdus.push(untagged(
        Opcode::SendSolicitedInvalidate,
        true,
        (QN_SEND, send_msn + 1, 0),
        stag(0),
        &[6; 10],
    ));
    ulpdus.push(read_request(
        read_msn,
        &ReadRequest {
            sink_stag: 0x00ee_0000,
            sink_to: 0,
            size: 200,
            source_stag: stag(1),
            source_to: to(1, 56),
        },
    ));
    if respond {
        if rtr == 3 {
            // The engine, the initiator, sent a Read RTR first.
            ulpdus.push(rtr_response);
        }
        // The engine's Read asked for the whole of region 4.
        let response = vec![7; REGION_LEN];
        ulpdus.push(tagged(
            Opcode::ReadResponse,
            false,
            stag(4),
            to(4, 0),
            &response[..100],
        ));
        ulpdus.push(tagged(
            Opcode::ReadResponse,
            true,
            stag(4),
            to(4, 100),
            &response[100..],
        ));
    }
    ulpdus
}

/// Oracle inputs for every setting the stream can have.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for rtr in 0..4u8 {
        for responder in [false, true] {
            if responder && rtr == 0 {
                continue; // the peer (the initiator) gets no RTR to send
            }
            for (crc, markers) in [(true, false), (false, false), (true, true)] {
                let mut writer = FpduWriter::new(crc, markers);
                let mut input = vec![settings(crc, markers, responder, rtr), 0];
                for ulpdu in peer_ulpdus(rtr, !responder) {
                    writer.write(&[&ulpdu], &mut input).unwrap();
                }
                seeds.push(input);
            }
        }
    }
    seeds
}

#[test]
fn a_well_behaved_peer_keeps_the_stream_open() {
    for seed in seeds() {
        for piece in [0u8, 1, 7, 200] {
            for extra in [0, REORDER, ZERO_COPY, REORDER | ZERO_COPY] {
                let mut input = seed.clone();
                input[0] |= extra;
                input[1] = piece;
                assert!(
                    engine(&input),
                    "settings {:#04x}, pieces of {piece}",
                    input[0]
                );
            }
        }
    }
}

#[test]
fn every_mutation_of_the_seeds_keeps_every_promise() {
    for seed in seeds().into_iter().step_by(3) {
        for at in 2..seed.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut input = seed.clone();
                input[at] ^= flip;
                engine(&input);
                // The same, one FPDU a piece, every second one early,
                // the engine sending by reference.
                input[0] |= REORDER | ZERO_COPY;
                engine(&input);
            }
            engine(&seed[..at]);
        }
    }
}

#[test]
fn short_inputs() {
    for len in 0..4 {
        engine(&vec![0; len]);
        engine(&vec![0xFF; len]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_input_keeps_every_promise(input in proptest::collection::vec(any::<u8>(), 0..3000)) {
        engine(&input);
    }

    #[test]
    fn random_ulpdus_keep_every_promise(
        settings in any::<u8>(),
        piece in any::<u8>(),
        ulpdus in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
    ) {
        // Random ULPDUs in valid framing get past MPA to DDP and RDMAP.
        let crc = settings & 1 != 0;
        let markers = settings & 2 != 0;
        let mut input = vec![settings, piece];
        let mut writer = FpduWriter::new(crc, markers);
        for ulpdu in &ulpdus {
            writer.write(&[ulpdu], &mut input).unwrap();
        }
        engine(&input);
    }
}

/// Writes the seeds to `$UWARP_FUZZ_CORPUS/engine/` for cargo-fuzz.
#[test]
#[ignore = "writes files; run by hand, see stack/fuzz/README.md"]
fn write_engine_seed_corpus() {
    let dir = std::path::PathBuf::from(
        std::env::var("UWARP_FUZZ_CORPUS").expect("UWARP_FUZZ_CORPUS names the corpus folder"),
    )
    .join("engine");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, seed) in seeds().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
    }
}
