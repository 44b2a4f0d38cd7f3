//! The order of a perftest run, as `write_bw.c`, `read_bw.c` and
//! `send_bw.c` of perftest 4.5 walk it with `-R` (connections through
//! the connection manager), the same on both sides:
//!
//! 1. the comm connection (the client connects to the server's port);
//! 2. `exchange_versions`, `check_sys_data` (cycle buffer, then cache
//!    line size), `check_mtu`;
//! 3. `create_rdma_cm_connection`: a handshake of an all-zero
//!    destination, the data connection (to the same port), another
//!    zero handshake;
//! 4. the destinations: three handshakes (write, read: after
//!    `set_up_connection`, to print the remote side, and "after moving
//!    the QP to RTR"; send: after `ctx_alloc_credit`, after
//!    `ctx_set_credit_wqes`, to print the remote side), then the send
//!    test's server posts its receives and both shake hands once more;
//! 5. the measured run: the client posts, the send test's server
//!    receives;
//! 6. write and read: a handshake (the server waits in it for the client
//!    to finish) and `xchg_bw_reports`, five fields one exchange each;
//! 7. `ctx_close_connection`: a last handshake, then both disconnect.
//!
//! In every exchange the client sends first and then receives, the
//! server receives first and then sends (`ctx_hand_shake`,
//! `ctx_xchg_data_rdma`).

use super::wire::{self, Dest, IbMtu, DEST_LEN, INT_LEN, MTU_LEN, REPORT_FIELD_LEN, VERSION_LEN};
use super::{BwReport, Test};

/// One message of the comm channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// The version text.
    Version,
    /// The cycle buffer (the page size).
    CycleBuffer,
    /// The cache line size.
    CacheLineSize,
    /// The MTU.
    Mtu,
    /// An all-zero destination (the handshakes around the data
    /// connection).
    EmptyDest,
    /// This side's destination.
    Dest,
    /// The report's message size.
    ReportSize,
    /// The report's iterations.
    ReportIters,
    /// The report's peak bandwidth, MB/s.
    ReportPeak,
    /// The report's average bandwidth, MB/s.
    ReportAverage,
    /// The report's message rate, millions per second.
    ReportMsgRate,
}

impl Message {
    /// Its length in octets.
    pub fn octets(self) -> usize {
        match self {
            Self::Version => VERSION_LEN,
            Self::CycleBuffer | Self::CacheLineSize => INT_LEN,
            Self::Mtu => MTU_LEN,
            Self::EmptyDest | Self::Dest => DEST_LEN,
            Self::ReportSize
            | Self::ReportIters
            | Self::ReportPeak
            | Self::ReportAverage
            | Self::ReportMsgRate => REPORT_FIELD_LEN,
        }
    }

    /// What it is, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Version => "version",
            Self::CycleBuffer => "cycle buffer size",
            Self::CacheLineSize => "cache line size",
            Self::Mtu => "MTU",
            Self::EmptyDest => "empty destination",
            Self::Dest => "destination",
            Self::ReportSize => "report: size",
            Self::ReportIters => "report: iterations",
            Self::ReportPeak => "report: peak bandwidth",
            Self::ReportAverage => "report: average bandwidth",
            Self::ReportMsgRate => "report: message rate",
        }
    }

    /// This side's message, from what it announces.
    pub fn encode(self, ours: &Announced) -> Vec<u8> {
        match self {
            Self::Version => wire::encode_version(&ours.version).to_vec(),
            Self::CycleBuffer => wire::encode_int(ours.cycle_buffer).to_vec(),
            Self::CacheLineSize => wire::encode_int(ours.cache_line).to_vec(),
            Self::Mtu => wire::encode_mtu(ours.mtu).to_vec(),
            Self::EmptyDest => Dest::default().to_bytes().to_vec(),
            Self::Dest => ours.dest.to_bytes().to_vec(),
            Self::ReportSize => wire::encode_count(ours.report.size).to_vec(),
            Self::ReportIters => wire::encode_count(ours.report.iters).to_vec(),
            Self::ReportPeak => wire::encode_rate(ours.report.bw_peak).to_vec(),
            Self::ReportAverage => wire::encode_rate(ours.report.bw_avg).to_vec(),
            Self::ReportMsgRate => wire::encode_rate(ours.report.msg_rate).to_vec(),
        }
    }
}

/// What one side tells its peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Announced {
    /// Its version text ([`wire::VERSION`]).
    pub version: String,
    /// Its page size.
    pub cycle_buffer: u32,
    /// Its cache line size.
    pub cache_line: u32,
    /// Its port's MTU.
    pub mtu: IbMtu,
    /// Its destination, once the data connection is up.
    pub dest: Dest,
    /// Its report, once the run is over.
    pub report: BwReport,
}

/// What a peer told this side, message by message (`None` until heard,
/// or when it said something this side cannot read, like an MTU that is
/// no digit: perftest takes those as they come).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Heard {
    /// Its version.
    pub version: Option<wire::PeerVersion>,
    /// Its page size.
    pub cycle_buffer: Option<u32>,
    /// Its cache line size.
    pub cache_line: Option<u32>,
    /// Its MTU.
    pub mtu: Option<IbMtu>,
    /// Its last destination.
    pub dest: Option<Dest>,
    /// Its report (fields it has sent).
    pub report: BwReport,
}

impl Heard {
    /// Takes in the peer's `message`, whose length the comm channel
    /// checked.
    pub fn absorb(&mut self, message: Message, bytes: &[u8]) {
        match message {
            Message::Version => self.version = Some(wire::parse_version(bytes)),
            Message::CycleBuffer => self.cycle_buffer = wire::parse_int(bytes),
            Message::CacheLineSize => self.cache_line = wire::parse_int(bytes),
            Message::Mtu => self.mtu = wire::parse_mtu(bytes),
            Message::EmptyDest => {}
            Message::Dest => self.dest = Dest::from_bytes(bytes),
            Message::ReportSize => self.report.size = wire::parse_count(bytes).unwrap_or(0),
            Message::ReportIters => self.report.iters = wire::parse_count(bytes).unwrap_or(0),
            Message::ReportPeak => self.report.bw_peak = wire::parse_rate(bytes).unwrap_or(0.0),
            Message::ReportAverage => self.report.bw_avg = wire::parse_rate(bytes).unwrap_or(0.0),
            Message::ReportMsgRate => {
                self.report.msg_rate = wire::parse_rate(bytes).unwrap_or(0.0);
            }
        }
    }
}

/// One step of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Both sides send this message and receive the peer's.
    Exchange(Message),
    /// The client connects the data queue pair, the server accepts it.
    ConnectData,
    /// The send test's server posts its receives.
    PostReceives,
    /// The measured run.
    Run,
}

/// Every step of a `test` run, in order.
pub fn script(test: Test) -> Vec<Step> {
    use Message::*;
    use Step::*;
    let mut steps = vec![
        Exchange(Version),
        Exchange(CycleBuffer),
        Exchange(CacheLineSize),
        Exchange(Mtu),
        Exchange(EmptyDest),
        ConnectData,
        Exchange(EmptyDest),
        Exchange(Dest),
        Exchange(Dest),
        Exchange(Dest),
    ];
    match test {
        Test::Write | Test::Read => steps.extend([
            Run,
            Exchange(Dest),
            Exchange(ReportSize),
            Exchange(ReportIters),
            Exchange(ReportPeak),
            Exchange(ReportAverage),
            Exchange(ReportMsgRate),
        ]),
        Test::Send => steps.extend([PostReceives, Exchange(Dest), Run]),
    }
    steps.push(Exchange(Dest));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchanges(test: Test) -> usize {
        script(test)
            .iter()
            .filter(|s| matches!(s, Step::Exchange(_)))
            .count()
    }

    #[test]
    fn the_captured_runs_had_this_many_messages_each_way() {
        // lo-ib_write_bw.pcap and lo-ib_read_bw.pcap: MSN 1 to 0x10 on the
        // comm connection; lo-ib_send_bw.pcap: 1 to 0xb.
        assert_eq!(exchanges(Test::Write), 16);
        assert_eq!(exchanges(Test::Read), 16);
        assert_eq!(exchanges(Test::Send), 11);
    }

    #[test]
    fn every_message_fits_the_receive_buffer() {
        for test in [Test::Write, Test::Read, Test::Send] {
            for step in script(test) {
                if let Step::Exchange(message) = step {
                    assert!(message.octets() <= DEST_LEN, "{message:?}");
                }
            }
        }
    }
}
