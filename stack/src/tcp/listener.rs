//! Passive open (RFC 9293 section 3.10.7.2, the LISTEN state): a SYN
//! becomes a connection in SYN-RECEIVED, anything else is answered as
//! LISTEN answers it. The number of connections still in SYN-RECEIVED is
//! bounded; SYNs beyond the bound are dropped (there are no SYN cookies).
//!
//! The listener keeps no per-connection state: each connection it creates
//! holds a slot of the half-open count and gives it back when its handshake
//! completes or fails, or when it is dropped.

use crate::tcp::config::Config;
use crate::tcp::connection::{Connection, Endpoint, HalfOpenSlot};
use crate::tcp::isn::IsnGenerator;
use crate::tcp::segment::{reset_reply, Segment};
use crate::tcp::timers::time::Instant;
use smoltcp::wire::{Ipv4Address, TcpControl, TcpRepr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What the listener made of a segment.
#[derive(Debug)]
pub enum ListenOutcome {
    /// A new connection in SYN-RECEIVED: put it in the connection table
    /// and poll it, its SYN-ACK is ready.
    Accepted(Box<Connection>),
    /// Send this reset.
    Reset(Segment<'static>),
    /// A SYN dropped: too many handshakes in progress.
    Dropped,
    /// Nothing to do (a reset, or not for this listener).
    Ignored,
}

/// Counters of a listener.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Connections created.
    pub accepted: u64,
    /// SYNs dropped because of the half-open bound.
    pub dropped: u64,
    /// Resets sent.
    pub resets: u64,
}

/// A passive-open endpoint.
#[derive(Debug)]
pub struct Listener {
    local: Endpoint,
    config: Config,
    isn: IsnGenerator,
    max_half_open: usize,
    half_open: Arc<AtomicUsize>,
    stats: ListenerStats,
}

impl Listener {
    /// Listens on `local`; new connections use `config` and ISNs from
    /// `isn`; at most `max_half_open` handshakes run at once.
    pub fn new(local: Endpoint, config: Config, isn: IsnGenerator, max_half_open: usize) -> Self {
        Listener {
            local,
            config,
            isn,
            max_half_open,
            half_open: Arc::new(AtomicUsize::new(0)),
            stats: ListenerStats::default(),
        }
    }

    /// Handshakes in progress.
    pub fn half_open(&self) -> usize {
        self.half_open.load(Ordering::Acquire)
    }

    /// Counters.
    pub fn stats(&self) -> &ListenerStats {
        &self.stats
    }

    /// Takes a segment from `src` to `dst` that matches no connection.
    pub fn on_segment(
        &mut self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        seg: &TcpRepr<'_>,
    ) -> ListenOutcome {
        if seg.dst_port != self.local.port || dst != self.local.addr {
            return ListenOutcome::Ignored;
        }
        let is_syn = seg.control == TcpControl::Syn && seg.ack_number.is_none();
        if !is_syn {
            return match reset_reply(src, dst, seg).filter(|_| seg.ack_number.is_some()) {
                Some(rst) => {
                    self.stats.resets += 1;
                    ListenOutcome::Reset(rst)
                }
                None => ListenOutcome::Ignored,
            };
        }
        if self.half_open() >= self.max_half_open {
            self.stats.dropped += 1;
            return ListenOutcome::Dropped;
        }
        let remote = Endpoint::new(src, seg.src_port);
        let isn = self.isn.isn(now, self.local, remote);
        let mut conn = Connection::accept(self.config.clone(), self.local, remote, isn, now, seg);
        conn.hold_half_open_slot(HalfOpenSlot::take(&self.half_open));
        self.stats.accepted += 1;
        ListenOutcome::Accepted(Box::new(conn))
    }
}
