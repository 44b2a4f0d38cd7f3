//! iWARP on uwarp's TCP over DPDK: the MPA startup phase on the control
//! core, RDMAP/DDP/MPA Full Operation on the dataplane core that owns the
//! connection (RFC 5040, RFC 5041, RFC 5044, RFC 6581).
//!
//! - [`stream`]: [`RdmaStream`](stream::RdmaStream), iWARP above one
//!   TCP connection: its startup phase (`stream/startup.rs`, on the
//!   control core) and Full Operation (`stream/operation.rs`, on its
//!   dataplane core).
//! - [`control`]: [`RdmaControl`](control::RdmaControl), the control
//!   core's connection manager.
//! - [`cores`]: a device's port and cores, on threads or inline, and
//!   their [`DpdkConfig`].
//! - [`port`]: which port a device runs on ([`DpdkPort`]), and
//!   [`VirtualLink`]s in this process.
//! - [`eal`]: the process's EAL, started by the first device opened.
//! - `af_xdp`: [`DpdkConfig::beside_kernel`], a device on a kernel
//!   interface's queue beside the kernel's own stack.

mod af_xdp;
pub(crate) mod control;
pub(crate) mod cores;
pub(crate) mod eal;
pub(crate) mod port;
pub(crate) mod stream;

pub use cores::{CoreThreads, DpdkConfig, ZERO_COPY_FROM};
pub use port::{DpdkPort, LinkEnd, VirtualLink};
