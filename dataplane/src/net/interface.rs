//! The control core's interface: everything [`classify`] does not route to
//! a flow.
//!
//! Implements the ARP responder and resolver of RFC 826 (with the
//! gratuitous announcement of RFC 5227 §3 on start), the ICMP echo
//! responder and requester of RFC 792 (RFC 1122 §3.2.2.6), and the
//! minimum Ethernet frame length of IEEE 802.3 (frames are padded with
//! zeros to 60 octets on transmit). Sans-IO: frames come in as slices,
//! go out through a [`FrameSink`], and time is passed in by the caller.

use std::ops::Range;
use std::time::Instant;

use smoltcp::wire::{ArpOperation, EthernetAddress, IpProtocol, Ipv4Address};

use super::addr::InterfaceAddress;
use super::arp::{ArpCache, ArpConfig, ArpMessage, Lookup};
use super::classify::{classify, Classified, DropReason, RxChecksum, TcpMeta};
use super::counters::NetCounters;
use super::icmp::{echo_frame_len, parse_echo, write_echo, EchoKind, MAX_ECHO_DATA_LEN};
use super::ipv4::{Ipv4Header, DEFAULT_TTL, MIN_FRAME_LEN};
use super::kernel_neighbours::KernelNeighbours;
use super::vlan::Vlan;
use crate::extbuf::ExternalRegion;

/// Where the interface's frames go.
pub trait FrameSink {
    /// Hands a frame of `len` octets to `fill`, then transmits it; false
    /// when no buffer was available (the frame is dropped).
    ///
    /// The slice given to `fill` is exactly `len` octets long; its initial
    /// contents are unspecified (the interface writes every octet).
    fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;

    /// Like [`FrameSink::send_frame`], for an Ethernet/IPv4/TCP frame
    /// (IPv4 header without options): `fill` gets `true` when the device
    /// will fill its checksums, and must then leave the IPv4 checksum 0
    /// and put only the pseudo-header sum in the TCP checksum; with
    /// `false` it writes both checksums itself. The default never
    /// offloads.
    fn send_tcp_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8], bool)) -> bool {
        self.send_frame(len, &mut |frame| fill(frame, false))
    }

    /// Whether [`FrameSink::send_tcp_frame_referencing`] can send at all
    /// (checked before the caller looks for octets to reference). The
    /// default never references.
    fn sends_by_reference(&self) -> bool {
        false
    }

    /// Sends an Ethernet/IPv4/TCP frame whose payload is mostly not
    /// copied: the frame is the `headers_len` octets `fill` writes when
    /// given [`Piece::Head`] (as [`FrameSink::send_tcp_frame`]'s `fill`
    /// does when given `true`: the device fills both checksums; they may
    /// end with the payload's first octets), then the octets at `range` of
    /// `region`, read where they lie (the region keeps them alive until the
    /// device is done), then the `trailer_len` octets `fill` writes when
    /// given [`Piece::Trailer`] (the payload's octets after them, often
    /// none).
    ///
    /// `None` when this sink cannot (no checksum offload, a device that
    /// cannot read external buffers, or no mbuf for a piece): the caller
    /// sends a copy with [`FrameSink::send_tcp_frame`]. Otherwise whether
    /// the frame was queued. The default never references.
    fn send_tcp_frame_referencing(
        &mut self,
        _headers_len: usize,
        _region: &ExternalRegion,
        _range: Range<usize>,
        _trailer_len: usize,
        _fill: &mut dyn FnMut(Piece, &mut [u8]),
    ) -> Option<bool> {
        None
    }
}

/// The pieces of a frame [`FrameSink::send_tcp_frame_referencing`] has
/// its caller write: those around the octets it sends by reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The headers, and the payload's octets before the referenced ones.
    Head,
    /// The payload's octets after the referenced ones.
    Trailer,
}

/// Collects the frames, for tests.
impl FrameSink for Vec<Vec<u8>> {
    fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut frame = vec![0; len];
        fill(&mut frame);
        self.push(frame);
        true
    }
}

/// The configuration of an [`Interface`].
#[derive(Clone, Debug)]
pub struct InterfaceConfig {
    /// Our addresses.
    pub address: InterfaceAddress,
    /// ARP timers and limits.
    pub arp: ArpConfig,
    /// The time to live of the datagrams we send.
    pub ttl: u8,
    /// Next hops from the kernel's neighbour table of the interface with
    /// this index, not from ARP: a port on an interface the kernel keeps
    /// ([`crate::af_xdp`]), where the kernel answers ARP and takes the
    /// replies. No ARP is sent then, not even the gratuitous one. `None`
    /// (the default) speaks ARP.
    pub kernel_neighbours: Option<u32>,
}

impl InterfaceConfig {
    /// The default ARP settings and TTL for `address`.
    pub fn new(address: InterfaceAddress) -> Self {
        InterfaceConfig {
            address,
            arp: ArpConfig::default(),
            ttl: DEFAULT_TTL,
            kernel_neighbours: None,
        }
    }
}

/// An ICMP echo reply we received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EchoReply {
    /// Who replied.
    pub src: Ipv4Address,
    /// The identifier.
    pub ident: u16,
    /// The sequence number.
    pub seq: u16,
    /// Length of the echoed data.
    pub payload_len: usize,
}

/// What [`Interface::receive`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// ARP or ICMP, handled (and answered if it asked for an answer).
    Consumed,
    /// An echo reply for the caller.
    EchoReply(EchoReply),
    /// A TCP segment for the caller (a connection the control core owns).
    Tcp(TcpMeta),
    /// Dropped (and counted).
    Dropped(DropReason),
}

/// The state of a destination's next hop, from [`Interface::resolve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Send to this MAC address.
    Known(EthernetAddress),
    /// Being resolved: try again later.
    Pending,
    /// Off-link without a gateway, not a unicast peer address, or the
    /// resolution ran out of retries (or of room).
    Unreachable,
}

/// Ethernet, ARP, IPv4 and ICMP for the control core.
#[derive(Debug)]
pub struct Interface {
    config: InterfaceConfig,
    cache: ArpCache,
    /// The kernel's table, when it resolves instead of ARP.
    kernel: Option<KernelNeighbours>,
    counters: NetCounters,
    /// The IPv4 identification of the last datagram sent.
    ident: u16,
}

impl Interface {
    /// An interface with an empty neighbour cache.
    pub fn new(config: InterfaceConfig) -> Self {
        Interface {
            cache: ArpCache::new(config.arp),
            kernel: config.kernel_neighbours.map(KernelNeighbours::new),
            config,
            counters: NetCounters::default(),
            ident: 0,
        }
    }

    /// Our addresses.
    pub fn address(&self) -> &InterfaceAddress {
        &self.config.address
    }

    /// Sends the gratuitous ARP announcing our address, if configured.
    pub fn start(&mut self, _now: Instant, tx: &mut dyn FrameSink) {
        if self.config.arp.gratuitous_on_start && self.kernel.is_none() {
            let addr = &self.config.address;
            let announcement = ArpMessage::request(addr, addr.ip);
            if send_arp(tx, &mut self.counters, &announcement, addr.vlan) {
                self.counters.gratuitous_arps_sent += 1;
            }
        }
    }

    /// Classifies a received frame and handles ARP (answering requests for
    /// our address, learning senders) and ICMP (answering echo requests,
    /// reporting echo replies); counts everything.
    pub fn receive(
        &mut self,
        now: Instant,
        frame: &[u8],
        ip_csum: RxChecksum,
        tcp_csum: RxChecksum,
        tx: &mut dyn FrameSink,
    ) -> Received {
        self.counters.rx_frames += 1;
        let received = match classify(frame, &self.config.address, ip_csum, tcp_csum) {
            Classified::Tcp(meta) => {
                self.counters.tcp_segments += 1;
                Received::Tcp(meta)
            }
            Classified::Arp => self.receive_arp(now, frame, tx),
            Classified::Icmp => self.receive_icmp(frame, tx),
            Classified::Drop(reason) => Received::Dropped(reason),
        };
        if let Received::Dropped(reason) = received {
            self.counters.record_drop(reason);
        }
        received
    }

    /// Runs the ARP timers: retries, failures, expiry.
    pub fn poll(&mut self, now: Instant, tx: &mut dyn FrameSink) {
        let Interface {
            config,
            cache,
            counters,
            ..
        } = self;
        let failed = cache.poll(now, |ip| {
            send_arp_request(tx, counters, &config.address, ip)
        });
        counters.arp_resolutions_failed += failed;
    }

    /// When [`poll`](Self::poll) next has work (it may be early, never
    /// late); `None` when no timer runs.
    pub fn poll_at(&self) -> Option<Instant> {
        self.cache.poll_at()
    }

    /// The MAC address to send datagrams for `dst` to: that of `dst` on
    /// link, else the gateway's. Sends an ARP request when it is unknown
    /// (at most one per retry interval; [`poll`](Self::poll) retries).
    pub fn resolve(
        &mut self,
        now: Instant,
        dst: Ipv4Address,
        tx: &mut dyn FrameSink,
    ) -> Resolution {
        let addr = self.config.address;
        let next_hop = addr
            .next_hop(dst)
            .filter(|&hop| addr.is_valid_peer(dst) && addr.is_valid_peer(hop));
        let Some(hop) = next_hop else {
            return Resolution::Unreachable;
        };
        if let Some(kernel) = &mut self.kernel {
            // The kernel's answers are kept as ARP's are (the entry's
            // lifetime), so that not every connection asks it again.
            if let Some(mac) = self.cache.get(hop) {
                return Resolution::Known(mac);
            }
            return match kernel.resolve(now, hop) {
                Ok(Some(mac)) => {
                    self.cache.merge(now, hop, mac, true);
                    Resolution::Known(mac)
                }
                Ok(None) => Resolution::Pending,
                // The caller's own deadline ends the wait.
                Err(_) => {
                    self.counters.kernel_neighbour_errors += 1;
                    Resolution::Pending
                }
            };
        }
        match self.cache.resolve(now, hop) {
            Lookup::Known(mac) => Resolution::Known(mac),
            Lookup::Request => {
                send_arp_request(tx, &mut self.counters, &addr, hop);
                Resolution::Pending
            }
            Lookup::Pending => Resolution::Pending,
            Lookup::Failed => Resolution::Unreachable,
            Lookup::Full => {
                self.counters.arp_pending_full += 1;
                Resolution::Unreachable
            }
        }
    }

    /// Sends an echo request to `dst` if its next hop is
    /// [`Known`](Resolution::Known) (else only resolves it); `payload`
    /// beyond [`MAX_ECHO_DATA_LEN`] octets is cut.
    pub fn send_echo_request(
        &mut self,
        now: Instant,
        dst: Ipv4Address,
        ident: u16,
        seq: u16,
        payload: &[u8],
        tx: &mut dyn FrameSink,
    ) -> Resolution {
        let resolution = self.resolve(now, dst, tx);
        if let Resolution::Known(mac) = resolution {
            let data = payload.get(..MAX_ECHO_DATA_LEN).unwrap_or(payload);
            let header = self.icmp_header(mac, dst);
            let len = echo_frame_len(header.vlan, data.len());
            if transmit(tx, &mut self.counters, len, |buf| {
                write_echo(buf, &header, EchoKind::Request, ident, seq, data);
            }) {
                self.counters.icmp_echo_requests_sent += 1;
            }
        }
        resolution
    }

    /// The MAC address of `ip`, if resolved (as of the last
    /// [`poll`](Self::poll)).
    pub fn neighbor(&self, ip: Ipv4Address) -> Option<EthernetAddress> {
        self.cache.get(ip)
    }

    /// The neighbour cache.
    pub fn arp_cache(&self) -> &ArpCache {
        &self.cache
    }

    /// Our counters.
    pub fn counters(&self) -> &NetCounters {
        &self.counters
    }

    /// Our counters, for adding the dataplane cores' [`classify`] drops.
    pub fn counters_mut(&mut self) -> &mut NetCounters {
        &mut self.counters
    }

    /// RFC 826 reception: merge the sender, answer requests for us.
    fn receive_arp(&mut self, now: Instant, frame: &[u8], tx: &mut dyn FrameSink) -> Received {
        let message = match ArpMessage::parse(frame) {
            Ok(message) => message,
            Err(reason) => return Received::Dropped(reason),
        };
        let addr = self.config.address;
        let for_us = message.target_ip == addr.ip;
        let merged = addr.is_valid_peer(message.sender_ip)
            && self
                .cache
                .merge(now, message.sender_ip, message.sender_mac, for_us);
        if !(for_us || merged) {
            return Received::Dropped(DropReason::ArpNotForUs);
        }
        if message.operation == ArpOperation::Request {
            if for_us && send_arp(tx, &mut self.counters, &message.reply(&addr), addr.vlan) {
                self.counters.arp_requests_answered += 1;
            }
        } else {
            self.counters.arp_replies_received += 1;
        }
        Received::Consumed
    }

    /// Answers echo requests and reports echo replies.
    fn receive_icmp(&mut self, frame: &[u8], tx: &mut dyn FrameSink) -> Received {
        let echo = match parse_echo(frame) {
            Ok(echo) => echo,
            Err(reason) => return Received::Dropped(reason),
        };
        match echo.kind {
            EchoKind::Request => {
                let header = self.icmp_header(echo.src_mac, echo.src);
                let len = echo_frame_len(header.vlan, echo.data.len());
                if transmit(tx, &mut self.counters, len, |buf| {
                    write_echo(
                        buf,
                        &header,
                        EchoKind::Reply,
                        echo.ident,
                        echo.seq,
                        echo.data,
                    );
                }) {
                    self.counters.icmp_echo_replied += 1;
                }
                Received::Consumed
            }
            EchoKind::Reply => {
                self.counters.icmp_echo_replies_received += 1;
                Received::EchoReply(EchoReply {
                    src: echo.src,
                    ident: echo.ident,
                    seq: echo.seq,
                    payload_len: echo.data.len(),
                })
            }
        }
    }

    /// The headers of the next ICMP datagram we send to `dst` via `dst_mac`.
    fn icmp_header(&mut self, dst_mac: EthernetAddress, dst: Ipv4Address) -> Ipv4Header {
        self.ident = self.ident.wrapping_add(1);
        Ipv4Header {
            src_mac: self.config.address.mac,
            dst_mac,
            src: self.config.address.ip,
            dst,
            protocol: IpProtocol::Icmp,
            ttl: self.config.ttl,
            ident: self.ident,
            vlan: self.config.address.vlan,
        }
    }
}

/// Sends a frame of `len` octets written by `write`, padded with zeros to
/// [`MIN_FRAME_LEN`]; counts a missing buffer. Returns whether it was sent.
fn transmit(
    tx: &mut dyn FrameSink,
    counters: &mut NetCounters,
    len: usize,
    mut write: impl FnMut(&mut [u8]),
) -> bool {
    let sent = tx.send_frame(len.max(MIN_FRAME_LEN), &mut |buf| {
        if let Some((frame, padding)) = buf.split_at_mut_checked(len) {
            write(frame);
            padding.fill(0);
        }
    });
    if !sent {
        counters.tx_no_buffer += 1;
    }
    sent
}

/// Sends an ARP message, tagged for `vlan` if set; returns whether it was
/// sent.
fn send_arp(
    tx: &mut dyn FrameSink,
    counters: &mut NetCounters,
    message: &ArpMessage,
    vlan: Option<Vlan>,
) -> bool {
    transmit(tx, counters, ArpMessage::frame_len(vlan), |buf| {
        message.write_frame(buf, vlan);
    })
}

/// Sends (and counts) a request from `addr` for `target`.
fn send_arp_request(
    tx: &mut dyn FrameSink,
    counters: &mut NetCounters,
    addr: &InterfaceAddress,
    target: Ipv4Address,
) {
    if send_arp(tx, counters, &ArpMessage::request(addr, target), addr.vlan) {
        counters.arp_requests_sent += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        ArpPacket, ArpRepr, EthernetFrame, EthernetProtocol, Icmpv4Packet, Icmpv4Repr, Ipv4Packet,
        TcpControl,
    };

    use super::*;
    use crate::net::arp::ARP_FRAME_LEN;
    use crate::net::test_frames::*;

    const SECOND: Duration = Duration::from_secs(1);
    const GATEWAY_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xfe]);

    /// A sink without buffers.
    struct Exhausted;

    impl FrameSink for Exhausted {
        fn send_frame(&mut self, _len: usize, _fill: &mut dyn FnMut(&mut [u8])) -> bool {
            false
        }
    }

    fn interface() -> Interface {
        Interface::new(InterfaceConfig::new(our_address()))
    }

    fn receive(
        iface: &mut Interface,
        now: Instant,
        frame: &[u8],
        tx: &mut Vec<Vec<u8>>,
    ) -> Received {
        iface.receive(now, frame, RxChecksum::Unknown, RxChecksum::Unknown, tx)
    }

    /// The Ethernet destination and ARP packet of a frame we sent, after
    /// checking its length and padding.
    fn sent_arp(frame: &[u8]) -> (EthernetAddress, ArpRepr) {
        assert_eq!(frame.len(), MIN_FRAME_LEN);
        assert!(
            frame[ARP_FRAME_LEN..].iter().all(|&b| b == 0),
            "zero padding"
        );
        let eth = EthernetFrame::new_checked(frame).unwrap();
        assert_eq!(
            (eth.src_addr(), eth.ethertype()),
            (OUR_MAC, EthernetProtocol::Arp)
        );
        let repr = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap();
        (eth.dst_addr(), repr)
    }

    fn request_for(target: Ipv4Address) -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: OUR_MAC,
            source_protocol_addr: OUR_IP,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        }
    }

    /// The echo message in a frame we sent, all checksums verified.
    fn sent_icmp(frame: &[u8]) -> (EthernetAddress, Ipv4Address, Icmpv4Repr<'_>) {
        let eth = EthernetFrame::new_checked(frame).unwrap();
        assert_eq!(eth.src_addr(), OUR_MAC);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(
            (ip.src_addr(), ip.next_header()),
            (OUR_IP, IpProtocol::Icmp)
        );
        let packet = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        let repr = Icmpv4Repr::parse(&packet, &ChecksumCapabilities::default()).unwrap();
        (eth.dst_addr(), ip.dst_addr(), repr)
    }

    #[test]
    fn on_a_vlan_only_its_frames_are_taken_and_every_frame_sent_is_tagged() {
        let mut address = our_address();
        address.vlan = Some(Vlan::new(42, 5).unwrap());
        let mut iface = Interface::new(InterfaceConfig::new(address));
        let (mut tx, now) = (Vec::new(), Instant::now());
        // PCP 5, DEI 0, VID 42, then the EtherType.
        let arp_tag = [0x81, 0x00, 0xa0, 0x2a, 0x08, 0x06];
        let ipv4_tag = [0x81, 0x00, 0xa0, 0x2a, 0x08, 0x00];
        iface.start(now, &mut tx);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx[0].len(), MIN_FRAME_LEN);
        assert_eq!(tx[0][12..18], arp_tag, "the gratuitous ARP");
        tx.clear();
        // Untagged, or tagged with another VLAN id: not ours.
        let request = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        for frame in [request.clone(), tagged(&request, 43, 5)] {
            assert_eq!(
                receive(&mut iface, now, &frame, &mut tx),
                Received::Dropped(DropReason::NotOurVlan)
            );
        }
        assert_eq!(iface.counters().not_our_vlan, 2);
        assert!(tx.is_empty());
        // Ours at any priority: answered with our tag and priority.
        let request = tagged(&request, 42, 0);
        assert_eq!(
            receive(&mut iface, now, &request, &mut tx),
            Received::Consumed
        );
        let reply = tx.remove(0);
        assert_eq!(reply[12..18], arp_tag);
        let arp = ArpMessage::parse(&reply).unwrap();
        assert_eq!(
            (arp.operation, arp.target_mac, arp.target_ip),
            (ArpOperation::Reply, PEER_MAC, PEER_IP)
        );
        assert_eq!(iface.neighbor(PEER_IP), Some(PEER_MAC));
        let ping = tagged(&echo_request(7, 9, b"abc"), 42, 3);
        assert_eq!(receive(&mut iface, now, &ping, &mut tx), Received::Consumed);
        let answer = tx.remove(0);
        assert_eq!(answer[12..18], ipv4_tag);
        let echo = parse_echo(&answer).unwrap();
        assert_eq!(
            (echo.kind, echo.src, echo.ident, echo.seq, echo.data),
            (EchoKind::Reply, OUR_IP, 7, 9, &b"abc"[..])
        );
        let syn = tagged(&tcp(TcpControl::Syn, &[]), 42, 0);
        let Received::Tcp(meta) = receive(&mut iface, now, &syn, &mut tx) else {
            panic!("the SYN was not handed over");
        };
        assert_eq!(
            (meta.ip_offset, meta.tcp_offset, meta.tcp_len),
            (18, 38, 20)
        );
        let other = Ipv4Address::new(10, 0, 0, 3);
        assert_eq!(iface.resolve(now, other, &mut tx), Resolution::Pending);
        assert_eq!(tx.remove(0)[12..18], arp_tag, "the ARP request");
    }

    #[test]
    fn an_arp_request_for_us_is_answered_and_the_requester_learned() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let request = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        assert_eq!(
            receive(&mut iface, now, &request, &mut tx),
            Received::Consumed
        );
        assert_eq!(tx.len(), 1);
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: OUR_MAC,
            source_protocol_addr: OUR_IP,
            target_hardware_addr: PEER_MAC,
            target_protocol_addr: PEER_IP,
        };
        assert_eq!(sent_arp(&tx[0]), (PEER_MAC, reply));
        assert_eq!(iface.neighbor(PEER_IP), Some(PEER_MAC));
        assert_eq!(iface.counters().arp_requests_answered, 1);
        assert_eq!(iface.counters().rx_frames, 1);
    }

    #[test]
    fn arp_for_another_address_is_ignored_and_not_learned() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let request = arp_request(PEER_MAC, PEER_IP, Ipv4Address::new(10, 0, 0, 3));
        assert_eq!(
            receive(&mut iface, now, &request, &mut tx),
            Received::Dropped(DropReason::ArpNotForUs)
        );
        assert!(tx.is_empty());
        assert_eq!(iface.neighbor(PEER_IP), None);
        assert_eq!(iface.counters().arp_not_for_us, 1);
        assert_eq!(iface.counters().dropped, 1);
    }

    #[test]
    fn arp_for_another_address_updates_a_known_neighbour() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        receive(&mut iface, now, &arp_reply(PEER_MAC, PEER_IP), &mut tx);
        let moved = EthernetAddress([0x02, 0, 0, 0, 0, 0x22]);
        let request = arp_request(moved, PEER_IP, Ipv4Address::new(10, 0, 0, 3));
        assert_eq!(
            receive(&mut iface, now, &request, &mut tx),
            Received::Consumed
        );
        assert_eq!(iface.neighbor(PEER_IP), Some(moved));
        assert!(tx.is_empty());
    }

    #[test]
    fn arp_from_an_invalid_sender_address_is_answered_but_not_learned() {
        // An RFC 5227 probe has sender address 0.0.0.0.
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let probe = arp_request(PEER_MAC, Ipv4Address::UNSPECIFIED, OUR_IP);
        assert_eq!(
            receive(&mut iface, now, &probe, &mut tx),
            Received::Consumed
        );
        assert_eq!(tx.len(), 1);
        assert!(iface.arp_cache().is_empty());
    }

    #[test]
    fn start_sends_a_gratuitous_arp_when_configured() {
        let (mut iface, mut tx) = (interface(), Vec::new());
        iface.start(Instant::now(), &mut tx);
        assert_eq!(tx.len(), 1);
        assert_eq!(
            sent_arp(&tx[0]),
            (EthernetAddress::BROADCAST, request_for(OUR_IP))
        );
        assert_eq!(iface.counters().gratuitous_arps_sent, 1);

        let mut config = InterfaceConfig::new(our_address());
        config.arp.gratuitous_on_start = false;
        let mut tx = Vec::new();
        Interface::new(config).start(Instant::now(), &mut tx);
        assert!(tx.is_empty());
    }

    #[test]
    fn resolution_retries_then_gives_up() {
        let (mut iface, mut tx, start) = (interface(), Vec::new(), Instant::now());
        assert_eq!(iface.resolve(start, PEER_IP, &mut tx), Resolution::Pending);
        assert_eq!(
            sent_arp(&tx[0]),
            (EthernetAddress::BROADCAST, request_for(PEER_IP))
        );
        assert_eq!(iface.resolve(start, PEER_IP, &mut tx), Resolution::Pending);
        assert_eq!(tx.len(), 1, "rate limited");
        assert_eq!(iface.poll_at(), Some(start + SECOND));
        iface.poll(start + SECOND / 2, &mut tx);
        assert_eq!(tx.len(), 1);
        for retry in 1..=3 {
            iface.poll(start + retry * SECOND, &mut tx);
            assert_eq!(tx.len(), retry as usize + 1);
            assert_eq!(sent_arp(&tx[retry as usize]).1, request_for(PEER_IP));
        }
        iface.poll(start + 4 * SECOND, &mut tx);
        assert_eq!(tx.len(), 4);
        let later = start + 4 * SECOND;
        assert_eq!(
            iface.resolve(later, PEER_IP, &mut tx),
            Resolution::Unreachable
        );
        assert_eq!(iface.counters().arp_requests_sent, 4);
        assert_eq!(iface.counters().arp_resolutions_failed, 1);
    }

    #[test]
    fn a_reply_resolves_until_the_entry_expires() {
        let (mut iface, mut tx, start) = (interface(), Vec::new(), Instant::now());
        iface.resolve(start, PEER_IP, &mut tx);
        let reply = arp_reply(PEER_MAC, PEER_IP);
        assert_eq!(
            receive(&mut iface, start, &reply, &mut tx),
            Received::Consumed
        );
        assert_eq!(iface.counters().arp_replies_received, 1);
        let known = Resolution::Known(PEER_MAC);
        assert_eq!(iface.resolve(start + SECOND, PEER_IP, &mut tx), known);
        iface.poll(start + SECOND, &mut tx);
        assert_eq!(tx.len(), 1, "no retry once resolved");
        assert_eq!(iface.poll_at(), Some(start + 60 * SECOND));
        iface.poll(start + 60 * SECOND, &mut tx);
        assert_eq!(iface.neighbor(PEER_IP), None);
        let expired = start + 60 * SECOND;
        assert_eq!(
            iface.resolve(expired, PEER_IP, &mut tx),
            Resolution::Pending
        );
        assert_eq!(tx.len(), 2);
        assert_eq!(sent_arp(&tx[1]).1, request_for(PEER_IP));
    }

    #[test]
    fn off_link_destinations_resolve_the_gateway() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let far = Ipv4Address::new(192, 0, 2, 7);
        assert_eq!(iface.resolve(now, far, &mut tx), Resolution::Pending);
        assert_eq!(sent_arp(&tx[0]).1, request_for(GATEWAY_IP));
        receive(
            &mut iface,
            now,
            &arp_reply(GATEWAY_MAC, GATEWAY_IP),
            &mut tx,
        );
        assert_eq!(
            iface.resolve(now, far, &mut tx),
            Resolution::Known(GATEWAY_MAC)
        );

        let mut no_gateway = our_address();
        no_gateway.gateway = None;
        let mut iface = Interface::new(InterfaceConfig::new(no_gateway));
        let mut tx = Vec::new();
        assert_eq!(iface.resolve(now, far, &mut tx), Resolution::Unreachable);
        assert!(tx.is_empty());
    }

    #[test]
    fn only_unicast_peers_are_resolved() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        for dst in [
            OUR_IP,
            Ipv4Address::BROADCAST,
            Ipv4Address::new(10, 0, 0, 255),
            Ipv4Address::new(224, 0, 0, 1),
            Ipv4Address::UNSPECIFIED,
        ] {
            assert_eq!(
                iface.resolve(now, dst, &mut tx),
                Resolution::Unreachable,
                "{dst}"
            );
        }
        assert!(tx.is_empty());
    }

    #[test]
    fn echo_requests_are_answered_with_the_same_ident_seq_and_data() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        for data in [&b""[..], b"ping", &[0xa5; 1000]] {
            tx.clear();
            let request = echo_request(0x1234, 0x5678, data);
            assert_eq!(
                receive(&mut iface, now, &request, &mut tx),
                Received::Consumed
            );
            assert_eq!(tx.len(), 1);
            assert_eq!(tx[0].len(), (42 + data.len()).max(MIN_FRAME_LEN));
            let reply = Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 0x5678,
                data,
            };
            assert_eq!(sent_icmp(&tx[0]), (PEER_MAC, PEER_IP, reply));
        }
        assert_eq!(iface.counters().icmp_echo_replied, 3);
    }

    #[test]
    fn echo_replies_are_reported() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let reply = icmp(
            PEER_IP,
            &Icmpv4Repr::EchoReply {
                ident: 1,
                seq_no: 2,
                data: b"abc",
            },
        );
        let expected = EchoReply {
            src: PEER_IP,
            ident: 1,
            seq: 2,
            payload_len: 3,
        };
        assert_eq!(
            receive(&mut iface, now, &reply, &mut tx),
            Received::EchoReply(expected)
        );
        assert!(tx.is_empty());
        assert_eq!(iface.counters().icmp_echo_replies_received, 1);
    }

    #[test]
    fn echo_requests_are_sent_once_the_neighbour_is_known() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let pending = iface.send_echo_request(now, PEER_IP, 9, 1, b"hi", &mut tx);
        assert_eq!(pending, Resolution::Pending);
        assert_eq!(sent_arp(&tx[0]).1, request_for(PEER_IP));
        receive(&mut iface, now, &arp_reply(PEER_MAC, PEER_IP), &mut tx);
        let long = [7; MAX_ECHO_DATA_LEN + 10];
        for (seq, data) in [(2, &b"hi"[..]), (3, &long[..])] {
            let sent = iface.send_echo_request(now, PEER_IP, 9, seq, data, &mut tx);
            assert_eq!(sent, Resolution::Known(PEER_MAC));
            let request = Icmpv4Repr::EchoRequest {
                ident: 9,
                seq_no: seq,
                data: &data[..data.len().min(MAX_ECHO_DATA_LEN)],
            };
            assert_eq!(sent_icmp(tx.last().unwrap()), (PEER_MAC, PEER_IP, request));
        }
        assert_eq!(iface.counters().icmp_echo_requests_sent, 2);
    }

    #[test]
    fn tcp_is_handed_over_and_counted() {
        let (mut iface, mut tx, now) = (interface(), Vec::new(), Instant::now());
        let received = receive(&mut iface, now, &tcp(TcpControl::Syn, &[]), &mut tx);
        assert!(matches!(received, Received::Tcp(meta) if meta.syn));
        assert_eq!(iface.counters().tcp_segments, 1);
    }

    #[test]
    fn missing_transmit_buffers_are_counted() {
        let (mut iface, now) = (interface(), Instant::now());
        let request = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        let none = RxChecksum::Unknown;
        iface.receive(now, &request, none, none, &mut Exhausted);
        iface.receive(now, &echo_request(1, 1, b""), none, none, &mut Exhausted);
        iface.start(now, &mut Exhausted);
        iface.resolve(now, Ipv4Address::new(10, 0, 0, 9), &mut Exhausted);
        let counters = iface.counters();
        assert_eq!(counters.tx_no_buffer, 4);
        assert_eq!(
            counters.arp_requests_answered + counters.icmp_echo_replied,
            0
        );
        assert_eq!(
            counters.gratuitous_arps_sent + counters.arp_requests_sent,
            0
        );
    }
}
