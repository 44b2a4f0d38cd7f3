//! `uwarp-perf tcp` and `tcp-compare`: uwarp's TCP on DPDK on its own,
//! against any TCP peer (the role, the port and host, TCP's settings,
//! impairment and CPU placement) or beside the kernel's TCP.

use clap::ValueEnum;
use uwarp_bench::port::PortHost;
use uwarp_bench::tcp::compare::{self, CompareConfig, Pinning};
use uwarp_bench::tcp::{self, Open, Role, TcpRun};
use uwarp_dataplane::net::Vlan;
use uwarp_dataplane::runtime::{Impairment, Placement};
use uwarp_dataplane::tcp::End;
use uwarp_stack::tcp::CongestionControl;

/// The options of `tcp-compare`.
#[derive(clap::Args)]
pub(super) struct TcpCompareArgs {
    /// Octets each transfer moves.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    /// Where the uwarp processes' core threads run: "split" puts each
    /// process (control and dataplane core) on a CPU of its own, the sink
    /// on CPU 1 and the source on CPU 0; "unpinned" leaves all four on
    /// CPU 0, where the EAL puts the main thread (about half as fast).
    #[arg(long, value_enum, default_value_t = PinningArg::Split)]
    pinning: PinningArg,
    /// Seconds the uwarp transfer may take.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--pinning` of `tcp-compare`.
#[derive(Clone, Copy, ValueEnum)]
enum PinningArg {
    Split,
    Unpinned,
}

/// The options of `tcp`.
#[derive(clap::Args)]
pub(super) struct TcpArgs {
    /// What each connection does.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// Accept connections on this port.
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    listen: Option<u16>,
    /// Connect to this peer (IPv4:PORT).
    #[arg(long)]
    connect: Option<std::net::SocketAddrV4>,
    /// Octets a source sends.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    /// Connections to serve or open, one after another.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// EAL arguments, e.g. "--vdev net_tap0,iface=uw0" (DPDK runs with
    /// --no-huge -m 256 --no-pci unless these say otherwise).
    #[arg(long, allow_hyphen_values = true)]
    eal: String,
    /// The DPDK port's name (default: the first --vdev's).
    #[arg(long)]
    device: Option<String>,
    /// uwarp's address, ADDRESS/PREFIX.
    #[arg(long)]
    ip: String,
    /// uwarp's MAC address (default: the port's).
    #[arg(long)]
    mac: Option<String>,
    /// The default gateway.
    #[arg(long)]
    gateway: Option<std::net::Ipv4Addr>,
    /// The IEEE 802.1Q VLAN of the port, ID or ID:PCP (e.g. 42 or 42:5): only
    /// frames tagged with ID are taken, and every frame sent is tagged
    /// with ID at priority PCP (0 by default).
    #[arg(long, value_name = "ID[:PCP]", value_parser = Vlan::parse)]
    vlan: Option<Vlan>,
    /// Turn Nagle's algorithm off.
    #[arg(long)]
    no_nagle: bool,
    /// Congestion control.
    #[arg(long, value_enum, default_value_t = CcArg::Newreno)]
    cc: CcArg,
    /// Seconds to wait for each connection to end.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Impair what the port receives, e.g.
    /// "loss=0.01,reorder=0.01,dup=0.001,delay=100us,seed=7" (off by default).
    #[arg(long, default_value = "off")]
    impair_rx: String,
    /// Impair what the port sends (same syntax as --impair-rx).
    #[arg(long, default_value = "off")]
    impair_tx: String,
    /// Pin the control core's thread to CPU CONTROL and each dataplane
    /// core's to its CPU, given as "CONTROL,DATAPLANE[,DATAPLANE...]", one
    /// per --cores (default: unpinned, wherever the OS schedules them).
    #[arg(long, value_name = "CONTROL,DATAPLANE", value_parser = Placement::parse_cpus)]
    cpus: Option<Placement>,
    /// Dataplane cores, each polling a receive queue of the port (the
    /// device must have that many queue pairs, e.g. net_af_packet's
    /// qpairs=N).
    #[arg(long, default_value_t = 1)]
    cores: u16,
    /// Milliseconds to stay up after the last connection ended, so the
    /// final ACK of our close reaches the peer before the port goes down
    /// (a peer left in LAST-ACK would retransmit its FIN for minutes).
    #[arg(long, default_value_t = 200)]
    linger_ms: u64,
    /// Once the cores stopped, print "uwarp-perf: cores stopped" and keep
    /// the port up until standard input closes (for a runner of both
    /// ends of a net_memif link: docs/dpdk.md, "Exit and teardown").
    #[arg(long)]
    hold_port: bool,
    /// Once the cores stopped, wait up to this many milliseconds for the
    /// peer to close the link before stopping the port (0: not).
    #[arg(long, default_value_t = 0)]
    await_peer_close_ms: u64,
    /// One JSON object per connection instead of text.
    #[arg(long)]
    json: bool,
}

/// `--cc`: the congestion control.
#[derive(Clone, Copy, ValueEnum)]
enum CcArg {
    Newreno,
    Cubic,
}

/// `--role`: what each connection does.
#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    Sink,
    Source,
    Echo,
}

/// `tcp`: the transfers, one report per connection; fails if one did
/// not close cleanly.
pub(super) fn tcp(args: &TcpArgs) -> Result<(), String> {
    let run = TcpRun {
        role: match args.role {
            RoleArg::Sink => Role::Sink,
            RoleArg::Source => Role::Source,
            RoleArg::Echo => Role::Echo,
        },
        open: match (args.listen, args.connect) {
            (Some(port), _) => Open::Listen(port),
            (None, Some(peer)) => Open::Connect(peer),
            (None, None) => return Err("give --listen PORT or --connect IP:PORT".into()),
        },
        bytes: args.bytes,
        connections: args.connections,
        host: PortHost {
            cores: args.cores,
            placement: args.cpus.clone().unwrap_or(Placement::Unpinned),
            vlan: args.vlan,
            ..PortHost::parse(
                &args.eal,
                args.device.as_deref(),
                &args.ip,
                args.mac.as_deref(),
                args.gateway,
            )?
        },
        nagle: !args.no_nagle,
        congestion: match args.cc {
            CcArg::Newreno => CongestionControl::NewReno,
            CcArg::Cubic => CongestionControl::Cubic,
        },
        timeout: std::time::Duration::from_secs(args.timeout),
        impairment: Impairment {
            rx: args
                .impair_rx
                .parse()
                .map_err(|e| format!("--impair-rx: {e}"))?,
            tx: args
                .impair_tx
                .parse()
                .map_err(|e| format!("--impair-tx: {e}"))?,
        },
        linger: std::time::Duration::from_millis(args.linger_ms),
        teardown: tcp::Teardown {
            hold_until_stdin_closes: args.hold_port,
            await_peer_close: std::time::Duration::from_millis(args.await_peer_close_ms),
        },
    };
    let outcome = tcp::run(&run)?;
    // Host-wide: TCP frames whose checksums the device filled (0 on
    // devices without the offload).
    let offloaded: u64 = outcome
        .host
        .transmit
        .iter()
        .map(|t| t.checksums_offloaded)
        .sum();
    for report in &outcome.reports {
        if args.json {
            let mut json = report.to_json();
            json["host_checksums_offloaded"] = offloaded.into();
            println!("{json}");
        } else {
            print!("{}", report.to_text());
        }
    }
    match outcome.reports.iter().find(|r| r.end != End::Closed) {
        Some(report) => Err(format!(
            "a connection did not close cleanly: {}",
            report.end
        )),
        None => Ok(()),
    }
}

/// `tcp-compare`: uwarp's transfer beside the kernel's, printed.
pub(super) fn tcp_compare(args: &TcpCompareArgs) -> Result<(), String> {
    let report = compare::run(&CompareConfig {
        bytes: args.bytes,
        pinning: match args.pinning {
            PinningArg::Split => Pinning::Split,
            PinningArg::Unpinned => Pinning::Unpinned,
        },
        timeout: std::time::Duration::from_secs(args.timeout),
    })?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}
