//! [`Port`]: an ethdev configured with N receive and transmit queues.
//!
//! Configuration reads the device's capabilities first and asks only for
//! what it reports: RSS over the receive queues when `flow_type_rss_offloads`
//! is not empty (with uwarp's symmetric Toeplitz key and a redirection
//! table sending entry `i` to queue `i % queues`, so the receive queue of
//! a flow can be predicted: [`RssSteering`]), offloads masked by
//! `rx_offload_capa`/`tx_offload_capa`.
//! The queues are handed out once ([`Port::take_queues`]) as owned
//! [`RxQueue`]/[`TxQueue`] handles, one per polling core, so no queue is ever
//! polled by two threads. The device is stopped and released when the port
//! and every queue handle are gone; the pools its receive queues fill from
//! live at least that long.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::net::rss::{self, RssSteering};
use crate::queue::{RxQueue, TxQueue};

/// What to configure on a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Receive queues (one per dataplane core).
    pub rx_queues: u16,
    /// Transmit queues (one per dataplane core, plus the control core's).
    pub tx_queues: u16,
    /// Descriptors per receive queue (adjusted to the device's limits).
    pub rx_descriptors: u16,
    /// Descriptors per transmit queue (adjusted to the device's limits).
    pub tx_descriptors: u16,
    /// Spread received flows over the receive queues by RSS, when the
    /// device supports it and there is more than one queue.
    pub rss: bool,
    /// Receive offloads wanted (`RTE_ETH_RX_OFFLOAD_*`); only those the
    /// device reports are enabled.
    pub rx_offloads: u64,
    /// Transmit offloads wanted (`RTE_ETH_TX_OFFLOAD_*`); only those the
    /// device reports are enabled.
    pub tx_offloads: u64,
    /// Receive frames for every destination MAC address.
    pub promiscuous: bool,
    /// On a memory link ([`Device::is_memory_link`]), act as a device
    /// with IPv4 and TCP checksum offload, as virtio and the kernel's
    /// loopback do: TCP frames go out with the partial checksums of the
    /// offload contract and their offload flags, and a frame that arrives
    /// still carrying those flags (sent by a port of this process with
    /// this set) counts as verified, since it never left memory; such a
    /// port also takes a TCP payload chained to its headers as it lies.
    /// Both ends need it. Ignored on other devices; off by default.
    pub memory_link_offloads: bool,
    /// Send TCP payloads by reference where the device allows: as an
    /// external-buffer segment into the connection's send queue or the
    /// application's registered memory, chained to the headers
    /// ([`FrameSink::send_tcp_frame_referencing`]), instead of copied into
    /// the frame. A memory link with
    /// [`memory_link_offloads`](Self::memory_link_offloads) allows it
    /// (its peer reads the bytes where they lie), and so does a PCI
    /// device with TCP checksum offload when the EAL runs in IOVA-as-VA
    /// mode (VFIO): each region is mapped for its DMA by the first frame
    /// that references it ([`crate::dma`]; where that is refused, its
    /// frames are copied). Other virtual devices copy. Off by default: on
    /// the loopback it measured slower than the copy (see
    /// ARCHITECTURE.md).
    ///
    /// [`FrameSink::send_tcp_frame_referencing`]: crate::net::FrameSink::send_tcp_frame_referencing
    pub payloads_by_reference: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            rss: true,
            rx_offloads: dpdk_sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM
                | dpdk_sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM,
            tx_offloads: dpdk_sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS
                | dpdk_sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
                | dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM
                | dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_TSO,
            promiscuous: false,
            memory_link_offloads: false,
            payloads_by_reference: false,
        }
    }
}

/// What the device reports it can do (from `rte_eth_dev_info_get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// The driver's name, e.g. `net_ring`.
    pub driver: String,
    /// The most receive queues the device takes.
    pub max_rx_queues: u16,
    /// The most transmit queues the device takes.
    pub max_tx_queues: u16,
    /// Supported receive offloads (`RTE_ETH_RX_OFFLOAD_*`).
    pub rx_offloads: u64,
    /// Supported transmit offloads (`RTE_ETH_TX_OFFLOAD_*`).
    pub tx_offloads: u64,
    /// Flow types RSS can hash (`RTE_ETH_RSS_*`); 0 means no RSS.
    pub rss_flow_types: u64,
    /// The size of the RSS redirection table.
    pub reta_size: u16,
    /// The length of the RSS key in octets (0 when the device does not
    /// say).
    pub rss_key_len: u8,
    /// The largest frame the device receives.
    pub max_rx_pktlen: u32,
}

impl Capabilities {
    fn tx(&self, flag: u64) -> bool {
        self.tx_offloads & flag == flag
    }

    fn rx(&self, flag: u64) -> bool {
        self.rx_offloads & flag == flag
    }

    /// The device computes IPv4 header checksums on transmit.
    pub fn tx_ipv4_checksum(&self) -> bool {
        self.tx(dpdk_sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
    }

    /// The device computes TCP checksums on transmit.
    pub fn tx_tcp_checksum(&self) -> bool {
        self.tx(dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
    }

    /// The device cuts large TCP segments itself (TSO).
    pub fn tx_tcp_tso(&self) -> bool {
        self.tx(dpdk_sys::RTE_ETH_TX_OFFLOAD_TCP_TSO)
    }

    /// The device transmits chained (multi-segment) mbufs.
    pub fn tx_multi_segs(&self) -> bool {
        self.tx(dpdk_sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
    }

    /// The device checks IPv4 header checksums on receive.
    pub fn rx_ipv4_checksum(&self) -> bool {
        self.rx(dpdk_sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
    }

    /// The device checks TCP checksums on receive.
    pub fn rx_tcp_checksum(&self) -> bool {
        self.rx(dpdk_sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM)
    }

    /// The device can spread flows over receive queues (RSS).
    pub fn rss(&self) -> bool {
        self.rss_flow_types != 0
    }
}

/// The state shared by a port and its queue handles; dropping the last of
/// them stops the device and releases it.
#[derive(Debug)]
pub(crate) struct PortShared {
    pub(crate) port_id: u16,
    device: Device,
    started: AtomicBool,
    /// The transmit offloads enabled (`RTE_ETH_TX_OFFLOAD_*`), which
    /// its transmit queues may ask of the device per mbuf.
    pub(crate) tx_offloads: u64,
    /// [`PortConfig::memory_link_offloads`], on a memory link.
    pub(crate) memory_link_offloads: bool,
    /// [`PortConfig::payloads_by_reference`], where the device allows it.
    pub(crate) payloads_by_reference: bool,
    /// Whether memory sent by reference is first mapped for the device's
    /// DMA: a PCI device, with the EAL in IOVA-as-VA mode.
    pub(crate) map_payloads_for_dma: bool,
    /// On a started net_memif port, the lock its driver's teardown takes
    /// ([`PortShared::memif_teardown_lock`]); null elsewhere.
    memif_teardown_lock: AtomicPtr<dpdk_sys::rte_spinlock_t>,
    rx_pools: Vec<Arc<Mempool>>,
}

impl PortShared {
    /// The lock bursts on this port hold so that net_memif's teardown,
    /// run by the EAL's interrupt thread when the peer closes its end,
    /// cannot unmap the rings under a burst (`dpdk-sys/csrc/memif_guard.c`
    /// explains the race); null when the port needs none or its driver
    /// is not the net_memif the guard knows. The lock lives in the
    /// driver's private data, which lasts until the device closes, after
    /// every queue handle is gone.
    pub(crate) fn memif_teardown_lock(&self) -> *mut dpdk_sys::rte_spinlock_t {
        self.memif_teardown_lock.load(Ordering::Acquire)
    }

    /// Looks the teardown lock up again, once the port started (the
    /// driver's queues are found through what `rte_eth_dev_start` set).
    fn find_memif_teardown_lock(&self) {
        let pool = self
            .rx_pools
            .first()
            .map_or(std::ptr::null_mut(), |p| p.as_ptr());
        // SAFETY: the port is configured and started; the function only
        // reads the device's info and, once they proved to be net_memif's
        // as DPDK 22.11 lays them out, its queue and private data.
        let lock = unsafe { dpdk_sys::uwarp_memif_guard_lock(self.port_id, pool) };
        self.memif_teardown_lock.store(lock, Ordering::Release);
    }
}

impl Drop for PortShared {
    fn drop(&mut self) {
        if self.started.load(Ordering::Relaxed) {
            // SAFETY: no queue handle is left (this is the last reference),
            // so nothing polls the port.
            unsafe { dpdk_sys::uwarp_memif_dev_stop(self.device.port_id()) };
        }
        // `device` then closes or removes the port, and the pools go last.
    }
}

/// The queue handles of a port, given out once by [`Port::take_queues`].
#[derive(Debug)]
pub struct Queues {
    /// Receive queues, index = queue id.
    pub rx: Vec<RxQueue>,
    /// Transmit queues, index = queue id.
    pub tx: Vec<TxQueue>,
}

/// The name of the bus `device` is on (`pci`, `vdev`, ...), if it has one.
fn bus_name(device: *mut dpdk_sys::rte_device) -> Option<&'static str> {
    if device.is_null() {
        return None;
    }
    // SAFETY: `device` is the live device of a port from
    // `rte_eth_dev_info_get`; a bus and its name are static in DPDK.
    unsafe {
        let bus = dpdk_sys::rte_dev_bus(device);
        if bus.is_null() {
            return None;
        }
        let name = dpdk_sys::rte_bus_name(bus);
        if name.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(name).to_str().ok()
    }
}

/// A configured ethdev port.
#[derive(Debug)]
pub struct Port {
    shared: Arc<PortShared>,
    queues: Option<Queues>,
    capabilities: Capabilities,
    rss_flow_types: u64,
    steering: Option<RssSteering>,
    rx_offloads: u64,
    tx_offloads: u64,
}

impl Port {
    /// Configures `device` as `config` says. Receive queue `q` fills from
    /// `rx_pools[q]`, or from `rx_pools[0]` when only one pool is given.
    /// The port is left stopped.
    pub fn configure(
        eal: &Eal,
        device: Device,
        config: &PortConfig,
        rx_pools: &[Arc<Mempool>],
    ) -> Result<Port> {
        let port_id = device.port_id();
        let capabilities = capabilities(port_id)?;
        if config.rx_queues == 0 || config.rx_queues > capabilities.max_rx_queues {
            return Err(Error::InvalidArgument(format!(
                "{} receive queues (the device takes 1 to {})",
                config.rx_queues, capabilities.max_rx_queues
            )));
        }
        if config.tx_queues == 0 || config.tx_queues > capabilities.max_tx_queues {
            return Err(Error::InvalidArgument(format!(
                "{} transmit queues (the device takes 1 to {})",
                config.tx_queues, capabilities.max_tx_queues
            )));
        }
        if rx_pools.len() != 1 && rx_pools.len() != usize::from(config.rx_queues) {
            return Err(Error::InvalidArgument(format!(
                "{} pools for {} receive queues (give 1 or one per queue)",
                rx_pools.len(),
                config.rx_queues
            )));
        }

        let mut conf = dpdk_sys::rte_eth_conf::default();
        let rss_on = config.rss && config.rx_queues > 1 && capabilities.rss();
        let mut steering = rss_on.then(|| {
            let key_len = match capabilities.rss_key_len {
                0 => rss::KEY_LEN,
                len => usize::from(len),
            };
            RssSteering::new(
                rss::symmetric_key(key_len),
                capabilities.reta_size,
                config.rx_queues,
            )
        });
        // Read by `rte_eth_dev_configure` only; it outlives the call.
        let mut key = steering.as_ref().map(|s| s.key().to_vec());
        let rss_flow_types = match key.as_mut() {
            Some(key) => {
                let wanted = dpdk_sys::RTE_ETH_RSS_IP
                    | dpdk_sys::RTE_ETH_RSS_TCP
                    | dpdk_sys::RTE_ETH_RSS_UDP;
                let hf = wanted & capabilities.rss_flow_types;
                conf.rxmode.mq_mode = dpdk_sys::RTE_ETH_MQ_RX_RSS;
                conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
                conf.rx_adv_conf.rss_conf.rss_key_len = key.len() as u8;
                conf.rx_adv_conf.rss_conf.rss_hf = hf;
                // Only a hash over the TCP ports can be predicted per flow.
                if hf & dpdk_sys::RTE_ETH_RSS_NONFRAG_IPV4_TCP == 0 {
                    steering = None;
                }
                hf
            }
            None => 0,
        };
        let rx_offloads = config.rx_offloads & capabilities.rx_offloads;
        let tx_offloads = config.tx_offloads & capabilities.tx_offloads;
        conf.rxmode.offloads = rx_offloads;
        conf.txmode.offloads = tx_offloads;

        // SAFETY (this block and the calls below): the EAL is initialised,
        // the port is claimed by `device`, and every pointer passed refers
        // to a local that outlives the call.
        let ret = unsafe {
            dpdk_sys::rte_eth_dev_configure(port_id, config.rx_queues, config.tx_queues, &conf)
        };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_configure", ret));
        }
        let (mut nb_rxd, mut nb_txd) = (config.rx_descriptors, config.tx_descriptors);
        let ret = unsafe {
            dpdk_sys::rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &mut nb_rxd, &mut nb_txd)
        };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_adjust_nb_rx_tx_desc", ret));
        }
        // -1 (unknown) becomes SOCKET_ID_ANY as the queue set-up expects.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(port_id) } as u32;
        let mut info = dpdk_sys::rte_eth_dev_info::default();
        let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(port_id, &mut info) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_info_get", ret));
        }
        for q in 0..config.rx_queues {
            let pool = &rx_pools[if rx_pools.len() == 1 {
                0
            } else {
                usize::from(q)
            }];
            let mut rxconf = info.default_rxconf;
            rxconf.offloads = rx_offloads;
            let ret = unsafe {
                dpdk_sys::rte_eth_rx_queue_setup(port_id, q, nb_rxd, socket, &rxconf, pool.as_ptr())
            };
            if ret != 0 {
                return Err(Error::from_neg("rte_eth_rx_queue_setup", ret));
            }
        }
        for q in 0..config.tx_queues {
            let mut txconf = info.default_txconf;
            txconf.offloads = tx_offloads;
            let ret =
                unsafe { dpdk_sys::rte_eth_tx_queue_setup(port_id, q, nb_txd, socket, &txconf) };
            if ret != 0 {
                return Err(Error::from_neg("rte_eth_tx_queue_setup", ret));
            }
        }
        if config.promiscuous {
            let ret = unsafe { dpdk_sys::rte_eth_promiscuous_enable(port_id) };
            if ret != 0 && ret != -(dpdk_sys::ENOTSUP as i32) {
                return Err(Error::from_neg("rte_eth_promiscuous_enable", ret));
            }
        }

        let memory_link_offloads = config.memory_link_offloads && device.is_memory_link();
        // A PCI device reads external buffers by DMA at their I/O address,
        // which is the virtual one in IOVA-as-VA mode, once the memory is
        // mapped for it (`crate::dma`); virtual devices other than memory
        // links copy, as before.
        let map_payloads_for_dma = eal.iova_is_va() && bus_name(info.device) == Some("pci");
        let payloads_by_reference =
            config.payloads_by_reference && (memory_link_offloads || map_payloads_for_dma);
        let shared = Arc::new(PortShared {
            port_id,
            memory_link_offloads,
            payloads_by_reference,
            map_payloads_for_dma,
            device,
            started: AtomicBool::new(false),
            tx_offloads,
            memif_teardown_lock: AtomicPtr::new(std::ptr::null_mut()),
            rx_pools: rx_pools.to_vec(),
        });
        let queues = Queues {
            rx: (0..config.rx_queues)
                .map(|q| RxQueue::new(Arc::clone(&shared), q))
                .collect(),
            tx: (0..config.tx_queues)
                .map(|q| TxQueue::new(Arc::clone(&shared), q))
                .collect(),
        };
        Ok(Port {
            shared,
            queues: Some(queues),
            capabilities,
            rss_flow_types,
            steering,
            rx_offloads,
            tx_offloads,
        })
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.shared.port_id
    }

    /// The port's device.
    pub fn device(&self) -> &Device {
        &self.shared.device
    }

    /// The queue handles; `Some` only the first time.
    pub fn take_queues(&mut self) -> Option<Queues> {
        self.queues.take()
    }

    /// Starts the device: bursts move packets from here on. With RSS on,
    /// the redirection table is programmed once the device runs (some
    /// drivers rewrite it at start); a device that cannot take it keeps
    /// its own, and [`Port::rss_steering`] is `None` from then on.
    pub fn start(&mut self) -> Result<()> {
        // SAFETY: the port is configured and claimed by self.
        let ret = unsafe { dpdk_sys::rte_eth_dev_start(self.port_id()) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_start", ret));
        }
        self.shared.started.store(true, Ordering::Relaxed);
        self.shared.find_memif_teardown_lock();
        if let Some(steering) = &self.steering {
            if !program_reta(self.port_id(), steering.reta()) {
                self.steering = None;
            }
        }
        Ok(())
    }

    /// How received IPv4/TCP frames are spread over the receive queues,
    /// when RSS is on with uwarp's key and table (`None` otherwise: one
    /// queue, no RSS, or a device that took neither).
    pub fn rss_steering(&self) -> Option<&RssSteering> {
        self.steering.as_ref()
    }

    /// Stops the device. Call it only once the cores polling its queues
    /// have stopped polling; a burst on a stopped port moves nothing.
    pub fn stop(&mut self) -> Result<()> {
        // SAFETY: the port is claimed by self.
        let ret = unsafe { dpdk_sys::uwarp_memif_dev_stop(self.port_id()) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_stop", ret));
        }
        self.shared.started.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Starts the port and waits until its link is up, stopping and
    /// starting it again whenever the start fails or the link stays down
    /// for `attempt`; gives up after `total`. A net_memif client needs
    /// this: it connects only when started, fails to start while its
    /// server does not listen yet, and does not retry a handshake its
    /// server refused (as one that listens but is not yet started does).
    pub fn start_until_link_up(&mut self, attempt: Duration, total: Duration) -> Result<()> {
        let deadline = Instant::now() + total;
        while Instant::now() < deadline {
            if self.start().is_ok() {
                let give_up = Instant::now() + attempt;
                while Instant::now() < give_up {
                    if self.link()?.up {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                self.stop()?;
            } else {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Err(Error::LinkDown { waited: total })
    }

    /// Waits until the link is down, looking every 10 ms; `false` if it
    /// was still up (or unreadable) after `timeout`. On net_memif the
    /// link goes down when the peer closes its end, which the EAL's
    /// interrupt thread handles.
    pub fn wait_for_link_down(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.link().is_ok_and(|link| !link.up) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the port is the client end of a net_memif link (its devargs
    /// say `role=client`): it connects only when started and does not
    /// try again when its server refused it, so it is started again
    /// until the link comes up ([`start_until_link_up`](Self::start_until_link_up)).
    pub fn is_memif_client(&self) -> bool {
        // SAFETY: reads the info and devargs of a port claimed by self.
        unsafe { dpdk_sys::uwarp_memif_is_client(self.port_id()) != 0 }
    }

    /// Whether bursts on this port hold net_memif's teardown lock, so
    /// that the peer's exit cannot unmap the rings under them
    /// (`dpdk-sys/csrc/memif_guard.c`): on a started net_memif port of
    /// DPDK 22.11.
    pub fn guards_memif_teardown(&self) -> bool {
        !self.shared.memif_teardown_lock().is_null()
    }

    /// Whether [`start`](Self::start) succeeded and no
    /// [`stop`](Self::stop) followed.
    pub fn is_started(&self) -> bool {
        self.shared.started.load(Ordering::Relaxed)
    }

    /// What the device reported when the port was configured.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The RSS flow types enabled (0: RSS is off).
    pub fn rss_flow_types(&self) -> u64 {
        self.rss_flow_types
    }

    /// The receive offloads enabled.
    pub fn rx_offloads(&self) -> u64 {
        self.rx_offloads
    }

    /// The transmit offloads enabled.
    pub fn tx_offloads(&self) -> u64 {
        self.tx_offloads
    }

    /// The port's MAC address.
    pub fn mac_address(&self) -> Result<[u8; 6]> {
        let mut addr = dpdk_sys::rte_ether_addr::default();
        // SAFETY: the port is valid; addr outlives the call.
        let ret = unsafe { dpdk_sys::rte_eth_macaddr_get(self.port_id(), &mut addr) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_macaddr_get", ret));
        }
        Ok(addr.addr_bytes)
    }
}

/// Writes `reta` (entry → queue) to the device's redirection table;
/// whether the device took it.
fn program_reta(port_id: u16, reta: &[u16]) -> bool {
    let group = dpdk_sys::RTE_ETH_RETA_GROUP_SIZE as usize;
    let mut conf: Vec<dpdk_sys::rte_eth_rss_reta_entry64> = reta
        .chunks(group)
        .map(|chunk| {
            let mut entry = dpdk_sys::rte_eth_rss_reta_entry64 {
                mask: 0,
                reta: [0; 64],
            };
            for (i, &queue) in chunk.iter().enumerate() {
                entry.mask |= 1 << i;
                entry.reta[i] = queue;
            }
            entry
        })
        .collect();
    let Ok(size) = u16::try_from(reta.len()) else {
        return false;
    };
    // SAFETY: `conf` holds one entry per 64 table entries, as the size
    // says, and outlives the call.
    let ret = unsafe { dpdk_sys::rte_eth_dev_rss_reta_update(port_id, conf.as_mut_ptr(), size) };
    ret == 0
}

/// Reads the device's capabilities.
pub(crate) fn capabilities(port_id: u16) -> Result<Capabilities> {
    let mut info = dpdk_sys::rte_eth_dev_info::default();
    // SAFETY: info outlives the call; DPDK fills it.
    let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(port_id, &mut info) };
    if ret != 0 {
        return Err(Error::from_neg("rte_eth_dev_info_get", ret));
    }
    let driver = if info.driver_name.is_null() {
        String::new()
    } else {
        // SAFETY: the driver name is a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(info.driver_name) }
            .to_string_lossy()
            .into_owned()
    };
    Ok(Capabilities {
        driver,
        max_rx_queues: info.max_rx_queues,
        max_tx_queues: info.max_tx_queues,
        rx_offloads: info.rx_offload_capa,
        tx_offloads: info.tx_offload_capa,
        rss_flow_types: info.flow_type_rss_offloads,
        reta_size: info.reta_size,
        rss_key_len: info.hash_key_size,
        max_rx_pktlen: info.max_rx_pktlen,
    })
}
