//! The clock the TCP engine runs on: microseconds since an epoch shared by
//! the control core and every dataplane core, so a connection's timers and
//! timestamps (RFC 7323 section 4) stay valid when it moves between them.

use std::time::Instant as WallInstant;

use uwarp_stack::tcp::Instant;

/// Converts the runtime's `std::time::Instant`s to engine time.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: WallInstant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        Clock {
            epoch: WallInstant::now(),
        }
    }

    /// Engine time at `now` (zero for instants before the epoch).
    pub fn at(&self, now: WallInstant) -> Instant {
        let micros = now.saturating_duration_since(self.epoch).as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}
