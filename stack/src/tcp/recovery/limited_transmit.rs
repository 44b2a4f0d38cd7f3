//! Limited transmit (RFC 3042 section 2) on connections without SACK.
//!
//! A small window with one segment lost may draw fewer than the three
//! duplicate ACKs fast retransmit needs (RFC 5681 section 3.2), and the
//! loss then waits for the retransmission timer. So the first and the
//! second duplicate ACK each let one new segment go beyond the congestion
//! window, if the peer's window allows it: FlightSize stays within cwnd +
//! 2*SMSS, and cwnd itself does not change. Should the third duplicate
//! ACK come, the segments sent this way are not counted in the FlightSize
//! that sets ssthresh (RFC 5681 section 3.2 step 2).
//!
//! With SACK nothing is added: each duplicate ACK's SACK block takes a
//! segment out of the pipe, which leaves room for a new one in the
//! congestion window (RFC 6675 section 5 step C), the same effect.

/// The duplicate ACKs that each allow one more segment: the first two.
const DUP_ACKS: u32 = 2;

/// What limited transmit sent since SND.UNA last advanced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitedTransmit {
    /// Octets sent beyond the congestion window.
    beyond_cwnd: u64,
}

impl LimitedTransmit {
    /// The room added to the congestion window after `dupacks` duplicate
    /// ACKs: one `smss` for each of the first two.
    pub fn room(dupacks: u32, smss: u64) -> u64 {
        u64::from(dupacks.min(DUP_ACKS)) * smss
    }

    /// A new segment of `len` octets went out with `pipe` octets
    /// outstanding before it and congestion window `cwnd`: the part beyond
    /// the window was limited transmit's.
    pub fn sent(&mut self, pipe: u64, len: u64, cwnd: u64) {
        self.beyond_cwnd += (pipe + len).saturating_sub(cwnd).min(len);
    }

    /// FlightSize `flight` without what limited transmit sent, for
    /// ssthresh at a fast retransmit.
    pub fn flight_without(&self, flight: u32) -> u32 {
        let sent = self.beyond_cwnd.min(u64::from(u32::MAX)) as u32;
        flight.saturating_sub(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_segment_for_each_of_the_first_two_duplicate_acks() {
        let room: Vec<u64> = (0..5).map(|d| LimitedTransmit::room(d, 1000)).collect();
        assert_eq!(room, [0, 1000, 2000, 2000, 2000]);
    }

    #[test]
    fn only_octets_beyond_the_window_leave_flight_size() {
        let mut lt = LimitedTransmit::default();
        // Within the window: not limited transmit's.
        lt.sent(2000, 1000, 4000);
        assert_eq!(lt.flight_without(3000), 3000);
        // Half of it within the window, then a whole segment beyond.
        lt.sent(3500, 1000, 4000);
        lt.sent(4500, 1000, 4000);
        assert_eq!(lt.flight_without(5500), 4000);
        assert_eq!(lt.flight_without(1000), 0);
    }
}
