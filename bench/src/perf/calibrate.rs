//! `uwarp-perf calibrate`: the single-core memcpy and CRC32c rates of
//! this machine. Receiving a tagged FPDU costs one copy into registered
//! memory and one CRC over it (RFC 5044 section 4.1), so their combined
//! rate bounds what one core can place; bandwidth is shown as a fraction
//! of it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use uwarp_stack::wire::crc::crc32c;

/// The rates measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// memcpy of 64 KiB blocks through 64 MiB, in Gbit/s.
    pub memcpy_gbps: f64,
    /// CRC32c over 64 KiB blocks through 64 MiB, in Gbit/s.
    pub crc32c_gbps: f64,
}

impl Calibration {
    /// One copy and one CRC per octet, one after the other.
    pub fn copy_crc_gbps(&self) -> f64 {
        1.0 / (1.0 / self.memcpy_gbps + 1.0 / self.crc32c_gbps)
    }
}

/// The block each step works on: one 64 KiB message.
const BLOCK: usize = 64 * 1024;

/// The memory the blocks walk through: larger than the caches, like the
/// mbufs, TCP buffers and registered regions a transfer streams through.
const SPAN: usize = 64 * 1024 * 1024;

/// Measures each rate for about `span`.
pub fn calibrate(span: Duration) -> Calibration {
    let source = vec![0xA5u8; SPAN];
    let mut sink = vec![0u8; SPAN];
    let mut at = 0;
    let mut next = move || {
        at = (at + BLOCK) % SPAN;
        at
    };
    let mut next_copy = next;
    let memcpy_gbps = rate(span, || {
        let at = next_copy();
        sink[at..at + BLOCK].copy_from_slice(black_box(&source[at..at + BLOCK]));
        black_box(&mut sink);
    });
    let crc32c_gbps = rate(span, || {
        let at = next();
        black_box(crc32c(black_box(&source[at..at + BLOCK])));
    });
    Calibration {
        memcpy_gbps,
        crc32c_gbps,
    }
}

/// Gbit/s of `block` (one BLOCK per call) run for about `span`.
fn rate(span: Duration, mut block: impl FnMut()) -> f64 {
    // Warm up: page faults and frequency ramps out of the measurement.
    for _ in 0..64 {
        block();
    }
    let start = Instant::now();
    let mut blocks = 0u64;
    while start.elapsed() < span {
        for _ in 0..64 {
            block();
        }
        blocks += 64;
    }
    (blocks as f64 * BLOCK as f64 * 8.0) / start.elapsed().as_secs_f64() / 1e9
}
