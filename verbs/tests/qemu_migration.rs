//! QEMU's RDMA live migration on uwarp's drop-ins: Debian's
//! `qemu-system-x86_64` (linked against libibverbs and librdmacm) moves a
//! paused guest's memory from one QEMU to another over
//! `-incoming rdma:` / `migrate rdma:`, both QEMUs on uwarp over loopback
//! (socket transport; the destination, the passive side, sends first).
//! Driven through QMP; the source's migration must complete and the
//! destination's guest must be the migrated one (paused, with the
//! source's run state).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::pair::{free_port, Running, Side};

/// A QEMU on uwarp with a QMP socket at `qmp`, and its other arguments.
fn qemu(qmp: &Path, args: &[&str]) -> Running {
    let mut all: Vec<String> = [
        "-nodefaults",
        "-display",
        "none",
        "-machine",
        "pc",
        "-m",
        "64",
        "-S",
        "-qmp",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    all.push(format!("unix:{},server=on,wait=off", qmp.display()));
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    Running::start(
        Side {
            tool: "qemu-system-x86_64",
            args: all,
            options: Vec::new(),
        }
        .command(),
    )
}

/// A QMP session.
struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects to the socket at `path` (waiting for QEMU to make it) and
    /// leaves negotiation mode.
    fn connect(path: &Path) -> Qmp {
        let started = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(stream) => break stream,
                Err(_) if started.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(err) => panic!("QMP at {}: {err}", path.display()),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a read timeout");
        let mut qmp = Qmp {
            reader: BufReader::new(stream.try_clone().expect("a second handle")),
            writer: stream,
        };
        let greeting = qmp.line();
        assert!(greeting.contains("\"QMP\""), "{greeting}");
        qmp.execute(r#"{"execute": "qmp_capabilities"}"#);
        qmp
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("QMP answers");
        line
    }

    /// Sends `command` and returns its answer (events before it skipped).
    fn execute(&mut self, command: &str) -> String {
        writeln!(self.writer, "{command}").expect("QMP takes the command");
        loop {
            let line = self.line();
            assert!(!line.contains("\"error\""), "{command}: {line}");
            if line.contains("\"return\"") {
                return line;
            }
        }
    }
}

/// A path for a QMP socket of this test.
fn socket(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.qmp"));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn qemu_migrates_a_guest_over_rdma_on_uwarp() {
    let port = free_port();
    let uri = format!("rdma:127.0.0.1:{port}");
    let (source_qmp, destination_qmp) = (socket("source"), socket("destination"));
    let destination = qemu(&destination_qmp, &["-incoming", &uri]);
    let mut incoming = Qmp::connect(&destination_qmp);
    let source = qemu(&source_qmp, &[]);
    let mut outgoing = Qmp::connect(&source_qmp);

    // The destination listens once QEMU set up its incoming side.
    let started = Instant::now();
    while !support::pair::listening(&port.to_string()) {
        assert!(started.elapsed() < Duration::from_secs(20), "no listener");
        std::thread::sleep(Duration::from_millis(50));
    }
    outgoing.execute(&format!(
        r#"{{"execute": "migrate", "arguments": {{"uri": "{uri}"}}}}"#
    ));
    let started = Instant::now();
    let status = loop {
        let answer = outgoing.execute(r#"{"execute": "query-migrate"}"#);
        if answer.contains("\"completed\"") || answer.contains("\"failed\"") {
            break answer;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still migrating: {answer}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.contains("\"completed\""), "{status}");
    // Pages with content (not all zeros, which go as a mark) travelled.
    let normal_pages = status
        .split("\"normal\": ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|count| count.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(
        normal_pages > 0,
        "no page of the guest's memory moved: {status}"
    );
    let state = incoming.execute(r#"{"execute": "query-status"}"#);
    assert!(
        state.contains("\"prelaunch\"") || state.contains("\"paused\""),
        "{state}"
    );
    drop((source, destination));
}
