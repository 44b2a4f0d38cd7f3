//! The drop-in librdmacm: rdma-core's connection manager interface over
//! uwarp's (RFC 5044 section 7 and RFC 6581: the MPA startup phase, run by
//! uwarp's control thread). Its exports share this one shared object;
//! `uwarp-run` links `librdmacm.so.1` to it too.
//!
//! uwarp's own connection manager is synchronous (`Device::connect`
//! returns once the queue pair is in RTS; a `Listener` hands out requests
//! as they come); librdmacm's is asynchronous, with events on a channel.
//! Each asynchronous operation runs on a library thread (every signal
//! blocked) that posts its event when uwarp answers. A synchronous id
//! (created with no channel) gets a private channel, and its operations
//! wait on it for their own event.
//!
//! - [`queue`]: the queue of events behind a channel, and its descriptor.
//! - [`events`]: event channels, events and their lifetimes,
//!   `rdma_get_cm_event`, `rdma_ack_cm_event`.
//! - [`id`]: identifiers: creation, destruction, migration, options, and
//!   a synchronous id's wait.
//! - [`listen`]: binding, listening, and requests.
//! - [`connect`]: resolving, connecting, accepting, rejecting,
//!   disconnecting, and watching a connection.
//! - [`endpoint`]: `rdma_create_ep` and its family, and an id's shared
//!   receive queue.
//! - [`ib_only`]: multicast and ECE, as the kernel answers them on iWARP.
//! - [`qp`]: the queue pair of an id.
//! - [`addrinfo`]: `rdma_getaddrinfo`, addresses between C and Rust.
//! - [`devices`]: the device list (`rdma_get_devices`).

pub mod addrinfo;
pub mod connect;
pub mod devices;
pub mod endpoint;
pub mod events;
pub mod ib_only;
pub mod id;
pub mod listen;
pub mod qp;
pub mod queue;
