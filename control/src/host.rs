//! [`TcpHost`]: a TCP/IP host on one DPDK port, ready to listen and
//! connect: the port started, a control core running [`TcpSetup`] and
//! `HostConfig::dataplane_cores` dataplane cores running a [`TcpCore`]
//! each, on threads of their own.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp_dataplane::af_xdp::{KernelPorts, PortMap};
use uwarp_dataplane::net::{InterfaceAddress, InterfaceConfig, NetCounters, Vlan};
use uwarp_dataplane::runtime::{
    assemble, check_cores, port_config, ControlHandler, DataplaneCounters, ImpairCounters,
    ImpairSwitch, Impairment, Placement, Runtime, Stopped, TxCounters,
};
use uwarp_dataplane::{Device, Eal, Mempool, MempoolConfig, Port, PortConfig, Queues, Stats};
use uwarp_stack::tcp::{Config, Endpoint};

use crate::setup::{SetupCounters, TcpRequests, TcpSetup};
use crate::Error;
use uwarp_dataplane::tcp::app::TcpApp;
use uwarp_dataplane::tcp::clock::Clock;
use uwarp_dataplane::tcp::core::{TcpCore, TcpCoreCounters};

/// How a [`TcpHost`] is set up.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Our IPv4 address.
    pub ip: Ipv4Address,
    /// The subnet prefix length of `ip`.
    pub prefix_len: u8,
    /// The default gateway, if any.
    pub gateway: Option<Ipv4Address>,
    /// Our MAC address; `None` takes the port's.
    pub mac: Option<EthernetAddress>,
    /// The IEEE 802.1Q VLAN the host is on: it takes only frames tagged
    /// with its id and tags every frame it sends with its id and priority
    /// (in software; the IP MTU is unchanged). `None` (the default):
    /// untagged. Not beside the kernel.
    pub vlan: Option<Vlan>,
    /// Settings of every connection.
    pub tcp: Config,
    /// Where the cores' threads run (a pinned placement lists one CPU per
    /// dataplane core).
    pub placement: Placement,
    /// Dataplane cores, each with a receive and a transmit queue of the
    /// port (at most as many as the device has; 1 by default). Passive
    /// opens go to the core whose queue the SYN came in on, active opens
    /// to the core whose queue the SYN-ACK came in on.
    pub dataplane_cores: u16,
    /// The mbuf pool.
    pub mempool: MempoolConfig,
    /// How long to wait for the link to come up at start (a net_memif
    /// client's start fails until its server listens: it is retried).
    pub link_wait: Duration,
    /// The port's impairment stage at start (off by default; see
    /// [`TcpHost::impairment`] to change it while running).
    pub impairment: Impairment,
    /// On a net_ring pair of this process, take the checksum offload a
    /// memory link can stand in for (see
    /// [`PortConfig::memory_link_offloads`]); both ends need it. Off by
    /// default.
    ///
    /// [`PortConfig::memory_link_offloads`]: uwarp_dataplane::PortConfig::memory_link_offloads
    pub memory_link_offloads: bool,
    /// Send TCP payloads by reference where the device allows (see
    /// [`PortConfig::payloads_by_reference`]: a memory link with
    /// `memory_link_offloads`, or a PCI NIC with TCP checksum offload on
    /// VFIO, for which the memory is DMA-mapped): from the send queue, or
    /// from registered memory for payloads that zero-copy transmit leaves
    /// there. Off by default.
    ///
    /// [`PortConfig::payloads_by_reference`]: uwarp_dataplane::PortConfig::payloads_by_reference
    pub payloads_by_reference: bool,
    /// Beside the kernel: the port is on an interface the kernel keeps
    /// ([`uwarp_dataplane::af_xdp`]). Every port uwarp listens on or
    /// connects from is then held in the kernel and steered to uwarp,
    /// and next hops come from the kernel's neighbour table instead of
    /// ARP. `None` (the default): the port is uwarp's alone.
    pub beside_kernel: Option<BesideKernel>,
}

/// A host on an interface the kernel keeps ([`HostConfig::beside_kernel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BesideKernel {
    /// The kernel's index of the interface.
    pub ifindex: u32,
    /// The port is this process's link from the interface's service
    /// (`uwarpd`), which holds the ports for every process on the
    /// interface; the host's control core asks it for them. Otherwise
    /// the port is an AF_XDP queue of the interface itself and the host
    /// holds its ports.
    pub through_service: bool,
}

impl HostConfig {
    /// A host at `ip`/`prefix_len` with the defaults: the port's MAC, no
    /// gateway, default TCP settings, unpinned threads, up to 10 s for
    /// the link.
    pub fn new(ip: Ipv4Address, prefix_len: u8) -> Self {
        HostConfig {
            ip,
            prefix_len,
            gateway: None,
            mac: None,
            vlan: None,
            tcp: Config::default(),
            placement: Placement::Unpinned,
            dataplane_cores: 1,
            mempool: MempoolConfig::default(),
            link_wait: Duration::from_secs(10),
            impairment: Impairment::default(),
            memory_link_offloads: false,
            payloads_by_reference: false,
            beside_kernel: None,
        }
    }

    /// A host at `ADDRESS/PREFIX` (e.g. `10.0.0.2/24`) with the defaults
    /// of [`HostConfig::new`]; the error says what was expected.
    pub fn from_cidr(text: &str) -> Result<Self, String> {
        text.split_once('/')
            .and_then(|(ip, len)| Some((ip.parse().ok()?, len.parse::<u8>().ok()?)))
            .filter(|&(_, len)| len <= 32)
            .map(|(ip, len)| HostConfig::new(ip, len))
            .ok_or_else(|| format!("{text}: expected ADDRESS/PREFIX, e.g. 10.0.0.2/24"))
    }
}

/// A MAC address written as six colon-separated hex octets
/// (`02:00:00:00:00:01`); the error says what was expected.
pub fn parse_mac(text: &str) -> Result<EthernetAddress, String> {
    uwarp_dataplane::net::parse_mac(text)
        .ok_or_else(|| format!("{text}: expected six hex octets like 02:00:00:00:00:01"))
}

/// What a host's cores counted, at shutdown.
#[derive(Clone, Debug, Default)]
pub struct HostReport {
    /// The control core's TCP.
    pub setup: SetupCounters,
    /// Each dataplane core's TCP.
    pub cores: Vec<TcpCoreCounters>,
    /// Each dataplane core's receive path.
    pub dataplanes: Vec<DataplaneCounters>,
    /// Each dataplane core's transmit queue.
    pub transmit: Vec<TxCounters>,
    /// The interface (ARP, ICMP, drops seen by the control core).
    pub net: NetCounters,
    /// What each dataplane core's impairment stage did: (receive,
    /// transmit).
    pub impaired: Vec<(ImpairCounters, ImpairCounters)>,
    /// Mbufs dropped unsent at shutdown.
    pub dropped_at_shutdown: usize,
    /// The port's own counters when its cores stopped (zero where the
    /// driver has none): what the device dropped, for want of mbufs
    /// above all, which no core sees.
    pub port: Stats,
}

/// A TCP/IP host on one port.
pub struct TcpHost<A: TcpApp> {
    runtime: Runtime<TcpSetup<A>, TcpCore<A>>,
    requests: TcpRequests<A>,
    address: InterfaceAddress,
    impairment: Arc<ImpairSwitch>,
    port: Port,
    // Dropped after the port and the runtime, which hold its mbufs.
    _pool: Arc<Mempool>,
}

impl<A: TcpApp> TcpHost<A> {
    /// Starts `device` with a queue pair per dataplane core (one more
    /// transmit queue for the control core when the device has it) and
    /// the cores.
    pub fn start(eal: &'static Eal, device: Device, config: HostConfig) -> Result<Self, Error> {
        let mut up = PortUp::start(eal, device, &config)?;
        let clock = Clock::start();
        let (mut setup, requests) = TcpSetup::new(clock, config.tcp.clone(), isn_secret()?);
        setup.set_steering(up.port.rss_steering().cloned());
        let interface = up.interface_config();
        up.give_kernel_ports(&mut setup);
        let handlers = setup.dataplane_handlers(config.dataplane_cores);
        let (control, dataplanes) = assemble(
            interface,
            up.queues,
            std::slice::from_ref(&up.pool),
            setup,
            handlers,
        )?;
        let impairment = Arc::clone(dataplanes[0].impairment());
        impairment.set(config.impairment);
        let runtime = Runtime::spawn(eal, control, dataplanes, &config.placement)?;
        Ok(TcpHost {
            runtime,
            requests,
            address: up.address,
            impairment,
            port: up.port,
            _pool: up.pool,
        })
    }

    /// Our addresses.
    pub fn address(&self) -> &InterfaceAddress {
        &self.address
    }

    /// The port's impairment stage, to switch it while the host runs.
    pub fn impairment(&self) -> &Arc<ImpairSwitch> {
        &self.impairment
    }

    /// Listens on `port`: each connection accepted gets the application
    /// `factory` makes for its peer.
    pub fn listen(
        &self,
        port: u16,
        factory: impl FnMut(Endpoint) -> A + Send + 'static,
    ) -> Result<(), Error> {
        self.requests
            .listen(port, factory)?
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| Error::DeviceClosed)?
            .map_err(Error::InvalidArgument)
    }

    /// Opens a connection to `remote`, run by `app` (which hears how it
    /// went: its events, or `End::Unreachable`/`Reset`/`TimedOut`).
    pub fn connect(&self, remote: SocketAddrV4, app: A) -> Result<(), Error> {
        let remote = Endpoint::new(*remote.ip(), remote.port());
        self.requests.connect(remote, app)
    }

    /// Stops the cores and the port; returns what they counted. Flows
    /// still open are reset (their peers hear a RST).
    pub fn shutdown(self) -> HostReport {
        self.shutdown_awaiting(|_| {})
    }

    /// [`shutdown`](Self::shutdown), with `before_port_stop` run on the
    /// port once no core polls it any more and before it stops (to wait
    /// for the peer of a net_memif link to close first: docs/dpdk.md,
    /// "Exit and teardown").
    pub fn shutdown_awaiting(mut self, before_port_stop: impl FnOnce(&Port)) -> HostReport {
        let stopped = self.runtime.shutdown();
        let report = HostReport::of(&stopped, &self.port, TcpSetup::counters);
        before_port_stop(&self.port);
        stop_port(&mut self.port, report.reset_at_shutdown());
        report
    }
}

/// How long a net_memif client waits for its link before it starts its
/// port again (its server may have refused it: see
/// [`Port::is_memif_client`]).
pub const MEMIF_CLIENT_ATTEMPT: Duration = Duration::from_secs(2);

/// How long a stopping host keeps its port up after its cores reset
/// connections, for the RSTs to leave: a net_memif peer that sees the
/// link go down drops what its ring still holds, and a NIC may not have
/// sent every descriptor yet.
pub const RESET_DRAIN: Duration = Duration::from_millis(50);

/// Stops `port` after its cores stopped, having reset `resets`
/// connections: once the RSTs had [`RESET_DRAIN`] to leave (at once when
/// there were none).
pub fn stop_port(port: &mut Port, resets: u64) {
    if resets > 0 {
        std::thread::sleep(RESET_DRAIN);
    }
    let _ = port.stop();
}

impl HostReport {
    /// What the cores of `stopped` counted: every dataplane core's TCP,
    /// receive path, transmit queue and impairment stage, the control
    /// core's interface, and the control core's TCP, which `setup` finds
    /// in the control core's handler (a [`TcpSetup`], or the handler
    /// running one underneath).
    pub fn of<C: ControlHandler, A: TcpApp>(
        stopped: &Stopped<C, TcpCore<A>>,
        port: &Port,
        setup: impl FnOnce(&C) -> &SetupCounters,
    ) -> Self {
        let cores = &stopped.dataplanes;
        HostReport {
            setup: setup(stopped.control.handler()).clone(),
            cores: cores
                .iter()
                .map(|c| c.handler().counters().clone())
                .collect(),
            dataplanes: cores.iter().map(|c| c.counters().clone()).collect(),
            transmit: cores.iter().map(|c| c.tx().counters().clone()).collect(),
            impaired: cores.iter().map(|c| c.impair_counters()).collect(),
            net: stopped.control.iface().counters().clone(),
            dropped_at_shutdown: stopped.dropped_at_shutdown,
            port: port.stats().unwrap_or_default(),
        }
    }

    /// Connections reset because the host stopped with them open, in
    /// set-up or on a dataplane core.
    pub fn reset_at_shutdown(&self) -> u64 {
        self.setup.reset_at_shutdown + self.cores.iter().map(|c| c.flows_reset).sum::<u64>()
    }
}

/// A port started for a host, with its queues not yet given to cores.
pub struct PortUp {
    /// Its mbuf pool.
    pub pool: Arc<Mempool>,
    /// The port.
    pub port: Port,
    /// Its queues.
    pub queues: Queues,
    /// The host's addresses on it.
    pub address: InterfaceAddress,
    /// Beside the kernel: the interface's index, and uwarp's ports held
    /// in the kernel by this process (until the control core takes
    /// them; none through the interface's service).
    pub beside_kernel: Option<(u32, Option<KernelPorts>)>,
}

impl PortUp {
    /// Starts `device` with a queue pair per dataplane core (one more
    /// transmit queue for the control core when the device has it) and
    /// waits for the link.
    pub fn start(eal: &'static Eal, device: Device, config: &HostConfig) -> Result<Self, Error> {
        // A name of its own, not the port's id: a port's id is free again
        // as soon as the port is released, before the pool of its cores is
        // freed, and a port opened on another thread in between may take
        // the id (two devices' tests side by side did).
        static POOLS: AtomicUsize = AtomicUsize::new(0);
        if let Some(vlan) = config.vlan {
            if vlan.validate().is_err() {
                return Err(Error::InvalidArgument(
                    "a VLAN id is 1 to 4094 and its priority 0 to 7",
                ));
            }
            if config.beside_kernel.is_some() {
                // The steering program and the kernel's neighbour table
                // know only the untagged interface.
                return Err(Error::InvalidArgument(
                    "a VLAN is not supported beside the kernel",
                ));
            }
        }
        let name = format!("tcp{}", POOLS.fetch_add(1, Ordering::Relaxed));
        let pool = Arc::new(Mempool::new(eal, &name, &config.mempool, None)?);
        let capabilities = device.capabilities()?;
        check_cores(&capabilities, config.dataplane_cores)?;
        let port_settings = PortConfig {
            memory_link_offloads: config.memory_link_offloads,
            payloads_by_reference: config.payloads_by_reference,
            ..port_config(&capabilities, config.dataplane_cores)
        };
        let mut port = Port::configure(eal, device, &port_settings, std::slice::from_ref(&pool))?;
        // A net_memif client its server refused (listening, its port not
        // started yet) stays down: it is started again every
        // MEMIF_CLIENT_ATTEMPT. Any other port is started once.
        let attempt = if port.is_memif_client() {
            MEMIF_CLIENT_ATTEMPT.min(config.link_wait)
        } else {
            config.link_wait
        };
        port.start_until_link_up(attempt, config.link_wait)?;
        let queues = port
            .take_queues()
            .ok_or(Error::WrongState("the port's queues are taken"))?;
        let mac = match config.mac {
            Some(mac) => mac,
            None => EthernetAddress(port.mac_address()?),
        };
        let address = InterfaceAddress {
            mac,
            ip: config.ip,
            prefix_len: config.prefix_len,
            gateway: config.gateway,
            vlan: config.vlan,
        };
        // The driver attached the steering program as its queue started.
        let beside_kernel = config
            .beside_kernel
            .map(|beside| {
                if beside.through_service {
                    return Ok((beside.ifindex, None));
                }
                let map = PortMap::of_interface(beside.ifindex, config.ip)
                    .map_err(Error::BesideKernel)?;
                Ok::<_, Error>((beside.ifindex, Some(KernelPorts::new(config.ip, map))))
            })
            .transpose()?;
        Ok(PortUp {
            pool,
            port,
            queues,
            address,
            beside_kernel,
        })
    }

    /// The control core's interface on this port: its addresses, and
    /// beside the kernel, next hops from the kernel's neighbour table.
    pub fn interface_config(&self) -> InterfaceConfig {
        InterfaceConfig {
            kernel_neighbours: self.beside_kernel.as_ref().map(|(index, _)| *index),
            ..InterfaceConfig::new(self.address)
        }
    }

    /// Hands the ports this process holds in the kernel, if any, to
    /// `setup`.
    pub fn give_kernel_ports<A: TcpApp>(&mut self, setup: &mut TcpSetup<A>) {
        if let Some(ports) = self
            .beside_kernel
            .as_mut()
            .and_then(|(_, ports)| ports.take())
        {
            setup.set_kernel_ports(Box::new(ports));
        }
    }
}

/// A fresh secret for the ISN generator (RFC 6528).
pub fn isn_secret() -> Result<[u8; 16], Error> {
    let mut secret = [0u8; 16];
    getrandom::fill(&mut secret)
        .map_err(|_| Error::WrongState("no randomness for the ISN secret"))?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_what_is_expected() {
        let host = HostConfig::from_cidr("10.1.2.3/24").unwrap();
        assert_eq!(
            (host.ip, host.prefix_len),
            (Ipv4Address::new(10, 1, 2, 3), 24)
        );
        assert!(HostConfig::from_cidr("10.1.2.3")
            .unwrap_err()
            .contains("ADDRESS/PREFIX"));
        assert!(HostConfig::from_cidr("10.1.2.3/33").is_err());
        assert_eq!(
            parse_mac("02:00:00:00:00:0a"),
            Ok(EthernetAddress([2, 0, 0, 0, 0, 10]))
        );
        assert!(parse_mac("02:00").unwrap_err().contains("six hex octets"));
    }
}
