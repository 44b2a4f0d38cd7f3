//! [`TcpSetup`]: the control core's half of TCP (RFC 9293 section 3.5):
//! listeners, active opens, the three-way handshake, and the hand-over of
//! each synchronized connection to a dataplane core (the "generic path to
//! optimized path" move of RFC 5044 Appendix A).
//!
//! Segments reach it when no dataplane core owns their 4-tuple: SYNs for a
//! listener (a [`Listener`] bounds the half-open connections), segments of
//! handshakes in progress, segments of a flow handed over that came in on
//! another core's queue (one that raced the hand-over, or one the device
//! steered elsewhere later: forwarded to the owner for the flow's whole
//! life, never dropped), and strays, answered with a RST as RFC 9293
//! section 3.10.7.1 says. Applications ask for listeners and connections
//! through a channel ([`TcpHost`] wraps it), served once per poll.
//!
//! Which dataplane core owns a flow: the one whose receive queue the
//! flow's first segment from the peer came in on (the SYN of a passive
//! open, the SYN-ACK of an active one), since the device steers the
//! flow's later segments to the same queue. When the port spreads flows
//! with uwarp's own RSS key and table ([`RssSteering`]), an active open
//! picks its source port so that the answer comes in on the core whose
//! turn it is (round robin), and counts the answers that did not.
//!
//! [`TcpHost`]: crate::TcpHost

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use crossbeam_channel::{Receiver, Sender};
use smoltcp::wire::{EthernetAddress, EthernetFrame, Ipv4Address, TcpRepr};
use uwarp_dataplane::af_xdp::{PortBroker, PortClaimError};
use uwarp_dataplane::net::{FourTuple, Resolution, RssSteering, TcpMeta};
use uwarp_dataplane::runtime::{Command, ControlContext, ControlHandler};
use uwarp_dataplane::Mbuf;
use uwarp_stack::tcp::{
    parse_verified, reset_reply, Config, Connection, Endpoint, Instant, IsnGenerator,
    ListenOutcome, Listener, Segment, Stats,
};

use crate::Error;
use uwarp_dataplane::tcp::app::{End, TcpApp};
use uwarp_dataplane::tcp::clock::Clock;
use uwarp_dataplane::tcp::core::{ClosedFlows, TcpCore};
use uwarp_dataplane::tcp::deadlines::{Deadlines, Due};
use uwarp_dataplane::tcp::flow::{FlowCounters, Status, TcpFlow};
use uwarp_dataplane::tcp::route::Route;

/// How long an active open waits for ARP before it fails as unreachable.
const RESOLVE_FOR: Duration = Duration::from_secs(3);

/// Handshakes in progress per listener at most (SYNs beyond are dropped).
const MAX_HALF_OPEN: usize = 1024;

/// The first local port of active opens (RFC 6335's dynamic range).
const EPHEMERAL_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

/// Creates the application of each connection a listener accepts, from
/// the peer's endpoint.
pub type AppFactory<A> = Box<dyn FnMut(Endpoint) -> A + Send>;

/// An application's request to the control core.
enum Request<A> {
    /// Listen on a local port.
    Listen {
        port: u16,
        factory: AppFactory<A>,
        done: Sender<Result<(), &'static str>>,
    },
    /// Open a connection to `remote`, run by `app`.
    Connect { remote: Endpoint, app: A },
}

/// How applications ask a [`TcpSetup`] (from any thread) for listeners
/// and connections; served at its next poll.
pub struct TcpRequests<A> {
    sender: Sender<Request<A>>,
}

impl<A> Clone for TcpRequests<A> {
    fn clone(&self) -> Self {
        TcpRequests {
            sender: self.sender.clone(),
        }
    }
}

impl<A: TcpApp> TcpRequests<A> {
    /// Asks for a listener on `port`; each connection it accepts gets the
    /// application `factory` makes for its peer. The answer comes on the
    /// returned channel once the control core served the request.
    pub fn listen(
        &self,
        port: u16,
        factory: impl FnMut(Endpoint) -> A + Send + 'static,
    ) -> Result<Receiver<Result<(), &'static str>>, Error> {
        let (done, answer) = crossbeam_channel::bounded(1);
        self.sender
            .send(Request::Listen {
                port,
                factory: Box::new(factory),
                done,
            })
            .map_err(|_| Error::DeviceClosed)?;
        Ok(answer)
    }

    /// Asks for a connection to `remote`, run by `app` (which hears how
    /// it went: its events, or `End::Unreachable`/`Reset`/`TimedOut`).
    pub fn connect(&self, remote: Endpoint, app: A) -> Result<(), Error> {
        self.sender
            .send(Request::Connect { remote, app })
            .map_err(|_| Error::DeviceClosed)
    }
}

/// What the control core's TCP has done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetupCounters {
    /// Connections handed to dataplane cores.
    pub handed_over: u64,
    /// Segments of handed-over flows that came in on another core's
    /// queue, forwarded to the owning core.
    pub forwarded: u64,
    /// Such segments dropped because the owning core's command ring was
    /// full (TCP retransmits them).
    pub forward_ring_full: u64,
    /// Active opens whose source port was chosen so that RSS brings the
    /// answers to the core whose turn it was.
    pub steered: u64,
    /// Steered active opens whose SYN-ACK came in on another core's queue
    /// (the core it came in on owns the flow).
    pub mispredicted: u64,
    /// Resets sent for segments of no connection.
    pub resets_sent: u64,
    /// SYNs dropped because a listener had too many handshakes.
    pub syns_dropped: u64,
    /// Segments the engine could not parse.
    pub malformed: u64,
    /// Handshakes that failed (reset, timed out, unreachable).
    pub failed: u64,
    /// Connections still in set-up when the core stopped, reset (a RST
    /// sent to the peer).
    pub reset_at_shutdown: u64,
    /// Transmit counters of the handshakes.
    pub tx: FlowCounters,
}

struct Listening<A> {
    listener: Listener,
    factory: AppFactory<A>,
}

struct Handshake<A> {
    flow: TcpFlow<A>,
    /// The dataplane core that takes the flow.
    core: usize,
    /// Whether `core` is settled by a segment from the peer (an active
    /// open's is a guess until its SYN-ACK).
    owner: Owner,
}

/// How a handshake's core was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// By the queue a segment of the peer came in on.
    Settled,
    /// Not yet (an active open before its first answer); `predicted` when
    /// RSS was expected to bring the answer to `core`.
    Awaiting { predicted: bool },
}

struct Resolving<A> {
    remote: Endpoint,
    app: A,
    give_up: WallInstant,
}

/// The control core's TCP: the handler of `uwarp-dataplane`'s control core.
pub struct TcpSetup<A> {
    clock: Clock,
    config: Config,
    isn: IsnGenerator,
    requests: Receiver<Request<A>>,
    listeners: HashMap<u16, Listening<A>>,
    handshakes: HashMap<FourTuple, Handshake<A>>,
    deadlines: Deadlines,
    due: Vec<Due>,
    resolving: Vec<Resolving<A>>,
    /// Every flow handed over and not yet announced closed, with its core:
    /// its segments that reach this core are forwarded there, and its
    /// 4-tuple is not free for active opens, however long it lives.
    handed: HashMap<FourTuple, usize>,
    /// Hand-overs the core's full command ring refused, retried next poll.
    waiting: Vec<(FourTuple, Handshake<A>)>,
    /// How the port spreads flows over the cores' queues, when uwarp's
    /// RSS key and table are known to be in force.
    steering: Option<RssSteering>,
    /// The core the next steered active open is for.
    next_core: usize,
    /// Flows the dataplane cores closed: no longer forwarded.
    closed: Arc<ClosedFlows>,
    next_port: u16,
    /// Beside the kernel: the ports uwarp holds in it. Listeners and
    /// active opens take their ports from it, not from
    /// [`EPHEMERAL_PORTS`].
    kernel_ports: Option<Box<dyn PortBroker>>,
    counters: SetupCounters,
}

impl<A: TcpApp> TcpSetup<A> {
    /// Connection set-up with `config` for every connection, engine time
    /// from `clock` and ISNs keyed by `isn_secret` (RFC 6528), with the
    /// handle applications ask it for listeners and connections through.
    pub fn new(clock: Clock, config: Config, isn_secret: [u8; 16]) -> (Self, TcpRequests<A>) {
        let (sender, requests) = crossbeam_channel::unbounded();
        let setup = Self::serving(clock, config, isn_secret, requests);
        (setup, TcpRequests { sender })
    }

    fn serving(
        clock: Clock,
        config: Config,
        isn_secret: [u8; 16],
        requests: Receiver<Request<A>>,
    ) -> Self {
        let span = EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start() + 1;
        let offset = u16::from_le_bytes([isn_secret[0], isn_secret[1]]) % span;
        TcpSetup {
            clock,
            config,
            isn: IsnGenerator::new(isn_secret),
            requests,
            listeners: HashMap::new(),
            handshakes: HashMap::new(),
            deadlines: Deadlines::default(),
            due: Vec::new(),
            resolving: Vec::new(),
            handed: HashMap::new(),
            waiting: Vec::new(),
            steering: None,
            next_core: 0,
            closed: Arc::new(ClosedFlows::new()),
            next_port: EPHEMERAL_PORTS.start() + offset,
            kernel_ports: None,
            counters: SetupCounters::default(),
        }
    }

    /// The flow handler of a dataplane core working with this control
    /// core (same engine time; it tells this core which flows closed).
    pub fn dataplane_handler(&self) -> TcpCore<A> {
        TcpCore::new(self.clock, Arc::clone(&self.closed))
    }

    /// The flow handlers of `cores` dataplane cores working with this
    /// control core, one each.
    pub fn dataplane_handlers(&self, cores: u16) -> Vec<TcpCore<A>> {
        (0..cores).map(|_| self.dataplane_handler()).collect()
    }

    /// Predicts receive queues with `steering` (the port's, once started:
    /// [`Port::rss_steering`]); active opens then choose their source
    /// ports so that the answers come in on the core chosen for them.
    ///
    /// [`Port::rss_steering`]: uwarp_dataplane::Port::rss_steering
    pub fn set_steering(&mut self, steering: Option<RssSteering>) {
        self.steering = steering;
    }

    /// Takes listeners' and active opens' ports from `ports` (this
    /// process's, or the interface service's), held in the kernel beside
    /// which the port runs
    /// ([`HostConfig::beside_kernel`](crate::HostConfig::beside_kernel)).
    pub fn set_kernel_ports(&mut self, ports: Box<dyn PortBroker>) {
        self.kernel_ports = Some(ports);
    }

    /// Stops forwarding segments of flows the dataplane cores closed, and
    /// frees their 4-tuples.
    fn forget_closed(&mut self) {
        while let Some(tuple) = self.closed.pop() {
            self.handed.remove(&tuple);
            self.release_port(tuple);
        }
    }

    /// Lets the kernel have the port of the ended connection `tuple` back
    /// once neither a listener nor another connection uses it.
    fn release_port(&mut self, tuple: FourTuple) {
        if let Some(ports) = &mut self.kernel_ports {
            ports.release_connection(tuple.local_port);
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> &SetupCounters {
        &self.counters
    }

    /// Handshakes in progress.
    pub fn handshakes(&self) -> usize {
        self.handshakes.len()
    }

    /// The counters of the listener on `port`, if there is one.
    pub fn listener_stats(&self, port: u16) -> Option<uwarp_stack::tcp::ListenerStats> {
        self.listeners.get(&port).map(|l| *l.listener.stats())
    }

    fn serve(&mut self, request: Request<A>, local_ip: Ipv4Address) {
        match request {
            Request::Listen {
                port,
                factory,
                done,
            } => {
                let answer = if port == 0 {
                    Err("port 0 cannot be listened on")
                } else {
                    self.add_listener(local_ip, port, factory).map(drop)
                };
                let _ = done.send(answer);
            }
            Request::Connect { remote, app } => self.open_connection(remote, app),
        }
    }

    /// Listens on `port` of `local_ip` (0 picks a free port of the
    /// ephemeral range); returns the port. Each connection it accepts gets
    /// the application `factory` makes for its peer.
    pub fn add_listener(
        &mut self,
        local_ip: Ipv4Address,
        port: u16,
        factory: AppFactory<A>,
    ) -> Result<u16, &'static str> {
        let port = if let Some(ports) = &mut self.kernel_ports {
            ports.claim_listener(port).map_err(|e| match e {
                PortClaimError::InUse(_) => "the kernel's TCP uses the port",
                PortClaimError::Taken(_) => "the port already has a listener",
                PortClaimError::Exhausted => "the kernel has no free port left",
                PortClaimError::Kernel(_) => "the kernel refused to hold the port",
            })?
        } else if port == 0 {
            EPHEMERAL_PORTS
                .rev()
                .find(|port| !self.listeners.contains_key(port))
                .ok_or("every ephemeral port has a listener")?
        } else if self.listeners.contains_key(&port) {
            return Err("the port already has a listener");
        } else {
            port
        };
        let local = Endpoint::new(local_ip, port);
        let listener = Listener::new(local, self.config.clone(), self.isn.clone(), MAX_HALF_OPEN);
        self.listeners.insert(port, Listening { listener, factory });
        Ok(port)
    }

    /// Stops listening on `port`; handshakes in progress go on.
    pub fn remove_listener(&mut self, port: u16) {
        self.listeners.remove(&port);
        if let Some(ports) = &mut self.kernel_ports {
            ports.release_listener(port);
        }
    }

    /// Opens a connection to `remote`, run by `app`, once ARP resolved
    /// the next hop.
    pub fn open_connection(&mut self, remote: Endpoint, app: A) {
        self.resolving.push(Resolving {
            remote,
            app,
            give_up: WallInstant::now() + RESOLVE_FOR,
        });
    }

    /// Runs `act` on the flow of the connection `tuple` still on this
    /// core (in its handshake, or in its application's set-up), then
    /// drives it; `None` if there is no such flow.
    pub fn act_on_flow<R>(
        &mut self,
        wall: WallInstant,
        tuple: FourTuple,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
        act: impl FnOnce(&mut TcpFlow<A>) -> R,
    ) -> Option<R> {
        let handshake = self.handshakes.get_mut(&tuple)?;
        let result = act(&mut handshake.flow);
        self.advance(self.clock.at(wall), tuple, ctx);
        Some(result)
    }

    /// Drives every flow still on this core once, so applications in
    /// their own set-up phase see time pass (the MPA startup's deadline).
    pub fn drive_all(&mut self, wall: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<A>>) {
        let now = self.clock.at(wall);
        let tuples: Vec<FourTuple> = self.handshakes.keys().copied().collect();
        for tuple in tuples {
            self.advance(now, tuple, ctx);
        }
    }

    /// Active opens whose next hop resolved send their SYN.
    fn resolve(&mut self, now: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<A>>) {
        let pending = std::mem::take(&mut self.resolving);
        for entry in pending {
            match ctx.iface.resolve(now, entry.remote.addr, ctx.tx) {
                Resolution::Known(mac) => self.open(now, entry, mac, ctx),
                Resolution::Pending if now < entry.give_up => self.resolving.push(entry),
                Resolution::Pending | Resolution::Unreachable => {
                    self.counters.failed += 1;
                    let mut app = entry.app;
                    app.on_end(End::Unreachable, &Stats::default());
                }
            }
        }
    }

    fn open(
        &mut self,
        now: WallInstant,
        entry: Resolving<A>,
        mac: EthernetAddress,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let address = *ctx.iface.address();
        let target = self.steering.is_some().then(|| {
            let core = self.next_core % ctx.dataplanes().max(1);
            self.next_core = core + 1;
            core
        });
        let free = match &mut self.kernel_ports {
            Some(ports) => ports.claim_active().ok().map(|port| {
                let tuple = FourTuple {
                    local_ip: address.ip,
                    local_port: port,
                    remote_ip: entry.remote.addr,
                    remote_port: entry.remote.port,
                };
                (tuple, false)
            }),
            None => self.free_tuple(address.ip, entry.remote, target),
        };
        let Some((tuple, predicted)) = free else {
            // Every ephemeral port to this endpoint is taken.
            self.counters.failed += 1;
            let mut app = entry.app;
            app.on_end(End::NoFreePort, &Stats::default());
            return;
        };
        let local = Endpoint::new(address.ip, tuple.local_port);
        let engine_now = self.clock.at(now);
        let isn = self.isn.isn(engine_now, local, entry.remote);
        let conn = Connection::connect(self.config.clone(), local, entry.remote, isn, engine_now);
        let route = Route::new(&address, mac, entry.remote.addr);
        let flow = TcpFlow::new(Box::new(conn), entry.app, route);
        self.counters.steered += u64::from(predicted);
        let handshake = Handshake {
            flow,
            // The core the SYN-ACK comes in on settles it.
            core: target.unwrap_or(0),
            owner: Owner::Awaiting { predicted },
        };
        self.handshakes.insert(tuple, handshake);
        self.advance(engine_now, tuple, ctx);
    }

    /// A 4-tuple to `remote` no connection of this host uses (a handshake,
    /// a hand-over waiting for room, or a flow on a dataplane core not yet
    /// announced closed), with whether its answers are predicted to come
    /// in on `core`'s queue: the first such tuple when `core` is given and
    /// steering is known, else the first free one. `None` after one pass
    /// over the ephemeral ports.
    fn free_tuple(
        &mut self,
        local_ip: Ipv4Address,
        remote: Endpoint,
        core: Option<usize>,
    ) -> Option<(FourTuple, bool)> {
        let mut unsteered = None;
        for _ in EPHEMERAL_PORTS {
            let port = self.next_port;
            self.next_port = if port == *EPHEMERAL_PORTS.end() {
                *EPHEMERAL_PORTS.start()
            } else {
                port + 1
            };
            let tuple = FourTuple {
                local_ip,
                local_port: port,
                remote_ip: remote.addr,
                remote_port: remote.port,
            };
            let taken = self.handshakes.contains_key(&tuple)
                || self.handed.contains_key(&tuple)
                || self.waiting.iter().any(|(waiting, _)| *waiting == tuple);
            if taken {
                continue;
            }
            match (core, &self.steering) {
                (Some(core), Some(steering)) => {
                    if usize::from(steering.receive_queue(&tuple)) == core {
                        return Some((tuple, true));
                    }
                    unsteered.get_or_insert(tuple);
                }
                _ => return Some((tuple, false)),
            }
        }
        unsteered.map(|tuple| (tuple, false))
    }

    /// Sends what the handshake `tuple` has to send; hands it over once
    /// synchronized, forgets it once closed.
    fn advance(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let Some(handshake) = self.handshakes.get_mut(&tuple) else {
            return;
        };
        match handshake.flow.service(now, ctx.tx, &mut self.counters.tx) {
            Status::Closed => {
                self.counters.failed += 1;
                self.handshakes.remove(&tuple);
                self.release_port(tuple);
            }
            Status::Open(_) if handshake.flow.ready_for_dataplane() => {
                let handshake = self.handshakes.remove(&tuple).expect("looked up above");
                self.hand_over(tuple, handshake, ctx);
            }
            Status::Open(at) => {
                self.deadlines
                    .schedule(tuple, at, &mut handshake.flow.scheduled);
            }
        }
    }

    fn hand_over(
        &mut self,
        tuple: FourTuple,
        handshake: Handshake<A>,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let core = handshake.core;
        match ctx.send_command(core, Command::AddFlow(tuple, handshake.flow)) {
            Ok(()) => {
                self.counters.handed_over += 1;
                self.handed.insert(tuple, core);
            }
            Err(Command::AddFlow(_, flow)) => {
                let owner = handshake.owner;
                self.waiting.push((tuple, Handshake { flow, core, owner }))
            }
            Err(_) => unreachable!("send_command gives back the command it was given"),
        }
    }

    /// A segment for no listener and no connection.
    fn refuse(
        &mut self,
        segment: &TcpRepr<'_>,
        meta: &TcpMeta,
        frame: &Mbuf,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        if let Some(reset) = reset_reply(meta.tuple.remote_ip, meta.tuple.local_ip, segment) {
            self.send_reset(&reset, meta, frame, ctx);
        }
    }

    /// Sends `reset` from our address back to the sender of `frame`, at
    /// its link address.
    fn send_reset(
        &mut self,
        reset: &Segment<'_>,
        meta: &TcpMeta,
        frame: &Mbuf,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let Some(sender) = source_mac(frame) else {
            return;
        };
        // From our address (the segment's destination), on our VLAN.
        let route = Route::new(ctx.iface.address(), sender, meta.tuple.remote_ip);
        if route.transmit(reset, ctx.tx) {
            self.counters.resets_sent += 1;
        }
    }

    fn accept(
        &mut self,
        now: Instant,
        wall: WallInstant,
        meta: &TcpMeta,
        segment: &TcpRepr<'_>,
        frame: &Mbuf,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let tuple = meta.tuple;
        let Some(listening) = self.listeners.get_mut(&tuple.local_port) else {
            self.refuse(segment, meta, frame, ctx);
            return;
        };
        match listening
            .listener
            .on_segment(now, tuple.remote_ip, tuple.local_ip, segment)
        {
            ListenOutcome::Accepted(conn) => {
                let app = (listening.factory)(conn.remote());
                let address = *ctx.iface.address();
                // The peer resolved us before its SYN, so its address is
                // normally cached; otherwise answer the link it came from.
                let next_hop = match ctx.iface.resolve(wall, tuple.remote_ip, ctx.tx) {
                    Resolution::Known(mac) => Some(mac),
                    _ => source_mac(frame),
                };
                let Some(mac) = next_hop else {
                    return;
                };
                let route = Route::new(&address, mac, tuple.remote_ip);
                let core = ctx.arrived_on().unwrap_or(0);
                let flow = TcpFlow::new(conn, app, route);
                let owner = Owner::Settled;
                if let Some(ports) = &mut self.kernel_ports {
                    // The port stays held while the connection lives,
                    // whatever becomes of the listener.
                    ports.add_connection(tuple.local_port);
                }
                self.handshakes
                    .insert(tuple, Handshake { flow, core, owner });
                self.advance(now, tuple, ctx);
            }
            ListenOutcome::Reset(reset) => self.send_reset(&reset, meta, frame, ctx),
            ListenOutcome::Dropped => self.counters.syns_dropped += 1,
            ListenOutcome::Ignored => {}
        }
    }
}

/// The sender's link address in a received frame.
fn source_mac(frame: &Mbuf) -> Option<EthernetAddress> {
    Some(EthernetFrame::new_checked(frame.data()).ok()?.src_addr())
}

impl<A: TcpApp> ControlHandler for TcpSetup<A> {
    type Flow = TcpFlow<A>;

    fn on_tcp(
        &mut self,
        wall: WallInstant,
        meta: &TcpMeta,
        frame: Mbuf,
        ctx: &mut ControlContext<'_, TcpFlow<A>>,
    ) {
        let tuple = meta.tuple;
        self.forget_closed();
        if let Some(&core) = self.handed.get(&tuple) {
            // A full ring drops the segment: TCP retransmits it.
            match ctx.send_command(core, Command::Packet(frame)) {
                Ok(()) => self.counters.forwarded += 1,
                Err(_dropped) => self.counters.forward_ring_full += 1,
            }
            return;
        }
        let now = self.clock.at(wall);
        let tcp = &frame.data()[meta.tcp_offset..meta.tcp_offset + meta.tcp_len];
        let Ok(segment) = parse_verified(tcp) else {
            self.counters.malformed += 1;
            return;
        };
        match self.handshakes.get_mut(&tuple) {
            Some(handshake) => {
                if let (Owner::Awaiting { predicted }, Some(core)) =
                    (handshake.owner, ctx.arrived_on())
                {
                    self.counters.mispredicted += u64::from(predicted && core != handshake.core);
                    handshake.core = core;
                    handshake.owner = Owner::Settled;
                }
                handshake.flow.on_segment(now, &segment);
                self.advance(now, tuple, ctx);
            }
            None => self.accept(now, wall, meta, &segment, &frame, ctx),
        }
    }

    fn poll(&mut self, wall: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<A>>) {
        let local_ip = ctx.iface.address().ip;
        while let Ok(request) = self.requests.try_recv() {
            self.serve(request, local_ip);
        }
        if !self.resolving.is_empty() {
            self.resolve(wall, ctx);
        }
        for (tuple, handshake) in std::mem::take(&mut self.waiting) {
            self.hand_over(tuple, handshake, ctx);
        }
        let now = self.clock.at(wall);
        let mut due = std::mem::take(&mut self.due);
        self.deadlines.expire(now, &mut due);
        for entry in due.drain(..) {
            let Some(handshake) = self.handshakes.get_mut(&entry.tuple) else {
                continue;
            };
            if entry.claim(&mut handshake.flow.scheduled) {
                handshake.flow.on_timer(now);
                self.advance(now, entry.tuple, ctx);
            }
        }
        self.due = due;
        self.forget_closed();
    }

    /// Requests from the application, and connections waiting for their
    /// hand-over to a dataplane core; handshake timers and address
    /// resolution wait for the control interval.
    fn has_work(&self) -> bool {
        !self.requests.is_empty() || !self.waiting.is_empty()
    }

    /// Resets every connection still in its handshake or its
    /// application's set-up, and those waiting to be handed over: their
    /// peers hear a RST (the flows already handed over are their cores').
    fn shut_down(&mut self, wall: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<A>>) {
        let now = self.clock.at(wall);
        let waiting = std::mem::take(&mut self.waiting).into_iter();
        for (_, mut handshake) in self.handshakes.drain().chain(waiting) {
            if handshake.flow.reset(now, ctx.tx, &mut self.counters.tx) {
                self.counters.reset_at_shutdown += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uwarp_dataplane::net::rss::{symmetric_key, KEY_LEN};
    use uwarp_stack::tcp::{Consumer, Disposition};

    /// An application that takes nothing: these tests only choose ports.
    struct Idle;

    impl Consumer for Idle {
        fn on_data(&mut self, _pos: u64, _data: &[u8], _in_order: bool) -> Disposition {
            Disposition::Keep
        }

        fn on_left_edge(&mut self, _left_edge: u64) {}
    }

    impl TcpApp for Idle {
        fn drive(&mut self, _now: Instant, _conn: &mut Connection) {}

        fn on_end(&mut self, _end: End, _stats: &Stats) {}
    }

    fn setup() -> TcpSetup<Idle> {
        TcpSetup::new(Clock::start(), Config::default(), [7; 16]).0
    }

    const LOCAL: Ipv4Address = Ipv4Address::new(10, 1, 0, 1);
    const REMOTE: Endpoint = Endpoint::new(Ipv4Address::new(10, 1, 0, 2), 5000);

    /// Takes `tuple` as a flow handed over to `core`.
    fn hand(setup: &mut TcpSetup<Idle>, tuple: FourTuple, core: usize) {
        assert!(setup.handed.insert(tuple, core).is_none(), "ports repeat");
    }

    #[test]
    fn active_opens_pick_ports_whose_answers_rss_brings_to_their_core() {
        let steering = RssSteering::new(symmetric_key(KEY_LEN), 128, 2);
        let mut setup = setup();
        setup.set_steering(Some(steering.clone()));
        for i in 0..32 {
            let core = i % 2;
            let (tuple, predicted) = setup.free_tuple(LOCAL, REMOTE, Some(core)).unwrap();
            assert!(predicted);
            assert_eq!(usize::from(steering.receive_queue(&tuple)), core);
            assert!(EPHEMERAL_PORTS.contains(&tuple.local_port));
            hand(&mut setup, tuple, core);
        }
    }

    #[test]
    fn without_steering_ports_are_taken_in_turn() {
        let mut setup = setup();
        let (first, predicted) = setup.free_tuple(LOCAL, REMOTE, None).unwrap();
        assert!(!predicted);
        hand(&mut setup, first, 0);
        let (second, _) = setup.free_tuple(LOCAL, REMOTE, Some(1)).unwrap();
        let next = if first.local_port == *EPHEMERAL_PORTS.end() {
            *EPHEMERAL_PORTS.start()
        } else {
            first.local_port + 1
        };
        assert_eq!(second.local_port, next);
    }

    #[test]
    fn a_core_no_free_port_reaches_gets_an_unsteered_one() {
        // A table sending everything to queue 0: no port reaches core 1.
        let steering = RssSteering::new(symmetric_key(KEY_LEN), 128, 1);
        let mut setup = setup();
        setup.set_steering(Some(steering));
        let (tuple, predicted) = setup.free_tuple(LOCAL, REMOTE, Some(1)).unwrap();
        assert!(!predicted);
        assert!(EPHEMERAL_PORTS.contains(&tuple.local_port));
    }
}
