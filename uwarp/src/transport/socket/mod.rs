//! The kernel-socket transport: the engines of `uwarp-stack` over
//! ordinary TCP sockets, the way Linux siw runs, with the thread shape the
//! DPDK transport uses.
//!
//! - `control_core.rs`: the control thread. It sleeps on its sockets and
//!   the bell its commands ring, listens, connects, runs the
//!   MPA startup phase (RFC 5044 section 7.1, RFC 6581) on each new
//!   socket, answers the application's accept/reject, and hands every
//!   established connection to the dataplane.
//! - `conn.rs`: one established connection and its round: the
//!   application's work request rings into the queue pair's engine,
//!   octets between the socket and the engine, completions out.
//! - `conn_cell.rs`: a connection shared by the dataplane thread and the
//!   application's threads: a post, or a poll of an empty completion
//!   queue, runs its round on the application's thread, and the
//!   dataplane thread leaves its socket to an application that polls.
//! - `cq_feed.rs`: the connections feeding one completion queue, with an
//!   epoll set of their sockets, which a poll of the empty queue runs.
//! - `dataplane.rs`: the dataplane thread. It runs every connection's
//!   round that no application thread runs at the moment.
//! - `idle.rs`: the dataplane's back-off when there is nothing to do
//!   (yield, then park on its sockets).
//! - `readiness.rs`: the epoll set that tells the dataplane which sockets
//!   have octets, so a round reads only those.
//! - `setup.rs`: one socket's startup phase.
//! - `tcp.rs`: socket calls std lacks (a registered active open, MSS,
//!   abortive close).
//! - `descriptors.rs`: the registry of the transport's sockets, which a
//!   child of `fork` closes (`crate::fork`).

mod conn;
mod conn_cell;
mod control_core;
mod cq_feed;
mod dataplane;
pub(crate) mod descriptors;
mod idle;
mod outbound;
mod readiness;
mod setup;
mod tcp;

pub(crate) use conn_cell::ConnCell;
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
