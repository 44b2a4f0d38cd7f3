//! `uwarp-perf conns`: the options of the many-connections measurement
//! (the connection counts, the messages and their window, the buffers).

use clap::ValueEnum;
use uwarp_bench::perf::conns::{self, ConnsRun};
use uwarp_bench::perf::Op;

/// The options of `conns`.
#[derive(clap::Args)]
pub(super) struct ConnsArgs {
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

/// `--op` of `conns`: Writes or Sends.
#[derive(Clone, Copy, ValueEnum)]
enum ConnsOpArg {
    Write,
    Send,
}

/// `conns`: a run per connection count, printed.
pub(super) fn run(args: &ConnsArgs) -> Result<(), String> {
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
