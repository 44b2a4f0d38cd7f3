//! Receive-side placement of one FPDU payload: the CRC32c check and the
//! copy into registered memory, as the engine does them (the whole CRC
//! first, then the copy), against the two fused (CRC and copy block by
//! block, each block copied while the CRC pass has it in L1). Sizes: a
//! payload of an MTU 1500 segment, of an MTU 9000 segment, and 64 KiB.
//! The sources rotate through 64 MiB, so each starts out of cache, as a
//! frame another core wrote does.
//!
//! The engine cannot fuse them anyway for tagged data: RFC 5044 section
//! 8 discards an FPDU whose CRC fails, and a fused copy would have placed
//! it already. This measures what that rule costs.
//!
//! `cargo bench -p uwarp-stack --bench copy_crc -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use uwarp_stack::wire::crc::{crc32c, Crc32c};

/// Payload sizes measured.
const SIZES: [(&str, usize); 3] = [("1428B", 1428), ("8948B", 8948), ("64KiB", 64 * 1024)];
/// Octets of source the runs rotate through.
const SOURCE_SPAN: usize = 64 << 20;
/// Octets per block of the fused variant.
const BLOCK: usize = 1024;

/// CRC over the whole source, then the copy: the engine's order.
fn check_then_copy(src: &[u8], dst: &mut [u8]) -> u32 {
    let crc = crc32c(src);
    dst.copy_from_slice(src);
    crc
}

/// CRC and copy block by block.
fn fused(src: &[u8], dst: &mut [u8]) -> u32 {
    let mut crc = Crc32c::new();
    for (from, to) in src.chunks(BLOCK).zip(dst.chunks_mut(BLOCK)) {
        crc.update(from);
        to.copy_from_slice(from);
    }
    crc.value()
}

fn placement(c: &mut Criterion) {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let source: Vec<u8> = (0..SOURCE_SPAN)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut group = c.benchmark_group("placement");
    for (name, len) in SIZES {
        let mut sink = vec![0u8; len];
        let slots = SOURCE_SPAN / len;
        // Same CRC both ways, or the comparison means nothing.
        assert_eq!(
            check_then_copy(&source[..len], &mut sink),
            fused(&source[..len], &mut sink)
        );
        group.throughput(Throughput::Bytes(len as u64));
        type Variant = fn(&[u8], &mut [u8]) -> u32;
        for (label, variant) in [
            ("check-then-copy", check_then_copy as Variant),
            ("fused", fused as Variant),
        ] {
            let mut next = 0;
            group.bench_function(BenchmarkId::new(label, name), |b| {
                b.iter(|| {
                    let at = next * len;
                    next = (next + 1) % slots;
                    black_box(variant(black_box(&source[at..at + len]), &mut sink))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
