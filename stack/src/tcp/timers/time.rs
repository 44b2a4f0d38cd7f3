//! The engine's clock: microsecond instants and durations supplied by the
//! caller.
//!
//! The engine never reads a clock. Every call that depends on time takes an
//! [`Instant`], so a dataplane passes its TSC-derived time and a test or the
//! simulator passes virtual time. RFC 6298 asks for a clock granularity of
//! at most 100 ms; microseconds let datacenter RTTs be measured.

use core::ops::{Add, Sub};

/// A point in time, in microseconds since an origin the caller chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

/// A span of time in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Instant {
    /// The instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// Microseconds since the origin.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);

    /// A duration of `micros` microseconds.
    pub const fn from_micros(micros: u64) -> Self {
        Duration(micros)
    }

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Duration(millis * 1_000)
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Duration(secs * 1_000_000)
    }

    /// The duration in microseconds.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Twice the duration, saturating (exponential backoff).
    pub const fn doubled(self) -> Duration {
        Duration(self.0.saturating_mul(2))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
}
