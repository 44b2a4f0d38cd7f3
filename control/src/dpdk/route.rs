//! Where a connection's segments go: the Ethernet and IPv4 headers (RFC
//! 894, RFC 791) in front of every TCP segment it sends, fixed when the
//! connection is set up so the dataplane core needs no neighbour lookup.

use smoltcp::wire::{EthernetAddress, IpProtocol, Ipv4Address};
use uwarp_dataplane::extbuf::ExternalRegion;
use uwarp_dataplane::net::ipv4::{HEADERS_LEN, MIN_FRAME_LEN};
use uwarp_dataplane::net::{write_headers, FrameSink, Ipv4Header, DEFAULT_TTL};
use uwarp_stack::tcp::Segment;

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
    /// Frames from `src_mac`/`src` to `dst` through the next hop `dst_mac`.
    pub fn new(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src: Ipv4Address,
        dst: Ipv4Address,
    ) -> Self {
        Route {
            header: Ipv4Header {
                src_mac,
                dst_mac,
                src,
                dst,
                protocol: IpProtocol::Tcp,
                ttl: DEFAULT_TTL,
                // DF is set on every datagram, so the identification field
                // has no use (RFC 6864 section 4.1).
                ident: 0,
            },
        }
    }

    /// Writes `segment`, a segment of the connection whose send queue's
    /// memory `send_memory` covers ([`Connection::send_memory`]), into
    /// `sink`; false when the sink had no room (TCP retransmits).
    ///
    /// A payload of at least [`MIN_REFERENCED_PAYLOAD`] octets, contiguous
    /// in that memory (none of it held in registered memory instead), goes
    /// by reference where the sink can send it so;
    /// otherwise the frame is [`transmit`](Self::transmit)'s copy.
    ///
    /// [`Connection::send_memory`]: uwarp_stack::tcp::Connection::send_memory
    pub fn transmit_from(
        &self,
        segment: &Segment<'_>,
        send_memory: &ExternalRegion,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let payload = segment.payload;
        let in_ring = payload.second.is_empty() && payload.references.is_empty();
        if in_ring && payload.first.len() >= MIN_REFERENCED_PAYLOAD {
            let tcp_len = segment.len();
            let headers_len = HEADERS_LEN + segment.header_len();
            let referenced = sink.send_tcp_frame_referencing(
                headers_len,
                payload.first,
                send_memory,
                &mut |frame| {
                    write_headers(frame, &self.header, tcp_len, true);
                    // The frame is exactly as long as the headers.
                    let _ = segment.emit_header_for_checksum_offload(&mut frame[HEADERS_LEN..]);
                },
            );
            if let Some(queued) = referenced {
                return queued;
            }
        }
        self.transmit(segment, sink)
    }

    /// Writes `segment` as one frame into `sink` (padded to the Ethernet
    /// minimum), its payload copied; false when the sink had no room (TCP
    /// retransmits).
    pub fn transmit(&self, segment: &Segment<'_>, sink: &mut dyn FrameSink) -> bool {
        let tcp_len = segment.len();
        let frame_len = (HEADERS_LEN + tcp_len).max(MIN_FRAME_LEN);
        sink.send_tcp_frame(frame_len, &mut |frame, offloaded| {
            write_headers(frame, &self.header, tcp_len, offloaded);
            let end = HEADERS_LEN + tcp_len;
            let tcp = &mut frame[HEADERS_LEN..end];
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
