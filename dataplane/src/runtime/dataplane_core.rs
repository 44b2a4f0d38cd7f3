//! A dataplane core: one receive queue and one transmit queue, polled.
//!
//! Each [`poll`](DataplaneCore::poll) applies the control core's commands,
//! receives a burst, classifies every frame (`net::classify`: Ethernet,
//! IPv4 and TCP validated, fragments dropped as RFC 5044 A.5.1 option 1
//! describes), hands segments of owned flows to the [`FlowHandler`] with
//! one hash lookup, passes everything else to the control core, lets the
//! handler run its timers and transmit work, and flushes the transmit
//! queue. Nothing here locks, and after warm-up nothing allocates.
//!
//! The port's [`ImpairSwitch`] (off unless set) impairs the received burst
//! before classification and the frames sent; frames it holds back count
//! as work, so a stepped runtime keeps polling until they are released.

use std::sync::Arc;
use std::time::Instant;

use crate::mbuf::Mbuf;
use crate::net::{
    classify, classify_chained, Classified, DropReason, FourTuple, InterfaceAddress, NetCounters,
    RxChecksum, TcpMeta,
};
use crate::polled::Polled;
use crate::queue::RxQueue;
use crate::runtime::flow_table::FlowTable;
use crate::runtime::impair::{copy_mbuf, Direction, ImpairCounters, ImpairSwitch, Stage};
use crate::runtime::link::{Command, CoreLink};
use crate::runtime::tx_batch::{TxBatch, BURST};

/// How many receive bursts [`DataplaneCore::shutdown`] drains at most.
const SHUTDOWN_RX_BURSTS: usize = 64;

/// How many frames ahead of the one being handled a burst's frames are
/// prefetched (as DPDK's l3fwd example does).
const PREFETCH_AHEAD: usize = 3;

/// How many frames ahead the mbuf headers are prefetched: reading a
/// frame's address for [`PREFETCH_AHEAD`] then finds its header cached.
const PREFETCH_HEADER_AHEAD: usize = 2 * PREFETCH_AHEAD;

/// Octets prefetched of each received frame at most: a whole standard
/// Ethernet frame, which the TCP checksum reads first.
const PREFETCH_LEN: usize = 1536;

/// The protocol a dataplane core runs for the flows it owns (TCP and
/// iWARP in the product; tests and benchmarks plug in their own).
pub trait FlowHandler: Send {
    /// Per-flow state, created by the control core and handed over.
    type Flow: Send;

    /// A TCP segment of `flow`, already validated by `net::classify`.
    fn on_packet(
        &mut self,
        now: Instant,
        flow: &mut Self::Flow,
        meta: &TcpMeta,
        packet: Mbuf,
        tx: &mut TxBatch,
    );

    /// A flow the control core handed over was just added to this core's
    /// table (its first chance to transmit, e.g. data queued during
    /// set-up).
    fn on_flow_added(
        &mut self,
        _now: Instant,
        _tuple: &FourTuple,
        _flow: &mut Self::Flow,
        _tx: &mut TxBatch,
    ) {
    }

    /// Called once per poll after the receive burst: timers and transmit
    /// work of the flows.
    fn poll(&mut self, _now: Instant, _flows: &mut FlowTable<Self::Flow>, _tx: &mut TxBatch) {}

    /// Whether `flow` can end without losing what it sent: the peer
    /// acknowledged all of it (its FIN too), or there is nothing to lose.
    /// A runtime shut down with a linger ([`Runtime::shutdown_settling`])
    /// polls on until every flow is, as a kernel goes on delivering what
    /// the sockets of an exited process sent.
    ///
    /// [`Runtime::shutdown_settling`]: crate::runtime::Runtime::shutdown_settling
    fn settled(&self, _flow: &Self::Flow) -> bool {
        true
    }

    /// The core is stopping: the last chance to end its flows on the
    /// wire (a TCP handler resets them, as a host's kernel does for the
    /// connections of a process that exits), sending on `tx`. The flows
    /// are dropped after it.
    fn shut_down(&mut self, _now: Instant, _flows: &mut FlowTable<Self::Flow>, _tx: &mut TxBatch) {}
}

/// What one dataplane core has seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataplaneCounters {
    /// Frames received (those the receive impairment let through, when
    /// it is on).
    pub rx_frames: u64,
    /// Segments handed to owned flows.
    pub to_flows: u64,
    /// Frames passed to the control core.
    pub to_control: u64,
    /// Frames dropped because the ring to the control core was full.
    pub control_ring_full: u64,
    /// Forwarded packets whose flow was gone by the time they arrived.
    pub stale_packets: u64,
    /// Frames in several segments copied into one before classification
    /// (all but a TCP payload chained to its headers on a memory link).
    pub gathered: u64,
    /// Such frames dropped because no mbuf could hold the copy.
    pub gather_failed: u64,
    /// Frames `net::classify` dropped, by reason.
    pub net: NetCounters,
}

/// The TCP segment of a frame for which classification gave `meta`: the
/// TCP header, followed by the payload when it is in the same segment,
/// and the payload sent by reference in the frame's second segment
/// (empty when there is none).
pub fn tcp_segment<'a>(packet: &'a Mbuf, meta: &TcpMeta) -> (&'a [u8], &'a [u8]) {
    let head = packet.data();
    let end = head.len().min(meta.tcp_offset + meta.tcp_len);
    let tail = packet.segments().nth(1).unwrap_or_default();
    (head.get(meta.tcp_offset..end).unwrap_or_default(), tail)
}

/// One dataplane core's state.
pub struct DataplaneCore<H: FlowHandler> {
    rx: RxQueue,
    tx: TxBatch,
    address: InterfaceAddress,
    link: Arc<CoreLink<H::Flow>>,
    flows: FlowTable<H::Flow>,
    handler: H,
    burst: Vec<Mbuf>,
    rx_impair: Stage<Mbuf>,
    counters: DataplaneCounters,
}

impl<H: FlowHandler> DataplaneCore<H> {
    /// A core polling `rx` and sending on `tx` for the interface `address`,
    /// with an impairment switch of its own (off); [`assemble`] gives the
    /// cores of a port one switch instead.
    ///
    /// [`assemble`]: crate::runtime::assemble
    pub fn new(
        rx: RxQueue,
        mut tx: TxBatch,
        address: InterfaceAddress,
        link: Arc<CoreLink<H::Flow>>,
        handler: H,
    ) -> Self {
        let switch = Arc::new(ImpairSwitch::default());
        tx.set_impairment(Arc::clone(&switch));
        let rx_impair = Stage::new(switch, Direction::Rx, rx.queue_id());
        DataplaneCore {
            rx,
            tx,
            address,
            link,
            flows: FlowTable::new(),
            handler,
            burst: Vec::with_capacity(BURST),
            rx_impair,
            counters: DataplaneCounters::default(),
        }
    }

    /// Impairs what this core receives and sends as `switch` says (its
    /// random streams drawn from the seed, the queues' ids and the
    /// direction).
    pub fn set_impairment(&mut self, switch: Arc<ImpairSwitch>) {
        self.tx.set_impairment(Arc::clone(&switch));
        self.rx_impair.attach(switch);
    }

    /// The switch of this core's impairment, to change it at run time
    /// from any thread.
    pub fn impairment(&self) -> &Arc<ImpairSwitch> {
        self.rx_impair.switch()
    }

    /// What the impairment did so far: (receive side, transmit side).
    pub fn impair_counters(&self) -> (ImpairCounters, ImpairCounters) {
        (
            *self.rx_impair.impairer.counters(),
            *self.tx.impair_counters(),
        )
    }

    /// One round: commands, a receive burst, the handler's work, a flush.
    /// Returns the number of frames and commands handled plus the frames
    /// the impairment holds back (0 when idle).
    pub fn poll(&mut self, now: Instant) -> usize {
        self.tx.set_now(now);
        let mut work = self.apply_commands(now);
        self.rx.rx_burst(&mut self.burst, BURST as u16);
        work += self.burst.len();
        // Frames to place, and the sends their acknowledgements let out,
        // read the STag table once per FPDU: pinned once here, each of
        // those pins is a count (an idle poll pins nothing).
        let _pinned = (!self.burst.is_empty()).then(uwarp_stack::mem::Burst::begin);
        self.impair_rx(now);
        let mut burst = std::mem::take(&mut self.burst);
        // The frames a few places ahead are fetched while this one is
        // handled (the peer's core wrote them on a memory link; the NIC's
        // DMA did on a real one): their mbuf headers first, their data
        // once the header is there, and the data of a second segment (a
        // payload by reference) one frame ahead.
        for mbuf in burst.iter().take(PREFETCH_HEADER_AHEAD) {
            mbuf.prefetch_header();
        }
        for mbuf in burst.iter().take(PREFETCH_AHEAD) {
            mbuf.prefetch(PREFETCH_LEN);
        }
        if let Some(first) = burst.first() {
            first.prefetch_second(PREFETCH_LEN);
        }
        let mut frames = burst.drain(..);
        while let Some(mbuf) = frames.next() {
            let ahead = frames.as_slice();
            if let Some(next) = ahead.get(PREFETCH_HEADER_AHEAD - 1) {
                next.prefetch_header();
            }
            if let Some(next) = ahead.get(PREFETCH_AHEAD - 1) {
                next.prefetch(PREFETCH_LEN);
            }
            if let Some(next) = ahead.first() {
                next.prefetch_second(PREFETCH_LEN);
            }
            self.counters.rx_frames += 1;
            self.dispatch(now, mbuf);
        }
        drop(frames);
        self.burst = burst;
        self.handler.poll(now, &mut self.flows, &mut self.tx);
        while let Some(frame) = self.link.to_wire.take() {
            work += 1;
            self.tx.push(frame);
        }
        self.tx.flush();
        work + self.rx_impair.impairer.held() + self.tx.impair_held()
    }

    /// The receive impairment of the burst, and the release of what it
    /// held whose time came.
    fn impair_rx(&mut self, now: Instant) {
        self.rx_impair.refresh();
        let impairer = &mut self.rx_impair.impairer;
        if impairer.is_engaged() {
            let pool = self.tx.pool();
            impairer.apply(now, &mut self.burst, 0, |m| copy_mbuf(pool, m));
        }
    }

    fn apply_commands(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(command) = self.link.commands.take() {
            n += 1;
            match command {
                Command::AddFlow(tuple, flow) => {
                    // A duplicate tuple keeps the flow already there.
                    if let Ok(flow) = self.flows.insert(tuple, flow) {
                        self.handler.on_flow_added(now, &tuple, flow, &mut self.tx);
                    }
                }
                Command::RemoveFlow(tuple) => {
                    self.flows.remove(&tuple);
                }
                Command::Packet(mbuf) => match self.classify(mbuf) {
                    Some((Classified::Tcp(meta), mbuf)) => {
                        if let Err(_stale) = self.deliver(now, meta, mbuf) {
                            self.counters.stale_packets += 1;
                        }
                    }
                    _ => self.counters.stale_packets += 1,
                },
            }
        }
        n
    }

    /// Where a frame goes, with the checksum verdict of the device (or
    /// of the memory link) it came from. A frame in several segments is
    /// taken as it lies when it is a verified TCP payload chained to its
    /// headers (a memory link's payload by reference), and is otherwise
    /// gathered into one segment first (a head that holds payload octets
    /// too, say); `None` when that found no mbuf.
    fn classify(&mut self, mbuf: Mbuf) -> Option<(Classified, Mbuf)> {
        let (ip, tcp) = rx_checksums(&mbuf, self.rx.trusts_offloaded_frames());
        let head = mbuf.data();
        let tail_len = match mbuf.nb_segs() {
            1 => 0,
            2 if tcp == RxChecksum::Good => mbuf.pkt_len() as usize - head.len(),
            _ => return self.classify_gathered(mbuf, ip, tcp),
        };
        match classify_chained(head, tail_len, &self.address, ip, tcp) {
            Classified::Drop(DropReason::TcpTruncated) if tail_len > 0 => {
                self.classify_gathered(mbuf, ip, tcp)
            }
            classified => Some((classified, mbuf)),
        }
    }

    /// [`classify`](Self::classify) for `mbuf` gathered into one segment.
    fn classify_gathered(
        &mut self,
        mbuf: Mbuf,
        ip: RxChecksum,
        tcp: RxChecksum,
    ) -> Option<(Classified, Mbuf)> {
        let mbuf = self.gather(mbuf)?;
        Some((classify(mbuf.data(), &self.address, ip, tcp), mbuf))
    }

    /// `mbuf` in one segment (itself when it is), counting copies.
    fn gather(&mut self, mbuf: Mbuf) -> Option<Mbuf> {
        if mbuf.is_contiguous() {
            return Some(mbuf);
        }
        match mbuf.gathered(self.tx.pool()) {
            Ok(copy) => {
                self.counters.gathered += 1;
                Some(copy)
            }
            Err(_) => {
                self.counters.gather_failed += 1;
                None
            }
        }
    }

    fn dispatch(&mut self, now: Instant, mbuf: Mbuf) {
        let Some((classified, mbuf)) = self.classify(mbuf) else {
            return;
        };
        match classified {
            Classified::Tcp(meta) => {
                if let Err(unowned) = self.deliver(now, meta, mbuf) {
                    self.pass_to_control(unowned);
                }
            }
            Classified::Arp | Classified::Icmp => self.pass_to_control(mbuf),
            Classified::Drop(reason) => self.counters.net.record_drop(reason),
        }
    }

    /// Hands `mbuf` to its flow (one hash lookup); gives it back when this
    /// core does not own the flow.
    fn deliver(&mut self, now: Instant, meta: TcpMeta, mbuf: Mbuf) -> Result<(), Mbuf> {
        let Some(flow) = self.flows.get_mut(&meta.tuple) else {
            return Err(mbuf);
        };
        self.counters.to_flows += 1;
        self.handler.on_packet(now, flow, &meta, mbuf, &mut self.tx);
        Ok(())
    }

    /// Hands `mbuf` to the control core, in one segment: the control core
    /// reads frames as one slice.
    fn pass_to_control(&mut self, mbuf: Mbuf) {
        let Some(mbuf) = self.gather(mbuf) else {
            return;
        };
        match self.link.to_control.push(mbuf) {
            Ok(()) => self.counters.to_control += 1,
            Err(_dropped) => self.counters.control_ring_full += 1,
        }
    }

    /// The flows this core owns.
    pub fn flows(&self) -> &FlowTable<H::Flow> {
        &self.flows
    }

    /// The protocol handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The counters so far.
    pub fn counters(&self) -> &DataplaneCounters {
        &self.counters
    }

    /// The transmit side (its counters).
    pub fn tx(&self) -> &TxBatch {
        &self.tx
    }

    /// Whether every flow is [`settled`](FlowHandler::settled), or the
    /// link is down (nothing sent now can arrive: a net_memif peer gone).
    pub fn is_settled(&self) -> bool {
        self.flows.values().all(|flow| self.handler.settled(flow)) || !self.rx.link_up()
    }

    /// Stops cleanly: takes the flows and packets handed over still
    /// queued, lets the handler end every flow on the wire
    /// ([`FlowHandler::shut_down`]), sends what the device will still take
    /// (the control core's frames through this core too), then frees
    /// every mbuf this core holds (queued frames, received frames, frames
    /// the impairment holds back) and forgets its flows. Returns how many
    /// mbufs were dropped unsent.
    pub fn shutdown(&mut self) -> usize {
        let now = Instant::now();
        self.tx.set_now(now);
        self.apply_commands(now);
        self.handler.shut_down(now, &mut self.flows, &mut self.tx);
        while let Some(frame) = self.link.to_wire.pop() {
            self.tx.push(frame);
        }
        self.tx.flush();
        let mut dropped = self.tx.discard_pending() + self.rx_impair.impairer.discard();
        // Bounded: a live link (a tap the kernel keeps writing to) never
        // runs dry.
        for _ in 0..SHUTDOWN_RX_BURSTS {
            self.rx.rx_burst(&mut self.burst, BURST as u16);
            if self.burst.is_empty() {
                break;
            }
            dropped += self.burst.len();
            self.burst.clear();
        }
        self.flows.drain().for_each(drop);
        dropped
    }
}

/// What the device says about a received frame's IPv4 and TCP checksums
/// (`RTE_MBUF_F_RX_*_CKSUM_*`); `Unknown` makes `net::classify` check them
/// in software. `NONE` means the device verified the data's integrity
/// though the field is not filled in, so it counts as good. On a memory
/// link that `trusts_offloaded` frames, a frame still carrying the
/// sender's request for TCP checksum offload was sent by a port of this
/// process and never left memory: it counts as good the same way.
fn rx_checksums(mbuf: &Mbuf, trusts_offloaded: bool) -> (RxChecksum, RxChecksum) {
    use dpdk_sys as d;
    let flags = mbuf.ol_flags();
    if trusts_offloaded && flags & d::RTE_MBUF_F_TX_TCP_CKSUM != 0 {
        return (RxChecksum::Good, RxChecksum::Good);
    }
    let ip = [
        d::RTE_MBUF_F_RX_IP_CKSUM_MASK,
        d::RTE_MBUF_F_RX_IP_CKSUM_GOOD,
        d::RTE_MBUF_F_RX_IP_CKSUM_NONE,
        d::RTE_MBUF_F_RX_IP_CKSUM_BAD,
    ];
    let tcp = [
        d::RTE_MBUF_F_RX_L4_CKSUM_MASK,
        d::RTE_MBUF_F_RX_L4_CKSUM_GOOD,
        d::RTE_MBUF_F_RX_L4_CKSUM_NONE,
        d::RTE_MBUF_F_RX_L4_CKSUM_BAD,
    ];
    (verdict(flags, ip), verdict(flags, tcp))
}

/// One checksum's verdict from `flags`, given its `[mask, good, none, bad]`.
fn verdict(flags: u64, [mask, good, none, bad]: [u64; 4]) -> RxChecksum {
    match flags & mask {
        f if f == good || f == none => RxChecksum::Good,
        f if f == bad => RxChecksum::Bad,
        _ => RxChecksum::Unknown,
    }
}
