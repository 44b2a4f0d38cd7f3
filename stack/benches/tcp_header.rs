//! The TCP header of a data segment, as the dataplane writes one for
//! every segment it sends and reads one for every segment it receives:
//! uwarp's code (`Segment::emit_header_for_checksum_offload` and
//! `tcp::parse_verified`, `stack/src/wire/tcp.rs`) beside smoltcp's
//! `TcpRepr::emit` (with the same pseudo-header sum) and `TcpRepr::parse`,
//! which it replaced. Both give the same octets and the same
//! representation (the header module's tests check it).
//!
//! `cargo bench -p uwarp-stack --bench tcp_header -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    checksum, IpAddress, IpProtocol, Ipv4Address, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
    TcpTimestampRepr,
};
use uwarp_stack::tcp::{Payload, Segment};

const SRC: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const DST: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

/// A data segment's header: timestamps, and one SACK block or none.
fn data_header(sack: bool) -> TcpRepr<'static> {
    let mut sack_ranges = [None; 3];
    if sack {
        sack_ranges[0] = Some((5000, 6448));
    }
    TcpRepr {
        src_port: 49152,
        dst_port: 4791,
        control: TcpControl::Psh,
        seq_number: TcpSeqNumber(1000),
        ack_number: Some(TcpSeqNumber(2000)),
        window_len: 4096,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges,
        timestamp: Some(TcpTimestampRepr::new(11, 22)),
        payload: &[],
    }
}

fn header_costs(c: &mut Criterion) {
    let payload = vec![7u8; 1448];
    let mut out = [0u8; 64];
    for (name, sack) in [("timestamps", false), ("timestamps+sack", true)] {
        let mut group = c.benchmark_group(format!("tcp_header/{name}"));
        let header = data_header(sack);
        let segment = Segment {
            src: SRC,
            dst: DST,
            header,
            payload: Payload::of(&payload),
        };
        group.bench_function("uwarp/emit", |b| {
            b.iter(|| black_box(&segment).emit_header_for_checksum_offload(black_box(&mut out)))
        });
        group.bench_function("smoltcp/emit", |b| {
            let (src, dst) = (IpAddress::Ipv4(SRC), IpAddress::Ipv4(DST));
            b.iter(|| {
                let header = black_box(&header);
                let mut packet = TcpPacket::new_unchecked(&mut black_box(&mut out)[..]);
                header.emit(&mut packet, &src, &dst, &ChecksumCapabilities::ignored());
                let len = header.header_len() + payload.len();
                packet.set_checksum(checksum::pseudo_header_v4(
                    &SRC,
                    &DST,
                    IpProtocol::Tcp,
                    len as u32,
                ));
            })
        });
        let octets = segment.to_bytes();
        group.bench_function("uwarp/parse", |b| {
            b.iter(|| uwarp_stack::tcp::parse_verified(black_box(&octets)))
        });
        group.bench_function("smoltcp/parse", |b| {
            let (src, dst) = (IpAddress::Ipv4(SRC), IpAddress::Ipv4(DST));
            b.iter(|| {
                let packet = TcpPacket::new_checked(black_box(&octets[..])).ok()?;
                TcpRepr::parse(&packet, &src, &dst, &ChecksumCapabilities::ignored()).ok()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, header_costs);
criterion_main!(benches);
