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
//!
//! The TCP header's format (parsing, options, emission with the checksum,
//! RFC 9293 section 3.1) is [`crate::wire::tcp`]'s; [`parse`],
//! [`parse_verified`] and [`ParseError`] are re-exported from it. The
//! engine's modules, by concern:
//!
//! | module | what | RFC |
//! | --- | --- | --- |
//! | `connection/` | one connection's state machine, input, output, expiries | RFC 9293 3.3.2, 3.10; RFC 5961; RFC 7323 |
//! | `send/` | the send queue of records, its shared memory, the segments in flight and the SACK scoreboard | RFC 5044 A.1; RFC 9293 3.8; RFC 6675 2-5 |
//! | `receive/` | text processing, the consumer hand-off, reassembly, SACK blocks | RFC 9293 3.10.7.4; RFC 5044 A.3, A.5.2; RFC 2018 4; RFC 2883 4 |
//! | `recovery/` | congestion control, loss recovery and the undo of spurious recoveries | RFC 5681; RFC 6582; RFC 9438; RFC 3465; RFC 3042; RFC 3708; RFC 4015; RFC 5682; RFC 8985 7 |
//! | `timers/` | the caller's clock, the RTO, a connection's deadlines, the timing wheel | RFC 6298; RFC 9293 3.8 |
//! | `ring_block.rs` | the rings' memory, recycled between connections | |
//! | `segment.rs` | the outgoing [`Segment`], the reset for no connection | RFC 9293 3.1, 3.10.7.1 |
//! | `listener.rs` | passive open | RFC 9293 3.10.7.2 |
//! | `config.rs`, `isn.rs`, `seq.rs` | settings, initial sequence numbers, sequence arithmetic | RFC 6528 3; RFC 9293 3.4 |
//! | [`sim`] | two engines over a lossy in-memory link | |

mod config;
mod connection;
mod isn;
mod listener;
mod receive;
mod recovery;
mod ring_block;
mod segment;
mod send;
mod seq;
pub mod sim;
mod timers;

pub use crate::wire::tcp::{parse, parse_verified, ParseError};
pub use config::{Config, KeepAlive};
pub use connection::{Connection, Endpoint, Event, SendError, State, Stats};
pub use isn::IsnGenerator;
pub use listener::{ListenOutcome, Listener, ListenerStats};
pub use receive::receiver::{ByteStream, Consumer, Disposition, WindowPolicy};
pub use recovery::congestion::CongestionControl;
pub use segment::{bare_header, reset_reply, BufferTooSmall, Payload, References, Segment};
pub use send::memory::SendMemory;
pub use seq::Seq;
pub use timers::time::{Duration, Instant};
pub use timers::wheel::TimerWheel;
