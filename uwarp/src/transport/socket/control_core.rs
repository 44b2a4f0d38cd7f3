//! The control thread of the socket transport: listening sockets, active
//! opens, the MPA startup phase of every new connection, the application's
//! accept/reject decisions, and the hand-over of established connections
//! to the dataplane thread (the RFC 5044 Appendix A hand-over from the
//! generic path to the Full Operation path).

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uwarp_stack::mem::StagTable;
use uwarp_stack::mpa::{LocalParams, Micros, Negotiated, Responder};
use uwarp_stack::rdmap::{EngineConfig, Role};
use uwarp_stack::wire::fpdu::mulpdu;

use super::conn::Adopt;
use super::descriptors::Registered;
use super::setup::Setup;
use super::tcp;
use crate::bell::Bell;
use crate::cm::{
    Connect, Connection, ControlCmd, ControlLine, IncomingRequest, ListenOptions, Listening,
};
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::QueuePair;
use uwarp_control::startup::{Accepted, InitiatorDecision, Progress, Side};

/// How long the control thread sleeps at most while a handshake is under
/// way, so that its startup timer runs out (RFC 5044 section 7.1.1's
/// timeout: seconds) within this of its time. Octets, new connections
/// and the application's commands wake the thread at once.
const TIMER_TICK: Duration = Duration::from_millis(10);

/// An active open waiting for its Reply.
struct Connecting {
    setup: Setup,
    connect: Connect,
}

/// An accepted active open holding its first FPDU back until `until`
/// ([`ConnectParams::first_fpdu_delay`]) before the dataplane adopts it;
/// what the peer sends meanwhile waits in the socket.
struct Holding {
    conn: Connecting,
    accepted: Accepted,
    until: Micros,
}

/// A passive open waiting for its Request (`listener` set) or for the
/// application's decision.
struct Accepting {
    setup: Setup,
    listener: u64,
    leftover: Vec<u8>,
    /// The initiator's private data, once its Request is in.
    private_data: Vec<u8>,
}

impl Accepting {
    /// The startup state machine that received the Request.
    fn responder(&mut self) -> Result<&mut Responder, Error> {
        match &mut self.setup.startup.side {
            Side::Responder(responder) => Ok(responder),
            Side::Initiator(_) => Err(Error::WrongState("not a responder")),
        }
    }
}

struct ControlCore {
    table: Arc<StagTable>,
    commands: Receiver<ControlCmd>,
    me: ControlLine,
    /// Rung with every command (see [`ControlLine`]).
    bell: Arc<Bell>,
    /// Where established connections go, and the bell that wakes the
    /// dataplane thread to take them.
    dataplane: (Sender<Adopt>, Arc<Bell>),
    listeners: HashMap<u64, (Registered<TcpListener>, Sender<IncomingRequest>)>,
    connecting: Vec<Connecting>,
    holding: Vec<Holding>,
    accepting: HashMap<u64, Accepting>,
    waiting_decision: HashMap<u64, Accepting>,
    next_id: u64,
    epoch: Instant,
    startup_timeout: Micros,
    /// What the thread sleeps on, rebuilt before each sleep.
    sleep_on: Vec<libc::pollfd>,
}

/// Starts the control thread.
pub(crate) fn spawn_control(
    table: Arc<StagTable>,
    commands: Receiver<ControlCmd>,
    me: ControlLine,
    bell: Arc<Bell>,
    dataplane: (Sender<Adopt>, Arc<Bell>),
    startup_timeout: Duration,
) -> std::io::Result<JoinHandle<()>> {
    let core = ControlCore {
        table,
        commands,
        me,
        bell,
        dataplane,
        listeners: HashMap::new(),
        connecting: Vec::new(),
        holding: Vec::new(),
        accepting: HashMap::new(),
        waiting_decision: HashMap::new(),
        next_id: 1,
        epoch: Instant::now(),
        startup_timeout: startup_timeout.as_micros() as Micros,
        sleep_on: Vec::new(),
    };
    std::thread::Builder::new()
        .name("uwarp-control".into())
        .spawn(move || core.run())
}

impl ControlCore {
    fn run(mut self) {
        loop {
            // Silenced before the commands are taken: a command sent after
            // this look rings the next sleep awake.
            self.bell.silence();
            let mut busy = false;
            loop {
                match self.commands.try_recv() {
                    Ok(ControlCmd::Shutdown) | Err(TryRecvError::Disconnected) => return,
                    Ok(cmd) => {
                        busy = true;
                        self.handle(cmd);
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            busy |= self.accept_new();
            busy |= self.poll_connecting();
            busy |= self.release_held();
            busy |= self.poll_accepting();
            if !busy {
                self.sleep();
            }
        }
    }

    /// Sleeps until a command rings the bell, a listener has a new
    /// connection, a handshake's socket has octets (or closed), or the
    /// next timer is due: the first held FPDU's release, or
    /// [`TIMER_TICK`] while a handshake is under way. An idle device
    /// takes no CPU.
    fn sleep(&mut self) {
        let listeners = self
            .listeners
            .values()
            .map(|(listener, _)| listener.as_raw_fd());
        let handshakes = (self.accepting.values().map(|accepting| &accepting.setup))
            .chain(self.connecting.iter().map(|connecting| &connecting.setup))
            .map(|setup| setup.stream.as_raw_fd());
        let fds = std::iter::once(self.bell.as_fd().as_raw_fd())
            .chain(listeners)
            .chain(handshakes);
        self.sleep_on.clear();
        self.sleep_on.extend(fds.map(|fd: RawFd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        let now = self.now();
        let release = self
            .holding
            .iter()
            .map(|held| held.until.saturating_sub(now));
        let tick = (!self.accepting.is_empty() || !self.connecting.is_empty())
            .then_some(TIMER_TICK.as_micros() as Micros);
        let timeout = release.chain(tick).min().map(|micros| libc::timespec {
            tv_sec: (micros / 1_000_000) as libc::time_t,
            tv_nsec: (micros % 1_000_000 * 1000) as libc::c_long,
        });
        let timeout = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: `sleep_on` holds as many pollfds as the count says;
        // `timeout` is null (no limit) or a timespec that outlives the
        // call; no signal mask is passed.
        unsafe {
            libc::ppoll(
                self.sleep_on.as_mut_ptr(),
                self.sleep_on.len() as libc::nfds_t,
                timeout,
                std::ptr::null(),
            )
        };
    }

    fn now(&self) -> Micros {
        self.epoch.elapsed().as_micros() as Micros
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn handle(&mut self, cmd: ControlCmd) {
        match cmd {
            ControlCmd::Listen {
                addr,
                options,
                reply,
            } => {
                let result = self.listen(addr, options);
                let _ = reply.send(result);
            }
            ControlCmd::StopListening { id, done } => {
                self.listeners.remove(&id);
                let _ = done.send(());
            }
            ControlCmd::Connect(connect) => self.connect(connect),
            ControlCmd::Accept {
                id,
                qp,
                params,
                reply,
            } => {
                let result = self.accept(id, qp, &params);
                let _ = reply.send(result);
            }
            ControlCmd::Reject {
                id,
                private_data,
                reply,
            } => {
                let result = self.reject(id, &private_data);
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            ControlCmd::Shutdown => {}
        }
    }

    fn listen(&mut self, addr: SocketAddr, options: ListenOptions) -> Result<Listening, Error> {
        let listener = Registered::make(|| tcp::listen(&addr, options.af_only))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let id = self.id();
        self.listeners.insert(id, (listener, tx));
        Ok((id, local, rx))
    }

    /// Takes new sockets from every listener; each starts as a responder.
    fn accept_new(&mut self) -> bool {
        let mut fresh = Vec::new();
        for (&listener_id, (listener, _)) in &self.listeners {
            while let Ok(stream) = Registered::make(|| listener.accept().map(|(stream, _)| stream))
            {
                fresh.push((listener_id, stream));
            }
        }
        let busy = !fresh.is_empty();
        for (listener, stream) in fresh {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = stream.set_nodelay(true);
            let responder = Responder::new(self.now(), self.startup_timeout);
            let id = self.id();
            self.accepting.insert(
                id,
                Accepting {
                    setup: Setup::new(stream, Side::Responder(responder)),
                    listener,
                    leftover: Vec::new(),
                    private_data: Vec::new(),
                },
            );
        }
        busy
    }

    fn connect(&mut self, connect: Connect) {
        let started = (|| -> Result<Setup, Error> {
            connect.qp.driver.ensure_in_its_process()?;
            let initiator = connect.initiator(self.now())?;
            let mut stream = tcp::connect(&connect.addr, connect.params.timeout)?;
            stream.set_nodelay(true)?;
            stream.write_all(initiator.request())?;
            stream.set_nonblocking(true)?;
            Ok(Setup::new(stream, Side::Initiator(initiator)))
        })();
        match started {
            Ok(setup) => self.connecting.push(Connecting { setup, connect }),
            Err(err) => {
                let _ = connect.reply.send(Err(err));
            }
        }
    }

    fn poll_connecting(&mut self) -> bool {
        let now = self.now();
        let mut busy = false;
        let mut index = 0;
        while index < self.connecting.len() {
            let conn = &mut self.connecting[index];
            let progress = conn.setup.poll(now);
            let attempt = conn.connect.attempt();
            let Some(decision) = conn.setup.startup.initiator_decision(progress, attempt) else {
                index += 1;
                continue;
            };
            busy = true;
            let conn = self.connecting.swap_remove(index);
            match decision {
                InitiatorDecision::Accepted(accepted) => {
                    let delay = conn.connect.params.first_fpdu_delay.as_micros() as Micros;
                    self.holding.push(Holding {
                        conn,
                        accepted,
                        until: now + delay,
                    });
                }
                InitiatorDecision::Rejected { private_data } => {
                    let _ = conn
                        .connect
                        .reply
                        .send(Err(Error::Rejected { private_data }));
                }
                InitiatorDecision::RetryInRevision1(mpa) => {
                    self.connect(conn.connect.retry_with(mpa));
                }
                InitiatorDecision::Failed { terminate, error } => {
                    if let Some(frame) = terminate {
                        // The responder is in Full Operation already and
                        // reports it (RFC 6581 section 9).
                        let _ = write_blocking(&conn.setup.stream, &frame);
                        let _ = conn.setup.stream.shutdown(std::net::Shutdown::Write);
                    }
                    let _ = conn.connect.reply.send(Err(Error::Startup(error)));
                }
            }
        }
        busy
    }

    /// Hands the accepted active opens whose hold is over to the
    /// dataplane.
    fn release_held(&mut self) -> bool {
        let now = self.now();
        if !self.holding.iter().any(|held| held.until <= now) {
            return false;
        }
        let (due, waiting): (Vec<Holding>, Vec<Holding>) = std::mem::take(&mut self.holding)
            .into_iter()
            .partition(|held| held.until <= now);
        self.holding = waiting;
        for held in due {
            let Accepted {
                negotiated,
                private_data,
                leftover,
            } = held.accepted;
            let result = self.hand_over(
                held.conn.setup.stream,
                &held.conn.connect.qp,
                negotiated,
                Role::Initiator,
                private_data,
                leftover,
            );
            let _ = held.conn.connect.reply.send(result);
        }
        true
    }

    fn poll_accepting(&mut self) -> bool {
        let now = self.now();
        let mut arrived = Vec::new();
        let mut failed = Vec::new();
        for (&id, accepting) in &mut self.accepting {
            match accepting.setup.poll(now) {
                Progress::Pending => {}
                Progress::Requested(request, leftover) => {
                    accepting.leftover = leftover;
                    accepting.private_data = request.private_data.clone();
                    arrived.push((id, request));
                }
                _ => failed.push(id),
            }
        }
        let busy = !arrived.is_empty() || !failed.is_empty();
        for id in failed {
            self.accepting.remove(&id);
        }
        for (id, request) in arrived {
            let Some(accepting) = self.accepting.remove(&id) else {
                continue;
            };
            let Some((_, requests)) = self.listeners.get(&accepting.listener) else {
                continue;
            };
            let Ok(peer_addr) = accepting.setup.stream.peer_addr() else {
                continue;
            };
            let incoming = IncomingRequest {
                request,
                peer_addr,
                id,
                control: self.me.clone(),
                decided: false,
                driver: Driver::default(),
            };
            if requests.send(incoming).is_ok() {
                self.waiting_decision.insert(id, accepting);
            }
        }
        busy
    }

    fn accept(
        &mut self,
        id: u64,
        qp: QueuePair,
        params: &LocalParams,
    ) -> Result<Connection, Error> {
        let mut accepting = self.take_pending(id)?;
        // A queue pair its parent made, in a child of fork: its device is
        // not this one (the request is dropped: its socket closes).
        qp.driver.ensure_in_its_process()?;
        let responder = accepting.responder()?;
        let (reply, negotiated) = responder.accept(params)?;
        let stream = accepting.setup.stream;
        write_blocking(&stream, &reply)?;
        self.hand_over(
            stream,
            &qp,
            negotiated,
            Role::Responder,
            accepting.private_data,
            accepting.leftover,
        )
    }

    /// The request `id` the application is deciding on.
    fn take_pending(&mut self, id: u64) -> Result<Accepting, Error> {
        self.waiting_decision
            .remove(&id)
            .ok_or(Error::WrongState("the request is no longer pending"))
    }

    fn reject(&mut self, id: u64, private_data: &[u8]) -> Result<(), Error> {
        let mut accepting = self.take_pending(id)?;
        let responder = accepting.responder()?;
        let reply = responder.reject(&LocalParams::default(), private_data)?;
        write_blocking(&accepting.setup.stream, &reply)?;
        let _ = accepting.setup.stream.shutdown(std::net::Shutdown::Write);
        Ok(())
    }

    /// Gives an established connection to the dataplane.
    fn hand_over(
        &self,
        stream: Registered<TcpStream>,
        qp: &QueuePair,
        negotiated: Negotiated,
        role: Role,
        private_data: Vec<u8>,
        leftover: Vec<u8>,
    ) -> Result<Connection, Error> {
        let mulpdu = mulpdu(tcp::emss(&stream), negotiated.markers_tx);
        let connection = Connection {
            negotiated,
            private_data,
            local_addr: stream.local_addr()?,
            peer_addr: stream.peer_addr()?,
            mulpdu,
        };
        let config = EngineConfig {
            negotiated,
            role,
            mulpdu,
            pd: qp.shared.pd,
            table: self.table.clone(),
            srq: qp.shared.engine_srq(),
        };
        let (adopt, adopt_bell) = &self.dataplane;
        adopt
            .send(Adopt {
                stream,
                config,
                qp: qp.clone(),
                leftover,
            })
            .map_err(|_| Error::DeviceClosed)?;
        adopt_bell.ring();
        // The queue pair is in RTS once the dataplane has adopted it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !qp
            .shared
            .connected
            .load(std::sync::atomic::Ordering::Acquire)
        {
            if Instant::now() >= deadline {
                return Err(Error::DeviceClosed);
            }
            std::thread::yield_now();
        }
        Ok(connection)
    }
}

/// Writes a whole startup frame on a non-blocking socket.
fn write_blocking(mut stream: &TcpStream, data: &[u8]) -> Result<(), Error> {
    stream.set_nonblocking(false)?;
    stream.write_all(data)?;
    stream.set_nonblocking(true)?;
    Ok(())
}
