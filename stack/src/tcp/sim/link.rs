//! One direction of the simulated link: delay, jitter, loss, duplication,
//! reordering (by time, or by position like the dataplane's impairment
//! stage), stalls, and a middlebox that splits and merges data segments
//! (RFC 5044 A.4: MPA receivers must cope with re-segmentation).

use super::rng::SimRng;
use crate::tcp::segment::{Payload, Segment};
use crate::tcp::timers::time::{Duration, Instant};
use crate::wire::tcp::parse;
use smoltcp::wire::{Ipv4Address, TcpControl, TcpRepr};

/// Impairments of one direction of the link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkConfig {
    /// One-way delay.
    pub delay: Duration,
    /// The link's rate in bits per second, 0 for unlimited: segments
    /// queue behind one another and leave spaced by their transmission
    /// time, so the receiver sees (and acknowledges) them one by one.
    pub bandwidth: u64,
    /// Extra random delay, up to this much.
    pub jitter: Duration,
    /// Probability a segment is lost.
    pub loss: f64,
    /// Probability a segment is delivered twice.
    pub duplicate: f64,
    /// Probability a segment is held back by a few delays (reordering).
    pub reorder: f64,
    /// Probability a segment is held back until 1 to [`DISPLACE_MAX`]
    /// later segments have passed it, or for [`DISPLACE_HOLD`] when too
    /// few follow: reordering by position, as the dataplane's impairment
    /// stage does it.
    pub displace: f64,
    /// Probability a data segment is split in two by a middlebox.
    pub split: f64,
    /// Probability a data segment is merged into the previous one still
    /// queued, when they are contiguous.
    pub merge: f64,
    /// Regular stalls, as when the polling thread of a host is
    /// descheduled: nothing lost, everything late. `None`: no stalls.
    pub stall: Option<Stall>,
}

/// The link delivers nothing for `length` at the start of every period of
/// `every` (from time zero); what would have arrived meanwhile arrives at
/// the end of the stall, in order. It draws nothing from the seed, so a
/// scenario keeps its random choices with or without stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The period.
    pub every: Duration,
    /// How long each stall lasts.
    pub length: Duration,
}

impl Stall {
    /// When a segment due at `at` arrives.
    fn release(&self, at: Instant) -> Instant {
        let Some(phase) = at.micros().checked_rem(self.every.micros()) else {
            return at;
        };
        match self.length.micros().checked_sub(phase) {
            Some(wait) if wait > 0 => at + Duration(wait),
            _ => at,
        }
    }
}

/// A displaced segment is released after 1 to this many later segments.
pub const DISPLACE_MAX: u64 = 3;

/// The longest a displaced segment waits for later segments to pass it.
pub const DISPLACE_HOLD: Duration = Duration::from_millis(1);

/// A segment on the link.
#[derive(Debug)]
pub(super) struct InTransit {
    at: Instant,
    order: u64,
    bytes: Vec<u8>,
    /// Later segments still to pass this displaced one; 0 when it is not
    /// held.
    behind: u64,
}

/// One direction of the link.
#[derive(Debug)]
pub(super) struct Link {
    config: LinkConfig,
    pub(super) src: Ipv4Address,
    pub(super) dst: Ipv4Address,
    queue: Vec<InTransit>,
    order: u64,
    /// When the link finishes sending what is queued, in nanoseconds.
    busy_until_ns: u64,
}

/// The largest payload the middlebox builds by merging.
const MERGE_LIMIT: usize = 1460;

/// A header without its payload, owning nothing.
fn header_only(repr: &TcpRepr<'_>) -> TcpRepr<'static> {
    TcpRepr {
        src_port: repr.src_port,
        dst_port: repr.dst_port,
        control: repr.control,
        seq_number: repr.seq_number,
        ack_number: repr.ack_number,
        window_len: repr.window_len,
        window_scale: repr.window_scale,
        max_seg_size: repr.max_seg_size,
        sack_permitted: repr.sack_permitted,
        sack_ranges: repr.sack_ranges,
        timestamp: repr.timestamp,
        payload: &[],
    }
}

impl Link {
    pub(super) fn new(config: LinkConfig, src: Ipv4Address, dst: Ipv4Address) -> Self {
        Link {
            config,
            src,
            dst,
            queue: Vec::new(),
            order: 0,
            busy_until_ns: 0,
        }
    }

    pub(super) fn build(&self, header: TcpRepr<'static>, payload: &[u8]) -> Vec<u8> {
        Segment {
            src: self.src,
            dst: self.dst,
            header,
            payload: Payload::of(payload),
        }
        .to_bytes()
    }

    /// When `len` octets sent at `now` have left the sender's end: at
    /// once, or after those queued before them at the link's rate.
    fn serialized(&mut self, now: Instant, len: usize) -> Instant {
        if self.config.bandwidth == 0 {
            return now;
        }
        let start = self.busy_until_ns.max(now.micros() * 1000);
        self.busy_until_ns = start + len as u64 * 8_000_000_000 / self.config.bandwidth;
        Instant(self.busy_until_ns.div_ceil(1000))
    }

    fn delivery_time(&mut self, now: Instant, len: usize, rng: &mut SimRng) -> Instant {
        let sent = self.serialized(now, len);
        let mut at = sent + self.config.delay + Duration(rng.between(0, self.config.jitter.0));
        if rng.chance(self.config.reorder) {
            at = at + Duration(self.config.delay.0 * rng.between(1, 4) + 1);
        }
        self.config.stall.map_or(at, |stall| stall.release(at))
    }

    fn enqueue(&mut self, now: Instant, bytes: Vec<u8>, rng: &mut SimRng) {
        let mut at = self.delivery_time(now, bytes.len(), rng);
        self.order += 1;
        let order = self.order;
        // No draw when off, so runs without displacement keep their
        // random streams.
        let behind = if self.config.displace > 0.0 && rng.chance(self.config.displace) {
            rng.between(1, DISPLACE_MAX)
        } else {
            0
        };
        if behind > 0 {
            // Released by the hold time unless later segments do first.
            at = at + DISPLACE_HOLD;
        } else {
            self.pass(at);
        }
        self.queue.push(InTransit {
            at,
            order,
            bytes,
            behind,
        });
    }

    /// A segment arriving at `at` passes the displaced ones: those it was
    /// the last to wait for arrive just after it.
    fn pass(&mut self, at: Instant) {
        for held in self.queue.iter_mut().filter(|p| p.behind > 0) {
            held.behind -= 1;
            if held.behind == 0 {
                self.order += 1;
                held.at = held.at.min(at);
                held.order = self.order;
            }
        }
    }

    /// Puts a segment on the link, through the middlebox.
    pub(super) fn send(&mut self, now: Instant, bytes: Vec<u8>, rng: &mut SimRng) {
        if rng.chance(self.config.loss) {
            return;
        }
        if self.config.split > 0.0 || self.config.merge > 0.0 {
            if let Ok(repr) = parse(self.src, self.dst, &bytes) {
                if self.resegment(now, &repr, rng) {
                    return;
                }
            }
        }
        if rng.chance(self.config.duplicate) {
            self.enqueue(now, bytes.clone(), rng);
        }
        self.enqueue(now, bytes, rng);
    }

    /// The middlebox: merges a data segment into the previous one or splits
    /// it in two; returns whether it did.
    fn resegment(&mut self, now: Instant, repr: &TcpRepr<'_>, rng: &mut SimRng) -> bool {
        if !matches!(repr.control, TcpControl::None | TcpControl::Psh) || repr.payload.is_empty() {
            return false;
        }
        if rng.chance(self.config.merge) && self.merge(repr) {
            return true;
        }
        if repr.payload.len() < 2 || !rng.chance(self.config.split) {
            return false;
        }
        let cut = rng.between(1, repr.payload.len() as u64 - 1) as usize;
        let mut head = header_only(repr);
        head.control = TcpControl::None;
        let mut tail = header_only(repr);
        tail.seq_number = repr.seq_number + cut;
        let (first, second) = repr.payload.split_at(cut);
        let (first, second) = (self.build(head, first), self.build(tail, second));
        self.enqueue(now, first, rng);
        self.enqueue(now, second, rng);
        true
    }

    /// Appends `repr`'s payload to the last queued segment if it ends where
    /// `repr` starts; the merged segment carries `repr`'s header fields.
    fn merge(&mut self, repr: &TcpRepr<'_>) -> bool {
        let (src, dst) = (self.src, self.dst);
        let Some(last) = self.queue.last() else {
            return false;
        };
        let Ok(prev) = parse(src, dst, &last.bytes) else {
            return false;
        };
        let contiguous = prev.seq_number + prev.payload.len() == repr.seq_number;
        let plain = matches!(prev.control, TcpControl::None | TcpControl::Psh);
        if !contiguous || !plain || prev.payload.len() + repr.payload.len() > MERGE_LIMIT {
            return false;
        }
        let mut header = header_only(repr);
        header.seq_number = prev.seq_number;
        let payload = [prev.payload, repr.payload].concat();
        let merged = self.build(header, &payload);
        if let Some(last) = self.queue.last_mut() {
            last.bytes = merged;
        }
        true
    }

    pub(super) fn next_at(&self) -> Option<Instant> {
        self.queue.iter().map(|p| p.at).min()
    }

    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut due: Vec<InTransit> = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            if self.queue[i].at <= now {
                due.push(self.queue.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|p| (p.at, p.order));
        due.into_iter().map(|p| p.bytes).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::segment::bare_header;
    use crate::tcp::seq::Seq;

    const SRC: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
    const DST: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

    /// Sends segments numbered `0..count` (by sequence number) at `now`,
    /// each with `len` octets.
    fn send_numbered(link: &mut Link, rng: &mut SimRng, count: u32, len: usize) {
        for n in 0..count {
            let header = bare_header(1, 2, TcpControl::None, Seq(n), Some(Seq(0)), 100);
            let bytes = link.build(header, &vec![0; len]);
            link.send(Instant(0), bytes, rng);
        }
    }

    /// A link with 10 us of delay and `config`'s impairments.
    fn link(config: LinkConfig) -> Link {
        let config = LinkConfig {
            delay: Duration(10),
            ..config
        };
        Link::new(config, SRC, DST)
    }

    fn numbers(segments: &[Vec<u8>]) -> Vec<u32> {
        segments
            .iter()
            .map(|bytes| parse(SRC, DST, bytes).expect("valid").seq_number.0 as u32)
            .collect()
    }

    #[test]
    fn displaced_segments_arrive_after_one_to_three_later_ones() {
        let mut link = link(LinkConfig {
            displace: 0.05,
            ..LinkConfig::default()
        });
        let mut rng = SimRng::new(7);
        send_numbered(&mut link, &mut rng, 2000, 10);
        let arrived = numbers(&link.take_due(Instant(0) + DISPLACE_HOLD + Duration(10)));
        let mut sorted = arrived.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..2000).collect::<Vec<_>>(), "each once");
        // How many later segments overtook each one.
        let overtaken: Vec<usize> = arrived
            .iter()
            .enumerate()
            .map(|(at, &n)| arrived[..at].iter().filter(|&&m| m > n).count())
            .collect();
        let displaced = overtaken.iter().filter(|&&d| d > 0).count();
        assert!((60..=140).contains(&displaced), "{displaced} displaced");
        let by_one_to_three = overtaken.iter().filter(|&&d| (1..=3).contains(&d)).count();
        // Two held at once can add up (1 + 3 at most here).
        assert!(by_one_to_three * 10 >= displaced * 9, "{overtaken:?}");
        assert!(overtaken.iter().all(|&d| d <= 6), "{overtaken:?}");
    }

    #[test]
    fn a_lone_displaced_segment_waits_for_the_hold_time() {
        let mut link = link(LinkConfig {
            displace: 1.0,
            ..LinkConfig::default()
        });
        send_numbered(&mut link, &mut SimRng::new(1), 1, 10);
        assert_eq!(link.next_at(), Some(Instant(10) + DISPLACE_HOLD));
        assert!(link.take_due(Instant(10)).is_empty());
        assert_eq!(link.take_due(Instant(10) + DISPLACE_HOLD).len(), 1);
    }

    #[test]
    fn a_stall_holds_what_would_arrive_until_its_end() {
        let stall = Stall {
            every: Duration(100),
            length: Duration(30),
        };
        let release = |at: u64| stall.release(Instant(at)).micros();
        assert_eq!(
            [0, 29, 30, 99, 100, 150, 229].map(release),
            [30, 30, 30, 99, 130, 150, 230]
        );
        let never = Stall {
            every: Duration::ZERO,
            ..stall
        };
        assert_eq!(never.release(Instant(5)), Instant(5));
        // Segments sent during the stall arrive at its end, in order.
        let mut link = link(LinkConfig {
            stall: Some(stall),
            ..LinkConfig::default()
        });
        send_numbered(&mut link, &mut SimRng::new(1), 3, 10);
        assert_eq!(link.next_at(), Some(Instant(30)));
        assert_eq!(numbers(&link.take_due(Instant(30))), [0, 1, 2]);
    }

    #[test]
    fn a_bandwidth_limit_spaces_segments_by_their_transmission_time() {
        let mut link = link(LinkConfig {
            bandwidth: 1_000_000_000,
            ..LinkConfig::default()
        });
        // 1000 payload octets and a 20-octet header: 8.16 us each at 1 Gbit/s.
        send_numbered(&mut link, &mut SimRng::new(1), 10, 1000);
        let mut times = Vec::new();
        while let Some(at) = link.next_at() {
            assert_eq!(numbers(&link.take_due(at)), vec![times.len() as u32]);
            times.push(at.micros());
        }
        assert_eq!(times[0], 19);
        assert_eq!(times[9], 92);
    }
}
