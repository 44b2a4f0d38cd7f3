//! CRC32c throughput: the `crc32c` crate against the `crc-fast` crate,
//! which `uwarp_stack::wire::crc` uses, over a 64 KiB buffer, a 1500-octet
//! frame and a 64-octet header.
//!
//! `cargo bench -p uwarp-stack --bench crc -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use crc_fast::CrcAlgorithm;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// The buffer sizes measured.
const SIZES: [(&str, usize); 3] = [("64KiB", 64 * 1024), ("1500B", 1500), ("64B", 64)];

/// CRC32c through `crc-fast`'s generic entry point.
fn crc_fast_checksum(data: &[u8]) -> u32 {
    // CRC-32/ISCSI is a 32-bit CRC; the upper half of the u64 is zero.
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// Deterministic, non-repeating test data.
fn data(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect()
}

fn crc32c_implementations(c: &mut Criterion) {
    eprintln!(
        "crc-fast target: {}",
        crc_fast::get_calculator_target(CrcAlgorithm::Crc32Iscsi)
    );
    let all = data(64 * 1024);
    let mut group = c.benchmark_group("crc32c");
    for (name, len) in SIZES {
        let buf = &all[..len];
        // Same polynomial, same conventions: same value, or the comparison
        // means nothing.
        let reference = crc32c::crc32c(buf);
        assert_eq!(crc_fast_checksum(buf), reference, "{name}");
        assert_eq!(crc_fast::crc32_iscsi(buf), reference, "{name}");
        assert_eq!(uwarp_stack::wire::crc::crc32c(buf), reference, "{name}");
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("crc32c", name), buf, |b, buf| {
            b.iter(|| crc32c::crc32c(black_box(buf)))
        });
        group.bench_with_input(
            BenchmarkId::new("crc-fast/checksum", name),
            buf,
            |b, buf| b.iter(|| crc_fast_checksum(black_box(buf))),
        );
        group.bench_with_input(
            BenchmarkId::new("crc-fast/crc32_iscsi", name),
            buf,
            |b, buf| b.iter(|| crc_fast::crc32_iscsi(black_box(buf))),
        );
    }
    group.finish();
}

criterion_group!(benches, crc32c_implementations);
criterion_main!(benches);
