//! Per-FPDU costs of the wire module at the size Linux siw sends at a
//! 1500-octet MTU: a 1442-octet ULPDU (a 1448-octet FPDU).
//!
//! `cargo bench -p uwarp-stack --bench fpdu -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use uwarp_stack::wire::ddp::{BufferModel, DdpRepr, TAGGED_HEADER_LEN};
use uwarp_stack::wire::fpdu::{self, CrcVerdict, Fpdu};
use uwarp_stack::wire::marker::{self, MarkedFpdu};
use uwarp_stack::wire::rdmap::{Opcode, RdmapControl, RdmapSegment};

/// ULPDU length: MULPDU for an EMSS of 1448.
const ULPDU_LEN: usize = 1442;
/// Stream offset of the marked FPDU: Markers fall at 1024, 1536 and 2048.
const MARKER_OFFSET: u64 = 1000;

/// The tagged DDP header of an RDMA Write.
fn write_header() -> [u8; TAGGED_HEADER_LEN] {
    let ddp = DdpRepr {
        last: true,
        reserved: 0,
        ulp_control: RdmapControl::new(Opcode::RdmaWrite).to_u8(),
        model: BufferModel::Tagged {
            stag: 0x4455_6600,
            to: 0x7f00_0000_2000,
        },
    };
    let mut header = [0u8; TAGGED_HEADER_LEN];
    ddp.emit(&mut header).expect("room for the header");
    header
}

fn fpdu_costs(c: &mut Criterion) {
    let header = write_header();
    let payload: Vec<u8> = (0..ULPDU_LEN - TAGGED_HEADER_LEN)
        .map(|i| (i * 31) as u8)
        .collect();
    let ulpdu = [&header[..], &payload[..]].concat();
    let len = fpdu::fpdu_len(ULPDU_LEN);
    let mut out = vec![0u8; marker::marked_len(MARKER_OFFSET, len)];
    let with_crc = fpdu::to_vec(&[&header, &payload], true).expect("fits");
    assert_eq!(with_crc.len(), 1448);
    let marked = marker::to_vec(MARKER_OFFSET, &[&header, &payload], true).expect("fits");
    assert_eq!(marked.len(), 1448 + 3 * marker::MARKER_LEN);

    let mut group = c.benchmark_group("fpdu");
    group.throughput(Throughput::Bytes(len as u64));
    for (name, crc_on) in [("emit/crc-on", true), ("emit/crc-off", false)] {
        group.bench_function(name, |b| {
            b.iter(|| fpdu::emit(black_box(&[&header, &payload]), crc_on, &mut out))
        });
    }
    group.bench_function("new_checked+verify", |b| {
        b.iter(|| {
            let view = Fpdu::new_checked(black_box(&with_crc[..])).expect("whole FPDU");
            assert_eq!(view.verify(true), CrcVerdict::Good);
        })
    });
    group.bench_function("marker::emit@1000", |b| {
        b.iter(|| {
            marker::emit(
                black_box(MARKER_OFFSET),
                black_box(&[&header, &payload]),
                true,
                &mut out,
            )
        })
    });
    group.bench_function("MarkedFpdu::parse@1000", |b| {
        b.iter(|| MarkedFpdu::parse(black_box(MARKER_OFFSET), black_box(&marked)))
    });
    group.finish();

    let mut group = c.benchmark_group("rdmap");
    group.bench_function("RdmapSegment::parse/tagged", |b| {
        b.iter(|| RdmapSegment::parse(black_box(&ulpdu)).expect("an RDMA Write"))
    });
    group.finish();
}

criterion_group!(benches, fpdu_costs);
criterion_main!(benches);
