//! The two transports a [`Device`](crate::Device) carries its streams
//! over. Both run the same shape: a control core (or thread) for
//! listen/connect/accept/reject and the MPA startup phase (RFC 5044
//! section 7.1, RFC 6581), and dataplane cores (or a thread) that run each
//! established stream's RDMAP/DDP/MPA engine (RFC 5040, RFC 5041, RFC
//! 5044) and join it to the application's queue pair.
//!
//! - [`socket`]: the kernel's TCP sockets, the way Linux siw runs.
//! - [`dpdk`]: uwarp's own MPA-aware TCP on DPDK poll-mode cores.

pub(crate) mod dpdk;
pub(crate) mod socket;
