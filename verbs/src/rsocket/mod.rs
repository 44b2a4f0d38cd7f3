//! rsockets (librdmacm's `<rdma/rsocket.h>`): stream sockets over RDMA
//! that speak rdma-core's rsocket protocol in its iWARP mode, built on
//! uwarp's own connection manager and verbs (the `uwarp` crate, called
//! directly: its synchronous `Device::connect` and `Listener` fit the
//! socket calls, with no event channel in between).
//!
//! - [`wire`]: the conn data, target buffer entries and 32-bit messages.
//! - [`table`]: which descriptors are rsockets.
//! - [`stream`]: a socket's state, its connection's resources, connecting
//!   and accepting.
//! - [`listen`]: listening sockets and their accepting thread.
//! - [`data`]: sending, receiving, credits, shutdown.
//! - [`iomap`]: `riomap`, `riounmap`, `riowrite`.
//! - [`poll`]: `rpoll` and `rselect`.
//! - [`options`]: `rsetsockopt`, `rgetsockopt`, `rfcntl`.
//! - [`keepalive`]: the thread that sends `SO_KEEPALIVE`'s messages.
//! - [`exports`]: the C entry points.

pub mod data;
pub mod exports;
pub mod iomap;
pub mod keepalive;
pub mod listen;
pub mod options;
pub mod poll;
pub mod stream;
pub mod table;
pub mod wire;
