//! Bad input for the L2/L3 layer (`uwarp_dataplane::net`): every drop
//! reason, runts, every truncation of valid frames, a broadcast storm and
//! random bytes, on a port on no VLAN and on one on an IEEE 802.1Q VLAN
//! (tagged frames, cut tags). Nothing may panic, everything must be dropped or handled
//! correctly, and the ARP cache must stay bounded. No EAL needed.

use std::time::{Duration, Instant};

use smoltcp::wire::{
    EthernetAddress, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Address, Ipv4Packet, TcpControl,
};
use uwarp_dataplane::net::{
    classify, vlan, ArpConfig, Classified, DropReason, Interface, InterfaceAddress,
    InterfaceConfig, Received, RxChecksum, Vlan,
};

use uwarp_dataplane::net::test_frames::*;

const UNKNOWN: RxChecksum = RxChecksum::Unknown;

/// A small xorshift64 generator, seeded, so failures reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn ip(&mut self) -> Ipv4Address {
        Ipv4Address::from_bits(self.next() as u32)
    }

    fn checksum(&mut self) -> RxChecksum {
        [RxChecksum::Unknown, RxChecksum::Good, RxChecksum::Bad][self.below(3)]
    }
}

/// The VLAN of the port in the tests of a port on a VLAN.
const VLAN_ID: u16 = 42;

fn interface() -> Interface {
    Interface::new(InterfaceConfig::new(our_address()))
}

/// [`our_address`] on VLAN [`VLAN_ID`], priority 3.
fn vlan_address() -> InterfaceAddress {
    InterfaceAddress {
        vlan: Some(Vlan::new(VLAN_ID, 3).unwrap()),
        ..our_address()
    }
}

fn vlan_interface() -> Interface {
    Interface::new(InterfaceConfig::new(vlan_address()))
}

fn receive(iface: &mut Interface, frame: &[u8]) -> Received {
    iface.receive(Instant::now(), frame, UNKNOWN, UNKNOWN, &mut Vec::new())
}

/// Applies `change` to the IPv4 header of `frame`, then fixes the checksum.
fn with_ipv4(mut frame: Vec<u8>, change: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
    let mut packet = ipv4_header_mut(&mut frame);
    change(&mut packet);
    packet.fill_checksum();
    frame
}

/// At least one frame per drop reason, several for some.
fn bad_frames() -> Vec<(DropReason, Vec<u8>)> {
    let syn = || tcp(TcpControl::Syn, &[]);
    let data = || tcp(TcpControl::None, b"some data");
    let mut other_mac = syn();
    other_mac[0] = 0x04;
    let mut multicast = syn();
    multicast[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]);
    let mut broadcast = syn();
    broadcast[..6].copy_from_slice(&EthernetAddress::BROADCAST.0);
    let mut ipv6 = syn();
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut vlan = syn();
    vlan[12..14].copy_from_slice(&[0x81, 0x00]);
    let mut ihl_beyond = syn();
    ipv4_header_mut(&mut ihl_beyond).set_header_len(60);
    let mut bad_ip_sum = syn();
    bad_ip_sum[22] ^= 0x01; // TTL
    let mut tcp_offset_beyond = syn();
    tcp_offset_beyond[46] = 0xf0;
    let mut bad_tcp_sum = data();
    bad_tcp_sum[55] ^= 0x01;
    let mut arp_bad_hardware = arp_request(PEER_MAC, PEER_IP, OUR_IP);
    arp_bad_hardware[15] = 6;
    let mut bad_icmp_sum = echo_request(1, 1, b"abc");
    bad_icmp_sum[42] ^= 0x01;
    let timestamp = with_icmp_type(echo_request(1, 1, &[0; 12]), 13);
    vec![
        (DropReason::Runt, vec![0; 13]),
        (DropReason::NotOurMac, other_mac),
        (DropReason::UnknownEtherType, ipv6),
        (DropReason::UnknownEtherType, vlan),
        (
            DropReason::Ipv4BadVersion,
            with_ipv4(syn(), |ip| ip.set_version(5)),
        ),
        (
            DropReason::Ipv4BadHeaderLength,
            with_ipv4(syn(), |ip| ip.set_header_len(16)),
        ),
        (DropReason::Ipv4BadHeaderLength, ihl_beyond),
        (DropReason::Ipv4BadHeaderLength, syn()[..30].to_vec()),
        (
            DropReason::Ipv4BadTotalLength,
            with_ipv4(syn(), |ip| ip.set_total_len(1500)),
        ),
        (
            DropReason::Ipv4BadTotalLength,
            with_ipv4(syn(), |ip| ip.set_total_len(10)),
        ),
        (DropReason::Ipv4BadChecksum, bad_ip_sum),
        (
            DropReason::Ipv4Fragment,
            with_ipv4(data(), |ip| ip.set_more_frags(true)),
        ),
        (
            DropReason::Ipv4Fragment,
            with_ipv4(data(), |ip| ip.set_frag_offset(1480)),
        ),
        (
            DropReason::Ipv4NotOurAddress,
            with_ipv4(syn(), |ip| ip.set_dst_addr(Ipv4Address::new(10, 0, 0, 99))),
        ),
        (
            DropReason::Ipv4SourceInvalid,
            tcp_ports(Ipv4Address::BROADCAST, 1, 2, TcpControl::Syn, &[]),
        ),
        (DropReason::BroadcastNotArp, broadcast),
        (DropReason::BroadcastNotArp, multicast),
        (
            DropReason::UnknownProtocol,
            ipv4(PEER_IP, OUR_IP, IpProtocol::Udp, 8, |_| {}),
        ),
        (
            DropReason::TcpTruncated,
            ipv4(PEER_IP, OUR_IP, IpProtocol::Tcp, 12, |_| {}),
        ),
        (DropReason::TcpTruncated, tcp_offset_beyond),
        (DropReason::TcpBadChecksum, bad_tcp_sum),
        (
            DropReason::TcpBadPort,
            tcp_ports(PEER_IP, PEER_PORT, 0, TcpControl::Syn, &[]),
        ),
        (DropReason::ArpMalformed, arp_bad_hardware),
        (
            DropReason::ArpNotForUs,
            arp_request(PEER_MAC, PEER_IP, Ipv4Address::new(10, 0, 0, 7)),
        ),
        (
            DropReason::IcmpMalformed,
            ipv4(PEER_IP, OUR_IP, IpProtocol::Icmp, 4, |_| {}),
        ),
        (DropReason::IcmpBadChecksum, bad_icmp_sum),
        (DropReason::IcmpUnsupported, timestamp),
    ]
}

/// Changes the ICMP type of `frame`, then fixes the ICMP checksum.
fn with_icmp_type(mut frame: Vec<u8>, msg_type: u8) -> Vec<u8> {
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    let icmp_len = usize::from(ip.total_len()) - usize::from(ip.header_len());
    let icmp = &mut frame[34..34 + icmp_len];
    icmp[0] = msg_type;
    Icmpv4Packet::new_unchecked(icmp).fill_checksum();
    frame
}

/// Feeds `frames` to `iface`, checking each one's drop reason and the
/// counters; returns the reasons seen.
fn check_drops(mut iface: Interface, frames: &[(DropReason, Vec<u8>)]) -> Vec<DropReason> {
    for (reason, frame) in frames {
        assert_eq!(
            receive(&mut iface, frame),
            Received::Dropped(*reason),
            "{reason:?}"
        );
    }
    let counters = iface.counters();
    for reason in DropReason::ALL {
        let expected = frames.iter().filter(|(r, _)| *r == reason).count() as u64;
        assert_eq!(counters.drop_count(reason), expected, "{reason:?}");
    }
    assert_eq!(counters.dropped, frames.len() as u64);
    assert_eq!(counters.rx_frames, frames.len() as u64);
    frames.iter().map(|(reason, _)| *reason).collect()
}

#[test]
fn every_drop_reason_is_reachable_and_counted() {
    let mut seen = check_drops(interface(), &bad_frames());
    // On a VLAN: the same frames tagged with its id are dropped for the
    // same reasons (the runt is a frame to us cut inside its tag), and
    // untagged ones or those of another VLAN for not being ours.
    let syn = tcp(TcpControl::Syn, &[]);
    let mut tagged_frames: Vec<_> = bad_frames()
        .into_iter()
        .map(|(reason, frame)| match reason {
            DropReason::Runt => (reason, tagged(&syn, VLAN_ID, 5)[..16].to_vec()),
            _ => (reason, tagged(&frame, VLAN_ID, 5)),
        })
        .collect();
    let echo = echo_request(1, 1, b"abc");
    let arp = arp_request(PEER_MAC, PEER_IP, OUR_IP);
    for frame in [syn.clone(), echo.clone(), arp.clone()] {
        tagged_frames.push((DropReason::NotOurVlan, frame));
    }
    for id in [0, 1, VLAN_ID + 1, 4095] {
        tagged_frames.push((DropReason::NotOurVlan, tagged(&syn, id, 0)));
        tagged_frames.push((DropReason::NotOurVlan, tagged(&arp, id, 0)));
    }
    seen.extend(check_drops(vlan_interface(), &tagged_frames));
    for reason in DropReason::ALL {
        assert!(seen.contains(&reason), "{reason:?} is not tested");
    }
}

#[test]
fn runts_are_dropped() {
    let frame = tcp(TcpControl::Syn, &[]);
    let mut iface = interface();
    for len in 0..14 {
        assert_eq!(
            receive(&mut iface, &frame[..len]),
            Received::Dropped(DropReason::Runt)
        );
    }
    assert_eq!(iface.counters().runt, 14);
    // On a VLAN, a tag cut anywhere is a runt too.
    let frame = tagged(&frame, VLAN_ID, 0);
    let mut iface = vlan_interface();
    for len in 0..18 {
        assert_eq!(
            receive(&mut iface, &frame[..len]),
            Received::Dropped(DropReason::Runt),
            "{len} octets"
        );
    }
    assert_eq!(iface.counters().runt, 18);
}

/// Feeds every prefix of `frame`: each is dropped, or (once it holds all
/// of the packet, `content_len` octets) handled as the whole frame is;
/// then the same, tagged, on a port on a VLAN.
fn check_truncations(frame: &[u8], content_len: usize) {
    check_truncations_on(interface(), frame, content_len);
    check_truncations_on(
        vlan_interface(),
        &tagged(frame, VLAN_ID, 7),
        content_len + 4,
    );
}

fn check_truncations_on(mut iface: Interface, frame: &[u8], content_len: usize) {
    let whole = receive(&mut iface, frame);
    assert!(!matches!(whole, Received::Dropped(_)), "{whole:?}");
    for len in 0..frame.len() {
        let received = receive(&mut iface, &frame[..len]);
        if len < content_len {
            assert!(
                matches!(received, Received::Dropped(_)),
                "{len}: {received:?}"
            );
        } else {
            assert_eq!(received, whole, "{len}");
        }
    }
}

#[test]
fn every_truncation_is_dropped_or_handled() {
    let payload: Vec<u8> = (0..=255).collect();
    check_truncations(&tcp(TcpControl::Psh, &payload), 14 + 20 + 20 + 256);
    check_truncations(&tcp(TcpControl::Syn, &[]), 14 + 20 + 20);
    check_truncations(&arp_request(PEER_MAC, PEER_IP, OUR_IP), 42);
    check_truncations(&arp_reply(PEER_MAC, PEER_IP), 42);
    check_truncations(&echo_request(3, 4, &payload), 14 + 20 + 8 + 256);
    let reply = Icmpv4Repr::EchoReply {
        ident: 3,
        seq_no: 4,
        data: b"x",
    };
    check_truncations(&icmp(PEER_IP, &reply), 14 + 20 + 8 + 1);
}

#[test]
fn a_broadcast_storm_keeps_the_arp_cache_bounded() {
    const CAPACITY: usize = 64;
    let mut config = InterfaceConfig::new(our_address());
    config.arp = ArpConfig {
        capacity: CAPACITY,
        ..ArpConfig::default()
    };
    let mut iface = Interface::new(config);
    let mut rng = XorShift(0x5eed_0001);
    let mut now = Instant::now();
    let mut tx = Vec::new();
    for i in 0..10_000 {
        let sender_mac = EthernetAddress([0x02, rng.byte(), rng.byte(), rng.byte(), 0, 1]);
        let frame = match i % 4 {
            // Requests between other hosts: must not create entries.
            0 => arp_request(sender_mac, rng.ip(), rng.ip()),
            // Requests for us from random senders: bounded by the capacity.
            1 => arp_request(sender_mac, Ipv4Address::new(10, 0, 0, rng.byte()), OUR_IP),
            // Random broadcast frames of random types.
            _ => {
                let mut frame: Vec<u8> = (0..14 + rng.below(100)).map(|_| rng.byte()).collect();
                frame[..6].copy_from_slice(&EthernetAddress::BROADCAST.0);
                frame
            }
        };
        now += Duration::from_millis(1);
        iface.receive(now, &frame, UNKNOWN, UNKNOWN, &mut tx);
        iface.poll(now, &mut tx);
        tx.clear();
        assert!(iface.arp_cache().len() <= CAPACITY);
        assert!(iface.arp_cache().pending_len() <= CAPACITY);
    }
    assert!(
        iface.arp_cache().len() > CAPACITY / 2,
        "requests for us were learned"
    );
    assert!(iface.counters().arp_not_for_us > 2000);
    assert_eq!(iface.counters().rx_frames, 10_000);
}

/// A random frame: random bytes, or a valid frame with a few octets
/// changed, cut or extended (with the checksums fixed half the time so
/// that the mutations reach the deeper layers).
fn random_frame(rng: &mut XorShift, valid: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 {
        let len = rng.below(128);
        return (0..len).map(|_| rng.byte()).collect();
    }
    let mut frame = valid[rng.below(valid.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(frame.len());
        frame[at] = rng.byte();
    }
    match rng.below(4) {
        0 => frame.truncate(rng.below(frame.len() + 1)),
        1 => frame.extend((0..rng.below(64)).map(|_| rng.byte())),
        _ => {}
    }
    if rng.below(2) == 0 {
        fix_checksums(&mut frame);
    }
    frame
}

/// Recomputes the IPv4 and ICMP checksums where the headers allow.
fn fix_checksums(frame: &mut [u8]) {
    // Past the tag, if the frame has one.
    let l2_len = vlan::parse(frame).map_or(14, |l2| l2.len);
    let Some(ip) = frame.get_mut(l2_len..) else {
        return;
    };
    let Ok(mut packet) = Ipv4Packet::new_checked(ip) else {
        return;
    };
    packet.fill_checksum();
    if packet.next_header() == IpProtocol::Icmp {
        if let Ok(mut icmp) = Icmpv4Packet::new_checked(packet.payload_mut()) {
            icmp.fill_checksum();
        }
    }
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let valid = vec![
        tcp(TcpControl::Syn, &[]),
        tcp(TcpControl::Psh, b"0123456789abcdef"),
        arp_request(PEER_MAC, PEER_IP, OUR_IP),
        arp_reply(PEER_MAC, PEER_IP),
        echo_request(1, 2, b"payload"),
        icmp(
            PEER_IP,
            &Icmpv4Repr::EchoReply {
                ident: 1,
                seq_no: 2,
                data: b"",
            },
        ),
    ];
    random_frames_never_panic(our_address(), interface(), &valid);
    // Tagged for the VLAN of the port, or not; the random octets also
    // land in the tag.
    let mut mixed: Vec<_> = valid
        .iter()
        .map(|frame| tagged(frame, VLAN_ID, 2))
        .collect();
    mixed.extend(valid.iter().map(|frame| tagged(frame, VLAN_ID + 1, 2)));
    mixed.extend(valid);
    random_frames_never_panic(vlan_address(), vlan_interface(), &mixed);
}

/// Feeds 100 000 random and mutated frames of `valid` to `classify` (for
/// `addr`) and to `iface`, which is on `addr`: nothing panics, and every
/// verdict comes up.
fn random_frames_never_panic(addr: InterfaceAddress, mut iface: Interface, valid: &[Vec<u8>]) {
    let mut rng = XorShift(0x0123_4567_89ab_cdef);
    let mut now = Instant::now();
    let mut tx = Vec::new();
    let mut verdicts = [0_u64; 4];
    for _ in 0..100_000 {
        let frame = random_frame(&mut rng, valid);
        let (ip_csum, tcp_csum) = (rng.checksum(), rng.checksum());
        let classified = classify(&frame, &addr, ip_csum, tcp_csum);
        verdicts[match classified {
            Classified::Tcp(meta) => {
                assert!(meta.tcp_offset + meta.tcp_len <= frame.len());
                0
            }
            Classified::Arp => 1,
            Classified::Icmp => 2,
            Classified::Drop(_) => 3,
        }] += 1;
        now += Duration::from_micros(100);
        iface.receive(now, &frame, ip_csum, tcp_csum, &mut tx);
        iface.poll(now, &mut tx);
        tx.clear();
    }
    assert!(verdicts.iter().all(|&n| n > 0), "{verdicts:?}");
    assert_eq!(iface.counters().rx_frames, 100_000);
}
