//! Tail loss probes (TLP, RFC 8985 section 7). When the last segments of
//! a flight are lost, no later segment arrives to draw SACKs or
//! duplicate ACKs, and on a path that has shown reordering NextSeg's
//! rules 3 and 4 are off, so the loss would wait for the RTO. About two
//! round trips after the last transmission the sender instead sends one
//! probe: a new segment if the peer's window allows one, else the last
//! segment again, whole, on its original boundaries (segments keep their
//! FPDU boundaries, RFC 5044 A.1). The ACK for the probe either shows it
//! was not needed (it acknowledges everything, or a D-SACK reports the
//! resent segment as a duplicate), or repaired a loss, or, SACKing the
//! probe above holes, shows the holes lost.
//!
//! This module holds the timeout and the probe episode (TLP.end_seq and
//! TLP.is_retrans of section 7.4); the connection decides when to probe.

use crate::tcp::timers::time::Duration;
use core::ops::Range;

/// The peer's worst-case delayed ACK (WCDelAckT, RFC 8985 section 7.2),
/// added when one segment is in flight: its ACK may be held that long.
pub const WORST_CASE_DELAYED_ACK: Duration = Duration::from_millis(200);

/// What a probe waits beyond two round trips when several segments are
/// in flight, as Linux's `TCP_TIMEOUT_MIN`: where the round trip is well
/// under a millisecond, an ACK delayed by our 1 ms delayed-ACK timer or a
/// busy host would otherwise draw a needless probe.
pub const SLACK: Duration = Duration::from_millis(2);

/// The probe timeout of RFC 8985 section 7.2: two smoothed round trips,
/// and the peer's delayed ACK when only one segment is in flight (else
/// [`SLACK`]).
pub fn probe_timeout(srtt: Duration, one_segment: bool) -> Duration {
    let allowance = if one_segment {
        WORST_CASE_DELAYED_ACK
    } else {
        SLACK
    };
    srtt.doubled() + allowance
}

/// A probe sent whose outcome is not known yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailProbe {
    /// The probe's data, as stream positions.
    pub data: Range<u64>,
    /// SND.NXT (a sequence position) just after the probe (TLP.end_seq).
    pub end: u64,
    /// The probe resent the last segment rather than sending new data
    /// (TLP.is_retrans).
    pub retransmission: bool,
}

/// What an ACK says of a probe (RFC 8985 section 7.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not known yet.
    Open,
    /// The probe was new data, or a needless retransmission (its D-SACK
    /// came): the episode is over and nothing was lost.
    Over,
    /// The probe's retransmission was acknowledged with data beyond it and
    /// no D-SACK for it: it repaired a loss, which calls for a congestion
    /// response.
    Repaired,
}

impl TailProbe {
    /// Whether `dsack` reports the probe's data as received twice: the
    /// probe resent a segment that had arrived.
    pub fn reported_twice(&self, dsack: Option<&Range<u64>>) -> bool {
        self.retransmission
            && !self.data.is_empty()
            && dsack.is_some_and(|b| b.start <= self.data.start && self.data.end <= b.end)
    }

    /// The verdict of an ACK that brings SND.UNA to `una` (a sequence
    /// position) with `dsack`, its D-SACK block if any.
    pub fn on_ack(&self, una: u64, dsack: Option<&Range<u64>>) -> Verdict {
        if self.reported_twice(dsack) {
            return Verdict::Over;
        }
        if una < self.end {
            return Verdict::Open;
        }
        if !self.retransmission {
            Verdict::Over
        } else if una > self.end {
            Verdict::Repaired
        } else {
            // Everything up to the probe is acknowledged: its D-SACK may
            // still come.
            Verdict::Open
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(retransmission: bool) -> TailProbe {
        TailProbe {
            data: 100..200,
            end: 200,
            retransmission,
        }
    }

    #[test]
    fn the_timeout_allows_for_a_delayed_ack_of_a_lone_segment() {
        let srtt = Duration::from_micros(300);
        assert_eq!(
            probe_timeout(srtt, false),
            Duration::from_micros(600) + SLACK
        );
        assert_eq!(
            probe_timeout(srtt, true),
            Duration::from_micros(600) + WORST_CASE_DELAYED_ACK
        );
    }

    #[test]
    fn verdicts_follow_section_7_4_2() {
        let dsack = 100..200;
        // New data delivered: over.
        assert_eq!(probe(false).on_ack(200, None), Verdict::Over);
        assert_eq!(probe(false).on_ack(150, None), Verdict::Open);
        // A retransmission reported as a duplicate: over, at or below
        // its end.
        assert_eq!(probe(true).on_ack(200, Some(&dsack)), Verdict::Over);
        assert_eq!(probe(true).on_ack(300, Some(&dsack)), Verdict::Over);
        // Acknowledged without a D-SACK: wait, until data beyond it is
        // acknowledged, which shows a repaired loss.
        assert_eq!(probe(true).on_ack(200, None), Verdict::Open);
        assert_eq!(probe(true).on_ack(201, None), Verdict::Repaired);
        // A D-SACK for other data proves nothing.
        assert_eq!(probe(true).on_ack(300, Some(&(0..50))), Verdict::Repaired);
    }
}
