//! The rping example's protocol over loopback: in one process through
//! `uwarp_interop::rping`, and in two processes with the `rping` example
//! binary as the server (and as the client).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use uwarp::{Device, DeviceConfig, Error, Revision, Rtr, RtrSet};
use uwarp::{QpEvent, TermError, WcOpcode, WcStatus};
use uwarp_interop::rping::{self, Options, RdmaInfo, RpingError};

const PINGS: u64 = 100;
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

fn options(size: usize) -> Options {
    Options {
        size,
        count: PINGS,
        validate: true,
        timeout: Some(STEP_TIMEOUT),
        ..Options::default()
    }
}

/// Runs a server and a client, each on its own device, with their
/// options; returns how each ended.
fn run_pair(
    client: &Options,
    server: &Options,
) -> (
    Result<rping::ClientReport, RpingError>,
    Result<rping::ServerReport, RpingError>,
) {
    let server_device = Device::open(DeviceConfig::default()).unwrap();
    let listener = server_device.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let client_options = client.clone();
    let client = std::thread::spawn(move || {
        let device = Device::open(DeviceConfig::default()).unwrap();
        rping::run_client(&device, addr, &client_options)
    });
    let served = rping::serve_one(&server_device, &listener, server);
    (client.join().unwrap(), served)
}

/// Runs a server and a client, each on its own device, with their
/// options; returns both reports after checking the ping counts.
fn ping_pong(client: &Options, server: &Options) -> (rping::ClientReport, rping::ServerReport) {
    let (client, server) = run_pair(client, server);
    let client = client.expect("the client");
    let server = server.expect("the server");
    assert_eq!(client.pings, PINGS);
    assert_eq!(server.pings, PINGS);
    (client, server)
}

#[test]
fn rdma_info_is_rping_rdma_info_in_network_order() {
    let info = RdmaInfo {
        buf: 0x0102_0304_0506_0708,
        rkey: 0x1122_3344,
        size: 0x0000_0040,
    };
    let bytes = info.to_bytes();
    assert_eq!(
        bytes,
        [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0x40]
    );
    assert_eq!(RdmaInfo::from_bytes(&bytes), Some(info));
    assert_eq!(RdmaInfo::from_bytes(&bytes[..15]), None);
    assert_eq!(RdmaInfo::from_bytes(&[0; 17]), None);
}

#[test]
fn ping_pattern_is_rpings() {
    let mut buf = [0u8; 64];
    rping::fill_ping(&mut buf, 0);
    assert_eq!(
        rping::c_string(&buf),
        b"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
    );
    assert_eq!(buf[63], 0);
    rping::fill_ping(&mut buf, 1);
    assert!(rping::c_string(&buf).starts_with(b"rdma-ping-1: BCD"));
    // The start character advances per ping and wraps from 'z' to 'A'.
    rping::fill_ping(&mut buf, 57);
    assert!(rping::c_string(&buf).starts_with(b"rdma-ping-57: zABC"));
    rping::fill_ping(&mut buf, 58);
    assert!(rping::c_string(&buf).starts_with(b"rdma-ping-58: ABC"));
    // Within one ping the characters wrap too.
    let mut long = vec![0u8; 200];
    rping::fill_ping(&mut long, 0);
    let text = b"rdma-ping-0: ".len();
    assert_eq!(long[text + 57], b'z');
    assert_eq!(long[text + 58], b'A');
    // The smallest size holds the longest text and the NUL.
    let mut small = [0u8; rping::MIN_SIZE];
    rping::fill_ping(&mut small, i32::MAX as u64);
    // 2147483647 % 58 = 7: the pattern starts at 'H'.
    assert_eq!(rping::c_string(&small), b"rdma-ping-2147483647: HIJ");
}

#[test]
fn sizes_below_rpings_minimum_are_refused() {
    let device = Device::open(DeviceConfig::default()).unwrap();
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let err = rping::run_client(&device, addr, &options(rping::MIN_SIZE - 1)).unwrap_err();
    assert!(matches!(err, rping::RpingError::BadSize(25)), "{err}");
}

#[test]
fn ping_64_octets() {
    let (client, server) = ping_pong(&options(64), &options(64));
    assert_eq!(client.connection.negotiated.revision, Revision::Enhanced);
    assert!(!client.connection.negotiated.crc);
    assert_eq!(client.connection.negotiated.rtr, None);
    // rping's conn_param: IRD 1, ORD 1; the server may Read once at a time.
    assert_eq!(client.connection.negotiated.ird, 1);
    assert_eq!(server.connection.negotiated.ord, 1);
}

#[test]
fn ping_3000_octets() {
    ping_pong(&options(3000), &options(3000));
}

#[test]
fn ping_64_kib() {
    // rping's command line stops at 64 KiB - 1; the library does not.
    ping_pong(&options(64 * 1024), &options(64 * 1024));
    ping_pong(&options(rping::MAX_SIZE), &options(rping::MAX_SIZE));
}

#[test]
fn ping_with_crc() {
    for size in [64, 3000, 64 * 1024] {
        let crc = Options {
            crc: true,
            ..options(size)
        };
        // Either side asking is enough.
        let (client, server) = ping_pong(&crc, &options(size));
        assert!(client.connection.negotiated.crc);
        assert!(server.connection.negotiated.crc);
        let (client, _) = ping_pong(&options(size), &crc);
        assert!(client.connection.negotiated.crc);
    }
}

#[test]
fn ping_with_markers() {
    let markers = Options {
        markers: true,
        crc: true,
        ..options(3000)
    };
    let (client, server) = ping_pong(&markers, &markers);
    assert!(client.connection.negotiated.markers_tx);
    assert!(client.connection.negotiated.markers_rx);
    assert!(server.connection.negotiated.markers_tx);
    // Markers one way only: the client asks, the server does not.
    let (client, server) = ping_pong(
        &Options {
            markers: true,
            ..options(3000)
        },
        &options(3000),
    );
    assert!(client.connection.negotiated.markers_rx);
    assert!(!client.connection.negotiated.markers_tx);
    assert!(server.connection.negotiated.markers_tx);
}

#[test]
fn ping_with_mpa_revision_1() {
    for size in [64, 3000, 64 * 1024] {
        let rev1 = Options {
            revision: Revision::Rfc5044,
            ..options(size)
        };
        // An enhanced server answers a revision-1 Request in revision 1.
        let (client, server) = ping_pong(&rev1, &options(size));
        assert_eq!(client.connection.negotiated.revision, Revision::Rfc5044);
        assert_eq!(server.connection.negotiated.revision, Revision::Rfc5044);
        assert_eq!(client.connection.negotiated.peer_ird, None);
        // Both sides revision 1.
        let (client, _) = ping_pong(&rev1, &rev1);
        assert_eq!(client.connection.negotiated.revision, Revision::Rfc5044);
    }
}

/// `bad_stag` on either side: the server's first RDMA Read names an STag
/// the client never registered (the server used a wrong one, or the
/// client advertised it); the client's side answers with a Terminate (RFC
/// 5040 section 5.2), which fails the server's Read with the error it
/// carries, the client reports the Terminate it sent, and both close.
#[test]
fn a_wrong_stag_on_either_side_ends_in_a_terminate() {
    let bad = Options {
        bad_stag: true,
        ..options(64)
    };
    for (client_options, server_options) in [(&options(64), &bad), (&bad, &options(64))] {
        let (client, server) = run_pair(client_options, server_options);
        match server {
            Err(RpingError::Completion(wc)) => {
                assert_eq!(wc.opcode, WcOpcode::Read);
                assert_eq!(wc.status, WcStatus::RemoteAccessError);
                assert_eq!(wc.terminate, Some(TermError::RdmapInvalidStag));
            }
            other => panic!("the server: {other:?}"),
        }
        assert!(
            matches!(
                client,
                Err(RpingError::Terminated(QpEvent::TerminateSent(
                    TermError::RdmapInvalidStag
                )))
            ),
            "the client: {client:?}"
        );
    }
}

fn ping_with_rtr(rtr: Rtr) {
    for size in [64, 3000, 64 * 1024] {
        let p2p = Options {
            p2p: Some(RtrSet::only(rtr)),
            ..options(size)
        };
        let (client, server) = ping_pong(&p2p, &options(size));
        assert_eq!(client.connection.negotiated.rtr, Some(rtr));
        assert_eq!(server.connection.negotiated.rtr, Some(rtr));
        // A server restricted to the same type.
        let (client, _) = ping_pong(&p2p, &p2p);
        assert_eq!(client.connection.negotiated.rtr, Some(rtr));
    }
}

#[test]
fn ping_peer_to_peer_write_rtr() {
    ping_with_rtr(Rtr::Write);
}

#[test]
fn ping_peer_to_peer_read_rtr() {
    ping_with_rtr(Rtr::Read);
}

#[test]
fn ping_peer_to_peer_send_rtr() {
    ping_with_rtr(Rtr::Send);
}

#[test]
fn ping_peer_to_peer_offering_every_rtr_picks_write() {
    let all = Options {
        p2p: Some(RtrSet::ALL),
        crc: true,
        ..options(3000)
    };
    let (client, _) = ping_pong(&all, &options(3000));
    assert_eq!(client.connection.negotiated.rtr, Some(Rtr::Write));
}

#[test]
fn persistent_server_serves_clients_at_once() {
    let device = Device::open(DeviceConfig::default()).unwrap();
    let listener = device.listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr();
    let server_options = options(3000);
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let options = Options {
                size: 3000,
                count: 20 + i,
                ..options(3000)
            };
            std::thread::spawn(move || {
                let device = Device::open(DeviceConfig::default()).unwrap();
                rping::run_client(&device, addr, &options).map(|report| report.pings)
            })
        })
        .collect();
    let served = rping::serve_persistent(&device, &listener, &server_options, Some(3)).unwrap();
    let mut client_pings: Vec<u64> = clients
        .into_iter()
        .map(|client| client.join().unwrap().unwrap())
        .collect();
    let mut server_pings: Vec<u64> = served
        .into_iter()
        .map(|served| served.unwrap().pings)
        .collect();
    client_pings.sort_unstable();
    server_pings.sort_unstable();
    assert_eq!(client_pings, [20, 21, 22]);
    assert_eq!(server_pings, [20, 21, 22]);
}

/// The `rping` example binary, built first so that it is current.
fn rping_binary() -> PathBuf {
    uwarp_testing::example_binary("uwarp-interop", "rping")
}

/// A child process whose stdout lines arrive on a channel; killed if the
/// test gives up on it.
struct Process {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Process {
    fn spawn(binary: &PathBuf, args: &[&str]) -> Self {
        let mut child = Command::new(binary)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the rping example starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The server's address, from its `-d` line "listening on ADDR".
    fn listening_addr(&self) -> SocketAddr {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("the server prints its address");
            if let Some(addr) = line.strip_prefix("listening on ") {
                return addr.parse().unwrap();
            }
        }
    }

    /// Waits for the exit, killing the process after `timeout`; returns the
    /// status and everything it printed.
    fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the rping process did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
            lines.push(line);
        }
        (status, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn server_process(binary: &PathBuf, size: &str, extra: &[&str]) -> Process {
    let mut args = vec![
        "-s",
        "-a",
        "127.0.0.1",
        "-p",
        "0",
        "-S",
        size,
        "-v",
        "-d",
        "--timeout",
        "30",
    ];
    args.extend_from_slice(extra);
    Process::spawn(binary, &args)
}

#[test]
fn two_processes_example_server_and_in_test_client() {
    let binary = rping_binary();
    let server = server_process(&binary, "3000", &["--crc"]);
    let addr = server.listening_addr();
    let device = Device::open(DeviceConfig::default()).unwrap();
    let report = rping::run_client(&device, addr, &options(3000)).unwrap();
    assert_eq!(report.pings, PINGS);
    assert!(report.connection.negotiated.crc);
    let (status, lines) = server.finish(STEP_TIMEOUT);
    assert!(status.success(), "server exited with {status}");
    // With -v the server prints every ping it read, in order.
    let pings: Vec<&String> = lines
        .iter()
        .filter(|line| line.starts_with("server ping data: "))
        .collect();
    assert_eq!(pings.len(), PINGS as usize);
    assert!(pings[99].starts_with("server ping data: rdma-ping-99: "));
    assert!(lines.iter().any(|line| line == "server served 100 pings"));
}

#[test]
fn two_processes_example_server_and_example_client() {
    let binary = rping_binary();
    for extra in [
        &[][..],
        &["--mpa-rev", "1"][..],
        &["--p2p", "read"][..],
        &["--crc", "--markers"][..],
    ] {
        let server = server_process(&binary, "65535", extra);
        let addr = server.listening_addr();
        let port = addr.port().to_string();
        let mut args = vec![
            "-c",
            "-a",
            "127.0.0.1",
            "-p",
            &port,
            "-C",
            "100",
            "-S",
            "65535",
            "-V",
            "-v",
            "--timeout",
            "30",
        ];
        args.extend_from_slice(extra);
        let client = Process::spawn(&binary, &args);
        let (client_status, client_lines) = client.finish(STEP_TIMEOUT * 2);
        let (server_status, _) = server.finish(STEP_TIMEOUT);
        assert!(
            client_status.success(),
            "{extra:?}: client exited with {client_status}"
        );
        assert!(
            server_status.success(),
            "{extra:?}: server exited with {server_status}"
        );
        let pings = client_lines
            .iter()
            .filter(|line| line.starts_with("ping data: rdma-ping-"))
            .count();
        assert_eq!(pings, 100, "{extra:?}");
    }
}

#[test]
fn client_fails_when_nobody_listens() {
    let device = Device::open(DeviceConfig::default()).unwrap();
    // A port that was free a moment ago.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = rping::run_client(&device, addr, &options(64)).unwrap_err();
    assert!(matches!(err, rping::RpingError::Api(Error::Io(_))), "{err}");
}
