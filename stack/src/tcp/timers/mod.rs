//! Time and timers: the caller's clock, the deadlines of a connection and
//! the wheel a dataplane keeps connections in.
//!
//! - `time.rs`: the [`Instant`](crate::tcp::Instant) and
//!   [`Duration`](crate::tcp::Duration) the caller passes in (microseconds;
//!   RFC 6298 asks for a granularity of at most 100 ms).
//! - `rtt.rs`: the retransmission timeout from RTT samples (RFC 6298
//!   sections 2, 3 and 5; timestamp samples, RFC 7323 section 4).
//! - `timer.rs`: a connection's deadlines: retransmission (RFC 6298
//!   section 5), delayed ACK (RFC 9293 section 3.8.6.3), persist (section
//!   3.8.6.1), keep-alive (section 3.8.4), TIME-WAIT (section 3.6.1), the
//!   FIN-WAIT-2 timeout, the tail loss probe (RFC 8985 section 7) and the
//!   linger after a close.
//! - `wheel.rs`: the hashed timing wheel (Varghese and Lauck's scheme 6)
//!   that holds a core's connections by deadline.

pub(super) mod rtt;
pub(super) mod time;
pub(super) mod timer;
pub(super) mod wheel;
