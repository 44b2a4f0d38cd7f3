//! uwarp's drop-in `libibverbs.so.1` and `librdmacm.so.1`: rdma-core's C
//! verbs and connection manager interfaces over uwarp, so that programs built
//! against rdma-core (perftest, rping, qperf, fio, MPI, SPDK) run on
//! uwarp unmodified, with no kernel module and no RDMA NIC.
//!
//! The crate builds one shared object, `libuwarp_verbs.so`, whose SONAME
//! is `libibverbs.so.1` and whose exports carry rdma-core's symbol
//! versions (`ibv_open_device@@IBVERBS_1.1`): see `build.rs`,
//! `versions.map` and [`export`]. `uwarp-run` (src/bin/uwarp-run.rs)
//! gives it the names applications look for and runs them on it.
//!
//! - [`abi`]: the C structures, laid out as rdma-core's headers lay
//!   them out.
//! - [`device`]: the device list, contexts and queries.
//! - [`pd`]: protection domains.
//! - [`mr`]: memory regions of the application's own memory.
//! - [`unmap`]: `munmap`, `mremap` and `mmap(MAP_FIXED)`, interposed to
//!   revoke registered memory the program unmaps.
//! - [`cq`]: completion channels and completion queues.
//! - [`qp`]: queue pairs and their send and receive queues.
//! - [`srq`]: shared receive queues.
//! - [`datagram`]: address handles and multicast, which iWARP does not
//!   have.
//! - [`cm`]: the connection manager (librdmacm).
//! - [`rsocket`]: rsockets, librdmacm's sockets over RDMA.
//! - [`text`]: the names of the verbs' enumerations.
//! - [`limits`]: what the device reports about itself.
//! - [`async_events`]: asynchronous events and the other device-level
//!   verbs programs import.
//! - [`acknowledgements`]: counting the events handed out and
//!   acknowledged, which destroying a queue waits for.
//! - [`provider`]: the process's uwarp device behind it all.
//! - [`log`]: what the libraries print, on standard error only.
//! - [`provider_abi`]: rdma-core's provider interface, there so that
//!   provider libraries programs load (libmlx5, DPDK's mlx5 drivers) load.
//! - [`export`]: symbol versions and the entry-point guard.
//! - `check` (with the `testing` feature): fuzz oracles for the entry
//!   points that parse what applications pass (address strings, work
//!   request lists, connection private data).
//!
//! # Features
//!
//! `testing` adds `check`. The crate's own tests and its fuzz crate
//! (`fuzz/`) turn it on; production builds, and the shared object, leave
//! it off.

pub mod abi;
pub mod acknowledgements;
pub mod async_events;
#[cfg(feature = "testing")]
pub mod check;
pub mod cm;
pub mod cq;
pub mod datagram;
pub mod device;
pub mod export;
pub mod limits;
pub mod log;
pub mod mr;
pub mod pd;
pub mod provider;
pub mod provider_abi;
pub mod qp;
pub mod rsocket;
pub mod srq;
pub mod text;
pub mod unmap;
