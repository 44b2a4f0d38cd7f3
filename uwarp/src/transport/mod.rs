//! The two transports a [`Device`](crate::Device) carries its streams
//! over. Both run the same shape: a control core (or thread) for
//! listen/connect/accept/reject and the MPA startup phase (RFC 5044
//! section 7.1, RFC 6581), and dataplane cores (or a thread) that run each
//! established stream's RDMAP/DDP/MPA engine (RFC 5040, RFC 5041, RFC
//! 5044) and join it to the application's queue pair.
//!
//! - [`socket`]: the kernel's TCP sockets, the way Linux siw runs.
//! - [`dpdk`]: uwarp's own MPA-aware TCP on DPDK poll-mode cores.
//! - [`wakeup`]: how a queue pair wakes the core that runs its stream.
//!
//! The device holds its transport as a [`Transport`], started from a
//! [`Start`] as its [`TransportConfig`] says, and knows nothing else of
//! it; both transports serve the connection manager's commands
//! (`cm::ControlCmd`) on their control core.

pub(crate) mod dpdk;
pub(crate) mod socket;
pub(crate) mod wakeup;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use uwarp_control::HostReport;
use uwarp_dataplane::af_xdp::{InterfaceClaim, ServicePorts};
use uwarp_dataplane::runtime::ImpairSwitch;
use uwarp_stack::mem::StagTable;
use uwarp_stack::mpa::Micros;

use crate::bell::Bell;
use crate::cm::{ControlCmd, ControlLine};
use crate::driver::Driver;
use crate::error::Error;
use dpdk::cores::{Beside, DpdkCores};
use dpdk::stream::StreamContext;
use dpdk::DpdkConfig;

/// Which transport a device carries its streams over
/// ([`DeviceConfig::transport`](crate::DeviceConfig::transport)).
// Built once per device and read at its open: its size does not matter,
// and a box would only make the configuration harder to write.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Default)]
pub enum TransportConfig {
    /// The kernel's TCP sockets, the way Linux siw runs: a control thread
    /// and a dataplane thread.
    #[default]
    Socket,
    /// uwarp's TCP over a DPDK port: its control core runs the connection
    /// manager, the TCP handshakes and the MPA startup phase; its
    /// dataplane cores run every connection in Full Operation.
    Dpdk(DpdkConfig),
}

impl TransportConfig {
    /// The line into this transport's control core: with a bell for the
    /// socket transport's control thread, which sleeps on its sockets,
    /// none for the DPDK control core, which polls.
    pub(crate) fn control_line(&self, commands: Sender<ControlCmd>) -> Result<ControlLine, Error> {
        let bell = match self {
            TransportConfig::Socket => Some(Arc::new(Bell::new()?)),
            TransportConfig::Dpdk(_) => None,
        };
        Ok(ControlLine::new(commands, bell))
    }
}

/// What a transport starts from.
pub(crate) struct Start {
    /// The device's STag table.
    pub(crate) table: Arc<StagTable>,
    /// The commands the control core serves.
    pub(crate) commands: Receiver<ControlCmd>,
    /// The sending end of `commands`: connection requests carry it back,
    /// and the DPDK transport's revision-1 retry goes through it.
    pub(crate) control: ControlLine,
    /// How long a responder waits for the Request.
    pub(crate) startup_timeout: Duration,
}

/// A device's transport, running.
pub(crate) enum Transport {
    /// The kernel's TCP sockets: a control thread and a dataplane thread.
    Socket {
        control: JoinHandle<()>,
        dataplane: JoinHandle<()>,
    },
    /// uwarp's TCP on a DPDK port: the port and its cores.
    Dpdk(Box<DpdkCores>),
}

impl Transport {
    /// The transport `config` names, started.
    pub(crate) fn start(config: &TransportConfig, start: Start) -> Result<Self, Error> {
        match config {
            TransportConfig::Socket => Self::socket(start),
            TransportConfig::Dpdk(dpdk) => Self::dpdk(dpdk, start),
        }
    }

    /// The socket transport, its threads started.
    fn socket(start: Start) -> Result<Self, Error> {
        let Some(bell) = start.control.bell().cloned() else {
            return Err(Error::WrongState(
                "the socket transport's control line has no bell",
            ));
        };
        let (adopt, adopted) = crossbeam_channel::unbounded();
        let adopt_bell = Arc::new(Bell::new()?);
        let dataplane = socket::spawn_dataplane(adopted, adopt_bell.clone())?;
        let control = socket::spawn_control(
            start.table,
            start.commands,
            start.control,
            bell,
            (adopt, adopt_bell),
            start.startup_timeout,
        )?;
        Ok(Transport::Socket { control, dataplane })
    }

    /// The DPDK transport, brought up as `config` says: the EAL started
    /// (or the running one checked), the port created or claimed, the
    /// cores started.
    fn dpdk(config: &DpdkConfig, start: Start) -> Result<Self, Error> {
        let eal = dpdk::eal::start(config.eal.as_deref())?;
        // Beside the kernel, before the port exists: a process refused
        // here must not create one, whose removal would detach the
        // running process's program from the interface; through the
        // service, the service makes this process's link at the hello.
        let failed = |e: std::io::Error| Error::DpdkSetup(format!("beside the kernel: {e}"));
        let beside = match config.host.beside_kernel {
            None => Beside::Alone,
            Some(b) if b.through_service => {
                match ServicePorts::connect(b.ifindex).map_err(failed)? {
                    Some(ports) => Beside::Service(ports),
                    None => {
                        return Err(Error::DpdkSetup(
                            "beside the kernel: the interface's service (uwarpd) is gone".into(),
                        ))
                    }
                }
            }
            Some(b) => Beside::Direct(InterfaceClaim::take(b.ifindex).map_err(failed)?),
        };
        let port = config.port.open(eal)?;
        let context = StreamContext {
            table: start.table,
            control: start.control,
            startup_timeout: start.startup_timeout.as_micros() as Micros,
            zero_copy_from: config.zero_copy_from,
        };
        let cores = DpdkCores::start(eal, port, beside, config, start.commands, context)?;
        Ok(Transport::Dpdk(Box::new(cores)))
    }

    /// Which transport it is, for a device's `Debug`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Transport::Socket { .. } => "socket",
            Transport::Dpdk(_) => "dpdk",
        }
    }

    /// How the application runs the cores while it waits.
    pub(crate) fn driver(&self) -> Driver {
        match self {
            Transport::Socket { .. } => Driver::default(),
            Transport::Dpdk(cores) => cores.driver(),
        }
    }

    /// The impairment stage of a DPDK port.
    pub(crate) fn impairment(&self) -> Option<&Arc<ImpairSwitch>> {
        match self {
            Transport::Socket { .. } => None,
            Transport::Dpdk(cores) => Some(cores.impairment()),
        }
    }

    /// Stops the threads or the cores and the port, once the control core
    /// was told to shut down; returns what DPDK cores counted (`None` on
    /// the socket transport, or if inline cores were gone already).
    pub(crate) fn stop(self) -> Option<HostReport> {
        match self {
            Transport::Socket { control, dataplane } => {
                // The dataplane thread ends once the control thread is
                // gone, after resetting what is still open.
                let _ = control.join();
                let _ = dataplane.join();
                None
            }
            Transport::Dpdk(cores) => cores.shutdown(),
        }
    }
}
