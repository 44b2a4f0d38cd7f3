//! The TCP header (RFC 9293 section 3.1) with its options, out and in:
//! MSS (RFC 9293 section 3.7.1), window scale and timestamps (RFC 7323
//! sections 2.2 and 3.2), SACK-permitted and SACK blocks (RFC 2018
//! sections 2 and 3), and the checksum over the IPv4 pseudo-header (RFC
//! 9293 section 3.1). A header is smoltcp's `TcpRepr`: [`parse`] and
//! [`parse_verified`] read one from a received segment, [`emit`] writes
//! one with its checksum (whole, or the pseudo-header's sum for a device
//! to complete).
//!
//! Both directions give exactly what `smoltcp::wire::TcpRepr`'s `emit`
//! and `parse` give (the same octets out, with the options in smoltcp's
//! order and End of Option List padding; the same representation or the
//! same refusal in), which the tests check against smoltcp over arbitrary
//! headers and arbitrary octets. They exist because the dataplane writes
//! and reads a header for every segment: smoltcp's general code sums the
//! header's length again for each field it places, and reads options
//! through a general decoder whose results go through memory (a
//! store-forwarding stall on every option); together that was about a
//! fifth of the sending core's time and a twentieth of the receiving
//! core's.

use super::field::{get_u16, get_u32, set_u16, set_u32};
use smoltcp::wire::{
    checksum, IpAddress, IpProtocol, Ipv4Address, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
    TcpTimestampRepr,
};

/// The fixed part of the header, before the options.
const FIXED_LEN: usize = 20;

/// The longest header the data offset field can describe (15 words).
pub const MAX_HEADER_LEN: usize = 60;

/// Option kinds (RFC 9293 section 3.1, RFC 7323, RFC 2018).
const END_OF_OPTIONS: u8 = 0;
const NOP: u8 = 1;
const MSS: u8 = 2;
const WINDOW_SCALE: u8 = 3;
const SACK_PERMITTED: u8 = 4;
const SACK: u8 = 5;
const TIMESTAMPS: u8 = 8;

/// The largest window shift (RFC 7323 section 2.3): a larger one counts
/// as 14.
const MAX_WINDOW_SHIFT: u8 = 14;

/// Flag bits of octet 13.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// Why a received TCP segment was refused before reaching any connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Too short, a bad data offset, a bad option, zero ports, or flags
    /// that cannot go together (SYN with FIN or RST).
    Malformed,
    /// The checksum over the IPv4 pseudo-header and segment is wrong.
    Checksum,
}

/// Parses and checksums a TCP segment carried between IPv4 `src` and
/// `dst`. Never panics, whatever `bytes` hold.
pub fn parse(src: Ipv4Address, dst: Ipv4Address, bytes: &[u8]) -> Result<TcpRepr<'_>, ParseError> {
    let packet = TcpPacket::new_checked(bytes).map_err(|_| ParseError::Malformed)?;
    if !packet.verify_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst)) {
        return Err(ParseError::Checksum);
    }
    parse_verified(bytes)
}

/// Parses a TCP segment whose checksum was verified already (by the
/// dataplane's classification, or by the NIC), so the fast path does not
/// sum every octet twice. Never panics, whatever `bytes` hold.
pub fn parse_verified(bytes: &[u8]) -> Result<TcpRepr<'_>, ParseError> {
    parse_header(bytes).ok_or(ParseError::Malformed)
}

/// What [`emit`] puts in the checksum field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// The whole checksum over the IPv4 pseudo-header and the segment,
    /// which the buffer given to [`emit`] holds whole: room for the
    /// header, then the payload.
    Full,
    /// Only the sum of the IPv4 pseudo-header (RFC 9293 section 3.1), not
    /// complemented, for a device that completes the checksum (RFC 1071
    /// sums are additive, so it adds the segment's octets to what the
    /// field holds).
    PseudoHeader {
        /// Octets in the whole segment, header and payload.
        len: usize,
    },
}

/// Writes `header` (its `payload` is not looked at) into the front of
/// `out` and fills its checksum field as `sum` says, for a segment
/// from `src` to `dst`; returns the header's length.
///
/// # Panics
/// If `out` is shorter than [`header_len`], or the options make the
/// header longer than [`MAX_HEADER_LEN`] (the engine never builds such a
/// header: SACK blocks, at most 3, never go with the SYN's options).
pub fn emit(
    header: &TcpRepr<'_>,
    src: Ipv4Address,
    dst: Ipv4Address,
    out: &mut [u8],
    sum: Checksum,
) -> usize {
    let header_len = write(header, out);
    let mut packet = TcpPacket::new_unchecked(out);
    match sum {
        Checksum::Full => packet.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst)),
        Checksum::PseudoHeader { len } => packet.set_checksum(checksum::pseudo_header_v4(
            &src,
            &dst,
            IpProtocol::Tcp,
            len as u32,
        )),
    }
    header_len
}

/// The SACK blocks `header` carries.
fn sack_blocks(header: &TcpRepr<'_>) -> usize {
    header.sack_ranges.iter().flatten().count()
}

/// The header's length in octets, options and padding included: what
/// `TcpRepr::header_len` gives, a multiple of 4.
pub fn header_len(header: &TcpRepr<'_>) -> usize {
    let blocks = sack_blocks(header);
    let options = usize::from(header.max_seg_size.is_some()) * 4
        + usize::from(header.window_scale.is_some()) * 3
        + usize::from(header.sack_permitted) * 2
        + usize::from(header.timestamp.is_some()) * 10
        + if blocks > 0 { 2 + 8 * blocks } else { 0 };
    (FIXED_LEN + options).next_multiple_of(4)
}

/// Writes `header` (its `payload` is not looked at) into the front of
/// `out`, with a zero checksum field; returns the header's length. Panics
/// as [`emit`] does.
fn write(header: &TcpRepr<'_>, out: &mut [u8]) -> usize {
    let len = header_len(header);
    assert!(len <= MAX_HEADER_LEN, "a TCP header of {len} octets");
    let out = &mut out[..len];
    set_u16(out, 0, header.src_port);
    set_u16(out, 2, header.dst_port);
    set_u32(out, 4, header.seq_number.0 as u32);
    set_u32(out, 8, header.ack_number.map_or(0, |ack| ack.0 as u32));
    out[12] = ((len / 4) as u8) << 4;
    out[13] = control_flag(header.control) | if header.ack_number.is_some() { ACK } else { 0 };
    set_u16(out, 14, header.window_len);
    out[16..20].fill(0);
    // The padding, at most three octets, lies in the last word: zeroed
    // whole before the options (one store, not a call to memset).
    out[len - 4..].copy_from_slice(&[END_OF_OPTIONS; 4]);
    write_options(header, &mut out[FIXED_LEN..]);
    len
}

/// The flag of a segment's control.
fn control_flag(control: TcpControl) -> u8 {
    match control {
        TcpControl::None => 0,
        TcpControl::Psh => PSH,
        TcpControl::Syn => SYN,
        TcpControl::Fin => FIN,
        TcpControl::Rst => RST,
    }
}

/// Writes the options in smoltcp's order into `out`, whose last word the
/// caller has set to End of Option List octets, and pads the rest. SACK
/// blocks go only on a segment with an ACK and without SACK-permitted, as
/// smoltcp writes them.
fn write_options(header: &TcpRepr<'_>, out: &mut [u8]) {
    let mut at = 0;
    let mut option = |kind: u8, value: &[u8]| {
        out[at] = kind;
        out[at + 1] = (2 + value.len()) as u8;
        out[at + 2..at + 2 + value.len()].copy_from_slice(value);
        at += 2 + value.len();
    };
    if let Some(mss) = header.max_seg_size {
        option(MSS, &mss.to_be_bytes());
    }
    if let Some(shift) = header.window_scale {
        option(WINDOW_SCALE, &[shift]);
    }
    if header.sack_permitted {
        option(SACK_PERMITTED, &[]);
    } else if header.ack_number.is_some() && sack_blocks(header) > 0 {
        let mut blocks = [0u8; 24];
        let mut len = 0;
        for &(left, right) in header.sack_ranges.iter().flatten() {
            set_u32(&mut blocks, len, left);
            set_u32(&mut blocks, len + 4, right);
            len += 8;
        }
        option(SACK, &blocks[..len]);
    }
    if let Some(timestamp) = header.timestamp {
        let mut value = [0u8; 8];
        set_u32(&mut value, 0, timestamp.tsval);
        set_u32(&mut value, 4, timestamp.tsecr);
        option(TIMESTAMPS, &value);
    }
    // More than the last word's padding only where smoltcp counts SACK
    // blocks it does not write (with SACK-permitted, or without an ACK).
    if out.len() - at > 3 {
        out[at..].fill(END_OF_OPTIONS);
    }
}

/// The header at the front of `segment`, and its payload: `None` where
/// smoltcp's `TcpRepr::parse` refuses the octets (too short, a data
/// offset below 5 words or past the end, a zero port, SYN, FIN and RST
/// together in any pair, an option running past the header or of a
/// known kind with the wrong length). The checksum is not looked at.
fn parse_header(segment: &[u8]) -> Option<TcpRepr<'_>> {
    let fixed = segment.get(..FIXED_LEN)?;
    let len = usize::from(fixed[12] >> 4) * 4;
    if len < FIXED_LEN || segment.len() < len {
        return None;
    }
    let (src_port, dst_port) = (get_u16(fixed, 0), get_u16(fixed, 2));
    if src_port == 0 || dst_port == 0 {
        return None;
    }
    let flags = fixed[13];
    let flag = |bit: u8| flags & bit != 0;
    let control = match (flag(SYN), flag(FIN), flag(RST), flag(PSH)) {
        (false, false, false, false) => TcpControl::None,
        (false, false, false, true) => TcpControl::Psh,
        (true, false, false, _) => TcpControl::Syn,
        (false, true, false, _) => TcpControl::Fin,
        (false, false, true, _) => TcpControl::Rst,
        _ => return None,
    };
    let mut header = TcpRepr {
        src_port,
        dst_port,
        control,
        seq_number: TcpSeqNumber(get_u32(fixed, 4) as i32),
        ack_number: flag(ACK).then(|| TcpSeqNumber(get_u32(fixed, 8) as i32)),
        window_len: get_u16(fixed, 14),
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &segment[len..],
    };
    read_options(&segment[FIXED_LEN..len], &mut header)?;
    Some(header)
}

/// Reads `options` into `header` as smoltcp does: the last of each kind
/// counts, unknown kinds and timestamps of the wrong length are skipped,
/// at most three SACK blocks are kept; `None` for an option of a known
/// kind with the wrong length or one running past the header.
fn read_options<'a>(mut options: &'a [u8], header: &mut TcpRepr<'a>) -> Option<()> {
    while let Some(&kind) = options.first() {
        match kind {
            END_OF_OPTIONS => break,
            NOP => {
                options = &options[1..];
                continue;
            }
            _ => {}
        }
        let len = usize::from(*options.get(1)?);
        let value = options.get(2..len)?;
        match (kind, len) {
            (MSS, 4) => header.max_seg_size = Some(get_u16(value, 0)),
            (WINDOW_SCALE, 3) => header.window_scale = Some(value[0].min(MAX_WINDOW_SHIFT)),
            (SACK_PERMITTED, 2) => header.sack_permitted = true,
            (MSS | WINDOW_SCALE | SACK_PERMITTED, _) => return None,
            (SACK, _) if len < 10 || (len - 2) % 8 != 0 => return None,
            (SACK, _) => {
                let mut blocks = value
                    .chunks_exact(8)
                    .map(|block| (get_u32(block, 0), get_u32(block, 4)));
                header.sack_ranges = std::array::from_fn(|_| blocks.next());
            }
            (TIMESTAMPS, 10) => {
                header.timestamp =
                    Some(TcpTimestampRepr::new(get_u32(value, 0), get_u32(value, 4)));
            }
            _ => {}
        }
        options = &options[len..];
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use smoltcp::phy::ChecksumCapabilities;

    /// What smoltcp writes for `header`.
    fn smoltcp_octets(header: &TcpRepr<'_>) -> Vec<u8> {
        let mut octets = vec![0xAA; header.header_len()];
        let addr = IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 1));
        header.emit(
            &mut TcpPacket::new_unchecked(&mut octets),
            &addr,
            &addr,
            &ChecksumCapabilities::ignored(),
        );
        octets
    }

    fn control() -> impl Strategy<Value = TcpControl> {
        prop_oneof![
            Just(TcpControl::None),
            Just(TcpControl::Psh),
            Just(TcpControl::Syn),
            Just(TcpControl::Fin),
            Just(TcpControl::Rst),
        ]
    }

    prop_compose! {
        fn any_header()(
            ports in any::<(u16, u16)>(),
            control in control(),
            seq in any::<i32>(),
            ack in proptest::option::of(any::<i32>()),
            window_len in any::<u16>(),
            window_scale in proptest::option::of(any::<u8>()),
            max_seg_size in proptest::option::of(any::<u16>()),
            sack_permitted in any::<bool>(),
            sack_ranges in proptest::array::uniform3(proptest::option::of(any::<(u32, u32)>())),
            timestamp in proptest::option::of(any::<(u32, u32)>()),
        ) -> TcpRepr<'static> {
            TcpRepr {
                src_port: ports.0,
                dst_port: ports.1,
                control,
                seq_number: TcpSeqNumber(seq),
                ack_number: ack.map(TcpSeqNumber),
                window_len,
                window_scale,
                max_seg_size,
                sack_permitted,
                sack_ranges,
                timestamp: timestamp.map(|(tsval, tsecr)| TcpTimestampRepr::new(tsval, tsecr)),
                payload: &[],
            }
        }
    }

    proptest! {
        #[test]
        fn every_header_is_written_as_smoltcp_writes_it(header in any_header()) {
            // The data offset field's limit, which smoltcp does not check.
            prop_assume!(header.header_len() <= MAX_HEADER_LEN);
            let expected = smoltcp_octets(&header);
            prop_assert_eq!(header_len(&header), expected.len());
            let mut octets = vec![0x55; expected.len() + 8];
            prop_assert_eq!(write(&header, &mut octets), expected.len());
            prop_assert_eq!(&octets[..expected.len()], &expected[..]);
            // Nothing written past the header.
            prop_assert!(octets[expected.len()..].iter().all(|&b| b == 0x55));
        }
    }

    /// What smoltcp parses from `octets`, checksum not checked.
    fn smoltcp_parse(octets: &[u8]) -> Option<TcpRepr<'_>> {
        let addr = IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 1));
        let packet = TcpPacket::new_checked(octets).ok()?;
        TcpRepr::parse(&packet, &addr, &addr, &ChecksumCapabilities::ignored()).ok()
    }

    /// Option octets built from known and unknown kinds, lengths right,
    /// wrong or past the end.
    fn option_octets() -> impl Strategy<Value = Vec<u8>> {
        let option = prop_oneof![
            Just(vec![END_OF_OPTIONS]),
            Just(vec![NOP]),
            any::<u16>().prop_map(|mss| [&[MSS, 4][..], &mss.to_be_bytes()].concat()),
            any::<u8>().prop_map(|shift| vec![WINDOW_SCALE, 3, shift]),
            Just(vec![SACK_PERMITTED, 2]),
            (1usize..5, any::<[u8; 32]>()).prop_map(|(n, edges)| [
                &[SACK, (2 + 8 * n) as u8][..],
                &edges[..8 * n]
            ]
            .concat()),
            any::<[u8; 8]>().prop_map(|ts| [&[TIMESTAMPS, 10][..], &ts[..]].concat()),
            (any::<u8>(), 0u8..12, any::<[u8; 10]>()).prop_map(|(kind, len, value)| {
                let body = usize::from(len.saturating_sub(2));
                [&[kind, len][..], &value[..body]].concat()
            }),
        ];
        proptest::collection::vec(option, 0..6).prop_map(|options| options.concat())
    }

    prop_compose! {
        /// A fixed header with random fields and `options` (cut to 40
        /// octets, padded to a word), then a short payload.
        fn segment_with_options()(
            fixed in any::<[u8; 20]>(),
            options in option_octets(),
            pad in any::<[u8; 3]>(),
            payload in proptest::collection::vec(any::<u8>(), 0..8),
        ) -> Vec<u8> {
            let mut options = options;
            options.truncate(40);
            let padding = (4 - options.len() % 4) % 4;
            options.extend_from_slice(&pad[..padding]);
            let mut octets = fixed.to_vec();
            octets[12] = (((20 + options.len()) / 4) as u8) << 4 | (fixed[12] & 0x0F);
            octets.extend_from_slice(&options);
            octets.extend_from_slice(&payload);
            octets
        }
    }

    proptest! {
        #[test]
        fn any_octets_parse_as_smoltcp_parses_them(
            octets in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            prop_assert_eq!(parse_header(&octets), smoltcp_parse(&octets));
        }

        #[test]
        fn any_options_parse_as_smoltcp_parses_them(octets in segment_with_options()) {
            prop_assert_eq!(parse_header(&octets), smoltcp_parse(&octets));
        }

        #[test]
        fn every_written_header_parses_back(header in any_header()) {
            prop_assume!(header.header_len() <= MAX_HEADER_LEN);
            let mut octets = vec![0; header_len(&header)];
            write(&header, &mut octets);
            prop_assert_eq!(parse_header(&octets), smoltcp_parse(&octets));
        }
    }

    #[test]
    fn a_data_segment_carries_its_timestamps_then_padding() {
        let header = TcpRepr {
            src_port: 49152,
            dst_port: 4791,
            control: TcpControl::Psh,
            seq_number: TcpSeqNumber(0x0102_0304),
            ack_number: Some(TcpSeqNumber(0x0A0B_0C0D)),
            window_len: 0x1234,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: Some(TcpTimestampRepr::new(7, 9)),
            payload: &[],
        };
        let mut octets = [0xFF; 32];
        assert_eq!(write(&header, &mut octets), 32);
        assert_eq!(
            octets,
            [
                0xC0, 0x00, 0x12, 0xB7, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0x80, 0x18, 0x12, 0x34,
                0, 0, 0, 0, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 0, 0
            ]
        );
    }
}
