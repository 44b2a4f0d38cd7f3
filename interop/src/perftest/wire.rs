//! The messages perftest's two sides exchange over their comm channel
//! (`user_comm` in perftest 4.5's `perftest_communication.c`), each one
//! RDMA Send into a receive of [`DEST_LEN`] octets, octet for octet as
//! perftest 4.5+0.17 (its `VERSION` "6.06") puts them on the wire:
//!
//! | message | octets | encoding |
//! | --- | --- | --- |
//! | version | 16 | the version text, NUL-padded (`MAX_VERSION`) |
//! | cycle buffer, cache line size | 4 each | big-endian `int` (`hton_int`) |
//! | MTU | 2 | `sprintf("%d")` of the `ibv_mtu` enum: one digit and its NUL |
//! | destination | 56 | [`Dest`]: `struct pingpong_dest`, every field big-endian |
//! | bandwidth report | 8 per field | size and iterations as big-endian `u64`, rates as big-endian IEEE doubles |
//!
//! plus the one message of the data connection that is not the test's
//! own, the send test's receive credit ([`CREDIT_LEN`] octets, an RDMA
//! Write in the writer's byte order).

use std::fmt;

/// The version this side announces: perftest 4.5+0.17's `VERSION`.
pub const VERSION: &str = "6.06";
/// Octets of the version message (`MAX_VERSION`).
pub const VERSION_LEN: usize = 16;
/// The oldest peer version perftest 4.5 works with
/// (`check_version_compatibility`); every version from it on sends the
/// system data, a two-octet MTU and eight-octet iteration counts.
pub const MIN_PEER_VERSION: f64 = 5.70;
/// Octets of the cycle buffer and of the cache line size messages.
pub const INT_LEN: usize = 4;
/// Octets of the MTU message.
pub const MTU_LEN: usize = 2;
/// Octets of a [`Dest`], and of the comm channel's receive buffer.
pub const DEST_LEN: usize = 56;
/// Octets of each field of a bandwidth report.
pub const REPORT_FIELD_LEN: usize = 8;
/// Octets of the send test's receive credit.
pub const CREDIT_LEN: usize = 4;

/// `struct pingpong_dest`: where one side's queue pair and memory are,
/// as perftest's `rdma_write_keys` sends it (every field converted to big
/// endian, the four octets of padding before `vaddr` included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Dest {
    /// The port's LID (0 on iWARP).
    pub lid: u32,
    /// Outstanding RDMA Reads this side can have (`out_reads`).
    pub out_reads: u32,
    /// The queue pair's number (only printed).
    pub qpn: u32,
    /// The initial packet sequence number (only printed).
    pub psn: u32,
    /// The STag of the memory the peer targets.
    pub rkey: u32,
    /// The Tagged Offset of that memory (`vaddr`).
    pub vaddr: u64,
    /// The GID (only printed on iWARP).
    pub gid: [u8; 16],
    /// The shared receive queue's number (XRC and DC only; 0 here).
    pub srqn: u32,
    /// The GID index (`int`, two's complement).
    pub gid_index: u32,
}

impl Dest {
    /// The 56 octets on the wire; the padding is sent as zeros (perftest
    /// sends whatever its stack held there).
    pub fn to_bytes(&self) -> [u8; DEST_LEN] {
        let mut out = [0u8; DEST_LEN];
        out[0..4].copy_from_slice(&self.lid.to_be_bytes());
        out[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        out[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        out[12..16].copy_from_slice(&self.psn.to_be_bytes());
        out[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        out[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        out[32..48].copy_from_slice(&self.gid);
        out[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        out[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        out
    }

    /// Parses exactly [`DEST_LEN`] octets, ignoring the padding; `None`
    /// for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; DEST_LEN] = bytes.try_into().ok()?;
        let word = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let mut vaddr = [0u8; 8];
        vaddr.copy_from_slice(&bytes[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&bytes[32..48]);
        Some(Self {
            lid: word(0),
            out_reads: word(4),
            qpn: word(8),
            psn: word(12),
            rkey: word(16),
            vaddr: u64::from_be_bytes(vaddr),
            gid,
            srqn: word(48),
            gid_index: word(52),
        })
    }
}

/// The version message: `version` NUL-padded to [`VERSION_LEN`] octets
/// (cut to 15 characters, so a NUL always ends it).
pub fn encode_version(version: &str) -> [u8; VERSION_LEN] {
    let mut out = [0u8; VERSION_LEN];
    let len = version.len().min(VERSION_LEN - 1);
    out[..len].copy_from_slice(&version.as_bytes()[..len]);
    out
}

/// A peer's version message: its text (up to the first NUL, non-UTF-8
/// octets replaced) and its number as C's `atof` reads it (the longest
/// leading decimal number, 0 when there is none).
pub fn parse_version(bytes: &[u8]) -> PeerVersion {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end]).into_owned();
    PeerVersion {
        number: leading_number(text.trim_start()),
        text,
    }
}

/// The longest prefix of `text` that is a decimal number (digits with at
/// most one point), as a number; 0 when there is none.
fn leading_number(text: &str) -> f64 {
    let mut seen_point = false;
    let end = text
        .char_indices()
        .find(|&(_, c)| match c {
            '.' if !seen_point => {
                seen_point = true;
                false
            }
            c => !c.is_ascii_digit(),
        })
        .map_or(text.len(), |(i, _)| i);
    text[..end].parse().unwrap_or(0.0)
}

/// What a peer's version message says.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The text, up to its NUL.
    pub text: String,
    /// Its number (`atof`).
    pub number: f64,
}

impl PeerVersion {
    /// Whether perftest 4.5 works with this peer (5.70 or later).
    pub fn compatible(&self) -> bool {
        self.number >= MIN_PEER_VERSION
    }
}

impl fmt::Display for PeerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// A cycle buffer or cache line size message (`hton_int`).
pub fn encode_int(value: u32) -> [u8; INT_LEN] {
    value.to_be_bytes()
}

/// Parses a cycle buffer or cache line size message; `None` unless it is
/// [`INT_LEN`] octets.
pub fn parse_int(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// The MTU message: the `ibv_mtu` enum value (1 for 256 octets up to 5
/// for 4096) as one decimal digit, then its NUL.
pub fn encode_mtu(mtu: IbMtu) -> [u8; MTU_LEN] {
    [b'0' + mtu as u8, 0]
}

/// Parses an MTU message; `None` unless it is one digit naming an MTU,
/// then a NUL.
pub fn parse_mtu(bytes: &[u8]) -> Option<IbMtu> {
    match bytes {
        [digit, 0] => IbMtu::from_enum(digit.checked_sub(b'0')?),
        _ => None,
    }
}

/// The InfiniBand path MTUs (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IbMtu {
    /// 256 octets.
    Mtu256 = 1,
    /// 512 octets.
    Mtu512 = 2,
    /// 1024 octets: what siw reports on a 1500-octet Ethernet link.
    Mtu1024 = 3,
    /// 2048 octets.
    Mtu2048 = 4,
    /// 4096 octets.
    Mtu4096 = 5,
}

impl IbMtu {
    /// The MTU of an `ibv_mtu` value.
    pub fn from_enum(value: u8) -> Option<Self> {
        Some(match value {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// Its size in octets.
    pub fn octets(self) -> u32 {
        128 << (self as u32)
    }
}

/// A size or iteration count field of a bandwidth report
/// (`hton_long`, eight octets from perftest 5.33 on).
pub fn encode_count(value: u64) -> [u8; REPORT_FIELD_LEN] {
    value.to_be_bytes()
}

/// Parses a size or iteration count field; `None` unless it is
/// [`REPORT_FIELD_LEN`] octets.
pub fn parse_count(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// A rate field of a bandwidth report (`hton_double`: the IEEE double's
/// octets, most significant first).
pub fn encode_rate(value: f64) -> [u8; REPORT_FIELD_LEN] {
    value.to_bits().to_be_bytes()
}

/// Parses a rate field; `None` unless it is [`REPORT_FIELD_LEN`] octets.
pub fn parse_rate(bytes: &[u8]) -> Option<f64> {
    parse_count(bytes).map(f64::from_bits)
}

/// The send test's credit: the receives the server has completed, as it
/// RDMA-Writes them into the client's credit buffer. perftest writes the
/// `uint32_t` in its host's byte order; every host it runs on here (x86,
/// arm64) is little-endian, so this is too.
pub fn encode_credit(received: u32) -> [u8; CREDIT_LEN] {
    received.to_le_bytes()
}

/// Reads a credit written by [`encode_credit`].
pub fn parse_credit(bytes: [u8; CREDIT_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dest_round_trips_and_lays_its_fields_out_big_endian() {
        let dest = Dest {
            lid: 0,
            out_reads: 0x80,
            qpn: 3,
            psn: 0x84f35a,
            rkey: 0xd204_5800,
            vaddr: 0x55b1_a17a_0000,
            gid: [
                0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            srqn: 0,
            gid_index: 0,
        };
        let bytes = dest.to_bytes();
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0x80]);
        assert_eq!(&bytes[16..24], &[0xd2, 0x04, 0x58, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[24..32], &[0, 0, 0x55, 0xb1, 0xa1, 0x7a, 0, 0]);
        assert_eq!(Dest::from_bytes(&bytes), Some(dest));
        assert_eq!(Dest::from_bytes(&bytes[..55]), None);
    }

    #[test]
    fn versions_read_as_atof_does() {
        assert_eq!(parse_version(&encode_version(VERSION)).number, 6.06);
        assert!(parse_version(&encode_version("5.70")).compatible());
        assert!(!parse_version(&encode_version("5.69")).compatible());
        assert_eq!(parse_version(b"6.1.2-rc\0junk").number, 6.1);
        assert_eq!(parse_version(b"perftest").number, 0.0);
        assert_eq!(parse_version(b"").text, "");
        assert_eq!(&encode_version("a version longer than fifteen")[15..], &[0]);
    }

    #[test]
    fn mtus_are_one_digit_and_a_nul() {
        assert_eq!(&encode_mtu(IbMtu::Mtu1024), b"3\0");
        assert_eq!(parse_mtu(b"5\0"), Some(IbMtu::Mtu4096));
        assert_eq!(IbMtu::Mtu4096.octets(), 4096);
        for bad in [&b"6\0"[..], b"0\0", b"3", b"3\0\0", b"a\0"] {
            assert_eq!(parse_mtu(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn report_fields_and_credits() {
        assert_eq!(encode_count(64), [0, 0, 0, 0, 0, 0, 0, 0x40]);
        assert_eq!(encode_rate(2.0), [0x40, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_rate(&encode_rate(0.455)), Some(0.455));
        assert_eq!(parse_count(&[1, 2, 3]), None);
        assert_eq!(encode_credit(2), [2, 0, 0, 0]);
        assert_eq!(parse_credit(encode_credit(70_000)), 70_000);
        assert_eq!(parse_int(&encode_int(4096)), Some(4096));
    }
}
