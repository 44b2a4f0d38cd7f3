//! The control core: the interface's slow path and connection set-up.
//!
//! It owns the [`Interface`] (ARP responder and resolver with its cache
//! and timers, ICMP echo, gratuitous ARP on start) and its way to the
//! wire ([`ControlTx`]). Every frame the dataplane cores do not consume comes to it over
//! their rings; TCP segments no core owns (SYNs, strays, packets that race
//! a hand-over) go to the [`ControlHandler`], which in the product runs
//! the TCP handshake and the MPA startup phase and then hands the flow to
//! a dataplane core with [`ControlContext::send_command`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::mbuf::Mbuf;
use crate::net::{EchoReply, Interface, Received, RxChecksum, TcpMeta};
use crate::polled::Polled;
use crate::runtime::control_tx::ControlTx;
use crate::runtime::link::{Command, CoreLink};

/// Frames taken from each dataplane ring per poll, so one busy core cannot
/// starve the others or the control core's timers.
const RING_BUDGET: usize = 256;

/// What the control core runs above the interface.
pub trait ControlHandler: Send {
    /// The per-flow state it hands to dataplane cores.
    type Flow: Send;

    /// A TCP segment of a flow no dataplane core owns. The default drops
    /// it (a listener-less host; the product answers with the handshake
    /// or a RST).
    fn on_tcp(
        &mut self,
        _now: Instant,
        _meta: &TcpMeta,
        _frame: Mbuf,
        _ctx: &mut ControlContext<'_, Self::Flow>,
    ) {
    }

    /// An ICMP echo reply to one of our echo requests.
    fn on_echo_reply(&mut self, _now: Instant, _reply: EchoReply) {}

    /// Called once per poll: connection set-up timers and requests.
    fn poll(&mut self, _now: Instant, _ctx: &mut ControlContext<'_, Self::Flow>) {}

    /// Whether work reached the handler other than through the dataplane
    /// rings since its last poll, or is left over from it (the
    /// application's requests, connections waiting to be handed over):
    /// a [`Stepper`](crate::runtime::Stepper) then polls the control core
    /// at its next step, and otherwise only once per its control interval
    /// (20 us), for the timers. Called between polls, so it must be cheap (a look
    /// at a queue's length, not a system call). The default, `true`,
    /// asks for every step.
    fn has_work(&self) -> bool {
        true
    }

    /// Waits up to `timeout` for work that reaches the handler other than
    /// through the dataplane rings (the application's requests), returning
    /// early when some arrives; whether some did. A control core on a
    /// thread of its own calls it once it has been idle a while
    /// ([`Runtime`](crate::runtime::Runtime)). The default sleeps.
    fn nap(&mut self, timeout: Duration) -> bool {
        std::thread::sleep(timeout);
        false
    }

    /// The cores are stopping: the last chance to end the flows still in
    /// set-up on the wire (a TCP handler resets them), before the
    /// dataplane cores end theirs.
    fn shut_down(&mut self, _now: Instant, _ctx: &mut ControlContext<'_, Self::Flow>) {}
}

/// What a [`ControlHandler`] may use while it runs.
pub struct ControlContext<'a, F> {
    /// The interface: addresses, neighbours, echo requests.
    pub iface: &'a mut Interface,
    /// The control core's way to the wire.
    pub tx: &'a mut ControlTx<F>,
    links: &'a [Arc<CoreLink<F>>],
    arrived_on: Option<usize>,
}

impl<F> ControlContext<'_, F> {
    /// The dataplane core whose receive queue the frame being handled
    /// came in on (`None` outside [`ControlHandler::on_tcp`]): the core
    /// that should own its flow, since the device steers the flow's later
    /// packets to the same queue.
    pub fn arrived_on(&self) -> Option<usize> {
        self.arrived_on
    }

    /// Number of dataplane cores.
    pub fn dataplanes(&self) -> usize {
        self.links.len()
    }

    /// Sends `command` to dataplane core `core`; gives it back when the
    /// ring is full or there is no such core.
    pub fn send_command(&self, core: usize, command: Command<F>) -> Result<(), Command<F>> {
        match self.links.get(core) {
            Some(link) => link.send_command(command),
            None => Err(command),
        }
    }
}

/// Counters of the control core beyond the interface's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlCounters {
    /// Frames taken from the dataplane rings.
    pub frames: u64,
    /// TCP segments passed to the handler.
    pub tcp_to_handler: u64,
}

/// The control core's state.
pub struct ControlCore<C: ControlHandler> {
    iface: Interface,
    tx: ControlTx<C::Flow>,
    links: Vec<Arc<CoreLink<C::Flow>>>,
    handler: C,
    counters: ControlCounters,
    started: bool,
}

impl<C: ControlHandler> ControlCore<C> {
    /// A control core serving `links` (one per dataplane core).
    pub fn new(
        iface: Interface,
        tx: ControlTx<C::Flow>,
        links: Vec<Arc<CoreLink<C::Flow>>>,
        handler: C,
    ) -> Self {
        ControlCore {
            iface,
            tx,
            links,
            handler,
            counters: ControlCounters::default(),
            started: false,
        }
    }

    /// One round: the first call announces the interface (gratuitous
    /// ARP); then frames from the dataplane rings, the interface's timers,
    /// the handler's work and a flush. Returns the frames handled.
    pub fn poll(&mut self, now: Instant) -> usize {
        if !self.started {
            self.started = true;
            self.iface.start(now, &mut self.tx);
        }
        let mut work = 0;
        for index in 0..self.links.len() {
            for _ in 0..RING_BUDGET {
                let Some(frame) = self.links[index].to_control.take() else {
                    break;
                };
                work += 1;
                self.receive(now, index, frame);
            }
        }
        self.iface.poll(now, &mut self.tx);
        self.with_handler(None, |handler, ctx| handler.poll(now, ctx));
        self.tx.flush();
        work
    }

    /// Runs `f` on the handler, in the context it works in (`arrived_on`:
    /// the dataplane core whose queue the frame being handled came in on).
    fn with_handler(
        &mut self,
        arrived_on: Option<usize>,
        f: impl FnOnce(&mut C, &mut ControlContext<'_, C::Flow>),
    ) {
        let mut ctx = ControlContext {
            iface: &mut self.iface,
            tx: &mut self.tx,
            links: &self.links,
            arrived_on,
        };
        f(&mut self.handler, &mut ctx);
    }

    fn receive(&mut self, now: Instant, core: usize, frame: Mbuf) {
        self.counters.frames += 1;
        // Every frame here passed a dataplane core's `classify`, which
        // verified its IPv4 and TCP checksums already.
        let verified = RxChecksum::Good;
        match self
            .iface
            .receive(now, frame.data(), verified, verified, &mut self.tx)
        {
            Received::Tcp(meta) => {
                self.counters.tcp_to_handler += 1;
                self.with_handler(Some(core), |handler, ctx| {
                    handler.on_tcp(now, &meta, frame, ctx)
                });
            }
            Received::EchoReply(reply) => self.handler.on_echo_reply(now, reply),
            Received::Consumed | Received::Dropped(_) => {}
        }
    }

    /// Waits up to `timeout` for the handler's own work
    /// ([`ControlHandler::nap`]); whether some arrived.
    pub fn nap(&mut self, timeout: Duration) -> bool {
        self.handler.nap(timeout)
    }

    /// Whether a dataplane core passed frames this core has not taken yet.
    pub fn has_frames(&self) -> bool {
        self.links.iter().any(|link| !link.to_control.is_empty())
    }

    /// Whether a poll now would find work that timers did not make:
    /// frames from the dataplane cores, or work the handler was given
    /// ([`ControlHandler::has_work`]).
    pub fn has_work(&self) -> bool {
        self.has_frames() || self.handler.has_work()
    }

    /// The interface (addresses, neighbour cache, counters).
    pub fn iface(&self) -> &Interface {
        &self.iface
    }

    /// The handler.
    pub fn handler(&self) -> &C {
        &self.handler
    }

    /// The counters so far.
    pub fn counters(&self) -> &ControlCounters {
        &self.counters
    }

    /// The transmit side (its counters).
    pub fn tx(&self) -> &ControlTx<C::Flow> {
        &self.tx
    }

    /// The first step of stopping, before the dataplane cores stop: the
    /// handler ends its flows ([`ControlHandler::shut_down`]) and what
    /// that sent goes out on this core's queue (or waits in dataplane core
    /// 0's ring, which it empties when it stops).
    pub fn end_flows(&mut self, now: Instant) {
        self.with_handler(None, |handler, ctx| handler.shut_down(now, ctx));
        self.tx.flush();
    }

    /// Stops cleanly: sends what the device will still take, then frees
    /// every mbuf still queued here or in the rings. Returns how many were
    /// dropped unsent.
    pub fn shutdown(&mut self) -> usize {
        self.tx.flush();
        let queued = self.tx.discard_pending();
        queued + self.links.iter().map(|link| link.drain()).sum::<usize>()
    }
}
