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
//!
//! The command line itself is [`cli`]; this file only starts it.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
