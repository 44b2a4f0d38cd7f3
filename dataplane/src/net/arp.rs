//! ARP for IPv4 over Ethernet (RFC 826): the messages, and the neighbour
//! cache with its timeouts and retries (RFC 1122 §2.3.2.1 flooding limit:
//! at most one request per destination per retry interval).
//!
//! The cache follows RFC 826's packet reception rule: any ARP packet
//! updates an entry we already have for its sender, but only a packet
//! whose target is our address creates one, so ARP traffic between other
//! hosts cannot fill the cache. Both the resolved entries and the pending
//! resolutions are bounded by [`ArpConfig::capacity`]; when the resolved
//! table is full, expired entries are purged and then the entry closest to
//! expiry (the oldest) is evicted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetProtocol, Ipv4Address,
};

use super::addr::InterfaceAddress;
use super::classify::DropReason;
use super::ipv4::ETHERNET_HEADER_LEN;
use super::vlan::{self, Vlan};

/// Length of an ARP packet for IPv4 over Ethernet.
const ARP_PACKET_LEN: usize = 28;
/// Length of an untagged ARP frame for IPv4 over Ethernet, before padding
/// ([`ArpMessage::frame_len`] on a VLAN).
pub const ARP_FRAME_LEN: usize = ETHERNET_HEADER_LEN + ARP_PACKET_LEN;

/// The longest any ARP timer may be; longer configured durations are cut
/// to this so that deadlines never overflow [`Instant`].
pub const MAX_TIMER: Duration = Duration::from_secs(86_400);

/// The ARP settings of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpConfig {
    /// How long a resolved neighbour stays valid (default 60 s).
    pub entry_lifetime: Duration,
    /// Time between requests for an unanswered resolution (default 1 s).
    pub retry_interval: Duration,
    /// Requests sent after the first before a resolution fails (default 3).
    pub max_retries: u32,
    /// The most resolved neighbours kept, and separately the most pending
    /// resolutions (default 1024).
    pub capacity: usize,
    /// Announce our address with a gratuitous ARP on start (default true).
    pub gratuitous_on_start: bool,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            entry_lifetime: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            max_retries: 3,
            capacity: 1024,
            gratuitous_on_start: true,
        }
    }
}

/// A validated ARP request or reply for IPv4 over Ethernet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpMessage {
    /// [`ArpOperation::Request`] or [`ArpOperation::Reply`], nothing else.
    pub operation: ArpOperation,
    /// The sender's MAC address (unicast).
    pub sender_mac: EthernetAddress,
    /// The sender's IPv4 address.
    pub sender_ip: Ipv4Address,
    /// The target's MAC address (zero in requests).
    pub target_mac: EthernetAddress,
    /// The target's IPv4 address.
    pub target_ip: Ipv4Address,
}

impl ArpMessage {
    /// Parses the ARP packet in an Ethernet frame (after its IEEE 802.1Q
    /// tag, if it has one).
    pub fn parse(frame: &[u8]) -> Result<ArpMessage, DropReason> {
        let malformed = |_| DropReason::ArpMalformed;
        let payload = vlan::parse(frame)
            .and_then(|l2| frame.get(l2.len..))
            .ok_or(DropReason::ArpMalformed)?;
        let packet = ArpPacket::new_checked(payload).map_err(malformed)?;
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        }) = ArpRepr::parse(&packet)
        else {
            return Err(DropReason::ArpMalformed);
        };
        let known_operation = matches!(operation, ArpOperation::Request | ArpOperation::Reply);
        if !known_operation || !source_hardware_addr.is_unicast() {
            return Err(DropReason::ArpMalformed);
        }
        Ok(ArpMessage {
            operation,
            sender_mac: source_hardware_addr,
            sender_ip: source_protocol_addr,
            target_mac: target_hardware_addr,
            target_ip: target_protocol_addr,
        })
    }

    /// A request from us for `target_ip`; a gratuitous ARP (RFC 5227 §3
    /// announcement) when `target_ip` is our own address.
    pub fn request(our: &InterfaceAddress, target_ip: Ipv4Address) -> ArpMessage {
        ArpMessage {
            operation: ArpOperation::Request,
            sender_mac: our.mac,
            sender_ip: our.ip,
            target_mac: EthernetAddress([0; 6]),
            target_ip,
        }
    }

    /// Our reply to this request (RFC 826: swap the sender and target
    /// fields and put our addresses in the sender fields).
    pub fn reply(&self, our: &InterfaceAddress) -> ArpMessage {
        ArpMessage {
            operation: ArpOperation::Reply,
            sender_mac: our.mac,
            sender_ip: our.ip,
            target_mac: self.sender_mac,
            target_ip: self.sender_ip,
        }
    }

    /// The length of the frame [`write_frame`](Self::write_frame) writes
    /// for a port on `vlan`, before padding: [`ARP_FRAME_LEN`], 4 more
    /// tagged.
    pub const fn frame_len(vlan: Option<Vlan>) -> usize {
        vlan::header_len(vlan) + ARP_PACKET_LEN
    }

    /// Writes the message as an Ethernet frame, tagged for `vlan` if set,
    /// into the front of `buf` (requests broadcast, replies to the target)
    /// and returns its length, [`frame_len`](Self::frame_len).
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than that.
    pub fn write_frame(&self, buf: &mut [u8], vlan: Option<Vlan>) -> usize {
        let len = Self::frame_len(vlan);
        let dst_addr = if self.operation == ArpOperation::Request {
            EthernetAddress::BROADCAST
        } else {
            self.target_mac
        };
        let header_len =
            vlan::write_header(buf, self.sender_mac, dst_addr, vlan, EthernetProtocol::Arp);
        ArpRepr::EthernetIpv4 {
            operation: self.operation,
            source_hardware_addr: self.sender_mac,
            source_protocol_addr: self.sender_ip,
            target_hardware_addr: self.target_mac,
            target_protocol_addr: self.target_ip,
        }
        .emit(&mut ArpPacket::new_unchecked(&mut buf[header_len..len]));
        len
    }
}

/// What the cache knows about a neighbour asked for with
/// [`ArpCache::resolve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Resolved.
    Known(EthernetAddress),
    /// Unknown: a resolution has started and the caller sends the first
    /// request now.
    Request,
    /// A resolution is under way; [`ArpCache::poll`] asks for retries.
    Pending,
    /// The last resolution ran out of retries less than a retry interval ago.
    Failed,
    /// Unknown, and the table of pending resolutions is full.
    Full,
}

/// A resolved neighbour.
#[derive(Clone, Copy, Debug)]
struct Resolved {
    mac: EthernetAddress,
    expires: Instant,
}

/// A neighbour being resolved, or whose resolution failed recently.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// `requests` have been sent; the next is due at `next_request`.
    Resolving {
        requests: u32,
        next_request: Instant,
    },
    /// Out of retries; new resolutions wait until `until`.
    Failed { until: Instant },
}

impl Pending {
    fn deadline(&self) -> Instant {
        match *self {
            Pending::Resolving { next_request, .. } => next_request,
            Pending::Failed { until } => until,
        }
    }
}

/// The neighbour table: IPv4 address to MAC address, with expiry, and the
/// resolutions under way.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    resolved: HashMap<Ipv4Address, Resolved>,
    pending: HashMap<Ipv4Address, Pending>,
    /// No entry has a deadline before this (it may be earlier than the
    /// earliest deadline, never later).
    next_event: Option<Instant>,
}

impl ArpCache {
    /// An empty cache; durations longer than [`MAX_TIMER`] are cut to it.
    pub fn new(config: ArpConfig) -> Self {
        let config = ArpConfig {
            entry_lifetime: config.entry_lifetime.min(MAX_TIMER),
            retry_interval: config.retry_interval.min(MAX_TIMER),
            ..config
        };
        ArpCache {
            config,
            resolved: HashMap::new(),
            pending: HashMap::new(),
            next_event: None,
        }
    }

    /// The number of resolved neighbours (including any that expired since
    /// the last [`poll`](Self::poll)).
    pub fn len(&self) -> usize {
        self.resolved.len()
    }

    /// Whether no neighbour is resolved.
    pub fn is_empty(&self) -> bool {
        self.resolved.is_empty()
    }

    /// The number of resolutions under way or recently failed.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The MAC address of `ip`, as of the last [`poll`](Self::poll).
    pub fn get(&self, ip: Ipv4Address) -> Option<EthernetAddress> {
        self.resolved.get(&ip).map(|entry| entry.mac)
    }

    /// Looks `ip` up at `now`, starting a resolution if it is unknown or
    /// expired (and the last one did not fail within a retry interval).
    pub fn resolve(&mut self, now: Instant, ip: Ipv4Address) -> Lookup {
        if let Some(entry) = self.resolved.get(&ip) {
            if now < entry.expires {
                return Lookup::Known(entry.mac);
            }
            self.resolved.remove(&ip);
        }
        match self.pending.get(&ip) {
            Some(Pending::Resolving { .. }) => Lookup::Pending,
            Some(Pending::Failed { until }) if now < *until => Lookup::Failed,
            None if self.pending.len() >= self.config.capacity => Lookup::Full,
            _ => {
                let next_request = now + self.config.retry_interval;
                self.pending.insert(
                    ip,
                    Pending::Resolving {
                        requests: 1,
                        next_request,
                    },
                );
                self.schedule(next_request);
                Lookup::Request
            }
        }
    }

    /// RFC 826's merge: records `ip` at `mac` if the cache already has an
    /// entry for `ip` (resolved or pending), or if `create` (the packet
    /// targets our address). Returns whether it was recorded.
    pub fn merge(
        &mut self,
        now: Instant,
        ip: Ipv4Address,
        mac: EthernetAddress,
        create: bool,
    ) -> bool {
        let known = self.resolved.contains_key(&ip) || self.pending.remove(&ip).is_some();
        if !(known || create) || !(self.resolved.contains_key(&ip) || self.make_room(now)) {
            return false;
        }
        let expires = now + self.config.entry_lifetime;
        self.resolved.insert(ip, Resolved { mac, expires });
        self.schedule(expires);
        true
    }

    /// Runs the timers due at `now`: drops expired entries, calls
    /// `send_request` for every retry due, and fails resolutions out of
    /// retries. Returns the number that failed.
    pub fn poll(&mut self, now: Instant, mut send_request: impl FnMut(Ipv4Address)) -> u64 {
        if self.next_event.is_none_or(|next| now < next) {
            return 0;
        }
        let ArpConfig {
            retry_interval,
            max_retries,
            ..
        } = self.config;
        let mut failed = 0;
        self.resolved.retain(|_, entry| now < entry.expires);
        self.pending.retain(|&ip, pending| match *pending {
            Pending::Failed { until } => now < until,
            Pending::Resolving {
                requests,
                next_request,
            } if next_request <= now => {
                *pending = if requests <= max_retries {
                    send_request(ip);
                    Pending::Resolving {
                        requests: requests + 1,
                        next_request: now + retry_interval,
                    }
                } else {
                    failed += 1;
                    Pending::Failed {
                        until: now + retry_interval,
                    }
                };
                true
            }
            Pending::Resolving { .. } => true,
        });
        let resolved = self.resolved.values().map(|entry| entry.expires);
        self.next_event = resolved
            .chain(self.pending.values().map(Pending::deadline))
            .min();
        failed
    }

    /// When [`poll`](Self::poll) next has work (possibly earlier), or
    /// `None` when the cache has no timers.
    pub fn poll_at(&self) -> Option<Instant> {
        self.next_event
    }

    /// Makes room for one more resolved entry; false when the capacity is 0.
    fn make_room(&mut self, now: Instant) -> bool {
        if self.resolved.len() < self.config.capacity {
            return true;
        }
        self.resolved.retain(|_, entry| now < entry.expires);
        if self.resolved.len() < self.config.capacity {
            return true;
        }
        let oldest = self.resolved.iter().min_by_key(|(_, entry)| entry.expires);
        match oldest.map(|(&ip, _)| ip) {
            Some(ip) => self.resolved.remove(&ip).is_some(),
            None => false,
        }
    }

    /// Makes sure [`poll_at`](Self::poll_at) is no later than `deadline`.
    fn schedule(&mut self, deadline: Instant) {
        self.next_event = Some(self.next_event.map_or(deadline, |next| next.min(deadline)));
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::EthernetFrame;

    use super::*;
    use crate::net::test_frames::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn ip(last: u8) -> Ipv4Address {
        Ipv4Address::new(10, 0, 0, last)
    }

    fn mac(last: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 1, last])
    }

    fn cache(capacity: usize) -> ArpCache {
        ArpCache::new(ArpConfig {
            capacity,
            ..ArpConfig::default()
        })
    }

    #[test]
    fn merge_creates_only_when_asked_but_updates_any_known_entry() {
        let now = Instant::now();
        let mut cache = cache(8);
        assert!(!cache.merge(now, ip(2), mac(2), false));
        assert_eq!(cache.get(ip(2)), None);
        assert!(cache.merge(now, ip(2), mac(2), true));
        assert!(cache.merge(now, ip(2), mac(3), false));
        assert_eq!(cache.get(ip(2)), Some(mac(3)));
        // A pending resolution counts as known.
        assert_eq!(cache.resolve(now, ip(4)), Lookup::Request);
        assert!(cache.merge(now, ip(4), mac(4), false));
        assert_eq!(
            (cache.resolve(now, ip(4)), cache.pending_len()),
            (Lookup::Known(mac(4)), 0)
        );
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_oldest() {
        let start = Instant::now();
        let mut cache = cache(3);
        for i in 0..3 {
            assert!(cache.merge(start + i * SECOND, ip(10 + i as u8), mac(10), true));
        }
        assert!(cache.merge(start + 3 * SECOND, ip(20), mac(20), true));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(ip(10)), None, "the oldest is evicted");
        // 61 s later ip(11) and ip(12) have expired: both are purged.
        assert!(cache.merge(start + 62 * SECOND, ip(21), mac(21), true));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(ip(20)), Some(mac(20)));
    }

    #[test]
    fn a_zero_capacity_stores_nothing() {
        let now = Instant::now();
        let mut cache = cache(0);
        assert!(!cache.merge(now, ip(2), mac(2), true));
        assert_eq!(cache.resolve(now, ip(2)), Lookup::Full);
        assert!(cache.is_empty());
    }

    #[test]
    fn pending_resolutions_are_bounded() {
        let now = Instant::now();
        let mut cache = cache(2);
        assert_eq!(cache.resolve(now, ip(2)), Lookup::Request);
        assert_eq!(cache.resolve(now, ip(3)), Lookup::Request);
        assert_eq!(cache.resolve(now, ip(4)), Lookup::Full);
        assert_eq!(cache.resolve(now, ip(2)), Lookup::Pending);
    }

    #[test]
    fn retries_then_failure_then_a_new_resolution() {
        let start = Instant::now();
        let mut cache = cache(8);
        let mut requests = Vec::new();
        assert_eq!(cache.resolve(start, ip(2)), Lookup::Request);
        assert_eq!(cache.poll_at(), Some(start + SECOND));
        assert_eq!(cache.poll(start + SECOND / 2, |ip| requests.push(ip)), 0);
        assert!(requests.is_empty());
        for i in 1..=3 {
            assert_eq!(cache.poll(start + i * SECOND, |ip| requests.push(ip)), 0);
            assert_eq!(requests.len() as u32, i);
            assert_eq!(cache.resolve(start + i * SECOND, ip(2)), Lookup::Pending);
        }
        assert_eq!(cache.poll(start + 4 * SECOND, |ip| requests.push(ip)), 1);
        assert_eq!(requests, [ip(2); 3]);
        assert_eq!(cache.resolve(start + 4 * SECOND, ip(2)), Lookup::Failed);
        assert_eq!(cache.poll_at(), Some(start + 5 * SECOND));
        cache.poll(start + 5 * SECOND, |_| unreachable!());
        assert_eq!((cache.pending_len(), cache.poll_at()), (0, None));
        assert_eq!(cache.resolve(start + 5 * SECOND, ip(2)), Lookup::Request);
    }

    #[test]
    fn entries_expire_and_are_resolved_again() {
        let start = Instant::now();
        let mut cache = cache(8);
        cache.merge(start, ip(2), mac(2), true);
        assert_eq!(cache.poll_at(), Some(start + 60 * SECOND));
        let before = start + 59 * SECOND;
        assert_eq!(cache.resolve(before, ip(2)), Lookup::Known(mac(2)));
        cache.poll(start + 60 * SECOND, |_| unreachable!());
        assert_eq!(cache.get(ip(2)), None);
        assert_eq!(cache.resolve(start + 60 * SECOND, ip(2)), Lookup::Request);
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let now = Instant::now();
        let mut cache = ArpCache::new(ArpConfig {
            entry_lifetime: Duration::MAX,
            retry_interval: Duration::MAX,
            ..ArpConfig::default()
        });
        assert!(cache.merge(now, ip(2), mac(2), true));
        assert_eq!(cache.resolve(now, ip(3)), Lookup::Request);
        assert_eq!(cache.poll_at(), Some(now + MAX_TIMER));
    }

    #[test]
    fn messages_round_trip_through_smoltcp() {
        let our = our_address();
        let request = ArpMessage::request(&our, PEER_IP);
        let mut buf = [0; ARP_FRAME_LEN];
        assert_eq!(request.write_frame(&mut buf, None), ARP_FRAME_LEN);
        assert_eq!(ArpMessage::parse(&buf), Ok(request));
        let frame = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        let repr = ArpRepr::parse(&ArpPacket::new_checked(frame.payload()).unwrap()).unwrap();
        let ArpRepr::EthernetIpv4 {
            operation,
            target_protocol_addr,
            ..
        } = repr
        else {
            panic!()
        };
        assert_eq!(
            (operation, target_protocol_addr),
            (ArpOperation::Request, PEER_IP)
        );
        let reply = ArpMessage::parse(&arp_request(PEER_MAC, PEER_IP, OUR_IP))
            .unwrap()
            .reply(&our);
        reply.write_frame(&mut buf, None);
        let frame = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert_eq!((frame.src_addr(), frame.dst_addr()), (OUR_MAC, PEER_MAC));
    }

    #[test]
    fn messages_on_a_vlan_carry_its_tag() {
        let vlan = Some(Vlan::new(42, 5).unwrap());
        let request = ArpMessage::request(&our_address(), PEER_IP);
        let mut buf = [0; ARP_FRAME_LEN + 4];
        assert_eq!(ArpMessage::frame_len(vlan), 46);
        assert_eq!(request.write_frame(&mut buf, vlan), 46);
        assert_eq!(buf[12..18], [0x81, 0x00, 0xa0, 0x2a, 0x08, 0x06]);
        assert_eq!(ArpMessage::parse(&buf), Ok(request));
        // The same message by smoltcp, then tagged by the test's helper.
        let theirs = tagged(&arp_request(PEER_MAC, PEER_IP, OUR_IP), 42, 0);
        assert_eq!(ArpMessage::parse(&theirs).map(|m| m.sender_ip), Ok(PEER_IP));
        assert_eq!(ArpMessage::parse(&buf[..17]), Err(DropReason::ArpMalformed));
    }

    #[test]
    fn odd_arp_packets_are_malformed() {
        let valid = arp_request(PEER_MAC, PEER_IP, OUR_IP);
        let mutations: [(usize, u8); 4] = [
            (15, 6),    // hardware type 6 (IEEE 802)
            (17, 0xdd), // protocol type 0x08dd
            (21, 3),    // operation 3 (RARP request)
            (22, 0x01), // multicast sender hardware address
        ];
        for (offset, value) in mutations {
            let mut frame = valid.clone();
            frame[offset] = value;
            assert_eq!(ArpMessage::parse(&frame), Err(DropReason::ArpMalformed));
        }
        assert_eq!(
            ArpMessage::parse(&valid[..41]),
            Err(DropReason::ArpMalformed)
        );
    }
}
