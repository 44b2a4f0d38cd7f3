//! Ethernet, ARP, IPv4 and ICMP below uwarp's TCP, sans-IO: frames are
//! byte slices (the caller copies them out of and into mbufs) and time is
//! passed in.
//!
//! - [`classify()`]: the stateless per-frame check the dataplane cores run
//!   on every received frame. Valid TCP segments for our address come out
//!   as [`Classified::Tcp`] with their [`FourTuple`], to route through the
//!   flow table; ARP and ICMP go to the control core; everything else is a
//!   [`DropReason`].
//! - [`Interface`]: the control core's side, which owns the ARP cache
//!   ([`arp`]: responder, resolver, timeouts, gratuitous ARP) and the ICMP
//!   echo responder and requester ([`icmp`]).
//! - [`kernel_neighbours`]: next hops from the kernel's neighbour table,
//!   instead of ARP, on an interface the kernel keeps.
//! - [`vlan`]: IEEE 802.1Q tags, read on receive and written on
//!   transmit by a port on a VLAN.
//! - [`ipv4`]: writing the Ethernet and IPv4 headers of outgoing frames.
//! - [`addr`]: our addresses, next-hop choice, the 4-tuple.
//! - [`counters`]: [`NetCounters`], per core, summed by the control core.
//! - [`rss`]: the Toeplitz hash, uwarp's symmetric key and redirection
//!   table, to predict the receive queue of a flow.
//! - `test_frames` (with the `testing` feature): frames for tests, built
//!   with smoltcp's emitters.
//!
//! The wire formats are smoltcp's ([`smoltcp::wire`]). Nothing on the
//! receive path panics or reads out of bounds whatever the frame holds, and
//! [`classify()`] does not allocate.

pub mod addr;
pub mod arp;
pub mod classify;
pub mod counters;
pub mod icmp;
pub mod interface;
pub mod ipv4;
pub mod kernel_neighbours;
pub mod rss;
pub mod vlan;

#[cfg(any(test, feature = "testing"))]
pub mod test_frames;

pub use addr::{parse_mac, FourTuple, InterfaceAddress};
pub use arp::{ArpCache, ArpConfig};
pub use classify::{classify, classify_chained, Classified, DropReason, RxChecksum, TcpMeta};
pub use counters::NetCounters;
pub use interface::{
    EchoReply, FrameSink, Interface, InterfaceConfig, Piece, Received, Resolution,
};
pub use ipv4::{write_headers, Ipv4Header, DEFAULT_TTL, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN};
pub use rss::RssSteering;
pub use vlan::Vlan;
