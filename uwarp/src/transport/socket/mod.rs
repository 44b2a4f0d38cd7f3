//! The kernel-socket transport: the engines of `uwarp-stack` over
//! ordinary TCP sockets, the way Linux siw runs, with the thread shape the
//! DPDK transport uses.
//!
//! - `control_core.rs`: the control thread. It sleeps on its sockets and
//!   the bell its commands ring, listens, connects, runs the
//!   MPA startup phase (RFC 5044 section 7.1, RFC 6581) on each new
//!   socket, answers the application's accept/reject, and hands every
//!   established connection to the dataplane.
//! - `dataplane.rs`: the dataplane thread. It polls its connections'
//!   sockets, drives each queue pair's engine, drains the application's
//!   work request rings and fills completion queues.
//! - `idle.rs`: the dataplane's back-off when there is nothing to do
//!   (yield, then park on its sockets).
//! - `readiness.rs`: the epoll set that tells the dataplane which sockets
//!   have octets, so a round reads only those.
//! - `setup.rs`: one socket's startup phase.
//! - `tcp.rs`: socket calls std lacks (a registered active open, MSS,
//!   abortive close).
//! - `descriptors.rs`: the registry of the transport's sockets, which a
//!   child of `fork` closes (`crate::fork`).

mod control_core;
mod dataplane;
pub(crate) mod descriptors;
mod idle;
mod readiness;
mod setup;
mod tcp;

pub(crate) use control_core::spawn_control;
pub(crate) use dataplane::spawn_dataplane;

/// A connected pair of loopback sockets, for the tests of the modules
/// that wait on sockets.
#[cfg(test)]
fn loopback_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let near = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (far, _) = listener.accept().unwrap();
    (near, far)
}
