//! The device: the one entry point of the API (`ibv_open_device` plus
//! `rdma_create_event_channel`). Opening one starts its control thread and
//! its dataplane thread; everything else is created from it.
//!
//! A device belongs to the process that opened it: in a child of `fork`
//! it and everything made from it fail with [`Error::DeviceClosed`], and
//! dropping it stops nothing (`crate::fork`); the child opens its own.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uwarp_stack::mem::{ProtectionDomains, StagTable};

use crate::channel::CompletionChannel;
use crate::cm::{
    Connect, ConnectParams, Connection, ControlCmd, ControlLine, ListenOptions, Listener,
};
use crate::cq::CompletionQueue;
use crate::driver::Driver;
use crate::error::Error;
use crate::fork;
use crate::pd::ProtectionDomain;
use crate::qp::{QpInit, QueuePair};
use crate::srq::SharedReceiveQueue;
use crate::transport::dpdk::DpdkConfig;
use crate::transport::{Start, Transport, TransportConfig};
use uwarp_control::HostReport;
// Named by `Device::impairment`, the DPDK transport's test switch.
use uwarp_dataplane::runtime::ImpairSwitch;

/// How to open a device.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// How many memory regions can be registered at once.
    pub max_regions: usize,
    /// How long a passive side waits for an MPA Request after the TCP
    /// connection is up.
    pub startup_timeout: Duration,
    /// The transport: the kernel's TCP sockets (the default) or uwarp's
    /// TCP over DPDK.
    pub transport: TransportConfig,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            max_regions: StagTable::DEFAULT_CAPACITY,
            startup_timeout: Duration::from_secs(10),
            transport: TransportConfig::Socket,
        }
    }
}

impl DeviceConfig {
    /// The defaults, on the DPDK transport as `dpdk` says.
    pub fn dpdk(dpdk: DpdkConfig) -> Self {
        Self {
            transport: TransportConfig::Dpdk(dpdk),
            ..Self::default()
        }
    }
}

/// An open device, on the kernel-socket transport or on uwarp's TCP over
/// DPDK ([`DeviceConfig::transport`]). Dropping it first resets every
/// connection still open (its peer hears a RST, as from a kernel whose
/// process exited), then stops its threads or cores. [`Device::close`]
/// does the same and returns what a DPDK device's cores counted;
/// [`Device::shut_down`] does it in place, for a device shared for the
/// life of a process.
pub struct Device {
    table: Arc<StagTable>,
    pds: ProtectionDomains,
    control: ControlLine,
    /// `None` once stopped.
    transport: Mutex<Option<Transport>>,
    /// The DPDK port's impairment stage (`None` on the socket transport).
    impairment: Option<Arc<ImpairSwitch>>,
    driver: Driver,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let transport = self.transport().as_ref().map_or("stopped", Transport::name);
        f.debug_struct("Device")
            .field("transport", &transport)
            .field("driver", &self.driver)
            .finish()
    }
}

impl Device {
    /// Opens a device on the transport `config` names and starts its
    /// threads or cores. On the socket transport: a control thread and a
    /// dataplane thread. On the DPDK transport: the process's EAL started
    /// if this is the first DPDK device ([`DpdkConfig::eal`]), the port
    /// created or claimed ([`DpdkConfig::port`](crate::DpdkConfig::port)),
    /// and its cores: the control core runs the connection manager, the
    /// TCP handshakes and the MPA startup phase; the dataplane cores run
    /// every connection in Full Operation.
    ///
    /// The first device of a process registers its fork handlers: a
    /// child closes its copies of the socket transport's sockets.
    pub fn open(config: DeviceConfig) -> Result<Self, Error> {
        fork::watch();
        let table = Arc::new(StagTable::new(config.max_regions)?);
        let (sender, commands) = crossbeam_channel::unbounded();
        let control = config.transport.control_line(sender)?;
        let start = Start {
            table: table.clone(),
            commands,
            control: control.clone(),
            startup_timeout: config.startup_timeout,
        };
        let transport = Transport::start(&config.transport, start)?;
        Ok(Self {
            table,
            pds: ProtectionDomains::new(),
            control,
            driver: transport.driver(),
            impairment: transport.impairment().cloned(),
            transport: Mutex::new(Some(transport)),
        })
    }

    /// A device whose transport never starts (feature `testing`): no
    /// thread, no socket, no DPDK. Its protection domains, memory
    /// regions (at most `max_regions`), completion queues, shared receive
    /// queues and queue pairs are the ones [`Device::open`] makes, but
    /// nothing connects or listens (the control core's commands go
    /// nowhere: [`Error::DeviceClosed`]). For tests of the data
    /// structures above the transport under Miri, which can run neither
    /// the transports' threads (`ppoll`) nor their sockets.
    #[cfg(feature = "testing")]
    pub fn without_transport(max_regions: usize) -> Result<Self, Error> {
        let (sender, _) = crossbeam_channel::unbounded();
        Ok(Self {
            table: Arc::new(StagTable::new(max_regions)?),
            pds: ProtectionDomains::new(),
            control: ControlLine::new(sender, None),
            driver: Driver::default(),
            impairment: None,
            transport: Mutex::new(None),
        })
    }

    /// The transport, `None` once stopped.
    fn transport(&self) -> std::sync::MutexGuard<'_, Option<Transport>> {
        self.transport.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// On a DPDK device opened with
    /// [`CoreThreads::Inline`](crate::CoreThreads::Inline), runs every
    /// core once on the calling thread and returns the work done (frames,
    /// timers, commands); the application calls it in its polling loop.
    /// Devices whose cores have threads return 0 at once.
    pub fn progress(&self) -> usize {
        self.driver.progress()
    }

    /// The impairment stage of a DPDK device's port (loss, reordering,
    /// duplication, delay for tests), switchable while it runs.
    pub fn impairment(&self) -> Option<&Arc<ImpairSwitch>> {
        self.impairment.as_ref()
    }

    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Error> {
        let id = self
            .pds
            .allocate()
            .ok_or(Error::InvalidArgument("protection domains exhausted"))?;
        Ok(ProtectionDomain::new(id, self.table.clone()))
    }

    /// Creates a completion queue of `depth` entries (`ibv_create_cq`).
    pub fn create_cq(&self, depth: usize) -> CompletionQueue {
        CompletionQueue::new(depth, self.driver.clone(), None)
    }

    /// Creates a completion queue of `depth` entries whose events also go
    /// to `channel`, as the record `token` ([`CompletionChannel::get_event`]
    /// returns it; `ibv_create_cq` with a channel).
    pub fn create_cq_with_channel(
        &self,
        depth: usize,
        channel: &CompletionChannel,
        token: u64,
    ) -> CompletionQueue {
        let channel = Some((channel.shared.clone(), token));
        CompletionQueue::new(depth, self.driver.clone(), channel)
    }

    /// Creates a shared receive queue holding at most `max_wr` receives
    /// (`ibv_create_srq`).
    pub fn create_srq(&self, max_wr: usize) -> SharedReceiveQueue {
        SharedReceiveQueue::new(max_wr)
    }

    /// Creates a queue pair in `pd` (`ibv_create_qp`); it is Idle until
    /// connected or accepted.
    pub fn create_qp(&self, pd: &ProtectionDomain, init: QpInit) -> QueuePair {
        QueuePair::new(pd.id(), init, self.driver.clone())
    }

    /// Listens for connections (`rdma_listen`); port 0 picks a free port.
    pub fn listen(&self, addr: impl ToSocketAddrs) -> Result<Listener, Error> {
        self.listen_with(addr, ListenOptions::default())
    }

    /// Whether this host's connections to a loopback address reach the
    /// device: on the socket transport (the kernel's TCP carries them),
    /// not on the DPDK transport (they never leave the kernel's
    /// loopback). A listener on a loopback address hears nothing there.
    pub fn carries_loopback(&self) -> bool {
        matches!(
            *self.transport.lock().unwrap_or_else(|e| e.into_inner()),
            Some(Transport::Socket { .. })
        )
    }

    /// Listens for connections as [`listen`](Self::listen) does, opened
    /// with `options`.
    pub fn listen_with(
        &self,
        addr: impl ToSocketAddrs,
        options: ListenOptions,
    ) -> Result<Listener, Error> {
        let addr = resolve(addr)?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.control
            .send(ControlCmd::Listen {
                addr,
                options,
                reply,
            })
            .map_err(|_| Error::DeviceClosed)?;
        let (id, local_addr, requests) = self.driver.wait(&answer)??;
        Ok(Listener {
            local_addr,
            id,
            requests,
            control: self.control.clone(),
            driver: self.driver.clone(),
            stopped: Default::default(),
        })
    }

    /// Connects `qp` to a listener (`rdma_connect`): the TCP connection,
    /// the MPA Request and Reply; returns once the queue pair is in RTS, or
    /// the reason it is not (rejected with the peer's private data, timed
    /// out, refused).
    pub fn connect(
        &self,
        addr: impl ToSocketAddrs,
        qp: &QueuePair,
        params: ConnectParams,
    ) -> Result<Connection, Error> {
        let addr = resolve(addr)?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let cmd = ControlCmd::Connect(Connect {
            addr,
            qp: qp.clone(),
            params,
            reply,
            retry: false,
        });
        self.control.send(cmd).map_err(|_| Error::DeviceClosed)?;
        let outcome = self.driver.wait(&answer).and_then(|connected| connected);
        outcome.inspect_err(|_| qp.connection_failed())
    }

    /// Closes the device as dropping it does, and returns what its cores
    /// counted: `None` on the socket transport; on the DPDK transport the
    /// [`HostReport`] of its control and dataplane cores, read after they
    /// stopped (connections still open were reset as they stopped, so the
    /// report is final).
    pub fn close(self) -> Option<HostReport> {
        self.shut_down()
    }

    /// Closes the device in place, as dropping it does, and returns what
    /// [`Device::close`] returns (once: a second call finds nothing to
    /// stop and returns `None`). For a device that lives as long as its
    /// process and is used from many threads: the drop-in libraries close
    /// theirs when the process exits. What is asked of it afterwards fails
    /// with [`Error::DeviceClosed`].
    ///
    /// In a child of `fork` it forgets the transport instead: its threads
    /// or cores are the parent's, not in this process, and stopping them
    /// would wait for them (or act on the parent's DPDK port).
    pub fn shut_down(&self) -> Option<HostReport> {
        let transport = self.transport().take();
        if self.driver.ensure_in_its_process().is_err() {
            std::mem::forget(transport);
            return None;
        }
        let _ = self.control.send(ControlCmd::Shutdown);
        transport.and_then(Transport::stop)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

fn resolve(addr: impl ToSocketAddrs) -> Result<SocketAddr, Error> {
    addr.to_socket_addrs()?
        .next()
        .ok_or(Error::InvalidArgument("the address resolves to nothing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, LocalParams, RecvWr};

    /// A queue pair of `pd` as a child of `fork` sees one its parent made.
    fn parents_qp(pd: &ProtectionDomain, cq: &CompletionQueue) -> QueuePair {
        QueuePair::new(pd.id(), QpInit::new(cq), Driver::of_the_parent())
    }

    #[test]
    fn a_parents_queue_pair_neither_connects_nor_accepts_nor_posts() {
        let device = Device::open(DeviceConfig::default()).unwrap();
        let pd = device.alloc_pd().unwrap();
        let cq = device.create_cq(16);
        let parents = parents_qp(&pd, &cq);
        let listener = device.listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr();

        let connected = device.connect(addr, &parents, ConnectParams::default());
        assert!(
            matches!(connected, Err(Error::DeviceClosed)),
            "{connected:?}"
        );
        let nothing = listener.get_request(Duration::from_millis(100));
        assert!(
            matches!(nothing, Err(Error::Timeout)),
            "no TCP connect was made"
        );

        let own = device.create_qp(&pd, QpInit::new(&cq));
        let params = ConnectParams {
            timeout: Duration::from_secs(5),
            ..ConnectParams::default()
        };
        let peer = std::thread::scope(|scope| {
            let peer = scope.spawn(|| device.connect(addr, &own, params));
            let request = listener.get_request(Duration::from_secs(5)).unwrap();
            let accepted = request.accept(&parents, LocalParams::default());
            assert!(matches!(accepted, Err(Error::DeviceClosed)), "{accepted:?}");
            peer.join().unwrap()
        });
        assert!(peer.is_err(), "the request was dropped: {peer:?}");

        let inbox = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
        let posted = parents.post_recv(RecvWr {
            wr_id: 1,
            sgl: vec![inbox.whole()],
        });
        assert!(matches!(posted, Err(Error::DeviceClosed)), "{posted:?}");
    }
}
