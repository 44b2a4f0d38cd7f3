//! rping over uwarp: librdmacm's `rping` ping-pong, with `rping`'s
//! options, speaking its application protocol (see
//! [`uwarp_interop::rping`]) so that either side can be a real `rping`.
//!
//! ```text
//! rping -s [-vVd] [-P] [-S size] [-a addr] [-p port]
//! rping -c [-vVd] [-S size] [-C count] -a addr [-p port]
//! ```
//!
//! `rping`'s options: `-s` server, `-c` client, `-a` address (the server
//! binds to 0.0.0.0 without it), `-p` port (7174; `-p 0` lets the server
//! pick one, printed with `-d`), `-C` count (0, the default, pings for
//! ever; the server ignores it), `-S` size (26 to 65535, default 64),
//! `-v` print the ping data, `-V` validate it, `-d` debug output, `-P`
//! persistent server (one thread and queue pair per client, for ever).
//! `-q` (self-created QP) is accepted and ignored: uwarp has no separate
//! QP state transitions to drive. `-I` (client source address) is not
//! supported: uwarp's connect does not bind the local address.
//!
//! uwarp's own: `--crc` asks for MPA CRCs, `--markers` asks the peer for
//! MPA Markers (Linux siw does not support them), `--mpa-rev 1|2` the MPA
//! revision, `--p2p write,read,send` the peer-to-peer RTR types the client
//! offers or the server accepts (the server accepts all by default; the
//! client uses the client-server model without the option; peer-to-peer
//! needs `--mpa-rev 2`), `--timeout SECS` gives up on any step that takes
//! longer (rping waits for ever), `--first-fpdu-delay-ms MS` makes the
//! client hold its first FPDU (its first Send, or the peer-to-peer RTR)
//! back that long after the MPA Reply (against Linux siw's server: siw's
//! accept race, see docs/siw-interop.md).
//!
//! `--transport dpdk --vdev VDEV --ip ADDRESS/PREFIX` runs on uwarp's TCP
//! over DPDK instead of the kernel's sockets, on one virtual device (as
//! root), e.g. `--vdev net_af_packet0,iface=uwsiw0 --ip 10.79.0.3/24` on
//! the siw VM's tap.
//!
//! Run `cargo run --example rping -- -s -a 127.0.0.1 -v` in one shell and
//! `cargo run --example rping -- -c -a 127.0.0.1 -C 10 -V -v` in another.

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use smoltcp::wire::Ipv4Address;
use uwarp::{Device, DeviceConfig, Revision, RtrSet};
use uwarp_interop::rping::{self, Options};

/// The command line, `rping`'s letters first.
#[derive(Debug, Parser)]
#[command(
    name = "rping",
    about = "librdmacm's rping over uwarp (iWARP over kernel TCP sockets)"
)]
struct Cli {
    /// Server side.
    #[arg(short = 's', conflicts_with = "client")]
    server: bool,
    /// Client side.
    #[arg(short = 'c', required_unless_present = "server")]
    client: bool,
    /// Address: where the server listens (default 0.0.0.0), where the
    /// client connects (required).
    #[arg(short = 'a')]
    addr: Option<String>,
    /// Port.
    #[arg(short = 'p', default_value_t = rping::DEFAULT_PORT)]
    port: u16,
    /// Ping count (0: for ever).
    #[arg(short = 'C', default_value_t = 0)]
    count: u64,
    /// Ping data size.
    #[arg(short = 'S', default_value_t = rping::DEFAULT_SIZE, value_parser = parse_size)]
    size: usize,
    /// Display ping data to stdout.
    #[arg(short = 'v', action = ArgAction::Count)]
    verbose: u8,
    /// Validate ping data.
    #[arg(short = 'V', action = ArgAction::Count)]
    validate: u8,
    /// Debug printfs.
    #[arg(short = 'd', action = ArgAction::Count)]
    debug: u8,
    /// Persistent server mode allowing multiple connections.
    #[arg(short = 'P')]
    persistent: bool,
    /// Use a self-created, self-modified QP (accepted, no effect in uwarp).
    #[arg(short = 'q')]
    self_create_qp: bool,
    /// Ask for MPA CRCs.
    #[arg(long)]
    crc: bool,
    /// Ask the peer for MPA Markers.
    #[arg(long)]
    markers: bool,
    /// MPA revision.
    #[arg(long = "mpa-rev", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    mpa_rev: u8,
    /// Peer-to-peer RTR types (client: offered; server: accepted).
    #[arg(long, value_enum, value_delimiter = ',')]
    p2p: Vec<RtrKind>,
    /// Give up on any step that takes longer than this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// Client: hold the first FPDU (the first Send, or the peer-to-peer
    /// RTR) back this many milliseconds after the MPA Reply (siw's accept
    /// race).
    #[arg(long = "first-fpdu-delay-ms", default_value_t = 0)]
    first_fpdu_delay_ms: u64,
    /// Testing aid (not in rping): advertise (client) or use (server)
    /// STags with a wrong key, so the first RDMA Read is refused with a
    /// Terminate.
    #[arg(long = "bad-stag")]
    bad_stag: bool,
    /// The transport: the kernel's TCP sockets, or uwarp's TCP over DPDK.
    #[arg(long, value_enum, default_value_t = TransportKind::Socket)]
    transport: TransportKind,
    /// DPDK: the virtual device, as for the EAL's --vdev (e.g.
    /// net_af_packet0,iface=uwsiw0).
    #[arg(long, required_if_eq("transport", "dpdk"))]
    vdev: Option<String>,
    /// DPDK: this host's address, ADDRESS/PREFIX (e.g. 10.79.0.3/24).
    #[arg(long, required_if_eq("transport", "dpdk"), value_parser = parse_cidr)]
    ip: Option<(Ipv4Address, u8)>,
}

/// What carries the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportKind {
    /// The kernel's TCP sockets.
    Socket,
    /// uwarp's TCP over DPDK.
    Dpdk,
}

/// `--ip`: ADDRESS/PREFIX.
fn parse_cidr(text: &str) -> Result<(Ipv4Address, u8), String> {
    text.split_once('/')
        .and_then(|(ip, len)| Some((ip.parse().ok()?, len.parse::<u8>().ok()?)))
        .filter(|&(_, len)| len <= 32)
        .ok_or_else(|| format!("expected ADDRESS/PREFIX, e.g. 10.79.0.3/24, not {text}"))
}

/// The device of `--transport`.
fn open_device(cli: &Cli) -> Result<Device, String> {
    let device = match (cli.transport, &cli.vdev, cli.ip) {
        (TransportKind::Dpdk, Some(vdev), Some((ip, prefix_len))) => {
            rping::open_dpdk_vdev(vdev, ip, prefix_len)
        }
        (TransportKind::Dpdk, _, _) => return Err("--transport dpdk needs --vdev and --ip".into()),
        (TransportKind::Socket, _, _) => Device::open(DeviceConfig::default()),
    };
    device.map_err(|err| format!("cannot open the device: {err}"))
}

/// An RTR type on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RtrKind {
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send.
    Send,
}

/// `-S`: rping's range check, with its message.
fn parse_size(text: &str) -> Result<usize, String> {
    let size: usize = text.parse().map_err(|err| format!("{err}"))?;
    if !(rping::MIN_SIZE..=rping::MAX_SIZE).contains(&size) {
        return Err(format!(
            "Invalid size {size} (valid range is {} to {})",
            rping::MIN_SIZE,
            rping::MAX_SIZE + 1
        ));
    }
    Ok(size)
}

fn options(cli: &Cli) -> Result<Options, String> {
    let p2p = (!cli.p2p.is_empty()).then(|| {
        let mut set = RtrSet::default();
        for kind in &cli.p2p {
            match kind {
                RtrKind::Write => set.write = true,
                RtrKind::Read => set.read = true,
                RtrKind::Send => set.send = true,
            }
        }
        set
    });
    if p2p.is_some() && cli.mpa_rev == 1 && !cli.server {
        return Err("--p2p needs MPA revision 2 (RFC 6581)".to_string());
    }
    let timeout = cli
        .timeout
        .map(|secs| Duration::try_from_secs_f64(secs).map_err(|err| format!("--timeout: {err}")))
        .transpose()?;
    Ok(Options {
        size: cli.size,
        count: cli.count,
        verbose: cli.verbose > 0,
        validate: cli.validate > 0,
        debug: cli.debug > 0,
        revision: if cli.mpa_rev == 1 {
            Revision::Rfc5044
        } else {
            Revision::Enhanced
        },
        crc: cli.crc,
        markers: cli.markers,
        p2p,
        timeout,
        first_fpdu_delay: Duration::from_millis(cli.first_fpdu_delay_ms),
        bad_stag: cli.bad_stag,
    })
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|err| format!("getaddrinfo failed ({err}) - invalid hostname or IP address"))?
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))
}

fn run(cli: &Cli) -> Result<(), String> {
    let options = options(cli)?;
    let device = open_device(cli)?;
    if cli.server {
        let addr = resolve(cli.addr.as_deref().unwrap_or("0.0.0.0"), cli.port)?;
        let listener = device
            .listen(addr)
            .map_err(|err| format!("rdma_listen: {err}"))?;
        if options.debug {
            println!("listening on {}", listener.local_addr());
        }
        if cli.persistent {
            rping::serve_persistent(&device, &listener, &options, None)
                .map_err(|err| format!("rping server failed: {err}"))?;
        } else {
            let report = rping::serve_one(&device, &listener, &options)
                .map_err(|err| format!("rping server failed: {err}"))?;
            if options.debug {
                println!("server served {} pings", report.pings);
            }
        }
    } else {
        let host = cli
            .addr
            .as_deref()
            .ok_or("the client needs -a ADDR".to_string())?;
        let addr = resolve(host, cli.port)?;
        let report = rping::run_client(&device, addr, &options)
            .map_err(|err| format!("rping client failed: {err}"))?;
        if options.debug {
            println!("client completed {} pings", report.pings);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}
