//! [`RdmaControl`]: the control core of the DPDK transport. It serves the
//! connection manager's commands (listen, connect, accept, reject: the
//! same `ControlCmd`s the socket transport's control thread serves) on
//! top of [`TcpSetup`], which runs the TCP handshakes; every connection's
//! MPA startup phase (RFC 5044 section 7.1, RFC 6581) then runs in its
//! [`RdmaStream`] on this core, which hands it to a dataplane core in
//! Full Operation.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant as WallInstant};

use crossbeam_channel::{Receiver, Select, Sender};
use uwarp_dataplane::net::TcpMeta;
use uwarp_dataplane::runtime::{ControlContext, ControlHandler};
use uwarp_dataplane::Mbuf;
use uwarp_stack::tcp::Endpoint;

use super::stream::{request_tuple, RdmaStream, StreamContext};
use crate::cm::{ControlCmd, IncomingRequest, Listening};
use crate::error::Error;
use uwarp_control::TcpSetup;
use uwarp_dataplane::tcp::{Clock, TcpApp, TcpFlow};

/// How often streams in their startup phase are driven to see their
/// deadlines pass.
const STARTUP_SWEEP: Duration = Duration::from_millis(50);

/// The ports a loopback listener given port 0 is said to have (none is
/// taken: such a listener hears nothing).
const LOOPBACK_PORTS: std::ops::Range<u16> = 49152..65535;

/// The control core's handler on the DPDK transport.
pub struct RdmaControl {
    setup: TcpSetup<RdmaStream>,
    clock: Clock,
    commands: Receiver<ControlCmd>,
    context: StreamContext,
    /// Listener identifiers and their ports.
    listeners: HashMap<u64, u16>,
    /// Loopback listeners, which hear nothing: their requests' channels,
    /// kept open until they stop.
    loopback_listeners: HashMap<u64, Sender<IncomingRequest>>,
    next_id: u64,
    next_sweep: WallInstant,
}

impl RdmaControl {
    /// Serves `commands` with TCP from `setup` and streams made with
    /// `context`.
    pub(crate) fn new(
        setup: TcpSetup<RdmaStream>,
        clock: Clock,
        commands: Receiver<ControlCmd>,
        context: StreamContext,
    ) -> Self {
        RdmaControl {
            setup,
            clock,
            commands,
            context,
            listeners: HashMap::new(),
            loopback_listeners: HashMap::new(),
            next_id: 0,
            next_sweep: WallInstant::now(),
        }
    }

    /// The TCP set-up underneath (its counters).
    pub fn tcp(&self) -> &TcpSetup<RdmaStream> {
        &self.setup
    }

    fn serve(
        &mut self,
        wall: WallInstant,
        cmd: ControlCmd,
        ctx: &mut ControlContext<'_, TcpFlow<RdmaStream>>,
    ) {
        let local_ip = ctx.iface.address().ip;
        match cmd {
            // The transport is IPv4 only: no listener has a family to
            // keep to itself.
            ControlCmd::Listen { addr, reply, .. } => {
                let _ = reply.send(self.listen(local_ip, addr));
            }
            ControlCmd::StopListening { id, done } => {
                if let Some(port) = self.listeners.remove(&id) {
                    self.setup.remove_listener(port);
                }
                self.loopback_listeners.remove(&id);
                let _ = done.send(());
            }
            ControlCmd::Connect(connect) => {
                let SocketAddr::V4(remote) = connect.addr else {
                    let err = Error::InvalidArgument("the transport is IPv4 only");
                    let _ = connect.reply.send(Err(err));
                    return;
                };
                let now = self.clock.at(wall).micros();
                match RdmaStream::initiator(self.context.clone(), now, connect) {
                    Ok(stream) => {
                        let remote = Endpoint::new(*remote.ip(), remote.port());
                        self.setup.open_connection(remote, stream);
                    }
                    Err((err, reply)) => {
                        let _ = reply.send(Err(err));
                    }
                }
            }
            ControlCmd::Accept {
                id,
                qp,
                params,
                reply,
            } => {
                let mut reply = Some(reply);
                let tuple = request_tuple(local_ip, id);
                self.setup.act_on_flow(wall, tuple, ctx, |flow| {
                    let (stream, conn) = flow.parts_mut();
                    if let Some(reply) = reply.take() {
                        stream.accept(conn, qp, &params, reply);
                        if !stream.ready_for_dataplane() {
                            // The stream could not accept (it told the
                            // application why) and no answer can follow:
                            // close, as a responder that cannot take a
                            // Request does (RFC 6581 section 10), so the
                            // initiator hears it (and may retry in
                            // revision 1) instead of waiting for a Reply.
                            conn.close();
                        }
                    }
                });
                if let Some(reply) = reply {
                    let _ = reply.send(Err(Error::WrongState("the request is no longer pending")));
                }
            }
            ControlCmd::Reject {
                id,
                private_data,
                reply,
            } => {
                let tuple = request_tuple(local_ip, id);
                let result = self
                    .setup
                    .act_on_flow(wall, tuple, ctx, |flow| {
                        let (stream, conn) = flow.parts_mut();
                        stream.reject(conn, &private_data)
                    })
                    .unwrap_or(Err(Error::WrongState("the request is no longer pending")));
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            ControlCmd::Shutdown => {}
        }
    }

    fn listen(
        &mut self,
        local_ip: smoltcp::wire::Ipv4Address,
        addr: SocketAddr,
    ) -> Result<Listening, Error> {
        let (requests, arrivals) = crossbeam_channel::unbounded();
        match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() || ip == local_ip => {}
            IpAddr::V4(ip) if ip.is_loopback() => {
                // A loopback listener, as Linux's RDMA CM opens one on an
                // iWARP device: it hears only this host, and nothing of
                // this host reaches the port (its connections to itself
                // go over the kernel's loopback), so it hears nothing.
                // Its requests' channel stays open until it stops.
                self.next_id += 1;
                let port = match addr.port() {
                    0 => LOOPBACK_PORTS.start + (self.next_id % LOOPBACK_PORTS.len() as u64) as u16,
                    port => port,
                };
                self.loopback_listeners.insert(self.next_id, requests);
                return Ok((self.next_id, SocketAddr::new(addr.ip(), port), arrivals));
            }
            _ => return Err(Error::InvalidArgument("not this device's IPv4 address")),
        }
        let context = self.context.clone();
        let clock = self.clock;
        let factory = Box::new(move |_peer: Endpoint| {
            let now = clock.at(WallInstant::now()).micros();
            RdmaStream::responder(context.clone(), now, requests.clone())
        });
        let port = self
            .setup
            .add_listener(local_ip, addr.port(), factory)
            .map_err(Error::InvalidArgument)?;
        self.next_id += 1;
        self.listeners.insert(self.next_id, port);
        let local = SocketAddr::V4(SocketAddrV4::new(local_ip, port));
        Ok((self.next_id, local, arrivals))
    }
}

impl ControlHandler for RdmaControl {
    type Flow = TcpFlow<RdmaStream>;

    fn on_tcp(
        &mut self,
        wall: WallInstant,
        meta: &TcpMeta,
        frame: Mbuf,
        ctx: &mut ControlContext<'_, TcpFlow<RdmaStream>>,
    ) {
        self.setup.on_tcp(wall, meta, frame, ctx);
    }

    fn poll(&mut self, wall: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<RdmaStream>>) {
        while let Ok(cmd) = self.commands.try_recv() {
            self.serve(wall, cmd, ctx);
        }
        self.setup.poll(wall, ctx);
        if wall >= self.next_sweep {
            self.next_sweep = wall + STARTUP_SWEEP;
            self.setup.drive_all(wall, ctx);
        }
    }

    /// The application's commands, and the connection set-up's own work.
    fn has_work(&self) -> bool {
        !self.commands.is_empty() || self.setup.has_work()
    }

    /// Waits for the application's next command (taken by the next
    /// poll), or `timeout`.
    fn nap(&mut self, timeout: Duration) -> bool {
        let mut select = Select::new();
        select.recv(&self.commands);
        select.ready_timeout(timeout).is_ok()
    }

    fn shut_down(&mut self, wall: WallInstant, ctx: &mut ControlContext<'_, TcpFlow<RdmaStream>>) {
        self.setup.shut_down(wall, ctx);
    }
}
