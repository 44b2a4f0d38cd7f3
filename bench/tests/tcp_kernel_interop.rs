//! uwarp's TCP on DPDK against the Linux kernel's TCP, over a tap
//! (`net_tap`): `uwarp-perf tcp` on one side, kernel sockets opened by
//! this test on the other.
//!
//! - uwarp as client and as server, 1 GiB each way through an echo, with
//!   the dataplane's impairment stage dropping, reordering and duplicating
//!   frames both ways; SHA-256 digests must agree on both ends.
//! - The handshake captured with tshark: SACK, timestamps and window
//!   scaling offered by both SYNs.
//! - RST paths: connecting to a closed port (both ways), a peer that
//!   aborts mid-transfer. FIN paths: uwarp closes first (source), the
//!   kernel closes first (echo).
//! - A kernel peer that stops reading: uwarp probes the zero window and
//!   finishes when the peer reads again.
//!
//! Each test has its own tap and subnet; they run one at a time (each
//! runs two busy-polling cores, and the machine may have two CPUs). The
//! size of the big transfers is `UWARP_INTEROP_BYTES` (default 1 GiB).
//! Needs root (tap devices).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use common::kernel::{drain, kernel_echo, kernel_source, the_report};
use common::Perf;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Impairment on both directions of the big transfers: enough to exercise
/// SACK recovery, reordering and duplicate handling against the kernel.
const IMPAIR_RX: &str = "loss=0.002,reorder=0.005,dup=0.002,seed=11";
const IMPAIR_TX: &str = "loss=0.002,reorder=0.005,dup=0.002,seed=12";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn serial() -> Option<MutexGuard<'static, ()>> {
    if !is_root() {
        eprintln!("SKIPPED: a tap device needs root");
        return None;
    }
    Some(
        SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

fn big_transfer() -> u64 {
    std::env::var("UWARP_INTEROP_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30)
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// The addressing of one test's tap: the kernel at .1, uwarp at .2.
struct Tap {
    name: String,
    subnet: u8,
}

impl Tap {
    fn new(index: u8) -> Self {
        Tap {
            name: format!("uwtcp{index}"),
            subnet: index,
        }
    }

    fn kernel_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 80, self.subnet, 1)
    }

    fn uwarp_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 80, self.subnet, 2)
    }

    /// The `uwarp-perf tcp` arguments putting uwarp on this tap.
    fn uwarp_args(&self) -> Vec<String> {
        vec![
            "--eal".into(),
            format!("--vdev net_tap0,iface={}", self.name),
            "--ip".into(),
            format!("{}/24", self.uwarp_ip()),
            "--json".into(),
            "--timeout".into(),
            "300".into(),
        ]
    }

    /// Gives the kernel's side its address once uwarp created the tap.
    fn up(&self) {
        let status = Command::new("bash")
            .arg(scripts().join("topo-tap.sh"))
            .args(["up", &self.name, &format!("{}/24", self.kernel_ip())])
            .status()
            .expect("bash runs");
        assert!(status.success(), "topo-tap.sh up {}", self.name);
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(scripts().join("topo-tap.sh"))
            .args(["down", &self.name])
            .status();
    }
}

/// The lines of `pipe`, read on a thread of their own until it closes.
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    receiver
}

/// A running `uwarp-perf tcp`, killed if the test ends early.
struct Uwarp(Perf);

impl Uwarp {
    fn start(tap: &Tap, args: &[&str]) -> Self {
        let mut list = vec!["tcp".to_string()];
        list.extend(args.iter().map(|a| a.to_string()));
        list.extend(tap.uwarp_args());
        Uwarp(Perf::start("uwarp-perf tcp", &[], &list))
    }

    /// Waits for a line of stderr containing `text`.
    fn wait_for(&mut self, text: &str) {
        self.0.wait_for(text);
    }

    /// Waits for the process; returns its status and its JSON reports.
    fn finish(self) -> (ExitStatus, Vec<serde_json::Value>, String) {
        let finished = self.0.finish();
        let reports = finished
            .stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        (finished.status, reports, finished.stderr)
    }
}

/// `uwarp-perf tcp` sending `bytes` to the kernel at `port` on `tap`'s
/// subnet, with `extra` arguments.
fn source_to(tap: &Tap, port: u16, bytes: u64, extra: &[&str]) -> Uwarp {
    let target = SocketAddrV4::new(tap.kernel_ip(), port).to_string();
    let bytes = bytes.to_string();
    let mut args = vec!["--role", "source", "--connect", &target, "--bytes", &bytes];
    args.extend_from_slice(extra);
    Uwarp::start(tap, &args)
}

fn listen_any(port: u16) -> TcpListener {
    TcpListener::bind(("0.0.0.0", port)).expect("the kernel listens")
}

#[test]
fn uwarp_client_moves_a_gigabyte_each_way_through_a_kernel_echo() {
    let Some(_serial) = serial() else { return };
    let bytes = big_transfer();
    let tap = Tap::new(1);
    let echo = kernel_echo(listen_any(5101));
    let impair = ["--impair-rx", IMPAIR_RX, "--impair-tx", IMPAIR_TX];
    let uwarp = source_to(&tap, 5101, bytes, &impair);
    tap.up();
    let (status, reports, stderr) = uwarp.finish();
    let kernel = echo.join().expect("the echo ends");
    let report = the_report(&reports, &stderr);
    assert!(status.success(), "{report}\n{stderr}");
    assert_eq!(report["end"], "closed");
    assert_eq!(report["bytes_sent"], bytes);
    assert_eq!(report["bytes_received"], bytes);
    assert_eq!(kernel.received, bytes);
    assert_eq!(report["sha256_sent"], kernel.received_sha256.as_str());
    assert_eq!(report["sha256_received"], kernel.sent_sha256.as_str());
    assert!(
        report["retransmissions"].as_u64().unwrap() > 0,
        "the impairment dropped frames, so uwarp retransmitted: {report}"
    );
    // net_tap offloads TCP checksums: the kernel took every one of those
    // frames, retransmissions and impairment duplicates included, with
    // the checksums the device completed.
    assert!(
        report["host_checksums_offloaded"].as_u64().unwrap() > 0,
        "{report}"
    );
}

#[test]
fn kernel_client_moves_a_gigabyte_each_way_through_a_uwarp_echo() {
    let Some(_serial) = serial() else { return };
    let bytes = big_transfer();
    let tap = Tap::new(2);
    let mut uwarp = Uwarp::start(
        &tap,
        &[
            "--role",
            "echo",
            "--listen",
            "5201",
            "--impair-rx",
            IMPAIR_RX,
            "--impair-tx",
            IMPAIR_TX,
        ],
    );
    uwarp.wait_for("listening on");
    tap.up();
    let capture = Handshake::capture(&tap.name);
    let kernel = kernel_source(SocketAddr::from((tap.uwarp_ip(), 5201)), bytes);
    let syns = capture.finish();
    let (status, reports, stderr) = uwarp.finish();
    let report = the_report(&reports, &stderr);
    assert!(status.success(), "{report}\n{stderr}");
    assert_eq!(report["end"], "closed");
    assert_eq!((kernel.sent, kernel.received), (bytes, bytes));
    assert_eq!(report["bytes_received"], bytes);
    assert_eq!(report["sha256_received"], kernel.sent_sha256.as_str());
    assert_eq!(report["sha256_sent"], kernel.received_sha256.as_str());
    assert_eq!(kernel.sent_sha256, kernel.received_sha256);
    // The kernel's SYN and uwarp's SYN-ACK both carry every option.
    assert_eq!(syns.len(), 2, "{syns:?}");
    for syn in &syns {
        assert!(syn.sack_permitted && syn.timestamps, "{syn:?}");
        assert!(syn.window_scale.is_some(), "{syn:?}");
        assert!(syn.mss.is_some(), "{syn:?}");
    }
    assert!(!syns[0].ack && syns[1].ack, "SYN then SYN-ACK: {syns:?}");
    assert_eq!(syns[1].source, tap.uwarp_ip().to_string());
    assert_eq!(syns[1].window_scale, Some(7), "uwarp's default shift");
}

/// One SYN as tshark decoded it.
#[derive(Debug)]
struct Syn {
    source: String,
    ack: bool,
    sack_permitted: bool,
    timestamps: bool,
    window_scale: Option<u8>,
    mss: Option<u16>,
}

/// tshark capturing the first two SYNs on an interface.
struct Handshake {
    child: Child,
    file: PathBuf,
}

impl Handshake {
    fn capture(iface: &str) -> Self {
        let file = std::env::temp_dir().join(format!("uwarp-syn-{}.pcap", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let mut child = Command::new("tshark")
            .args(["-i", iface, "-f", "tcp[tcpflags] & tcp-syn != 0", "-c", "2"])
            .arg("-w")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tshark runs (scripts/setup.sh installs it)");
        // Drained until tshark exits: a closed pipe would kill it.
        let said = lines_of(child.stderr.take().expect("piped"));
        // "Capturing on" comes before the capture really starts; "Capture
        // started" after.
        while let Ok(line) = said.recv_timeout(Duration::from_secs(10)) {
            if line.contains("Capture started") {
                break;
            }
        }
        Handshake { child, file }
    }

    fn finish(mut self) -> Vec<Syn> {
        let status = self.child.wait().expect("tshark ends after two SYNs");
        assert!(status.success(), "tshark failed");
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&self.file)
            .args(["-T", "fields", "-E", "separator=;"])
            .args(["-e", "ip.src", "-e", "tcp.flags.ack"])
            .args([
                "-e",
                "tcp.options.sack_perm",
                "-e",
                "tcp.options.timestamp.tsval",
            ])
            .args([
                "-e",
                "tcp.options.wscale.shift",
                "-e",
                "tcp.options.mss_val",
            ])
            .output()
            .expect("tshark reads the capture");
        let _ = std::fs::remove_file(&self.file);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split(';').collect();
                Syn {
                    source: f[0].to_owned(),
                    ack: f[1] == "1" || f[1] == "True",
                    sack_permitted: !f[2].is_empty(),
                    timestamps: !f[3].is_empty(),
                    window_scale: f[4].parse().ok(),
                    mss: f[5].parse().ok(),
                }
            })
            .collect()
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn closed_ports_are_refused_both_ways() {
    let Some(_serial) = serial() else { return };
    let tap = Tap::new(3);
    // uwarp to a kernel port nobody listens on: the kernel's RST.
    let uwarp = source_to(&tap, 5302, 1 << 20, &[]);
    tap.up();
    let (status, reports, stderr) = uwarp.finish();
    let report = the_report(&reports, &stderr);
    assert!(!status.success(), "a refused connection fails the run");
    assert_eq!(report["end"], "reset", "{report}");
    assert_eq!(report["bytes_sent"], 0);

    // The kernel to a uwarp port nobody listens on: uwarp's RST.
    let mut uwarp = Uwarp::start(&tap, &["--role", "sink", "--listen", "5301"]);
    uwarp.wait_for("listening on");
    tap.up();
    let refused = TcpStream::connect_timeout(
        &SocketAddr::from((tap.uwarp_ip(), 5303)),
        Duration::from_secs(10),
    );
    let err = refused.expect_err("nobody listens on 5303");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    // The listener still works.
    let mut stream = TcpStream::connect((tap.uwarp_ip(), 5301)).expect("connects");
    stream.write_all(b"still here").expect("sends");
    stream.shutdown(std::net::Shutdown::Write).expect("FIN");
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("uwarp's FIN");
    let (status, reports, stderr) = uwarp.finish();
    let report = the_report(&reports, &stderr);
    assert!(status.success(), "{stderr}");
    assert_eq!(report["end"], "closed");
    assert_eq!(report["bytes_received"], 10);
    assert!(rest.is_empty());
}

/// Sets socket option `name` of level `SOL_SOCKET` on `fd` to `value`.
fn set_socket_option<T>(fd: &impl AsRawFd, name: libc::c_int, value: &T) {
    // SAFETY: a valid socket and a value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt({name})");
}

/// Sets `SO_LINGER` to zero, so that closing `stream` sends a RST.
fn linger_zero(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_socket_option(stream, libc::SO_LINGER, &linger);
}

#[test]
fn a_kernel_peer_that_aborts_mid_transfer_resets_uwarp() {
    let Some(_serial) = serial() else { return };
    let tap = Tap::new(4);
    let listener = listen_any(5401);
    let aborter = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("uwarp connects");
        let mut buf = vec![0u8; 1 << 20];
        stream.read_exact(&mut buf).expect("a megabyte arrives");
        linger_zero(&stream);
        drop(stream);
    });
    let uwarp = source_to(&tap, 5401, 1 << 30, &[]);
    tap.up();
    let (status, reports, stderr) = uwarp.finish();
    aborter.join().expect("the kernel side ends");
    let report = the_report(&reports, &stderr);
    assert!(!status.success());
    assert_eq!(report["end"], "reset", "{report}");
    let sent = report["bytes_sent"].as_u64().unwrap();
    assert!((1 << 20..1 << 30).contains(&sent), "{report}");
}

/// Sets the socket's receive buffer (before `listen`, so the window scale
/// the kernel offers fits it).
fn small_receive_buffer(listener: &TcpListener, bytes: i32) {
    set_socket_option(listener, libc::SO_RCVBUF, &bytes);
}

#[test]
fn a_kernel_peer_that_stops_reading_gets_window_probes_and_all_the_data() {
    let Some(_serial) = serial() else { return };
    let tap = Tap::new(5);
    let bytes: u64 = 16 << 20;
    let listener = listen_any(5501);
    small_receive_buffer(&listener, 32 * 1024);
    let sleeper = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("uwarp connects");
        // Not reading: the window fills and closes.
        std::thread::sleep(Duration::from_secs(3));
        drain(&mut stream, false)
    });
    let uwarp = source_to(&tap, 5501, bytes, &[]);
    tap.up();
    let (status, reports, stderr) = uwarp.finish();
    let (received, digest) = sleeper.join().expect("the kernel side ends");
    let report = the_report(&reports, &stderr);
    assert!(status.success(), "{report}\n{stderr}");
    assert_eq!(report["end"], "closed");
    assert_eq!(received, bytes);
    assert_eq!(report["sha256_sent"], digest.as_str());
    assert!(
        report["window_probes"].as_u64().unwrap() > 0,
        "the closed window was probed: {report}"
    );
}
