//! Which application a frame belongs to: the TCP port of an IPv4 frame
//! (the destination port of one from the interface, the source port of
//! one an application sends), read from its Ethernet, IPv4 and TCP
//! headers. Anything else has no port.

/// Ethernet header length; the EtherType is at 12.
const ETHERNET_LEN: usize = 14;
/// IPv4's EtherType.
const IPV4: u16 = 0x0800;
/// TCP's protocol number.
const TCP: u8 = 6;

/// The (source, destination) ports of an IPv4 TCP frame; `None` for any
/// other frame, or one too short to say.
pub fn tcp_ports(frame: &[u8]) -> Option<(u16, u16)> {
    let ether_type = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ether_type != IPV4 {
        return None;
    }
    let ip = frame.get(ETHERNET_LEN..)?;
    let header_len = usize::from(ip.first()? & 0x0f) * 4;
    let fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff;
    if header_len < 20 || *ip.get(9)? != TCP || fragment != 0 {
        return None;
    }
    let tcp = ip.get(header_len..header_len + 4)?;
    Some((
        u16::from_be_bytes([tcp[0], tcp[1]]),
        u16::from_be_bytes([tcp[2], tcp[3]]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(protocol: u8, ihl: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 60 + 20];
        f[12..14].copy_from_slice(&IPV4.to_be_bytes());
        f[14] = 0x40 | ihl;
        f[14 + 9] = protocol;
        let tcp = 14 + usize::from(ihl) * 4;
        f[tcp..tcp + 2].copy_from_slice(&40000u16.to_be_bytes());
        f[tcp + 2..tcp + 4].copy_from_slice(&7174u16.to_be_bytes());
        f
    }

    #[test]
    fn tcp_frames_give_their_ports_and_others_none() {
        assert_eq!(tcp_ports(&frame(TCP, 5)), Some((40000, 7174)));
        assert_eq!(tcp_ports(&frame(TCP, 15)), Some((40000, 7174)));
        assert_eq!(tcp_ports(&frame(17, 5)), None);
        assert_eq!(tcp_ports(&frame(TCP, 4)), None);
        let mut arp = frame(TCP, 5);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(tcp_ports(&arp), None);
        let mut fragment = frame(TCP, 5);
        fragment[14 + 7] = 1;
        assert_eq!(tcp_ports(&fragment), None);
        let whole = frame(TCP, 5);
        for cut in 0..whole.len() {
            let _ = tcp_ports(&whole[..cut]);
        }
    }
}
