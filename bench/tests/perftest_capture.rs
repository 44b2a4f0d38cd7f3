//! uwarp's perftest protocol (`uwarp_interop::perftest`) against what
//! perftest 4.5 on Linux siw put on the wire (`tests/data/siw/lo/`,
//! `ib_{write,read,send}_bw -R -s 64 -n 5`, siw to siw): the messages
//! uwarp builds for the captured runs' parameters are the captured
//! octets, in the captured order; the data connection and the measured
//! run come where uwarp's script puts them; the MPA frames of both
//! connections, the data FPDUs' addresses and the send test's credits are
//! what uwarp sends for the same run.
//!
//! The parameters are the captured runs' own: what each side printed in
//! `lo-ib_*_bw.{client,server}.txt` (QPN, PSN, GID, the rounded report),
//! and what perftest does not print (rkey, vaddr, the report's exact
//! doubles) as the capture carries it. perftest sends two things uwarp
//! cannot reproduce, and these tests skip: the four octets of padding in
//! `struct pingpong_dest` (perftest's stack garbage, zeros from uwarp),
//! and the write and read tests' server's report (its uninitialised
//! stack; uwarp's server sends its own size and count).

use std::path::{Path, PathBuf};

use uwarp_bench::capture::{read_capture, FlowKey};
use uwarp_bench::decode::{decode_streams, DecodeOptions, RecordKind};
use uwarp_interop::perftest::params::{credit_due, rx_depth, Layout};
use uwarp_interop::perftest::script::{script, Announced, Message, Step};
use uwarp_interop::perftest::wire::{self, Dest, IbMtu};
use uwarp_interop::perftest::{BwReport, Options, Test};
use uwarp_stack::mpa::negotiation;
use uwarp_stack::wire::fpdu::Fpdu;
use uwarp_stack::wire::mpa::StartupRepr;
use uwarp_stack::wire::rdmap::{Opcode, RdmapSegment, ReadRequest};

/// Where `struct pingpong_dest`'s padding is.
const DEST_PADDING: std::ops::Range<usize> = 20..24;
/// siw's GID: its netdev's MAC, 52:54:00:12:34:56.
const GID: [u8; 16] = [
    0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];
/// Both sides' page and cache line sizes, the MTU siw reports.
const CYCLE_BUFFER: u32 = 4096;
const CACHE_LINE: u32 = 64;
/// The runs' `-s` and `-n`.
const SIZE: u32 = 64;
const ITERS: u64 = 5;

/// One captured run and its parameters.
struct Run {
    test: Test,
    file: &'static str,
    client: Dest,
    server: Dest,
    /// The client's report's peak, average and message rate, as IEEE
    /// bits (the text output rounds them).
    report_bits: [u64; 3],
}

fn dest(qpn: u32, psn: u32, rkey: u32, vaddr: u64, out_reads: u32) -> Dest {
    Dest {
        out_reads,
        qpn,
        psn,
        rkey,
        vaddr,
        gid: GID,
        ..Dest::default()
    }
}

fn runs() -> [Run; 3] {
    [
        Run {
            test: Test::Write,
            file: "lo-ib_write_bw",
            client: dest(3, 0x87c7b0, 0x5c8d_3b00, 0x558e_96ce_f000, 1),
            server: dest(4, 0x2aea8e, 0x57d8_e500, 0x55f8_bf4b_a000, 1),
            report_bits: [0x3fe7186048d56d37, 0x3fdd277029c74d14, 0x3f7e91fb6b75b503],
        },
        Run {
            test: Test::Read,
            file: "lo-ib_read_bw",
            client: dest(3, 0x84f35a, 0xd204_5800, 0x55b1_a17a_0000, 128),
            server: dest(4, 0x9aafaa, 0x087f_ee00, 0x562f_dc83_9000, 128),
            report_bits: [0x3fd4b87f28ae8b58, 0x3fd0947fd2767d1a, 0x3f7162ae1b41bcb4],
        },
        Run {
            test: Test::Send,
            file: "lo-ib_send_bw",
            client: dest(3, 0x76e566, 0xf6de_3400, 0x55f9_00b8_acd4, 1),
            server: dest(4, 0x5b0886, 0x7a0a_6b00, 0x55e1_dfeb_eed4, 1),
            report_bits: [0; 3],
        },
    ]
}

impl Run {
    fn text(&self, side: &str) -> String {
        std::fs::read_to_string(data_dir().join(format!("{}.{side}.txt", self.file))).unwrap()
    }

    /// What the client announces at the end of the run.
    fn client_announces(&self) -> Announced {
        let [peak, avg, rate] = self.report_bits.map(f64::from_bits);
        announced(
            self.client,
            BwReport {
                size: SIZE.into(),
                iters: ITERS,
                bw_peak: peak,
                bw_avg: avg,
                msg_rate: rate,
            },
        )
    }
}

fn announced(dest: Dest, report: BwReport) -> Announced {
    Announced {
        version: wire::VERSION.into(),
        cycle_buffer: CYCLE_BUFFER,
        cache_line: CACHE_LINE,
        mtu: IbMtu::Mtu1024,
        dest,
        report,
    }
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/siw/lo")
}

/// One MPA frame or FPDU of a capture.
struct Unit {
    frame: usize,
    /// Of the data connection (else the comm connection).
    data: bool,
    /// Sent by the client.
    from_client: bool,
    kind: RecordKind,
    bytes: Vec<u8>,
}

impl Unit {
    /// The RDMAP message of an FPDU.
    fn segment(&self) -> RdmapSegment<'_> {
        let fpdu = Fpdu::new_checked(&self.bytes[..]).unwrap();
        let ulpdu = &self.bytes[2..2 + fpdu.ulpdu_len()];
        RdmapSegment::parse(ulpdu).unwrap()
    }
}

/// Every unit of `run`'s capture, in frame order.
fn units(run: &Run) -> Vec<Unit> {
    let path = data_dir().join(format!("{}.pcap", run.file));
    let streams = read_capture(&path).unwrap();
    let records = decode_streams(&streams, &DecodeOptions::default());
    // The comm connection's Request comes first, the data connection's
    // second; a connection is its client's flow.
    let mut requests: Vec<_> = records
        .iter()
        .filter(|r| r.kind == RecordKind::MpaRequest)
        .collect();
    requests.sort_by_key(|r| r.frame);
    let clients: Vec<FlowKey> = requests.iter().map(|r| r.key).collect();
    assert_eq!(clients.len(), 2, "{}: two connections", run.file);
    let mut units: Vec<Unit> = records
        .iter()
        .map(|record| {
            let stream = streams.iter().find(|s| s.key == record.key).unwrap();
            let connection = clients
                .iter()
                .position(|&c| c == record.key || c == record.key.reversed())
                .unwrap();
            Unit {
                frame: record.frame,
                data: connection == 1,
                from_client: clients[connection] == record.key,
                kind: record.kind,
                bytes: stream.bytes[record.offset..record.offset + record.len].to_vec(),
            }
        })
        .collect();
    units.sort_by_key(|u| (u.frame, u.bytes.len()));
    units
}

/// The comm channel's Send payloads one side sent, in order.
fn comm_messages(units: &[Unit], from_client: bool) -> Vec<Vec<u8>> {
    units
        .iter()
        .filter(|u| !u.data && u.from_client == from_client && u.kind == RecordKind::Fpdu)
        .map(|u| {
            let segment = u.segment();
            assert_eq!(segment.opcode(), Opcode::Send);
            segment.payload.to_vec()
        })
        .collect()
}

/// Compares uwarp's messages for `ours` with the captured `theirs`,
/// skipping the padding and (`skip_report`) the report fields.
fn compare(run: &Run, side: &str, ours: &Announced, theirs: &[Vec<u8>], skip_report: bool) {
    let messages: Vec<Message> = script(run.test)
        .into_iter()
        .filter_map(|step| match step {
            Step::Exchange(message) => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        messages.len(),
        theirs.len(),
        "{} {side}: messages",
        run.file
    );
    for (i, (message, captured)) in messages.iter().zip(theirs).enumerate() {
        let mut built = message.encode(ours);
        let mut captured = captured.clone();
        assert_eq!(
            built.len(),
            captured.len(),
            "{} {side} #{i} {message:?}",
            run.file
        );
        if matches!(message, Message::Dest | Message::EmptyDest) {
            built[DEST_PADDING].fill(0);
            captured[DEST_PADDING].fill(0);
        }
        let report = matches!(
            message,
            Message::ReportSize
                | Message::ReportIters
                | Message::ReportPeak
                | Message::ReportAverage
                | Message::ReportMsgRate
        );
        if !(report && skip_report) {
            assert_eq!(built, captured, "{} {side} #{i} {message:?}", run.file);
        }
    }
}

#[test]
fn the_clients_messages_are_perftests_octet_for_octet() {
    for run in runs() {
        let units = units(&run);
        compare(
            &run,
            "client",
            &run.client_announces(),
            &comm_messages(&units, true),
            false,
        );
    }
}

#[test]
fn the_servers_messages_are_perftests_but_for_its_report() {
    for run in runs() {
        let units = units(&run);
        let ours = announced(run.server, BwReport::default());
        compare(&run, "server", &ours, &comm_messages(&units, false), true);
    }
}

/// The parameters above are what perftest printed.
#[test]
fn the_parameters_are_what_perftest_printed() {
    for run in runs() {
        let client = run.text("client");
        for (side, dest) in [("local", run.client), ("remote", run.server)] {
            let line = format!(
                " {side} address: LID 0000 QPN {:#06x} PSN {:#06x}",
                dest.qpn, dest.psn
            );
            assert!(client.contains(&line), "{}: {line}", run.file);
        }
        assert!(
            client.contains(" GID: 82:84:00:18:52:86:00:00"),
            "{}",
            run.file
        );
        if run.test != Test::Send {
            let report = run.client_announces().report;
            let line = format!(
                " {SIZE:<7}    {ITERS:<10}       {:<7.2}            {:<7.2}",
                report.bw_peak, report.bw_avg
            );
            assert!(client.contains(&line), "{}: {line}", run.file);
            assert!(
                client.contains(&format!("{:.6}", report.msg_rate)),
                "{}",
                run.file
            );
            // The server printed the client's report.
            assert!(run.text("server").contains(&line), "{}: {line}", run.file);
        }
    }
}

/// The messages each side had sent when the data connection was made
/// and while the measured run went on.
#[test]
fn the_data_connection_and_the_run_come_where_the_script_puts_them() {
    for run in runs() {
        let steps = script(run.test);
        let exchanges_before = |wanted: Step| {
            let at = steps.iter().position(|&s| s == wanted).unwrap();
            steps[..at]
                .iter()
                .filter(|s| matches!(s, Step::Exchange(_)))
                .count()
        };
        let units = units(&run);
        let sent_before = |frame: usize| {
            units
                .iter()
                .filter(|u| {
                    !u.data && u.from_client && u.kind == RecordKind::Fpdu && u.frame < frame
                })
                .count()
        };
        let request = units
            .iter()
            .find(|u| u.data && u.kind == RecordKind::MpaRequest)
            .unwrap();
        assert_eq!(
            sent_before(request.frame),
            exchanges_before(Step::ConnectData),
            "{}",
            run.file
        );
        let measured: Vec<&Unit> = units
            .iter()
            .filter(|u| u.data && u.from_client && u.kind == RecordKind::Fpdu)
            .collect();
        assert_eq!(measured.len() as u64, ITERS, "{}", run.file);
        for unit in measured {
            assert_eq!(
                sent_before(unit.frame),
                exchanges_before(Step::Run),
                "{}",
                run.file
            );
        }
    }
}

/// Both connections' MPA Request are what uwarp's client sends, their
/// Replies what uwarp's server answers (IRD and ORD 0, or the read
/// test's 128 outstanding Reads, which is siw's maximum and uwarp's
/// default).
#[test]
fn the_mpa_frames_are_uwarps() {
    for run in runs() {
        let options = Options::new(run.test);
        let units = units(&run);
        for (data, local) in [
            (false, options.comm_params()),
            (true, options.data_params()),
        ] {
            let frame = |kind: RecordKind| {
                &units
                    .iter()
                    .find(|u| u.data == data && u.kind == kind)
                    .unwrap()
                    .bytes
            };
            let request = negotiation::request(&local);
            assert_eq!(
                emit(&request),
                *frame(RecordKind::MpaRequest),
                "{} {data}",
                run.file
            );
            let (captured, _) = StartupRepr::parse_bytes(frame(RecordKind::MpaRequest)).unwrap();
            let (reply, _) = negotiation::accept(&local, &captured).unwrap();
            assert_eq!(
                emit(&reply),
                *frame(RecordKind::MpaReply),
                "{} {data}",
                run.file
            );
        }
    }
}

/// The octets of an MPA frame.
fn emit(frame: &StartupRepr<'_>) -> Vec<u8> {
    let mut out = vec![0; frame.buffer_len()];
    frame.emit(&mut out).unwrap();
    out
}

/// The Writes' and Reads' addresses follow perftest's cycle buffer as
/// uwarp lays it out, and the send test's server credits when uwarp's
/// does, with the octets uwarp writes.
#[test]
fn the_data_fpdus_are_where_uwarp_puts_them() {
    let layout = Layout {
        size: SIZE,
        cycle_buffer: CYCLE_BUFFER,
        cache_line: CACHE_LINE,
    };
    for run in runs() {
        let units = units(&run);
        let from = |client: bool| {
            units
                .iter()
                .filter(move |u| u.data && u.from_client == client && u.kind == RecordKind::Fpdu)
        };
        match run.test {
            Test::Write => {
                for (n, unit) in from(true).enumerate() {
                    let segment = unit.segment();
                    assert_eq!(segment.opcode(), Opcode::RdmaWrite);
                    let to = run.server.vaddr + layout.offset(n as u64);
                    assert_eq!(tagged(&unit.bytes), (run.server.rkey, to), "Write {n}");
                    assert_eq!(segment.payload.len(), SIZE as usize);
                }
            }
            Test::Read => {
                // The client's own half starts one half below what it
                // advertised.
                let local = run.client.vaddr - layout.buff_size();
                for (n, unit) in from(true).enumerate() {
                    let segment = unit.segment();
                    assert_eq!(segment.opcode(), Opcode::ReadRequest);
                    let request = ReadRequest::parse(segment.payload).unwrap();
                    let offset = layout.offset(n as u64);
                    assert_eq!(request.sink_to, local + offset, "Read {n}");
                    assert_eq!(request.source_stag, run.server.rkey, "Read {n}");
                    assert_eq!(request.source_to, run.server.vaddr + offset, "Read {n}");
                    assert_eq!(request.size, SIZE, "Read {n}");
                }
            }
            Test::Send => {
                let depth = rx_depth(ITERS);
                let credits: Vec<Vec<u8>> = (1..=ITERS)
                    .filter(|&n| credit_due(n, depth))
                    .map(|n| wire::encode_credit(n as u32).to_vec())
                    .collect();
                let captured: Vec<Vec<u8>> = from(false)
                    .map(|unit| {
                        assert_eq!(tagged(&unit.bytes), (run.client.rkey, run.client.vaddr));
                        unit.segment().payload.to_vec()
                    })
                    .collect();
                assert_eq!(captured, credits);
            }
        }
    }
}

/// A tagged FPDU's STag and Tagged Offset.
fn tagged(fpdu: &[u8]) -> (u32, u64) {
    let stag = u32::from_be_bytes(fpdu[4..8].try_into().unwrap());
    let to = u64::from_be_bytes(fpdu[8..16].try_into().unwrap());
    (stag, to)
}
