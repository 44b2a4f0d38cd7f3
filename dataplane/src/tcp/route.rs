//! Where a connection's segments go: the Ethernet and IPv4 headers (RFC
//! 894 with the IEEE 802.1Q tag of the interface's VLAN, if any; RFC 791)
//! in front of every TCP segment it sends, fixed when the connection is
//! set up so the dataplane core needs no neighbour lookup.

use std::ops::Range;

use crate::extbuf::ExternalRegion;
use crate::net::ipv4::MIN_FRAME_LEN;
use crate::net::{write_headers, FrameSink, InterfaceAddress, Ipv4Header, Piece, DEFAULT_TTL};
use smoltcp::wire::{EthernetAddress, IpProtocol, Ipv4Address};
use uwarp_stack::tcp::Segment;

use super::frame_memory::FrameMemory;

/// The smallest payload sent by reference rather than copied: below it,
/// copying costs less than the second mbuf and the shared reference count
/// (an atomic operation on each side).
pub const MIN_REFERENCED_PAYLOAD: usize = 512;

/// The addressing of one connection's frames.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    header: Ipv4Header,
}

impl Route {
    /// Frames from the interface `from` (its MAC and IPv4 addresses,
    /// tagged for its VLAN if it is on one) to `dst` through the next hop
    /// `dst_mac`.
    pub fn new(from: &InterfaceAddress, dst_mac: EthernetAddress, dst: Ipv4Address) -> Self {
        Route {
            header: Ipv4Header {
                src_mac: from.mac,
                dst_mac,
                src: from.ip,
                dst,
                protocol: IpProtocol::Tcp,
                ttl: DEFAULT_TTL,
                // DF is set on every datagram, so the identification field
                // has no use (RFC 6864 section 4.1).
                ident: 0,
                vlan: from.vlan,
            },
        }
    }

    /// Writes `segment`, a segment of the connection whose send-side
    /// memory `memory` holds, into `sink`; false when the sink had no
    /// room (TCP retransmits).
    ///
    /// Where the sink can send it so, a payload goes by reference when it
    /// holds one run of at least [`MIN_REFERENCED_PAYLOAD`] octets: the
    /// run in registered memory that zero-copy transmit queued, when the
    /// payload holds more than the run (the ring's octets before it
    /// copied behind the headers, those after it into a last segment),
    /// or else, when the registered memory holds none of it, the whole
    /// payload where it lies in the send queue's ring, if it lies there
    /// in one piece. Otherwise the frame is
    /// [`transmit`](Self::transmit)'s copy.
    pub fn transmit_from(
        &self,
        segment: &Segment<'_>,
        memory: &mut FrameMemory,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let payload = &segment.payload;
        if !sink.sends_by_reference() || payload.len() < MIN_REFERENCED_PAYLOAD {
            return self.transmit(segment, sink);
        }
        let mut runs = payload.references.iter();
        let referenced = match (runs.next(), runs.next()) {
            // A run that is the whole payload (a segment cut inside it) is
            // copied: its frame would be the headers chained to the run
            // alone, which a memory link's receiver reads where it lies
            // for as long as it handles the segment, not in one pass.
            (Some((span, slice, offset)), None)
                if span.len() >= MIN_REFERENCED_PAYLOAD && span.len() < payload.len() =>
            {
                let start = slice.offset() + offset;
                let region = memory.registered(slice.buffer());
                self.transmit_referencing(segment, region, start, span, sink)
            }
            (None, _) if payload.second.is_empty() => memory.send_ring().and_then(|ring| {
                let start = ring.offset_of(payload.first)?;
                self.transmit_referencing(segment, ring, start, 0..payload.len(), sink)
            }),
            _ => None,
        };
        referenced.unwrap_or_else(|| self.transmit(segment, sink))
    }

    /// Sends `segment` with the octets at `span` of its payload read from
    /// `region`, starting at `start` in it, and the rest of the payload
    /// copied from the ring around them; `None` when the sink cannot.
    fn transmit_referencing(
        &self,
        segment: &Segment<'_>,
        region: &ExternalRegion,
        start: usize,
        span: Range<usize>,
        sink: &mut dyn FrameSink,
    ) -> Option<bool> {
        let payload = &segment.payload;
        let tcp_len = segment.len();
        let tcp_header_len = segment.header_len();
        let ip_headers_len = self.header.headers_len();
        let headers_len = ip_headers_len + tcp_header_len + span.start;
        let trailer = span.end..payload.len();
        let range = start..start + span.len();
        let mut fill = |piece, out: &mut [u8]| match piece {
            Piece::Head => {
                write_headers(out, &self.header, tcp_len, true);
                let tcp = &mut out[ip_headers_len..];
                // The frame is exactly as long as the headers and the
                // payload's octets before the referenced ones.
                let _ = segment.emit_header_for_checksum_offload(tcp);
                payload.copy_ring_part(0..span.start, &mut tcp[tcp_header_len..]);
            }
            Piece::Trailer => payload.copy_ring_part(trailer.clone(), out),
        };
        sink.send_tcp_frame_referencing(headers_len, region, range, trailer.len(), &mut fill)
    }

    /// Writes `segment` as one frame into `sink` (padded to the Ethernet
    /// minimum), its payload copied; false when the sink had no room (TCP
    /// retransmits).
    pub fn transmit(&self, segment: &Segment<'_>, sink: &mut dyn FrameSink) -> bool {
        let tcp_len = segment.len();
        let headers_len = self.header.headers_len();
        let frame_len = (headers_len + tcp_len).max(MIN_FRAME_LEN);
        sink.send_tcp_frame(frame_len, &mut |frame, offloaded| {
            write_headers(frame, &self.header, tcp_len, offloaded);
            let end = headers_len + tcp_len;
            let tcp = &mut frame[headers_len..end];
            // The frame is exactly large enough for the segment.
            let _ = if offloaded {
                segment.emit_for_checksum_offload(tcp)
            } else {
                segment.emit(tcp)
            };
            // Only frames under the Ethernet minimum have padding (a
            // call to memset costs a data segment more than the check).
            if end < frame.len() {
                frame[end..].fill(0);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::{Ipv4Packet, TcpPacket};
    use uwarp_stack::tcp::{Config, Connection, Endpoint, Instant, Seq};

    use super::*;
    use crate::net::test_frames::{our_address, OUR_IP, PEER_IP, PEER_MAC};
    use crate::net::Vlan;

    #[test]
    fn a_route_on_a_vlan_tags_its_segments_and_keeps_the_ip_mtu() {
        let mut from = our_address();
        from.vlan = Some(Vlan::new(42, 3).unwrap());
        let route = Route::new(&from, PEER_MAC, PEER_IP);
        let (near, far) = (Endpoint::new(OUR_IP, 40000), Endpoint::new(PEER_IP, 5000));
        let now = Instant::from_micros(0);
        let mut conn = Connection::connect(Config::default(), near, far, Seq(7), now);
        let syn = conn.poll_transmit(now).unwrap();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        assert!(route.transmit(&syn, &mut frames));
        let frame = &frames[0];
        assert_eq!(frame[..6], PEER_MAC.0);
        assert_eq!(frame[12..18], [0x81, 0x00, 0x60, 0x2a, 0x08, 0x00]);
        let ip = Ipv4Packet::new_checked(&frame[18..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(usize::from(ip.total_len()), 20 + syn.len());
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(tcp.syn() && tcp.verify_checksum(&OUR_IP.into(), &PEER_IP.into()));
        assert_eq!(frame.len(), (38 + syn.len()).max(MIN_FRAME_LEN));
    }
}
