//! The MPA-aware TCP engine: sans-IO, deterministic, one connection at a
//! time.
//!
//! The engine implements RFC 9293 with RFC 5961, RFC 7323, RFC 2018, RFC
//! 6675, RFC 5681/6582 or RFC 9438 (CUBIC, chosen per connection with
//! [`CongestionControl`]), RFC 6298 and RFC 6928, D-SACK (RFC 2883) with
//! the undo of spurious fast recoveries and timeouts (RFC 3708, RFC
//! 4015) and a duplicate threshold learned from the path's reordering,
//! F-RTO (RFC 5682) undoing spurious retransmission timeouts, limited
//! transmit (RFC 3042) and appropriate byte counting in slow start (RFC
//! 3465), and the MPA-aware behaviour of RFC 5044 Appendix A: the send
//! queue holds records (FPDUs) and cuts segments only at their boundaries
//! (A.1), retransmissions keep the original segments, and every
//! acceptable segment's new data goes to a [`Consumer`] at once, in order
//! or not, with its stream position (A.3).
//!
//! How a dataplane drives it:
//!
//! 1. Parse a received IPv4 payload with [`parse`]; look the 4-tuple up in
//!    its own table; give the segment to [`Connection::on_segment`], or to
//!    a [`Listener`], or answer with [`reset_reply`].
//! 2. After any input, timer or send call, take segments with
//!    [`Connection::poll_transmit`] until `None` and write each with
//!    [`Segment::emit`] (header, payload slices, checksum).
//! 3. Keep the connection in a [`TimerWheel`] at [`Connection::poll_at`];
//!    when it fires, call [`Connection::on_timer`], then poll again.
//! 4. Read [`Connection::poll_event`]; drop the connection once
//!    [`Connection::is_closed`].
//!
//! Time is an [`Instant`] in microseconds passed by the caller; ISNs come
//! from the caller, e.g. from an [`IsnGenerator`] (RFC 6528). [`sim`] runs
//! two engines over a lossy in-memory link.

mod ack_heuristic;
mod config;
mod congestion;
mod connection;
mod flight;
mod frto;
mod isn;
mod limited_transmit;
mod listener;
mod ranges;
mod reassembly;
mod recv;
mod reordering;
mod rtt;
mod sack;
mod segment;
mod send_memory;
mod send_queue;
mod seq;
pub mod sim;
mod spurious;
mod tail_probe;
mod time;
mod timer;
mod wheel;

pub use crate::wire::tcp::{parse, parse_verified, ParseError};
pub use config::{Config, KeepAlive};
pub use congestion::CongestionControl;
pub use connection::{Connection, Endpoint, Event, SendError, State, Stats};
pub use isn::IsnGenerator;
pub use listener::{ListenOutcome, Listener, ListenerStats};
pub use recv::{ByteStream, Consumer, Disposition, WindowPolicy};
pub use segment::{bare_header, reset_reply, BufferTooSmall, Payload, References, Segment};
pub use send_memory::SendMemory;
pub use seq::Seq;
pub use time::{Duration, Instant};
pub use wheel::TimerWheel;
