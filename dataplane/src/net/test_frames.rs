//! Frames for tests, built with smoltcp's emitters (not ours): Ethernet,
//! ARP (RFC 826), IPv4 (RFC 791), ICMP echo (RFC 792) and TCP (RFC 9293)
//! between any two hosts, and shorthands from a fixed peer to a fixed
//! "us" ([`OUR_IP`], [`PEER_IP`]).
//!
//! Compiled for this crate's unit tests, and with the `testing` feature
//! for the integration tests of this crate and the crates above it.

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr,
    TcpControl, TcpPacket, TcpRepr, TcpSeqNumber, ETHERNET_HEADER_LEN,
};

use super::InterfaceAddress;

/// A host's link and network addresses.
pub type Host = (EthernetAddress, Ipv4Address);

/// Our MAC address.
pub const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
/// Our IPv4 address, in 10.0.0.0/24.
pub const OUR_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
/// The peer's MAC address.
pub const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
/// The peer's IPv4 address, on link.
pub const PEER_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
/// The gateway's IPv4 address.
pub const GATEWAY_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 254);
/// The TCP port the peer sends from.
pub const PEER_PORT: u16 = 40_000;
/// Our TCP port.
pub const OUR_PORT: u16 = 5_000;

/// Our addresses: [`OUR_MAC`], [`OUR_IP`]/24, gateway [`GATEWAY_IP`].
pub fn our_address() -> InterfaceAddress {
    InterfaceAddress {
        mac: OUR_MAC,
        ip: OUR_IP,
        prefix_len: 24,
        gateway: Some(GATEWAY_IP),
        vlan: None,
    }
}

/// `frame` with an IEEE 802.1Q tag (TPID 0x8100, DEI 0) for VLAN `id`
/// at priority `priority` inserted after its MAC addresses, as a switch
/// port or the kernel's VLAN device tags it.
pub fn tagged(frame: &[u8], id: u16, priority: u8) -> Vec<u8> {
    let tci = (u16::from(priority) << 13) | id;
    let mut out = frame.to_vec();
    let [hi, lo] = tci.to_be_bytes();
    out.splice(12..12, [0x81, 0x00, hi, lo]);
    out
}

/// An Ethernet frame whose payload of `payload_len` octets `write` fills,
/// zero-padded to 60 octets.
pub fn ethernet(
    src: EthernetAddress,
    dst: EthernetAddress,
    ethertype: EthernetProtocol,
    payload_len: usize,
    write: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let mut frame = vec![0; (ETHERNET_HEADER_LEN + payload_len).max(60)];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype,
    }
    .emit(&mut eth);
    write(&mut eth.payload_mut()[..payload_len]);
    frame
}

/// An ARP packet to `eth_dst` from the sender hardware address of `repr`.
pub fn arp(eth_dst: EthernetAddress, repr: ArpRepr) -> Vec<u8> {
    let ArpRepr::EthernetIpv4 {
        source_hardware_addr,
        ..
    } = repr
    else {
        unreachable!("smoltcp has one ARP representation")
    };
    ethernet(
        source_hardware_addr,
        eth_dst,
        EthernetProtocol::Arp,
        repr.buffer_len(),
        |buf| repr.emit(&mut ArpPacket::new_unchecked(buf)),
    )
}

/// A broadcast ARP request from `sender` for `target_ip`.
pub fn arp_request(
    sender_mac: EthernetAddress,
    sender_ip: Ipv4Address,
    target_ip: Ipv4Address,
) -> Vec<u8> {
    arp(
        EthernetAddress::BROADCAST,
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: sender_mac,
            source_protocol_addr: sender_ip,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target_ip,
        },
    )
}

/// An ARP reply to us from `sender`.
pub fn arp_reply(sender_mac: EthernetAddress, sender_ip: Ipv4Address) -> Vec<u8> {
    arp(
        OUR_MAC,
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: sender_mac,
            source_protocol_addr: sender_ip,
            target_hardware_addr: OUR_MAC,
            target_protocol_addr: OUR_IP,
        },
    )
}

/// An IPv4 datagram from the peer's MAC to ours, header checksum valid,
/// whose payload `write` fills.
pub fn ipv4(
    src: Ipv4Address,
    dst: Ipv4Address,
    protocol: IpProtocol,
    payload_len: usize,
    write: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    ipv4_between(
        (PEER_MAC, src),
        (OUR_MAC, dst),
        protocol,
        payload_len,
        write,
    )
}

/// An IPv4 datagram from `src` to `dst`, header checksum valid, whose
/// payload of `payload_len` octets `write` fills; zero-padded to the
/// Ethernet minimum.
pub fn ipv4_between(
    src: Host,
    dst: Host,
    protocol: IpProtocol,
    payload_len: usize,
    write: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src.1,
        dst_addr: dst.1,
        next_header: protocol,
        payload_len,
        hop_limit: 64,
    };
    ethernet(
        src.0,
        dst.0,
        EthernetProtocol::Ipv4,
        repr.buffer_len() + payload_len,
        |buf| {
            let mut packet = Ipv4Packet::new_unchecked(buf);
            repr.emit(&mut packet, &ChecksumCapabilities::default());
            write(packet.payload_mut());
        },
    )
}

/// A TCP segment from `src`:`src_port` to our `dst_port`, valid checksums.
pub fn tcp_ports(
    src: Ipv4Address,
    src_port: u16,
    dst_port: u16,
    control: TcpControl,
    payload: &[u8],
) -> Vec<u8> {
    let repr = TcpRepr {
        src_port,
        dst_port,
        control,
        seq_number: TcpSeqNumber(1000),
        ack_number: (control != TcpControl::Syn).then_some(TcpSeqNumber(2000)),
        window_len: 8192,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload,
    };
    tcp_between((PEER_MAC, src), (OUR_MAC, OUR_IP), &repr)
}

/// A TCP segment from [`PEER_IP`]:[`PEER_PORT`] to [`OUR_PORT`].
pub fn tcp(control: TcpControl, payload: &[u8]) -> Vec<u8> {
    tcp_ports(PEER_IP, PEER_PORT, OUR_PORT, control, payload)
}

/// An ICMP message from `src` to us, valid checksums.
pub fn icmp(src: Ipv4Address, repr: &Icmpv4Repr) -> Vec<u8> {
    icmp_between((PEER_MAC, src), (OUR_MAC, OUR_IP), repr)
}

/// An ICMP message from `src` to `dst`, valid checksums.
pub fn icmp_between(src: Host, dst: Host, repr: &Icmpv4Repr) -> Vec<u8> {
    ipv4_between(src, dst, IpProtocol::Icmp, repr.buffer_len(), |buf| {
        repr.emit(
            &mut Icmpv4Packet::new_unchecked(buf),
            &ChecksumCapabilities::default(),
        )
    })
}

/// An echo request from the peer.
pub fn echo_request(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    echo_request_between((PEER_MAC, PEER_IP), (OUR_MAC, OUR_IP), ident, seq_no, data)
}

/// An echo request from `src` to `dst`.
pub fn echo_request_between(src: Host, dst: Host, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    icmp_between(
        src,
        dst,
        &Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        },
    )
}

/// A TCP segment from `src` to `dst` (host and port each) with `control`,
/// sequence number `seq`, no ACK, a 65535-octet window and `payload`;
/// valid checksums.
pub fn tcp_frame(
    src: (EthernetAddress, Ipv4Address, u16),
    dst: (EthernetAddress, Ipv4Address, u16),
    control: TcpControl,
    seq: u32,
    payload: &[u8],
) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: src.2,
        dst_port: dst.2,
        control,
        seq_number: TcpSeqNumber(seq as i32),
        ack_number: None,
        window_len: 65535,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload,
    };
    tcp_between((src.0, src.1), (dst.0, dst.1), &repr)
}

/// The TCP segment `repr` from `src` to `dst`, checksums valid.
pub fn tcp_between(src: Host, dst: Host, repr: &TcpRepr<'_>) -> Vec<u8> {
    ipv4_between(src, dst, IpProtocol::Tcp, repr.buffer_len(), |buf| {
        repr.emit(
            &mut TcpPacket::new_unchecked(buf),
            &src.1.into(),
            &dst.1.into(),
            &ChecksumCapabilities::default(),
        )
    })
}

/// The sequence number of `frame` if it is an ICMP echo reply.
pub fn echo_reply_seq(frame: &[u8]) -> Option<u16> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let icmp = Icmpv4Packet::new_checked(ip.payload()).ok()?;
    match Icmpv4Repr::parse(&icmp, &ChecksumCapabilities::default()).ok()? {
        Icmpv4Repr::EchoReply { seq_no, .. } => Some(seq_no),
        _ => None,
    }
}

/// The IPv4 header of a frame, to modify.
pub fn ipv4_header_mut(frame: &mut [u8]) -> Ipv4Packet<&mut [u8]> {
    Ipv4Packet::new_unchecked(&mut frame[ETHERNET_HEADER_LEN..])
}
