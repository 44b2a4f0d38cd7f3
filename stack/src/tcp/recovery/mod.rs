//! Loss detection, loss recovery and congestion control: the sender's
//! algorithms that read ACKs and decide what to send again and how much
//! to send. The connection (`connection/`) runs them.
//!
//! - `congestion.rs`: the congestion window, NewReno (RFC 5681, RFC 6582)
//!   or CUBIC (RFC 9438), with appropriate byte counting in slow start
//!   (RFC 3465) and the undo of spurious reductions (RFC 4015).
//! - `ack_heuristic.rs`: RFC 6582 section 4.1, whether duplicate ACKs
//!   after a timeout tell of a new loss.
//! - `limited_transmit.rs`: limited transmit (RFC 3042 section 2).
//! - `reordering.rs`: the duplicate threshold (RFC 6675's DupThresh)
//!   learned from the reordering the path has shown.
//! - `spurious.rs`: spurious fast retransmits and timeouts found with
//!   D-SACK (RFC 2883 section 4, RFC 3708 section 3) and undone.
//! - `frto.rs`: F-RTO (RFC 5682), spurious retransmission timeouts found
//!   before the flight is resent.
//! - `tail_probe.rs`: tail loss probes (RFC 8985 section 7).

pub(super) mod ack_heuristic;
pub(super) mod congestion;
pub(super) mod frto;
pub(super) mod limited_transmit;
pub(super) mod reordering;
pub(super) mod spurious;
pub(super) mod tail_probe;
