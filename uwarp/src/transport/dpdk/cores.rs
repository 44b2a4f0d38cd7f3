//! The DPDK transport's cores for a [`crate::Device`]: a port brought up,
//! [`RdmaControl`] on the control core and a [`TcpCore`] of
//! [`RdmaStream`]s on each dataplane core (`HostConfig::dataplane_cores`),
//! on threads of their own or stepped inline by the application.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use uwarp_dataplane::af_xdp::{InterfaceClaim, ServicePorts};
use uwarp_dataplane::runtime::{assemble, ImpairSwitch, Runtime, Stepper};
use uwarp_dataplane::{Device as Port0, Eal, Mempool, Port};

use super::control::RdmaControl;
use super::eal;
use super::port::DpdkPort;
use super::stream::{RdmaStream, StreamContext};
use crate::cm::ControlCmd;
use crate::driver::{Driver, InlineCores};
use crate::error::Error;
use uwarp_control::host::{isn_secret, stop_port, PortUp};
use uwarp_control::{HostConfig, HostReport, TcpSetup};
use uwarp_dataplane::tcp::{Clock, TcpCore};

/// How long a closing device (its process exits, or it is dropped) goes
/// on running its connections until what they sent, and the FINs of those
/// the application disconnected, are acknowledged; the ones still open
/// are reset after that. A kernel delivers what an exited process's
/// sockets sent: without this, an application that exited right after
/// its last Send (rdmacm-utils' `rdma_server`; a Send completes once its
/// FPDUs are in TCP's send queue, as on siw) lost it when the segment or
/// its ACK needed a retransmission, and on net_memif whenever the peer
/// had not polled it before the link went down; the peer then waited for
/// good. It ends at once when everything
/// is acknowledged, or the link is down.
const SETTLE_AT_CLOSE: Duration = Duration::from_secs(2);

/// Where a DPDK device's cores run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoreThreads {
    /// A thread per core, placed as `HostConfig::placement` says.
    #[default]
    Spawned,
    /// No threads: the application runs the cores with
    /// [`crate::Device::progress`] (blocking calls of the connection
    /// manager do it while they wait).
    Inline,
}

/// How a device on the DPDK transport is set up
/// ([`TransportConfig::Dpdk`](crate::TransportConfig::Dpdk)).
#[derive(Clone, Debug)]
pub struct DpdkConfig {
    /// The port the device runs on.
    pub port: DpdkPort,
    /// The arguments of this process's EAL, which the first DPDK device
    /// opened starts (see [`DpdkConfig::start_eal`]). `None` (the default)
    /// runs on the EAL this process runs already, or else starts one for
    /// virtual devices only: no hugepages, no PCI scan. `Some` starts it
    /// from these arguments (e.g. `--vdev net_memif0,role=server`, or
    /// `-a 0000:03:00.0` for a NIC) with a base for virtual devices, or
    /// for PCI devices when they name some with `-a`/`--allow`/`-b`/
    /// `--block`, and a file prefix of this process's own.
    pub eal: Option<Vec<String>>,
    /// The host: addresses, TCP settings, mempool, impairment, placement.
    pub host: HostConfig,
    /// Where the cores run.
    pub threads: CoreThreads,
    /// Zero-copy transmit: the payload of an FPDU of a Send, RDMA Write or
    /// Read Response with at least this many octets (within one element of
    /// a gather list, and with no Markers towards the peer) stays in the
    /// application's registered memory, and segments carrying it read it
    /// from there instead of from a copy in TCP's send queue (one copy on
    /// the way out, not two; none where the port sends payloads by
    /// reference, [`HostConfig::payloads_by_reference`]). A Send or Write sent so
    /// completes once TCP has acknowledged it, not as soon as it is
    /// queued: the application must not change the data before its
    /// completion (RDMAC verbs), since a retransmission reads it again.
    /// `None` copies every payload into the send queue, and so does every
    /// setting for memory the application registered as its own
    /// ([`ProtectionDomain::register_memory`](crate::ProtectionDomain::register_memory)),
    /// which it may free as soon as its region is dropped.
    ///
    /// [`ZERO_COPY_FROM`] by default, which only jumbo frames' segments
    /// reach: on the perf tool's memory link, `loopback --crc` measured
    /// 10-19% faster with it at MTU 9000 and 9% slower with it at every
    /// 1448-octet segment of MTU 1500, where keeping the reference costs
    /// about what the copy it saves does.
    pub zero_copy_from: Option<usize>,
}

/// The default of [`DpdkConfig::zero_copy_from`]: payloads of 4 KiB and
/// more.
pub const ZERO_COPY_FROM: usize = 4096;

impl DpdkConfig {
    /// `host` on `port` with its cores on `threads`, and the other
    /// settings' defaults (no EAL arguments).
    pub fn new(port: DpdkPort, host: HostConfig, threads: CoreThreads) -> Self {
        DpdkConfig {
            port,
            eal: None,
            host,
            threads,
            zero_copy_from: Some(ZERO_COPY_FROM),
        }
    }

    /// Starts this process's EAL from [`DpdkConfig::eal`] as the first
    /// device opened with this configuration would, or checks that the
    /// EAL running fits it; opening the device does the same, so this is
    /// for learning of a bad argument early, or for a program that also
    /// runs uwarp's dataplane crates beside the API (they find this EAL
    /// running). An error says why the EAL did not start (the EAL's own
    /// complaint), or which arguments it runs with instead.
    pub fn start_eal(&self) -> Result<(), Error> {
        eal::start(self.eal.as_deref()).map(|_| ())
    }
}

/// The cores of an inline device; `None` once they shut down.
struct Inline(Mutex<Option<Stepper<RdmaControl, TcpCore<RdmaStream>>>>);

impl InlineCores for Inline {
    fn step(&self, now: Instant) -> usize {
        let mut cores = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cores.as_mut().map_or(0, |stepper| stepper.step(now))
    }
}

enum Running {
    Threads(Runtime<RdmaControl, TcpCore<RdmaStream>>),
    Inline(Arc<Inline>),
}

/// A DPDK device's port and cores.
pub(crate) struct DpdkCores {
    running: Running,
    impairment: Arc<ImpairSwitch>,
    port: Port,
    // Dropped after the port and the cores, which hold its mbufs.
    _pool: Arc<Mempool>,
    // Beside the kernel on the interface's own queue: released once the
    // port closed, which detaches the interface's program
    // (`uwarp_dataplane::af_xdp::claim`).
    _claim: Option<InterfaceClaim>,
}

/// How a device stands beside the kernel.
#[derive(Debug)]
pub(crate) enum Beside {
    /// It does not: the port is uwarp's alone.
    Alone,
    /// On the interface's own queue, with this process's claim on it.
    Direct(InterfaceClaim),
    /// On a link from the interface's service, which gives its ports.
    Service(ServicePorts),
}

impl DpdkCores {
    /// Brings `device` up and starts the cores; they serve `commands`.
    /// `beside` says how the port stands beside the kernel: a claim on
    /// the interface is kept until the port closed, the service's ports
    /// go to the control core.
    pub(crate) fn start(
        eal: &'static Eal,
        device: Port0,
        beside: Beside,
        config: &DpdkConfig,
        commands: Receiver<ControlCmd>,
        context: StreamContext,
    ) -> Result<Self, Error> {
        let mut up = PortUp::start(eal, device, &config.host)?;
        let clock = Clock::start();
        // FPDUs are records the engine already batches; Nagle would only
        // hold a small one back for an ACK (siw sets TCP_NODELAY too).
        let tcp = uwarp_stack::tcp::Config {
            nagle: false,
            ..config.host.tcp.clone()
        };
        let (mut setup, _requests) = TcpSetup::new(clock, tcp, isn_secret()?);
        setup.set_steering(up.port.rss_steering().cloned());
        let interface = up.interface_config();
        up.give_kernel_ports(&mut setup);
        let claim = match beside {
            Beside::Alone => None,
            Beside::Direct(claim) => Some(claim),
            Beside::Service(ports) => {
                setup.set_kernel_ports(Box::new(ports));
                None
            }
        };
        let handlers = setup.dataplane_handlers(config.host.dataplane_cores);
        let control = RdmaControl::new(setup, clock, commands, context);
        let (control, dataplanes) = assemble(
            interface,
            up.queues,
            std::slice::from_ref(&up.pool),
            control,
            handlers,
        )?;
        let impairment = Arc::clone(dataplanes[0].impairment());
        impairment.set(config.host.impairment);
        let running = match config.threads {
            CoreThreads::Spawned => Running::Threads(Runtime::spawn(
                eal,
                control,
                dataplanes,
                &config.host.placement,
            )?),
            CoreThreads::Inline => Running::Inline(Arc::new(Inline(Mutex::new(Some(
                Stepper::new(control, dataplanes),
            ))))),
        };
        Ok(DpdkCores {
            running,
            impairment,
            port: up.port,
            _pool: up.pool,
            _claim: claim,
        })
    }

    /// How the application runs the cores while it waits: it steps them
    /// if they are inline.
    pub(crate) fn driver(&self) -> Driver {
        match &self.running {
            Running::Threads(_) => Driver::default(),
            Running::Inline(cores) => Driver::inline(cores.clone()),
        }
    }

    /// The port's impairment stage.
    pub(crate) fn impairment(&self) -> &Arc<ImpairSwitch> {
        &self.impairment
    }

    /// Stops the cores and the port, once what the connections sent was
    /// acknowledged (at most [`SETTLE_AT_CLOSE`]); returns what the cores
    /// counted (`None` if the inline cores were gone already).
    pub(crate) fn shutdown(self) -> Option<HostReport> {
        let stopped = match self.running {
            Running::Threads(runtime) => Some(runtime.shutdown_settling(SETTLE_AT_CLOSE)),
            Running::Inline(cores) => {
                // Taken out of the lock first: the cores shut down
                // without holding it.
                let stepper = cores
                    .0
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .take();
                stepper.map(|cores| cores.shutdown_settling(SETTLE_AT_CLOSE))
            }
        };
        let mut port = self.port;
        let report = stopped
            .map(|stopped| HostReport::of(&stopped, &port, |control| control.tcp().counters()));
        stop_port(
            &mut port,
            report.as_ref().map_or(0, HostReport::reset_at_shutdown),
        );
        report
    }
}
