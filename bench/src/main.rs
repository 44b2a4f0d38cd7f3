//! `uwarp-perf`: uwarp's command-line tool.
//!
//! `uwarp-perf decode FILE...` decodes the iWARP traffic in pcap or pcapng
//! captures: one line (or one JSON object) per MPA startup frame and FPDU.
//! `uwarp-perf loopback` measures RDMA Write, Read or Send bandwidth and
//! Send latency with both ends in one process, next to the same workload
//! over plain kernel TCP. `uwarp-perf pollloop` measures the bare DPDK
//! poll loop in packets per second beside dpdk-testpmd.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use uwarp_bench::capture::read_capture;
use uwarp_bench::decode::{decode_streams, CrcMode, DecodeOptions};
use uwarp_bench::perf::{self, Op, Workload};
use uwarp_bench::pollloop::{self, Link, PollLoopConfig};
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
    /// Measure bandwidth and latency with both ends in this process,
    /// beside the same workload over plain kernel TCP.
    Loopback(LoopbackArgs),
    /// Measure the bare DPDK poll loop (receive, classify, transmit) in
    /// packets per second, beside dpdk-testpmd's io forwarding.
    Pollloop(PollLoopArgs),
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
struct LoopbackArgs {
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
    #[arg(long, default_value_t = 2_000)]
    latency_iters: usize,
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
        Command::Loopback(args) => loopback(&args),
        Command::Pollloop(args) => pollloop(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("uwarp-perf: {message}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(args: &LoopbackArgs) -> Result<(), String> {
    if args.size > u32::MAX as usize || args.iters == 0 || args.tx_depth == 0 {
        return Err("size must fit 32 bits; iters and tx-depth must be positive".into());
    }
    let workload = Workload {
        op: match args.op {
            OpArg::Write => Op::Write,
            OpArg::Read => Op::Read,
            OpArg::Send => Op::Send,
        },
        size: args.size,
        iters: args.iters,
        latency_iters: args.latency_iters.max(1),
        tx_depth: args.tx_depth,
        crc: args.crc,
    };
    let report = perf::loopback(&workload)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
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
