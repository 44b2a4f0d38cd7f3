//! The rings between the control core and one dataplane core.
//!
//! A dataplane core passes the control core every frame that is not a
//! segment of a flow it owns (ARP, ICMP, SYNs, unknown flows); the control
//! core sends a dataplane core commands: take over a flow, drop one, or a
//! packet of a flow it now owns that raced the hand-over; and on devices
//! with no transmit queue to spare, frames for the dataplane core to send
//! on the control core's behalf. The rings are
//! bounded lock-free queues (`crossbeam_queue::ArrayQueue`): a full ring
//! drops and counts, it never blocks a poll loop.

use crossbeam_queue::ArrayQueue;

use crate::mbuf::Mbuf;
use crate::net::FourTuple;

/// Capacity of each ring.
pub const RING_CAPACITY: usize = 4096;

/// What the control core asks of a dataplane core.
#[derive(Debug)]
pub enum Command<F> {
    /// Own this flow from now on.
    AddFlow(FourTuple, F),
    /// Forget this flow.
    RemoveFlow(FourTuple),
    /// A packet of a flow the core owns (or will own once an earlier
    /// `AddFlow` is applied): commands are applied in order.
    Packet(Mbuf),
}

/// The rings between the control core and one dataplane core.
#[derive(Debug)]
pub struct CoreLink<F> {
    pub(crate) to_control: ArrayQueue<Mbuf>,
    pub(crate) commands: ArrayQueue<Command<F>>,
    /// Frames the control core asks this core to transmit, used when the
    /// device has no transmit queue to spare for the control core.
    pub(crate) to_wire: ArrayQueue<Mbuf>,
}

impl<F> Default for CoreLink<F> {
    fn default() -> Self {
        CoreLink {
            to_control: ArrayQueue::new(RING_CAPACITY),
            commands: ArrayQueue::new(RING_CAPACITY),
            to_wire: ArrayQueue::new(RING_CAPACITY),
        }
    }
}

impl<F> CoreLink<F> {
    /// Queues `command` for the dataplane core; gives it back when the
    /// ring is full.
    pub fn send_command(&self, command: Command<F>) -> Result<(), Command<F>> {
        self.commands.push(command)
    }

    /// Drops whatever is still in either ring; returns how many items.
    pub(crate) fn drain(&self) -> usize {
        let mut n = 0;
        while self.to_control.pop().is_some() {
            n += 1;
        }
        while self.commands.pop().is_some() {
            n += 1;
        }
        while self.to_wire.pop().is_some() {
            n += 1;
        }
        n
    }
}
