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
//! beside the kernel's TCP over loopback. `uwarp-perf write-bw`,
//! `write-lat`, `read-bw`, `read-lat`, `send-bw` and `send-lat` are the
//! perftest-style two-host modes: one process serves (`--server`), the
//! other connects (`--connect ADDR:PORT`), each on DPDK or kernel
//! sockets; with `--perftest` the bandwidth modes speak perftest's own
//! protocol instead (`ib_write_bw -R` ...), against perftest on Linux
//! siw or an iWARP NIC. `uwarp-perf conns` sets up thousands of connections in one
//! process and measures what each costs. Without a command, `uwarp-perf`
//! runs `loopback` with its defaults.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use uwarp::{Revision, RtrSet, ZERO_COPY_FROM};
use uwarp_bench::capture::read_capture;
use uwarp_bench::decode::{decode_streams, CrcMode, DecodeOptions};
use uwarp_bench::perf::conns::{self, ConnsRun};
use uwarp_bench::perf::perftest::{self, PerftestRun};
use uwarp_bench::perf::protocol::{self, Stop};
use uwarp_bench::perf::session::{ClientRun, Mpa};
use uwarp_bench::perf::twohost::{self, Carrier, Side, TwoHost};
use uwarp_bench::perf::{self, plot, LinkOptions, Metric, Mode, Op, Transport, Workload};
use uwarp_bench::pollloop::{self, Link, PollLoopConfig};
use uwarp_bench::port::PortHost;
use uwarp_bench::tcp::compare::{self, CompareConfig, Pinning};
use uwarp_bench::tcp::{self, Open, Role, TcpRun};
use uwarp_dataplane::runtime::{Impairment, Placement};
use uwarp_dataplane::tcp::End;
use uwarp_interop::perftest::{Options as PerftestOptions, Test};
use uwarp_stack::tcp::CongestionControl;
use uwarp_stack::wire::terminate::LayoutHint;

/// uwarp's perf and diagnostics tool.
#[derive(Parser)]
#[command(
    name = "uwarp-perf",
    version,
    about,
    after_help = "Without a command, runs `loopback` with its defaults: RDMA Writes, \
                  latency and connection setup between two uwarp devices on a virtual \
                  DPDK link (no NIC, no hugepages)."
)]
struct Cli {
    /// Without one, `loopback` with its defaults (the README's main job:
    /// no NIC, no hugepages).
    #[command(subcommand)]
    command: Option<Command>,
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
    /// RDMA Write bandwidth between a server and a client process (like
    /// ib_write_bw).
    WriteBw(TwoHostArgs),
    /// RDMA Write ping-pong latency, half the round trip (like
    /// ib_write_lat).
    WriteLat(TwoHostArgs),
    /// RDMA Read bandwidth: the client reads the server's memory (like
    /// ib_read_bw).
    ReadBw(TwoHostArgs),
    /// RDMA Read latency, the whole round trip (like ib_read_lat).
    ReadLat(TwoHostArgs),
    /// Send bandwidth into the server's posted receives (like ib_send_bw).
    SendBw(TwoHostArgs),
    /// Send ping-pong latency, half the round trip (like ib_send_lat).
    SendLat(TwoHostArgs),
    /// Set up thousands of connections between two devices in this
    /// process and measure what each costs: setup time, memory, and the
    /// per-packet cost of small messages spread over all of them.
    Conns(ConnsArgs),
}

/// The options of the two-host modes. The server takes the sizes, counts,
/// queue pairs and depth from its client; both must give the same MPA
/// revision.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("side").required(true).args(["server", "connect"])))]
struct TwoHostArgs {
    /// Serve one client run, then exit.
    #[arg(long)]
    server: bool,
    /// Run against the server at ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    connect: Option<std::net::SocketAddr>,
    /// The server's port.
    #[arg(long, short = 'p', default_value_t = 18515)]
    port: u16,
    /// The transport: uwarp's TCP on a DPDK port, or the kernel's sockets.
    #[arg(long, value_enum, default_value_t = TransportArg::Dpdk)]
    transport: TransportArg,
    /// EAL arguments (dpdk), e.g. "--vdev net_tap0,iface=uw0" (then
    /// DPDK runs with --no-huge -m 256 --no-pci unless these say
    /// otherwise) or "-a 0000:00:07.0" (then only these, with hugepages).
    #[arg(long, allow_hyphen_values = true)]
    eal: Option<String>,
    /// The DPDK port's name (default: the first --vdev's or -a's).
    #[arg(long)]
    device: Option<String>,
    /// This host's address: ADDRESS/PREFIX on dpdk; on socket, the
    /// address the server binds (default: any).
    #[arg(long)]
    ip: Option<String>,
    /// This host's MAC address (dpdk; default: the port's).
    #[arg(long)]
    mac: Option<String>,
    /// The default gateway (dpdk).
    #[arg(long)]
    gateway: Option<std::net::Ipv4Addr>,
    /// Dataplane cores (dpdk), each polling a receive queue of the port
    /// (the device must have that many queue pairs, e.g. net_af_packet's
    /// qpairs=N; flows go to the core whose queue their first answer came
    /// in on; default 1).
    #[arg(long)]
    cores: Option<u16>,
    /// Zero-copy transmit (dpdk): send the payload of each FPDU of at
    /// least BYTES octets from registered memory, not from a copy in the
    /// TCP send queue; Sends and Writes then complete when TCP
    /// acknowledges them. 0 turns it off; default 4096 (jumbo frames).
    #[arg(long, value_name = "BYTES")]
    zero_copy_from: Option<usize>,
    /// Message size in octets (default: 65536 for bandwidth, 8 for
    /// latency).
    #[arg(long, short = 's', conflicts_with = "all")]
    size: Option<usize>,
    /// Every size from 2 to 8 MiB by powers of two.
    #[arg(long, short = 'a')]
    all: bool,
    /// Messages (round trips, for latency) at each size (default: 5000
    /// for bandwidth, 1000 for latency).
    #[arg(long, short = 'n', conflicts_with = "duration")]
    iters: Option<u64>,
    /// Seconds at each size, instead of a count.
    #[arg(long, short = 'D', value_name = "SECONDS")]
    duration: Option<f64>,
    /// Queue pairs (connections), messages spread round-robin (bandwidth).
    #[arg(long, short = 'q', default_value_t = 1)]
    qps: usize,
    /// Work requests outstanding on each queue pair (bandwidth).
    #[arg(long, short = 't', default_value_t = 128)]
    tx_depth: usize,
    /// Post Writes and Sends up to this size inline (copied at posting).
    #[arg(long, short = 'I', value_name = "SIZE", default_value_t = 0)]
    inline: usize,
    /// Ask for MPA CRCs.
    #[arg(long)]
    crc: bool,
    /// Ask the peer for MPA Markers.
    #[arg(long)]
    markers: bool,
    /// The MPA revision.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    mpa_rev: u8,
    /// The peer-to-peer RTR the client offers (default: write in
    /// revision 2, none in revision 1, which has no peer-to-peer mode).
    #[arg(long, value_enum)]
    p2p: Option<P2pArg>,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Draw the results against the message size into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Speak perftest's own protocol (`ib_write_bw -R` and the others),
    /// against perftest or another `uwarp-perf --perftest`; bandwidth
    /// modes only. Give both sides the same -s and -n, as with perftest.
    #[arg(long)]
    perftest: bool,
    /// Outstanding RDMA Reads (--perftest read-bw; default 128, siw's
    /// maximum).
    #[arg(long, short = 'o', requires = "perftest")]
    outs: Option<u16>,
    /// Seconds any one step may take before the run fails (--perftest).
    #[arg(long, default_value_t = 30, requires = "perftest")]
    timeout: u64,
    /// The client waits this long after each connection is up before its
    /// first message (--perftest; 200 against Linux siw's server: siw's
    /// accept race).
    #[arg(long, default_value_t = 0, requires = "perftest")]
    first_fpdu_delay_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum P2pArg {
    None,
    Write,
    Read,
    Send,
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
    /// Pin the control core's thread to CPU CONTROL and each dataplane
    /// core's to its CPU, given as "CONTROL,DATAPLANE[,DATAPLANE...]", one
    /// per --cores (default: unpinned, wherever the OS schedules them).
    #[arg(long, value_name = "CONTROL,DATAPLANE", value_parser = parse_cpus)]
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
    /// The DPDK link's IP MTU (576 to 9000; 9000 for jumbo frames). The
    /// kernel's loopback keeps its own (64 KiB), also in `compare`.
    /// Default 1500.
    #[arg(long)]
    mtu: Option<u16>,
    /// Impair what each DPDK end receives, e.g. `reorder=0.01` (`off`, or
    /// `loss`, `reorder`, `dup` probabilities, `delay`, `seed`; default
    /// off).
    #[arg(long)]
    impair_rx: Option<String>,
    /// Dataplane cores of each DPDK end (the net_ring pair gets a queue
    /// per core; it does not spread flows, each arrives on the queue its
    /// sender used). Default 1.
    #[arg(long)]
    cores: Option<u16>,
    /// Send DPDK payloads by reference: each frame's TCP payload an
    /// external-buffer segment into the send queue (or, for payloads that
    /// zero-copy transmit takes, into the sender's registered memory), not
    /// a copy.
    #[arg(long)]
    payloads_by_reference: bool,
    /// Zero-copy transmit: send the payload of each FPDU of at least BYTES
    /// octets from the sender's registered memory, not from a copy in the
    /// TCP send queue; Writes then complete when TCP acknowledges them.
    /// 0 turns it off; default 4096 (only jumbo frames' segments reach it).
    #[arg(long, value_name = "BYTES")]
    zero_copy_from: Option<usize>,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ConnsArgs {
    /// Connection counts, one run each.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 1000, 10_000])]
    count: Vec<usize>,
    /// Messages in the measured phase.
    #[arg(long, short = 'n', default_value_t = 100_000)]
    messages: usize,
    /// Octets per message.
    #[arg(long, short = 's', default_value_t = 64)]
    size: usize,
    /// The operation: RDMA Write, or Send into posted receives.
    #[arg(long, value_enum, default_value_t = ConnsOpArg::Write)]
    op: ConnsOpArg,
    /// Messages on their way at once, over all connections.
    #[arg(long, short = 't', default_value_t = 64)]
    window: usize,
    /// Octets of every connection's TCP send queue and reassembly buffer.
    #[arg(long, default_value_t = 16_384)]
    tcp_buffer: usize,
    /// Seconds to keep polling once every connection is up, before the
    /// data phase (time to attach a profiler: `callgrind_control -i on`,
    /// `perf record -p`).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pause: f64,
    /// Ask for MPA CRCs.
    #[arg(long)]
    crc: bool,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ConnsOpArg {
    Write,
    Send,
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
    let command = Cli::parse().command.unwrap_or_else(|| {
        let default = Cli::parse_from(["uwarp-perf", "loopback"]);
        default.command.expect("loopback is a subcommand")
    });
    let result = match command {
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
        Command::WriteBw(args) => two_host(Op::Write, Metric::Bandwidth, &args),
        Command::WriteLat(args) => two_host(Op::Write, Metric::Latency, &args),
        Command::ReadBw(args) => two_host(Op::Read, Metric::Bandwidth, &args),
        Command::ReadLat(args) => two_host(Op::Read, Metric::Latency, &args),
        Command::SendBw(args) => two_host(Op::Send, Metric::Bandwidth, &args),
        Command::SendLat(args) => two_host(Op::Send, Metric::Latency, &args),
        Command::Conns(args) => conns(&args),
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
    let link_given = args.mtu.is_some()
        || args.impair_rx.is_some()
        || args.cores.is_some()
        || args.payloads_by_reference
        || args.zero_copy_from.is_some();
    if link_given && !transports.contains(&Transport::Dpdk) {
        return Err(perf::DPDK_LINK_OPTIONS.into());
    }
    let defaults = LinkOptions::default();
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
        link: LinkOptions {
            mtu: args.mtu.unwrap_or(defaults.mtu),
            impair_rx: match &args.impair_rx {
                Some(impair) => impair.parse().map_err(|e| format!("--impair-rx: {e}"))?,
                None => defaults.impair_rx,
            },
            cores: args.cores.unwrap_or(defaults.cores),
            payloads_by_reference: args.payloads_by_reference,
            zero_copy_from: zero_copy(args.zero_copy_from),
        },
    };
    let report = perf::measure(transports, &workload)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

fn conns(args: &ConnsArgs) -> Result<(), String> {
    let run = ConnsRun {
        counts: args.count.clone(),
        messages: args.messages,
        size: args.size,
        op: match args.op {
            ConnsOpArg::Write => Op::Write,
            ConnsOpArg::Send => Op::Send,
        },
        window: args.window,
        buffer: args.tcp_buffer,
        crc: args.crc,
        pause: std::time::Duration::try_from_secs_f64(args.pause)
            .map_err(|_| "--pause must be a number of seconds")?,
    };
    let results = conns::run(&run)?;
    if args.json {
        println!("{}", conns::to_json(&run, &results));
    } else {
        print!("{}", conns::to_text(&run, &results));
    }
    Ok(())
}

fn two_host(op: Op, metric: Metric, args: &TwoHostArgs) -> Result<(), String> {
    if args.perftest {
        return perftest_side(op, metric, args);
    }
    let config = two_host_config(Mode { op, metric }, args)?;
    let report = twohost::run(&config)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if let Some(file) = &args.plot {
        std::fs::write(file, plot::chart(&report))
            .map_err(|e| format!("--plot {}: {e}", file.display()))?;
    }
    Ok(())
}

/// The largest message: 4 GiB - 1 octets.
const MAX_MESSAGE: usize = u32::MAX as usize;
/// The deepest send queue a run keeps full (its completion queue has
/// room for all of it on every queue pair).
const MAX_TX_DEPTH: usize = 16_384;

/// What the two-host options ask for, checked.
fn two_host_config(mode: Mode, args: &TwoHostArgs) -> Result<TwoHost, String> {
    let latency = mode.metric == Metric::Latency;
    let sizes = if args.all {
        (1..=23).map(|k| 1usize << k).collect()
    } else {
        vec![args.size.unwrap_or(if latency { 8 } else { 65_536 })]
    };
    if sizes.iter().any(|&s| s == 0 || s > MAX_MESSAGE) {
        return Err(format!("-s must be 1 to {MAX_MESSAGE} octets"));
    }
    let stop = match (args.duration, args.iters) {
        (Some(seconds), _) if seconds > 0.0 && seconds.is_finite() => {
            Stop::Duration(std::time::Duration::from_secs_f64(seconds))
        }
        (Some(seconds), _) => {
            return Err(format!(
                "-D {seconds}: must be a positive number of seconds"
            ))
        }
        (None, Some(0)) => return Err("-n must be at least 1".into()),
        (None, iters) => Stop::Iters(iters.unwrap_or(if latency { 1000 } else { 5000 })),
    };
    if args.qps == 0 || args.qps > protocol::MAX_QPS {
        return Err(format!("-q must be 1 to {}", protocol::MAX_QPS));
    }
    if latency && args.qps != 1 {
        return Err("the latency modes run on one queue pair (-q 1)".into());
    }
    if args.tx_depth == 0 || args.tx_depth > MAX_TX_DEPTH {
        return Err(format!("-t (tx-depth) must be 1 to {MAX_TX_DEPTH}"));
    }
    let revision = if args.mpa_rev == 1 {
        Revision::Rfc5044
    } else {
        Revision::Enhanced
    };
    let p2p = match (args.p2p, revision) {
        (Some(P2pArg::None), _) | (None, Revision::Rfc5044) => None,
        (Some(_), Revision::Rfc5044) => {
            return Err("--p2p needs --mpa-rev 2: revision 1 has no peer-to-peer mode".into())
        }
        (rtr, _) => Some(RtrSet {
            write: matches!(rtr, None | Some(P2pArg::Write)),
            read: rtr == Some(P2pArg::Read),
            send: rtr == Some(P2pArg::Send),
        }),
    };
    let side = match args.connect {
        Some(peer) => Side::Client { peer },
        None => Side::Server { port: args.port },
    };
    let carrier = match args.transport {
        TransportArg::Dpdk => {
            let eal = args
                .eal
                .as_deref()
                .ok_or("--transport dpdk needs --eal, e.g. --eal \"--vdev net_tap0,iface=uw0\"")?;
            let ip = args
                .ip
                .as_deref()
                .ok_or("--transport dpdk needs --ip ADDRESS/PREFIX, e.g. --ip 10.0.0.2/24")?;
            let mut host = PortHost::parse(
                eal,
                args.device.as_deref(),
                ip,
                args.mac.as_deref(),
                args.gateway,
            )?;
            host.cores = args.cores.unwrap_or(1);
            Carrier::Dpdk {
                port: host,
                zero_copy_from: zero_copy(args.zero_copy_from),
            }
        }
        TransportArg::Socket => {
            if args.eal.is_some()
                || args.device.is_some()
                || args.mac.is_some()
                || args.gateway.is_some()
                || args.cores.is_some()
                || args.zero_copy_from.is_some()
            {
                return Err(
                    "--eal, --device, --mac, --gateway, --cores and --zero-copy-from \
                            are for --transport dpdk"
                        .into(),
                );
            }
            let bind = args
                .ip
                .as_deref()
                .map(|ip| {
                    let address = ip.split_once('/').map_or(ip, |(address, _)| address);
                    address
                        .parse()
                        .map_err(|_| format!("--ip {ip}: expected an address, e.g. 10.0.0.1"))
                })
                .transpose()?;
            Carrier::Socket { bind }
        }
    };
    Ok(TwoHost {
        side,
        carrier,
        run: ClientRun {
            mode,
            sizes,
            stop,
            qps: args.qps,
            tx_depth: args.tx_depth,
            inline: args.inline,
            mpa: Mpa {
                revision,
                crc: args.crc,
                markers: args.markers,
                p2p,
            },
            progress: true,
        },
    })
}

/// `--perftest`: one side of perftest's protocol.
fn perftest_side(op: Op, metric: Metric, args: &TwoHostArgs) -> Result<(), String> {
    let test = match (op, metric) {
        (_, Metric::Latency) => {
            return Err("--perftest is for write-bw, read-bw and send-bw".into());
        }
        (Op::Write, _) => Test::Write,
        (Op::Read, _) => Test::Read,
        (Op::Send, _) => Test::Send,
    };
    let unsupported = [
        (args.all, "-a"),
        (args.duration.is_some(), "-D"),
        (args.qps != 1, "-q"),
        (args.inline != 0, "-I"),
        (args.markers, "--markers"),
        (args.mpa_rev != 2, "--mpa-rev"),
        (args.p2p.is_some(), "--p2p"),
        (args.plot.is_some(), "--plot"),
    ];
    if let Some((_, option)) = unsupported.iter().find(|(given, _)| *given) {
        return Err(format!("{option} is not available with --perftest"));
    }
    let TwoHost { side, carrier, .. } = two_host_config(Mode { op, metric }, args)?;
    let defaults = PerftestOptions::new(test);
    let options = PerftestOptions {
        size: match args.size {
            Some(size) => u32::try_from(size).map_err(|_| "-s is too large")?,
            None => defaults.size,
        },
        iters: args.iters.unwrap_or(defaults.iters),
        tx_depth: u32::try_from(args.tx_depth).map_err(|_| "-t is too large")?,
        out_reads: args.outs.unwrap_or(defaults.out_reads),
        crc: args.crc,
        timeout: std::time::Duration::from_secs(args.timeout),
        first_fpdu_delay: std::time::Duration::from_millis(args.first_fpdu_delay_ms),
        ..defaults
    };
    options.check().map_err(|e| e.to_string())?;
    let outcome = perftest::run(&PerftestRun {
        side,
        carrier,
        options,
    })?;
    if args.json {
        println!("{}", perftest::to_json(&outcome));
    } else {
        print!("{}", perftest::to_text(&outcome));
    }
    Ok(())
}

fn calibrate(args: &CalibrateArgs) {
    let c = perf::calibrate(std::time::Duration::from_millis(500));
    if args.json {
        println!("{}", serde_json::json!({ "calibrate": c.to_json() }));
    } else {
        println!("{}", c.to_text());
    }
}

fn tcp(args: &TcpArgs) -> Result<(), String> {
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
        placement: args.cpus.clone().unwrap_or(Placement::Unpinned),
        linger: std::time::Duration::from_millis(args.linger_ms),
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

/// `--cpus CONTROL,DATAPLANE[,DATAPLANE...]`: the control core and each
/// dataplane core pinned.
fn parse_cpus(text: &str) -> Result<Placement, String> {
    let cpus: Option<Vec<usize>> = text.split(',').map(|n| n.trim().parse().ok()).collect();
    match cpus.as_deref() {
        Some([control, dataplanes @ ..]) if !dataplanes.is_empty() => Ok(Placement::Pinned {
            control: *control,
            dataplanes: dataplanes.to_vec(),
        }),
        _ => Err(format!(
            "expected CPU numbers CONTROL,DATAPLANE[,DATAPLANE...] (e.g. 0,1), not {text:?}"
        )),
    }
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

/// The zero-copy threshold `--zero-copy-from` gives: the device's default
/// when it is absent, none for 0.
fn zero_copy(arg: Option<usize>) -> Option<usize> {
    match arg {
        None => Some(ZERO_COPY_FROM),
        Some(0) => None,
        Some(from) => Some(from),
    }
}
