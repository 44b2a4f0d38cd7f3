//! What the device reports about itself (`ibv_query_device`,
//! `ibv_query_port`, the GID): the numbers applications size themselves
//! by.

use core::ffi::c_int;

/// The device's name in the device list.
pub const DEVICE_NAME: &str = "uwarp0";

/// The MAC address the device's GID and GUIDs are made from: locally
/// administered (the `02` bit), since the socket transport has no NIC of
/// its own. iWARP connects by IP address, never by GID.
pub const DEVICE_MAC: [u8; 6] = [0x02, 0x00, 0x75, 0x77, 0x00, 0x01];

/// The one port's number (ports count from 1).
pub const PORT_NUM: u8 = 1;

/// Most queue pairs.
pub const MAX_QP: c_int = 16 * 1024;
/// Most work requests per queue (a common iSER target wants 1800 or more).
pub const MAX_QP_WR: c_int = 16 * 1024;
/// Most scatter/gather elements per work request.
pub const MAX_SGE: c_int = 16;
/// Most completion queues.
pub const MAX_CQ: c_int = 16 * 1024;
/// Most entries per completion queue.
pub const MAX_CQE: c_int = 1 << 20;
/// Most protection domains.
pub const MAX_PD: c_int = 16 * 1024;
/// Most RDMA Read Requests a queue pair takes in at once (its IRD), and
/// issues at once (its ORD).
pub const MAX_RD_ATOM: c_int = 128;
/// Most shared receive queues.
pub const MAX_SRQ: c_int = 16 * 1024;
/// Most octets of one message (RFC 5040 allows 2^32 - 1 by its Tagged
/// Offsets; an MPA stream carries any size).
pub const MAX_MSG_SZ: u32 = 0x7fff_ffff;

/// The EUI-64 made from [`DEVICE_MAC`] (universal/local bit flipped,
/// `ff:fe` in the middle), as a big-endian GUID: what siw reports.
pub fn node_guid() -> u64 {
    let m = DEVICE_MAC;
    u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]).to_be()
}

/// The port's one GID: iWARP devices put their MAC address in the first
/// six octets and zeros after it.
pub fn gid() -> [u8; 16] {
    let mut raw = [0; 16];
    raw[..6].copy_from_slice(&DEVICE_MAC);
    raw
}
