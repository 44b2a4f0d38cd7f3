//! Reading pcap and pcapng files and decoding their frames down to TCP.
//!
//! Link types: Ethernet (1), BSD loopback NULL (0) and LOOP (108), raw IP (12,
//! 101, 228, 229), Linux cooked SLL (113) and SLL2 (276). Every Ethernet, IP and
//! TCP header goes through `smoltcp::wire`; checksums are not verified, because
//! loopback captures carry offloaded (unfilled) checksums.

use std::fmt;
use std::fs::File;
use std::io::{self, Cursor, Read};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::PcapError;
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv6ExtHeader, Ipv6Packet, TcpPacket,
};

use super::reassembly::{FlowKey, Reassembler, TcpSegment, TcpStream};

/// Why a capture could not be read.
#[derive(Debug)]
pub enum CaptureError {
    /// The file could not be read.
    Io(io::Error),
    /// The file is not a well-formed pcap/pcapng file, or a stream is too large.
    Format(String),
    /// The capture's link type is not one this decoder handles.
    UnsupportedLinkType(u32),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io(e) => write!(f, "capture I/O error: {e}"),
            CaptureError::Format(msg) => write!(f, "malformed capture: {msg}"),
            CaptureError::UnsupportedLinkType(t) => write!(f, "unsupported link type {t}"),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::Io(e)
    }
}

impl From<PcapError> for CaptureError {
    fn from(e: PcapError) -> Self {
        match e {
            PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                CaptureError::Format("truncated capture file".into())
            }
            PcapError::IoError(e) => CaptureError::Io(e),
            other => CaptureError::Format(other.to_string()),
        }
    }
}

/// What happened to the frames of a capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Packet records in the file.
    pub frames: usize,
    /// Frames that were decoded as TCP and used.
    pub tcp: usize,
    /// Frames skipped: not IP, or IP but not TCP.
    pub non_tcp: usize,
    /// Frames skipped: IPv4 or IPv6 fragments.
    pub fragments: usize,
    /// Frames skipped: captured length shorter than the original length.
    pub truncated: usize,
    /// Frames skipped: a header did not parse.
    pub malformed: usize,
}

/// The TCP streams of a capture and what was skipped on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// Streams sorted by `(first_frame, key)`.
    pub streams: Vec<TcpStream>,
    /// Frame counts.
    pub stats: CaptureStats,
}

/// Reads a pcap or pcapng file (detected by magic number) into TCP streams.
pub fn read_capture(path: &Path) -> Result<Vec<TcpStream>, CaptureError> {
    Ok(read_capture_from(File::open(path)?)?.streams)
}

/// Reads a pcap or pcapng image held in memory into TCP streams.
pub fn read_capture_bytes(data: &[u8]) -> Result<Vec<TcpStream>, CaptureError> {
    Ok(read_capture_from(data)?.streams)
}

/// Reads a pcap or pcapng stream (detected by magic number): streams and stats.
pub fn read_capture_from<R: Read>(mut reader: R) -> Result<Capture, CaptureError> {
    let mut magic = [0u8; 4];
    reader.read_exact(&mut magic).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => CaptureError::Format("file shorter than a magic".into()),
        _ => CaptureError::Io(e),
    })?;
    let whole = Cursor::new(magic).chain(reader);
    let mut sink = FrameSink::default();
    match u32::from_be_bytes(magic) {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => read_pcap(whole, &mut sink)?,
        0x0a0d_0d0a => read_pcapng(whole, &mut sink)?,
        other => return Err(CaptureError::Format(format!("unknown magic {other:#010x}"))),
    }
    let streams = sink.reassembler.finish();
    Ok(Capture {
        streams,
        stats: sink.stats,
    })
}

fn read_pcap<R: Read>(reader: R, sink: &mut FrameSink) -> Result<(), CaptureError> {
    let mut pcap = PcapReader::new(reader)?;
    let link = u32::from(pcap.header().datalink);
    check_link(link)?;
    while let Some(packet) = pcap.next_raw_packet() {
        let packet = packet?;
        sink.frame(link, &packet.data, packet.orig_len)?;
    }
    Ok(())
}

fn read_pcapng<R: Read>(reader: R, sink: &mut FrameSink) -> Result<(), CaptureError> {
    let mut pcapng = PcapNgReader::new(reader)?;
    let mut links: Vec<u32> = Vec::new();
    while let Some(block) = pcapng.next_block() {
        let (interface, data, orig_len) = match block? {
            Block::SectionHeader(_) => {
                links.clear();
                continue;
            }
            Block::InterfaceDescription(idb) => {
                links.push(u32::from(idb.linktype));
                continue;
            }
            Block::EnhancedPacket(p) => (p.interface_id, p.data, p.original_len),
            Block::Packet(p) => (u32::from(p.interface_id), p.data, p.original_len),
            Block::SimplePacket(p) => (0, p.data, p.original_len),
            _ => continue,
        };
        let link = *links.get(interface as usize).ok_or_else(|| {
            CaptureError::Format(format!("packet on undeclared interface {interface}"))
        })?;
        check_link(link)?;
        sink.frame(link, &data, orig_len)?;
    }
    Ok(())
}

/// Accepts the link types [`decode_frame`] understands.
fn check_link(link: u32) -> Result<(), CaptureError> {
    match link {
        0 | 1 | 12 | 101 | 108 | 113 | 228 | 229 | 276 => Ok(()),
        other => Err(CaptureError::UnsupportedLinkType(other)),
    }
}

/// The fate of one frame.
enum Decoded<'a> {
    Tcp(TcpSegment<'a>),
    NonTcp,
    Fragment,
}

/// Counts frames and feeds their TCP segments to the reassembler.
#[derive(Default)]
struct FrameSink {
    reassembler: Reassembler,
    stats: CaptureStats,
}

impl FrameSink {
    fn frame(&mut self, link: u32, data: &[u8], orig_len: u32) -> Result<(), CaptureError> {
        let index = self.stats.frames;
        self.stats.frames += 1;
        // SimplePacket blocks carry padding after the frame: trim to the original length.
        let data = data.get(..orig_len as usize).unwrap_or(data);
        if data.len() < orig_len as usize {
            self.stats.truncated += 1;
            return Ok(());
        }
        match decode_frame(link, index, data) {
            Some(Decoded::Tcp(seg)) => {
                self.stats.tcp += 1;
                self.reassembler.push(&seg)?;
            }
            Some(Decoded::NonTcp) => self.stats.non_tcp += 1,
            Some(Decoded::Fragment) => self.stats.fragments += 1,
            None => self.stats.malformed += 1,
        }
        Ok(())
    }
}

/// Decodes one frame of link type `link` down to TCP; `None`: malformed.
fn decode_frame(link: u32, frame: usize, data: &[u8]) -> Option<Decoded<'_>> {
    let ethertype_at = |at: usize| {
        let raw = data.get(at..at + 2)?;
        Some(EthernetProtocol::from(u16::from_be_bytes([raw[0], raw[1]])))
    };
    let (ethertype, ip) = match link {
        1 => {
            let eth = EthernetFrame::new_checked(data).ok()?;
            (eth.ethertype(), eth.payload())
        }
        113 => (ethertype_at(14)?, data.get(16..)?),
        276 => (ethertype_at(0)?, data.get(20..)?),
        // Loopback: a 4-byte address family whose byte order and values vary by OS.
        0 | 108 => return decode_ip(frame, data.get(4..)?),
        _ => return decode_ip(frame, data),
    };
    let (ethertype, ip) = untagged(ethertype, ip)?;
    match ethertype {
        EthernetProtocol::Ipv4 => decode_ipv4(frame, ip),
        EthernetProtocol::Ipv6 => decode_ipv6(frame, ip),
        _ => Some(Decoded::NonTcp),
    }
}

/// The EtherType and payload under the 802.1Q VLAN tags (0x8100, and
/// 802.1ad's outer 0x88a8) that may follow the link header: each tag is
/// two octets of priority and VLAN ID, then the EtherType of what it
/// carries. At most two tags (QinQ); `None` when a tag is cut short.
fn untagged(mut ethertype: EthernetProtocol, mut rest: &[u8]) -> Option<(EthernetProtocol, &[u8])> {
    for _ in 0..2 {
        if !matches!(u16::from(ethertype), 0x8100 | 0x88a8) {
            break;
        }
        let inner = rest.get(2..4)?;
        ethertype = EthernetProtocol::from(u16::from_be_bytes([inner[0], inner[1]]));
        rest = &rest[4..];
    }
    Some((ethertype, rest))
}

/// An IP packet whose version the link layer does not name.
fn decode_ip(frame: usize, data: &[u8]) -> Option<Decoded<'_>> {
    match Ipv4Packet::new_checked(data) {
        Ok(ip) if ip.version() == 4 => decode_ipv4(frame, data),
        _ => decode_ipv6(frame, data),
    }
}

fn decode_ipv4(frame: usize, data: &[u8]) -> Option<Decoded<'_>> {
    let ip = Ipv4Packet::new_checked(data)
        .ok()
        .filter(|ip| ip.version() == 4)?;
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Some(Decoded::Fragment);
    }
    if ip.next_header() != IpProtocol::Tcp {
        return Some(Decoded::NonTcp);
    }
    let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
    decode_tcp(frame, src, dst, ip.payload())
}

fn decode_ipv6(frame: usize, data: &[u8]) -> Option<Decoded<'_>> {
    let ip = Ipv6Packet::new_checked(data)
        .ok()
        .filter(|ip| ip.version() == 6)?;
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    let (mut next, mut rest) = (ip.next_header(), ip.payload());
    // Follow at most 8 extension headers.
    for _ in 0..8 {
        match next {
            IpProtocol::Tcp => return decode_tcp(frame, src, dst, rest),
            IpProtocol::Ipv6Frag => return Some(Decoded::Fragment),
            IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                let ext = Ipv6ExtHeader::new_checked(rest).ok()?;
                next = ext.next_header();
                // The extension payload follows its next-header and length bytes.
                rest = rest.get(2 + ext.payload().len()..)?;
            }
            _ => return Some(Decoded::NonTcp),
        }
    }
    None
}

fn decode_tcp(frame: usize, src: IpAddr, dst: IpAddr, data: &[u8]) -> Option<Decoded<'_>> {
    let tcp = TcpPacket::new_checked(data).ok()?;
    let key = FlowKey::new(
        SocketAddr::new(src, tcp.src_port()),
        SocketAddr::new(dst, tcp.dst_port()),
    );
    // smoltcp keeps sequence numbers signed; the cast gives back the wire value.
    let seq = tcp.seq_number().0 as u32;
    let (syn, fin, rst, payload) = (tcp.syn(), tcp.fin(), tcp.rst(), tcp.payload());
    Some(Decoded::Tcp(TcpSegment {
        frame,
        key,
        seq,
        syn,
        fin,
        rst,
        payload,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::PcapTcpWriter;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::DataLink;
    use smoltcp::wire::Ipv6Repr;
    use std::time::Duration;

    /// The Ethernet frames of a connection whose client sends "hello world".
    fn ethernet_frames() -> Vec<Vec<u8>> {
        let client = "192.0.2.1:4000".parse().unwrap();
        let mut w =
            PcapTcpWriter::new(Vec::new(), client, "192.0.2.2:80".parse().unwrap()).unwrap();
        w.handshake().unwrap();
        w.send(true, b"hello ").unwrap();
        w.send(true, b"world").unwrap();
        let pcap = w.finish().unwrap();
        let mut reader = PcapReader::new(&pcap[..]).unwrap();
        let mut frames = Vec::new();
        while let Some(packet) = reader.next_packet() {
            frames.push(packet.unwrap().data.to_vec());
        }
        frames
    }

    fn ipv4_packets() -> Vec<Vec<u8>> {
        let frames = ethernet_frames();
        let eth = frames
            .iter()
            .map(|f| EthernetFrame::new_checked(&f[..]).unwrap());
        eth.map(|e| e.payload().to_vec()).collect()
    }

    /// The same TCP segment in an IPv6 packet (header emitted by smoltcp).
    fn to_ipv6(v4: &[u8]) -> Vec<u8> {
        let ip = Ipv4Packet::new_checked(v4).unwrap();
        let repr = Ipv6Repr {
            src_addr: ip.src_addr().to_ipv6_mapped(),
            dst_addr: ip.dst_addr().to_ipv6_mapped(),
            next_header: IpProtocol::Tcp,
            payload_len: ip.payload().len(),
            hop_limit: 64,
        };
        let mut buf = vec![0; repr.buffer_len()];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf));
        [&buf, ip.payload()].concat()
    }

    /// A classic pcap with link type `link`; frames are `(data, original length)`.
    fn pcap(link: u32, frames: &[(Vec<u8>, usize)]) -> Vec<u8> {
        let header = PcapHeader {
            datalink: DataLink::from(link),
            ..Default::default()
        };
        let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
        for (data, orig) in frames {
            w.write_packet(&PcapPacket::new(Duration::ZERO, *orig as u32, data))
                .unwrap();
        }
        w.into_writer()
    }

    fn whole(frames: Vec<Vec<u8>>) -> Vec<(Vec<u8>, usize)> {
        frames.into_iter().map(|f| (f.clone(), f.len())).collect()
    }

    fn client_bytes(capture: &[u8]) -> Vec<u8> {
        let streams = read_capture_bytes(capture).unwrap();
        assert_eq!(streams.len(), 2);
        streams[0].bytes.clone()
    }

    #[test]
    fn every_link_type() {
        let v4 = ipv4_packets();
        let v6: Vec<Vec<u8>> = v4.iter().map(|p| to_ipv6(p)).collect();
        let wrap = |v: &[Vec<u8>], head: &[u8]| v.iter().map(|p| [head, p].concat()).collect();
        let sll = [&[0, 0, 3, 4, 0, 6][..], &[0; 8], &[0x86, 0xdd]].concat();
        let sll2 = [&[8, 0][..], &[0; 18]].concat();
        let cases: [(u32, Vec<Vec<u8>>); 7] = [
            (1, ethernet_frames()),
            (113, wrap(&v6, &sll)),
            (276, wrap(&v4, &sll2)),
            (101, v6.clone()),
            (12, v4.clone()),
            (0, wrap(&v4, &2u32.to_le_bytes())),
            (108, wrap(&v6, &24u32.to_be_bytes())),
        ];
        for (link, frames) in cases {
            assert_eq!(
                client_bytes(&pcap(link, &whole(frames))),
                b"hello world",
                "link {link}"
            );
        }
    }

    /// `frame` with an 802.1Q tag of `vid` (priority 5) after its MAC
    /// addresses, under an 802.1ad one when `outer` is given.
    fn tagged(frame: &[u8], vid: u16, outer: Option<u16>) -> Vec<u8> {
        let mut tags = Vec::new();
        if let Some(outer) = outer {
            tags.extend_from_slice(&[0x88, 0xa8]);
            tags.extend_from_slice(&outer.to_be_bytes());
        }
        tags.extend_from_slice(&[0x81, 0x00]);
        tags.extend_from_slice(&((5 << 13) | vid).to_be_bytes());
        [&frame[..12], &tags, &frame[12..]].concat()
    }

    #[test]
    fn vlan_tagged_frames_of_both_families() {
        let v6_frames: Vec<Vec<u8>> = ethernet_frames()
            .iter()
            .map(|f| [&f[..12], &[0x86, 0xdd][..], &to_ipv6(&f[14..])].concat())
            .collect();
        for (frames, what) in [(ethernet_frames(), "IPv4"), (v6_frames, "IPv6")] {
            let single: Vec<Vec<u8>> = frames.iter().map(|f| tagged(f, 42, None)).collect();
            let double: Vec<Vec<u8>> = frames.iter().map(|f| tagged(f, 42, Some(7))).collect();
            for (tagged_frames, tags) in [(single, "one tag"), (double, "two tags")] {
                assert_eq!(
                    client_bytes(&pcap(1, &whole(tagged_frames))),
                    b"hello world",
                    "{what}, {tags}"
                );
            }
        }
        // A tag cut short is malformed, not a panic.
        let short = tagged(&ethernet_frames()[0], 42, None)[..16].to_vec();
        let capture = read_capture_from(&pcap(1, &whole(vec![short]))[..]).unwrap();
        assert_eq!(capture.stats.malformed, 1);
    }

    #[test]
    fn pcapng() {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::RAW, 0xffff))
            .unwrap();
        for data in ipv4_packets() {
            let (original_len, data) = (data.len() as u32, data.into());
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::ZERO,
                original_len,
                data,
                options: vec![],
            };
            w.write_pcapng_block(epb).unwrap();
        }
        assert_eq!(client_bytes(&w.into_inner()), b"hello world");
    }

    #[test]
    fn skips_and_counts() {
        let v4 = ipv4_packets();
        let (mut udp, mut fragment, good) = (v4[3].clone(), v4[3].clone(), &v4[4]);
        Ipv4Packet::new_unchecked(&mut udp).set_next_header(IpProtocol::Udp);
        Ipv4Packet::new_unchecked(&mut fragment).set_more_frags(true);
        let frames = [
            udp,
            fragment,
            good[..30].to_vec(),
            good[..good.len() - 1].to_vec(),
            good.clone(),
        ];
        let mut frames = whole(frames.to_vec());
        frames[3].1 += 1; // captured shorter than on the wire
        let capture = read_capture_from(&pcap(101, &frames)[..]).unwrap();
        assert_eq!(capture.streams[0].bytes, b"world");
        let expected = CaptureStats {
            frames: 5,
            tcp: 1,
            non_tcp: 1,
            fragments: 1,
            truncated: 1,
            malformed: 1,
        };
        assert_eq!(capture.stats, expected);
    }

    #[test]
    fn errors() {
        let format = |r| matches!(r, Err(CaptureError::Format(_)));
        assert!(format(read_capture_bytes(b"")) && format(read_capture_bytes(b"not a pcap")));
        let bad_link = read_capture_bytes(&pcap(147, &[]));
        assert!(matches!(
            bad_link,
            Err(CaptureError::UnsupportedLinkType(147))
        ));
        let missing = read_capture(Path::new("/nonexistent/capture.pcap"));
        assert!(matches!(missing, Err(CaptureError::Io(_))));
    }

    #[test]
    fn corrupt_input_never_panics() {
        let valid = pcap(1, &whole(ethernet_frames()));
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rng = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in 0..valid.len() {
            let _ = read_capture_bytes(&valid[..len]);
        }
        for round in 0..3000 {
            let mut bytes = valid.clone();
            for _ in 0..1 + rng() % 8 {
                let at = (rng() % bytes.len() as u64) as usize;
                bytes[at] = rng() as u8;
            }
            let _ = read_capture_bytes(&bytes);
            let noise: Vec<u8> = (0..rng() % 200).map(|_| rng() as u8).collect();
            let heads: [&[u8]; 2] = [&valid[..24], &[0x0a, 0x0d, 0x0d, 0x0a]];
            let _ = read_capture_bytes(&[heads[round % 2], &noise].concat());
            let frame = noise[..noise.len() % 80].to_vec();
            let link = [0, 1, 101, 113, 276][round % 5];
            let _ = read_capture_bytes(&pcap(link, &[(frame.clone(), frame.len())]));
        }
    }
}
