//! Link state and counters of a [`Port`]: `rte_eth_link_get_nowait`,
//! `rte_eth_stats_get` and the driver's extended statistics.

use std::ffi::CStr;

use crate::error::{Error, Result};
use crate::port::Port;

/// The link as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// The link is up.
    pub up: bool,
    /// Speed in Mb/s (`RTE_ETH_SPEED_NUM_*`; 0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
    /// Speed negotiated automatically.
    pub autoneg: bool,
}

/// The basic counters of `rte_eth_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets received.
    pub rx_packets: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets the device dropped because a receive queue was full.
    pub rx_missed: u64,
    /// Erroneous received packets.
    pub rx_errors: u64,
    /// Failed transmissions.
    pub tx_errors: u64,
    /// Receive failures for want of an mbuf.
    pub rx_no_mbuf: u64,
}

impl Port {
    /// The link state, without waiting for autonegotiation.
    pub fn link(&self) -> Result<Link> {
        let mut link = dpdk_sys::rte_eth_link::default();
        // SAFETY: the port is valid; link outlives the call.
        let ret = unsafe { dpdk_sys::rte_eth_link_get_nowait(self.port_id(), &mut link) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_link_get_nowait", ret));
        }
        Ok(Link {
            up: u32::from(link.link_status()) == dpdk_sys::RTE_ETH_LINK_UP,
            speed_mbps: link.link_speed,
            full_duplex: u32::from(link.link_duplex()) == dpdk_sys::RTE_ETH_LINK_FULL_DUPLEX,
            autoneg: u32::from(link.link_autoneg()) == dpdk_sys::RTE_ETH_LINK_AUTONEG,
        })
    }

    /// The basic counters.
    pub fn stats(&self) -> Result<Stats> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: the port is valid; s outlives the call.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.port_id(), &mut s) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_stats_get", ret));
        }
        Ok(Stats {
            rx_packets: s.ipackets,
            tx_packets: s.opackets,
            rx_bytes: s.ibytes,
            tx_bytes: s.obytes,
            rx_missed: s.imissed,
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_no_mbuf: s.rx_nombuf,
        })
    }

    /// Sets the basic counters back to 0.
    pub fn reset_stats(&mut self) -> Result<()> {
        // SAFETY: the port is valid.
        let ret = unsafe { dpdk_sys::rte_eth_stats_reset(self.port_id()) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_stats_reset", ret));
        }
        Ok(())
    }

    /// The extended statistics as (name, value) pairs, in the driver's
    /// order (generic counters such as `rx_good_packets` first, then
    /// per-queue and driver-specific ones).
    pub fn xstats(&self) -> Result<Vec<(String, u64)>> {
        let port = self.port_id();
        // The count can change between calls (queues reconfigured), so ask
        // again until names and values agree.
        for _ in 0..4 {
            // SAFETY: a NULL array asks for the count.
            let n = unsafe { dpdk_sys::rte_eth_xstats_get_names(port, std::ptr::null_mut(), 0) };
            if n < 0 {
                return Err(Error::from_neg("rte_eth_xstats_get_names", n));
            }
            let n = n as usize;
            let mut names = vec![dpdk_sys::rte_eth_xstat_name::default(); n];
            let mut values = vec![dpdk_sys::rte_eth_xstat::default(); n];
            // SAFETY: both arrays hold n entries.
            let got_names =
                unsafe { dpdk_sys::rte_eth_xstats_get_names(port, names.as_mut_ptr(), n as u32) };
            // SAFETY: as above.
            let got_values =
                unsafe { dpdk_sys::rte_eth_xstats_get(port, values.as_mut_ptr(), n as u32) };
            if got_names < 0 {
                return Err(Error::from_neg("rte_eth_xstats_get_names", got_names));
            }
            if got_values < 0 {
                return Err(Error::from_neg("rte_eth_xstats_get", got_values));
            }
            if got_names as usize != n || got_values as usize != n {
                continue;
            }
            return Ok(values
                .iter()
                .map(|v| {
                    let name = names
                        .get(v.id as usize)
                        // SAFETY: DPDK writes NUL-terminated names.
                        .map(|nm| unsafe { CStr::from_ptr(nm.name.as_ptr()) })
                        .map(|c| c.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    (name, v.value)
                })
                .collect());
        }
        Err(Error::Unsupported(
            "the number of extended statistics kept changing".into(),
        ))
    }
}
