//! A whole run on one side: the comm connection, the [`script`]'s steps,
//! the close, and the check of what crossed.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::comm::{close_qp, Comm};
use super::data::Data;
use super::measure::{client_report, server_report};
use super::params::{local_cache_line, local_cycle_buffer, rx_depth, tx_depth, Layout};
use super::script::{script, Announced, Heard, Message, Step};
use super::wire::{Dest, IbMtu, VERSION};
use super::{BwReport, Options, PerftestError, Role, Test};
use uwarp::Device;
use uwarp::Error;
use uwarp::QpCounters;
use uwarp::{ConnectParams, Connection, Listener};

/// How long the client keeps retrying the data connection while the
/// server's port refuses it (perftest's server listens again only after
/// the first zero handshake) is the options' timeout; between tries it
/// waits this long, as perftest's `rdma_cm_client_connection` does.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long counters may take to show the last octets after the close.
const SETTLE: Duration = Duration::from_secs(1);

/// The MTU this side announces: the largest InfiniBand MTU in a
/// 1500-octet Ethernet frame, what siw reports for such a link.
const MTU: IbMtu = IbMtu::Mtu1024;

/// What this side counted of what crossed, checked against the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// What was counted.
    pub what: &'static str,
    /// How many.
    pub count: u64,
}

/// A finished run on one side.
#[derive(Debug, Clone)]
pub struct Report {
    /// The test.
    pub test: Test,
    /// This side.
    pub role: Role,
    /// The numbers this side prints: its own measurement (the client, and
    /// the send test's server) or the client's report (the write and
    /// read tests' server).
    pub printed: BwReport,
    /// Whose numbers [`printed`](Self::printed) are.
    pub measured_by: Role,
    /// The send queue depth the client used.
    pub tx_depth: u64,
    /// The send test's receive queue depth (0 in the other tests).
    pub rx_depth: u64,
    /// This side's destination.
    pub local: Dest,
    /// The peer's.
    pub remote: Dest,
    /// The peer's version text.
    pub peer_version: String,
    /// The comm connection.
    pub comm: Connection,
    /// The data connection.
    pub data: Connection,
    /// The data queue pair's counters after the close.
    pub counters: QpCounters,
    /// What this side counted and checked.
    pub verified: Verified,
}

/// Runs the client: connects to the server at `addr` and runs
/// [`Options::test`].
pub fn run_client(
    device: &Device,
    addr: SocketAddr,
    options: &Options,
) -> Result<Report, PerftestError> {
    options.check()?;
    let comm = Comm::new(device, Role::Client, options.timeout)?;
    let params = connect_params(options, options.comm_params());
    let connection = device.connect(addr, comm.qp(), params)?;
    Session::new(device, options, comm, connection, Peer::Server(addr)).run()
}

/// Runs the server: waits for a client on `listener` (up to
/// [`Options::wait`]), accepts its comm connection and then its data
/// connection, and answers its run.
pub fn serve(
    device: &Device,
    listener: &Listener,
    options: &Options,
) -> Result<Report, PerftestError> {
    options.check()?;
    let comm = Comm::new(device, Role::Server, options.timeout)?;
    let request = match options.wait {
        Some(wait) => listener.get_request(wait)?,
        None => loop {
            match listener.get_request(Duration::from_secs(1)) {
                Err(Error::Timeout) => continue,
                other => break other?,
            }
        },
    };
    let connection = request.accept(comm.qp(), options.comm_params())?;
    Session::new(device, options, comm, connection, Peer::Client(listener)).run()
}

/// The connection parameters of the client's connections.
fn connect_params(options: &Options, mpa: uwarp_stack::mpa::LocalParams) -> ConnectParams {
    ConnectParams {
        mpa,
        timeout: options.timeout,
        revision_1_fallback: false,
        first_fpdu_delay: options.first_fpdu_delay,
    }
}

/// Where the data connection comes from.
enum Peer<'a> {
    /// The server at this address; connect to it.
    Server(SocketAddr),
    /// A client; accept its next request on this listener.
    Client(&'a Listener),
}

/// One side's run in progress.
struct Session<'a> {
    device: &'a Device,
    options: &'a Options,
    role: Role,
    peer: Peer<'a>,
    comm: Comm,
    comm_connection: Connection,
    data: Option<(Data, Connection)>,
    ours: Announced,
    heard: Heard,
    tx_depth: u64,
    rx_depth: u64,
}

impl<'a> Session<'a> {
    fn new(
        device: &'a Device,
        options: &'a Options,
        comm: Comm,
        comm_connection: Connection,
        peer: Peer<'a>,
    ) -> Self {
        let role = match peer {
            Peer::Server(_) => Role::Client,
            Peer::Client(_) => Role::Server,
        };
        Self {
            device,
            options,
            role,
            peer,
            comm,
            comm_connection,
            data: None,
            ours: Announced {
                version: VERSION.to_owned(),
                cycle_buffer: local_cycle_buffer(),
                cache_line: local_cache_line(),
                mtu: MTU,
                dest: Dest::default(),
                // What a server sends in the report exchange: its own
                // size and count, no rates (perftest's server sends
                // whatever its stack held there).
                report: BwReport {
                    size: u64::from(options.size),
                    iters: options.iters,
                    ..BwReport::default()
                },
            },
            heard: Heard::default(),
            tx_depth: tx_depth(options.tx_depth, options.iters),
            rx_depth: match options.test {
                Test::Send => rx_depth(options.iters),
                Test::Write | Test::Read => 0,
            },
        }
    }

    /// Walks the script, closes both connections (resets them after a
    /// failure), and checks what crossed.
    fn run(mut self) -> Result<Report, PerftestError> {
        let walked = script(self.options.test)
            .into_iter()
            .try_for_each(|step| self.step(step));
        let data = self.data.take();
        match walked {
            Ok(()) => {
                if let Some((data, _)) = &data {
                    close_qp(data.qp());
                }
                self.comm.close();
            }
            Err(err) => {
                if let Some((data, _)) = &data {
                    data.qp().abort();
                }
                self.comm.qp().abort();
                return Err(err);
            }
        }
        let Some((data, connection)) = data else {
            return Err(PerftestError::Disconnected {
                waiting_for: "the data connection",
            });
        };
        self.report(&data, connection)
    }

    fn step(&mut self, step: Step) -> Result<(), PerftestError> {
        match step {
            Step::Exchange(message) => self.exchange(message),
            Step::ConnectData => self.connect_data(),
            Step::PostReceives if self.role == Role::Server => {
                Ok(self.data()?.post_receives(self.rx_depth)?)
            }
            Step::PostReceives => Ok(()),
            Step::Run => self.measure(),
        }
    }

    fn exchange(&mut self, message: Message) -> Result<(), PerftestError> {
        let theirs = self.comm.exchange(message, &message.encode(&self.ours))?;
        self.heard.absorb(message, &theirs);
        match &self.heard.version {
            Some(version) if message == Message::Version && !version.compatible() => {
                Err(PerftestError::IncompatibleVersion {
                    peer: version.text.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    fn data(&self) -> Result<&Data, PerftestError> {
        self.data
            .as_ref()
            .map(|(data, _)| data)
            .ok_or(PerftestError::Disconnected {
                waiting_for: "the data connection",
            })
    }

    /// The peer's destination (all zeros before it sent one).
    fn remote(&self) -> Dest {
        self.heard.dest.unwrap_or_default()
    }

    /// Sets up the data queue pair and memory, connects or accepts it,
    /// and fills in this side's destination.
    fn connect_data(&mut self) -> Result<(), PerftestError> {
        let options = self.options;
        // Both sides take the larger page and cache line (check_sys_data).
        let layout = Layout {
            size: options.size,
            cycle_buffer: self
                .ours
                .cycle_buffer
                .max(self.heard.cycle_buffer.unwrap_or(0)),
            cache_line: self.ours.cache_line.max(self.heard.cache_line.unwrap_or(0)),
        };
        let depth = self.tx_depth.max(self.rx_depth);
        let mut data = Data::new(
            self.device,
            options.test,
            layout,
            options.iters,
            depth,
            options.timeout,
        )?;
        let connection = match self.peer {
            Peer::Server(addr) => self.connect(&mut data, addr)?,
            Peer::Client(listener) => {
                let request = listener.get_request(options.timeout)?;
                request.accept(data.qp(), options.data_params())?
            }
        };
        let (rkey, vaddr) = data.target();
        self.ours.dest = Dest {
            out_reads: options.announced_out_reads(),
            qpn: next_qpn(),
            psn: random_psn(),
            rkey,
            vaddr,
            gid: gid(connection.local_addr.ip()),
            ..Dest::default()
        };
        self.data = Some((data, connection));
        Ok(())
    }

    /// Connects the data queue pair to `addr`, retrying while the port
    /// refuses (a fresh queue pair for each try).
    fn connect(&self, data: &mut Data, addr: SocketAddr) -> Result<Connection, PerftestError> {
        let deadline = Instant::now() + self.options.timeout;
        loop {
            let params = connect_params(self.options, self.options.data_params());
            match self.device.connect(addr, data.qp(), params) {
                Err(Error::Io(err)) if refused(&err) && Instant::now() < deadline => {
                    std::thread::sleep(RETRY_PAUSE);
                    data.renew_qp(self.device);
                }
                other => return Ok(other?),
            }
        }
    }

    /// The measured run: the client's loop, or the send test's server's.
    fn measure(&mut self) -> Result<(), PerftestError> {
        let remote = self.remote();
        let size = self.options.size;
        let data = self.data()?;
        match (self.role, self.options.test) {
            (Role::Client, _) => {
                let timeline = data.run_client(&remote, self.tx_depth, self.rx_depth)?;
                self.ours.report = client_report(size, &timeline);
            }
            (Role::Server, Test::Send) => {
                let timeline = data.run_server(&remote, self.rx_depth)?;
                self.ours.report = server_report(size, &timeline);
            }
            (Role::Server, Test::Write | Test::Read) => {}
        }
        Ok(())
    }

    /// Checks what crossed and reports.
    fn report(self, data: &Data, connection: Connection) -> Result<Report, PerftestError> {
        let qp = data.qp();
        let test = self.options.test;
        let ours = self.ours.report;
        let theirs = self.heard.report;
        let (what, expected, field): (_, _, fn(&QpCounters) -> u64) = match (self.role, test) {
            (Role::Client, Test::Write) => ("Writes completed", ours.iters, |_| 0),
            (Role::Client, Test::Send) => ("Sends completed", ours.iters, |_| 0),
            (Role::Client, Test::Read) => {
                ("octets placed by the Reads", ours.size * ours.iters, |c| {
                    c.bytes_placed
                })
            }
            (Role::Server, Test::Write) => (
                "octets placed by the client's Writes",
                theirs.size * theirs.iters,
                |c| c.bytes_placed,
            ),
            (Role::Server, Test::Read) => {
                ("Read Requests answered", theirs.iters, |c| c.fpdus_received)
            }
            (Role::Server, Test::Send) => (
                "octets placed by the client's Sends",
                ours.size * ours.iters,
                |c| c.bytes_placed,
            ),
        };
        // The loops counted completions themselves; the counters may
        // take a moment to show the last octets.
        let count = if matches!((self.role, test), (Role::Client, Test::Write | Test::Send)) {
            expected
        } else {
            settled(qp, expected, field)
        };
        if count != expected {
            return Err(PerftestError::Mismatch {
                what,
                expected,
                counted: count,
            });
        }
        let printed = match (self.role, test) {
            (Role::Server, Test::Write | Test::Read) => theirs,
            _ => ours,
        };
        Ok(Report {
            test,
            role: self.role,
            printed,
            measured_by: match test {
                Test::Send => self.role,
                Test::Write | Test::Read => Role::Client,
            },
            tx_depth: self.tx_depth,
            rx_depth: self.rx_depth,
            local: self.ours.dest,
            remote: self.remote(),
            peer_version: self
                .heard
                .version
                .map(|version| version.text)
                .unwrap_or_default(),
            comm: self.comm_connection,
            data: connection,
            counters: qp.counters(),
            verified: Verified { what, count },
        })
    }
}

/// The counter `field` of `qp` once it reached `expected`, or after
/// [`SETTLE`].
fn settled(qp: &uwarp::QueuePair, expected: u64, field: fn(&QpCounters) -> u64) -> u64 {
    let deadline = Instant::now() + SETTLE;
    loop {
        let count = field(&qp.counters());
        if count == expected || Instant::now() >= deadline {
            return count;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether a failed connect is worth another try: the port refused (or
/// the connection went away before the MPA Reply).
fn refused(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}

/// uwarp has no queue pair numbers; perftest only prints this one.
fn next_qpn() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF
}

/// A random 24-bit initial sequence number (`lrand48() & 0xffffff`;
/// only printed on iWARP).
fn random_psn() -> u32 {
    let mut bytes = [0u8; 4];
    // Without randomness the PSN is 0, which nothing relies on.
    let _ = getrandom::fill(&mut bytes);
    u32::from_le_bytes(bytes) & 0x00FF_FFFF
}

/// The GID of this side's address: IPv4-mapped, or the IPv6 address.
fn gid(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}
