//! Receive-side scaling we can predict: the Toeplitz hash NICs compute
//! over a received IPv4/TCP frame (Microsoft's "RSS Hashing Functions",
//! the hash DPDK's `RTE_ETH_HASH_FUNCTION_TOEPLITZ` names), with a key
//! that hashes both directions of a connection alike, and the redirection
//! table uwarp programs, so the control core can tell before it sends a
//! SYN which receive queue the peer's answers will come in on.
//!
//! A key made of one 16-bit pattern repeated ([`SYMMETRIC_KEY`], 0x6d5a)
//! makes the hash symmetric: the Toeplitz hash is the XOR of 32-bit
//! windows of the key, one per set input bit, and with a key of period 16
//! the window of a bit depends only on its position modulo 16, so
//! swapping the two addresses (32 bits each) and the two ports (16 bits
//! each) changes no window (Woo and Park, "Scalable TCP Session
//! Monitoring with Symmetric Receive-side Scaling", 2012).

use crate::net::FourTuple;

/// The 16-bit pattern [`SYMMETRIC_KEY`] repeats.
pub const SYMMETRIC_PATTERN: [u8; 2] = [0x6d, 0x5a];

/// The usual RSS key length (Microsoft's, and most NICs').
pub const KEY_LEN: usize = 40;

/// The symmetric key of [`KEY_LEN`] octets.
pub const SYMMETRIC_KEY: [u8; KEY_LEN] = {
    let mut key = [0u8; KEY_LEN];
    let mut i = 0;
    while i < KEY_LEN {
        key[i] = SYMMETRIC_PATTERN[i % 2];
        i += 1;
    }
    key
};

/// The symmetric key at `len` octets (devices whose key is not 40 octets
/// long take one of their own size).
pub fn symmetric_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| SYMMETRIC_PATTERN[i % 2]).collect()
}

/// The Toeplitz hash of `input` under `key`: for each input bit set, from
/// the most significant bit of the first octet on, the XOR of the key's
/// 32 bits starting at that bit's position. `key` must be at least 4
/// octets longer than `input` (the 40-octet key covers IPv6 with ports).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    debug_assert!(key.len() >= input.len() + 4, "the key covers the input");
    let mut hash = 0u32;
    // The key's 64 bits from the current octet on; the top 32 are the
    // window of the current bit.
    let mut window = u64::from(u32::from_be_bytes([key[0], key[1], key[2], key[3]])) << 32;
    for (i, &octet) in input.iter().enumerate() {
        window |= u64::from(key.get(i + 4).copied().unwrap_or(0)) << 24;
        for bit in 0..8 {
            if octet & (0x80 >> bit) != 0 {
                hash ^= (window >> (32 - bit)) as u32;
            }
        }
        window <<= 8;
    }
    hash
}

/// The hash input of an IPv4/TCP frame (`RTE_ETH_RSS_NONFRAG_IPV4_TCP`):
/// source address, destination address, source port, destination port.
pub fn ipv4_tcp_input(src: [u8; 4], dst: [u8; 4], src_port: u16, dst_port: u16) -> [u8; 12] {
    let mut input = [0u8; 12];
    input[0..4].copy_from_slice(&src);
    input[4..8].copy_from_slice(&dst);
    input[8..10].copy_from_slice(&src_port.to_be_bytes());
    input[10..12].copy_from_slice(&dst_port.to_be_bytes());
    input
}

/// How a port spreads received IPv4/TCP frames over its receive queues:
/// the key and the redirection table uwarp configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RssSteering {
    key: Vec<u8>,
    reta: Vec<u16>,
}

impl RssSteering {
    /// `key` with a redirection table of `reta_size` entries sending entry
    /// `i` to queue `i % queues` (what `Port` programs).
    pub fn new(key: Vec<u8>, reta_size: u16, queues: u16) -> Self {
        let reta = (0..reta_size).map(|i| i % queues.max(1)).collect();
        RssSteering { key, reta }
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The redirection table: entry → receive queue.
    pub fn reta(&self) -> &[u16] {
        &self.reta
    }

    /// The queue a frame with `hash` goes to: the table entry the hash's
    /// low bits pick (NICs take them modulo the table's power-of-two size).
    pub fn queue_of_hash(&self, hash: u32) -> u16 {
        match self.reta.len() {
            0 => 0,
            n => self.reta[hash as usize % n],
        }
    }

    /// The receive queue of the frames of `tuple` (seen from our side:
    /// they come from its remote end to its local end).
    pub fn receive_queue(&self, tuple: &FourTuple) -> u16 {
        let input = ipv4_tcp_input(
            tuple.remote_ip.octets(),
            tuple.local_ip.octets(),
            tuple.remote_port,
            tuple.local_port,
        );
        self.queue_of_hash(toeplitz(&self.key, &input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;

    /// Microsoft's verification key ("Verifying the RSS Hash Calculation").
    const MS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// An address and a port.
    type End = ([u8; 4], u16);

    /// Microsoft's IPv4 vectors: destination, source, IPv4-only hash,
    /// IPv4-with-TCP hash.
    const MS_IPV4: [(End, End, u32, u32); 5] = [
        (
            ([161, 142, 100, 80], 1766),
            ([66, 9, 149, 187], 2794),
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            ([65, 69, 140, 83], 4739),
            ([199, 92, 111, 2], 14230),
            0xd718262a,
            0xc626b0ea,
        ),
        (
            ([12, 22, 207, 184], 38024),
            ([24, 19, 198, 95], 12898),
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            ([209, 142, 163, 6], 2217),
            ([38, 27, 205, 30], 48228),
            0x82989176,
            0xafc7327f,
        ),
        (
            ([202, 188, 127, 2], 1303),
            ([153, 39, 163, 191], 44251),
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    #[test]
    fn matches_microsofts_ipv4_vectors() {
        for ((dst, dst_port), (src, src_port), ip_only, with_tcp) in MS_IPV4 {
            let input = ipv4_tcp_input(src, dst, src_port, dst_port);
            assert_eq!(toeplitz(&MS_KEY, &input[..8]), ip_only, "{src:?} > {dst:?}");
            assert_eq!(toeplitz(&MS_KEY, &input), with_tcp, "{src:?} > {dst:?}");
        }
    }

    #[test]
    fn the_symmetric_key_hashes_both_directions_alike() {
        assert_eq!(symmetric_key(KEY_LEN), SYMMETRIC_KEY);
        for ((a, a_port), (b, b_port), _, _) in MS_IPV4 {
            let there = ipv4_tcp_input(a, b, a_port, b_port);
            let back = ipv4_tcp_input(b, a, b_port, a_port);
            assert_eq!(
                toeplitz(&SYMMETRIC_KEY, &there),
                toeplitz(&SYMMETRIC_KEY, &back)
            );
            // Microsoft's key is not symmetric: the property is the key's.
            assert_ne!(toeplitz(&MS_KEY, &there), toeplitz(&MS_KEY, &back));
        }
    }

    #[test]
    fn the_redirection_table_sends_entry_i_to_queue_i_mod_queues() {
        let steering = RssSteering::new(SYMMETRIC_KEY.to_vec(), 128, 3);
        assert_eq!(steering.reta().len(), 128);
        assert!(steering
            .reta()
            .iter()
            .enumerate()
            .all(|(i, &q)| usize::from(q) == i % 3));
        assert_eq!(steering.queue_of_hash(128 + 4), 1);
        assert_eq!(RssSteering::new(vec![0; 40], 0, 2).queue_of_hash(7), 0);
    }

    #[test]
    fn the_receive_queue_is_the_hash_of_the_frame_as_it_arrives() {
        let steering = RssSteering::new(MS_KEY.to_vec(), 64, 4);
        // Microsoft's first vector as our flow: it arrives from 66.9.149.187.
        let tuple = FourTuple {
            local_ip: Ipv4Address::new(161, 142, 100, 80),
            local_port: 1766,
            remote_ip: Ipv4Address::new(66, 9, 149, 187),
            remote_port: 2794,
        };
        assert_eq!(
            steering.receive_queue(&tuple),
            ((0x51ccc178u32 % 64) % 4) as u16
        );
    }
}
