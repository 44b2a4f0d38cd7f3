//! What the guarded copy costs: a placement into uwarp's own memory
//! (`MemoryBuffer::new`, a plain copy) against one into the application's
//! (`MemoryBuffer::from_raw_parts`, the `rep movsb` of `mem::guarded_copy`
//! that a fault handler can resume), at the sizes placement sees: a small
//! message, a segment's payload at MTU 1500 and 9000, and 64 KiB. Both
//! destinations stay in cache, so the copy's own cost shows.
//!
//! `cargo bench -p uwarp-stack --bench guarded_copy -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use uwarp_stack::mem::MemoryBuffer;

/// Payload sizes measured.
const SIZES: [(&str, usize); 4] = [
    ("64B", 64),
    ("1428B", 1428),
    ("8948B", 8948),
    ("64KiB", 64 * 1024),
];

fn placement(c: &mut Criterion) {
    let mut group = c.benchmark_group("write_at");
    for (name, len) in SIZES {
        let data = vec![0x5Au8; len];
        let own = MemoryBuffer::new(len);
        let mut app = vec![0u8; len];
        // SAFETY: `app` outlives the buffer, dropped at the end of this
        // iteration, and is touched only through it meanwhile.
        let foreign = unsafe { MemoryBuffer::from_raw_parts(app.as_mut_ptr(), len) };
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("own", name), &data, |b, data| {
            b.iter(|| own.write_at(0, black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("application", name), &data, |b, data| {
            b.iter(|| foreign.write_at(0, black_box(data)))
        });
        drop(foreign);
    }
    group.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
