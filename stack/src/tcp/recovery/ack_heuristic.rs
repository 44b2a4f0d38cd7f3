//! RFC 6582 section 4.1, the ACK heuristic: after a retransmission
//! timeout on a connection without SACK, whether three duplicate ACKs
//! that arrive before SND.UNA passes `recover` (the highest sequence sent
//! when the timer fired) tell of a new loss.
//!
//! Section 3.2 step 1 starts no fast retransmit before SND.UNA passes
//! `recover`: the go-back-N after the timeout resends segments the
//! receiver may already hold above the hole, and each such copy draws a
//! duplicate ACK that is no sign of loss. But when one of the go-back-N
//! retransmissions is itself lost, the ones after it draw duplicate ACKs
//! too, and waiting for the next timeout costs a backed-off RTO. The two
//! differ in the cumulative ACK before the duplicates: a retransmission
//! filling a hole below segments the receiver held makes it jump over
//! them, while retransmissions of segments it never had advance it a
//! segment or two at a time. So the duplicates tell of a loss when the
//! last advance (`highest_ack - prev_highest_ack`) was at most four
//! segments and the congestion window is above one segment (it is one
//! segment right after the timeout, before any ACK advanced).
//!
//! The timestamp heuristic of section 4.2 is not used. It would add the
//! cases where this one errs: lost ACKs making the cumulative ACK jump
//! (taken for unnecessary retransmissions: a timeout as before), and at
//! most four held segments (taken for a loss: one needless fast
//! retransmit). But it asks the echo of the last advancing ACK to equal
//! the timestamp of the segment that ACK covered last, and a receiver
//! delaying its ACK echoes the first of the two segments it acknowledges
//! (RFC 7323 section 4.3): at our 1 ms tick the two differ whenever the
//! pair straddles a tick, and a lost retransmission would wait for the
//! timeout again. It also applies only where the peer offers timestamps.

/// The advance of the cumulative ACK that the heuristic judges by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckHeuristic {
    /// `highest_ack - prev_highest_ack`: the sequence space the last
    /// advancing ACK covered.
    last_advance: u64,
}

/// The most segments the last advance may cover for duplicate ACKs to
/// tell of a loss (RFC 6582 section 4.1: 4*SMSS).
const MAX_ADVANCE_SEGMENTS: u64 = 4;

impl AckHeuristic {
    /// The cumulative ACK advanced over `octets` of sequence space.
    pub fn advanced(&mut self, octets: u64) {
        self.last_advance = octets;
    }

    /// Whether duplicate ACKs before `recover` indicate a lost segment
    /// (step 2* of section 4.1), with congestion window `cwnd` and sender
    /// MSS `smss`; if not, they likely come from unnecessary
    /// retransmissions.
    pub fn indicates_loss(&self, cwnd: u32, smss: u32) -> bool {
        cwnd > smss && self.last_advance <= MAX_ADVANCE_SEGMENTS * u64::from(smss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_advances_with_an_open_window_indicate_a_loss() {
        let mut heuristic = AckHeuristic::default();
        heuristic.advanced(2000);
        assert!(heuristic.indicates_loss(3000, 1000));
        heuristic.advanced(4000);
        assert!(heuristic.indicates_loss(1001, 1000), "at most 4*SMSS");
    }

    #[test]
    fn a_jump_or_the_loss_window_indicates_unnecessary_retransmissions() {
        let mut heuristic = AckHeuristic::default();
        heuristic.advanced(4001);
        assert!(!heuristic.indicates_loss(10_000, 1000), "a jump");
        heuristic.advanced(1000);
        assert!(!heuristic.indicates_loss(1000, 1000), "one segment");
    }
}
