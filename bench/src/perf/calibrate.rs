//! `uwarp-perf calibrate`: the single-core memcpy and CRC32c rates of
//! this machine. Receiving a tagged FPDU costs one copy into registered
//! memory and one CRC over it (RFC 5044 section 4.1), so their combined
//! rate bounds what one core can place; bandwidth is shown as a fraction
//! of it.
//!
//! And the round trip of one cache line between the two CPUs a loopback
//! run pins its DPDK ends to ([`core_to_core_ns`]): on the DPDK
//! transport every frame's mbuf and data pass between those cores. A
//! virtual machine's host may place its virtual CPUs near each other or
//! far apart, and move them: on this project's VM the round trip reads
//! about 60-85 ns at most times and about 310-360 ns at others, and the
//! DPDK loopback's slow runs (about a third of its usual bandwidth) come
//! with the slow readings. Each run reports the round trip before and
//! after it, so a number can be read with the state of the machine.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use uwarp_stack::wire::crc::crc32c;

use super::transport::{cpus, pin};

/// The rates measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// memcpy of 64 KiB blocks through 64 MiB, in Gbit/s.
    pub memcpy_gbps: f64,
    /// CRC32c over 64 KiB blocks through 64 MiB, in Gbit/s.
    pub crc32c_gbps: f64,
    /// The median round trip of a cache line between the CPUs of the
    /// loopback's two ends, in nanoseconds; `None` when this process may
    /// run on fewer than two CPUs.
    pub core_to_core_ns: Option<f64>,
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
        core_to_core_ns: core_to_core_ns(span),
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

/// Round trips timed together; the median of such rounds is reported.
/// Few enough that a round finishes within the time limit even when
/// other busy threads share the two CPUs (each trip then waits for a
/// scheduler time slice, and the reading says so).
const TRIPS_PER_ROUND: u64 = 100;

/// How long [`core_to_core_ns`] may take at most: it stops early if its
/// threads share a CPU (pinning refused), where a round trip takes a
/// scheduler time slice.
const CORE_TO_CORE_LIMIT: Duration = Duration::from_secs(2);

/// A cache line of its own for the value the two CPUs pass back and
/// forth.
#[repr(align(128))]
struct Line(AtomicU64);

/// The median round trip, in nanoseconds, of one cache line between the
/// two CPUs a loopback run pins its client and server ends to: one
/// thread on each writes the line in turn, for about `span`. `None` when
/// this process may run on fewer than two CPUs, or when not one round
/// finished in time.
pub fn core_to_core_ns(span: Duration) -> Option<f64> {
    // The process's CPUs, not this thread's: a run's thread may be
    // pinned already.
    if cpus().len() < 2 {
        return None;
    }
    let line = Line(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    // Both sides on threads of their own: the caller's keeps its CPUs.
    let mut rounds = std::thread::scope(|scope| {
        // However this closure ends (even if the asking thread cannot be
        // started), the answering thread stops before the scope waits
        // for it.
        let _stop = StopOnDrop(&stop);
        scope.spawn(|| {
            pin(1);
            answer(&line.0, &stop);
        });
        let asked = scope.spawn(|| {
            pin(0);
            ask(&line.0, span)
        });
        asked.join().unwrap_or_default()
    });
    rounds.sort_by(f64::total_cmp);
    rounds.get(rounds.len() / 2).copied()
}

/// Raises its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Spins between two looks at the clock while waiting for an answer.
const SPINS_PER_CLOCK_READ: u32 = 4096;

/// The asking side: writes odd values and waits for the even answer,
/// `TRIPS_PER_ROUND` times a round, for about `span`; returns each
/// round's time per trip in nanoseconds. Gives up, without the round
/// under way, once [`CORE_TO_CORE_LIMIT`] has passed.
fn ask(line: &AtomicU64, span: Duration) -> Vec<f64> {
    let start = Instant::now();
    let limit = start + CORE_TO_CORE_LIMIT;
    let mut rounds = Vec::new();
    let mut value = 0u64;
    while start.elapsed() < span {
        let round = Instant::now();
        let mut spins = 0u32;
        for _ in 0..TRIPS_PER_ROUND {
            line.store(value + 1, Ordering::Release);
            while line.load(Ordering::Acquire) != value + 2 {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins % SPINS_PER_CLOCK_READ == 0 && Instant::now() > limit {
                    return rounds;
                }
            }
            value += 2;
        }
        if Instant::now() > limit {
            break;
        }
        rounds.push(round.elapsed().as_nanos() as f64 / TRIPS_PER_ROUND as f64);
    }
    rounds
}

/// The answering side: turns each odd value into the next even one
/// until `stop`.
fn answer(line: &AtomicU64, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let value = line.load(Ordering::Acquire);
        if value % 2 == 1 {
            line.store(value + 1, Ordering::Release);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side that never hears an answer (its partner never started, or
    /// shares its CPU and never runs) gives up once the limit passes,
    /// and counts no round.
    #[test]
    fn asking_with_nobody_answering_gives_up_without_a_round() {
        let line = AtomicU64::new(0);
        assert!(ask(&line, Duration::from_millis(10)).is_empty());
    }

    /// A partner that answers, but only every 25 ms, makes no round
    /// either: the round would end past the limit.
    #[test]
    fn a_round_that_would_end_past_the_limit_is_not_counted() {
        let line = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let rounds = std::thread::scope(|scope| {
            let _stop = StopOnDrop(&stop);
            scope.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(25));
                    let value = line.load(Ordering::Acquire);
                    if value % 2 == 1 {
                        line.store(value + 1, Ordering::Release);
                    }
                }
            });
            ask(&line, Duration::from_millis(10))
        });
        assert!(rounds.is_empty(), "{rounds:?}");
    }

    #[test]
    fn the_two_sides_time_their_rounds() {
        if cpus().len() < 2 {
            return;
        }
        let round_trip = core_to_core_ns(Duration::from_millis(20));
        assert!(round_trip.is_some_and(|ns| ns > 0.0), "{round_trip:?}");
    }
}
