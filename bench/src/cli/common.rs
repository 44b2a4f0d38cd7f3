//! The options several commands share, and how each becomes the
//! library's value: the transport and the operation of a perf run, the
//! size sweep and its chart (`-a`, `--plot`, of `loopback`, `compare`
//! and the two-host modes), and the zero-copy threshold
//! (`--zero-copy-from`). (`--cpus` is `Placement::parse_cpus`.)

use std::path::PathBuf;

use clap::ValueEnum;
use uwarp::ZERO_COPY_FROM;
use uwarp_bench::perf::{self, Op, Transport};

/// `--transport`: uwarp's TCP on DPDK, or the kernel's sockets.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum TransportArg {
    Dpdk,
    Socket,
}

impl TransportArg {
    /// The transport it names.
    pub(super) fn transport(self) -> Transport {
        match self {
            Self::Dpdk => Transport::Dpdk,
            Self::Socket => Transport::Socket,
        }
    }
}

/// `--op`: the operation of a bandwidth run.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum OpArg {
    Write,
    Read,
    Send,
}

impl OpArg {
    /// The operation it names.
    pub(super) fn op(self) -> Op {
        match self {
            Self::Write => Op::Write,
            Self::Read => Op::Read,
            Self::Send => Op::Send,
        }
    }
}

/// `-a` and `--plot`: a sweep of message sizes, and its chart.
#[derive(clap::Args)]
pub(super) struct SweepArgs {
    /// Every message size from 2 to 8 MiB by powers of two, one
    /// measurement each.
    #[arg(long, short = 'a')]
    pub(super) all: bool,
    /// Draw the results against the message size into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub(super) plot: Option<PathBuf>,
}

impl SweepArgs {
    /// The sizes to measure: the sweep with `-a`, else `size` alone.
    pub(super) fn sizes(&self, size: usize) -> Vec<usize> {
        if self.all {
            perf::sweep_sizes()
        } else {
            vec![size]
        }
    }

    /// Writes the chart `draw` makes into the `--plot` file, if one was
    /// given.
    pub(super) fn plot(&self, draw: impl FnOnce() -> String) -> Result<(), String> {
        match &self.plot {
            Some(file) => {
                std::fs::write(file, draw()).map_err(|e| format!("--plot {}: {e}", file.display()))
            }
            None => Ok(()),
        }
    }
}

/// The zero-copy threshold `--zero-copy-from` gives: the device's default
/// when it is absent, none for 0.
pub(super) fn zero_copy(arg: Option<usize>) -> Option<usize> {
    match arg {
        None => Some(ZERO_COPY_FROM),
        Some(0) => None,
        Some(from) => Some(from),
    }
}
