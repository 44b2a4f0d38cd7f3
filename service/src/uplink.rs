//! The service's port on the interface: queue 0 through DPDK's af_xdp
//! driver with uwarp's steering program, the claim on the interface
//! that makes the service its one uwarp user, and the ports held in the
//! kernel for every application.

use std::sync::Arc;
use std::time::Duration;

use uwarp_dataplane::af_xdp::{
    InterfaceClaim, KernelInterface, KernelPorts, PortMap, SteeringObject,
};
use uwarp_dataplane::{Device, Eal, Mempool, MempoolConfig, Port, PortConfig, RxQueue, TxQueue};

/// How long the interface's link may take to come up.
const LINK_WAIT: Duration = Duration::from_secs(10);

/// The port on the interface and what is held with it. Fields drop in
/// order: the queues, the port (which detaches the program), the pool,
/// and the claim last.
pub struct Uplink {
    /// Its receive queue.
    pub rx: RxQueue,
    /// Its transmit queue.
    pub tx: TxQueue,
    _port: Port,
    /// The mbufs of the port and of every application's link.
    pub pool: Arc<Mempool>,
    /// The ports held in the kernel, for all applications.
    pub ports: KernelPorts,
    /// The interface.
    pub interface: KernelInterface,
    _claim: InterfaceClaim,
}

impl Uplink {
    /// Claims `interface` and starts the port on its queue 0.
    pub fn open(eal: &'static Eal, interface: KernelInterface) -> Result<Uplink, String> {
        let iface = interface.name.clone();
        // Before the port exists, as a device beside the kernel does.
        let claim = InterfaceClaim::take(interface.index).map_err(|e| e.to_string())?;
        let object = SteeringObject::of_process()
            .map_err(|e| format!("cannot write the XDP program: {e}"))?;
        let vdev = object.vdev("net_af_xdp_uwarpd", &iface);
        let (name, args) = vdev.split_once(',').expect("the vdev has arguments");
        let device = Device::create_vdev(eal, name, args)
            .map_err(|e| format!("cannot create the AF_XDP port on {iface}: {e}"))?;
        let pool = Arc::new(
            Mempool::new(eal, "uwarpd", &MempoolConfig::default(), None)
                .map_err(|e| format!("no mbuf pool: {e}"))?,
        );
        let mut port = Port::configure(eal, device, &one_queue(), std::slice::from_ref(&pool))
            .map_err(|e| format!("cannot set up the AF_XDP port on {iface}: {e}"))?;
        port.start_until_link_up(LINK_WAIT, LINK_WAIT)
            .map_err(|e| format!("the AF_XDP port on {iface} did not come up: {e}"))?;
        let queues = port.take_queues().expect("a started port has its queues");
        let (rx, tx) = one_pair(queues);
        let map =
            PortMap::of_interface(interface.index, interface.ipv4.0).map_err(|e| e.to_string())?;
        let ports = KernelPorts::new(interface.ipv4.0, map);
        Ok(Uplink {
            rx,
            tx,
            _port: port,
            pool,
            ports,
            interface,
            _claim: claim,
        })
    }
}

/// One queue each way, no RSS: what the service's ports have.
pub fn one_queue() -> PortConfig {
    PortConfig {
        rx_queues: 1,
        tx_queues: 1,
        rss: false,
        ..PortConfig::default()
    }
}

/// The one queue pair of `queues`.
pub fn one_pair(queues: uwarp_dataplane::Queues) -> (RxQueue, TxQueue) {
    let rx = queues.rx.into_iter().next().expect("one receive queue");
    let tx = queues.tx.into_iter().next().expect("one transmit queue");
    (rx, tx)
}
