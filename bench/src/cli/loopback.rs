//! `uwarp-perf loopback`, `compare` and `calibrate`: the options of a
//! run with both ends in this process (the workload, the DPDK link) and
//! of the calibration, and what runs them ([`uwarp_bench::perf::measure`]).

use uwarp_bench::perf::{self, plot, LinkOptions, Transport, Workload};

use super::common::{zero_copy, OpArg, SweepArgs, TransportArg};

/// The options of `calibrate`.
#[derive(clap::Args)]
pub(super) struct CalibrateArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// The options of `loopback` and `compare`.
#[derive(clap::Args)]
pub(super) struct LoopbackArgs {
    /// The transport (`loopback` only; `compare` runs both).
    #[arg(long, value_enum, default_value_t = TransportArg::Dpdk)]
    transport: TransportArg,
    /// The bandwidth operation.
    #[arg(long, value_enum, default_value_t = OpArg::Write)]
    op: OpArg,
    /// Message size of the bandwidth run in octets (0: zero-length
    /// messages, measured as a message rate; not with -a, which runs
    /// both runs at every size).
    #[arg(long, short = 's', default_value_t = 65_536, conflicts_with = "all")]
    size: usize,
    /// Messages in the bandwidth run, at each size (default 20000; 1000
    /// with -a).
    #[arg(long, short = 'n')]
    iters: Option<usize>,
    /// Round trips in the latency run, at each size (default 10000; 100
    /// with -a).
    #[arg(long)]
    latency_iters: Option<usize>,
    /// Message size of the latency run (an RDMA Write ping-pong; not
    /// with -a).
    #[arg(long, default_value_t = 8, conflicts_with = "all")]
    latency_size: usize,
    #[command(flatten)]
    sweep: SweepArgs,
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
    /// Also print each end's queue pair counters (FPDUs, placement, TCP
    /// loss recovery) and, on DPDK, its host's (frames, drops); the JSON
    /// always has them.
    #[arg(long, short = 'v')]
    verbose: bool,
}

/// `loopback`: the workload over the transport `--transport` names.
pub(super) fn loopback(args: &LoopbackArgs) -> Result<(), String> {
    run(args, &[args.transport.transport()])
}

/// `compare`: the workload over both transports, one after the other.
pub(super) fn compare(args: &LoopbackArgs) -> Result<(), String> {
    run(args, &[Transport::Dpdk, Transport::Socket])
}

/// Measures the workload `args` describe over each of `transports`, and
/// prints the report.
fn run(args: &LoopbackArgs, transports: &[Transport]) -> Result<(), String> {
    let (iters, latency_iters) = match args.sweep.all {
        false => (
            args.iters.unwrap_or(20_000),
            args.latency_iters.unwrap_or(10_000),
        ),
        true => (
            args.iters.unwrap_or(1000),
            args.latency_iters.unwrap_or(100),
        ),
    };
    if args.size > u32::MAX as usize
        || args.latency_size > u32::MAX as usize
        || iters == 0
        || args.tx_depth == 0
        || latency_iters == 0
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
        op: args.op.op(),
        sizes: args.sweep.sizes(args.size),
        iters,
        latency_sizes: args.sweep.sizes(args.latency_size.max(1)),
        latency_iters,
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
        print!("{}", report.to_text(args.verbose));
    }
    args.sweep.plot(|| plot::loopback_chart(&report))
}

/// `calibrate`: this core's rates, printed.
pub(super) fn calibrate(args: &CalibrateArgs) {
    let c = perf::calibrate(std::time::Duration::from_millis(500));
    if args.json {
        println!("{}", serde_json::json!({ "calibrate": c.to_json() }));
    } else {
        println!("{}", c.to_text());
    }
}
