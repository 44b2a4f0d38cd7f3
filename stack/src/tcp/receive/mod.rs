//! The receive half.
//!
//! - `receiver.rs`: segment text processing (RFC 9293 section 3.10.7.4,
//!   step 7), the hand-off of every new octet to the [`Consumer`] at once,
//!   in order or not (RFC 5044 Appendix A.3), the peer's FIN, the
//!   advertised window and receiver-side silly window avoidance (RFC 9293
//!   section 3.8.6.2.2).
//! - `reassembly.rs`: the bounded reassembly buffer of RFC 5044 Appendix
//!   A.5.2 for data the consumer declined.
//! - `sack.rs`: the SACK blocks the receiver reports (RFC 2018 section 4)
//!   and its D-SACK blocks (RFC 2883 section 4).
//! - `ranges.rs`: the bounded set of disjoint ranges that out-of-order
//!   data, the reassembly buffer and the SACK blocks are kept in.
//!
//! [`Consumer`]: crate::tcp::Consumer

pub(super) mod ranges;
pub(super) mod reassembly;
pub(super) mod receiver;
pub(super) mod sack;
