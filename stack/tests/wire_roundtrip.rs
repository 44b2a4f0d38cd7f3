//! Property tests of the wire module.
//!
//! For every header type: a representation drawn at random survives
//! emit → parse unchanged; octets a parser accepts survive parse → emit
//! octet for octet (apart from the fields the wire module documents as
//! ignored on receipt); no parser panics on arbitrary octets; the emitters
//! refuse private data over 512 octets, IRD/ORD over 0x3FFF and ULPDUs over
//! 65535 octets; and the CRC catches every single-bit flip.
//!
//! The Marker tests include regressions for two bugs the fuzzer found:
//! stream offsets near `u64::MAX` overflowed, and offsets off a multiple
//! of 4 did not round-trip.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::FileFailurePersistence;
use uwarp_stack::wire::crc;
use uwarp_stack::wire::ddp::{
    segment_payload_lens, BufferModel, DdpRepr, DdpSegment, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use uwarp_stack::wire::fpdu::{self, CrcVerdict, Fpdu, LENGTH_FIELD_LEN, MAX_ULPDU_LEN};
use uwarp_stack::wire::marker::{self, MarkedFpdu, MARKER_INTERVAL, MARKER_LEN};
use uwarp_stack::wire::mpa::{
    EnhancedBlock, FrameKind, Revision, StartupFrame, StartupRepr, ENHANCED_BLOCK_LEN, HEADER_LEN,
    IRD_ORD_MAX, MAX_PRIVATE_DATA,
};
use uwarp_stack::wire::rdmap::{Opcode, RdmapControl, RdmapSegment, ReadRequest, READ_REQUEST_LEN};
use uwarp_stack::wire::rpcrdma::{
    self, RpcRdmaPrivateData, FORMAT_IDENTIFIER, MAX_INLINE_THRESHOLD, MESSAGE_LEN, SIZE_UNIT,
};
use uwarp_stack::wire::terminate::{
    LayoutHint, TermError, TerminateLayout, TerminateRepr, CONTROL_LEN,
};
use uwarp_stack::wire::WireError;

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

/// Cases per property: the whole file runs in a few seconds in debug.
const CASES: u32 = 256;

/// `len` random octets, biased towards short ones but reaching `max`.
fn octets(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => vec(any::<u8>(), 0..=max.min(64)),
        2 => vec(any::<u8>(), 0..=max),
        1 => vec(any::<u8>(), max..=max),
    ]
}

/// Octets as in the MPA key and DDP/RDMAP headers, or anything at all.
fn arbitrary_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..64),
        vec(any::<u8>(), 0..700),
        (
            select(vec![&b"MPA ID Req Frame"[..], &b"MPA ID Rep Frame"[..]]),
            vec(any::<u8>(), 0..600)
        )
            .prop_map(|(key, rest)| [key, &rest[..]].concat()),
        (any::<u16>(), vec(any::<u8>(), 0..200)).prop_map(|(len, rest)| {
            let len = len % (rest.len() as u16 + 8);
            [&len.to_be_bytes()[..], &rest[..]].concat()
        }),
        (0u8..4, any::<u8>(), vec(any::<u8>(), 0..120)).prop_map(|(t_l, op, rest)| {
            let ulp = 0x40 | (op & 0x3F);
            [&[t_l << 6 | 1, ulp][..], &rest[..]].concat()
        }),
    ]
}

// ---------------------------------------------------------------- MPA

/// An owned [`StartupRepr`].
#[derive(Debug, Clone)]
struct Startup {
    kind: FrameKind,
    flags: [bool; 3],
    reserved_flags: u8,
    revision: Revision,
    enhanced: Option<EnhancedBlock>,
    private_data: Vec<u8>,
}

impl Startup {
    fn repr(&self) -> StartupRepr<'_> {
        StartupRepr {
            kind: self.kind,
            markers: self.flags[0],
            crc: self.flags[1],
            reject: self.flags[2],
            reserved_flags: self.reserved_flags,
            revision: self.revision,
            enhanced: self.enhanced,
            private_data: &self.private_data,
        }
    }
}

fn frame_kind() -> impl Strategy<Value = FrameKind> {
    prop_oneof![Just(FrameKind::Request), Just(FrameKind::Reply)]
}

fn revision() -> impl Strategy<Value = Revision> {
    prop_oneof![
        Just(Revision::Rdmac),
        Just(Revision::Rfc5044),
        Just(Revision::Enhanced)
    ]
}

fn enhanced_block() -> impl Strategy<Value = EnhancedBlock> {
    (any::<[bool; 4]>(), 0..=IRD_ORD_MAX, 0..=IRD_ORD_MAX).prop_map(|([a, b, c, d], ird, ord)| {
        EnhancedBlock {
            peer_to_peer: a,
            send_rtr: b,
            write_rtr: c,
            read_rtr: d,
            ird,
            ord,
        }
    })
}

/// Startup frames up to the private data limit.
fn startup() -> impl Strategy<Value = Startup> {
    (
        frame_kind(),
        any::<[bool; 3]>(),
        0u8..16,
        revision(),
        option::of(enhanced_block()),
    )
        .prop_flat_map(|(kind, flags, reserved_flags, revision, enhanced)| {
            let room = MAX_PRIVATE_DATA - enhanced.map_or(0, |_| ENHANCED_BLOCK_LEN);
            octets(room).prop_map(move |private_data| Startup {
                kind,
                flags,
                reserved_flags,
                revision,
                enhanced,
                private_data,
            })
        })
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn startup_emit_parse(startup in startup(), garbage in vec(any::<u8>(), 0..8)) {
        let repr = startup.repr();
        let mut bytes = repr.to_vec().unwrap();
        prop_assert_eq!(bytes.len(), repr.buffer_len());
        prop_assert_eq!(bytes.len(), HEADER_LEN + repr.pd_length());
        prop_assert!(repr.pd_length() <= MAX_PRIVATE_DATA);
        let (parsed, len) = StartupRepr::parse_bytes(&bytes).unwrap();
        prop_assert_eq!(parsed, repr);
        prop_assert_eq!(len, bytes.len());
        let frame = StartupFrame::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(frame.flags(), repr.flags());
        prop_assert_eq!(frame.enhanced(), repr.enhanced.is_some());
        // Octets after the frame belong to the stream, not to the frame.
        bytes.extend_from_slice(&garbage);
        prop_assert_eq!(StartupRepr::parse_bytes(&bytes).unwrap(), (repr, len));
        // A short output buffer is refused, a short input waits for more.
        let mut short = vec![0u8; len - 1];
        prop_assert_eq!(
            repr.emit(&mut short),
            Err(WireError::BufferTooSmall { needed: len, available: len - 1 })
        );
        let needed = if len - 1 < HEADER_LEN { HEADER_LEN } else { len };
        prop_assert_eq!(
            StartupRepr::parse_bytes(&bytes[..len - 1]).unwrap_err(),
            WireError::Truncated { needed, available: len - 1 }
        );
    }

    #[test]
    fn startup_parse_emit(
        kind in frame_kind(),
        flags in any::<u8>(),
        rev in prop_oneof![4 => 0u8..3, 1 => any::<u8>()],
        pd_len in prop_oneof![4 => 0u16..=520, 1 => any::<u16>()],
        rest in vec(any::<u8>(), 0..560),
    ) {
        let mut bytes = kind.key().to_vec();
        bytes.extend_from_slice(&[flags, rev]);
        bytes.extend_from_slice(&pd_len.to_be_bytes());
        bytes.extend_from_slice(&rest);
        match StartupRepr::parse_bytes(&bytes) {
            Ok((repr, len)) => {
                prop_assert_eq!(len, HEADER_LEN + usize::from(pd_len));
                prop_assert_eq!(&repr.to_vec().unwrap()[..], &bytes[..len]);
            }
            Err(err) => {
                let pd = usize::from(pd_len);
                let expected = if pd > MAX_PRIVATE_DATA {
                    WireError::PrivateDataTooLong(pd)
                } else if rest.len() < pd {
                    WireError::Truncated { needed: HEADER_LEN + pd, available: bytes.len() }
                } else if rev > 2 {
                    WireError::UnknownMpaRevision(rev)
                } else {
                    WireError::MissingEnhancedBlock
                };
                prop_assert_eq!(err, expected);
            }
        }
    }

    #[test]
    fn startup_refuses_what_the_wire_cannot_carry(
        startup in startup(),
        extra in 1usize..600,
        bad in (IRD_ORD_MAX + 1)..=u16::MAX,
        which in any::<bool>(),
    ) {
        let long = vec![0x5a; MAX_PRIVATE_DATA + extra];
        let room = MAX_PRIVATE_DATA - startup.enhanced.map_or(0, |_| ENHANCED_BLOCK_LEN);
        let repr = StartupRepr { private_data: &long[..room + extra], ..startup.repr() };
        prop_assert_eq!(
            repr.to_vec().unwrap_err(),
            WireError::PrivateDataTooLong(MAX_PRIVATE_DATA + extra)
        );
        let mut block = startup.enhanced.unwrap_or_default();
        if which { block.ird = bad } else { block.ord = bad }
        prop_assert_eq!(block.to_bytes().unwrap_err(), WireError::IrdOrdOutOfRange(bad));
        let repr = StartupRepr { enhanced: Some(block), private_data: &[], ..startup.repr() };
        prop_assert_eq!(repr.to_vec().unwrap_err(), WireError::IrdOrdOutOfRange(bad));
    }

    #[test]
    fn enhanced_block_every_octet_pattern(word in any::<[u8; 4]>(), block in enhanced_block()) {
        let parsed = EnhancedBlock::parse(&word).unwrap();
        prop_assert_eq!(parsed.to_bytes().unwrap(), word);
        prop_assert_eq!(EnhancedBlock::parse(&block.to_bytes().unwrap()).unwrap(), block);
    }
}

// ---------------------------------------------------------------- FPDU and CRC

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn fpdu_emit_parse(
        ulpdu in octets(2000),
        crc_on in any::<bool>(),
        split in any::<prop::sample::Index>(),
        slack in 0usize..8,
    ) {
        let at = split.index(ulpdu.len() + 1);
        let bytes = fpdu::to_vec(&[&ulpdu[..at], &ulpdu[at..]], crc_on).unwrap();
        let len = fpdu::fpdu_len(ulpdu.len());
        prop_assert_eq!(bytes.len(), len);
        prop_assert_eq!(len % 4, 0);
        let view = Fpdu::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(view.ulpdu(), &ulpdu[..]);
        prop_assert_eq!(view.fpdu_len(), len);
        prop_assert!(view.pad().iter().all(|&octet| octet == 0));
        prop_assert_eq!(view.pad().len(), fpdu::pad_len(ulpdu.len()));
        let expected = if crc_on { CrcVerdict::Good } else { CrcVerdict::Off };
        prop_assert_eq!(view.verify(crc_on), expected);
        if !crc_on {
            prop_assert_eq!(view.crc_field(), 0);
        }
        // emit into a larger, dirty buffer writes the same octets.
        let mut out = vec![0xee; len + slack];
        prop_assert_eq!(fpdu::emit(&[&ulpdu], crc_on, &mut out), Ok(len));
        prop_assert_eq!(&out[..len], &bytes[..]);
        prop_assert_eq!(
            fpdu::emit(&[&ulpdu], crc_on, &mut out[..len - 1]),
            Err(WireError::BufferTooSmall { needed: len, available: len - 1 })
        );
        // A short FPDU asks for the whole of it once the length is in.
        let cut = split.index(len);
        let needed = if cut < LENGTH_FIELD_LEN { LENGTH_FIELD_LEN } else { len };
        prop_assert_eq!(
            Fpdu::new_checked(&bytes[..cut]).unwrap_err(),
            WireError::Truncated { needed, available: cut }
        );
    }

    #[test]
    fn fpdu_parse_emit(len in any::<u16>(), body in vec(any::<u8>(), 0..300), fix_crc in any::<bool>()) {
        let len = len % (body.len() as u16 + 2);
        let mut bytes = [&len.to_be_bytes()[..], &body[..]].concat();
        let total = fpdu::fpdu_len(usize::from(len));
        if fix_crc && bytes.len() >= total {
            let field = crc::to_wire(crc::crc32c(&bytes[..total - 4]));
            bytes[total - 4..total].copy_from_slice(&field);
        }
        let Ok(view) = Fpdu::new_checked(&bytes[..]) else {
            prop_assert!(bytes.len() < total);
            return Ok(());
        };
        let crc_good = view.verify(true) == CrcVerdict::Good;
        prop_assert_eq!(crc_good, fix_crc || view.crc_field() == crc::crc32c(view.covered()));
        let again = fpdu::to_vec(&[view.ulpdu()], crc_good).unwrap();
        let again_view = Fpdu::new_checked(&again[..]).unwrap();
        prop_assert_eq!(again_view.ulpdu(), view.ulpdu());
        if view.pad().iter().all(|&octet| octet == 0) && (crc_good || view.crc_field() == 0) {
            prop_assert_eq!(&again[..], &bytes[..total]);
        }
    }

    #[test]
    fn crc_detects_every_single_bit_flip(
        ulpdu in octets(1500),
        bit in any::<prop::sample::Index>(),
    ) {
        // The CRC32c itself.
        let mut data = ulpdu.clone();
        data.push(0x42);
        let original = crc::crc32c(&data);
        let raw_bit = bit.index(data.len() * 8);
        data[raw_bit / 8] ^= 1 << (raw_bit % 8);
        prop_assert_ne!(crc::crc32c(&data), original);
        // An FPDU: any bit after the length field (a flip inside it makes a
        // different FPDU, not a corrupted one).
        let mut bytes = fpdu::to_vec(&[&ulpdu], true).unwrap();
        let bits = (bytes.len() - LENGTH_FIELD_LEN) * 8;
        let flip = LENGTH_FIELD_LEN * 8 + bit.index(bits);
        bytes[flip / 8] ^= 1 << (flip % 8);
        let verdict = Fpdu::new_checked(&bytes[..]).unwrap().verify(true);
        prop_assert!(matches!(verdict, CrcVerdict::Bad { .. }), "bit {} missed", flip);
    }

    #[test]
    fn crc_append_equals_whole(data in octets(3000), split in any::<prop::sample::Index>()) {
        let at = split.index(data.len() + 1);
        prop_assert_eq!(
            crc::crc32c_append(crc::crc32c(&data[..at]), &data[at..]),
            crc::crc32c(&data)
        );
        let value = crc::crc32c(&data);
        prop_assert_eq!(crc::from_wire(crc::to_wire(value)), value);
    }

    #[test]
    fn mulpdu_fits_the_segment(emss in 0usize..70_000, offset in 0u64..(1 << 40)) {
        let offset = offset & !3;
        let plain = fpdu::mulpdu(emss, false);
        if plain > 0 {
            prop_assert!(fpdu::fpdu_len(plain) <= emss);
            if plain < MAX_ULPDU_LEN {
                prop_assert!(fpdu::fpdu_len(plain + 1) > emss, "not the largest");
            }
        }
        let marked = fpdu::mulpdu(emss, true);
        prop_assert!(marked <= plain);
        if marked > 0 && marked < MAX_ULPDU_LEN {
            prop_assert!(marker::marked_len(offset, fpdu::fpdu_len(marked)) <= emss);
        }
    }
}

#[test]
fn emitters_refuse_ulpdus_over_65535_octets() {
    let big = vec![0u8; MAX_ULPDU_LEN + 1];
    let out = std::cell::RefCell::new(vec![0u8; fpdu::fpdu_len(MAX_ULPDU_LEN) + 1024]);
    let mut runner = proptest::test_runner::TestRunner::new(config(64));
    runner
        .run(
            &(
                0..=MAX_ULPDU_LEN,
                1..=4096usize,
                any::<u64>().prop_map(|o| o & !3),
            ),
            |(first, over, offset)| {
                // Two parts whose sum exceeds the limit by `over`.
                let second = MAX_ULPDU_LEN + over - first;
                let (a, b) = (&big[..first], &big[..second.min(big.len())]);
                let parts: &[&[u8]] = if second <= big.len() {
                    &[a, b]
                } else {
                    &[a, &big[..], &big[..second - big.len()]]
                };
                let len = MAX_ULPDU_LEN + over;
                let refused = Err(WireError::UlpduTooLong(len));
                prop_assert_eq!(fpdu::emit(parts, true, &mut out.borrow_mut()), refused);
                prop_assert_eq!(fpdu::to_vec(parts, false), refused.map(|_| Vec::new()));
                prop_assert_eq!(
                    marker::emit(offset, parts, true, &mut out.borrow_mut()),
                    refused
                );
                prop_assert_eq!(
                    marker::to_vec(offset, parts, false),
                    refused.map(|_| Vec::new())
                );
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(
        fpdu::to_vec(&[&big[1..]], true).unwrap().len(),
        fpdu::fpdu_len(MAX_ULPDU_LEN)
    );
}

// ---------------------------------------------------------------- Markers

/// Stream offsets: small ones, ones just around a multiple of 512 (and so
/// not always a multiple of 4), ones just below the wrap, and any.
fn stream_offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4096,
        (1u64..(u64::MAX / MARKER_INTERVAL), -24i64..24)
            .prop_map(|(k, delta)| (k * MARKER_INTERVAL).wrapping_add_signed(delta)),
        (1u64..64, -24i64..24)
            .prop_map(|(k, delta)| (k * MARKER_INTERVAL).wrapping_add_signed(delta)),
        (1u64..4096).prop_map(|back| 0u64.wrapping_sub(back)),
        any::<u64>(),
    ]
}

/// Stream offsets of FPDUs: multiples of 4, as in a real MPA stream.
fn aligned_offset() -> impl Strategy<Value = u64> {
    stream_offset().prop_map(|offset| offset & !3)
}

/// Index in marked octets starting at `offset` of the Marker octet at
/// stream position `i`, if it is one.
fn marker_octet(offset: u64, i: usize) -> Option<usize> {
    let in_interval = (offset.wrapping_add(i as u64) % MARKER_INTERVAL) as usize;
    (in_interval < MARKER_LEN && i >= in_interval).then_some(in_interval)
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn marker_emit_parse_aligned(
        offset in aligned_offset(),
        ulpdu in octets(1600),
        crc_on in any::<bool>(),
        split in any::<prop::sample::Index>(),
        garbage in vec(any::<u8>(), 0..8),
    ) {
        let at = split.index(ulpdu.len() + 1);
        let parts: [&[u8]; 2] = [&ulpdu[..at], &ulpdu[at..]];
        let mut bytes = marker::to_vec(offset, &parts, crc_on).unwrap();
        let total = marker::marked_len(offset, fpdu::fpdu_len(ulpdu.len()));
        prop_assert_eq!(bytes.len(), total);
        prop_assert_eq!(total % 4, 0);
        let mut out = vec![0xee; total];
        prop_assert_eq!(marker::emit(offset, &parts, crc_on, &mut out), Ok(total));
        prop_assert_eq!(&out, &bytes);
        // Every Marker points back at this FPDU's header.
        let starts_on_marker = offset % MARKER_INTERVAL == 0;
        let header = if starts_on_marker { offset.wrapping_add(4) } else { offset };
        for i in (0..total).filter(|&i| marker_octet(offset, i) == Some(0)) {
            let pointer = if i == 0 && starts_on_marker {
                0
            } else {
                offset.wrapping_add(i as u64).wrapping_sub(header)
            };
            prop_assert_eq!(&bytes[i..i + 2], &[0, 0]);
            prop_assert_eq!(u64::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]])), pointer);
        }
        let parsed = MarkedFpdu::parse(offset, &bytes).unwrap();
        prop_assert_eq!(parsed.ulpdu(), &ulpdu[..]);
        prop_assert_eq!(parsed.marked_len, total);
        let expected = if crc_on { CrcVerdict::Good } else { CrcVerdict::Off };
        prop_assert_eq!(parsed.verify(crc_on), expected);
        if !crc_on {
            // Without CRCs the FPDU is the one fpdu::emit makes.
            prop_assert_eq!(&parsed.fpdu, &fpdu::to_vec(&[&ulpdu], false).unwrap());
        }
        let cut = split.index(total);
        let header_len = marker::marked_len(offset, LENGTH_FIELD_LEN);
        let needed = if cut < header_len { header_len } else { total };
        prop_assert_eq!(
            MarkedFpdu::parse(offset, &bytes[..cut]).unwrap_err(),
            WireError::Truncated { needed, available: cut }
        );
        bytes.extend_from_slice(&garbage);
        prop_assert_eq!(MarkedFpdu::parse(offset, &bytes).unwrap(), parsed);
    }

    #[test]
    fn marker_emit_parse_any_offset(
        offset in stream_offset(),
        ulpdu in octets(1200),
        crc_on in any::<bool>(),
    ) {
        if offset % 4 != 0 {
            let refused = WireError::UnalignedOffset(offset);
            prop_assert_eq!(marker::to_vec(offset, &[&ulpdu], crc_on), Err(refused));
            prop_assert_eq!(MarkedFpdu::parse(offset, &ulpdu).err(), Some(refused));
            return Ok(());
        }
        let bytes = marker::to_vec(offset, &[&ulpdu], crc_on).unwrap();
        prop_assert_eq!(bytes.len(), marker::marked_len(offset, fpdu::fpdu_len(ulpdu.len())));
        let parsed = MarkedFpdu::parse(offset, &bytes).unwrap();
        prop_assert_eq!(parsed.ulpdu(), &ulpdu[..]);
        prop_assert_eq!(parsed.marked_len, bytes.len());
        if crc_on {
            prop_assert_eq!(parsed.verify(true), CrcVerdict::Good);
        }
    }

    #[test]
    fn marker_stream_of_fpdus(
        start in aligned_offset(),
        ulpdus in vec(octets(700), 1..8),
        crc_on in any::<bool>(),
    ) {
        let mut stream = Vec::new();
        let mut offset = start;
        for ulpdu in &ulpdus {
            let bytes = marker::to_vec(offset, &[ulpdu], crc_on).unwrap();
            offset = offset.wrapping_add(bytes.len() as u64);
            stream.extend_from_slice(&bytes);
        }
        let mut offset = start;
        let mut at = 0;
        for ulpdu in &ulpdus {
            let parsed = MarkedFpdu::parse(offset, &stream[at..]).unwrap();
            prop_assert_eq!(parsed.ulpdu(), &ulpdu[..]);
            if crc_on {
                prop_assert_eq!(parsed.verify(true), CrcVerdict::Good);
            }
            at += parsed.marked_len;
            offset = offset.wrapping_add(parsed.marked_len as u64);
        }
        prop_assert_eq!(at, stream.len());
        // Every Marker in the stream sits at a multiple of 512.
        let markers = (0..stream.len()).filter(|&i| marker_octet(start, i) == Some(0)).count();
        let expected = (0..stream.len() as u64)
            .filter(|i| start.wrapping_add(*i) % MARKER_INTERVAL == 0)
            .count();
        prop_assert_eq!(markers, expected);
    }

    #[test]
    fn marker_parse_ignores_reserved_bits(
        offset in aligned_offset(),
        ulpdu in octets(1600),
        noise in any::<[u8; 3]>(),
    ) {
        let canonical = marker::to_vec(offset, &[&ulpdu], false).unwrap();
        let mut noisy = canonical.clone();
        for (i, octet) in noisy.iter_mut().enumerate() {
            match marker_octet(offset, i) {
                Some(k @ (0 | 1)) => *octet = noise[k],
                Some(3) => *octet |= noise[2] & 3,
                _ => {}
            }
        }
        let parsed = MarkedFpdu::parse(offset, &noisy).unwrap();
        prop_assert_eq!(parsed.ulpdu(), &ulpdu[..]);
        let again = marker::to_vec(offset, &[parsed.ulpdu()], false).unwrap();
        prop_assert_eq!(again, canonical);
    }

    #[test]
    fn marker_crc_detects_every_single_bit_flip(
        offset in aligned_offset(),
        ulpdu in octets(1600),
        bit in any::<prop::sample::Index>(),
    ) {
        let mut bytes = marker::to_vec(offset, &[&ulpdu], true).unwrap();
        // Any bit but the ULPDU_Length field's: a Marker's reserved bits are
        // covered by the CRC, its FPDUPTR by the Marker check.
        let length_at = if offset % MARKER_INTERVAL == 0 { MARKER_LEN } else { 0 };
        let mut flip = bit.index((bytes.len() - LENGTH_FIELD_LEN) * 8);
        if flip >= length_at * 8 {
            flip += LENGTH_FIELD_LEN * 8;
        }
        bytes[flip / 8] ^= 1 << (flip % 8);
        match MarkedFpdu::parse(offset, &bytes) {
            Ok(parsed) => {
                let bad = matches!(parsed.verify(true), CrcVerdict::Bad { .. });
                prop_assert!(bad, "bit {} missed", flip);
            }
            Err(err) => {
                let mismatch = matches!(err, WireError::MarkerMismatch { .. });
                prop_assert!(mismatch, "{:?}", err);
            }
        }
    }

    #[test]
    fn marked_len_counts_markers(offset in stream_offset(), len in 0usize..5000) {
        let marked = marker::marked_len(offset, len);
        let markers = (marked - len) / MARKER_LEN;
        prop_assert_eq!((marked - len) % MARKER_LEN, 0);
        let positions = (0..marked as u64)
            .filter(|i| offset.wrapping_add(*i) % MARKER_INTERVAL == 0)
            .count();
        // A Marker due right at the end belongs to what follows.
        prop_assert_eq!(markers, positions);
    }
}

/// Regression: off a multiple of 4 (never the case in a real MPA stream),
/// `emit` used to set FPDUPTR's two reserved low bits, which `parse` masks,
/// and a Marker could split the CRC field. Both directions now refuse such
/// offsets.
#[test]
fn marker_refuses_unaligned_offsets() {
    for offset in [1u64, 2, 3, 509, 510, 511, 513] {
        let ulpdu = [0xab; 600];
        assert_eq!(
            marker::to_vec(offset, &[&ulpdu], true),
            Err(WireError::UnalignedOffset(offset))
        );
        assert_eq!(
            MarkedFpdu::parse(offset, &[0; 700]),
            Err(WireError::UnalignedOffset(offset))
        );
    }
}

/// Regression: stream offsets within an FPDU's length of `u64::MAX` used to
/// overflow (a panic in debug builds, a wrong FPDUPTR in release). Offsets
/// now wrap like sequence numbers; 2^64 is a multiple of 512.
#[test]
fn marker_offsets_wrap_like_sequence_numbers() {
    for back in [1u64, 4, 100, 512, 1000, 1500] {
        let offset = (u64::MAX - back + 1) & !3;
        let ulpdu = [0x11; 1500];
        let outcome = std::panic::catch_unwind(|| {
            let bytes = marker::to_vec(offset, &[&ulpdu], true).unwrap();
            // The Marker at stream offset 2^64 (wrapped to 0) points back
            // `back` octets, to this FPDU's header.
            let at = (0u64.wrapping_sub(offset)) as usize;
            let pointer = u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]);
            // When the FPDU itself starts on a Marker, its header is 4
            // octets further on.
            let expected = if back % 512 == 0 { at - 4 } else { at };
            let parsed = MarkedFpdu::parse(offset, &bytes).unwrap();
            (
                parsed.ulpdu() == ulpdu,
                parsed.verify(true),
                pointer == expected as u16,
            )
        });
        assert!(
            matches!(outcome, Ok((true, CrcVerdict::Good, true))),
            "offset {offset:#x}: (ULPDU equal, CRC verdict, FPDUPTR right) = {outcome:?}"
        );
    }
}

// ---------------------------------------------------------------- DDP and RDMAP

fn ddp_model(tagged: bool) -> BoxedStrategy<BufferModel> {
    if tagged {
        (any::<u32>(), any::<u64>())
            .prop_map(|(stag, to)| BufferModel::Tagged { stag, to })
            .boxed()
    } else {
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>())
            .prop_map(|(ulp_word, qn, msn, mo)| BufferModel::Untagged {
                ulp_word,
                qn,
                msn,
                mo,
            })
            .boxed()
    }
}

fn ddp_repr() -> impl Strategy<Value = DdpRepr> {
    (any::<bool>(), any::<bool>(), 0u8..16, any::<u8>()).prop_flat_map(
        |(tagged, last, reserved, ulp_control)| {
            ddp_model(tagged).prop_map(move |model| DdpRepr {
                last,
                reserved,
                ulp_control,
                model,
            })
        },
    )
}

fn opcode() -> impl Strategy<Value = Opcode> {
    select(Opcode::ALL.to_vec())
}

fn rdmap_control() -> impl Strategy<Value = RdmapControl> {
    (0u8..4, opcode()).prop_map(|(reserved, opcode)| RdmapControl { reserved, opcode })
}

/// An owned [`RdmapSegment`].
#[derive(Debug, Clone)]
struct Segment {
    ddp: DdpRepr,
    control: RdmapControl,
    payload: Vec<u8>,
}

impl Segment {
    fn repr(&self) -> RdmapSegment<'_> {
        RdmapSegment {
            ddp: self.ddp,
            control: self.control,
            payload: &self.payload,
        }
    }
}

fn rdmap_segment() -> impl Strategy<Value = Segment> {
    (rdmap_control(), any::<bool>(), 0u8..16, octets(200)).prop_flat_map(
        |(control, last, reserved, payload)| {
            ddp_model(control.opcode.tagged()).prop_map(move |model| Segment {
                ddp: DdpRepr {
                    last,
                    reserved,
                    ulp_control: control.to_u8(),
                    model,
                },
                control,
                payload: payload.clone(),
            })
        },
    )
}

fn read_request() -> impl Strategy<Value = ReadRequest> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(
            |(sink_stag, sink_to, size, source_stag, source_to)| ReadRequest {
                sink_stag,
                sink_to,
                size,
                source_stag,
                source_to,
            },
        )
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn ddp_emit_parse(ddp in ddp_repr(), payload in octets(100)) {
        let mut bytes = vec![0u8; ddp.header_len()];
        prop_assert_eq!(ddp.emit(&mut bytes), Ok(ddp.header_len()));
        prop_assert_eq!(bytes[0] & 0x03, 1, "DV");
        bytes.extend_from_slice(&payload);
        let segment = DdpSegment::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(segment.header_len(), ddp.header_len());
        prop_assert_eq!(segment.payload(), &payload[..]);
        prop_assert_eq!(DdpRepr::parse(&segment).unwrap(), ddp);
        let mut short = vec![0u8; ddp.header_len() - 1];
        let refused = matches!(ddp.emit(&mut short), Err(WireError::BufferTooSmall { .. }));
        prop_assert!(refused);
    }

    #[test]
    fn ddp_parse_emit(bytes in vec(any::<u8>(), 0..40), version in prop_oneof![3 => Just(1u8), 1 => 0u8..4]) {
        let mut bytes = bytes;
        if let Some(first) = bytes.first_mut() {
            *first = (*first & !3) | version;
        }
        let Ok(segment) = DdpSegment::new_checked(&bytes[..]) else {
            let tagged = bytes.first().is_some_and(|b| b & 0x80 != 0);
            let header_len = if tagged { TAGGED_HEADER_LEN } else { UNTAGGED_HEADER_LEN };
            prop_assert!(bytes.len() < header_len);
            return Ok(());
        };
        match DdpRepr::parse(&segment) {
            Ok(ddp) => {
                let mut out = [0u8; UNTAGGED_HEADER_LEN];
                let len = ddp.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..len], &bytes[..len]);
            }
            Err(err) => prop_assert_eq!(err, WireError::BadDdpVersion(version)),
        }
    }

    #[test]
    fn rdmap_segment_emit_parse(segment in rdmap_segment()) {
        let repr = segment.repr();
        let bytes = repr.to_vec();
        prop_assert_eq!(bytes.len(), repr.buffer_len());
        let parsed = RdmapSegment::parse(&bytes).unwrap();
        prop_assert_eq!(parsed, repr);
        prop_assert_eq!(parsed.opcode(), segment.control.opcode);
        prop_assert_eq!(
            parsed.invalidate_stag().is_some(),
            segment.control.opcode.invalidates()
        );
        // The same header in the other buffer model is refused.
        let other = if repr.ddp.tagged() {
            BufferModel::Untagged { ulp_word: 0, qn: 0, msn: 1, mo: 0 }
        } else {
            BufferModel::Tagged { stag: 1, to: 0 }
        };
        let wrong = RdmapSegment { ddp: DdpRepr { model: other, ..repr.ddp }, ..repr };
        prop_assert_eq!(
            RdmapSegment::parse(&wrong.to_vec()).unwrap_err(),
            WireError::OpcodeModelMismatch {
                opcode: segment.control.opcode as u8,
                tagged: !repr.ddp.tagged()
            }
        );
    }

    #[test]
    fn rdmap_segment_parse_emit(t_l in 0u8..4, rest in vec(any::<u8>(), 0..80)) {
        let bytes = [&[t_l << 6 | 1][..], &rest[..]].concat();
        if let Ok(segment) = RdmapSegment::parse(&bytes) {
            prop_assert_eq!(segment.to_vec(), bytes);
        }
    }

    #[test]
    fn read_request_round_trips(request in read_request(), tail in octets(16), raw in any::<[u8; READ_REQUEST_LEN]>()) {
        let bytes = request.to_bytes();
        prop_assert_eq!(ReadRequest::parse(&bytes).unwrap(), request);
        let longer = [&bytes[..], &tail[..]].concat();
        prop_assert_eq!(ReadRequest::parse(&longer).unwrap(), request);
        prop_assert_eq!(ReadRequest::parse(&raw).unwrap().to_bytes(), raw);
        prop_assert!(ReadRequest::parse(&bytes[..READ_REQUEST_LEN - 1]).is_err());
        prop_assert!(request.emit(&mut [0u8; READ_REQUEST_LEN - 1]).is_err());
    }

    #[test]
    fn segmentation_covers_the_message(
        message_len in 0usize..100_000,
        mulpdu in 0usize..3000,
        tagged in any::<bool>(),
    ) {
        let header = if tagged { TAGGED_HEADER_LEN } else { UNTAGGED_HEADER_LEN };
        let lens: Vec<usize> = segment_payload_lens(message_len, mulpdu, tagged).collect();
        if mulpdu <= header {
            prop_assert!(lens.is_empty());
        } else {
            let room = mulpdu - header;
            prop_assert_eq!(lens.iter().sum::<usize>(), message_len);
            prop_assert_eq!(lens.len(), message_len.div_ceil(room).max(1));
            prop_assert!(lens.iter().all(|&len| len <= room));
            prop_assert!(lens[..lens.len() - 1].iter().all(|&len| len == room));
        }
    }
}

#[test]
fn rdmap_control_every_octet() {
    for octet in 0..=u8::MAX {
        match RdmapControl::parse(octet) {
            Ok(control) => assert_eq!(control.to_u8(), octet),
            Err(WireError::BadRdmapVersion(v)) => assert_eq!(v, octet >> 6),
            Err(WireError::UnknownOpcode(op)) => assert!(op >= 0xC && op == octet & 0xF),
            Err(err) => panic!("{octet:#x}: {err:?}"),
        }
        match Opcode::from_u8(octet) {
            Ok(opcode) => assert_eq!(opcode as u8, octet),
            Err(err) => assert_eq!(err, WireError::UnknownOpcode(octet)),
        }
    }
    for opcode in Opcode::ALL {
        assert_eq!(opcode.queue_number().is_none(), opcode.tagged());
    }
}

// ---------------------------------------------------------------- Terminate

/// An owned [`TerminateRepr`].
#[derive(Debug, Clone)]
struct Terminate {
    error: TermError,
    code: u8,
    ddp_segment_len: Option<u16>,
    ddp_header: Option<Vec<u8>>,
    rdmap_header: Option<Vec<u8>>,
    reserved: u16,
    trailing: Vec<u8>,
    layout: TerminateLayout,
}

impl Terminate {
    fn repr(&self) -> TerminateRepr<'_> {
        TerminateRepr {
            error: self.error,
            code: self.code,
            ddp_segment_len: self.ddp_segment_len,
            ddp_header: self.ddp_header.as_deref(),
            rdmap_header: self.rdmap_header.as_deref(),
            reserved: self.reserved,
            trailing: &self.trailing,
            layout: self.layout,
            ambiguous: false,
        }
    }
}

/// A whole DDP header: 14 octets with T set or 18 with T clear.
fn terminated_ddp_header() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), TAGGED_HEADER_LEN).prop_map(|mut h| {
            h[0] |= 0x80;
            h
        }),
        vec(any::<u8>(), UNTAGGED_HEADER_LEN).prop_map(|mut h| {
            h[0] &= 0x7F;
            h
        }),
    ]
}

fn layout() -> impl Strategy<Value = TerminateLayout> {
    prop_oneof![Just(TerminateLayout::Rfc5040), Just(TerminateLayout::Siw)]
}

fn terminate_repr() -> impl Strategy<Value = Terminate> {
    (
        select(TermError::ALL),
        any::<u8>(),
        option::of(any::<u16>()),
        option::of(terminated_ddp_header()),
        option::of(vec(any::<u8>(), READ_REQUEST_LEN)),
        prop_oneof![Just(0u16), 0u16..=0x1FFF],
        prop_oneof![3 => Just(Vec::new()), 1 => vec(any::<u8>(), 1..24)],
        layout(),
    )
        .prop_map(
            |(
                error,
                any_code,
                ddp_segment_len,
                ddp_header,
                rdmap_header,
                reserved,
                trailing,
                layout,
            )| {
                // Only a local catastrophic RDMAP error carries any code.
                let code = if error == TermError::RdmapLocalCatastrophic {
                    any_code
                } else {
                    error.code()
                };
                Terminate {
                    error,
                    code,
                    ddp_segment_len,
                    ddp_header,
                    rdmap_header,
                    reserved,
                    trailing,
                    layout,
                }
            },
        )
}

fn hint_for(layout: TerminateLayout) -> LayoutHint {
    match layout {
        TerminateLayout::Rfc5040 => LayoutHint::Rfc5040,
        TerminateLayout::Siw => LayoutHint::Siw,
    }
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn terminate_emit_parse(term in terminate_repr()) {
        let repr = term.repr();
        let bytes = repr.to_vec().unwrap();
        prop_assert_eq!(bytes.len(), repr.buffer_len());
        let parsed = TerminateRepr::parse(&bytes, hint_for(repr.layout)).unwrap();
        prop_assert_eq!(parsed, repr);
        // Auto finds the same message, in this layout or (when both are
        // valid and clean) in RFC 5040's with `ambiguous` set.
        let auto = TerminateRepr::parse(&bytes, LayoutHint::Auto).unwrap();
        let explicit = TerminateRepr::parse(&bytes, hint_for(auto.layout)).unwrap();
        prop_assert_eq!(TerminateRepr { ambiguous: false, ..auto }, explicit);
        if auto.layout == repr.layout {
            prop_assert_eq!(TerminateRepr { ambiguous: false, ..auto }, repr);
        } else {
            prop_assert_eq!(repr.layout, TerminateLayout::Siw);
            let clean = repr.trailing.is_empty() && repr.reserved == 0;
            prop_assert!(!clean || auto.ambiguous, "clean siw message read as RFC 5040 unambiguously");
        }
        if repr.layout == TerminateLayout::Rfc5040 && repr.trailing.is_empty() && repr.reserved == 0 {
            prop_assert_eq!(auto.layout, TerminateLayout::Rfc5040);
        }
        // A short payload is refused in every layout.
        let cut = bytes.len() - 1;
        if repr.trailing.is_empty() {
            for hint in [LayoutHint::Rfc5040, LayoutHint::Siw] {
                prop_assert!(TerminateRepr::parse(&bytes[..cut], hint) != Ok(repr));
            }
            let truncated = matches!(
                TerminateRepr::parse(&bytes[..cut], hint_for(repr.layout)),
                Err(WireError::Truncated { .. })
            );
            prop_assert!(truncated);
        }
    }

    #[test]
    fn terminate_parse_emit(
        payload in prop_oneof![vec(any::<u8>(), 0..80), terminate_repr().prop_map(|t| t.repr().to_vec().unwrap())],
        flip in any::<prop::sample::Index>(),
        mutate in any::<bool>(),
    ) {
        let mut payload = payload;
        if mutate && !payload.is_empty() {
            let bit = flip.index(payload.len() * 8);
            payload[bit / 8] ^= 1 << (bit % 8);
        }
        for hint in [LayoutHint::Auto, LayoutHint::Rfc5040, LayoutHint::Siw] {
            let Ok(term) = TerminateRepr::parse(&payload, hint) else { continue };
            let bytes = term.to_vec().unwrap();
            prop_assert_eq!(bytes.len(), payload.len());
            if term.ddp_header.is_some() && term.ddp_segment_len.is_none() {
                // D without M: the length field is not valid and goes back as 0.
                prop_assert_eq!(&bytes[..CONTROL_LEN], &payload[..CONTROL_LEN]);
                prop_assert_eq!(&bytes[CONTROL_LEN..CONTROL_LEN + 2], &[0, 0]);
                prop_assert_eq!(&bytes[CONTROL_LEN + 2..], &payload[CONTROL_LEN + 2..]);
            } else {
                prop_assert_eq!(&bytes, &payload);
            }
            prop_assert_eq!(TerminateRepr::parse(&bytes, hint), Ok(term));
        }
    }

    #[test]
    fn terminate_emit_refuses_malformed_headers(
        term in terminate_repr(),
        bad_ddp in prop_oneof![
            vec(any::<u8>(), 0..40).prop_filter("a whole header", |h| {
                !(h.len() == TAGGED_HEADER_LEN && h[0] & 0x80 != 0
                    || h.len() == UNTAGGED_HEADER_LEN && h[0] & 0x80 == 0)
            }),
        ],
        bad_rdmap_len in (0usize..60).prop_filter("not 28", |&len| len != READ_REQUEST_LEN),
    ) {
        let repr = term.repr();
        let with_bad_ddp = TerminateRepr { ddp_header: Some(&bad_ddp), ..repr };
        prop_assert_eq!(with_bad_ddp.to_vec().unwrap_err(), WireError::BadTerminate);
        let rdmap = vec![0u8; bad_rdmap_len];
        let with_bad_rdmap = TerminateRepr { rdmap_header: Some(&rdmap), ..repr };
        prop_assert_eq!(with_bad_rdmap.to_vec().unwrap_err(), WireError::BadTerminate);
    }
}

#[test]
fn term_error_table_every_triple() {
    for layer in 0..16u8 {
        for etype in 0..16u8 {
            for code in 0..=u8::MAX {
                match TermError::from_parts(layer, etype, code) {
                    Ok(TermError::RdmapLocalCatastrophic) => assert_eq!((layer, etype), (0, 0)),
                    Ok(error) => {
                        let (l, t, c) = error.parts();
                        assert_eq!((l as u8, t, c), (layer, etype, code));
                        assert_eq!(error.code(), code);
                        assert_eq!(error.layer(), l);
                    }
                    Err(err) => {
                        assert_eq!(err, WireError::UnknownTerminateCode { layer, etype, code })
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- RPC-over-RDMA

fn inline_size() -> impl Strategy<Value = u32> {
    (1..=MAX_INLINE_THRESHOLD / SIZE_UNIT).prop_map(|units| units * SIZE_UNIT)
}

fn rpcrdma_message() -> impl Strategy<Value = RpcRdmaPrivateData> {
    (any::<bool>(), inline_size(), inline_size(), 0u8..=0x7F).prop_map(
        |(remote_invalidation, send_size, receive_size, reserved)| RpcRdmaPrivateData {
            remote_invalidation,
            send_size,
            receive_size,
            reserved,
        },
    )
}

fn holds_identifier(octets: &[u8]) -> bool {
    octets
        .windows(4)
        .any(|w| w == FORMAT_IDENTIFIER.to_be_bytes())
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn rpcrdma_emit_parse(message in rpcrdma_message(), raw in any::<[u8; 4]>()) {
        let bytes = message.to_bytes().unwrap();
        prop_assert_eq!(RpcRdmaPrivateData::parse(&bytes).unwrap(), message);
        prop_assert!(RpcRdmaPrivateData::parse(&bytes[..MESSAGE_LEN - 1]).is_err());
        // Every version 1 message with any flags and sizes re-emits.
        let any_message = [&FORMAT_IDENTIFIER.to_be_bytes()[..], &[1], &raw[1..]].concat();
        let parsed = RpcRdmaPrivateData::parse(&any_message).unwrap();
        prop_assert_eq!(&parsed.to_bytes().unwrap()[..], &any_message[..]);
        prop_assert_eq!(rpcrdma::decode_size(raw[2]), parsed.send_size);
        prop_assert_eq!(rpcrdma::encode_size(parsed.send_size).unwrap(), raw[2]);
    }

    #[test]
    fn rpcrdma_found_at_any_offset(
        message in rpcrdma_message(),
        before in vec(any::<u8>(), 0..300),
        after in vec(any::<u8>(), 0..300),
    ) {
        prop_assume!(!holds_identifier(&before));
        let private_data = [&before[..], &message.to_bytes().unwrap()[..], &after[..]].concat();
        prop_assert_eq!(RpcRdmaPrivateData::find(&private_data), Some(Ok(message)));
        prop_assert_eq!(RpcRdmaPrivateData::find_or_default(&private_data), message);
        // As MPA private data after the enhanced block, up to the limit.
        let room = MAX_PRIVATE_DATA - ENHANCED_BLOCK_LEN;
        let pd = &private_data[..private_data.len().min(room)];
        let frame = StartupRepr {
            kind: FrameKind::Request,
            markers: false,
            crc: true,
            reject: false,
            reserved_flags: 0,
            revision: Revision::Enhanced,
            enhanced: Some(EnhancedBlock { ird: 1, ord: 1, ..EnhancedBlock::default() }),
            private_data: pd,
        }
        .to_vec()
        .unwrap();
        let (parsed, _) = StartupRepr::parse_bytes(&frame).unwrap();
        let expected = if pd.len() == private_data.len() { Some(Ok(message)) } else {
            RpcRdmaPrivateData::find(pd)
        };
        prop_assert_eq!(RpcRdmaPrivateData::find(parsed.private_data), expected);
    }

    #[test]
    fn rpcrdma_absent_or_invalid(private_data in vec(any::<u8>(), 0..300), version in 2u8..) {
        prop_assume!(!holds_identifier(&private_data));
        prop_assert_eq!(RpcRdmaPrivateData::find(&private_data), None);
        prop_assert_eq!(
            RpcRdmaPrivateData::find_or_default(&private_data),
            RpcRdmaPrivateData::default()
        );
        let mut wrong = private_data.clone();
        wrong.extend_from_slice(&FORMAT_IDENTIFIER.to_be_bytes());
        wrong.extend_from_slice(&[version, 0, 0, 0]);
        prop_assert_eq!(
            RpcRdmaPrivateData::find(&wrong),
            Some(Err(WireError::UnsupportedRpcRdmaVersion(version)))
        );
        let truncated = matches!(
            RpcRdmaPrivateData::find(&wrong[..wrong.len() - 1]),
            Some(Err(WireError::Truncated { .. }))
        );
        prop_assert!(truncated);
    }

    #[test]
    fn rpcrdma_refuses_unencodable_sizes(
        message in rpcrdma_message(),
        bad in prop_oneof![0..SIZE_UNIT, (MAX_INLINE_THRESHOLD + 1)..],
    ) {
        let with_bad = RpcRdmaPrivateData { send_size: bad, ..message };
        prop_assert_eq!(with_bad.to_bytes().unwrap_err(), WireError::BadRpcRdmaSize(bad));
        let with_bad = RpcRdmaPrivateData { receive_size: bad, ..message };
        prop_assert_eq!(with_bad.to_bytes().unwrap_err(), WireError::BadRpcRdmaSize(bad));
    }
}

// ---------------------------------------------------------------- No panics

/// Runs every parser and every accessor of an accepted view over `data`.
fn run_every_parser(data: &[u8], offset: u64) {
    let _ = EnhancedBlock::parse(data);
    if let Ok(frame) = StartupFrame::new_checked(data) {
        let _ = (frame.kind(), frame.flags(), frame.markers(), frame.crc());
        let _ = (frame.reject(), frame.enhanced(), frame.reserved_flags());
        let _ = (frame.revision(), frame.pd_length(), frame.private_data());
        let _ = Revision::from_u8(frame.revision());
    }
    if let Ok((repr, _)) = StartupRepr::parse_bytes(data) {
        let _ = repr.to_vec();
    }
    if let Ok(view) = Fpdu::new_checked(data) {
        let _ = (view.ulpdu(), view.pad(), view.covered(), view.crc_field());
        let _ = (view.verify(true), view.verify(false));
        let _ = RdmapSegment::parse(view.ulpdu());
    }
    if let Ok(parsed) = MarkedFpdu::parse(offset, data) {
        let _ = (parsed.ulpdu(), parsed.verify(true));
    }
    let _ = MarkedFpdu::parse(offset & !3, data);
    if let Ok(segment) = DdpSegment::new_checked(data) {
        let _ = (
            segment.tagged(),
            segment.last(),
            segment.reserved(),
            segment.version(),
        );
        let _ = (segment.ulp_control(), segment.payload());
        if segment.tagged() {
            let _ = (segment.stag(), segment.tagged_offset());
        } else {
            let _ = (segment.ulp_word(), segment.queue_number());
            let _ = (segment.msn(), segment.message_offset());
        }
        let _ = DdpRepr::parse(&segment);
    }
    for &octet in data.iter().take(2) {
        let _ = RdmapControl::parse(octet);
        let _ = Opcode::from_u8(octet);
    }
    if let Ok(segment) = RdmapSegment::parse(data) {
        let _ = (segment.invalidate_stag(), segment.to_vec());
        let _ = ReadRequest::parse(segment.payload);
        let _ = TerminateRepr::parse(segment.payload, LayoutHint::Auto);
    }
    let _ = ReadRequest::parse(data);
    for hint in [LayoutHint::Auto, LayoutHint::Rfc5040, LayoutHint::Siw] {
        if let Ok(term) = TerminateRepr::parse(data, hint) {
            let _ = term.to_vec();
        }
    }
    if let [layer, etype, code, ..] = *data {
        let _ = TermError::from_parts(layer, etype, code);
    }
    let _ = RpcRdmaPrivateData::parse(data);
    let _ = RpcRdmaPrivateData::find(data);
    let _ = RpcRdmaPrivateData::find_or_default(data);
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn parsers_never_panic(data in arbitrary_input(), offset in stream_offset()) {
        run_every_parser(&data, offset);
        // And on every prefix of short inputs.
        if data.len() <= 32 {
            for len in 0..data.len() {
                run_every_parser(&data[..len], offset);
            }
        }
    }
}
