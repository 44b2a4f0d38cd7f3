//! The send half's state: what is queued and what is in flight.
//!
//! - `queue.rs`: the send queue, a ring of unacknowledged octets divided
//!   into records (MPA FPDUs) and byte stream, cut into segments only at
//!   record boundaries (RFC 5044 Appendix A.1), records holding runs of
//!   registered memory by reference (zero-copy transmit).
//! - `memory.rs`: the ring's memory, shared with transmit paths that send
//!   from it in place (the retransmission queue of RFC 9293 section 3.8),
//!   and its access contract.
//! - `flight.rs`: the segments in flight on their original boundaries,
//!   kept for retransmission (RFC 5044 Appendix A.1), and the SACK
//!   scoreboard of RFC 6675 sections 2-5 (IsLost, the pipe, NextSeg).

pub(super) mod flight;
pub(super) mod memory;
pub(super) mod queue;
