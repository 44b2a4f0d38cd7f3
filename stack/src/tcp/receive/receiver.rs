//! The receive half: segment text processing (RFC 9293 section 3.10.7.4,
//! step 7), hand-off of every new octet to the consumer at once, in order
//! or not (RFC 5044 A.3), the left edge, the peer's FIN, the advertised
//! window and its receiver-side silly window avoidance (RFC 9293 section
//! 3.8.6.2.2).
//!
//! A retransmitted duplicate never reaches the consumer twice: only the
//! parts of a segment that fill gaps in what was received are offered.
//! Data the consumer declines goes to the bounded [`Reassembly`] buffer;
//! data that fits neither is treated as never received, so neither
//! acknowledged nor SACKed, and its retransmission is offered again.

use crate::tcp::receive::ranges::RangeSet;
use crate::tcp::receive::reassembly::Reassembly;
use crate::tcp::receive::sack::{SackHistory, MAX_BLOCKS};
use core::ops::Range;

/// What the consumer did with data offered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Placed; the engine keeps nothing but the fact it arrived.
    Consumed,
    /// Declined; the engine holds it in the reassembly buffer.
    Keep,
}

/// The receiver of a connection's data (MPA in Full Operation, or a
/// byte-stream reader).
pub trait Consumer {
    /// New data at stream position `pos` (0 is the first octet after the
    /// SYN). `in_order` means everything before `pos` has arrived.
    fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition;

    /// Everything before `left_edge` has arrived (RFC 5044 A.3 item 3).
    fn on_left_edge(&mut self, left_edge: u64);
}

/// A consumer that declines everything, for byte-stream use: data is read
/// from the connection's reassembly buffer.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteStream;

impl Consumer for ByteStream {
    fn on_data(&mut self, _pos: u64, _data: &[u8], _in_order: bool) -> Disposition {
        Disposition::Keep
    }

    fn on_left_edge(&mut self, _left_edge: u64) {}
}

/// Who decides the advertised receive window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPolicy {
    /// The free space of the reassembly buffer (byte-stream use).
    Buffer,
    /// A window the consumer chose, e.g. from its posted buffers.
    Fixed(u32),
}

/// What one segment's text did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Octets newly received.
    pub new: u64,
    /// The left edge moved.
    pub advanced: bool,
    /// Data arrived beyond the left edge, or a gap remains.
    pub out_of_order: bool,
    /// Declined octets the reassembly buffer had no room for: not
    /// received, and offered again when retransmitted.
    pub declined_dropped: u64,
    /// The first octets of the segment that had arrived before, beyond
    /// the left edge.
    pub duplicate: Option<Range<u64>>,
}

/// The largest window RFC 7323 allows.
const MAX_WINDOW: u64 = 1 << 30;

/// Receive sequence space in stream positions.
#[derive(Debug)]
pub struct Receiver {
    left_edge: u64,
    ooo: RangeSet,
    buffer: Reassembly,
    history: SackHistory,
    fin_at: Option<u64>,
    fin_received: bool,
    right_edge: u64,
    policy: WindowPolicy,
}

impl Receiver {
    /// A receiver whose reassembly buffer holds `capacity` octets in at
    /// most `max_ranges` runs.
    pub fn new(capacity: usize, max_ranges: usize) -> Self {
        let buffer = Reassembly::new(capacity, max_ranges);
        Receiver {
            left_edge: 0,
            ooo: RangeSet::new(max_ranges),
            right_edge: 0,
            buffer,
            history: SackHistory::default(),
            fin_at: None,
            fin_received: false,
            policy: WindowPolicy::Buffer,
        }
    }

    /// Position of RCV.NXT's data octet: everything before it arrived.
    pub fn left_edge(&self) -> u64 {
        self.left_edge
    }

    /// Whether the peer's FIN arrived in order.
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    /// Positions of RCV.NXT in sequence space (data plus the FIN).
    pub fn next_position(&self) -> u64 {
        self.left_edge + u64::from(self.fin_received)
    }

    /// RCV.WND as last advertised.
    pub fn window(&self) -> u64 {
        self.right_edge.saturating_sub(self.left_edge)
    }

    /// Sets the window policy.
    pub fn set_policy(&mut self, policy: WindowPolicy) {
        self.policy = policy;
    }

    fn offered_window(&self) -> u64 {
        let window = match self.policy {
            WindowPolicy::Buffer => self.buffer.limit().saturating_sub(self.left_edge),
            WindowPolicy::Fixed(window) => u64::from(window),
        };
        window.min(MAX_WINDOW)
    }

    /// Whether advertising now would open the window by at least `step`
    /// (a window update is worth sending).
    pub fn window_opens_by(&self, step: u64) -> bool {
        self.left_edge + self.offered_window() >= self.right_edge + step
    }

    /// The window to advertise: the policy's, moved only by at least
    /// `min(mss, buffer/2)` (silly window avoidance) and never shrinking
    /// the right edge. Returns RCV.WND.
    pub fn advertise(&mut self, mss: u64) -> u64 {
        let step = mss.min(self.buffer.capacity() as u64 / 2).max(1);
        let candidate = self.left_edge + self.offered_window();
        if candidate >= self.right_edge + step || self.window() == 0 && candidate > self.right_edge
        {
            self.right_edge = candidate;
        }
        self.window()
    }

    /// Takes the text of a segment starting at `pos` (clipped to the
    /// window) and a FIN after it. Only new octets go to `consumer`.
    pub fn receive<C: Consumer + ?Sized>(
        &mut self,
        pos: u64,
        data: &[u8],
        fin: bool,
        consumer: &mut C,
    ) -> Arrival {
        let mut arrival = Arrival::default();
        let before = self.left_edge;
        let limit = self.right_edge.max(self.left_edge);
        let end = pos + data.len() as u64;
        let span = pos.max(self.left_edge)..end.min(limit);
        arrival.duplicate = self.ooo.first_overlap(&span);
        let mut cursor = span.start;
        while !self.fin_received {
            let Some(gap) = self.ooo.next_gap(cursor.max(self.left_edge), span.end) else {
                break;
            };
            let piece = &data[(gap.start - pos) as usize..(gap.end - pos) as usize];
            let (taken, dropped) = self.take_piece(gap.start, piece, consumer);
            arrival.new += taken;
            arrival.declined_dropped += dropped;
            cursor = gap.end;
        }
        // The latest FIN names the end of the stream; one that data has
        // since gone past was wrong (forged, or the peer's mistake), and
        // `absorb` forgets it.
        if fin && end <= limit && !self.fin_received {
            self.fin_at = Some(end);
        }
        self.absorb();
        arrival.advanced = self.left_edge > before;
        arrival.out_of_order = pos > before || !self.ooo.is_empty();
        if arrival.advanced {
            self.buffer.settle(self.left_edge);
            consumer.on_left_edge(self.left_edge);
        }
        arrival
    }

    /// Offers one new piece; returns the octets now counted as received
    /// and those declined that did not fit. A piece that would exceed the
    /// out-of-order range limit is not offered at all.
    fn take_piece<C: Consumer + ?Sized>(
        &mut self,
        start: u64,
        piece: &[u8],
        consumer: &mut C,
    ) -> (u64, u64) {
        let in_order = start == self.left_edge;
        let probe = start..start + piece.len() as u64;
        if !in_order && !self.ooo.can_insert(&probe) {
            return (0, 0);
        }
        let taken = match consumer.on_data(start, piece, in_order) {
            Disposition::Consumed => piece.len(),
            Disposition::Keep => self.buffer.store(start, piece),
        } as u64;
        let dropped = piece.len() as u64 - taken;
        let received = start..start + taken;
        if received.is_empty() {
            return (0, dropped);
        }
        if in_order {
            self.left_edge = received.end;
            self.absorb();
        } else if self.ooo.insert(received.clone()) {
            self.history.arrived(received.start);
        }
        (taken, dropped)
    }

    /// Moves the left edge over out-of-order data that became contiguous,
    /// and over the FIN.
    fn absorb(&mut self) {
        while let Some(first) = self.ooo.first().filter(|r| r.start <= self.left_edge) {
            self.left_edge = self.left_edge.max(first.end);
            self.ooo.remove_below(self.left_edge);
        }
        match self.fin_at {
            Some(at) if at == self.left_edge => self.fin_received = true,
            Some(at) if at < self.left_edge => self.fin_at = None,
            _ => {}
        }
    }

    /// Octets at `range` arrived again: the next SACK option reports them
    /// in a D-SACK block (RFC 2883).
    pub fn report_duplicate(&mut self, range: Range<u64>) {
        self.history.duplicate(range);
    }

    /// A SACK option carried the D-SACK block, if there was one; returns
    /// whether there was.
    pub fn duplicate_reported(&mut self) -> bool {
        self.history.duplicate_reported()
    }

    /// Whether a SACK option has anything to carry: out-of-order data
    /// held, or a duplicate to report.
    pub fn has_sack_blocks(&self) -> bool {
        self.history.any(&self.ooo)
    }

    /// SACK blocks for out-of-order data, newest first (RFC 2018), after
    /// a D-SACK block when a duplicate is to be reported (RFC 2883).
    pub fn sack_blocks(&self) -> [Option<Range<u64>>; MAX_BLOCKS] {
        self.history.blocks(&self.ooo)
    }

    /// The oldest held in-order data, with its position.
    pub fn readable(&self) -> Option<(u64, &[u8])> {
        self.buffer.readable(self.left_edge)
    }

    /// In-order octets held and not yet read.
    pub fn ready(&self) -> usize {
        self.buffer.ready(self.left_edge)
    }

    /// The application read everything held below `pos`.
    pub fn release(&mut self, pos: u64) {
        self.buffer.release(pos, self.left_edge);
    }

    /// Drops the reassembly buffer's octets and gives its memory back
    /// ([`Reassembly::free_ring`]); the window already offered stays
    /// offered, since the right edge never moves back.
    pub fn free_buffer(&mut self) {
        self.buffer.free_ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::sim::Recorder;

    #[test]
    fn offers_only_new_octets_and_advances() {
        let mut rx = Receiver::new(100, 8);
        let mut c = Recorder {
            consume: true,
            ..Recorder::default()
        };
        assert_eq!(rx.advertise(10), 100);
        rx.receive(10, &[1; 10], false, &mut c);
        assert_eq!(rx.sack_blocks()[0], Some(10..20));
        let arrival = rx.receive(0, &[0; 30], true, &mut c);
        assert!(arrival.advanced);
        assert_eq!(arrival.new, 20);
        assert_eq!(
            c.offered
                .iter()
                .map(|(p, d, o)| (*p, d.len(), *o))
                .collect::<Vec<_>>(),
            vec![(10, 10, false), (0, 10, true), (20, 10, true)]
        );
        assert_eq!(c.left_edges, vec![30]);
        assert!(rx.fin_received());
        assert_eq!(rx.receive(0, &[0; 30], true, &mut c).new, 0);
    }

    #[test]
    fn a_fin_that_data_went_past_is_forgotten_and_the_real_one_counts() {
        let mut rx = Receiver::new(1000, 8);
        let mut c = Recorder {
            consume: true,
            ..Recorder::default()
        };
        rx.advertise(100);
        // A FIN at 100, out of order, then in-order data past it.
        rx.receive(100, &[], true, &mut c);
        rx.receive(0, &[1; 200], false, &mut c);
        assert!(!rx.fin_received());
        assert_eq!(rx.left_edge(), 200);
        // The peer's real FIN.
        rx.receive(200, &[], true, &mut c);
        assert!(rx.fin_received());
        assert_eq!(rx.next_position(), 201);
    }

    #[test]
    fn a_fixed_window_below_the_buffer_is_what_is_advertised() {
        let mut rx = Receiver::new(1 << 16, 8);
        rx.set_policy(WindowPolicy::Fixed(4000));
        assert_eq!(rx.advertise(1000), 4000);
        let mut c = Recorder::default();
        assert_eq!(rx.receive(0, &[0; 5000], false, &mut c).new, 4000);
    }

    #[test]
    fn declined_data_is_read_back_and_window_follows_buffer() {
        let mut rx = Receiver::new(16, 8);
        let mut c = Recorder::default();
        assert_eq!(rx.advertise(4), 16);
        rx.receive(0, b"hello", false, &mut c);
        assert_eq!(rx.readable(), Some((0, &b"hello"[..])));
        assert_eq!(rx.advertise(4), 11);
        rx.release(5);
        assert_eq!(rx.advertise(4), 16);
        // Beyond the window: clipped.
        assert_eq!(rx.receive(5, &[0; 40], false, &mut c).new, 16);
    }
}
