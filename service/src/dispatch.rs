//! What the service does with a frame: what it reads of an IPv4 TCP
//! frame ([`TcpFrame::parse`]: the Ethernet source, the IPv4 addresses,
//! the TCP ports), which application takes one from the interface
//! ([`incoming`]), and whether one an application sent goes out on the
//! interface ([`outgoing`]), or why it is dropped ([`DropReason`]).

use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Ethernet header length; the source MAC address is at 6, the EtherType
/// at 12.
const ETHERNET_LEN: usize = 14;
/// IPv4's EtherType.
const IPV4: u16 = 0x0800;
/// The shortest IPv4 header (IHL 5).
const IPV4_MIN_LEN: usize = 20;
/// TCP's protocol number.
const TCP: u8 = 6;
/// The IPv4 flags and fragment offset field's bits that make a datagram
/// a fragment: More Fragments and the offset.
const FRAGMENT: u16 = 0x3fff;

/// What the service reads of an IPv4 TCP frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpFrame {
    /// The Ethernet source.
    pub src_mac: [u8; 6],
    /// The IPv4 source.
    pub src: Ipv4Addr,
    /// The IPv4 destination.
    pub dst: Ipv4Addr,
    /// The TCP source port.
    pub src_port: u16,
    /// The TCP destination port.
    pub dst_port: u16,
}

impl TcpFrame {
    /// The frame's fields, when it is an Ethernet II frame of an IPv4
    /// datagram (version 4, IHL at least 5, not a fragment) of TCP,
    /// long enough to hold the TCP ports; `None` for any other.
    pub fn parse(frame: &[u8]) -> Option<TcpFrame> {
        let (ethernet, ip) = frame.split_at_checked(ETHERNET_LEN)?;
        if ethernet[12..14] != IPV4.to_be_bytes() {
            return None;
        }
        let header = ip.get(..IPV4_MIN_LEN)?;
        let version = header[0] >> 4;
        let header_len = usize::from(header[0] & 0x0f) * 4;
        let fragment = u16::from_be_bytes([header[6], header[7]]) & FRAGMENT;
        if version != 4 || header_len < IPV4_MIN_LEN || header[9] != TCP || fragment != 0 {
            return None;
        }
        let tcp = ip.get(header_len..header_len + 4)?;
        let mut src_mac = [0u8; 6];
        src_mac.copy_from_slice(&ethernet[6..12]);
        let address =
            |at: usize| Ipv4Addr::new(header[at], header[at + 1], header[at + 2], header[at + 3]);
        Some(TcpFrame {
            src_mac,
            src: address(12),
            dst: address(16),
            src_port: u16::from_be_bytes([tcp[0], tcp[1]]),
            dst_port: u16::from_be_bytes([tcp[2], tcp[3]]),
        })
    }
}

/// Why the service drops a frame, either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Not an IPv4 TCP frame [`TcpFrame::parse`] reads (ARP, another
    /// protocol, a fragment, a malformed or truncated header).
    NotTcp,
    /// From the interface, to another IPv4 address than uwarp's.
    NotOurAddress,
    /// From the interface, to a port no application holds.
    Unowned,
    /// From an application, with another Ethernet source than the
    /// interface's MAC address.
    ForeignMac,
    /// From an application, with another IPv4 source than uwarp's
    /// address.
    ForeignAddress,
    /// From an application, from a port it does not hold.
    NotItsPort,
}

/// The application that takes `frame`, received on the interface: the
/// one holding its destination port (`owners` says who holds which),
/// when it is to uwarp's address `ip`.
pub fn incoming(frame: &[u8], owners: &HashMap<u16, u64>, ip: Ipv4Addr) -> Result<u64, DropReason> {
    let tcp = TcpFrame::parse(frame).ok_or(DropReason::NotTcp)?;
    if tcp.dst != ip {
        return Err(DropReason::NotOurAddress);
    }
    owners
        .get(&tcp.dst_port)
        .copied()
        .ok_or(DropReason::Unowned)
}

/// Whether `frame`, sent by application `app`, goes out on the
/// interface: only an IPv4 TCP frame from the interface's MAC address
/// `mac` and uwarp's address `ip`, from a port `owners` says `app` holds.
/// Anything else (ARP among it: an application beside the kernel
/// resolves its next hops through the kernel's neighbour table) is
/// dropped.
pub fn outgoing(
    frame: &[u8],
    app: u64,
    owners: &HashMap<u16, u64>,
    mac: [u8; 6],
    ip: Ipv4Addr,
) -> Result<(), DropReason> {
    let tcp = TcpFrame::parse(frame).ok_or(DropReason::NotTcp)?;
    if tcp.src_mac != mac {
        return Err(DropReason::ForeignMac);
    }
    if tcp.src != ip {
        return Err(DropReason::ForeignAddress);
    }
    if owners.get(&tcp.src_port) != Some(&app) {
        return Err(DropReason::NotItsPort);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
    const IP: Ipv4Addr = Ipv4Addr::new(10, 84, 0, 1);
    const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 84, 0, 2);

    /// An IPv4 TCP frame with an IHL of `ihl`, from `src` port 40000 to
    /// `dst` port 7174, ending with the TCP header's 20 octets.
    fn frame(ihl: u8, src: (&[u8; 6], Ipv4Addr), dst: Ipv4Addr) -> Vec<u8> {
        let tcp = ETHERNET_LEN + usize::from(ihl) * 4;
        let mut f = vec![0u8; tcp + 20];
        f[..6].copy_from_slice(&PEER_MAC);
        f[6..12].copy_from_slice(src.0);
        f[12..14].copy_from_slice(&IPV4.to_be_bytes());
        f[14] = 0x40 | ihl;
        f[14 + 9] = TCP;
        f[14 + 12..14 + 16].copy_from_slice(&src.1.octets());
        f[14 + 16..14 + 20].copy_from_slice(&dst.octets());
        f[tcp..tcp + 2].copy_from_slice(&40000u16.to_be_bytes());
        f[tcp + 2..tcp + 4].copy_from_slice(&7174u16.to_be_bytes());
        f
    }

    /// A frame of ours (uwarp's address and MAC) to the peer.
    fn ours(ihl: u8) -> Vec<u8> {
        frame(ihl, (&MAC, IP), PEER_IP)
    }

    #[test]
    fn an_ipv4_tcp_frame_gives_its_addresses_and_ports() {
        for ihl in [5, 6, 15] {
            assert_eq!(
                TcpFrame::parse(&ours(ihl)),
                Some(TcpFrame {
                    src_mac: MAC,
                    src: IP,
                    dst: PEER_IP,
                    src_port: 40000,
                    dst_port: 7174,
                }),
                "IHL {ihl}"
            );
        }
    }

    #[test]
    fn every_truncation_short_of_the_ports_is_refused() {
        for ihl in [5, 15] {
            let whole = ours(ihl);
            let ports_end = ETHERNET_LEN + usize::from(ihl) * 4 + 4;
            for cut in 0..whole.len() {
                let parsed = TcpFrame::parse(&whole[..cut]);
                assert_eq!(
                    parsed.is_some(),
                    cut >= ports_end,
                    "IHL {ihl}, {cut} octets"
                );
            }
        }
    }

    #[test]
    fn other_frames_are_refused() {
        let mut arp = ours(5);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let mut ipv6 = ours(5);
        ipv6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let mut version_6 = ours(5);
        version_6[14] = 0x65;
        let mut udp = ours(5);
        udp[14 + 9] = 17;
        let mut later_fragment = ours(5);
        later_fragment[14 + 7] = 1;
        let mut first_fragment = ours(5);
        first_fragment[14 + 6] = 0x20;
        let mut dont_fragment = ours(5);
        dont_fragment[14 + 6] = 0x40;
        assert!(TcpFrame::parse(&dont_fragment).is_some());
        for (what, f) in [
            ("ARP", arp),
            ("IPv6", ipv6),
            ("version 6", version_6),
            ("UDP", udp),
            ("a later fragment", later_fragment),
            ("a first fragment", first_fragment),
        ] {
            assert_eq!(TcpFrame::parse(&f), None, "{what}");
        }
        for ihl in 0..5 {
            let mut short_ihl = ours(5);
            short_ihl[14] = 0x40 | ihl;
            assert_eq!(TcpFrame::parse(&short_ihl), None, "IHL {ihl}");
        }
    }

    /// Port 40000 is application 1's, 50000 application 2's.
    fn owners() -> HashMap<u16, u64> {
        HashMap::from([(40000, 1), (50000, 2)])
    }

    #[test]
    fn an_application_sends_only_tcp_from_the_interface_and_its_own_ports() {
        let owners = owners();
        assert_eq!(outgoing(&ours(5), 1, &owners, MAC, IP), Ok(()));
        assert_eq!(
            outgoing(&ours(5), 2, &owners, MAC, IP),
            Err(DropReason::NotItsPort)
        );
        assert_eq!(
            outgoing(&ours(5), 3, &owners, MAC, IP),
            Err(DropReason::NotItsPort)
        );
        let mut unowned = ours(5);
        unowned[34..36].copy_from_slice(&60000u16.to_be_bytes());
        assert_eq!(
            outgoing(&unowned, 1, &owners, MAC, IP),
            Err(DropReason::NotItsPort)
        );
        let other_mac = frame(5, (&PEER_MAC, IP), PEER_IP);
        assert_eq!(
            outgoing(&other_mac, 1, &owners, MAC, IP),
            Err(DropReason::ForeignMac)
        );
        let other_host = Ipv4Addr::new(10, 84, 0, 3);
        let other_address = frame(5, (&MAC, other_host), PEER_IP);
        assert_eq!(
            outgoing(&other_address, 1, &owners, MAC, IP),
            Err(DropReason::ForeignAddress)
        );
        let mut arp = ours(5);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(outgoing(&arp, 1, &owners, MAC, IP), Err(DropReason::NotTcp));
        let whole = ours(5);
        for cut in 0..ETHERNET_LEN + 24 {
            assert_eq!(
                outgoing(&whole[..cut], 1, &owners, MAC, IP),
                Err(DropReason::NotTcp)
            );
        }
    }

    #[test]
    fn a_frame_from_the_interface_goes_to_the_holder_of_its_port_on_our_address() {
        let owners = HashMap::from([(7174, 1)]);
        let to_us = frame(5, (&PEER_MAC, PEER_IP), IP);
        assert_eq!(incoming(&to_us, &owners, IP), Ok(1));
        let to_another = frame(5, (&PEER_MAC, PEER_IP), Ipv4Addr::new(10, 84, 0, 3));
        assert_eq!(
            incoming(&to_another, &owners, IP),
            Err(DropReason::NotOurAddress)
        );
        assert_eq!(
            incoming(&to_us, &HashMap::new(), IP),
            Err(DropReason::Unowned)
        );
        assert_eq!(incoming(&to_us[..30], &owners, IP), Err(DropReason::NotTcp));
    }
}
