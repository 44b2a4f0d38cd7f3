//! `uwarp-perf pollloop`: the options of the bare DPDK poll loop's
//! measurement (the link, its length, the frames in flight, the CPU).

use clap::ValueEnum;
use uwarp_bench::pollloop::{self, Link, PollLoopConfig};

/// The options of `pollloop`.
#[derive(clap::Args)]
pub(super) struct PollLoopArgs {
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

/// `--link`: what joins the two sides.
#[derive(Clone, Copy, ValueEnum)]
enum LinkArg {
    Ring,
    Memif,
}

/// `pollloop`: the measurement (or, internally, its far side), printed.
pub(super) fn run(args: &PollLoopArgs) -> Result<(), String> {
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
