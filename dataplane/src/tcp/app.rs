//! [`TcpApp`]: what runs above one TCP connection on the DPDK runtime.
//!
//! The application of a connection runs where the connection runs: on the
//! control core during the handshake, then on the dataplane core that owns
//! the flow. It is the engine's [`Consumer`] (every acceptable segment's
//! new data, in order or not, RFC 5044 A.3), it queues data and closes
//! through the [`Connection`] itself, and it hears how the connection
//! ended. MPA/DDP/RDMAP is such an application; so are the roles of
//! `uwarp-perf tcp`.

use uwarp_stack::tcp::{Connection, Consumer, Event, Instant, Stats};

use super::doorbell::Doorbell;

/// Why a connection ended, as told to its application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Both directions closed with FINs (RFC 9293 section 3.6).
    Closed,
    /// The peer reset the connection, or refused it (a RST to our SYN).
    Reset,
    /// Retransmissions or keep-alive probes went unanswered (RFC 9293
    /// section 3.8.3), or the handshake did.
    TimedOut,
    /// The peer's address (or the gateway's) did not resolve (ARP).
    Unreachable,
    /// An active open found every ephemeral port to its remote endpoint
    /// taken by a connection still in the flow tables (TIME-WAIT holds
    /// one for 2 MSL).
    NoFreePort,
    /// The connection closed without either side's FIN exchange
    /// completing (the application aborted it).
    Aborted,
}

/// Each end in words, for error messages.
impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            End::Closed => "closed by both sides",
            End::Reset => "reset or refused by the peer",
            End::TimedOut => {
                "timed out: the peer did not answer, or did not finish closing, in time"
            }
            End::Unreachable => {
                "unreachable: the link address of the peer (or of its gateway) did not resolve"
            }
            End::NoFreePort => {
                "no free local port: every ephemeral port to the peer's address and port \
                 is held by a connection, those in TIME-WAIT included"
            }
            End::Aborted => "aborted",
        })
    }
}

/// The application above one connection.
pub trait TcpApp: Consumer + Send + 'static {
    /// An event of the engine (established, the peer's FIN, ...).
    fn on_event(&mut self, _now: Instant, _event: Event, _conn: &mut Connection) {}

    /// Called after every input, timer and hand-over of the connection:
    /// queue data ([`Connection::send`], [`Connection::send_record`]),
    /// read held data, close.
    fn drive(&mut self, now: Instant, conn: &mut Connection);

    /// Whether the connection may leave the control core: asked once the
    /// handshake is over, and again after every input until it says yes.
    /// An application with a set-up phase of its own (the MPA startup)
    /// finishes it on the control core first.
    fn ready_for_dataplane(&self) -> bool {
        true
    }

    /// The connection now runs on a dataplane core; other threads ring
    /// `doorbell` to have that core drive it (new work to send, say).
    fn on_dataplane(&mut self, _doorbell: Doorbell) {}

    /// The connection ended; called once. The flow stays in its table
    /// through TIME-WAIT but the application is not called again.
    fn on_end(&mut self, end: End, stats: &Stats);
}
