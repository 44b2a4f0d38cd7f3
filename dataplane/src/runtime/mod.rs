//! The poll-mode runtime (ARCHITECTURE.md, "The DPDK runtime"): a
//! control core and dataplane cores, each a struct with `poll()`.
//!
//! - [`flow_table`]: the per-core 4-tuple → flow map.
//! - [`link`]: the rings between the control core and each dataplane core.
//! - [`tx_batch`]: frames into mbufs, sent in bursts on a core's own queue.
//! - [`dataplane_core`]: receive, classify, hand to flows, transmit.
//! - [`control_core`]: ARP/ICMP through the [`Interface`], unknown flows
//!   and SYNs to the connection set-up handler, hand-over commands.
//! - [`control_tx`]: the control core's own transmit queue, or dataplane
//!   core 0's when the device has none to spare.
//! - [`impair`]: seeded loss, reordering, duplication and delay of what a
//!   port receives and sends, off unless switched on.
//! - [`runner`]: pinned threads ([`Runtime`]) or one stepping thread
//!   ([`Stepper`]), and clean shutdown.
//!
//! [`assemble`] builds the cores over a started port: dataplane core `i`
//! polls receive queue `i` and sends on transmit queue `i`; the control
//! core sends on one more transmit queue of its own when the device has
//! it ([`start_port`] asks for it), through dataplane core 0 otherwise.
//! All the cores of a port share one [`ImpairSwitch`], reachable through
//! [`DataplaneCore::impairment`].

pub mod control_core;
pub mod control_tx;
pub mod dataplane_core;
pub mod flow_table;
pub mod impair;
pub mod link;
pub mod runner;
pub mod tx_batch;

use std::sync::Arc;

pub use control_core::{ControlContext, ControlCore, ControlCounters, ControlHandler};
pub use control_tx::ControlTx;
pub use dataplane_core::{tcp_segment, DataplaneCore, DataplaneCounters, FlowHandler};
pub use flow_table::FlowTable;
pub use impair::{ImpairConfig, ImpairCounters, ImpairSwitch, Impairer, Impairment};
pub use link::{Command, CoreLink};
pub use runner::{Placement, Runtime, Stepper, Stopped};
pub use tx_batch::{TxBatch, TxCounters};

use crate::device::Device;
use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::net::{Interface, InterfaceConfig};
use crate::port::{Capabilities, Port, PortConfig, Queues};

/// Drivers that need as many transmit queues as receive queues: DPDK
/// 22.11's net_tap refuses anything else at configure time ("number of rx
/// queues must be equal to number of tx queues"), net_memif pairs each
/// side's transmit rings with the peer's receive rings, and net_virtio
/// turns on queue *pairs*, as many as the larger count: a spare transmit
/// queue would turn on a receive queue nobody polls, into which the device
/// (a multi-queue tap behind it) steers part of the traffic.
const EQUAL_QUEUE_DRIVERS: &[&str] = &["net_tap", "net_memif", "net_virtio"];

/// The port configuration for `cores` dataplane cores on a device with
/// `capabilities`: `cores` receive queues (RSS across them when the device
/// has it) and `cores + 1` transmit queues, the last for the control core,
/// when the device has that many (`cores` otherwise).
pub fn port_config(capabilities: &Capabilities, cores: u16) -> PortConfig {
    let spare_tx = capabilities.max_tx_queues > cores
        && !EQUAL_QUEUE_DRIVERS.contains(&capabilities.driver.as_str());
    PortConfig {
        rx_queues: cores,
        tx_queues: cores + u16::from(spare_tx),
        rss: cores > 1,
        ..PortConfig::default()
    }
}

/// Checks that a device with `capabilities` can give `cores` dataplane
/// cores a receive and a transmit queue each, with an error that says
/// what the device has when it cannot.
pub fn check_cores(capabilities: &Capabilities, cores: u16) -> Result<()> {
    let queues = capabilities.max_rx_queues.min(capabilities.max_tx_queues);
    if cores == 0 || cores > queues {
        return Err(Error::InvalidArgument(format!(
            "{cores} dataplane cores need as many receive and transmit queues, and {} has {} \
             receive and {} transmit queues (give 1 to {queues} cores{})",
            capabilities.driver,
            capabilities.max_rx_queues,
            capabilities.max_tx_queues,
            if capabilities.driver == "net_af_packet" {
                ", or more with the device's qpairs=N"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

/// Configures `device` with [`port_config`], receive queues filled from
/// `pool`, starts it and takes its queues.
pub fn start_port(
    eal: &Eal,
    device: Device,
    cores: u16,
    pool: &Arc<Mempool>,
) -> Result<(Port, Queues)> {
    let capabilities = device.capabilities()?;
    check_cores(&capabilities, cores)?;
    let config = port_config(&capabilities, cores);
    let mut port = Port::configure(eal, device, &config, std::slice::from_ref(pool))?;
    port.start()?;
    let queues = port
        .take_queues()
        .ok_or_else(|| Error::InvalidArgument("the port's queues are taken".into()))?;
    Ok((port, queues))
}

/// Builds the control core and one dataplane core per handler in
/// `dataplanes` over `queues`, which must hold as many receive queues as
/// dataplane cores and as many transmit queues, or one more for the
/// control core. `pools` holds one mempool
/// per core (dataplane cores first, the control core last) or a single
/// pool they share.
pub fn assemble<C, D>(
    config: InterfaceConfig,
    queues: Queues,
    pools: &[Arc<Mempool>],
    control: C,
    dataplanes: Vec<D>,
) -> Result<(ControlCore<C>, Vec<DataplaneCore<D>>)>
where
    C: ControlHandler<Flow = D::Flow>,
    D: FlowHandler,
{
    let cores = dataplanes.len();
    let own_tx = queues.tx.len() == cores + 1;
    if cores == 0 || queues.rx.len() != cores || !(own_tx || queues.tx.len() == cores) {
        return Err(Error::InvalidArgument(format!(
            "{cores} dataplane cores need {cores} receive queues and {cores} or {} transmit \
             queues, not {} and {}",
            cores + 1,
            queues.rx.len(),
            queues.tx.len()
        )));
    }
    if pools.len() != 1 && pools.len() != cores + 1 {
        return Err(Error::InvalidArgument(format!(
            "{} mempools for {} cores (give one, or one per core)",
            pools.len(),
            cores + 1
        )));
    }
    let pool = |i: usize| Arc::clone(&pools[i.min(pools.len() - 1)]);
    let address = config.address;
    let switch = Arc::new(ImpairSwitch::default());
    let mut tx = queues.tx.into_iter();
    let mut links = Vec::with_capacity(cores);
    let mut cores_out = Vec::with_capacity(cores);
    for (i, (rx, handler)) in queues.rx.into_iter().zip(dataplanes).enumerate() {
        let link = Arc::new(CoreLink::default());
        let txq = tx.next().expect("length checked above");
        let batch = TxBatch::new(txq, pool(i));
        let mut core = DataplaneCore::new(rx, batch, address, Arc::clone(&link), handler);
        core.set_impairment(Arc::clone(&switch));
        cores_out.push(core);
        links.push(link);
    }
    let control_tx = match tx.next() {
        Some(queue) => {
            let mut batch = TxBatch::new(queue, pool(cores));
            batch.set_impairment(switch);
            ControlTx::Queue(batch)
        }
        None => ControlTx::ViaCore {
            pool: pool(cores),
            link: Arc::clone(&links[0]),
            counters: TxCounters::default(),
        },
    };
    let control = ControlCore::new(Interface::new(config), control_tx, links, control);
    Ok((control, cores_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device of `driver` with `queues` receive and transmit queues.
    fn device(driver: &str, queues: u16) -> Capabilities {
        Capabilities {
            driver: driver.to_owned(),
            max_rx_queues: queues,
            max_tx_queues: queues,
            rx_offloads: 0,
            tx_offloads: 0,
            rss_flow_types: 0,
            reta_size: 0,
            rss_key_len: 0,
            max_rx_pktlen: 1518,
        }
    }

    #[test]
    fn the_control_core_gets_a_spare_transmit_queue_where_the_device_has_one() {
        let config = port_config(&device("net_e1000_em", 2), 1);
        assert_eq!((config.rx_queues, config.tx_queues), (1, 2));
        let config = port_config(&device("net_e1000_em", 2), 2);
        assert_eq!((config.rx_queues, config.tx_queues), (2, 2));
    }

    #[test]
    fn queue_pair_devices_get_as_many_transmit_queues_as_receive_queues() {
        // A spare transmit queue on net_virtio turned on a second receive
        // queue, and frames the multi-queue tap put there were lost.
        for driver in ["net_virtio", "net_tap", "net_memif"] {
            let config = port_config(&device(driver, 4), 1);
            assert_eq!((config.rx_queues, config.tx_queues), (1, 1), "{driver}");
            let config = port_config(&device(driver, 4), 2);
            assert_eq!((config.rx_queues, config.tx_queues), (2, 2), "{driver}");
        }
    }
}
