//! ICMP echo (RFC 792, "Echo or Echo Reply Message"; RFC 1122 §3.2.2.6:
//! a reply carries the request's identifier, sequence number and data).
//!
//! Other ICMP messages are not handled (counted as unsupported).

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Address, Ipv4Packet,
};

use super::classify::DropReason;
use super::ipv4::{write_headers, Ipv4Header, IPV4_HEADER_LEN};
use super::vlan::{self, Vlan};

/// Length of the ICMP echo header.
pub const ECHO_HEADER_LEN: usize = 8;
/// The most echo data we send: what fits a 1500-octet IPv4 MTU.
pub const MAX_ECHO_DATA_LEN: usize = 1500 - IPV4_HEADER_LEN - ECHO_HEADER_LEN;

/// Which of the two echo messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoKind {
    /// Echo request (type 8).
    Request,
    /// Echo reply (type 0).
    Reply,
}

/// A received echo message and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo<'a> {
    /// Request or reply.
    pub kind: EchoKind,
    /// The Ethernet source of the frame.
    pub src_mac: EthernetAddress,
    /// The IPv4 source of the datagram.
    pub src: Ipv4Address,
    /// The identifier.
    pub ident: u16,
    /// The sequence number.
    pub seq: u16,
    /// The data.
    pub data: &'a [u8],
}

/// Parses the echo message in a frame that [`classify`](super::classify())
/// returned as [`Classified::Icmp`](super::Classified::Icmp) (after its
/// IEEE 802.1Q tag, if it has one), verifying its checksum.
pub fn parse_echo(frame: &[u8]) -> Result<Echo<'_>, DropReason> {
    let malformed = |_| DropReason::IcmpMalformed;
    let eth = EthernetFrame::new_checked(frame).map_err(malformed)?;
    let payload = vlan::parse(frame)
        .and_then(|l2| frame.get(l2.len..))
        .ok_or(DropReason::IcmpMalformed)?;
    let ip = Ipv4Packet::new_checked(payload).map_err(malformed)?;
    let packet = Icmpv4Packet::new_checked(ip.payload()).map_err(malformed)?;
    if !packet.verify_checksum() {
        return Err(DropReason::IcmpBadChecksum);
    }
    let (kind, ident, seq, data) =
        match Icmpv4Repr::parse(&packet, &ChecksumCapabilities::ignored()) {
            Ok(Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }) => (EchoKind::Request, ident, seq_no, data),
            Ok(Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            }) => (EchoKind::Reply, ident, seq_no, data),
            _ => return Err(DropReason::IcmpUnsupported),
        };
    Ok(Echo {
        kind,
        src_mac: eth.src_addr(),
        src: ip.src_addr(),
        ident,
        seq,
        data,
    })
}

/// The length of an echo frame carrying `data_len` octets from a port on
/// `vlan` (tagged if set), before padding.
pub const fn echo_frame_len(vlan: Option<Vlan>, data_len: usize) -> usize {
    vlan::header_len(vlan) + IPV4_HEADER_LEN + ECHO_HEADER_LEN + data_len
}

/// Writes an echo message with its Ethernet (tagged if `header` has a
/// VLAN) and IPv4 headers (`header`'s protocol must be ICMP) into
/// `buf[..echo_frame_len(header.vlan, data.len())]`, all checksums
/// computed, and returns that length.
///
/// # Panics
///
/// If `buf` is shorter than that, or `data` longer than an IPv4 datagram
/// can carry.
pub fn write_echo(
    buf: &mut [u8],
    header: &Ipv4Header,
    kind: EchoKind,
    ident: u16,
    seq: u16,
    data: &[u8],
) -> usize {
    debug_assert_eq!(header.protocol, IpProtocol::Icmp);
    let len = echo_frame_len(header.vlan, data.len());
    let headers_len = write_headers(buf, header, len - header.headers_len(), false);
    let repr = match kind {
        EchoKind::Request => Icmpv4Repr::EchoRequest {
            ident,
            seq_no: seq,
            data,
        },
        EchoKind::Reply => Icmpv4Repr::EchoReply {
            ident,
            seq_no: seq,
            data,
        },
    };
    let mut packet = Icmpv4Packet::new_unchecked(&mut buf[headers_len..len]);
    repr.emit(&mut packet, &ChecksumCapabilities::default());
    len
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::{EthernetAddress, Icmpv4DstUnreachable, Ipv4Repr};

    use super::*;
    use crate::net::ipv4::DEFAULT_TTL;
    use crate::net::test_frames::*;

    #[test]
    fn echo_requests_and_replies_parse() {
        let frame = echo_request(7, 9, b"abc");
        assert_eq!(
            parse_echo(&frame).unwrap(),
            Echo {
                kind: EchoKind::Request,
                src_mac: PEER_MAC,
                src: PEER_IP,
                ident: 7,
                seq: 9,
                data: b"abc",
            }
        );
        let reply = icmp(
            PEER_IP,
            &Icmpv4Repr::EchoReply {
                ident: 1,
                seq_no: 2,
                data: &[],
            },
        );
        assert_eq!(parse_echo(&reply).unwrap().kind, EchoKind::Reply);
    }

    #[test]
    fn bad_checksums_short_and_other_messages_are_refused() {
        let mut bad_sum = echo_request(7, 9, b"abc");
        bad_sum[36] ^= 0x10;
        assert_eq!(parse_echo(&bad_sum), Err(DropReason::IcmpBadChecksum));
        let short = crate::net::test_frames::ipv4(PEER_IP, OUR_IP, IpProtocol::Icmp, 7, |_| {});
        assert_eq!(parse_echo(&short), Err(DropReason::IcmpMalformed));
        let unreachable = icmp(
            PEER_IP,
            &Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::PortUnreachable,
                header: Ipv4Repr {
                    src_addr: OUR_IP,
                    dst_addr: PEER_IP,
                    next_header: IpProtocol::Udp,
                    payload_len: 8,
                    hop_limit: 64,
                },
                data: &[0; 8],
            },
        );
        assert_eq!(parse_echo(&unreachable), Err(DropReason::IcmpUnsupported));
        let mut code_1 = echo_request(7, 9, b"abc");
        code_1[35] = 1;
        Icmpv4Packet::new_unchecked(&mut code_1[34..45]).fill_checksum();
        assert_eq!(parse_echo(&code_1), Err(DropReason::IcmpUnsupported));
    }

    #[test]
    fn written_echoes_verify_with_smoltcp() {
        let header = Ipv4Header {
            src_mac: OUR_MAC,
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 9]),
            src: OUR_IP,
            dst: PEER_IP,
            protocol: IpProtocol::Icmp,
            ttl: DEFAULT_TTL,
            ident: 3,
            vlan: None,
        };
        let data = b"odd length";
        let mut buf = vec![0; echo_frame_len(None, data.len())];
        let len = write_echo(&mut buf, &header, EchoKind::Request, 5, 6, data);
        assert_eq!(len, buf.len());
        let ip = Ipv4Packet::new_checked(&buf[14..]).unwrap();
        assert!(ip.verify_checksum());
        let packet = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(
            Icmpv4Repr::parse(&packet, &ChecksumCapabilities::default()),
            Ok(Icmpv4Repr::EchoRequest {
                ident: 5,
                seq_no: 6,
                data,
            })
        );
    }

    #[test]
    fn echoes_on_a_vlan_are_tagged_and_read_past_the_tag() {
        let vlan = Vlan::new(42, 2).unwrap();
        let header = Ipv4Header {
            src_mac: OUR_MAC,
            dst_mac: PEER_MAC,
            src: OUR_IP,
            dst: PEER_IP,
            protocol: IpProtocol::Icmp,
            ttl: DEFAULT_TTL,
            ident: 3,
            vlan: Some(vlan),
        };
        let mut buf = vec![0; echo_frame_len(Some(vlan), 3)];
        assert_eq!(buf.len(), 18 + 20 + 8 + 3);
        write_echo(&mut buf, &header, EchoKind::Reply, 5, 6, b"abc");
        assert_eq!(buf[12..18], [0x81, 0x00, 0x40, 0x2a, 0x08, 0x00]);
        let echo = parse_echo(&buf).unwrap();
        assert_eq!(
            (echo.kind, echo.src, echo.data),
            (EchoKind::Reply, OUR_IP, &b"abc"[..])
        );
        let theirs = tagged(&echo_request(7, 9, b"xyz"), 42, 0);
        assert_eq!(parse_echo(&theirs).unwrap().data, b"xyz");
        assert_eq!(parse_echo(&theirs[..16]), Err(DropReason::IcmpMalformed));
    }
}
