//! perftest's `ib_write_bw -R`, `ib_read_bw -R` and `ib_send_bw -R`
//! (rdma-core's perftest 4.5+0.17, Debian 12's) over uwarp, message for
//! message on the wire, so that uwarp and a real perftest on Linux siw or
//! an iWARP NIC measure against each other in either role.
//!
//! With `-R` perftest makes two connections through the connection
//! manager, both to the server's one port:
//!
//! - the **comm channel** ([`comm`](self) module): Sends of the small
//!   messages of [`wire`] (the version, the page and cache line sizes,
//!   the MTU, each side's [`Dest`](wire::Dest), the client's bandwidth
//!   report), in the order [`script`] gives, in lock step;
//! - the **data connection**, made between two of those messages: the
//!   client's RDMA Writes into the server's memory, RDMA Reads from it,
//!   or Sends into its receives (with the server's receive credits
//!   RDMA-Written back, as perftest does on iWARP), laid out as
//!   [`params::Layout`] says.
//!
//! Both sides must be given the same size and iterations, as with
//! perftest: nothing tells the server the client's (the send test's
//! server counts the Sends it expects; the others take the client's
//! report at the end). The client measures (`print_report_bw`'s peak,
//! average and message rate); the write and read tests' server prints
//! the client's report, the send test's server its own average.
//!
//! uwarp checks what perftest does not: every comm message's length, the
//! peer's version (5.70 or later, which fixes every message's format),
//! every received Send's length, and at the end what crossed against
//! what the run says: the octets the client's Reads placed, the octets
//! the client's Writes placed in the server, the Read Requests the
//! server answered, the Sends it received. A step that waits longer than
//! [`Options::timeout`] fails instead of hanging.
//!
//! Against Linux siw as the server, the client holds its first FPDU on
//! each connection back for [`Options::first_fpdu_delay`] (siw's accept
//! race, see docs/siw-interop.md).

mod comm;
mod completions;
mod data;
mod error;
mod measure;
pub mod params;
pub mod script;
mod session;
pub mod wire;

use std::time::Duration;

use uwarp_stack::mpa::LocalParams;

pub use error::PerftestError;
pub use session::{run_client, serve, Report, Verified};

/// Which test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// `ib_write_bw`: RDMA Writes into the server's memory.
    Write,
    /// `ib_read_bw`: RDMA Reads of the server's memory.
    Read,
    /// `ib_send_bw`: Sends into the server's receives.
    Send,
}

impl Test {
    /// The heading perftest prints ("RDMA_Write BW Test", ...).
    pub fn title(self) -> &'static str {
        match self {
            Self::Write => "RDMA_Write BW Test",
            Self::Read => "RDMA_Read BW Test",
            Self::Send => "Send BW Test",
        }
    }
}

/// Which side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Connects, sends first in every exchange, measures.
    Client,
    /// Listens, answers.
    Server,
}

/// A bandwidth report (`struct bw_report_data`, the fields perftest
/// exchanges).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size, octets.
    pub size: u64,
    /// Messages.
    pub iters: u64,
    /// Peak bandwidth, MB/s (2^20 octets).
    pub bw_peak: f64,
    /// Average bandwidth, MB/s.
    pub bw_avg: f64,
    /// Messages per second, millions.
    pub msg_rate: f64,
}

/// A run's settings: perftest's options, and uwarp's.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The test.
    pub test: Test,
    /// Message size (`-s`), 1 octet to [`params::MAX_SIZE`].
    pub size: u32,
    /// Messages (`-n`), at least [`params::MIN_ITERS`].
    pub iters: u64,
    /// Work requests the client keeps outstanding (`-t`).
    pub tx_depth: u32,
    /// RDMA Reads this side can have outstanding (`-o`; the read test),
    /// announced in its destination and its MPA IRD/ORD.
    pub out_reads: u16,
    /// Ask for MPA CRCs on both connections.
    pub crc: bool,
    /// How long any one step may take (a connection, a message, the
    /// run without a completion); perftest waits for ever.
    pub timeout: Duration,
    /// How long the server waits for its client to connect (`None`: for
    /// ever, as perftest does).
    pub wait: Option<Duration>,
    /// How long the client holds its first FPDU on each connection back
    /// after the MPA Reply ([`uwarp::ConnectParams::first_fpdu_delay`]).
    /// Linux siw's passive side sends its MPA Reply before it reads the
    /// connection, and an FPDU that arrives in between stays unread
    /// (siw's accept race, see docs/siw-interop.md); 200 ms is ample. Zero by
    /// default, as perftest does.
    pub first_fpdu_delay: Duration,
}

impl Options {
    /// perftest's defaults for `test` (`-s 65536`, `-n 5000` for writes
    /// and 1000 otherwise, `-t 128`, as many outstanding Reads as siw
    /// offers), a 30-second step timeout.
    pub fn new(test: Test) -> Self {
        Self {
            test,
            size: params::DEFAULT_SIZE,
            iters: match test {
                Test::Write => params::DEFAULT_ITERS_WRITE,
                Test::Read | Test::Send => params::DEFAULT_ITERS,
            },
            tx_depth: params::DEFAULT_TX_DEPTH,
            out_reads: params::DEFAULT_OUT_READS,
            crc: false,
            timeout: Duration::from_secs(30),
            wait: None,
            first_fpdu_delay: Duration::ZERO,
        }
    }

    /// Refuses what perftest refuses.
    pub fn check(&self) -> Result<(), PerftestError> {
        let bad = |what: String| Err(PerftestError::BadOptions(what));
        if self.size == 0 || self.size > params::MAX_SIZE {
            return bad(format!("-s must be 1 to {} octets", params::MAX_SIZE));
        }
        if self.iters < params::MIN_ITERS {
            return bad(format!("-n must be at least {}", params::MIN_ITERS));
        }
        if u32::try_from(self.iters).is_err() {
            return bad("-n must fit 32 bits (the send test's credit counter)".into());
        }
        if self.tx_depth == 0 {
            return bad("-t must be at least 1".into());
        }
        if self.test == Test::Read && self.out_reads == 0 {
            return bad("-o must be at least 1".into());
        }
        Ok(())
    }

    /// The comm connection's MPA settings: no RDMA Reads (perftest's
    /// comm channel leaves `initiator_depth` and `responder_resources`
    /// at 0), no private data.
    pub fn comm_params(&self) -> LocalParams {
        self.mpa_params(0)
    }

    /// The data connection's MPA settings: IRD and ORD of
    /// [`out_reads`](Self::out_reads) for the read test, 0 otherwise
    /// (`rdma_cm_connection_request_handler`, `rdma_cm_route_handler`).
    pub fn data_params(&self) -> LocalParams {
        self.mpa_params(if self.test == Test::Read {
            self.out_reads
        } else {
            0
        })
    }

    fn mpa_params(&self, reads: u16) -> LocalParams {
        LocalParams {
            crc: self.crc,
            ird: reads,
            ord: reads,
            ..LocalParams::default()
        }
    }

    /// The outstanding Reads this side announces in its destination:
    /// [`out_reads`](Self::out_reads) in the read test, 1 otherwise.
    pub fn announced_out_reads(&self) -> u32 {
        match self.test {
            Test::Read => u32::from(self.out_reads),
            Test::Write | Test::Send => 1,
        }
    }
}
