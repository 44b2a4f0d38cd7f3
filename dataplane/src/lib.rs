//! uwarp's DPDK dataplane: what the dataplane cores run. Safe wrappers
//! over [`dpdk_sys`] for the parts of DPDK the poll-mode cores use, and
//! uwarp's TCP on them.
//!
//! - [`eal`]: the EAL, initialised once per process ([`Eal::init`]).
//! - [`mempool`]: pktmbuf pools, one per core, freed on drop.
//! - [`mbuf`]: owned mbufs ([`Mbuf`]), slices of their data, chains.
//! - [`extbuf`]: mbufs over caller memory for zero-copy transmit.
//! - [`dma`]: that memory DMA-mapped for PCI devices.
//! - [`af_xdp`]: a port on a queue of an interface the kernel keeps,
//!   beside its stack: the steering program, uwarp's ports held in the
//!   kernel, the interface's facts.
//! - [`device`]: claiming ethdev ports, virtual devices, net_ring pairs.
//! - [`port`]: configuring ports with N queue pairs, RSS and offloads.
//! - [`queue`]: the receive and transmit bursts of one queue.
//! - [`stats`]: link state, basic and extended statistics.
//! - [`net`]: Ethernet, ARP, IPv4 and ICMP on smoltcp's wire types,
//!   sans-IO: per-frame classification and the control core's interface.
//! - [`polled`]: a pop for polling consumers, without the fence an
//!   empty crossbeam queue's pop costs.
//! - [`runtime`]: the control core and the dataplane cores with their
//!   flow tables and rings, run on pinned threads or stepped.
//! - [`tcp`]: uwarp's MPA-aware TCP on the dataplane cores: flows, their
//!   routes and timers, a core's TCP.
//!
//! Every call into DPDK takes an `&Eal`, so none can happen before the EAL
//! is initialised; ownership of mbufs, queues and ports follows DPDK's
//! rules (an mbuf has one owner, a queue one polling thread, a port one
//! configuring handle) so that the API needs no `unsafe` from its callers.

pub mod af_xdp;
pub mod device;
pub mod dma;
pub mod eal;
pub mod error;
pub mod extbuf;
pub mod mbuf;
pub mod mempool;
pub mod net;
pub mod polled;
pub mod port;
pub mod queue;
pub mod runtime;
pub mod stats;
pub mod tcp;

pub use device::{ring_loopback, ring_pair, Device};
pub use eal::{Eal, EalConfig, Lcores};
pub use error::{Error, Result};
pub use mbuf::Mbuf;
pub use mempool::{Mempool, MempoolConfig};
pub use port::{Capabilities, Port, PortConfig, Queues};
pub use queue::{RxQueue, TxQueue};
pub use stats::{Link, Stats};
