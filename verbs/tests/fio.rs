//! Debian's unmodified fio, whose rdma engine is built on libibverbs and
//! librdmacm, on uwarp's drop-in libraries: a server job and a client job
//! in two processes over loopback, with the client moving data by RDMA
//! Write and by RDMA Read. Each job runs on a thread (`--thread`): by
//! default fio forks every job into a session of its own, which works on
//! uwarp as well but which a test cannot kill should fio hang.
//!
//! fio's `send` verb is not run: it posts Sends with no flow control and
//! relies on InfiniBand's receiver-not-ready retries, which iWARP does not
//! have (a Send that finds no receive ends the connection with a
//! Terminate, RFC 5040 section 7.2; siw and hardware RNICs do the same).

mod support;

use std::time::{Duration, Instant};

use support::assert_success;
use support::pair::{free_port, strings, wait_listening, Running, Side};

/// Any one run.
const LIMIT: Duration = Duration::from_secs(60);
/// Blocks of 64 KiB the client moves.
const BLOCKS: usize = 256;

/// Runs fio's server job and a client job moving [`BLOCKS`] blocks with
/// `verb`; returns the client's output after checking both succeeded.
fn fio(verb: &str) -> String {
    let port = free_port().to_string();
    let size = format!("{}k", BLOCKS * 64);
    let job = |name: &str, extra: &[&str]| Side {
        tool: "fio",
        args: [
            strings(&[
                &format!("--name={name}"),
                "--ioengine=rdma",
                &format!("--port={port}"),
                "--bs=64k",
                &format!("--size={size}"),
                "--iodepth=16",
                "--thread",
            ]),
            strings(extra),
        ]
        .concat(),
        options: Vec::new(),
    };
    let server = Running::start(job("server", &["--rw=read"]).command());
    wait_listening(&port);
    let client = job(
        "client",
        &[
            "--hostname=127.0.0.1",
            &format!("--verb={verb}"),
            "--rw=write",
        ],
    );
    let client = Running::start(client.command()).finish(Instant::now() + LIMIT);
    let server = server.finish(Instant::now() + LIMIT);
    assert_success("fio's client", &client);
    assert_success("fio's server", &server);
    String::from_utf8_lossy(&client.stdout).into_owned()
}

/// Checks the client's report: no error, every block issued and done.
fn check_report(verb: &str, report: &str) {
    assert!(report.contains("err= 0"), "{verb}: {report}");
    assert!(
        report.contains(&format!("issued rwts: total=0,{BLOCKS},0,0 short=0,0,0,0")),
        "{verb}: not every block was moved:\n{report}"
    );
    assert!(
        report.contains("WRITE: bw="),
        "{verb}: no bandwidth: {report}"
    );
}

#[test]
fn debian_fio_moves_data_by_rdma_write_on_uwarp() {
    check_report("write", &fio("write"));
}

/// Regression: fio's client acknowledged too few events when one raised
/// at arming, for completions it then polled, reached it with nothing
/// left to poll, and hung in `ibv_destroy_cq` waiting for the missing
/// acknowledgement.
#[test]
fn debian_fio_moves_data_by_rdma_read_on_uwarp() {
    check_report("read", &fio("read"));
}
