//! The retransmission timer's value (RFC 6298 sections 2 and 5).
//!
//! Samples come from segments sent once (Karn's algorithm, RFC 6298
//! section 3) or from timestamp echoes (RFC 7323 section 4); the caller
//! decides which. Backoff doubles the RTO on each expiry and a new sample
//! after new data is acknowledged clears it.

use crate::tcp::timers::time::Duration;

/// Clock granularity G of RFC 6298: one microsecond.
const GRANULARITY: Duration = Duration(1);

/// SRTT, RTTVAR and the resulting RTO with its backoff.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
}

impl RttEstimator {
    /// An estimator with no sample yet, whose RTO is `initial`.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            rto: initial.max(min).min(max),
            min,
            max,
        }
    }

    /// The smoothed RTT, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The current RTO, backoff included.
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// Takes an RTT measurement (RFC 6298 sections 2.2-2.3).
    pub fn sample(&mut self, rtt: Duration) {
        let (srtt, rttvar) = match self.srtt {
            None => (rtt, Duration(rtt.0 / 2)),
            Some(srtt) => {
                let delta = srtt.0.abs_diff(rtt.0);
                let rttvar = Duration((3 * self.rttvar.0 + delta) / 4);
                let srtt = Duration((7 * srtt.0 + rtt.0) / 8);
                (srtt, rttvar)
            }
        };
        self.srtt = Some(srtt);
        self.rttvar = rttvar;
        let variance = Duration(4 * rttvar.0).max(GRANULARITY);
        self.rto = (srtt + variance).max(self.min).min(self.max);
    }

    /// Doubles the RTO after the timer expired (RFC 6298 section 5.5).
    pub fn back_off(&mut self) {
        self.rto = self.rto.doubled().min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_then_smoothing_and_bounds() {
        let mut rtt = RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(5),
            Duration::from_secs(60),
        );
        assert_eq!(rtt.rto(), Duration::from_secs(1));
        rtt.sample(Duration::from_micros(100));
        // SRTT 100, RTTVAR 50: 100 + 200 = 300 us, raised to the 5 ms floor.
        assert_eq!(rtt.rto(), Duration::from_millis(5));
        rtt.sample(Duration::from_millis(20));
        assert!(rtt.rto() > Duration::from_millis(20));
        rtt.back_off();
        rtt.back_off();
        assert!(rtt.rto() <= Duration::from_secs(60));
    }
}
