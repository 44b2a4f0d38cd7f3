//! Stateless classification of received frames, run by the dataplane cores
//! on every frame.
//!
//! Implements the receive checks of Ethernet II framing (RFC 894; on a
//! VLAN, the IEEE 802.1Q tag with the port's VLAN identifier), IPv4
//! (RFC 791 §3.1 header validation, RFC 1122 §3.2.1: version, header
//! checksum, destination and source address rules) and TCP (RFC 9293 §3.1
//! header, §3.1 checksum over the pseudo-header). IPv4 fragments are
//! dropped, option 1 of RFC 5044 §A.5.1. IPv4 options are accepted and
//! skipped: the TCP header starts where the IHL says.
//!
//! Nothing here allocates, panics or indexes out of bounds, whatever the
//! frame holds.

use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};

use super::addr::{FourTuple, InterfaceAddress};
use super::ipv4::{ETHERNET_HEADER_LEN, IPV4_HEADER_LEN};
use super::vlan;

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than an Ethernet header (18 octets when it has an IEEE
    /// 802.1Q tag: a truncated tag).
    Runt,
    /// Unicast to another MAC address.
    NotOurMac,
    /// On a port on a VLAN, a frame without an IEEE 802.1Q tag or tagged
    /// with another VLAN identifier.
    NotOurVlan,
    /// Neither IPv4 nor ARP (IPv6, everything else, and on a port on no
    /// VLAN, every IEEE 802.1Q tagged frame).
    UnknownEtherType,
    /// The IPv4 version field is not 4.
    Ipv4BadVersion,
    /// Shorter than an IPv4 header, or an IHL below 5 or beyond the frame.
    Ipv4BadHeaderLength,
    /// The IPv4 total length is below the header length or beyond the frame.
    Ipv4BadTotalLength,
    /// The IPv4 header checksum is wrong.
    Ipv4BadChecksum,
    /// An IPv4 fragment (MF set or a nonzero offset), RFC 5044 §A.5.1 option 1.
    Ipv4Fragment,
    /// The IPv4 destination is not our address.
    Ipv4NotOurAddress,
    /// The IPv4 source is unspecified, broadcast, multicast, loopback or ours.
    Ipv4SourceInvalid,
    /// A broadcast frame other than ARP, or any multicast frame.
    BroadcastNotArp,
    /// An IPv4 protocol other than TCP and ICMP (UDP, for one).
    UnknownProtocol,
    /// A TCP segment shorter than 20 octets or than its data offset.
    TcpTruncated,
    /// The TCP checksum is wrong.
    TcpBadChecksum,
    /// A TCP segment from or to port 0.
    TcpBadPort,
    /// An ARP packet that is truncated, not Ethernet/IPv4, neither request
    /// nor reply, or from a broadcast or multicast hardware address.
    ArpMalformed,
    /// An ARP packet neither for our address nor about a known neighbour.
    ArpNotForUs,
    /// An ICMP message shorter than its 8-octet header.
    IcmpMalformed,
    /// The ICMP checksum is wrong.
    IcmpBadChecksum,
    /// An ICMP message other than echo request and echo reply.
    IcmpUnsupported,
}

impl DropReason {
    /// Every reason, in declaration order.
    pub const ALL: [DropReason; 21] = [
        DropReason::Runt,
        DropReason::NotOurMac,
        DropReason::NotOurVlan,
        DropReason::UnknownEtherType,
        DropReason::Ipv4BadVersion,
        DropReason::Ipv4BadHeaderLength,
        DropReason::Ipv4BadTotalLength,
        DropReason::Ipv4BadChecksum,
        DropReason::Ipv4Fragment,
        DropReason::Ipv4NotOurAddress,
        DropReason::Ipv4SourceInvalid,
        DropReason::BroadcastNotArp,
        DropReason::UnknownProtocol,
        DropReason::TcpTruncated,
        DropReason::TcpBadChecksum,
        DropReason::TcpBadPort,
        DropReason::ArpMalformed,
        DropReason::ArpNotForUs,
        DropReason::IcmpMalformed,
        DropReason::IcmpBadChecksum,
        DropReason::IcmpUnsupported,
    ];
}

/// What the NIC says about a checksum of a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxChecksum {
    /// Not checked by the NIC: verify it in software.
    Unknown,
    /// The NIC verified it: skip the software check.
    Good,
    /// The NIC found it wrong: drop the frame.
    Bad,
}

/// Where a received TCP segment is and which connection it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMeta {
    /// The connection, from our side.
    pub tuple: FourTuple,
    /// Offset of the IPv4 header in the frame.
    pub ip_offset: usize,
    /// Offset of the TCP header in the frame.
    pub tcp_offset: usize,
    /// TCP header plus payload, per the IPv4 total length (Ethernet
    /// padding excluded).
    pub tcp_len: usize,
    /// The SYN flag.
    pub syn: bool,
    /// The ACK flag.
    pub ack: bool,
    /// The RST flag.
    pub rst: bool,
}

/// The verdict on one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classified {
    /// A valid TCP segment for our address: route it by its 4-tuple.
    Tcp(TcpMeta),
    /// An ARP packet, for the control core's [`Interface`](super::Interface).
    Arp,
    /// An ICMP message for our address, for the control core's
    /// [`Interface`](super::Interface) (validated there).
    Icmp,
    /// Drop the frame (and count the reason).
    Drop(DropReason),
}

/// Classifies one received frame for the interface `addr`; `ip_csum` and
/// `tcp_csum` are the NIC's verdicts on the IPv4 and TCP checksums.
pub fn classify(
    frame: &[u8],
    addr: &InterfaceAddress,
    ip_csum: RxChecksum,
    tcp_csum: RxChecksum,
) -> Classified {
    classify_chained(frame, 0, addr, ip_csum, tcp_csum)
}

/// Like [`classify()`], for a frame in two pieces: `head` holds the
/// headers and `tail_len` octets follow it elsewhere (an mbuf chain whose
/// second segment is a TCP payload sent by reference). The tail may only
/// be TCP payload whose checksum the device vouched for: a TCP header
/// that does not end exactly where `head` does, or a `tcp_csum` other
/// than [`RxChecksum::Good`], drops the frame as `TcpTruncated` (a caller
/// then gathers it into one piece and classifies that). A `tail_len` of 0 is
/// [`classify()`].
pub fn classify_chained(
    head: &[u8],
    tail_len: usize,
    addr: &InterfaceAddress,
    ip_csum: RxChecksum,
    tcp_csum: RxChecksum,
) -> Classified {
    let Ok(eth) = EthernetFrame::new_checked(head) else {
        return Classified::Drop(DropReason::Runt);
    };
    let dst = eth.dst_addr();
    let broadcast = if dst == addr.mac {
        false
    } else if dst.is_broadcast() {
        true
    } else if dst.is_multicast() {
        return Classified::Drop(DropReason::BroadcastNotArp);
    } else {
        return Classified::Drop(DropReason::NotOurMac);
    };
    let (ethertype, l2_len) = match addr.vlan {
        // A tag is then an unknown EtherType.
        None => (eth.ethertype(), ETHERNET_HEADER_LEN),
        Some(ours) => match vlan::parse(head) {
            None => return Classified::Drop(DropReason::Runt),
            Some(l2) if l2.vid == Some(ours.id) => (l2.ethertype, l2.len),
            Some(_) => return Classified::Drop(DropReason::NotOurVlan),
        },
    };
    match ethertype {
        EthernetProtocol::Arp => Classified::Arp,
        _ if broadcast => Classified::Drop(DropReason::BroadcastNotArp),
        EthernetProtocol::Ipv4 => {
            let csums = (ip_csum, tcp_csum);
            let ip = head.get(l2_len..).unwrap_or_default();
            match classify_ipv4(ip, l2_len, tail_len, addr, csums) {
                Ok(classified) => classified,
                Err(reason) => Classified::Drop(reason),
            }
        }
        _ => Classified::Drop(DropReason::UnknownEtherType),
    }
}

/// Validates the IPv4 datagram `ip` (starting at `ip_offset` in the
/// frame, after the Ethernet header and its tag if any; `tail_len` more
/// octets elsewhere) and classifies its payload, given the device's
/// verdicts on the IPv4 and TCP checksums.
fn classify_ipv4(
    ip: &[u8],
    ip_offset: usize,
    tail_len: usize,
    addr: &InterfaceAddress,
    (ip_csum, tcp_csum): (RxChecksum, RxChecksum),
) -> Result<Classified, DropReason> {
    let packet = checked_ipv4(ip, tail_len)?;
    if packet.version() != 4 {
        return Err(DropReason::Ipv4BadVersion);
    }
    if !checksum_ok(ip_csum, || packet.verify_checksum()) {
        return Err(DropReason::Ipv4BadChecksum);
    }
    if packet.more_frags() || packet.frag_offset() != 0 {
        return Err(DropReason::Ipv4Fragment);
    }
    if packet.dst_addr() != addr.ip {
        return Err(DropReason::Ipv4NotOurAddress);
    }
    if !addr.is_valid_peer(packet.src_addr()) {
        return Err(DropReason::Ipv4SourceInvalid);
    }
    match packet.next_header() {
        IpProtocol::Tcp => {
            classify_tcp(&packet, ip_offset, tail_len, tcp_csum).map(Classified::Tcp)
        }
        IpProtocol::Icmp => Ok(Classified::Icmp),
        _ => Err(DropReason::UnknownProtocol),
    }
}

/// The IPv4 header at the front of `ip`, its lengths checked against the
/// octets there plus the `tail_len` elsewhere.
fn checked_ipv4(ip: &[u8], tail_len: usize) -> Result<Ipv4Packet<&[u8]>, DropReason> {
    if tail_len == 0 {
        return Ipv4Packet::new_checked(ip).map_err(|_| ipv4_length_error(ip));
    }
    let error = ipv4_length_error(ip);
    if error == DropReason::Ipv4BadHeaderLength {
        return Err(error);
    }
    let packet = Ipv4Packet::new_unchecked(ip);
    // No Ethernet padding follows a payload long enough to be sent apart.
    let total = usize::from(packet.total_len());
    if total != ip.len() + tail_len || total < usize::from(packet.header_len()) {
        return Err(DropReason::Ipv4BadTotalLength);
    }
    Ok(packet)
}

/// Names what is wrong with the lengths of an IPv4 header that
/// `Ipv4Packet::check_len` rejected.
fn ipv4_length_error(ip: &[u8]) -> DropReason {
    if ip.len() < IPV4_HEADER_LEN {
        return DropReason::Ipv4BadHeaderLength;
    }
    let packet = Ipv4Packet::new_unchecked(ip);
    let header_len = usize::from(packet.header_len());
    if header_len < IPV4_HEADER_LEN || header_len > ip.len() {
        DropReason::Ipv4BadHeaderLength
    } else {
        DropReason::Ipv4BadTotalLength
    }
}

/// Validates the TCP segment in `packet` (already a valid IPv4 datagram
/// at `ip_offset` in the frame, whose last `tail_len` octets are
/// elsewhere).
fn classify_tcp(
    packet: &Ipv4Packet<&[u8]>,
    ip_offset: usize,
    tail_len: usize,
    tcp_csum: RxChecksum,
) -> Result<TcpMeta, DropReason> {
    let segment = if tail_len == 0 {
        packet.payload()
    } else {
        &packet.as_ref()[usize::from(packet.header_len())..]
    };
    let tcp = TcpPacket::new_checked(segment).map_err(|_| DropReason::TcpTruncated)?;
    if tail_len > 0
        && (segment.len() != usize::from(tcp.header_len()) || tcp_csum != RxChecksum::Good)
    {
        return Err(DropReason::TcpTruncated);
    }
    let (src, dst) = (packet.src_addr(), packet.dst_addr());
    if !checksum_ok(tcp_csum, || tcp.verify_checksum(&src.into(), &dst.into())) {
        return Err(DropReason::TcpBadChecksum);
    }
    if tcp.src_port() == 0 || tcp.dst_port() == 0 {
        return Err(DropReason::TcpBadPort);
    }
    Ok(TcpMeta {
        tuple: FourTuple {
            local_ip: dst,
            local_port: tcp.dst_port(),
            remote_ip: src,
            remote_port: tcp.src_port(),
        },
        ip_offset,
        tcp_offset: ip_offset + usize::from(packet.header_len()),
        tcp_len: segment.len() + tail_len,
        syn: tcp.syn(),
        ack: tcp.ack(),
        rst: tcp.rst(),
    })
}

/// Applies the NIC's verdict, running `verify` only when it has none.
fn checksum_ok(nic: RxChecksum, verify: impl FnOnce() -> bool) -> bool {
    match nic {
        RxChecksum::Good => true,
        RxChecksum::Bad => false,
        RxChecksum::Unknown => verify(),
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::{EthernetAddress, Ipv4Address, TcpControl};

    use super::*;
    use crate::net::test_frames::{self, *};

    fn classify_unchecked(frame: &[u8]) -> Classified {
        classify(
            frame,
            &our_address(),
            RxChecksum::Unknown,
            RxChecksum::Unknown,
        )
    }

    fn drop_reason(frame: &[u8]) -> Option<DropReason> {
        match classify_unchecked(frame) {
            Classified::Drop(reason) => Some(reason),
            _ => None,
        }
    }

    /// Applies `change` to the IPv4 header, then fixes its checksum.
    fn with_ipv4(mut frame: Vec<u8>, change: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
        let mut packet = ipv4_header_mut(&mut frame);
        change(&mut packet);
        packet.fill_checksum();
        frame
    }

    /// Classifies `frame` as if its last `tail` octets were in a second
    /// segment, the TCP checksum as `tcp_csum` says.
    fn classify_split(frame: &[u8], tail: usize, tcp_csum: RxChecksum) -> Classified {
        let head = &frame[..frame.len() - tail];
        classify_chained(head, tail, &our_address(), RxChecksum::Good, tcp_csum)
    }

    #[test]
    fn a_payload_chained_to_its_headers_is_taken_as_it_lies_when_verified() {
        let payload = [7u8; 1000];
        let frame = tcp(TcpControl::Psh, &payload);
        let Classified::Tcp(whole) = classify_unchecked(&frame) else {
            panic!("{:?}", classify_unchecked(&frame));
        };
        // Headers apart from the payload, verified: the same verdict.
        assert_eq!(
            classify_split(&frame, payload.len(), RxChecksum::Good),
            Classified::Tcp(whole)
        );
        let truncated = Classified::Drop(DropReason::TcpTruncated);
        // Unverified: nothing here can sum the tail.
        assert_eq!(
            classify_split(&frame, payload.len(), RxChecksum::Unknown),
            truncated
        );
        // Payload octets on both sides of the split, or a TCP header cut
        // by it.
        assert_eq!(classify_split(&frame, 999, RxChecksum::Good), truncated);
        assert_eq!(classify_split(&frame, 1010, RxChecksum::Good), truncated);
        // The IPv4 total length must cover the tail exactly.
        let short = with_ipv4(frame.clone(), |ip| ip.set_total_len(ip.total_len() - 1));
        assert_eq!(
            classify_split(&short, payload.len(), RxChecksum::Good),
            Classified::Drop(DropReason::Ipv4BadTotalLength)
        );
        // A header too short for itself is still named as such.
        assert_eq!(
            classify_chained(
                &frame[..10],
                100,
                &our_address(),
                RxChecksum::Good,
                RxChecksum::Good
            ),
            Classified::Drop(DropReason::Runt)
        );
        assert_eq!(
            classify_split(&frame, frame.len() - 30, RxChecksum::Good),
            Classified::Drop(DropReason::Ipv4BadHeaderLength)
        );
    }

    #[test]
    fn a_syn_gives_its_tuple_and_excludes_the_ethernet_padding() {
        let frame = tcp(TcpControl::Syn, &[]);
        assert_eq!(frame.len(), 60, "54 octets padded to the minimum");
        let Classified::Tcp(meta) = classify_unchecked(&frame) else {
            panic!("{:?}", classify_unchecked(&frame));
        };
        let tuple = FourTuple {
            local_ip: OUR_IP,
            local_port: OUR_PORT,
            remote_ip: PEER_IP,
            remote_port: PEER_PORT,
        };
        assert_eq!(
            meta,
            TcpMeta {
                tuple,
                ip_offset: 14,
                tcp_offset: 34,
                tcp_len: 20,
                syn: true,
                ack: false,
                rst: false,
            }
        );
    }

    #[test]
    fn tcp_len_counts_the_payload_and_flags_are_reported() {
        let frame = tcp(TcpControl::Rst, b"hello");
        let Classified::Tcp(meta) = classify_unchecked(&frame) else {
            panic!()
        };
        assert_eq!(
            (meta.tcp_len, meta.syn, meta.ack, meta.rst),
            (25, false, true, true)
        );
    }

    #[test]
    fn ipv4_options_move_the_tcp_header() {
        // Insert 4 octets of NOP options after the IPv4 header.
        let mut frame = tcp(TcpControl::None, b"data");
        frame.splice(34..34, [1, 1, 1, 1]);
        let frame = with_ipv4(frame, |ip| {
            ip.set_header_len(24);
            ip.set_total_len(ip.total_len() + 4);
        });
        let Classified::Tcp(meta) = classify_unchecked(&frame) else {
            panic!("{:?}", classify_unchecked(&frame));
        };
        assert_eq!((meta.tcp_offset, meta.tcp_len), (38, 24));
    }

    #[test]
    fn arp_is_accepted_broadcast_or_unicast_to_us() {
        assert_eq!(
            classify_unchecked(&arp_request(PEER_MAC, PEER_IP, OUR_IP)),
            Classified::Arp
        );
        assert_eq!(
            classify_unchecked(&arp_reply(PEER_MAC, PEER_IP)),
            Classified::Arp
        );
    }

    #[test]
    fn icmp_is_left_to_the_interface() {
        assert_eq!(
            classify_unchecked(&echo_request(1, 2, b"x")),
            Classified::Icmp
        );
    }

    #[test]
    fn frames_for_others_and_other_ethertypes_are_dropped() {
        assert_eq!(drop_reason(&[0; 13]), Some(DropReason::Runt));
        let mut other_mac = tcp(TcpControl::Syn, &[]);
        other_mac[5] = 0x77;
        assert_eq!(drop_reason(&other_mac), Some(DropReason::NotOurMac));
        let mut multicast = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        multicast[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
        assert_eq!(drop_reason(&multicast), Some(DropReason::BroadcastNotArp));
        let mut broadcast_ip = tcp(TcpControl::Syn, &[]);
        broadcast_ip[..6].copy_from_slice(&EthernetAddress::BROADCAST.0);
        assert_eq!(
            drop_reason(&broadcast_ip),
            Some(DropReason::BroadcastNotArp)
        );
        for ethertype in [0x86dd_u16, 0x8100, 0x88cc] {
            let mut frame = tcp(TcpControl::Syn, &[]);
            frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
            assert_eq!(drop_reason(&frame), Some(DropReason::UnknownEtherType));
        }
    }

    /// [`our_address`] on VLAN 42.
    fn on_vlan_42() -> InterfaceAddress {
        InterfaceAddress {
            vlan: Some(crate::net::Vlan::new(42, 5).unwrap()),
            ..our_address()
        }
    }

    fn classify_on_vlan(frame: &[u8]) -> Classified {
        let unknown = RxChecksum::Unknown;
        classify(frame, &on_vlan_42(), unknown, unknown)
    }

    #[test]
    fn on_a_vlan_its_tagged_frames_are_taken_past_the_tag() {
        let payload = [9u8; 300];
        let frame = tagged(&tcp(TcpControl::Psh, &payload), 42, 7);
        let Classified::Tcp(meta) = classify_on_vlan(&frame) else {
            panic!("{:?}", classify_on_vlan(&frame));
        };
        assert_eq!(
            (meta.ip_offset, meta.tcp_offset, meta.tcp_len),
            (18, 38, 320)
        );
        assert_eq!(meta.tuple.remote_ip, PEER_IP);
        // The same frame with its payload in a second piece.
        let head = &frame[..frame.len() - payload.len()];
        let addr = on_vlan_42();
        let good = RxChecksum::Good;
        assert_eq!(
            classify_chained(head, payload.len(), &addr, good, good),
            Classified::Tcp(meta)
        );
        // IPv4 options after the tag move the TCP header on.
        let mut options = tcp(TcpControl::None, b"data");
        options.splice(34..34, [1, 1, 1, 1]);
        let options = with_ipv4(options, |ip| {
            ip.set_header_len(24);
            ip.set_total_len(ip.total_len() + 4);
        });
        let Classified::Tcp(meta) = classify_on_vlan(&tagged(&options, 42, 0)) else {
            panic!("IPv4 options on a VLAN");
        };
        assert_eq!(
            (meta.ip_offset, meta.tcp_offset, meta.tcp_len),
            (18, 42, 24)
        );
        let arp = tagged(&arp_request(PEER_MAC, PEER_IP, OUR_IP), 42, 0);
        assert_eq!(classify_on_vlan(&arp), Classified::Arp);
        let ping = tagged(&echo_request(1, 2, b"x"), 42, 1);
        assert_eq!(classify_on_vlan(&ping), Classified::Icmp);
    }

    #[test]
    fn on_a_vlan_untagged_other_and_malformed_tags_are_dropped() {
        let syn = tcp(TcpControl::Syn, &[]);
        let not_ours = Classified::Drop(DropReason::NotOurVlan);
        assert_eq!(classify_on_vlan(&syn), not_ours, "untagged");
        for (id, priority) in [(43, 5), (0, 5), (4095, 0), (42 | 0x100, 0)] {
            let frame = tagged(&syn, id, priority);
            assert_eq!(classify_on_vlan(&frame), not_ours, "VID {id}");
        }
        let arp = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        assert_eq!(classify_on_vlan(&arp), not_ours, "untagged ARP");
        // An S-tag (802.1ad) is not our C-tag.
        let mut s_tagged = tagged(&syn, 42, 0);
        s_tagged[12..14].copy_from_slice(&0x88a8_u16.to_be_bytes());
        assert_eq!(classify_on_vlan(&s_tagged), not_ours);
        // Tagged twice: the inner tag is an unknown EtherType.
        let twice = tagged(&tagged(&syn, 7, 0), 42, 0);
        assert_eq!(
            classify_on_vlan(&twice),
            Classified::Drop(DropReason::UnknownEtherType)
        );
        // Cut inside the tag, or right after it.
        let frame = tagged(&syn, 42, 0);
        for len in [14, 15, 16, 17] {
            assert_eq!(
                classify_on_vlan(&frame[..len]),
                Classified::Drop(DropReason::Runt),
                "{len} octets"
            );
        }
        assert_eq!(
            classify_on_vlan(&frame[..18]),
            Classified::Drop(DropReason::Ipv4BadHeaderLength)
        );
        assert_eq!(
            classify_on_vlan(&frame[..37]),
            Classified::Drop(DropReason::Ipv4BadHeaderLength)
        );
        // For another MAC address: that reason first.
        let mut other_mac = frame.clone();
        other_mac[5] = 0x77;
        assert_eq!(
            classify_on_vlan(&other_mac),
            Classified::Drop(DropReason::NotOurMac)
        );
    }

    #[test]
    fn on_no_vlan_tagged_frames_stay_unknown() {
        let frame = tagged(&tcp(TcpControl::Syn, &[]), 42, 0);
        assert_eq!(drop_reason(&frame), Some(DropReason::UnknownEtherType));
        let arp = tagged(&arp_request(PEER_MAC, PEER_IP, OUR_IP), 42, 0);
        assert_eq!(drop_reason(&arp), Some(DropReason::BroadcastNotArp));
        assert_eq!(
            drop_reason(&frame[..16]),
            Some(DropReason::UnknownEtherType)
        );
    }

    #[test]
    fn ipv4_header_and_total_lengths_are_checked() {
        let syn = || tcp(TcpControl::Syn, &[]);
        let version6 = with_ipv4(syn(), |ip| ip.set_version(6));
        assert_eq!(drop_reason(&version6), Some(DropReason::Ipv4BadVersion));
        for header_len in [0, 16] {
            let short = with_ipv4(syn(), |ip| ip.set_header_len(header_len));
            assert_eq!(drop_reason(&short), Some(DropReason::Ipv4BadHeaderLength));
        }
        // IHL 15 (60 octets) is beyond this 46-octet IPv4 payload.
        let mut beyond = syn();
        ipv4_header_mut(&mut beyond).set_header_len(60);
        assert_eq!(drop_reason(&beyond), Some(DropReason::Ipv4BadHeaderLength));
        assert_eq!(
            drop_reason(&syn()[..33]),
            Some(DropReason::Ipv4BadHeaderLength)
        );
        let too_small = with_ipv4(syn(), |ip| ip.set_total_len(19));
        assert_eq!(
            drop_reason(&too_small),
            Some(DropReason::Ipv4BadTotalLength)
        );
        let too_big = with_ipv4(syn(), |ip| ip.set_total_len(47));
        assert_eq!(drop_reason(&too_big), Some(DropReason::Ipv4BadTotalLength));
        // Up to the padding is fine: the segment is then 26 octets long.
        let into_padding = with_ipv4(syn(), |ip| ip.set_total_len(46));
        assert_eq!(drop_reason(&into_padding), Some(DropReason::TcpBadChecksum));
    }

    #[test]
    fn bad_ipv4_checksums_and_fragments_are_dropped() {
        let mut bad_sum = tcp(TcpControl::Syn, &[]);
        bad_sum[24] ^= 0x01;
        assert_eq!(drop_reason(&bad_sum), Some(DropReason::Ipv4BadChecksum));
        let more_fragments = with_ipv4(tcp(TcpControl::None, b"x"), |ip| ip.set_more_frags(true));
        assert_eq!(drop_reason(&more_fragments), Some(DropReason::Ipv4Fragment));
        let offset = with_ipv4(tcp(TcpControl::None, b"x"), |ip| ip.set_frag_offset(8));
        assert_eq!(drop_reason(&offset), Some(DropReason::Ipv4Fragment));
    }

    #[test]
    fn addresses_are_checked() {
        let to_other = with_ipv4(tcp(TcpControl::Syn, &[]), |ip| {
            ip.set_dst_addr(Ipv4Address::new(10, 0, 0, 3))
        });
        assert_eq!(drop_reason(&to_other), Some(DropReason::Ipv4NotOurAddress));
        for src in [
            Ipv4Address::UNSPECIFIED,
            Ipv4Address::BROADCAST,
            Ipv4Address::new(10, 0, 0, 255),
            Ipv4Address::new(239, 1, 2, 3),
            Ipv4Address::new(127, 0, 0, 1),
            OUR_IP,
        ] {
            let frame = tcp_ports(src, PEER_PORT, OUR_PORT, TcpControl::Syn, &[]);
            assert_eq!(
                drop_reason(&frame),
                Some(DropReason::Ipv4SourceInvalid),
                "{src}"
            );
        }
    }

    #[test]
    fn tcp_is_validated() {
        let udp = test_frames::ipv4(PEER_IP, OUR_IP, IpProtocol::Udp, 8, |_| {});
        assert_eq!(drop_reason(&udp), Some(DropReason::UnknownProtocol));
        let short = test_frames::ipv4(PEER_IP, OUR_IP, IpProtocol::Tcp, 19, |_| {});
        assert_eq!(drop_reason(&short), Some(DropReason::TcpTruncated));
        let mut offset_beyond = tcp(TcpControl::Syn, &[]);
        offset_beyond[46] = 0x60; // data offset 24 octets in a 20-octet segment
        assert_eq!(drop_reason(&offset_beyond), Some(DropReason::TcpTruncated));
        let mut bad_sum = tcp(TcpControl::None, b"payload");
        bad_sum[60] ^= 0x20;
        assert_eq!(drop_reason(&bad_sum), Some(DropReason::TcpBadChecksum));
        for (src_port, dst_port) in [(0, OUR_PORT), (PEER_PORT, 0)] {
            let frame = tcp_ports(PEER_IP, src_port, dst_port, TcpControl::Syn, &[]);
            assert_eq!(drop_reason(&frame), Some(DropReason::TcpBadPort));
        }
    }

    #[test]
    fn nic_checksum_verdicts_are_trusted() {
        let addr = our_address();
        let mut both_bad = tcp(TcpControl::None, b"payload");
        both_bad[24] ^= 0x01;
        both_bad[60] ^= 0x20;
        let good = classify(&both_bad, &addr, RxChecksum::Good, RxChecksum::Good);
        assert!(matches!(good, Classified::Tcp(_)), "{good:?}");
        let valid = tcp(TcpControl::None, b"payload");
        assert_eq!(
            classify(&valid, &addr, RxChecksum::Bad, RxChecksum::Good),
            Classified::Drop(DropReason::Ipv4BadChecksum)
        );
        assert_eq!(
            classify(&valid, &addr, RxChecksum::Good, RxChecksum::Bad),
            Classified::Drop(DropReason::TcpBadChecksum)
        );
        assert_eq!(
            classify(&both_bad, &addr, RxChecksum::Good, RxChecksum::Unknown),
            Classified::Drop(DropReason::TcpBadChecksum)
        );
    }
}
