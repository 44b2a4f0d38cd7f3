//! A dataplane core: one receive queue and one transmit queue, polled.
//!
//! Each [`poll`](DataplaneCore::poll) applies the control core's commands,
//! receives a burst, classifies every frame (`net::classify`: Ethernet,
//! IPv4 and TCP validated, fragments dropped as RFC 5044 A.5.1 option 1
//! describes), hands segments of owned flows to the [`FlowHandler`] with
//! one hash lookup, passes everything else to the control core, lets the
//! handler run its timers and transmit work, and flushes the transmit
//! queue. Nothing here locks, and after warm-up nothing allocates.

use std::sync::Arc;
use std::time::Instant;

use crate::mbuf::Mbuf;
use crate::net::{
    classify, Classified, FourTuple, InterfaceAddress, NetCounters, RxChecksum, TcpMeta,
};
use crate::queue::RxQueue;
use crate::runtime::flow_table::FlowTable;
use crate::runtime::link::{Command, CoreLink};
use crate::runtime::tx_batch::{TxBatch, BURST};

/// How many receive bursts [`DataplaneCore::shutdown`] drains at most.
const SHUTDOWN_RX_BURSTS: usize = 64;

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
}

/// What one dataplane core has seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataplaneCounters {
    /// Frames received.
    pub rx_frames: u64,
    /// Segments handed to owned flows.
    pub to_flows: u64,
    /// Frames passed to the control core.
    pub to_control: u64,
    /// Frames dropped because the ring to the control core was full.
    pub control_ring_full: u64,
    /// Forwarded packets whose flow was gone by the time they arrived.
    pub stale_packets: u64,
    /// Frames `net::classify` dropped, by reason.
    pub net: NetCounters,
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
    counters: DataplaneCounters,
}

impl<H: FlowHandler> DataplaneCore<H> {
    /// A core polling `rx` and sending on `tx` for the interface `address`.
    pub fn new(
        rx: RxQueue,
        tx: TxBatch,
        address: InterfaceAddress,
        link: Arc<CoreLink<H::Flow>>,
        handler: H,
    ) -> Self {
        DataplaneCore {
            rx,
            tx,
            address,
            link,
            flows: FlowTable::new(),
            handler,
            burst: Vec::with_capacity(BURST),
            counters: DataplaneCounters::default(),
        }
    }

    /// One round: commands, a receive burst, the handler's work, a flush.
    /// Returns the number of frames and commands handled (0 when idle).
    pub fn poll(&mut self, now: Instant) -> usize {
        let mut work = self.apply_commands(now);
        self.rx.rx_burst(&mut self.burst, BURST as u16);
        work += self.burst.len();
        let mut burst = std::mem::take(&mut self.burst);
        for mbuf in burst.drain(..) {
            self.counters.rx_frames += 1;
            self.dispatch(now, mbuf);
        }
        self.burst = burst;
        self.handler.poll(now, &mut self.flows, &mut self.tx);
        while let Some(frame) = self.link.to_wire.pop() {
            work += 1;
            self.tx.push(frame);
        }
        self.tx.flush();
        work
    }

    fn apply_commands(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(command) = self.link.commands.pop() {
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
                Command::Packet(mbuf) => match classify_mbuf(&mbuf, &self.address) {
                    Classified::Tcp(meta) => {
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

    fn dispatch(&mut self, now: Instant, mbuf: Mbuf) {
        match classify_mbuf(&mbuf, &self.address) {
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

    fn pass_to_control(&mut self, mbuf: Mbuf) {
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

    /// Stops cleanly: sends what the device will still take, then frees
    /// every mbuf this core holds (queued frames, commands, received
    /// frames) and forgets its flows. Returns how many mbufs were dropped
    /// unsent.
    pub fn shutdown(&mut self) -> usize {
        self.tx.flush();
        let mut dropped = self.tx.discard_pending();
        while let Some(command) = self.link.commands.pop() {
            dropped += usize::from(matches!(command, Command::Packet(_)));
        }
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

fn classify_mbuf(mbuf: &Mbuf, address: &InterfaceAddress) -> Classified {
    let (ip, tcp) = rx_checksums(mbuf);
    classify(mbuf.data(), address, ip, tcp)
}

/// What the device says about a received frame's IPv4 and TCP checksums
/// (`RTE_MBUF_F_RX_*_CKSUM_*`); `Unknown` makes `net::classify` check them
/// in software. `NONE` means the device verified the data's integrity
/// though the field is not filled in, so it counts as good.
fn rx_checksums(mbuf: &Mbuf) -> (RxChecksum, RxChecksum) {
    use dpdk_sys as d;
    let flags = mbuf.ol_flags();
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
