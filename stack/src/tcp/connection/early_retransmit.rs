//! Early retransmit (RFC 5827 sections 2 and 3.1, segment-based; with
//! SACK as section 3.2 says, the SACKed segments above the oldest): the
//! duplicate threshold a loss is detected by, lowered for a flight of
//! fewer than four segments that no new data can follow, so its oldest
//! segment lost is resent by a fast retransmit rather than after a
//! retransmission timeout. A two-segment flight whose first segment is
//! lost, which no tail loss probe helps once the second is SACKed (RFC
//! 8985 section 7.2), is the case it is for: an RPC, an NVMe-oF command,
//! a small RDMA Write. The reordering mitigation (section 4) is in
//! [`crate::tcp::recovery::reordering`].

use super::Connection;
use crate::tcp::recovery::reordering::DUP_THRESH;

impl Connection {
    /// The duplicate ACKs, or with SACK the SACKed segments above a hole,
    /// that show a loss: the learned threshold with SACK, DupThresh
    /// without (nothing is learned), or early retransmit's if lower.
    pub(super) fn loss_threshold(&self) -> usize {
        let threshold = if self.opts.sack {
            self.reordering.threshold()
        } else {
            DUP_THRESH
        };
        self.early_threshold()
            .map_or(threshold, |early| early.min(threshold))
    }

    /// Early retransmit's threshold when it applies: when on
    /// (`Config::early_retransmit`), outside any recovery,
    /// with no previously unsent data that could go now (section 3.1),
    /// for a flight of two or three segments (see
    /// [`crate::tcp::recovery::reordering::Reordering::early_threshold`]).
    pub(super) fn early_threshold(&self) -> Option<usize> {
        if !self.config.early_retransmit || !self.may_enter_recovery() || !self.new_data_blocked() {
            return None;
        }
        self.reordering.early_threshold(self.flight.len())
    }

    /// Whether no new data can go out, whatever the congestion window:
    /// none is waiting (nor a FIN), the peer's window takes no segment of
    /// it, or Nagle holds back a last short piece while data is in flight
    /// (as Linux's `tcp_may_send_now` counts it).
    fn new_data_blocked(&self) -> bool {
        if !self.sends_new_data() {
            return true;
        }
        let unsent = self.send.end().saturating_sub(self.snd_nxt);
        if unsent == 0 {
            return !self.fin_queued;
        }
        let emss = self.emss() as u64;
        let nagle = self.nagle && unsent < emss && !self.fin_queued && !self.flight.is_empty();
        self.window_room() < unsent.min(emss) || nagle
    }
}
