//! Round-trip oracles shared by the fuzz targets and the test suite.
//!
//! Each function takes arbitrary octets, runs one family of parsers over
//! them and, where a parser accepts, re-emits what it parsed and parses the
//! result again. It panics only when that round trip breaks: when an
//! accepted input does not re-emit, when the re-emitted octets do not parse
//! to the same value, or when a canonical input (reserved bits, PAD and
//! unused fields as uwarp sends them) does not come back octet for octet.
//! Input a parser refuses is not an error; the function returns `false`.
//!
//! The cargo-fuzz targets in `stack/fuzz/fuzz_targets/` call one function
//! each, and `stack/tests/fuzz_inputs.rs` runs the same functions over the
//! Linux siw frames of `tests/data/siw/`, mutations of them and bounded
//! random input, so a crash the fuzzer finds can be replayed as an ordinary
//! test.
//!
//! | oracle | input | parsers |
//! | --- | --- | --- |
//! | [`mpa_startup`] | one MPA Request or Reply | [`StartupFrame`], [`StartupRepr`], [`EnhancedBlock`] |
//! | [`fpdu`] | one FPDU without Markers | [`Fpdu`] |
//! | [`marker`] | 8-octet stream offset (little-endian), then one marked FPDU | [`MarkedFpdu`] |
//! | [`ddp_rdmap`] | one ULPDU | [`DdpRepr`], [`RdmapSegment`], then [`ReadRequest`] or [`terminate`] on the payload |
//! | [`terminate`] | one Terminate payload | [`TerminateRepr`] with every [`LayoutHint`] |
//! | [`rpcrdma`] | MPA private data | [`RpcRdmaPrivateData::parse`] and [`RpcRdmaPrivateData::find`] |
//! | [`tcp_segment`] | one TCP segment (header, options, payload) | [`parse_verified`], against smoltcp's `TcpRepr::parse` |

use crate::wire::crc;
use crate::wire::ddp::{DdpRepr, DdpSegment, UNTAGGED_HEADER_LEN};
use crate::wire::fpdu::{self as fpdu_wire, CrcVerdict, Fpdu, LENGTH_FIELD_LEN};
use crate::wire::marker::{self as marker_wire, MarkedFpdu, MARKER_INTERVAL, MARKER_LEN};
use crate::wire::mpa::{EnhancedBlock, StartupFrame, StartupRepr, ENHANCED_BLOCK_LEN, HEADER_LEN};
use crate::wire::rdmap::{Opcode, RdmapControl, RdmapSegment, ReadRequest, READ_REQUEST_LEN};
use crate::wire::rpcrdma::{RpcRdmaPrivateData, FORMAT_IDENTIFIER, MESSAGE_LEN};
use crate::wire::tcp::{self as tcp_wire, parse_verified, Checksum};
use crate::wire::terminate::{LayoutHint, TerminateLayout, TerminateRepr, CONTROL_LEN};

/// Length of the stream offset that opens a [`marker`] input.
pub const OFFSET_PREFIX_LEN: usize = 8;

/// Checks [`StartupRepr`] on an MPA Request or Reply at the start of
/// `data`: an accepted frame re-emits to exactly the octets it was parsed
/// from (reserved flags included) and parses back to the same value.
/// Also checks that every 4 octets re-emit through [`EnhancedBlock`].
/// Returns whether the frame parsed.
pub fn mpa_startup(data: &[u8]) -> bool {
    if let Ok(block) = EnhancedBlock::parse(data) {
        let bytes = block.to_bytes().expect("a parsed enhanced block re-emits");
        assert_eq!(bytes[..], data[..ENHANCED_BLOCK_LEN], "enhanced block");
    }
    let view = StartupFrame::new_checked(data);
    if let Ok(frame) = &view {
        assert_eq!(frame.private_data().len(), usize::from(frame.pd_length()));
        assert_eq!(frame.frame_len(), HEADER_LEN + frame.private_data().len());
        let _ = (frame.kind(), frame.markers(), frame.crc(), frame.reject());
        let _ = (frame.enhanced(), frame.reserved_flags(), frame.revision());
    }
    let Ok((repr, len)) = StartupRepr::parse_bytes(data) else {
        return false;
    };
    assert!(
        view.is_ok(),
        "StartupRepr accepted what StartupFrame refused"
    );
    assert_eq!(len, repr.buffer_len());
    let bytes = repr.to_vec().expect("a parsed startup frame re-emits");
    assert_eq!(bytes[..], data[..len], "startup frame re-emission");
    let again = StartupRepr::parse_bytes(&bytes).expect("a re-emitted startup frame parses");
    assert_eq!(again, (repr, len), "startup frame re-parse");
    true
}

/// Checks [`Fpdu`] on an FPDU without Markers at the start of `data`: the
/// ULPDU re-emits (with the CRC on if the carried CRC was good) to an FPDU
/// of the same length that carries the same ULPDU; a canonical input (zero
/// PAD, CRC good or zero) comes back octet for octet; emitting the ULPDU in
/// two parts gives the same octets; and a flipped bit after the length
/// field is caught by the CRC. Returns whether the FPDU parsed.
pub fn fpdu(data: &[u8]) -> bool {
    let Ok(view) = Fpdu::new_checked(data) else {
        return false;
    };
    let len = view.fpdu_len();
    let ulpdu = view.ulpdu();
    assert_eq!(len, fpdu_wire::fpdu_len(ulpdu.len()));
    assert_eq!(view.covered().len() + crc::CRC_LEN, len);
    assert_eq!(view.verify(false), CrcVerdict::Off);
    let crc_good = view.verify(true) == CrcVerdict::Good;

    let bytes = fpdu_wire::to_vec(&[ulpdu], crc_good).expect("a parsed ULPDU re-emits");
    assert_eq!(bytes.len(), len, "FPDU length");
    let again = Fpdu::new_checked(&bytes[..]).expect("a re-emitted FPDU parses");
    assert_eq!(again.ulpdu(), ulpdu, "FPDU re-parse");
    assert!(again.pad().iter().all(|&octet| octet == 0), "PAD is zero");
    if crc_good {
        assert_eq!(again.verify(true), CrcVerdict::Good, "re-emitted CRC");
    } else {
        assert_eq!(again.crc_field(), 0, "CRC field without CRCs");
    }
    let canonical =
        view.pad().iter().all(|&octet| octet == 0) && (crc_good || view.crc_field() == 0);
    if canonical {
        assert_eq!(bytes[..], data[..len], "canonical FPDU re-emission");
    }

    let seed = crc::crc32c(data) as usize;
    let split = seed % (ulpdu.len() + 1);
    let parts = fpdu_wire::to_vec(&[&ulpdu[..split], &ulpdu[split..]], crc_good)
        .expect("a parsed ULPDU re-emits in parts");
    assert_eq!(parts, bytes, "emission in parts");

    let mut flipped = fpdu_wire::to_vec(&[ulpdu], true).expect("a parsed ULPDU re-emits");
    let bit = LENGTH_FIELD_LEN * 8 + seed % ((len - LENGTH_FIELD_LEN) * 8);
    flipped[bit / 8] ^= 1 << (bit % 8);
    let verdict = Fpdu::new_checked(&flipped[..])
        .expect("a bit flip after the length field keeps the FPDU whole")
        .verify(true);
    assert!(
        matches!(verdict, CrcVerdict::Bad { .. }),
        "CRC missed a flip of bit {bit}"
    );
    true
}

/// Splits a [`marker`] input into its stream offset and the marked octets.
pub fn split_offset(data: &[u8]) -> Option<(u64, &[u8])> {
    let (offset, marked) = data.split_first_chunk::<OFFSET_PREFIX_LEN>()?;
    Some((u64::from_le_bytes(*offset), marked))
}

/// A [`marker`] input: `offset` as 8 little-endian octets, then `marked`.
pub fn with_offset(offset: u64, marked: &[u8]) -> Vec<u8> {
    let mut input = offset.to_le_bytes().to_vec();
    input.extend_from_slice(marked);
    input
}

/// Whether the Markers inside the first `len` octets of `marked`, which
/// starts at stream offset `offset`, have their reserved bits (the first
/// 16 and the two low bits of FPDUPTR) clear.
fn markers_reserved_clear(offset: u64, marked: &[u8], len: usize) -> bool {
    marked[..len].iter().enumerate().all(|(i, &octet)| {
        // 2^64 is a multiple of 512, so the wrapping position has the same
        // place inside its 512-octet interval as the true one.
        let in_interval = (offset.wrapping_add(i as u64) % MARKER_INTERVAL) as usize;
        let is_marker = in_interval < MARKER_LEN && i >= in_interval;
        match (is_marker, in_interval) {
            (false, _) => true,
            (true, 0 | 1) => octet == 0,
            (true, 3) => octet & 0x3 == 0,
            (true, _) => true,
        }
    })
}

/// Checks [`MarkedFpdu::parse`] on `data`: the first 8 octets are the
/// stream offset (little-endian), the rest one FPDU with Markers starting
/// at that offset. An accepted FPDU re-emits with [`marker_wire::emit`] at
/// the same offset to the same marked length, parses back to the same
/// ULPDU, and comes back octet for octet when canonical (zero PAD, Marker
/// reserved bits clear, CRC good or zero). Returns whether the FPDU parsed.
pub fn marker(data: &[u8]) -> bool {
    let Some((offset, marked)) = split_offset(data) else {
        return false;
    };
    let Ok(parsed) = MarkedFpdu::parse(offset, marked) else {
        return false;
    };
    let total = parsed.marked_len;
    assert!(total <= marked.len(), "marked length beyond the input");
    assert_eq!(total, marker_wire::marked_len(offset, parsed.fpdu.len()));
    let view = Fpdu::new_checked(&parsed.fpdu[..]).expect("a stripped FPDU is whole");
    assert_eq!(view.fpdu_len(), parsed.fpdu.len(), "stripped FPDU length");
    assert_eq!(view.ulpdu(), parsed.ulpdu());
    assert_eq!(parsed.verify(false), CrcVerdict::Off);
    let crc_good = parsed.verify(true) == CrcVerdict::Good;

    let bytes = marker_wire::to_vec(offset, &[parsed.ulpdu()], crc_good)
        .expect("a parsed marked FPDU re-emits");
    assert_eq!(bytes.len(), total, "marked FPDU length");
    let again = MarkedFpdu::parse(offset, &bytes).expect("a re-emitted marked FPDU parses");
    assert_eq!(again.ulpdu(), parsed.ulpdu(), "marked FPDU re-parse");
    assert_eq!(again.marked_len, total);
    if crc_good {
        assert_eq!(again.verify(true), CrcVerdict::Good, "re-emitted CRC");
    }
    let canonical = view.pad().iter().all(|&octet| octet == 0)
        && markers_reserved_clear(offset, marked, total)
        && (crc_good || view.crc_field() == 0);
    if canonical {
        assert_eq!(
            bytes[..],
            marked[..total],
            "canonical marked FPDU re-emission"
        );
        assert_eq!(again, parsed, "canonical marked FPDU re-parse");
    }
    true
}

/// Checks the DDP and RDMAP parsers on a ULPDU: an accepted DDP header
/// re-emits octet for octet; an accepted [`RdmapSegment`] re-emits the
/// whole ULPDU octet for octet and parses back equal; the payload of a
/// Read Request goes through [`ReadRequest`], that of a Terminate through
/// [`terminate`]. Returns whether the ULPDU parsed as an RDMAP segment.
pub fn ddp_rdmap(data: &[u8]) -> bool {
    if let Some(&ulp_control) = data.get(1) {
        if let Ok(control) = RdmapControl::parse(ulp_control) {
            assert_eq!(control.to_u8(), ulp_control, "RDMAP control field");
        }
    }
    if let Ok(segment) = DdpSegment::new_checked(data) {
        let header_len = segment.header_len();
        assert_eq!(segment.payload().len(), data.len() - header_len);
        if let Ok(ddp) = DdpRepr::parse(&segment) {
            assert_eq!(ddp.header_len(), header_len);
            let mut header = [0u8; UNTAGGED_HEADER_LEN];
            let written = ddp.emit(&mut header).expect("a parsed DDP header re-emits");
            assert_eq!(
                header[..written],
                data[..header_len],
                "DDP header re-emission"
            );
            let again = DdpSegment::new_checked(&header[..written]).expect("re-emitted DDP header");
            assert_eq!(DdpRepr::parse(&again), Ok(ddp), "DDP header re-parse");
        }
    }
    let Ok(segment) = RdmapSegment::parse(data) else {
        return false;
    };
    assert_eq!(segment.ddp.ulp_control, segment.control.to_u8());
    assert_eq!(segment.opcode().tagged(), segment.ddp.tagged());
    assert_eq!(
        segment.invalidate_stag().is_some(),
        segment.opcode().invalidates()
    );
    let bytes = segment.to_vec();
    assert_eq!(bytes, data, "RDMAP segment re-emission");
    assert_eq!(
        RdmapSegment::parse(&bytes),
        Ok(segment),
        "RDMAP segment re-parse"
    );
    match segment.opcode() {
        Opcode::ReadRequest => {
            if let Ok(request) = ReadRequest::parse(segment.payload) {
                let header = request.to_bytes();
                assert_eq!(
                    header[..],
                    segment.payload[..READ_REQUEST_LEN],
                    "Read Request"
                );
                assert_eq!(ReadRequest::parse(&header), Ok(request));
            }
        }
        Opcode::Terminate => {
            terminate(segment.payload);
        }
        _ => {}
    }
    true
}

/// Re-emits a Terminate parsed from `data` with `hint` and checks it.
fn terminate_round_trip(data: &[u8], term: TerminateRepr<'_>, hint: LayoutHint) {
    match hint {
        LayoutHint::Rfc5040 => assert_eq!(term.layout, TerminateLayout::Rfc5040),
        LayoutHint::Siw => assert_eq!(term.layout, TerminateLayout::Siw),
        LayoutHint::Auto => {}
    }
    assert!(hint == LayoutHint::Auto || !term.ambiguous);
    let bytes = term.to_vec().expect("a parsed Terminate re-emits");
    assert_eq!(bytes.len(), data.len(), "Terminate length");
    // With D but not M the DDP Segment Length field's value is not valid:
    // it reads as None and goes back as 0.
    if term.ddp_header.is_some() && term.ddp_segment_len.is_none() {
        let field = CONTROL_LEN..CONTROL_LEN + 2;
        assert_eq!(bytes[field.clone()], [0, 0], "unused DDP Segment Length");
        assert_eq!(
            bytes[..field.start],
            data[..field.start],
            "Terminate control"
        );
        assert_eq!(bytes[field.end..], data[field.end..], "Terminate headers");
    } else {
        assert_eq!(bytes, data, "Terminate re-emission");
    }
    assert_eq!(
        TerminateRepr::parse(&bytes, hint),
        Ok(term),
        "Terminate re-parse with {hint:?}"
    );
}

/// Checks [`TerminateRepr::parse`] on a Terminate payload with each
/// [`LayoutHint`]: every accepted message re-emits to the same octets
/// (except the unused DDP Segment Length field, which is sent as 0) and
/// parses back equal, and [`LayoutHint::Auto`] agrees with the explicit
/// layouts. Returns whether either layout accepted the payload.
pub fn terminate(data: &[u8]) -> bool {
    let rfc = TerminateRepr::parse(data, LayoutHint::Rfc5040);
    let siw = TerminateRepr::parse(data, LayoutHint::Siw);
    let auto = TerminateRepr::parse(data, LayoutHint::Auto);
    for (hint, result) in [
        (LayoutHint::Rfc5040, rfc),
        (LayoutHint::Siw, siw),
        (LayoutHint::Auto, auto),
    ] {
        if let Ok(term) = result {
            terminate_round_trip(data, term, hint);
        }
    }
    match auto {
        Ok(term) => {
            let explicit = match term.layout {
                TerminateLayout::Rfc5040 => rfc,
                TerminateLayout::Siw => siw,
            };
            let unambiguous = TerminateRepr {
                ambiguous: false,
                ..term
            };
            assert_eq!(explicit, Ok(unambiguous), "Auto differs from its layout");
            if term.ambiguous {
                assert_eq!(term.layout, TerminateLayout::Rfc5040);
                assert!(siw.is_ok(), "ambiguous but siw layout invalid");
            }
        }
        Err(_) => assert!(rfc.is_err() && siw.is_err(), "Auto refused a valid layout"),
    }
    rfc.is_ok() || siw.is_ok()
}

/// Checks [`RpcRdmaPrivateData`] on private data: a message at the start
/// re-emits octet for octet; [`RpcRdmaPrivateData::find`] returns the
/// first identifier occurrence followed by a valid message, else the
/// error of the first occurrence, else `None`; what it finds re-emits to
/// the octets it was found in. Returns whether `find` found a message.
pub fn rpcrdma(data: &[u8]) -> bool {
    if let Ok(message) = RpcRdmaPrivateData::parse(data) {
        let bytes = message.to_bytes().expect("a parsed message re-emits");
        assert_eq!(bytes[..], data[..MESSAGE_LEN], "RPC-over-RDMA re-emission");
    }
    let identifier = FORMAT_IDENTIFIER.to_be_bytes();
    let starts: Vec<usize> = data
        .windows(identifier.len())
        .enumerate()
        .filter(|(_, window)| *window == identifier)
        .map(|(start, _)| start)
        .collect();
    let first_valid = starts
        .iter()
        .copied()
        .find(|&start| RpcRdmaPrivateData::parse(&data[start..]).is_ok());
    let expected = match (first_valid, starts.first()) {
        (Some(start), _) | (None, Some(&start)) => Some(RpcRdmaPrivateData::parse(&data[start..])),
        (None, None) => None,
    };
    let found = RpcRdmaPrivateData::find(data);
    assert_eq!(found, expected, "RPC-over-RDMA find");
    let Some(Ok(message)) = found else {
        assert_eq!(
            RpcRdmaPrivateData::find_or_default(data),
            RpcRdmaPrivateData::default()
        );
        return false;
    };
    let start = first_valid.expect("find found a valid message");
    let bytes = message.to_bytes().expect("a found message re-emits");
    assert_eq!(bytes[..], data[start..start + MESSAGE_LEN], "found message");
    assert_eq!(RpcRdmaPrivateData::find(&bytes), Some(Ok(message)));
    assert_eq!(RpcRdmaPrivateData::find_or_default(data), message);
    true
}

/// Checks uwarp's TCP header parser ([`parse_verified`]) on one segment:
/// it accepts exactly what smoltcp's `TcpRepr::parse` accepts, with the
/// same representation; an accepted segment re-emits (with the options
/// uwarp knows, in its order) to octets that parse back to the same
/// header and payload, except for SACK blocks: the parser keeps those of
/// any segment, as smoltcp does, but [`emit`](tcp_wire::emit) writes them
/// only on a segment with ACK and without SACK-permitted, as smoltcp
/// does, so only there do they survive. Returns whether the segment
/// parsed.
pub fn tcp_segment(data: &[u8]) -> bool {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{IpAddress, Ipv4Address, TcpPacket, TcpRepr};
    let ours = parse_verified(data).ok();
    let addr = Ipv4Address::new(10, 0, 0, 1);
    let theirs = TcpPacket::new_checked(data).ok().and_then(|packet| {
        let ip = IpAddress::Ipv4(addr);
        TcpRepr::parse(&packet, &ip, &ip, &ChecksumCapabilities::ignored()).ok()
    });
    assert_eq!(
        ours, theirs,
        "uwarp and smoltcp parse the TCP segment alike"
    );
    let Some(header) = ours else {
        return false;
    };
    // The longest header the data offset field can give is 60 octets;
    // only a segment from a peer carrying more options than uwarp keeps
    // could ask for more on re-emission (a 4-block SACK cut to 3 never
    // grows), so every accepted header fits.
    let header_len = tcp_wire::header_len(&header);
    let mut bytes = vec![0; header_len + header.payload.len()];
    bytes[header_len..].copy_from_slice(header.payload);
    tcp_wire::emit(&header, addr, addr, &mut bytes, Checksum::Full);
    let again = parse_verified(&bytes).expect("a re-emitted TCP segment parses");
    let sack_written = header.ack_number.is_some() && !header.sack_permitted;
    let expected = TcpRepr {
        sack_ranges: if sack_written {
            header.sack_ranges
        } else {
            [None; 3]
        },
        ..header
    };
    assert_eq!(again, expected, "TCP segment round trip");
    true
}
