//! `uwarp-perf`: uwarp's command-line tool.
//!
//! `uwarp-perf decode FILE...` decodes the iWARP traffic in pcap or pcapng
//! captures: one line (or one JSON object) per MPA startup frame and FPDU.
//! `uwarp-perf loopback` measures RDMA Write, Read or Send bandwidth, RDMA
//! Write ping-pong latency and connection setup with both ends in one
//! process, on a virtual DPDK link (or the kernel-socket transport);
//! `uwarp-perf compare` runs the same workload over both transports and
//! prints their ratios; `uwarp-perf calibrate` measures this core's memcpy
//! and CRC32c rates. `uwarp-perf pollloop` measures the bare DPDK
//! poll loop in packets per second beside dpdk-testpmd. `uwarp-perf tcp`
//! runs uwarp's TCP on DPDK against any TCP peer; `uwarp-perf tcp-compare`
//! measures a bulk transfer between two uwarp processes over net_memif
//! beside the kernel's TCP over loopback.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use uwarp_bench::capture::read_capture;
use uwarp_bench::decode::{decode_streams, CrcMode, DecodeOptions};
use uwarp_bench::perf::{self, Op, Transport, Workload};
use uwarp_bench::pollloop::{self, Link, PollLoopConfig};
use uwarp_bench::port;
use uwarp_bench::tcp::compare::{self, CompareConfig, Pinning};
use uwarp_bench::tcp::{self, Open, Role, TcpRun};
use uwarp_control::dpdk::End;
use uwarp_dataplane::runtime::{Impairment, Placement};
use uwarp_stack::tcp::CongestionControl;
use uwarp_stack::wire::terminate::LayoutHint;

/// uwarp's perf and diagnostics tool.
#[derive(Parser)]
#[command(name = "uwarp-perf", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode the MPA/DDP/RDMAP traffic in pcap or pcapng files.
    Decode(DecodeArgs),
    /// Measure bandwidth, latency and connection setup with both ends in
    /// this process, on a virtual DPDK link (no NIC, no hugepages) or the
    /// kernel-socket transport.
    Loopback(LoopbackArgs),
    /// Run the loopback workload over the dpdk and the socket transports
    /// back to back and print their ratios.
    Compare(LoopbackArgs),
    /// Measure this core's memcpy and CRC32c rates.
    Calibrate(CalibrateArgs),
    /// Measure the bare DPDK poll loop (receive, classify, transmit) in
    /// packets per second, beside dpdk-testpmd's io forwarding.
    Pollloop(PollLoopArgs),
    /// Move data over uwarp's TCP on DPDK against any TCP peer (like
    /// iperf): sink, source or echo, listening or connecting.
    Tcp(TcpArgs),
    /// Measure a bulk transfer between two uwarp processes over net_memif
    /// beside the kernel's TCP over loopback: Gbit/s, packets per second
    /// and their ratio.
    TcpCompare(TcpCompareArgs),
}

#[derive(clap::Args)]
struct TcpCompareArgs {
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

#[derive(Clone, Copy, ValueEnum)]
enum PinningArg {
    Split,
    Unpinned,
}

#[derive(clap::Args)]
struct TcpArgs {
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
    /// Pin the control core's thread to CPU CONTROL and the dataplane
    /// core's to CPU DATAPLANE, given as "CONTROL,DATAPLANE" (default:
    /// unpinned, wherever the OS schedules them).
    #[arg(long, value_name = "CONTROL,DATAPLANE", value_parser = parse_cpus)]
    cpus: Option<Placement>,
    /// Milliseconds to stay up after the last connection ended, so the
    /// final ACK of our close reaches the peer before the port goes down
    /// (a peer left in LAST-ACK would retransmit its FIN for minutes).
    #[arg(long, default_value_t = 200)]
    linger_ms: u64,
    /// One JSON object per connection instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum CcArg {
    Newreno,
    Cubic,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    Sink,
    Source,
    Echo,
}

#[derive(clap::Args)]
struct PollLoopArgs {
    /// The link: a net_ring loopback, or net_memif to another process.
    #[arg(long, value_enum, default_value_t = LinkArg::Ring)]
    link: LinkArg,
    /// Seconds measured for each side (after a second of warm-up).
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Frames in flight.
    #[arg(long, default_value_t = 32)]
    frames: usize,
    /// The CPU uwarp's loop runs on.
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Internal: run as the far side of `--link memif` on this socket.
    #[arg(long, hide = true)]
    far_side: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LinkArg {
    Ring,
    Memif,
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct LoopbackArgs {
    /// The transport (`loopback` only; `compare` runs both).
    #[arg(long, value_enum, default_value_t = TransportArg::Dpdk)]
    transport: TransportArg,
    /// The bandwidth operation.
    #[arg(long, value_enum, default_value_t = OpArg::Write)]
    op: OpArg,
    /// Message size in octets.
    #[arg(long, short = 's', default_value_t = 65_536)]
    size: usize,
    /// Messages in the bandwidth run.
    #[arg(long, short = 'n', default_value_t = 20_000)]
    iters: usize,
    /// Round trips in the latency run.
    #[arg(long, default_value_t = 10_000)]
    latency_iters: usize,
    /// Message size of the latency run (an RDMA Write ping-pong).
    #[arg(long, default_value_t = 8)]
    latency_size: usize,
    /// Connections in the setup-rate run (0 skips it).
    #[arg(long, default_value_t = 200)]
    setups: usize,
    /// Work requests kept outstanding.
    #[arg(long, short = 't', default_value_t = 128)]
    tx_depth: usize,
    /// Ask for MPA CRCs.
    #[arg(long)]
    crc: bool,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Dpdk,
    Socket,
}

#[derive(Clone, Copy, ValueEnum)]
enum OpArg {
    Write,
    Read,
    Send,
}

#[derive(clap::Args)]
struct DecodeArgs {
    /// Capture files (pcap or pcapng).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
    /// CRC handling: as negotiated (auto), always checked, or never.
    #[arg(long, value_enum, default_value_t = CrcArg::Auto)]
    crc: CrcArg,
    /// Terminate control-word layout: auto-detect, RFC 5040, or Linux siw's.
    #[arg(long, value_enum, default_value_t = LayoutArg::Auto)]
    terminate_layout: LayoutArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum CrcArg {
    Auto,
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum LayoutArg {
    Auto,
    Rfc,
    Siw,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(args) => decode(&args),
        Command::Loopback(args) => {
            let transport = match args.transport {
                TransportArg::Dpdk => Transport::Dpdk,
                TransportArg::Socket => Transport::Socket,
            };
            loopback(&args, &[transport])
        }
        Command::Compare(args) => loopback(&args, &[Transport::Dpdk, Transport::Socket]),
        Command::Calibrate(args) => {
            calibrate(&args);
            Ok(())
        }
        Command::Pollloop(args) => pollloop(&args),
        Command::Tcp(args) => tcp(&args),
        Command::TcpCompare(args) => tcp_compare(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("uwarp-perf: {message}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(args: &LoopbackArgs, transports: &[Transport]) -> Result<(), String> {
    if args.size > u32::MAX as usize
        || args.latency_size > u32::MAX as usize
        || args.iters == 0
        || args.tx_depth == 0
        || args.latency_iters == 0
    {
        return Err(
            "sizes must fit 32 bits; iters, latency-iters and tx-depth must be positive".into(),
        );
    }
    let workload = Workload {
        op: match args.op {
            OpArg::Write => Op::Write,
            OpArg::Read => Op::Read,
            OpArg::Send => Op::Send,
        },
        size: args.size,
        iters: args.iters,
        latency_size: args.latency_size.max(1),
        latency_iters: args.latency_iters,
        tx_depth: args.tx_depth,
        setups: args.setups,
        crc: args.crc,
    };
    let report = perf::measure(transports, &workload)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

fn calibrate(args: &CalibrateArgs) {
    let c = perf::calibrate(std::time::Duration::from_millis(500));
    if args.json {
        let json = serde_json::json!({
            "calibrate": {
                "memcpy_gbps": c.memcpy_gbps,
                "crc32c_gbps": c.crc32c_gbps,
                "copy_crc_gbps": c.copy_crc_gbps(),
            }
        });
        println!("{json}");
    } else {
        println!(
            "memcpy {:.1} Gbit/s, CRC32c {:.1} Gbit/s, copy+CRC {:.1} Gbit/s (one core, 64 KiB blocks through 64 MiB)",
            c.memcpy_gbps,
            c.crc32c_gbps,
            c.copy_crc_gbps()
        );
    }
}

fn tcp(args: &TcpArgs) -> Result<(), String> {
    let (ip, prefix_len) = port::parse_cidr(&args.ip)?;
    let mac = args.mac.as_deref().map(port::parse_mac).transpose()?;
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
        eal: args.eal.split_whitespace().map(str::to_owned).collect(),
        device: args.device.clone(),
        ip,
        prefix_len,
        mac,
        gateway: args.gateway,
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
        placement: args.cpus.clone().unwrap_or(Placement::Unpinned),
        linger: std::time::Duration::from_millis(args.linger_ms),
    };
    let outcome = tcp::run(&run)?;
    for report in &outcome.reports {
        if args.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.to_text());
        }
    }
    match outcome.reports.iter().find(|r| r.end != End::Closed) {
        Some(report) => Err(format!(
            "a connection did not close cleanly: it ended {}",
            report.to_json()["end"]
        )),
        None => Ok(()),
    }
}

fn tcp_compare(args: &TcpCompareArgs) -> Result<(), String> {
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

/// `--cpus CONTROL,DATAPLANE`: the two cores pinned.
fn parse_cpus(text: &str) -> Result<Placement, String> {
    let (control, dataplane) = text
        .split_once(',')
        .and_then(|(c, d)| Some((c.trim().parse().ok()?, d.trim().parse().ok()?)))
        .ok_or_else(|| {
            format!("expected two CPU numbers, CONTROL,DATAPLANE (e.g. 0,1), not {text:?}")
        })?;
    Ok(Placement::Pinned {
        control,
        dataplanes: vec![dataplane],
    })
}

fn pollloop(args: &PollLoopArgs) -> Result<(), String> {
    if let Some(socket) = &args.far_side {
        return pollloop::run_far_side(socket, args.seconds, args.cpu, args.frames);
    }
    let config = PollLoopConfig {
        link: match args.link {
            LinkArg::Ring => Link::Ring,
            LinkArg::Memif => Link::Memif,
        },
        seconds: args.seconds,
        frames: args.frames,
        cpu: args.cpu,
    };
    let report = pollloop::run(&config)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

fn decode(args: &DecodeArgs) -> Result<(), String> {
    let options = DecodeOptions {
        crc: match args.crc {
            CrcArg::Auto => CrcMode::Auto,
            CrcArg::On => CrcMode::On,
            CrcArg::Off => CrcMode::Off,
        },
        terminate_layout: match args.terminate_layout {
            LayoutArg::Auto => LayoutHint::Auto,
            LayoutArg::Rfc => LayoutHint::Rfc5040,
            LayoutArg::Siw => LayoutHint::Siw,
        },
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for file in &args.files {
        let streams = read_capture(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if !args.json && args.files.len() > 1 {
            writeln!(out, "== {}", file.display()).map_err(|e| e.to_string())?;
        }
        for record in decode_streams(&streams, &options) {
            let line = if args.json {
                let mut json = record.to_json();
                if args.files.len() > 1 {
                    json["file"] = file.display().to_string().into();
                }
                json.to_string()
            } else {
                record.to_text()
            };
            if let Err(err) = writeln!(out, "{line}") {
                // A closed pipe (`| head`) is not an error worth reporting.
                return if err.kind() == io::ErrorKind::BrokenPipe {
                    Ok(())
                } else {
                    Err(err.to_string())
                };
            }
        }
    }
    out.flush().or_else(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Ok(())
        } else {
            Err(e.to_string())
        }
    })
}
