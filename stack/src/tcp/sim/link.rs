//! One direction of the simulated link: delay, jitter, loss, duplication,
//! reordering, and a middlebox that splits and merges data segments (RFC
//! 5044 A.4: MPA receivers must cope with re-segmentation).

use super::rng::SimRng;
use crate::tcp::segment::{parse, Payload, Segment};
use crate::tcp::time::{Duration, Instant};
use smoltcp::wire::{Ipv4Address, TcpControl, TcpRepr};

/// Impairments of one direction of the link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkConfig {
    /// One-way delay.
    pub delay: Duration,
    /// Extra random delay, up to this much.
    pub jitter: Duration,
    /// Probability a segment is lost.
    pub loss: f64,
    /// Probability a segment is delivered twice.
    pub duplicate: f64,
    /// Probability a segment is held back by a few delays (reordering).
    pub reorder: f64,
    /// Probability a data segment is split in two by a middlebox.
    pub split: f64,
    /// Probability a data segment is merged into the previous one still
    /// queued, when they are contiguous.
    pub merge: f64,
}

/// A segment on the link.
#[derive(Debug)]
pub(super) struct InTransit {
    at: Instant,
    order: u64,
    bytes: Vec<u8>,
}

/// One direction of the link.
#[derive(Debug)]
pub(super) struct Link {
    config: LinkConfig,
    pub(super) src: Ipv4Address,
    pub(super) dst: Ipv4Address,
    queue: Vec<InTransit>,
    order: u64,
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
        }
    }

    pub(super) fn build(&self, header: TcpRepr<'static>, payload: &[u8]) -> Vec<u8> {
        Segment {
            src: self.src,
            dst: self.dst,
            header,
            payload: Payload {
                first: payload,
                second: &[],
            },
        }
        .to_bytes()
    }

    fn delivery_time(&self, now: Instant, rng: &mut SimRng) -> Instant {
        let mut at = now + self.config.delay + Duration(rng.between(0, self.config.jitter.0));
        if rng.chance(self.config.reorder) {
            at = at + Duration(self.config.delay.0 * rng.between(1, 4) + 1);
        }
        at
    }

    fn enqueue(&mut self, now: Instant, bytes: Vec<u8>, rng: &mut SimRng) {
        let at = self.delivery_time(now, rng);
        self.order += 1;
        self.queue.push(InTransit {
            at,
            order: self.order,
            bytes,
        });
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
