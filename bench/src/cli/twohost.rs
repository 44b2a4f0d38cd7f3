//! The two-host modes (`write-bw`, `write-lat`, `read-bw`, `read-lat`,
//! `send-bw`, `send-lat`): the options of one side of a run (the side,
//! the transport and its port, the run's sizes and counts, MPA), checked
//! into a [`TwoHost`], and `--perftest`, the same modes speaking
//! perftest's own protocol.

use clap::ValueEnum;
use uwarp::{Revision, RtrSet, Vlan};
use uwarp_bench::perf::perftest::{self, PerftestRun};
use uwarp_bench::perf::protocol::{self, Stop};
use uwarp_bench::perf::session::{ClientRun, Mpa};
use uwarp_bench::perf::twohost::{self, Carrier, Side, TwoHost};
use uwarp_bench::perf::{plot, Metric, Mode, Op};
use uwarp_bench::port::PortHost;
use uwarp_dataplane::runtime::Placement;
use uwarp_interop::perftest::{Options as PerftestOptions, Test};

use super::common::{zero_copy, SweepArgs, TransportArg};

/// The options of the two-host modes. The server takes the sizes, counts,
/// queue pairs and depth from its client; both must give the same MPA
/// revision.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("side").required(true).args(["server", "connect"])))]
pub(super) struct TwoHostArgs {
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
    /// Run on queue 0 of this kernel interface through AF_XDP, beside
    /// the kernel (dpdk; instead of --eal): on the interface's own IPv4
    /// address and gateway, the kernel keeping all traffic that is not
    /// uwarp's. Needs root
    #[arg(long, conflicts_with_all = ["eal", "device", "ip", "mac", "gateway", "vlan"])]
    iface: Option<String>,
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
    /// The IEEE 802.1Q VLAN of the port, ID or ID:PCP (dpdk; e.g. 42 or
    /// 42:5):
    /// only frames tagged with ID are taken, and every frame sent is
    /// tagged with ID at priority PCP (0 by default).
    #[arg(long, value_name = "ID[:PCP]", value_parser = Vlan::parse)]
    vlan: Option<Vlan>,
    /// Dataplane cores (dpdk), each polling a receive queue of the port
    /// (the device must have that many queue pairs, e.g. net_af_packet's
    /// qpairs=N; flows go to the core whose queue their first answer came
    /// in on; default 1).
    #[arg(long)]
    cores: Option<u16>,
    /// Run the control core's thread on CPU CONTROL and each dataplane
    /// core's on its CPU, given as "CONTROL,DATAPLANE[,DATAPLANE...]",
    /// one per --cores, as `tcp --cpus` does (dpdk; default: the cores
    /// run inline on the measuring thread, one busy thread). The report
    /// says whether two busy threads shared a CPU.
    #[arg(long, value_name = "CONTROL,DATAPLANE", value_parser = Placement::parse_cpus)]
    cpus: Option<Placement>,
    /// The measuring thread spins while it waits, polling its completion
    /// queue or the memory a Write lands in without ever yielding its CPU,
    /// as perftest's loops do (needs cores on threads: --cpus, or the
    /// socket transport). By default it sleeps until a completion in the
    /// bandwidth modes and yields between polls in the latency modes.
    #[arg(long)]
    spin: bool,
    /// Zero-copy transmit (dpdk): send the payload of each FPDU of at
    /// least BYTES octets from registered memory, not from a copy in the
    /// TCP send queue; Sends and Writes then complete when TCP
    /// acknowledges them. 0 turns it off; default 4096 (jumbo frames).
    #[arg(long, value_name = "BYTES")]
    zero_copy_from: Option<usize>,
    /// Send payloads by reference (dpdk): each frame's TCP payload an
    /// external-buffer segment into the send queue or the registered
    /// memory zero-copy transmit sends from, not a copy. On a PCI NIC
    /// (VFIO, IOVA as VA) that memory is mapped for the NIC's DMA;
    /// devices that allow neither copy.
    #[arg(long)]
    payloads_by_reference: bool,
    /// Impair what this side receives (dpdk), e.g. `loss=0.01` (`loss`,
    /// `reorder`, `dup` probabilities, `delay`, `seed`; default off).
    #[arg(long, value_name = "SPEC")]
    impair_rx: Option<String>,
    /// Message size in octets (default: 65536 for bandwidth, 8 for
    /// latency).
    #[arg(long, short = 's', conflicts_with = "all")]
    size: Option<usize>,
    #[command(flatten)]
    sweep: SweepArgs,
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

/// `--p2p`: the peer-to-peer RTR a client offers.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum P2pArg {
    None,
    Write,
    Read,
    Send,
}

/// Runs this side of the `op` `metric` mode `args` describe (perftest's
/// protocol with `--perftest`), prints the report and draws `--plot`.
pub(super) fn run(op: Op, metric: Metric, args: &TwoHostArgs) -> Result<(), String> {
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
    args.sweep.plot(|| plot::chart(&report))
}

/// The largest message: 4 GiB - 1 octets.
const MAX_MESSAGE: usize = u32::MAX as usize;
/// The deepest send queue a run keeps full (its completion queue has
/// room for all of it on every queue pair).
const MAX_TX_DEPTH: usize = 16_384;

/// What the two-host options ask for, checked.
fn two_host_config(mode: Mode, args: &TwoHostArgs) -> Result<TwoHost, String> {
    let latency = mode.metric == Metric::Latency;
    let sizes = args
        .sweep
        .sizes(args.size.unwrap_or(if latency { 8 } else { 65_536 }));
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
            let mut host = match &args.iface {
                Some(iface) => PortHost::beside_kernel(iface)?,
                None => {
                    let eal = args.eal.as_deref().ok_or(
                        "--transport dpdk needs --eal (e.g. --eal \"--vdev net_tap0,iface=uw0\") \
                         or --iface",
                    )?;
                    let ip = args.ip.as_deref().ok_or(
                        "--transport dpdk needs --ip ADDRESS/PREFIX, e.g. --ip 10.0.0.2/24",
                    )?;
                    PortHost {
                        vlan: args.vlan,
                        ..PortHost::parse(
                            eal,
                            args.device.as_deref(),
                            ip,
                            args.mac.as_deref(),
                            args.gateway,
                        )?
                    }
                }
            };
            host.cores = args.cores.unwrap_or(1);
            host.placement = args.cpus.clone().unwrap_or(Placement::Unpinned);
            host.payloads_by_reference = args.payloads_by_reference;
            if let Some(impair) = &args.impair_rx {
                host.impair_rx = impair.parse().map_err(|e| format!("--impair-rx: {e}"))?;
            }
            if args.spin && host.placement == Placement::Unpinned {
                return Err("--spin needs the cores on threads of their own (--cpus): \
                            inline, the measuring thread runs them as it waits"
                    .into());
            }
            Carrier::Dpdk {
                port: host,
                zero_copy_from: zero_copy(args.zero_copy_from),
            }
        }
        TransportArg::Socket => {
            if args.eal.is_some()
                || args.iface.is_some()
                || args.device.is_some()
                || args.mac.is_some()
                || args.gateway.is_some()
                || args.vlan.is_some()
                || args.cores.is_some()
                || args.cpus.is_some()
                || args.zero_copy_from.is_some()
                || args.payloads_by_reference
                || args.impair_rx.is_some()
            {
                return Err(
                    "--eal, --iface, --device, --mac, --gateway, --vlan, --cores, --cpus, \
                            --zero-copy-from, --payloads-by-reference and --impair-rx \
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
        spin: args.spin,
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
        (args.sweep.all, "-a"),
        (args.duration.is_some(), "-D"),
        (args.qps != 1, "-q"),
        (args.inline != 0, "-I"),
        (args.markers, "--markers"),
        (args.mpa_rev != 2, "--mpa-rev"),
        (args.p2p.is_some(), "--p2p"),
        (args.cpus.is_some(), "--cpus"),
        (args.spin, "--spin"),
        (args.sweep.plot.is_some(), "--plot"),
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
