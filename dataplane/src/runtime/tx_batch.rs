//! [`TxBatch`]: frames built into mbufs and sent in bursts on one queue.
//!
//! Each core owns one `TxBatch` over its own transmit queue, so no queue
//! is shared. Frames collect in a vector until a burst is full or the core
//! flushes at the end of its poll; what the device does not take stays
//! queued, in order, for the next flush, up to a bound past which new
//! frames are dropped and counted (TCP retransmits; ARP and ICMP retry).
//!
//! On their way to the device, frames go through the transmit side of the
//! port's [`ImpairSwitch`] (off unless set), applied once to each frame.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use smoltcp::wire::Ipv4Packet;

use crate::extbuf::ExternalRegion;
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::net::ipv4::IPV4_HEADER_LEN;
use crate::net::vlan;
use crate::net::{FrameSink, Piece};
use crate::queue::TxQueue;
use crate::runtime::impair::{copy_mbuf, Direction, ImpairCounters, ImpairSwitch, Stage};

/// Packets per `tx_burst`.
pub const BURST: usize = 32;

/// How many frames ahead a spare mbuf's data room is prefetched for
/// writing. Taking its lines back from the core that freed it (the peer's,
/// on a memory link) outlasts the building of one frame: two ahead
/// measured about 3% more `uwarp-perf loopback --crc` bandwidth than one
/// (median of ten alternating runs 34.4 against 33.45 Gbit/s), and three
/// or four no more than two.
const WRITE_PREFETCH_AHEAD: usize = 2;

/// How many frames may wait for the device before new ones are dropped.
pub const BACKLOG_LIMIT: usize = 4096;

/// Transmit counters of one [`TxBatch`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames the device took.
    pub sent: u64,
    /// Frames dropped because the backlog was full.
    pub backlog_full: u64,
    /// Frames dropped because no mbuf was free or the frame did not fit one.
    pub no_buffer: u64,
    /// TCP frames queued whose checksums the device fills.
    pub checksums_offloaded: u64,
    /// TCP frames queued with their payload by reference (not copied).
    pub payloads_referenced: u64,
    /// TCP frames whose payload was copied after all because its memory
    /// could not be mapped for the device's DMA ([`crate::dma`]).
    pub payloads_unmapped: u64,
}

/// A transmit queue with its mempool and the frames waiting for it.
#[derive(Debug)]
pub struct TxBatch {
    queue: TxQueue,
    pool: Arc<Mempool>,
    /// Mbufs taken from the pool a burst at a time, the data room of the
    /// one [`WRITE_PREFETCH_AHEAD`] places on prefetched for writing, as
    /// long as the frame just built: one pool access per burst instead of
    /// one per frame, and a frame's writes find their cache lines ready
    /// (on a memory link the peer frees our mbufs, so they come back
    /// cold).
    spare: Vec<Mbuf>,
    /// Whether the device fills the TCP checksums of TCP frames.
    offload_checksums: bool,
    /// Whether it fills their IPv4 header checksums too; if not, the
    /// batch sums each header (20 octets) itself.
    offload_ipv4_checksums: bool,
    /// Whether TCP payloads may go out by reference.
    reference_payloads: bool,
    /// Whether their memory must first be mapped for the device's DMA.
    map_payloads: bool,
    pending: Vec<Mbuf>,
    /// How many frames at the front of `pending` went through the
    /// impairment already.
    impaired: usize,
    /// Boxed: only its `is_engaged` flag is read on the fast path, and a
    /// batch stays small.
    impair: Box<Stage<Mbuf>>,
    /// Whether the impairment's switch was checked since the last flush.
    impair_checked: bool,
    /// The time of the owning core's poll; the clock's when no core
    /// tells it (the control core's own queue).
    now: Option<Instant>,
    counters: TxCounters,
}

impl TxBatch {
    /// Sends on `queue`, allocating frames from `pool`.
    ///
    /// Not impaired until [`set_impairment`](Self::set_impairment) gives
    /// it a switch.
    pub fn new(queue: TxQueue, pool: Arc<Mempool>) -> Self {
        let impair = Box::new(Stage::new(Arc::default(), Direction::Tx, queue.queue_id()));
        TxBatch {
            offload_checksums: queue.offloads_tcp_checksums(),
            offload_ipv4_checksums: queue.offloads_ipv4_checksums(),
            reference_payloads: queue.references_payloads(),
            map_payloads: queue.maps_payloads_for_dma(),
            queue,
            pool,
            spare: Vec::with_capacity(BURST),
            pending: Vec::with_capacity(BURST),
            impaired: 0,
            impair,
            impair_checked: false,
            now: None,
            counters: TxCounters::default(),
        }
    }

    /// Impairs the frames it sends as the transmit side of `switch` says,
    /// drawing from its own random stream (from the queue's id).
    pub fn set_impairment(&mut self, switch: Arc<ImpairSwitch>) {
        self.impair.attach(switch);
    }

    /// What the transmit impairment did so far.
    pub fn impair_counters(&self) -> &ImpairCounters {
        self.impair.impairer.counters()
    }

    /// Frames the transmit impairment holds back.
    pub(crate) fn impair_held(&self) -> usize {
        self.impair.impairer.held()
    }

    /// The time of the owning core's current poll, for the impairment.
    pub(crate) fn set_now(&mut self, now: Instant) {
        self.now = Some(now);
    }

    /// The pool frames are allocated from.
    pub(crate) fn pool(&self) -> &Mempool {
        &self.pool
    }

    /// Queues a ready mbuf; flushes when a burst is full. Returns false
    /// (and drops the mbuf) when the backlog is full.
    pub fn push(&mut self, mbuf: Mbuf) -> bool {
        if self.pending.len() >= BACKLOG_LIMIT {
            self.counters.backlog_full += 1;
            return false;
        }
        self.pending.push(mbuf);
        if self.pending.len() >= BURST {
            self.send();
        }
        true
    }

    /// Hands what is queued (and what the impairment releases) to the
    /// device; returns how many frames it took.
    pub fn flush(&mut self) -> usize {
        let sent = self.send();
        self.impair_checked = false;
        sent
    }

    /// Impairs the frames not impaired yet and hands what is queued to the
    /// device; returns how many it took. The first send after a flush
    /// takes up a change of the impairment, so the switch is read once
    /// per poll of the core that owns the batch.
    fn send(&mut self) -> usize {
        if !self.impair_checked {
            self.impair_checked = true;
            self.impair.refresh();
        }
        let impairer = &mut self.impair.impairer;
        if impairer.is_engaged() {
            let now = self.now.unwrap_or_else(Instant::now);
            let pool = &self.pool;
            impairer.apply(now, &mut self.pending, self.impaired, |m| {
                copy_mbuf(pool, m)
            });
        }
        let mut sent = 0;
        while !self.pending.is_empty() {
            let n = self.queue.tx_burst(&mut self.pending);
            if n == 0 {
                break;
            }
            sent += n;
        }
        self.impaired = self.pending.len();
        self.counters.sent += sent as u64;
        sent
    }

    /// Drops every frame still waiting (at shutdown), those the
    /// impairment holds included, returning how many.
    pub fn discard_pending(&mut self) -> usize {
        let n = self.pending.len() + self.impair.impairer.discard();
        self.pending.clear();
        // Not frames: empty mbufs back to the pool.
        self.spare.clear();
        self.impaired = 0;
        n
    }

    /// The counters so far.
    pub fn counters(&self) -> &TxCounters {
        &self.counters
    }

    /// An empty mbuf: the next spare, refilled a burst at a time (one at a
    /// time when the pool has less than a burst left).
    fn take_mbuf(&mut self, len: u16) -> Option<Mbuf> {
        if self.spare.is_empty() {
            if Mbuf::alloc_bulk(&self.pool, BURST, &mut self.spare).is_err() {
                return Mbuf::alloc(&self.pool).ok();
            }
            // The ones taken before any prefetch below reaches them.
            for next in self
                .spare
                .iter()
                .rev()
                .skip(1)
                .take(WRITE_PREFETCH_AHEAD - 1)
            {
                next.prefetch_for_write(usize::from(len));
            }
        }
        let mbuf = self.spare.pop();
        if let Some(ahead) = self.spare.len().checked_sub(WRITE_PREFETCH_AHEAD) {
            self.spare[ahead].prefetch_for_write(usize::from(len));
        }
        mbuf
    }

    /// The octets at `range` of `region` as a chain of external segments:
    /// one for a memory link, one per page they touch for a PCI device
    /// ([`crate::dma::page_pieces`]: an emulated NIC behind an emulated
    /// IOMMU may drop a buffer that crosses a page). `None` when an mbuf
    /// is missing.
    fn attach_payload(&mut self, region: &ExternalRegion, range: Range<usize>) -> Option<Mbuf> {
        if !self.map_payloads {
            return region.attach_range(self.take_mbuf(0)?, range).ok();
        }
        let mut payload: Option<Mbuf> = None;
        for piece in region.page_pieces(range) {
            let segment = region.attach_range(self.take_mbuf(0)?, piece).ok()?;
            match payload.as_mut() {
                None => payload = Some(segment),
                Some(chain) => chain.chain(segment).ok()?,
            }
        }
        payload
    }

    /// Builds a frame of `len` octets with `fill` in a spare mbuf and
    /// queues it; counts it as dropped when there is no mbuf or it does
    /// not fit one.
    fn build_and_push(&mut self, len: usize, fill: &mut dyn FnMut(&mut Mbuf, u16) -> bool) -> bool {
        let built = u16::try_from(len).ok().and_then(|len| {
            let mut mbuf = self.take_mbuf(len)?;
            fill(&mut mbuf, len).then_some(mbuf)
        });
        match built {
            Some(mbuf) => self.push(mbuf),
            None => {
                self.counters.no_buffer += 1;
                false
            }
        }
    }
}

impl FrameSink for TxBatch {
    fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.build_and_push(len, &mut |mbuf, len| fill_frame(mbuf, len, fill))
    }

    fn send_tcp_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8], bool)) -> bool {
        if !self.offload_checksums {
            return self.send_frame(len, &mut |frame| fill(frame, false));
        }
        let ipv4_offloaded = self.offload_ipv4_checksums;
        let queued = self.build_and_push(len, &mut |mbuf, len| {
            let filled = fill_frame(mbuf, len, &mut |frame| {
                fill(frame, true);
                sum_ipv4_header_unless(ipv4_offloaded, frame);
            });
            request_checksums(mbuf, ipv4_offloaded);
            filled
        });
        self.counters.checksums_offloaded += u64::from(queued);
        queued
    }

    fn sends_by_reference(&self) -> bool {
        self.reference_payloads
    }

    fn send_tcp_frame_referencing(
        &mut self,
        headers_len: usize,
        region: &ExternalRegion,
        range: Range<usize>,
        trailer_len: usize,
        fill: &mut dyn FnMut(Piece, &mut [u8]),
    ) -> Option<bool> {
        if !self.reference_payloads {
            return None;
        }
        if self.map_payloads && !region.map_for_dma() {
            self.counters.payloads_unmapped += 1;
            return None;
        }
        let headers_len = u16::try_from(headers_len).ok()?;
        let trailer_len = u16::try_from(trailer_len).ok()?;
        // Every mbuf first: a failure leaves the caller free to copy.
        let mut head = self.take_mbuf(headers_len)?;
        let referenced = self.attach_payload(region, range)?;
        let last = match trailer_len {
            0 => None,
            len => Some(self.take_mbuf(len)?),
        };
        let ipv4_offloaded = self.offload_ipv4_checksums;
        let head_filled = fill_frame(&mut head, headers_len, &mut |out| {
            fill(Piece::Head, out);
            sum_ipv4_header_unless(ipv4_offloaded, out);
        });
        if !head_filled || head.chain(referenced).is_err() {
            return None;
        }
        if let Some(mut last) = last {
            let filled = fill_frame(&mut last, trailer_len, &mut |out| fill(Piece::Trailer, out));
            if !filled || head.chain(last).is_err() {
                return None;
            }
        }
        request_checksums(&mut head, ipv4_offloaded);
        let queued = self.push(head);
        self.counters.checksums_offloaded += u64::from(queued);
        self.counters.payloads_referenced += u64::from(queued);
        Some(queued)
    }
}

/// An mbuf from `pool` holding a frame of `len` octets written by `fill`;
/// `None` when no mbuf is free or the frame does not fit one.
pub(crate) fn build_frame(
    pool: &Mempool,
    len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
) -> Option<Mbuf> {
    let len = u16::try_from(len).ok()?;
    let mut mbuf = Mbuf::alloc(pool).ok()?;
    fill_frame(&mut mbuf, len, fill).then_some(mbuf)
}

/// Asks the device for the checksums of the TCP frame `mbuf` holds: the
/// TCP checksum, and the IPv4 header's too when `ipv4_offloaded`. The
/// Ethernet header's length (`l2_len`) counts the frame's IEEE 802.1Q tag
/// if it has one.
fn request_checksums(mbuf: &mut Mbuf, ipv4_offloaded: bool) {
    // 14 or 18: fits the u8.
    let l2 = vlan::written_header_len(mbuf.data()) as u8;
    let l3 = IPV4_HEADER_LEN as u16;
    if ipv4_offloaded {
        mbuf.offload_tcp_checksums(l2, l3);
    } else {
        mbuf.offload_tcp_checksum(l2, l3);
    }
}

/// Fills the IPv4 header checksum of `frame` (Ethernet, with an IEEE
/// 802.1Q tag or not, then IPv4), which its writer left 0 for the device,
/// unless the device fills it (`ipv4_offloaded`) (RFC 791 section 3.1).
fn sum_ipv4_header_unless(ipv4_offloaded: bool, frame: &mut [u8]) {
    if ipv4_offloaded {
        return;
    }
    let l2 = vlan::written_header_len(frame);
    if let Some(header) = frame.get_mut(l2..l2 + IPV4_HEADER_LEN) {
        Ipv4Packet::new_unchecked(header).fill_checksum();
    }
}

/// Appends `len` octets to `mbuf` and has `fill` write them; false when
/// they do not fit.
fn fill_frame(mbuf: &mut Mbuf, len: u16, fill: &mut dyn FnMut(&mut [u8])) -> bool {
    match mbuf.append(len) {
        Ok(frame) => {
            fill(frame);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::ipv4::{test_header, ETHERNET_HEADER_LEN};
    use crate::net::{write_headers, Ipv4Header, Vlan};

    /// A TCP frame's headers written for a device that fills the checksums.
    fn frame_for_offload() -> Vec<u8> {
        let mut frame = vec![0; ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 20];
        write_headers(&mut frame, &test_header(), 20, true);
        frame
    }

    fn ipv4(frame: &mut [u8]) -> Ipv4Packet<&mut [u8]> {
        Ipv4Packet::new_checked(&mut frame[ETHERNET_HEADER_LEN..]).unwrap()
    }

    #[test]
    fn the_ipv4_checksum_a_device_does_not_fill_is_summed_here() {
        let mut frame = frame_for_offload();
        assert_eq!(ipv4(&mut frame).checksum(), 0, "left for the device");
        sum_ipv4_header_unless(false, &mut frame);
        assert!(ipv4(&mut frame).verify_checksum());
        assert_ne!(ipv4(&mut frame).checksum(), 0);
    }

    #[test]
    fn the_ipv4_checksum_a_device_fills_is_left_to_it_and_a_short_frame_alone() {
        let mut frame = frame_for_offload();
        sum_ipv4_header_unless(true, &mut frame);
        assert_eq!(ipv4(&mut frame).checksum(), 0);
        let mut short = vec![0xff; ETHERNET_HEADER_LEN + 10];
        sum_ipv4_header_unless(false, &mut short);
        assert!(short.iter().all(|&octet| octet == 0xff));
    }

    #[test]
    fn the_ipv4_checksum_of_a_tagged_frame_is_summed_past_the_tag() {
        let header = Ipv4Header {
            vlan: Some(Vlan::new(42, 0).unwrap()),
            ..test_header()
        };
        let mut frame = vec![0; header.headers_len() + 20];
        write_headers(&mut frame, &header, 20, true);
        sum_ipv4_header_unless(false, &mut frame);
        let ip = Ipv4Packet::new_checked(&frame[18..]).unwrap();
        assert!(ip.verify_checksum());
        assert_ne!(ip.checksum(), 0);
    }
}
