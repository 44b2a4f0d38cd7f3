//! [`Wakeup`]: how a queue pair gets its stream run once the application
//! posted work or asked for a close.

use std::sync::Weak;

use uwarp_dataplane::tcp::Doorbell;

use super::socket::ConnCell;

/// How a queue pair gets its stream run once the application posted work
/// or asked for a close.
///
/// An enum of the transports' handles, not a trait object, because every
/// post calls it: [`wake`](Self::wake) is a branch and then
/// [`Doorbell::ring`] or [`ConnCell::run_posted`] itself (no allocation,
/// no indirect call).
#[derive(Debug)]
pub(crate) enum Wakeup {
    /// The doorbell of the DPDK dataplane core that owns the connection:
    /// the core runs the stream at its next poll.
    Doorbell(Doorbell),
    /// The socket transport's connection: the posting thread runs it at
    /// once, unless another thread runs it now. Weak, since the
    /// connection holds the queue pair.
    Socket(Weak<ConnCell>),
}

impl Wakeup {
    /// Has the stream run: at the core's next poll, or now.
    #[inline]
    pub(crate) fn wake(&self) {
        match self {
            Wakeup::Doorbell(doorbell) => doorbell.ring(),
            Wakeup::Socket(conn) => {
                if let Some(conn) = conn.upgrade() {
                    conn.run_posted();
                }
            }
        }
    }
}
