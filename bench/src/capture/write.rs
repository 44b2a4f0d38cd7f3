//! Writing synthetic TCP connections as classic pcap files (Ethernet link
//! type) for tests and for tshark. Every header is emitted by `smoltcp::wire`
//! with real IPv4 and TCP checksums; MACs, ISNs and timestamps are fixed.

use std::io::{self, Write};
use std::net::SocketAddrV4;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpProtocol};
use smoltcp::wire::{Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber};

use super::read::CaptureError;

/// Capture length limit written in the pcap header.
const SNAPLEN: u32 = 65_535;
/// Largest payload [`PcapTcpWriter::send`] accepts: Ethernet, IPv4 and TCP
/// headers plus the payload must fit the pcap's snap length.
pub const MAX_SEGMENT_PAYLOAD: usize = SNAPLEN as usize - 14 - 20 - 20;
/// The client's initial sequence number unless [`PcapTcpWriter::with_isns`]
/// says otherwise.
const CLIENT_ISN: u32 = 0x1000_0000;
/// The server's initial sequence number.
const SERVER_ISN: u32 = 0x2000_0000;
/// Timestamp of the first frame (seconds since the epoch); frames are 1 ms apart.
const FIRST_SECOND: u64 = 1_700_000_000;

/// One end of the connection.
#[derive(Debug, Clone, Copy)]
struct End {
    addr: SocketAddrV4,
    mac: EthernetAddress,
    /// Next sequence number this end sends.
    next: u32,
}

/// Writes synthetic TCP connections between a client and a server, one
/// after another, to a pcap.
#[derive(Debug)]
pub struct PcapTcpWriter<W: Write> {
    out: PcapWriter<W>,
    /// Client, server.
    ends: [End; 2],
    frames: u64,
}

impl<W: Write> PcapTcpWriter<W> {
    /// Starts a little-endian, microsecond, Ethernet pcap on `writer`. The
    /// client's ISN is 0x10000000, the server's 0x20000000.
    pub fn new(
        writer: W,
        client: SocketAddrV4,
        server: SocketAddrV4,
    ) -> Result<Self, CaptureError> {
        let (datalink, endianness) = (DataLink::ETHERNET, Endianness::Little);
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink,
            endianness,
            ..Default::default()
        };
        let out = PcapWriter::with_header(writer, header)?;
        let mac = |last| EthernetAddress([0x02, 0, 0, 0, 0, last]);
        let client = End {
            addr: client,
            mac: mac(1),
            next: CLIENT_ISN,
        };
        let server = End {
            addr: server,
            mac: mac(2),
            next: SERVER_ISN,
        };
        Ok(PcapTcpWriter {
            out,
            ends: [client, server],
            frames: 0,
        })
    }

    /// Replaces the initial sequence numbers; call before [`Self::handshake`].
    pub fn with_isns(mut self, client_isn: u32, server_isn: u32) -> Self {
        self.ends[0].next = client_isn;
        self.ends[1].next = server_isn;
        self
    }

    /// SYN, SYN-ACK, ACK.
    pub fn handshake(&mut self) -> Result<(), CaptureError> {
        self.segment(true, TcpControl::Syn, false, &[])?;
        self.segment(false, TcpControl::Syn, true, &[])?;
        self.segment(true, TcpControl::None, true, &[])
    }

    /// One PSH|ACK segment carrying `payload` (at most [`MAX_SEGMENT_PAYLOAD`] bytes).
    pub fn send(&mut self, from_client: bool, payload: &[u8]) -> Result<(), CaptureError> {
        if payload.len() > MAX_SEGMENT_PAYLOAD {
            let msg = format!("payload of {} bytes does not fit one frame", payload.len());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg).into());
        }
        self.segment(from_client, TcpControl::Psh, true, payload)
    }

    /// Client FIN|ACK, server FIN|ACK, client ACK; returns the underlying writer.
    pub fn finish(mut self) -> Result<W, CaptureError> {
        self.close()?;
        Ok(self.out.into_writer())
    }

    /// Closes this connection as [`Self::finish`] does and goes on in the
    /// same file with a new one between `client` and `server`, with the
    /// default ISNs; call [`Self::handshake`] next.
    pub fn next_connection(
        &mut self,
        client: SocketAddrV4,
        server: SocketAddrV4,
    ) -> Result<(), CaptureError> {
        self.close()?;
        self.ends[0].addr = client;
        self.ends[0].next = CLIENT_ISN;
        self.ends[1].addr = server;
        self.ends[1].next = SERVER_ISN;
        Ok(())
    }

    /// Client FIN|ACK, server FIN|ACK, client ACK.
    fn close(&mut self) -> Result<(), CaptureError> {
        self.segment(true, TcpControl::Fin, true, &[])?;
        self.segment(false, TcpControl::Fin, true, &[])?;
        self.segment(true, TcpControl::None, true, &[])
    }

    /// Emits one segment with the current sequence numbers and advances them.
    fn segment(
        &mut self,
        from_client: bool,
        control: TcpControl,
        ack: bool,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        let (from, to) = if from_client { (0, 1) } else { (1, 0) };
        let (src, dst) = (self.ends[from], self.ends[to]);
        let tcp = TcpRepr {
            src_port: src.addr.port(),
            dst_port: dst.addr.port(),
            control,
            seq_number: TcpSeqNumber(src.next as i32),
            ack_number: ack.then_some(TcpSeqNumber(dst.next as i32)),
            window_len: 64_240,
            window_scale: None,
            max_seg_size: (control == TcpControl::Syn).then_some(1460),
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload,
        };
        let frame = build_frame(src, dst, &tcp);
        self.ends[from].next = src
            .next
            .wrapping_add((payload.len() + control.len()) as u32);
        let timestamp = Duration::from_secs(FIRST_SECOND) + Duration::from_millis(self.frames);
        self.frames += 1;
        let packet = PcapPacket::new(timestamp, frame.len() as u32, &frame);
        self.out.write_packet(&packet)?;
        Ok(())
    }
}

/// Ethernet + IPv4 (DF set, checksum filled) + TCP (checksum filled).
fn build_frame(src: End, dst: End, tcp: &TcpRepr<'_>) -> Vec<u8> {
    let ethertype = EthernetProtocol::Ipv4;
    let eth = EthernetRepr {
        src_addr: src.mac,
        dst_addr: dst.mac,
        ethertype,
    };
    let (src_ip, dst_ip) = (*src.addr.ip(), *dst.addr.ip());
    let (next_header, payload_len) = (IpProtocol::Tcp, tcp.buffer_len());
    let ip = Ipv4Repr {
        src_addr: src_ip,
        dst_addr: dst_ip,
        next_header,
        payload_len,
        hop_limit: 64,
    };
    let caps = ChecksumCapabilities::default();
    let mut frame = vec![0; eth.buffer_len() + ip.buffer_len() + tcp.buffer_len()];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
    let ip_bytes = &mut frame[eth.buffer_len()..];
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut *ip_bytes), &caps);
    let mut tcp_packet = TcpPacket::new_unchecked(&mut ip_bytes[ip.buffer_len()..]);
    tcp.emit(&mut tcp_packet, &src_ip.into(), &dst_ip.into(), &caps);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::read_capture_bytes;
    use pcap_file::pcap::PcapReader;

    fn connection(isns: (u32, u32), messages: &[(bool, &[u8])]) -> Vec<u8> {
        let (client, server) = (
            "10.1.0.1:40000".parse().unwrap(),
            "10.1.0.2:7000".parse().unwrap(),
        );
        let mut w = PcapTcpWriter::new(Vec::new(), client, server)
            .unwrap()
            .with_isns(isns.0, isns.1);
        w.handshake().unwrap();
        for (from_client, payload) in messages {
            w.send(*from_client, payload).unwrap();
        }
        assert!(w.send(true, &vec![0; MAX_SEGMENT_PAYLOAD + 1]).is_err());
        w.finish().unwrap()
    }

    #[test]
    fn round_trip_both_directions() {
        let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let messages: [(bool, &[u8]); 4] = [
            (true, b"request"),
            (false, b"reply"),
            (true, &big),
            (false, b"!"),
        ];
        for isns in [(0x1000_0000, 0x2000_0000), (u32::MAX - 3, u32::MAX)] {
            let streams = read_capture_bytes(&connection(isns, &messages)).unwrap();
            let (c2s, s2c) = (&streams[0], &streams[1]);
            assert_eq!((streams.len(), c2s.key.src.port()), (2, 40000));
            assert_eq!(c2s.bytes, [&b"request"[..], &big].concat());
            assert_eq!(s2c.bytes, b"reply!");
            assert_eq!((c2s.isn, s2c.isn), (Some(isns.0), Some(isns.1)));
            assert_eq!(c2s.fin_seq, Some(isns.0.wrapping_add(1 + 3007)));
            assert!(streams
                .iter()
                .all(|s| s.is_complete() && s.retransmitted_bytes == 0));
        }
    }

    #[test]
    fn frames_are_valid() {
        let pcap = connection((1, 2), &[(true, &[7; MAX_SEGMENT_PAYLOAD])]);
        let mut reader = PcapReader::new(&pcap[..]).unwrap();
        let mut flags = Vec::new();
        while let Some(packet) = reader.next_packet() {
            let packet = packet.unwrap();
            let ip = Ipv4Packet::new_checked(
                EthernetFrame::new_checked(&packet.data[..])
                    .unwrap()
                    .payload(),
            )
            .unwrap();
            assert!(ip.verify_checksum() && ip.dont_frag());
            let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(tcp.verify_checksum(&ip.src_addr().into(), &ip.dst_addr().into()));
            flags.push((tcp.syn(), tcp.ack(), tcp.psh(), tcp.fin()));
        }
        let (t, f) = (true, false);
        // (SYN, ACK, PSH, FIN): handshake, data, FIN|ACK both ways, last ACK.
        let expected = [
            (t, f, f, f),
            (t, t, f, f),
            (f, t, f, f),
            (f, t, t, f),
            (f, t, f, t),
            (f, t, f, t),
            (f, t, f, f),
        ];
        assert_eq!(flags, expected);
    }
}
