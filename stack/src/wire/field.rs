//! Big-endian field access for the header views, and for the TCP header
//! uwarp writes and reads itself ([`super::tcp`]).
//!
//! The views check their buffer length once, in `new_checked`; these helpers
//! then read and write fixed offsets inside that length. All iWARP header
//! fields are in network byte order (RFC 5040 section 4, RFC 5041 section 4,
//! RFC 5044 section 4); the one exception, the CRC field, lives in
//! [`crate::wire::crc`].

/// Reads the big-endian `u16` at `at`.
#[inline]
pub(crate) fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Reads the big-endian `u32` at `at`.
#[inline]
pub(crate) fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Reads the big-endian `u64` at `at`.
pub(crate) fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut octets = [0u8; 8];
    octets.copy_from_slice(&buf[at..at + 8]);
    u64::from_be_bytes(octets)
}

/// Writes `value` big-endian at `at`.
#[inline]
pub(crate) fn set_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Writes `value` big-endian at `at`.
#[inline]
pub(crate) fn set_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

/// Writes `value` big-endian at `at`.
pub(crate) fn set_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_be_bytes());
}
