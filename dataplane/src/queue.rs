//! [`RxQueue`] and [`TxQueue`]: one queue of a port, polled by one core.
//!
//! A handle is `Send` but bursts take `&mut self`, and each queue has
//! exactly one handle, so a queue is never polled from two threads at once,
//! which DPDK requires. Bursts move [`Mbuf`]s in and out of a `Vec` whose
//! capacity is reused: no allocation once the vector has grown.

use std::sync::Arc;

use crate::mbuf::Mbuf;
use crate::port::PortShared;

/// A receive queue of a [`Port`](crate::Port).
#[derive(Debug)]
pub struct RxQueue {
    port: Arc<PortShared>,
    queue: u16,
}

impl RxQueue {
    pub(crate) fn new(port: Arc<PortShared>, queue: u16) -> Self {
        RxQueue { port, queue }
    }

    /// The port id.
    pub fn port_id(&self) -> u16 {
        self.port.port_id
    }

    /// The queue id.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Whether a frame that arrives with the transmit checksum offload
    /// flags still set came from a port of this process over a memory link
    /// and counts as verified ([`PortConfig::memory_link_offloads`]).
    ///
    /// [`PortConfig::memory_link_offloads`]: crate::PortConfig::memory_link_offloads
    pub fn trusts_offloaded_frames(&self) -> bool {
        self.port.memory_link_offloads
    }

    /// Whether the port's link is up (`rte_eth_link_get_nowait`; a link
    /// that cannot be read counts as up).
    pub fn link_up(&self) -> bool {
        let mut link = dpdk_sys::rte_eth_link::default();
        // SAFETY: the port is valid while a queue handle lives; `link`
        // outlives the call.
        let ret = unsafe { dpdk_sys::rte_eth_link_get_nowait(self.port.port_id, &mut link) };
        ret != 0 || u32::from(link.link_status()) == dpdk_sys::RTE_ETH_LINK_UP
    }

    /// Receives up to `max` packets, appended to `out`; returns how many.
    pub fn rx_burst(&mut self, out: &mut Vec<Mbuf>, max: u16) -> usize {
        out.reserve(usize::from(max));
        let len = out.len();
        // SAFETY: the spare capacity has room for `max` pointers and Mbuf
        // is a transparent non-null pointer; DPDK writes `n <= max` valid
        // mbufs, now owned by us. The queue is configured and polled only
        // through this handle (&mut self).
        unsafe {
            let dst = out.as_mut_ptr().add(len).cast::<*mut dpdk_sys::rte_mbuf>();
            let (port, queue) = (self.port.port_id, self.queue);
            // The teardown lock, where there is one, is the driver's and
            // lives as long as the port (PortShared::memif_teardown_lock).
            let lock = self.port.memif_teardown_lock();
            let n = if lock.is_null() {
                dpdk_sys::shim_rte_eth_rx_burst(port, queue, dst, max)
            } else {
                dpdk_sys::uwarp_memif_guarded_rx_burst(lock, port, queue, dst, max)
            };
            out.set_len(len + usize::from(n));
            usize::from(n)
        }
    }
}

/// A transmit queue of a [`Port`](crate::Port).
#[derive(Debug)]
pub struct TxQueue {
    port: Arc<PortShared>,
    queue: u16,
}

impl TxQueue {
    pub(crate) fn new(port: Arc<PortShared>, queue: u16) -> Self {
        TxQueue { port, queue }
    }

    /// The port id.
    pub fn port_id(&self) -> u16 {
        self.port.port_id
    }

    /// The queue id.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Whether the port computes the TCP checksums of frames sent with
    /// [`Mbuf::offload_tcp_checksum`] (the offload reported by the device
    /// and enabled), or a memory link stands in for such a device
    /// ([`PortConfig::memory_link_offloads`]).
    ///
    /// [`PortConfig::memory_link_offloads`]: crate::PortConfig::memory_link_offloads
    pub fn offloads_tcp_checksums(&self) -> bool {
        self.port.tx_offloads & dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM != 0
            || self.port.memory_link_offloads
    }

    /// Whether it also computes their IPv4 header checksums
    /// ([`Mbuf::offload_tcp_checksums`]); virtio, for one, does not.
    pub fn offloads_ipv4_checksums(&self) -> bool {
        self.port.tx_offloads & dpdk_sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM != 0
            || self.port.memory_link_offloads
    }

    /// Whether frames carry their TCP payload by reference, in an
    /// external-buffer segment ([`PortConfig::payloads_by_reference`],
    /// where the device allows it). Only with checksum offload: the
    /// headers are written apart from the payload, so nothing here sums
    /// it.
    ///
    /// [`PortConfig::payloads_by_reference`]: crate::PortConfig::payloads_by_reference
    pub fn references_payloads(&self) -> bool {
        self.port.payloads_by_reference && self.offloads_tcp_checksums()
    }

    /// Whether the memory a frame's payload is referenced in must first be
    /// mapped for the device's DMA ([`crate::dma`]): on a PCI device.
    pub fn maps_payloads_for_dma(&self) -> bool {
        self.port.map_payloads_for_dma
    }

    /// Transmits the packets of `pkts` from the front; returns how many the
    /// device took. Those leave `pkts` (the device frees them once sent);
    /// the rest stay in `pkts`, in order, still owned by the caller.
    pub fn tx_burst(&mut self, pkts: &mut Vec<Mbuf>) -> usize {
        let len = pkts.len();
        let n = u16::try_from(len).unwrap_or(u16::MAX);
        // SAFETY: pkts holds `len >= n` owned mbufs laid out as pointers.
        // The device takes ownership of the first `sent`; they are removed
        // from the vector without being dropped, and the unsent rest is
        // moved to the front. The queue is used only through this handle.
        unsafe {
            let p = pkts.as_mut_ptr();
            let (port, queue, mbufs) = (self.port.port_id, self.queue, p.cast());
            // As in RxQueue::rx_burst.
            let lock = self.port.memif_teardown_lock();
            let sent = usize::from(if lock.is_null() {
                dpdk_sys::shim_rte_eth_tx_burst(port, queue, mbufs, n)
            } else {
                dpdk_sys::uwarp_memif_guarded_tx_burst(lock, port, queue, mbufs, n)
            });
            std::ptr::copy(p.add(sent), p, len - sent);
            pkts.set_len(len - sent);
            sent
        }
    }
}
