//! RPC-over-RDMA version 1 CM private data (RFC 8797 section 5).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Format Identifier: 0xf6ab0e18                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |   Reserved  |R|   Send Size   | Receive Size  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! NFS over RDMA peers put these eight octets in the connection manager's
//! private data, which on iWARP is the MPA private data after the RFC 6581
//! enhanced block. A receiver searches the private data for the format
//! identifier at any offset, with no alignment (RFC 8797 section 5.2.2);
//! without it the peer has the defaults of RFC 8166: 1 KiB inline
//! thresholds and no remote invalidation.

use super::error::{check_len, check_room, Result, WireError};
use super::field::{get_u32, set_u32};

/// The format identifier that opens the message.
pub const FORMAT_IDENTIFIER: u32 = 0xf6ab_0e18;
/// The message format version this crate speaks.
pub const VERSION: u8 = 1;
/// Length of a version 1 message.
pub const MESSAGE_LEN: usize = 8;
/// The size unit of the Send Size and Receive Size fields.
pub const SIZE_UNIT: u32 = 1024;
/// The default, and smallest, inline threshold (RFC 8166 section 3.3.3).
pub const DEFAULT_INLINE_THRESHOLD: u32 = SIZE_UNIT;
/// The largest size the 8-bit fields can express.
pub const MAX_INLINE_THRESHOLD: u32 = 256 * SIZE_UNIT;

/// R: the sender supports remote invalidation.
const FLAG_REMOTE_INVALIDATION: u8 = 0x01;

/// The transport properties one RPC-over-RDMA peer announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RpcRdmaPrivateData {
    /// R: the sender supports remote invalidation, so the responder may use
    /// Send with Invalidate for replies when both peers set it.
    pub remote_invalidation: bool,
    /// The largest RDMA Send this peer will transmit, in octets.
    pub send_size: u32,
    /// The largest RDMA Send this peer can receive, in octets.
    pub receive_size: u32,
    /// The seven reserved bits (ignored on receipt, kept for exact
    /// re-emission; uwarp sends 0).
    pub reserved: u8,
}

impl Default for RpcRdmaPrivateData {
    /// The settings of a peer that sent no such private data
    /// (RFC 8797 section 5.2.1).
    fn default() -> Self {
        Self {
            remote_invalidation: false,
            send_size: DEFAULT_INLINE_THRESHOLD,
            receive_size: DEFAULT_INLINE_THRESHOLD,
            reserved: 0,
        }
    }
}

/// Encodes a size as the number of 1 KiB units beyond the first. A size
/// that is not a multiple of 1 KiB is rounded down, since the peer relies
/// on the advertised size; sizes below 1 KiB or above 256 KiB are refused.
pub fn encode_size(size: u32) -> Result<u8> {
    if !(DEFAULT_INLINE_THRESHOLD..=MAX_INLINE_THRESHOLD).contains(&size) {
        return Err(WireError::BadRpcRdmaSize(size));
    }
    // In range 0..=255 by the check above.
    Ok((size / SIZE_UNIT - 1) as u8)
}

/// Decodes a Send Size or Receive Size field.
pub fn decode_size(encoded: u8) -> u32 {
    (u32::from(encoded) + 1) * SIZE_UNIT
}

impl RpcRdmaPrivateData {
    /// Parses a message that starts at the beginning of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        check_len(buf, MESSAGE_LEN)?;
        if get_u32(buf, 0) != FORMAT_IDENTIFIER {
            return Err(WireError::BadRpcRdmaFormat);
        }
        if buf[4] != VERSION {
            return Err(WireError::UnsupportedRpcRdmaVersion(buf[4]));
        }
        Ok(Self {
            remote_invalidation: buf[5] & FLAG_REMOTE_INVALIDATION != 0,
            reserved: buf[5] >> 1,
            send_size: decode_size(buf[6]),
            receive_size: decode_size(buf[7]),
        })
    }

    /// Searches `private_data` for the format identifier at any offset and
    /// parses the message there. `None` when no identifier is present (the
    /// peer then has [`RpcRdmaPrivateData::default`]); an error when every
    /// identifier found is followed by an invalid or truncated message.
    pub fn find(private_data: &[u8]) -> Option<Result<Self>> {
        let identifier = FORMAT_IDENTIFIER.to_be_bytes();
        let mut first_error = None;
        for start in 0..private_data.len().saturating_sub(identifier.len() - 1) {
            if private_data[start..start + identifier.len()] != identifier {
                continue;
            }
            match Self::parse(&private_data[start..]) {
                Ok(found) => return Some(Ok(found)),
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map(Err)
    }

    /// What the peer's `private_data` says, or the defaults when it holds
    /// no valid RPC-over-RDMA message.
    pub fn find_or_default(private_data: &[u8]) -> Self {
        Self::find(private_data)
            .and_then(Result::ok)
            .unwrap_or_default()
    }

    /// Writes the eight octets to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let send = encode_size(self.send_size)?;
        let receive = encode_size(self.receive_size)?;
        check_room(buf, MESSAGE_LEN)?;
        set_u32(buf, 0, FORMAT_IDENTIFIER);
        buf[4] = VERSION;
        buf[5] = (self.reserved << 1) | u8::from(self.remote_invalidation);
        buf[6] = send;
        buf[7] = receive;
        Ok(MESSAGE_LEN)
    }

    /// The eight octets as an array.
    pub fn to_bytes(&self) -> Result<[u8; MESSAGE_LEN]> {
        let mut out = [0u8; MESSAGE_LEN];
        self.emit(&mut out)?;
        Ok(out)
    }

    /// The inline threshold for messages from the peer that announced
    /// `self` to the peer that announced `receiver` (RFC 8797 section 5.1.3:
    /// the smaller of the sender's send size and the receiver's receive
    /// size).
    pub fn inline_threshold_to(&self, receiver: &Self) -> u32 {
        self.send_size.min(receiver.receive_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_encoding() {
        assert_eq!(encode_size(1024).unwrap(), 0);
        assert_eq!(encode_size(4096).unwrap(), 3);
        assert_eq!(encode_size(4097).unwrap(), 3);
        assert_eq!(encode_size(262_144).unwrap(), 255);
        assert_eq!(
            encode_size(1023).unwrap_err(),
            WireError::BadRpcRdmaSize(1023)
        );
        assert_eq!(
            encode_size(262_145).unwrap_err(),
            WireError::BadRpcRdmaSize(262_145)
        );
        assert_eq!(decode_size(0), 1024);
        assert_eq!(decode_size(255), 262_144);
    }

    #[test]
    fn round_trip_and_layout() {
        let message = RpcRdmaPrivateData {
            remote_invalidation: true,
            send_size: 4096,
            receive_size: 8192,
            reserved: 0,
        };
        let bytes = message.to_bytes().unwrap();
        assert_eq!(bytes, [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x07]);
        assert_eq!(RpcRdmaPrivateData::parse(&bytes).unwrap(), message);
    }

    #[test]
    fn found_at_any_offset_after_other_private_data() {
        let message = RpcRdmaPrivateData {
            remote_invalidation: false,
            send_size: 1024,
            receive_size: 32768,
            reserved: 0,
        };
        for offset in 0..7 {
            let mut pd = vec![0x55u8; offset];
            pd.extend_from_slice(&message.to_bytes().unwrap());
            pd.push(0xaa);
            assert_eq!(RpcRdmaPrivateData::find(&pd), Some(Ok(message)));
        }
    }

    #[test]
    fn absent_or_invalid_gives_defaults() {
        assert_eq!(RpcRdmaPrivateData::find(&[1, 2, 3]), None);
        assert_eq!(RpcRdmaPrivateData::find(&[]), None);
        let wrong_version = [0xf6, 0xab, 0x0e, 0x18, 0x02, 0x00, 0x00, 0x00];
        assert_eq!(
            RpcRdmaPrivateData::find(&wrong_version),
            Some(Err(WireError::UnsupportedRpcRdmaVersion(2)))
        );
        let overrun = [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x00];
        assert!(matches!(
            RpcRdmaPrivateData::find(&overrun),
            Some(Err(WireError::Truncated { .. }))
        ));
        assert_eq!(
            RpcRdmaPrivateData::find_or_default(&wrong_version),
            RpcRdmaPrivateData::default()
        );
    }

    #[test]
    fn reserved_bits_are_ignored_but_kept() {
        let bytes = [0xf6, 0xab, 0x0e, 0x18, 0x01, 0xfe, 0x00, 0x00];
        let parsed = RpcRdmaPrivateData::parse(&bytes).unwrap();
        assert!(!parsed.remote_invalidation);
        assert_eq!(parsed.reserved, 0x7f);
        assert_eq!(parsed.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn inline_thresholds() {
        let client = RpcRdmaPrivateData {
            send_size: 4096,
            receive_size: 2048,
            ..Default::default()
        };
        let server = RpcRdmaPrivateData {
            send_size: 8192,
            receive_size: 16384,
            ..Default::default()
        };
        assert_eq!(client.inline_threshold_to(&server), 4096);
        assert_eq!(server.inline_threshold_to(&client), 2048);
    }
}
