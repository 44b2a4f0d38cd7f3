//! Emission of Ethernet II (RFC 894, with an IEEE 802.1Q tag on a VLAN)
//! and IPv4 (RFC 791 §3.1) headers for the frames we send.
//!
//! Every datagram has Don't Fragment set and no options (RFC 5044 §A.5.1:
//! an MPA/TCP sender sets DF), and its header checksum is computed here or
//! left to the NIC.

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetProtocol, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr,
};

use super::vlan::{self, Vlan};

/// Length of an Ethernet II header.
pub const ETHERNET_HEADER_LEN: usize = smoltcp::wire::ETHERNET_HEADER_LEN;
/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = smoltcp::wire::IPV4_HEADER_LEN;
/// The time to live of the datagrams we send (RFC 1700's recommended value).
pub const DEFAULT_TTL: u8 = 64;
/// The minimum Ethernet frame without its FCS: shorter frames are padded
/// with zeros to this length on transmit.
pub const MIN_FRAME_LEN: usize = 60;
/// Length of the Ethernet and IPv4 headers written by [`write_headers`]
/// without a VLAN tag ([`Ipv4Header::headers_len`] with one).
pub const HEADERS_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
/// The largest L4 payload an IPv4 datagram can carry.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - IPV4_HEADER_LEN;

/// The addressing of a datagram to send.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4Header {
    /// Our MAC address.
    pub src_mac: EthernetAddress,
    /// The next hop's MAC address.
    pub dst_mac: EthernetAddress,
    /// Our IPv4 address.
    pub src: Ipv4Address,
    /// The destination's IPv4 address.
    pub dst: Ipv4Address,
    /// The L4 protocol.
    pub protocol: IpProtocol,
    /// Time to live.
    pub ttl: u8,
    /// The IPv4 identification field.
    pub ident: u16,
    /// The VLAN the frame is tagged for (IEEE 802.1Q), if any.
    pub vlan: Option<Vlan>,
}

impl Ipv4Header {
    /// The length of the Ethernet (tag included) and IPv4 headers
    /// [`write_headers`] writes: [`HEADERS_LEN`], 4 more with a VLAN.
    pub const fn headers_len(&self) -> usize {
        vlan::header_len(self.vlan) + IPV4_HEADER_LEN
    }
}

/// Writes Ethernet (with the VLAN tag, if any) + IPv4 headers (DF set, no
/// options) for an L4 payload of `payload_len` octets into the front of
/// `buf`; computes the IPv4 header checksum unless `checksum_offload`
/// (then writes 0 so the NIC fills it). Returns their length,
/// [`Ipv4Header::headers_len`] (34, or 38 tagged).
///
/// # Panics
///
/// If `buf` is shorter than [`Ipv4Header::headers_len`] or `payload_len` exceeds
/// [`MAX_PAYLOAD_LEN`]: both are the caller's mistakes, never the peer's.
pub fn write_headers(
    buf: &mut [u8],
    header: &Ipv4Header,
    payload_len: usize,
    checksum_offload: bool,
) -> usize {
    assert!(
        payload_len <= MAX_PAYLOAD_LEN,
        "an IPv4 payload of {payload_len} octets does not fit the total length field"
    );
    let len = header.headers_len();
    let (eth, ip) = buf[..len].split_at_mut(len - IPV4_HEADER_LEN);
    vlan::write_header(
        eth,
        header.src_mac,
        header.dst_mac,
        header.vlan,
        EthernetProtocol::Ipv4,
    );
    let mut packet = Ipv4Packet::new_unchecked(ip);
    Ipv4Repr {
        src_addr: header.src,
        dst_addr: header.dst,
        next_header: header.protocol,
        payload_len,
        hop_limit: header.ttl,
    }
    .emit(&mut packet, &ChecksumCapabilities::ignored());
    packet.set_ident(header.ident);
    if checksum_offload {
        packet.set_checksum(0);
    } else {
        packet.fill_checksum();
    }
    len
}

/// A TCP datagram's addressing from 10.0.0.1 to 10.0.0.2, for tests.
#[cfg(test)]
pub(crate) fn test_header() -> Ipv4Header {
    Ipv4Header {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src: Ipv4Address::new(10, 0, 0, 1),
        dst: Ipv4Address::new(10, 0, 0, 2),
        protocol: IpProtocol::Tcp,
        ttl: DEFAULT_TTL,
        ident: 0x1234,
        vlan: None,
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::EthernetFrame;

    use super::*;

    #[test]
    fn headers_parse_back_with_smoltcp() {
        let mut buf = [0xaa; HEADERS_LEN + 100];
        assert_eq!(write_headers(&mut buf, &test_header(), 100, false), 34);
        let eth = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(eth.src_addr(), test_header().src_mac);
        assert_eq!(eth.dst_addr(), test_header().dst_mac);
        assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert!(ip.dont_frag() && !ip.more_frags() && ip.frag_offset() == 0);
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.total_len(), 120);
        assert_eq!(ip.ident(), 0x1234);
        assert_eq!(ip.hop_limit(), DEFAULT_TTL);
        assert_eq!(ip.next_header(), IpProtocol::Tcp);
        assert_eq!(
            (ip.src_addr(), ip.dst_addr()),
            (test_header().src, test_header().dst)
        );
        // The payload is left alone.
        assert!(buf[HEADERS_LEN..].iter().all(|&b| b == 0xaa));
    }

    #[test]
    fn a_vlan_tag_goes_before_the_ipv4_header() {
        let header = Ipv4Header {
            vlan: Some(Vlan::new(42, 6).unwrap()),
            ..test_header()
        };
        let mut buf = [0xaa; HEADERS_LEN + 4 + 10];
        assert_eq!(write_headers(&mut buf, &header, 10, false), 38);
        assert_eq!(buf[12..18], [0x81, 0x00, 0xc0, 0x2a, 0x08, 0x00]);
        let ip = Ipv4Packet::new_checked(&buf[18..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 30);
        assert_eq!(ip.dst_addr(), header.dst);
        assert!(buf[38..].iter().all(|&b| b == 0xaa));
    }

    #[test]
    fn checksum_offload_leaves_the_checksum_zero() {
        let mut buf = [0; HEADERS_LEN];
        write_headers(&mut buf, &test_header(), 0, true);
        let ip = Ipv4Packet::new_checked(&buf[ETHERNET_HEADER_LEN..]).unwrap();
        assert_eq!(ip.checksum(), 0);
    }

    #[test]
    fn the_largest_payload_fits() {
        let mut buf = [0; HEADERS_LEN];
        write_headers(&mut buf, &test_header(), MAX_PAYLOAD_LEN, false);
        let ip = Ipv4Packet::new_unchecked(&buf[ETHERNET_HEADER_LEN..]);
        assert_eq!(ip.total_len(), u16::MAX);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn an_oversized_payload_is_refused() {
        write_headers(
            &mut [0; HEADERS_LEN],
            &test_header(),
            MAX_PAYLOAD_LEN + 1,
            false,
        );
    }
}
