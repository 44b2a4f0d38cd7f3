//! The poll loop's flow: every segment received goes straight back out.

use std::time::Instant;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpProtocol, TcpControl, TcpPacket};
use uwarp_dataplane::net::{write_headers, FourTuple, InterfaceAddress, Ipv4Header, TcpMeta};
use uwarp_dataplane::runtime::{FlowHandler, TxBatch};
use uwarp_dataplane::Mbuf;
use uwarp_stack::tcp::{bare_header, Seq};

/// Sends each segment of its flow back out, counting them.
#[derive(Debug, Default)]
pub struct Forwarder {
    /// Segments forwarded so far.
    pub forwarded: u64,
}

impl FlowHandler for Forwarder {
    type Flow = ();

    fn on_packet(&mut self, _: Instant, _: &mut (), _: &TcpMeta, packet: Mbuf, tx: &mut TxBatch) {
        if tx.push(packet) {
            self.forwarded += 1;
        }
    }
}

/// A minimal-size frame of `tuple`'s flow addressed to `address` itself,
/// with valid IPv4 and TCP checksums, so that it classifies as a segment
/// of the flow wherever it goes round.
pub fn segment_frame(address: &InterfaceAddress, tuple: &FourTuple) -> Vec<u8> {
    let mut tcp = bare_header(
        tuple.remote_port,
        tuple.local_port,
        TcpControl::None,
        Seq(1),
        Some(Seq(1)),
        65535,
    );
    tcp.payload = b"uwarp";
    let header = Ipv4Header {
        src_mac: address.mac,
        dst_mac: address.mac,
        src: tuple.remote_ip,
        dst: tuple.local_ip,
        protocol: IpProtocol::Tcp,
        ttl: 64,
        ident: 0,
        vlan: None,
    };
    let mut frame = vec![0u8; 60.max(34 + tcp.buffer_len())];
    let offset = write_headers(&mut frame, &header, tcp.buffer_len(), false);
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut frame[offset..offset + tcp.buffer_len()]),
        &tuple.remote_ip.into(),
        &tuple.local_ip.into(),
        &ChecksumCapabilities::default(),
    );
    frame
}
