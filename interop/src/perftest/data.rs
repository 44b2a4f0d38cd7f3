//! The data connection's side of a run: the queue pair, the memory laid
//! out as perftest lays it out ([`Layout`]), and the measured loops:
//!
//! - the client's (`run_iter_bw`): up to `tx_depth` Writes, Reads or
//!   Sends outstanding, each to the next slot of the cycle buffer; the
//!   send test also stays fewer than `rx_depth` Sends ahead of the
//!   server's credit (`send_rcredit`, which perftest turns on for iWARP
//!   devices, where a Send that finds no receive breaks the stream);
//! - the send test's server's (`run_iter_bw_server`): `rx_depth`
//!   receives posted before the last handshake, each one posted again as
//!   it completes until `iters` are posted, and every `rx_depth / 3`
//!   receives the count so far RDMA-Written into the client's credit
//!   buffer.
//!
//! The write and read tests' server does nothing here: the client's
//! Writes land in its memory and its Reads are answered by the stack.

use std::time::{Duration, Instant};

use uwarp_stack::mem::Access;
use uwarp_stack::verbs::{Payload, RecvWr, SendOp, SendWr, WcOpcode, WorkCompletion};

use super::completions::checked;
use super::measure::Timeline;
use super::params::{credit_due, Layout};
use super::wire::{self, Dest, CREDIT_LEN};
use super::{PerftestError, Test};
use uwarp::CompletionQueue;
use uwarp::Device;
use uwarp::Error;
use uwarp::{MemoryRegion, ProtectionDomain};
use uwarp::{QpInit, QueuePair};

/// The receive completions' and credit Writes' work request identifiers
/// start here, clear of the client's message numbers.
const WR_SERVER: u64 = 1 << 63;
/// How long a loop waits for a completion before it looks at the clock
/// (and, in the send test, at the credit) again.
const SLICE: Duration = Duration::from_micros(200);

/// One side's data queue pair and memory.
pub(crate) struct Data {
    test: Test,
    layout: Layout,
    iters: u64,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    /// Two halves of `layout.buff_size()`: the local messages, then what
    /// the peer targets (and where receives land).
    region: MemoryRegion,
    /// The send test's credit buffer, which the server writes into.
    credit: Option<MemoryRegion>,
    timeout: Duration,
}

impl Data {
    /// The memory and a queue pair for a `test` run of `iters` messages
    /// laid out as `layout`, with room in the completion queue for
    /// `depth` completions at once.
    pub(crate) fn new(
        device: &Device,
        test: Test,
        layout: Layout,
        iters: u64,
        depth: u64,
        timeout: Duration,
    ) -> Result<Self, Error> {
        let pd = device.alloc_pd()?;
        // In range: depths are bounded by the options' checks.
        let cq = device.create_cq(depth as usize * 2 + 16);
        let qp = device.create_qp(&pd, QpInit::new(&cq));
        let access = match test {
            Test::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            // On iWARP a Read's sink is written by the peer's Read
            // Response; perftest registers it with remote write too.
            Test::Read => Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            Test::Send => Access::LOCAL_WRITE,
        };
        let len = usize::try_from(layout.buff_size() * 2)
            .map_err(|_| Error::InvalidArgument("the message size"))?;
        let region = pd.alloc_mr(len, access)?;
        let credit = (test == Test::Send)
            .then(|| pd.alloc_mr(CREDIT_LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE))
            .transpose()?;
        Ok(Self {
            test,
            layout,
            iters,
            pd,
            cq,
            qp,
            region,
            credit,
            timeout,
        })
    }

    /// The queue pair, to connect or accept.
    pub(crate) fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// A fresh queue pair in place of one whose connection failed.
    pub(crate) fn renew_qp(&mut self, device: &Device) {
        self.qp = device.create_qp(&self.pd, QpInit::new(&self.cq));
    }

    /// What the peer targets: the send test's credit buffer, else the
    /// region's second half.
    pub(crate) fn target(&self) -> (u32, u64) {
        match &self.credit {
            Some(credit) => (credit.rkey(), credit.addr()),
            None => (
                self.region.rkey(),
                self.region.addr() + self.layout.buff_size(),
            ),
        }
    }

    /// The `n`th message's scatter/gather element, in the first half
    /// (`second`: the second half).
    fn slot(&self, n: u64, second: bool) -> uwarp::Sge {
        let half = if second { self.layout.buff_size() } else { 0 };
        // In range: both halves fit in the region, whose size is a usize.
        let offset = (half + self.layout.offset(n)) as usize;
        self.region.sge(offset, self.layout.size)
    }

    /// The send test's server: posts `rx_depth` receives into the second
    /// half (`ctx_set_recv_wqes`).
    pub(crate) fn post_receives(&self, rx_depth: u64) -> Result<(), Error> {
        (0..rx_depth).try_for_each(|n| self.post_receive(n))
    }

    fn post_receive(&self, n: u64) -> Result<(), Error> {
        self.qp.post_recv(RecvWr {
            wr_id: WR_SERVER | n,
            sgl: vec![self.slot(n, true)],
        })
    }

    /// The send test's credit: what the server has written so far.
    fn credit(&self) -> Result<u64, Error> {
        let mut bytes = [0u8; CREDIT_LEN];
        if let Some(credit) = &self.credit {
            credit.buffer().read_at(0, &mut bytes)?;
        }
        Ok(u64::from(wire::parse_credit(bytes)))
    }

    /// Takes the completions there are now into `wcs` (waiting a
    /// [`SLICE`] for the first with `wait`).
    fn take(&self, wcs: &mut Vec<WorkCompletion>, wait: bool) {
        wcs.clear();
        if wait {
            if let Some(wc) = self.cq.poll_blocking(SLICE) {
                wcs.push(wc);
            }
        }
        self.cq.poll(wcs, 64);
        if wcs.is_empty() {
            // Leave the CPU to the device's threads (a side whose cores
            // run inline ran them in the poll).
            std::thread::yield_now();
        }
    }

    /// The client's loop against the peer's destination `peer`: `iters`
    /// messages, at most `tx_depth` outstanding (and, in the send test,
    /// fewer than `rx_depth` ahead of the credit).
    pub(crate) fn run_client(
        &self,
        peer: &Dest,
        tx_depth: u64,
        rx_depth: u64,
    ) -> Result<Timeline, PerftestError> {
        let iters = self.iters;
        let waiting_for = "the client's messages to complete";
        let mut timeline = Timeline::client(iters);
        let mut wcs = Vec::with_capacity(64);
        let mut progress = Instant::now();
        while timeline.completed() < iters {
            let done = timeline.completed();
            let mut posted = timeline.posted();
            while posted < iters
                && posted - done < tx_depth
                && (self.test != Test::Send || posted + 1 - self.credit()?.min(posted) < rx_depth)
            {
                timeline.post(Instant::now());
                self.post_message(peer, posted)?;
                posted += 1;
            }
            self.take(&mut wcs, posted > done);
            let now = Instant::now();
            for &wc in &wcs {
                let wc = checked(&self.qp, wc, waiting_for)?;
                let want = match self.test {
                    Test::Write => WcOpcode::Write,
                    Test::Read => WcOpcode::Read,
                    Test::Send => WcOpcode::Send,
                };
                if wc.opcode != want {
                    return Err(PerftestError::Unexpected {
                        waiting_for,
                        got: wc.opcode,
                    });
                }
                timeline.complete(now);
                progress = now;
            }
            if progress.elapsed() > self.timeout {
                return Err(PerftestError::Timeout { waiting_for });
            }
        }
        Ok(timeline)
    }

    fn post_message(&self, peer: &Dest, n: u64) -> Result<(), Error> {
        let remote_addr = peer.vaddr.wrapping_add(self.layout.offset(n));
        let rkey = peer.rkey;
        let op = match self.test {
            Test::Write => SendOp::Write { remote_addr, rkey },
            Test::Read => SendOp::Read { remote_addr, rkey },
            Test::Send => SendOp::Send,
        };
        let sge = self.slot(n, false);
        self.qp
            .post_send(SendWr::new(n, op, Payload::Sgl(vec![sge])))
    }

    /// The send test's server's loop: `iters` Sends of the layout's size
    /// into the receives [`post_receives`](Self::post_receives) posted,
    /// with a credit to the client's `peer` buffer whenever
    /// [`credit_due`].
    pub(crate) fn run_server(&self, peer: &Dest, rx_depth: u64) -> Result<Timeline, PerftestError> {
        let waiting_for = "the client's Sends";
        let mut posted = rx_depth;
        let mut timeline = Timeline::arrivals();
        let mut wcs = Vec::with_capacity(64);
        let mut progress = Instant::now();
        while timeline.completed() < self.iters {
            self.take(&mut wcs, true);
            let now = Instant::now();
            for &wc in &wcs {
                let wc = checked(&self.qp, wc, waiting_for)?;
                progress = now;
                match wc.opcode {
                    // A credit went out.
                    WcOpcode::Write => continue,
                    WcOpcode::Recv => {}
                    got => return Err(PerftestError::Unexpected { waiting_for, got }),
                }
                if wc.byte_len != self.layout.size {
                    return Err(PerftestError::Mismatch {
                        what: "octets in a received Send",
                        expected: u64::from(self.layout.size),
                        counted: u64::from(wc.byte_len),
                    });
                }
                if timeline.posted() == 0 {
                    timeline.post(now);
                }
                timeline.complete(now);
                let received = timeline.completed();
                if posted < self.iters {
                    self.post_receive(posted)?;
                    posted += 1;
                }
                if credit_due(received, rx_depth) {
                    self.post_credit(peer, received)?;
                }
            }
            if progress.elapsed() > self.timeout {
                return Err(PerftestError::Timeout { waiting_for });
            }
        }
        Ok(timeline)
    }

    fn post_credit(&self, peer: &Dest, received: u64) -> Result<(), Error> {
        // perftest's counter is a uint32_t; it wraps as the wire does.
        let credit = wire::encode_credit(received as u32);
        let op = SendOp::Write {
            remote_addr: peer.vaddr,
            rkey: peer.rkey,
        };
        let wr = SendWr::new(WR_SERVER | received, op, Payload::Inline(credit.to_vec()));
        self.qp.post_send(wr)
    }
}
