//! The device: the one entry point of the API (`ibv_open_device` plus
//! `rdma_create_event_channel`). Opening one starts its control thread and
//! its dataplane thread; everything else is created from it.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use uwarp_stack::mem::{ProtectionDomains, StagTable};
use uwarp_stack::rdmap::SharedReceiveQueue;

use crate::cm::{ConnectParams, Connection, Listener};
use crate::cq::CompletionQueue;
use crate::error::Error;
use crate::pd::ProtectionDomain;
use crate::qp::{QpInit, QueuePair};
use crate::socket::{spawn_control, spawn_dataplane, ControlCmd};

/// How to open a device.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// How many memory regions can be registered at once.
    pub max_regions: usize,
    /// How long a passive side waits for an MPA Request after the TCP
    /// connection is up.
    pub startup_timeout: Duration,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            max_regions: StagTable::DEFAULT_CAPACITY,
            startup_timeout: Duration::from_secs(10),
        }
    }
}

/// What every part of a device shares.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) table: Arc<StagTable>,
}

/// An open device on the kernel-socket transport. Dropping it resets every
/// connection still open and stops its threads.
#[derive(Debug)]
pub struct Device {
    shared: Shared,
    pds: ProtectionDomains,
    control: Sender<ControlCmd>,
    threads: Vec<JoinHandle<()>>,
}

impl Device {
    /// Opens a device and starts its threads.
    pub fn open(config: DeviceConfig) -> Result<Self, Error> {
        let shared = Shared {
            table: Arc::new(StagTable::new(config.max_regions)?),
        };
        let (adopt_tx, adopt_rx) = crossbeam_channel::unbounded();
        let (control_tx, control_rx) = crossbeam_channel::unbounded();
        let dataplane = spawn_dataplane(adopt_rx)?;
        let control = spawn_control(
            shared.clone(),
            control_rx,
            control_tx.clone(),
            adopt_tx,
            config.startup_timeout,
        )?;
        Ok(Self {
            shared,
            pds: ProtectionDomains::new(),
            control: control_tx,
            threads: vec![control, dataplane],
        })
    }

    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Error> {
        let id = self
            .pds
            .allocate()
            .ok_or(Error::InvalidArgument("protection domains exhausted"))?;
        Ok(ProtectionDomain::new(id, self.shared.table.clone()))
    }

    /// Creates a completion queue of `depth` entries (`ibv_create_cq`).
    pub fn create_cq(&self, depth: usize) -> CompletionQueue {
        CompletionQueue::new(depth)
    }

    /// Creates a shared receive queue (`ibv_create_srq`).
    pub fn create_srq(&self) -> Arc<SharedReceiveQueue> {
        Arc::new(SharedReceiveQueue::new())
    }

    /// Creates a queue pair in `pd` (`ibv_create_qp`); it is Idle until
    /// connected or accepted.
    pub fn create_qp(&self, pd: &ProtectionDomain, init: QpInit) -> QueuePair {
        QueuePair::new(pd.id(), init)
    }

    /// Listens for connections (`rdma_listen`); port 0 picks a free port.
    pub fn listen(&self, addr: impl ToSocketAddrs) -> Result<Listener, Error> {
        let addr = resolve(addr)?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.control
            .send(ControlCmd::Listen { addr, reply })
            .map_err(|_| Error::DeviceClosed)?;
        let (id, local_addr, requests) = answer.recv().map_err(|_| Error::DeviceClosed)??;
        Ok(Listener {
            local_addr,
            id,
            requests,
            control: self.control.clone(),
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
        let cmd = ControlCmd::Connect {
            addr,
            qp: qp.clone(),
            params,
            reply,
        };
        self.control.send(cmd).map_err(|_| Error::DeviceClosed)?;
        answer.recv().map_err(|_| Error::DeviceClosed)?
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.control.send(ControlCmd::Shutdown);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn resolve(addr: impl ToSocketAddrs) -> Result<SocketAddr, Error> {
    addr.to_socket_addrs()?
        .next()
        .ok_or(Error::InvalidArgument("the address resolves to nothing"))
}
