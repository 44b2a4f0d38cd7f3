//! Congestion window arithmetic: slow start and congestion avoidance
//! (RFC 5681 section 3.1, with appropriate byte counting, L = 1 SMSS, as
//! RFC 5681 allows), fast recovery (RFC 5681 section 3.2 with NewReno's
//! partial ACKs, RFC 6582 section 3.2) and the initial window (RFC 6928).
//!
//! When SACK is in use the window is not inflated during recovery; the
//! sender counts the pipe instead (RFC 6675 section 5).

/// The congestion state of a NewReno sender, in octets.
#[derive(Debug, Clone)]
pub struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    smss: u32,
    /// Octets acknowledged in congestion avoidance and not yet turned into
    /// window growth.
    acked_in_avoidance: u32,
}

impl NewReno {
    /// The state at the start of a connection: `initial_segments` segments
    /// of `smss`, capped to 14600 octets as RFC 6928 section 2 asks but
    /// never below two segments.
    pub fn new(smss: u32, initial_segments: u32) -> Self {
        let smss = smss.max(1);
        let initial = (initial_segments.saturating_mul(smss)).min((2 * smss).max(14600));
        NewReno {
            cwnd: initial.max(smss),
            ssthresh: u32::MAX,
            smss,
            acked_in_avoidance: 0,
        }
    }

    /// The congestion window.
    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow start threshold.
    pub fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// A new sender MSS (RFC 5681 section 3.1 uses SMSS throughout).
    pub fn set_smss(&mut self, smss: u32) {
        self.smss = smss.max(1);
        self.cwnd = self.cwnd.max(self.smss);
    }

    /// New data was acknowledged outside recovery.
    pub fn on_ack(&mut self, acked: u32) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(acked.min(self.smss));
        } else {
            self.acked_in_avoidance = self.acked_in_avoidance.saturating_add(acked);
            if self.acked_in_avoidance >= self.cwnd {
                self.acked_in_avoidance -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.smss);
            }
        }
    }

    /// Loss detected by duplicate ACKs or SACK: halve (RFC 5681 eq. 4).
    /// Without SACK the window is inflated by the three segments that left
    /// the network.
    pub fn enter_recovery(&mut self, flight: u32, sack: bool) {
        self.ssthresh = (flight / 2).max(2 * self.smss);
        self.cwnd = if sack {
            self.ssthresh
        } else {
            self.ssthresh + 3 * self.smss
        };
        self.acked_in_avoidance = 0;
    }

    /// A further duplicate ACK during recovery without SACK.
    pub fn inflate(&mut self) {
        self.cwnd = self.cwnd.saturating_add(self.smss);
    }

    /// A partial ACK during recovery without SACK (RFC 6582 section 3.2
    /// step 5): deflate by the amount acknowledged, add back one segment.
    pub fn partial_ack(&mut self, acked: u32) {
        self.cwnd = self.cwnd.saturating_sub(acked);
        if acked >= self.smss {
            self.cwnd = self.cwnd.saturating_add(self.smss);
        }
        self.cwnd = self.cwnd.max(self.smss);
    }

    /// The ACK that ends recovery (RFC 6582 section 3.2 step 3).
    pub fn exit_recovery(&mut self, flight: u32) {
        self.cwnd = self.ssthresh.min(flight.max(self.smss) + self.smss);
    }

    /// The retransmission timer expired (RFC 5681 eq. 4 and the loss
    /// window of section 3.1).
    pub fn on_timeout(&mut self, flight: u32) {
        self.ssthresh = (flight / 2).max(2 * self.smss);
        self.cwnd = self.smss;
        self.acked_in_avoidance = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_avoidance_recovery_timeout() {
        let mut cc = NewReno::new(1000, 10);
        assert_eq!(cc.cwnd(), 10_000);
        cc.on_ack(3000);
        assert_eq!(cc.cwnd(), 11_000);
        cc.enter_recovery(11_000, false);
        assert_eq!(cc.ssthresh(), 5500);
        assert_eq!(cc.cwnd(), 8500);
        cc.inflate();
        cc.partial_ack(2000);
        assert_eq!(cc.cwnd(), 8500);
        cc.exit_recovery(4000);
        assert_eq!(cc.cwnd(), 5000);
        cc.on_ack(1000);
        assert_eq!(cc.cwnd(), 6000);
        for _ in 0..5 {
            cc.on_ack(1000);
        }
        assert_eq!(cc.cwnd(), 6000);
        cc.on_ack(1000);
        assert_eq!(cc.cwnd(), 7000);
        cc.on_timeout(6000);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1000, 3000));
    }
}
