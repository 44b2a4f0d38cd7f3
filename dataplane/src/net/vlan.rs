//! IEEE 802.1Q VLAN tags (C-VLAN, TPID 0x8100) on Ethernet II frames.
//!
//! A port on a VLAN ([`InterfaceAddress::vlan`]) takes only the frames
//! tagged with its VLAN identifier (any priority) and tags every frame it
//! sends, the tag written in software: the 4 octets after the two MAC
//! addresses, the Tag Protocol Identifier 0x8100 then the Tag Control
//! Information (IEEE 802.1Q §9.6: PCP in the top 3 bits, DEI 0, the 12-bit
//! VID). The tag does not count against the IP MTU: a 1500-octet datagram
//! makes a 1518-octet frame.
//!
//! [`InterfaceAddress::vlan`]: super::InterfaceAddress::vlan

use std::fmt;

use smoltcp::wire::{EthernetAddress, EthernetProtocol};

use super::ipv4::ETHERNET_HEADER_LEN;

/// The Tag Protocol Identifier of a customer VLAN tag (IEEE 802.1Q
/// Table 9-1).
pub const TPID: u16 = 0x8100;
/// The length of a VLAN tag: TPID and TCI.
pub const TAG_LEN: usize = 4;
/// The length of an Ethernet II header with a VLAN tag.
pub const TAGGED_HEADER_LEN: usize = ETHERNET_HEADER_LEN + TAG_LEN;
/// The largest VLAN identifier a port can be on (0 means untagged and
/// 4095 is reserved, IEEE 802.1Q Table 9-2).
pub const MAX_ID: u16 = 4094;
/// The largest priority code point.
pub const MAX_PRIORITY: u8 = 7;

/// The VLAN a port is on (IEEE 802.1Q).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vlan {
    /// The VLAN identifier, 1 to [`MAX_ID`].
    pub id: u16,
    /// The priority code point of the frames sent, 0 to [`MAX_PRIORITY`].
    pub priority: u8,
}

impl Vlan {
    /// VLAN `id` with priority `priority`; the error says which is out of
    /// range.
    pub fn new(id: u16, priority: u8) -> Result<Vlan, String> {
        if !(1..=MAX_ID).contains(&id) {
            return Err(format!("VLAN id {id}: give 1 to {MAX_ID}"));
        }
        if priority > MAX_PRIORITY {
            return Err(format!(
                "VLAN priority {priority}: give 0 to {MAX_PRIORITY}"
            ));
        }
        Ok(Vlan { id, priority })
    }

    /// Checks a VLAN whose fields were set directly, as [`Vlan::new`] does.
    pub fn validate(self) -> Result<Vlan, String> {
        Vlan::new(self.id, self.priority)
    }

    /// Parses `ID[:PCP]` (e.g. `42` or `42:5`; the priority defaults to
    /// 0); the error says what was expected.
    pub fn parse(text: &str) -> Result<Vlan, String> {
        let (id, priority) = match text.split_once(':') {
            Some((id, priority)) => (id, priority),
            None => (text, "0"),
        };
        match (id.trim().parse(), priority.trim().parse()) {
            (Ok(id), Ok(priority)) => Vlan::new(id, priority),
            _ => Err(format!(
                "{text}: expected ID[:PCP], a VLAN id 1 to {MAX_ID} and a priority 0 to {MAX_PRIORITY}"
            )),
        }
    }

    /// The Tag Control Information of the frames sent: PCP, DEI 0, VID.
    pub fn tci(self) -> u16 {
        (u16::from(self.priority & 0x7) << 13) | (self.id & 0x0fff)
    }
}

/// `ID:PCP`, as [`Vlan::parse`] reads it.
impl fmt::Display for Vlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.id, self.priority)
    }
}

/// The Ethernet header of a received frame, past its VLAN tag if it has
/// one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Header {
    /// The EtherType of the payload (after the tag, when tagged).
    pub ethertype: EthernetProtocol,
    /// The VLAN identifier of the tag, `None` when untagged.
    pub vid: Option<u16>,
    /// Where the payload starts: 14, or 18 when tagged.
    pub len: usize,
}

/// Reads the Ethernet header of `frame`, with its 802.1Q tag if the
/// first EtherType is [`TPID`]; `None` when the frame is shorter than that
/// header (a truncated tag). Only the outer tag is read: a frame tagged
/// twice has [`TPID`] as its payload's EtherType.
pub fn parse(frame: &[u8]) -> Option<L2Header> {
    let ethertype_at = |at: usize| {
        let octets = frame.get(at..at + 2)?;
        Some(u16::from_be_bytes([octets[0], octets[1]]))
    };
    let outer = ethertype_at(ETHERNET_HEADER_LEN - 2)?;
    if outer != TPID {
        return Some(L2Header {
            ethertype: EthernetProtocol::from(outer),
            vid: None,
            len: ETHERNET_HEADER_LEN,
        });
    }
    let tci = ethertype_at(ETHERNET_HEADER_LEN)?;
    let inner = ethertype_at(ETHERNET_HEADER_LEN + 2)?;
    Some(L2Header {
        ethertype: EthernetProtocol::from(inner),
        vid: Some(tci & 0x0fff),
        len: TAGGED_HEADER_LEN,
    })
}

/// The length of the Ethernet header a port on `vlan` writes.
pub const fn header_len(vlan: Option<Vlan>) -> usize {
    match vlan {
        Some(_) => TAGGED_HEADER_LEN,
        None => ETHERNET_HEADER_LEN,
    }
}

/// The length of the Ethernet header of a frame this host wrote: 18 when
/// it carries a tag, else 14 (what the checksum offload's `l2_len` is).
pub fn written_header_len(frame: &[u8]) -> usize {
    match frame.get(ETHERNET_HEADER_LEN - 2..ETHERNET_HEADER_LEN) {
        Some(&[0x81, 0x00]) => TAGGED_HEADER_LEN,
        _ => ETHERNET_HEADER_LEN,
    }
}

/// Writes an Ethernet II header from `src` to `dst` for `ethertype`,
/// tagged for `vlan` when it is set, into the front of `buf`; returns its
/// length ([`header_len`]).
///
/// # Panics
///
/// If `buf` is shorter than that: the caller's mistake.
pub fn write_header(
    buf: &mut [u8],
    src: EthernetAddress,
    dst: EthernetAddress,
    vlan: Option<Vlan>,
    ethertype: EthernetProtocol,
) -> usize {
    let len = header_len(vlan);
    let header = &mut buf[..len];
    header[..6].copy_from_slice(dst.as_bytes());
    header[6..12].copy_from_slice(src.as_bytes());
    if let Some(vlan) = vlan {
        header[12..14].copy_from_slice(&TPID.to_be_bytes());
        header[14..16].copy_from_slice(&vlan.tci().to_be_bytes());
    }
    header[len - 2..].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const DST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    #[test]
    fn ids_and_priorities_are_checked_and_parsed() {
        assert_eq!(
            Vlan::parse("42"),
            Ok(Vlan {
                id: 42,
                priority: 0
            })
        );
        assert_eq!(
            Vlan::parse("4094:7"),
            Ok(Vlan {
                id: 4094,
                priority: 7
            })
        );
        for bad in ["0", "4095", "42:8", "x", "42:", ":3", "-1", "70000"] {
            assert!(Vlan::parse(bad).is_err(), "{bad}");
        }
        assert!(Vlan { id: 0, priority: 0 }.validate().is_err());
        let vlan = Vlan::new(100, 5).unwrap();
        assert_eq!(Vlan::parse(&vlan.to_string()), Ok(vlan));
    }

    #[test]
    fn the_tci_holds_the_priority_above_a_clear_dei_and_the_id() {
        assert_eq!(Vlan::new(42, 0).unwrap().tci(), 0x002a);
        assert_eq!(Vlan::new(4094, 7).unwrap().tci(), 0xeffe);
        assert_eq!(Vlan::new(1, 5).unwrap().tci(), 0xa001);
    }

    #[test]
    fn a_written_tag_reads_back() {
        let vlan = Vlan::new(42, 3).unwrap();
        let mut buf = [0xaa; 20];
        let len = write_header(&mut buf, SRC, DST, Some(vlan), EthernetProtocol::Ipv4);
        assert_eq!(len, 18);
        assert_eq!(
            buf[..18],
            [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x60, 0x2a, 0x08, 0x00]
        );
        assert_eq!(buf[18..], [0xaa, 0xaa], "nothing past the header");
        assert_eq!(
            parse(&buf),
            Some(L2Header {
                ethertype: EthernetProtocol::Ipv4,
                vid: Some(42),
                len: 18
            })
        );
        assert_eq!(written_header_len(&buf), 18);
        let untagged = write_header(&mut buf, SRC, DST, None, EthernetProtocol::Arp);
        assert_eq!(untagged, 14);
        assert_eq!(buf[12..14], [0x08, 0x06]);
        assert_eq!(written_header_len(&buf), 14);
        assert_eq!(parse(&buf).map(|h| (h.vid, h.len)), Some((None, 14)));
    }

    #[test]
    fn truncated_headers_and_tags_are_none() {
        let mut frame = [0u8; 18];
        frame[12..14].copy_from_slice(&TPID.to_be_bytes());
        for len in [0, 13, 14, 15, 16, 17] {
            assert_eq!(parse(&frame[..len]), None, "{len} octets");
        }
        assert!(parse(&frame).is_some());
        assert_eq!(written_header_len(&frame[..10]), 14);
    }
}
