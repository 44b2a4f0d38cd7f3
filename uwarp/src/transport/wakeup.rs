//! [`Wakeup`]: how a queue pair wakes the core that runs its stream.

use uwarp_dataplane::tcp::Doorbell;

/// How a queue pair wakes the core that runs its stream once the
/// application posted work or asked for a close. Only the DPDK transport
/// sets one: the socket transport's dataplane thread polls every queue
/// pair.
///
/// An enum of the transports' handles, not a trait object, because every
/// post calls it: with one variant it has the layout of a [`Doorbell`]
/// and [`wake`](Self::wake) compiles to [`Doorbell::ring`] itself (no
/// allocation, no indirect call, no atomic but the doorbell's own).
#[derive(Debug)]
pub(crate) enum Wakeup {
    /// The doorbell of the DPDK dataplane core that owns the connection.
    Doorbell(Doorbell),
}

// One variant needs no tag: a wake-up is a doorbell, no bigger.
const _: () = assert!(std::mem::size_of::<Wakeup>() == std::mem::size_of::<Doorbell>());

impl Wakeup {
    /// Asks the core to drive the stream at its next poll.
    #[inline]
    pub(crate) fn wake(&self) {
        match self {
            Wakeup::Doorbell(doorbell) => doorbell.ring(),
        }
    }
}
