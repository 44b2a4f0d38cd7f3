//! uwarp's perftest-compatible mode (`uwarp_interop::perftest`) against
//! perftest 4.5's `ib_write_bw -R`, `ib_read_bw -R` and `ib_send_bw -R`
//! on Linux soft-iWARP (siw), in the VM of `scripts/siw-vm/`, over a tap:
//! uwarp's kernel-socket transport on the host at 10.79.0.1, or uwarp's
//! TCP over DPDK on net_af_packet on the host's end of the tap at
//! 10.79.0.3; siw at 10.79.0.2.
//!
//! One VM boot per transport runs every test at 64 KiB and at 64 octets,
//! [`ITERS`] messages each:
//!
//! 1. siw's server (`ib_*_bw -R`), announced, served to uwarp's client
//!    (which retries while the port still refuses);
//! 2. siw's client (`ib_*_bw -R ... UWARP`) against uwarp's server.
//!
//! Both sides must agree with what crossed: perftest prints the size and
//! iterations (and, where it prints the peer's report, uwarp's numbers),
//! exits 0, and uwarp's side checks its own count (the octets its Reads
//! placed, the octets siw's Writes or Sends placed, the Read Requests it
//! answered).
//!
//! uwarp's client waits 200 ms after each connection before its first
//! FPDU (siw's accept race, see docs/siw-interop.md).
//!
//! Needs root (the tap) and qemu (`scripts/setup.sh`); the first run builds
//! the VM (`scripts/siw-vm/build.sh`), later runs reuse it.

mod siw_vm;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use siw_vm::{
    announced_server, free_port, listening_device, report_status, Vm, DPDK_IP, HOST_IP, VM_IP,
};
use uwarp_testing::{root_or_skip, serial};

use uwarp::{Device, Error};
use uwarp_interop::perftest::{self, Options, PerftestError, Report, Test};

/// The tests, and their perftest names.
const TESTS: [(Test, &str); 3] = [
    (Test::Write, "write"),
    (Test::Read, "read"),
    (Test::Send, "send"),
];
/// Message sizes: several TCP segments per message, and one small.
const SIZES: [u32; 2] = [65536, 64];
/// Messages of each run (TCG is slow: 64 KiB × 200 is 13 MB).
const ITERS: u64 = 200;
/// Where siw's servers listen in the VM.
const SIW_PORT: u16 = 18515;
/// Any one step under TCG.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long uwarp's client keeps retrying a refused connection (siw's
/// next server is starting).
const LISTEN_WAIT: Duration = Duration::from_secs(30);

fn options(test: Test, size: u32) -> Options {
    Options {
        size,
        iters: ITERS,
        timeout: STEP_TIMEOUT,
        wait: Some(Duration::from_secs(u64::from(siw_vm::VM_TIMEOUT_SECS))),
        first_fpdu_delay: Duration::from_millis(200),
        ..Options::new(test)
    }
}

/// A result line of perftest's table: `#bytes #iterations BW-peak
/// BW-average MsgRate`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BwLine {
    bytes: u64,
    iters: u64,
    peak: f64,
    average: f64,
    /// perftest could time its own measurement (see [`vm_command`]).
    calibrated: bool,
}

impl BwLine {
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [bytes, iters, peak, average, rate] = fields[..] else {
            return None;
        };
        rate.parse::<f64>().ok()?;
        Some(Self {
            bytes: bytes.parse().ok()?,
            iters: iters.parse().ok()?,
            peak: peak.parse().ok()?,
            average: average.parse().ok()?,
            calibrated: true,
        })
    }
}

/// The next run's result line in the VM's output, then perftest's exit
/// status, which must be 0.
fn siw_result(vm: &mut Vm, name: &str, size: u32) -> BwLine {
    let what = format!("{name} {size}");
    let mut calibrated = true;
    let mut line = vm.expect_with(&format!("ib_{what}'s result"), |line| {
        assert!(
            !line.starts_with("uwsiw-test:"),
            "ib_{name}_bw -s {size} printed no result: {line}"
        );
        calibrated &= !line.starts_with("Correlation coefficient");
        BwLine::parse(line)
    });
    line.calibrated = calibrated;
    let status = vm.status_of(&what);
    assert_eq!(status, "0", "ib_{name}_bw -s {size} failed");
    assert_eq!(
        (line.bytes, line.iters),
        (u64::from(size), ITERS),
        "ib_{name}_bw"
    );
    line
}

/// perftest's two decimals of `value`.
fn two_decimals(value: f64) -> String {
    format!("{value:.2}")
}

/// Checks uwarp's report of a run against siw's result line: the same
/// size and iterations, uwarp's count of what crossed, and where one side
/// prints the other's report, the same numbers.
fn check(report: &Report, siw: BwLine, size: u32) {
    let test = report.test;
    assert_eq!(
        (report.printed.size, report.printed.iters),
        (siw.bytes, siw.iters),
        "{test:?}"
    );
    let expected = match (report.role, test) {
        (perftest::Role::Client, Test::Write | Test::Send) => ITERS,
        (perftest::Role::Server, Test::Read) => ITERS,
        _ => u64::from(size) * ITERS,
    };
    assert_eq!(
        report.verified.count, expected,
        "{test:?}: {}",
        report.verified.what
    );
    assert_eq!(report.peer_version, perftest::wire::VERSION);
    // Whoever measured measured something (siw's -F reports zeros when
    // it could not time itself).
    if report.measured_by == report.role {
        assert!(report.printed.bw_avg > 0.0, "{test:?}: {report:?}");
    }
    if report.measured_by != report.role || test == Test::Send {
        assert!(siw.average > 0.0 || !siw.calibrated, "{test:?}: {siw:?}");
    }
    if test != Test::Send {
        // The server printed the client's report.
        let printed = [report.printed.bw_peak, report.printed.bw_avg].map(two_decimals);
        assert_eq!(
            printed,
            [siw.peak, siw.average].map(two_decimals),
            "{test:?}"
        );
    }
    assert_eq!(
        report.counters.crc_errors + report.counters.terminates_sent,
        0
    );
}

/// uwarp's client against the VM's server of `test`, once it is
/// announced, retrying while its port still refuses.
fn against_siw_server(vm: &mut Vm, device: &Device, test: Test, name: &str, size: u32) -> Report {
    vm.expect(&format!("uwsiw-test: serving {name} {size}"));
    let addr = SocketAddr::V4(SocketAddrV4::new(VM_IP, SIW_PORT));
    let deadline = Instant::now() + LISTEN_WAIT;
    loop {
        vm.assert_running();
        match perftest::run_client(device, addr, &options(test, size)) {
            Err(PerftestError::Api(Error::Io(err)))
                if err.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => {
                return other
                    .unwrap_or_else(|err| panic!("uwarp's {name} client, {size} octets: {err}"))
            }
        }
    }
}

/// The VM's command: siw's servers, each announced, then siw's clients
/// against uwarp's server at `uwarp`:`port`; each run's exit status
/// after it.
///
/// perftest times itself in CPU cycles and checks its clock against
/// `gettimeofday` when it reports; on a loaded host the TCG VM's clocks
/// sometimes disagree ("Correlation coefficient r^2: 0.86 < 0.9", "Can't
/// produce a report") and perftest exits 1 in the middle of the protocol.
/// `-F` makes it report zeros instead and go on.
fn vm_command(uwarp: Ipv4Addr, port: u16) -> String {
    let names = TESTS.map(|(_, name)| name).join(" ");
    let sizes = SIZES.map(|size| size.to_string()).join(" ");
    let done = report_status("$t $s", "$?");
    let server = announced_server(
        &format!("ib_${{t}}_bw -R -F -p {SIW_PORT} -s $s -n {ITERS}"),
        SIW_PORT,
        "$t $s",
    );
    format!(
        "for t in {names}; do for s in {sizes}; do \
           {server}; {done}; \
         done; done; \
         for t in {names}; do for s in {sizes}; do \
           ib_${{t}}_bw -R -F -p {port} -s $s -n {ITERS} {uwarp}; {done}; \
         done; done; true"
    )
}

/// Boots the VM and runs every test in both directions, uwarp on DPDK
/// (`dpdk`) or on the kernel's sockets.
///
/// uwarp listens before the VM's command starts: on the socket transport
/// on every address (the tap does not exist yet), on DPDK once run.sh
/// has made the tap, while the VM boots.
fn interop(dpdk: bool) {
    if !root_or_skip("the siw VM (its tap)") {
        return;
    }
    let _serial = serial();
    let port = free_port();
    let uwarp = if dpdk { DPDK_IP } else { HOST_IP };
    let mut vm = Vm::start("", &vm_command(uwarp, port));
    let (device, listener) = listening_device(&mut vm, dpdk, port);
    vm.expect("uwsiw: ready");

    for (test, name) in TESTS {
        for size in SIZES {
            let report = against_siw_server(&mut vm, &device, test, name, size);
            let siw = siw_result(&mut vm, name, size);
            eprintln!(
                "uwarp's {name} client, {size} octets: {:?}; siw's server: {siw:?}",
                report.printed
            );
            check(&report, siw, size);
        }
    }
    for (test, name) in TESTS {
        for size in SIZES {
            let report = perftest::serve(&device, &listener, &options(test, size))
                .unwrap_or_else(|err| panic!("uwarp's {name} server, {size} octets: {err}"));
            let siw = siw_result(&mut vm, name, size);
            eprintln!(
                "siw's {name} client, {size} octets: {siw:?}; uwarp's server: {:?}",
                report.printed
            );
            check(&report, siw, size);
        }
    }
    vm.finish();
}

#[test]
fn perftest_with_siw_over_kernel_sockets() {
    interop(false);
}

#[test]
fn perftest_with_siw_over_dpdk() {
    interop(true);
}
