//! The command line of `uwarp-perf`: what each subcommand takes, and
//! which part of the library runs it.
//!
//! - `loopback.rs`: `loopback`, `compare` and `calibrate`, both ends of a
//!   run in this process.
//! - `twohost.rs`: the perftest-style two-host modes (`write-bw` ...),
//!   one side of a run, and `--perftest`.
//! - `tcp.rs`: `tcp` and `tcp-compare`, uwarp's TCP on its own.
//! - `pollloop.rs`: `pollloop`, the bare DPDK poll loop.
//! - `conns.rs`: `conns`, thousands of connections in one process.
//! - `decode.rs`: `decode`, the captures decoder.
//! - `common.rs`: the options several commands share: the transport, the
//!   operation, the CPUs (`--cpus`), the size sweep (`-a`) and its chart
//!   (`--plot`), the zero-copy threshold.

mod common;
mod conns;
mod decode;
mod loopback;
mod pollloop;
mod tcp;
mod twohost;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use uwarp_bench::perf::{Metric, Op};

use conns::ConnsArgs;
use decode::DecodeArgs;
use loopback::{CalibrateArgs, LoopbackArgs};
use pollloop::PollLoopArgs;
use tcp::{TcpArgs, TcpCompareArgs};
use twohost::TwoHostArgs;

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

/// The subcommands.
#[derive(Subcommand)]
enum Command {
    /// Decode the MPA/DDP/RDMAP traffic in pcap or pcapng files.
    Decode(DecodeArgs),
    /// Measure bandwidth, latency and connection setup with both ends in
    /// this process, on a virtual DPDK link (no NIC, no hugepages) or the
    /// kernel-socket transport; at every message size with -a, drawn
    /// with --plot.
    Loopback(LoopbackArgs),
    /// Run the loopback workload over the dpdk and the socket transports
    /// back to back and print their ratios (with -a, both transports'
    /// sweeps, drawn together with --plot).
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

/// Parses the command line (no command: `loopback` with its defaults),
/// runs what it asks for, and says why it failed on standard error.
pub(crate) fn main() -> ExitCode {
    let command = Cli::parse().command.unwrap_or_else(|| {
        let default = Cli::parse_from(["uwarp-perf", "loopback"]);
        default.command.expect("loopback is a subcommand")
    });
    let result = match command {
        Command::Decode(args) => decode::run(&args),
        Command::Loopback(args) => loopback::loopback(&args),
        Command::Compare(args) => loopback::compare(&args),
        Command::Calibrate(args) => {
            loopback::calibrate(&args);
            Ok(())
        }
        Command::Pollloop(args) => pollloop::run(&args),
        Command::Tcp(args) => tcp::tcp(&args),
        Command::TcpCompare(args) => tcp::tcp_compare(&args),
        Command::WriteBw(args) => twohost::run(Op::Write, Metric::Bandwidth, &args),
        Command::WriteLat(args) => twohost::run(Op::Write, Metric::Latency, &args),
        Command::ReadBw(args) => twohost::run(Op::Read, Metric::Bandwidth, &args),
        Command::ReadLat(args) => twohost::run(Op::Read, Metric::Latency, &args),
        Command::SendBw(args) => twohost::run(Op::Send, Metric::Bandwidth, &args),
        Command::SendLat(args) => twohost::run(Op::Send, Metric::Latency, &args),
        Command::Conns(args) => conns::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("uwarp-perf: {message}");
            ExitCode::FAILURE
        }
    }
}
