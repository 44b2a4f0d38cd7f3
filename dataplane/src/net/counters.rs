//! Counters of the L2/L3 layer: frames received, drops by reason (the
//! "silently discard" cases of RFC 826, RFC 791, RFC 792, RFC 1122 §3.2
//! and RFC 9293 §3.1, made visible), ARP and ICMP events, transmit
//! failures.
//!
//! Each dataplane core keeps its own [`NetCounters`] for [`classify`]
//! drops; the control core's [`Interface`] keeps one too, and the
//! per-core sets are summed with [`NetCounters::add`].
//!
//! [`classify`]: super::classify()
//! [`Interface`]: super::Interface

use super::classify::DropReason;

/// Declares [`NetCounters`] with one field per drop reason (mapped from
/// [`DropReason`] by `record_drop` and `drop_count`) and one per event,
/// and sums them all in `add`.
macro_rules! net_counters {
    (
        drops { $($(#[$drop_doc:meta])* $reason:ident => $drop:ident,)* }
        events { $($(#[$event_doc:meta])* $event:ident,)* }
    ) => {
        /// Counters of the L2/L3 layer; every field counts from zero.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct NetCounters {
            /// Frames received (classified).
            pub rx_frames: u64,
            /// Frames dropped, for any reason.
            pub dropped: u64,
            $($(#[$drop_doc])* pub $drop: u64,)*
            $($(#[$event_doc])* pub $event: u64,)*
        }

        impl NetCounters {
            /// Counts a drop, in `dropped` and in the reason's own counter.
            pub fn record_drop(&mut self, reason: DropReason) {
                self.dropped += 1;
                match reason {
                    $(DropReason::$reason => self.$drop += 1,)*
                }
            }

            /// The number of drops for `reason`.
            pub fn drop_count(&self, reason: DropReason) -> u64 {
                match reason {
                    $(DropReason::$reason => self.$drop,)*
                }
            }

            /// Adds every counter of `other` to ours (to sum the counters
            /// of several cores).
            pub fn add(&mut self, other: &NetCounters) {
                self.rx_frames += other.rx_frames;
                self.dropped += other.dropped;
                $(self.$drop += other.$drop;)*
                $(self.$event += other.$event;)*
            }
        }
    };
}

net_counters! {
    drops {
        /// Drops for [`DropReason::Runt`].
        Runt => runt,
        /// Drops for [`DropReason::NotOurMac`].
        NotOurMac => not_our_mac,
        /// Drops for [`DropReason::NotOurVlan`].
        NotOurVlan => not_our_vlan,
        /// Drops for [`DropReason::UnknownEtherType`].
        UnknownEtherType => unknown_ether_type,
        /// Drops for [`DropReason::Ipv4BadVersion`].
        Ipv4BadVersion => ipv4_bad_version,
        /// Drops for [`DropReason::Ipv4BadHeaderLength`].
        Ipv4BadHeaderLength => ipv4_bad_header_length,
        /// Drops for [`DropReason::Ipv4BadTotalLength`].
        Ipv4BadTotalLength => ipv4_bad_total_length,
        /// Drops for [`DropReason::Ipv4BadChecksum`].
        Ipv4BadChecksum => ipv4_bad_checksum,
        /// Drops for [`DropReason::Ipv4Fragment`].
        Ipv4Fragment => ipv4_fragment,
        /// Drops for [`DropReason::Ipv4NotOurAddress`].
        Ipv4NotOurAddress => ipv4_not_our_address,
        /// Drops for [`DropReason::Ipv4SourceInvalid`].
        Ipv4SourceInvalid => ipv4_source_invalid,
        /// Drops for [`DropReason::BroadcastNotArp`].
        BroadcastNotArp => broadcast_not_arp,
        /// Drops for [`DropReason::UnknownProtocol`].
        UnknownProtocol => unknown_protocol,
        /// Drops for [`DropReason::TcpTruncated`].
        TcpTruncated => tcp_truncated,
        /// Drops for [`DropReason::TcpBadChecksum`].
        TcpBadChecksum => tcp_bad_checksum,
        /// Drops for [`DropReason::TcpBadPort`].
        TcpBadPort => tcp_bad_port,
        /// Drops for [`DropReason::ArpMalformed`].
        ArpMalformed => arp_malformed,
        /// Drops for [`DropReason::ArpNotForUs`].
        ArpNotForUs => arp_not_for_us,
        /// Drops for [`DropReason::IcmpMalformed`].
        IcmpMalformed => icmp_malformed,
        /// Drops for [`DropReason::IcmpBadChecksum`].
        IcmpBadChecksum => icmp_bad_checksum,
        /// Drops for [`DropReason::IcmpUnsupported`].
        IcmpUnsupported => icmp_unsupported,
    }
    events {
        /// Valid TCP segments for our address handed to the caller.
        tcp_segments,
        /// ARP requests for our address answered.
        arp_requests_answered,
        /// ARP replies accepted (for us, or about a known neighbour).
        arp_replies_received,
        /// ARP requests sent to resolve a neighbour (first tries and retries).
        arp_requests_sent,
        /// Gratuitous ARP announcements sent.
        gratuitous_arps_sent,
        /// Resolutions that ran out of retries.
        arp_resolutions_failed,
        /// Resolutions refused because the table of pending ones was full.
        arp_pending_full,
        /// Questions to the kernel's neighbour table that failed (a port
        /// beside the kernel: `InterfaceConfig::kernel_neighbours`).
        kernel_neighbour_errors,
        /// ICMP echo requests answered.
        icmp_echo_replied,
        /// ICMP echo replies received.
        icmp_echo_replies_received,
        /// ICMP echo requests sent.
        icmp_echo_requests_sent,
        /// Frames not sent because no transmit buffer was available.
        tx_no_buffer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter() {
        let mut counters = NetCounters::default();
        for (i, reason) in DropReason::ALL.into_iter().enumerate() {
            for _ in 0..=i {
                counters.record_drop(reason);
            }
        }
        for (i, reason) in DropReason::ALL.into_iter().enumerate() {
            assert_eq!(counters.drop_count(reason), i as u64 + 1, "{reason:?}");
        }
        let n = DropReason::ALL.len() as u64;
        assert_eq!(counters.dropped, n * (n + 1) / 2);
    }

    #[test]
    fn add_sums_every_field() {
        let mut a = NetCounters {
            rx_frames: 1,
            tx_no_buffer: 2,
            ..Default::default()
        };
        a.record_drop(DropReason::TcpBadPort);
        let mut b = a.clone();
        b.icmp_echo_replied = 5;
        b.add(&a);
        assert_eq!(b.rx_frames, 2);
        assert_eq!(b.tx_no_buffer, 4);
        assert_eq!(b.dropped, 2);
        assert_eq!(b.tcp_bad_port, 2);
        assert_eq!(b.icmp_echo_replied, 5);
    }
}
