//! rdma-core's rsocket wire format (librdmacm/rsocket.c): the connection
//! private data (`struct rs_conn_data`), the target buffer descriptors
//! (`struct rs_sge`) one side RDMA-Writes into the other's target SGL, and
//! the 32-bit messages that InfiniBand carries as immediate data and iWARP
//! as a 4-octet inline Send (`RS_OPT_MSG_SEND`).
//!
//! Every field but the conn data's is in the sender's byte order:
//! rdma-core writes them with `memcpy` and flags big-endian hosts
//! (`RS_CONN_FLAG_NET`) so that a peer of the other order swaps. uwarp
//! runs on little-endian hosts and never sets the flag.

/// `RS_OP_DATA`: `data` octets were written into the receive buffer.
pub const OP_DATA: u32 = 0;
/// `RS_OP_WRITE`: a direct write to a mapped buffer (never on the wire).
pub const OP_WRITE: u32 = 2;
/// `RS_OP_SGL`: the sender grants receive credits up to sequence `data`
/// (and, when written with it, a new target buffer).
pub const OP_SGL: u32 = 4;
/// `RS_OP_IOMAP_SGL`: an iomap entry was updated.
pub const OP_IOMAP_SGL: u32 = 6;
/// `RS_OP_CTRL`: a control message ([`CTRL_DISCONNECT`], [`CTRL_KEEPALIVE`],
/// [`CTRL_SHUTDOWN`]).
pub const OP_CTRL: u32 = 7;

/// `RS_CTRL_DISCONNECT`: the peer closes both directions.
pub const CTRL_DISCONNECT: u32 = 0;
/// `RS_CTRL_KEEPALIVE`: nothing; keeps the connection busy
/// ([`keepalive`](super::keepalive)).
pub const CTRL_KEEPALIVE: u32 = 1;
/// `RS_CTRL_SHUTDOWN`: the peer stops sending.
pub const CTRL_SHUTDOWN: u32 = 2;

/// `RS_MSG_SIZE`: the octets of one message.
pub const MSG_SIZE: usize = 4;
/// `sizeof(struct rs_sge)`.
pub const SGE_SIZE: usize = 16;
/// `RS_SGL_SIZE`: entries of the target SGL.
pub const SGL_SIZE: usize = 2;
/// `sizeof(struct rs_conn_data)`.
pub const CONN_DATA_SIZE: usize = 40;
/// `RS_CONN_FLAG_NET`: the sender's host order is big-endian.
const CONN_FLAG_NET: u8 = 1 << 0;
/// `RS_CONN_FLAG_IOMAP`: the sender's target SGL is followed by its iomap.
const CONN_FLAG_IOMAP: u8 = 1 << 1;

/// `rs_msg_set`: the operation in bits 31-29, its datum below.
pub fn message(op: u32, data: u32) -> u32 {
    (op << 29) | (data & 0x1FFF_FFFF)
}

/// `rs_msg_op`.
pub fn op_of(message: u32) -> u32 {
    message >> 29
}

/// `rs_msg_data`.
pub fn data_of(message: u32) -> u32 {
    message & 0x1FFF_FFFF
}

/// `struct rs_sge`: a buffer of the peer's, named by its STag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteSge {
    /// Tagged Offset of its first octet.
    pub addr: u64,
    /// Its STag.
    pub key: u32,
    /// Its length in octets (for a target SGL: entries).
    pub length: u32,
}

impl RemoteSge {
    /// The 16 octets in the byte order `u64_to` and `u32_to` write.
    fn encode(self, u64_to: fn(u64) -> [u8; 8], u32_to: fn(u32) -> [u8; 4]) -> [u8; SGE_SIZE] {
        let mut out = [0; SGE_SIZE];
        out[..8].copy_from_slice(&u64_to(self.addr));
        out[8..12].copy_from_slice(&u32_to(self.key));
        out[12..].copy_from_slice(&u32_to(self.length));
        out
    }

    /// An entry from 16 octets in the byte order `u64_of` and `u32_of`
    /// read.
    fn decode(bytes: &[u8], u64_of: fn([u8; 8]) -> u64, u32_of: fn([u8; 4]) -> u32) -> Self {
        let mut addr = [0; 8];
        addr.copy_from_slice(&bytes[..8]);
        let word = |at: usize| u32_of([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        Self {
            addr: u64_of(addr),
            key: word(8),
            length: word(12),
        }
    }

    /// The 16 octets as the sender's host writes them (`memcpy`).
    pub fn to_host_bytes(self) -> [u8; SGE_SIZE] {
        self.encode(u64::to_ne_bytes, u32::to_ne_bytes)
    }

    /// An entry written by a peer of this host's byte order.
    pub fn from_host_bytes(bytes: &[u8; SGE_SIZE]) -> Self {
        Self::decode(bytes, u64::from_ne_bytes, u32::from_ne_bytes)
    }

    /// As `struct rs_conn_data` carries it: big-endian fields.
    fn to_net(self, out: &mut [u8]) {
        out[..SGE_SIZE].copy_from_slice(&self.encode(u64::to_be_bytes, u32::to_be_bytes));
    }

    /// From `struct rs_conn_data`'s big-endian fields.
    fn from_net(bytes: &[u8]) -> Self {
        Self::decode(bytes, u64::from_be_bytes, u32::from_be_bytes)
    }
}

/// `struct rs_conn_data`, version 1: what each side's private data (the
/// MPA Request's and Reply's) tells the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnData {
    /// Receive credits granted: the sender's receive queue size.
    pub credits: u16,
    /// The sender's target SGL, where credit updates are written.
    pub target_sgl: RemoteSge,
    /// The first half of the sender's receive buffer.
    pub data_buf: RemoteSge,
    /// Entries of the iomap after the sender's target SGL
    /// (`RDMA_IOMAPSIZE`).
    pub iomap_size: u32,
}

impl ConnData {
    /// The 40 octets rdma-core's `rs_format_conn_data` writes.
    pub fn encode(&self) -> [u8; CONN_DATA_SIZE] {
        let mut out = [0; CONN_DATA_SIZE];
        out[0] = 1;
        out[1] = CONN_FLAG_IOMAP;
        out[2..4].copy_from_slice(&self.credits.to_be_bytes());
        out[7] = value_to_scale(self.iomap_size) as u8;
        self.target_sgl.to_net(&mut out[8..24]);
        self.data_buf.to_net(&mut out[24..40]);
        out
    }

    /// Parses a peer's private data as `rs_save_conn_data` reads it;
    /// `None` unless it is version 1 from a host of this byte order.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < CONN_DATA_SIZE || bytes[0] != 1 {
            return None;
        }
        if (bytes[1] & CONN_FLAG_NET != 0) != cfg!(target_endian = "big") {
            return None;
        }
        Some(Self {
            credits: u16::from_be_bytes([bytes[2], bytes[3]]),
            iomap_size: scale_to_value(u32::from(bytes[7])),
            target_sgl: RemoteSge::from_net(&bytes[8..24]),
            data_buf: RemoteSge::from_net(&bytes[24..40]),
        })
    }
}

/// `sizeof(struct rs_iomap)`: an offset, then an `rs_sge`.
pub const IOMAP_SIZE: usize = 8 + SGE_SIZE;

/// `rs_value_to_scale(value, 8)`: a count in one octet, exact up to 128,
/// in units of 256 above.
pub fn value_to_scale(value: u32) -> u32 {
    if value <= 1 << 7 {
        value
    } else {
        (1 << 7) | (value >> 8)
    }
}

/// `rs_scale_to_value(value, 8)`: the count an octet of
/// [`value_to_scale`] stands for.
pub fn scale_to_value(value: u32) -> u32 {
    if value <= 1 << 7 {
        value
    } else {
        (value & !(1 << 7)) << 8
    }
}

/// `struct rs_iomap`: the sender's buffer `sge` mapped at `offset`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Iomap {
    /// The offset `riowrite` names.
    pub offset: u64,
    /// The buffer.
    pub sge: RemoteSge,
}

impl Iomap {
    /// The 24 octets as the sender's host writes them.
    pub fn to_host_bytes(self) -> [u8; IOMAP_SIZE] {
        let mut out = [0; IOMAP_SIZE];
        out[..8].copy_from_slice(&self.offset.to_ne_bytes());
        out[8..].copy_from_slice(&self.sge.to_host_bytes());
        out
    }

    /// An entry written by a peer of this host's byte order.
    pub fn from_host_bytes(bytes: &[u8; IOMAP_SIZE]) -> Self {
        let mut offset = [0; 8];
        offset.copy_from_slice(&bytes[..8]);
        let mut sge = [0; SGE_SIZE];
        sge.copy_from_slice(&bytes[8..]);
        Self {
            offset: u64::from_ne_bytes(offset),
            sge: RemoteSge::from_host_bytes(&sge),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_data_round_trips_in_rdma_cores_layout() {
        let data = ConnData {
            credits: 384,
            target_sgl: RemoteSge {
                addr: 0x1122_3344_5566_7788,
                key: 0xAABB_CCDD,
                length: 2,
            },
            data_buf: RemoteSge {
                addr: 0x1000,
                key: 7,
                length: 65536,
            },
            iomap_size: 512,
        };
        let bytes = data.encode();
        assert_eq!(&bytes[..4], &[1, CONN_FLAG_IOMAP, 0x01, 0x80]);
        assert_eq!(&bytes[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(bytes[7], 0x82);
        assert_eq!(ConnData::decode(&bytes), Some(data));
        let mut other_version = bytes;
        other_version[0] = 2;
        assert_eq!(ConnData::decode(&other_version), None);
    }

    #[test]
    fn messages_carry_the_operation_in_the_top_three_bits() {
        let msg = message(OP_SGL, 0x2000_0001);
        assert_eq!(op_of(msg), OP_SGL);
        assert_eq!(data_of(msg), 1);
        assert_eq!(message(OP_CTRL, CTRL_DISCONNECT), 0xE000_0000);
    }
}
