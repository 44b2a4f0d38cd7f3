//! `uwarp-perf write-bw|read-bw|send-bw --perftest`: one side of a run of
//! perftest's `ib_write_bw -R`, `ib_read_bw -R` or `ib_send_bw -R`
//! ([`uwarp_interop::perftest`]), against perftest itself or another
//! `uwarp-perf --perftest`, on either transport; the result in
//! perftest's table, or one JSON object.

use std::fmt::Write as _;

use serde_json::{json, Value};
use uwarp_interop::perftest::{self, wire::Dest, Options, Report, Role, Test};

use super::report::counters_json;
use super::twohost::{listen, open_device, Carrier, Side};

/// perftest's horizontal rule (`RESULT_LINE`).
const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// What a `--perftest` process runs.
#[derive(Debug, Clone)]
pub struct PerftestRun {
    /// Server or client.
    pub side: Side,
    /// The transport.
    pub carrier: Carrier,
    /// The test and perftest's options.
    pub options: Options,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The transport's name.
    pub transport: &'static str,
    /// This side's report.
    pub report: Report,
}

/// Opens the device, runs this side, and reports.
pub fn run(run: &PerftestRun) -> Result<Outcome, String> {
    let (device, transport) = open_device(&run.carrier)?;
    let report = match run.side {
        Side::Server { port } => {
            let listener = listen(&device, &run.carrier, port)?;
            perftest::serve(&device, &listener, &run.options)
        }
        Side::Client { peer } => perftest::run_client(&device, peer, &run.options),
    }
    .map_err(|e| e.to_string())?;
    Ok(Outcome {
        transport: transport.name(),
        report,
    })
}

/// The run as perftest prints it: the test's settings, both
/// destinations, the result line, then what uwarp checked.
pub fn to_text(outcome: &Outcome) -> String {
    let report = &outcome.report;
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(RULE.into());
    line(format!("                    {}", report.test.title()));
    line(" Number of qps   : 1\t\tTransport type : IW".into());
    line(" Connection type : RC\t\tUsing SRQ      : OFF".into());
    if report.role == Role::Client {
        line(format!(" TX depth        : {}", report.tx_depth));
    } else if report.test == Test::Send {
        line(format!(" RX depth        : {}", report.rx_depth));
    }
    line(" Mtu             : 1024[B]".into());
    if report.test == Test::Read {
        line(format!(" Outstand reads  : {}", report.local.out_reads));
    }
    line(" rdma_cm QPs\t : ON".into());
    line(" Data ex. method : rdma_cm".into());
    line(format!(" uwarp transport : {}", outcome.transport));
    line(RULE.into());
    line(address("local", &report.local));
    line(address("remote", &report.remote));
    line(RULE.into());
    line(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]".into());
    let bw = &report.printed;
    line(format!(
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
        bw.size, bw.iters, bw.bw_peak, bw.bw_avg, bw.msg_rate
    ));
    line(RULE.into());
    line(format!(
        " uwarp: {} {} (checked); peer version {:?}",
        report.verified.count, report.verified.what, report.peer_version
    ));
    out
}

/// A destination as perftest prints it (`BASIC_ADDR_FMT`, then the GID
/// in decimal octets, `PERF_GID_FMT`).
fn address(side: &str, dest: &Dest) -> String {
    let mut text = format!(
        " {side} address: LID {} QPN {} PSN {}\n GID: ",
        c_alt_hex(dest.lid, 4),
        c_alt_hex(dest.qpn, 6),
        c_alt_hex(dest.psn, 6)
    );
    for (i, octet) in dest.gid.iter().enumerate() {
        let separator = if i == 0 { "" } else { ":" };
        let _ = write!(text, "{separator}{octet:02}");
    }
    text
}

/// C's `%#0Nx`: `0x` and the digits padded to `width` characters in all,
/// except that zero is plain zeros.
fn c_alt_hex(value: u32, width: usize) -> String {
    if value == 0 {
        "0".repeat(width)
    } else {
        format!("{value:#0width$x}")
    }
}

/// The run as one JSON object.
pub fn to_json(outcome: &Outcome) -> Value {
    let report = &outcome.report;
    let role = |role: Role| match role {
        Role::Client => "client",
        Role::Server => "server",
    };
    let dest = |dest: &Dest| {
        json!({
            "qpn": dest.qpn,
            "psn": dest.psn,
            "rkey": dest.rkey,
            "vaddr": dest.vaddr,
            "out_reads": dest.out_reads,
        })
    };
    let bw = &report.printed;
    json!({
        "mode": match report.test {
            Test::Write => "write-bw",
            Test::Read => "read-bw",
            Test::Send => "send-bw",
        },
        "perftest": true,
        "role": role(report.role),
        "transport": outcome.transport,
        "peer": report.comm.peer_addr.to_string(),
        "peer_version": report.peer_version,
        "size": bw.size,
        "iters": bw.iters,
        "bw_peak_mbps": bw.bw_peak,
        "bw_avg_mbps": bw.bw_avg,
        "msg_rate_mpps": bw.msg_rate,
        "measured_by": role(report.measured_by),
        "verified": { "what": report.verified.what, "count": report.verified.count },
        "local": dest(&report.local),
        "remote": dest(&report.remote),
        "mpa": {
            "crc": report.data.negotiated.crc,
            "ird": report.data.negotiated.ird,
            "ord": report.data.negotiated.ord,
        },
        "counters": counters_json(&report.counters),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_print_as_perftest_prints_them() {
        let dest = Dest {
            qpn: 3,
            psn: 0x87c7b0,
            gid: [
                0x52, 0x54, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            ..Dest::default()
        };
        assert_eq!(
            address("local", &dest),
            " local address: LID 0000 QPN 0x0003 PSN 0x87c7b0\n \
             GID: 82:84:00:18:52:86:00:00:00:00:00:00:00:00:00:00"
        );
    }
}
