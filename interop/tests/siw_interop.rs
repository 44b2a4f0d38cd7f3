//! uwarp's rping against Linux soft-iWARP (siw) and rdma-core's `rping`,
//! in the VM of `scripts/siw-vm/` (Debian 12's kernel, siw.ko built out of
//! tree, rdma-core from Debian), over a tap: uwarp's kernel-socket
//! transport on the host at 10.79.0.1, or uwarp's TCP over DPDK on
//! net_af_packet on the host's end of the tap at 10.79.0.3; siw at
//! 10.79.0.2.
//!
//! Every scenario runs on both transports (modules `socket` and `dpdk`).
//! `rping_crc_off`, `rping_crc_on`, `peer_to_peer_write_rtr` and
//! `peer_to_peer_read_rtr` boot the VM once with one set of siw's module
//! parameters and run, at 64, 3000 and 65535 octets (rping's largest),
//! 30 pings each, data validated by both sides (`-V`):
//!
//! 1. siw's `rping -s` once per size, each served to uwarp's rping client
//!    (the VM announces each server; the client retries while the port
//!    still refuses);
//! 2. siw's `rping -c` once per size against uwarp's rping server, which
//!    counts the pings it served.
//!
//! uwarp's side counts the pings and checks the negotiated MPA settings
//! (CRCs, the peer-to-peer RTR type); siw's rping must not report a data
//! mismatch. (rping's exit status is not used: it races with its own
//! connection manager thread at exit, see `Vm::finish`.)
//!
//! `revision_1` checks MPA revision 1 in both roles, where siw's server
//! cannot Read (siw's quirk: no Read credits on its passive side).
//! `terminates_both_ways` provokes a Terminate each way with a wrong STag.
//!
//! uwarp's client holds its first FPDU (its first Send, or in
//! peer-to-peer mode the RTR) back 200 ms after siw's Reply (siw's accept
//! race, see docs/siw-interop.md).
//!
//! Needs root (the tap) and qemu (`scripts/setup.sh`); the first run builds
//! the VM (`scripts/siw-vm/build.sh`: Debian packages and siw.ko, about a
//! minute), later runs reuse it. The VM boots in about 8 s without KVM.

mod siw_vm;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use siw_vm::{
    announced_server, console_log, free_port, listening_device, Vm, DPDK_IP, HOST_IP, VM_IP,
};

use uwarp::{
    Device, Error, Listener, QpEvent, Revision, Rtr, RtrSet, TermError, WcOpcode, WcStatus,
};
use uwarp_interop::rping::{self, Options, RpingError};
use uwarp_testing::{root_or_skip, serial};

/// Ping sizes: small, larger than one TCP segment, rping's largest.
const SIZES: [usize; 3] = [64, 3000, rping::MAX_SIZE];
const PINGS: u64 = 30;
/// Any one rping step (a completion, a connection) under TCG.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long uwarp's client keeps retrying a refused connection (siw's
/// next `rping -s` is starting).
const LISTEN_WAIT: Duration = Duration::from_secs(30);
/// How long uwarp's client holds its first FPDU back after the Reply.
const FIRST_FPDU_DELAY: Duration = Duration::from_millis(200);

/// One VM boot's settings.
struct Case {
    /// uwarp runs on DPDK (net_af_packet on the tap) instead of the
    /// kernel's sockets.
    dpdk: bool,
    /// siw.ko's module parameters.
    siw: &'static str,
    /// uwarp asks for CRCs (as client and as server).
    crc: bool,
    /// siw serves uwarp's client, which offers these RTR types (`None`:
    /// the client-server model).
    siw_servers: Option<Option<RtrSet>>,
    /// siw's client pings uwarp's server, and this RTR results (`None`:
    /// the client-server model).
    siw_clients: Option<Option<Rtr>>,
}

fn options(size: usize, crc: bool, p2p: Option<RtrSet>) -> Options {
    Options {
        size,
        count: PINGS,
        validate: true,
        crc,
        p2p,
        timeout: Some(STEP_TIMEOUT),
        first_fpdu_delay: FIRST_FPDU_DELAY,
        ..Options::default()
    }
}

/// uwarp's client against the VM's `rping -s` once it is announced,
/// retrying while its port still refuses.
fn try_siw_server(
    vm: &mut Vm,
    device: &Device,
    options: &Options,
) -> Result<rping::ClientReport, RpingError> {
    vm.expect(&format!("uwsiw-test: serving {}", options.size));
    let addr = SocketAddr::V4(SocketAddrV4::new(VM_IP, rping::DEFAULT_PORT));
    let deadline = Instant::now() + LISTEN_WAIT;
    loop {
        vm.assert_running();
        match rping::run_client(device, addr, options) {
            Err(RpingError::Api(Error::Io(err)))
                if err.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// [`try_siw_server`], which must succeed.
fn ping_siw_server(vm: &mut Vm, device: &Device, options: &Options) -> rping::ClientReport {
    try_siw_server(vm, device, options)
        .unwrap_or_else(|err| panic!("uwarp's client, {} octets: {err}", options.size))
}

/// uwarp's address as siw sees it: on DPDK (`dpdk`) or on the host.
fn uwarp_ip(dpdk: bool) -> Ipv4Addr {
    if dpdk {
        DPDK_IP
    } else {
        HOST_IP
    }
}

/// siw's `rping -s` serving pings of `size` (a number or a shell
/// variable), announced once it listens.
fn siw_server(size: &str) -> String {
    announced_server(
        &format!("rping -s -a {VM_IP} -V -S {size}"),
        rping::DEFAULT_PORT,
        size,
    )
}

/// The VM's command: siw's servers, each announced, then siw's clients
/// against uwarp's server on `port`.
fn vm_command(case: &Case, port: u16) -> String {
    let sizes = SIZES.map(|size| size.to_string()).join(" ");
    let mut parts = Vec::new();
    if case.siw_servers.is_some() {
        parts.push(format!("for s in {sizes}; do {}; done", siw_server("$s")));
    }
    if case.siw_clients.is_some() {
        let uwarp = uwarp_ip(case.dpdk);
        parts.push(format!(
            "for s in {sizes}; do rping -c -a {uwarp} -p {port} -V -C {PINGS} -S $s; done"
        ));
    }
    parts.push("true".to_string());
    parts.join("; ")
}

/// uwarp's device (on DPDK when `dpdk`) and its listener on `port`, set
/// up while the VM boots; returns once the VM is ready.
fn listen_beside(vm: &mut Vm, dpdk: bool, port: u16) -> (Device, Listener) {
    let ready = listening_device(vm, dpdk, port);
    vm.expect("uwsiw: ready");
    ready
}

/// Boots the VM for `case` and runs its directions at every size.
fn interop(case: &Case) {
    if !root_or_skip("the siw VM (its tap)") {
        return;
    }
    let _serial = serial();
    let port = free_port();
    let mut vm = Vm::start(case.siw, &vm_command(case, port));
    let (device, listener) = listen_beside(&mut vm, case.dpdk, port);

    if let Some(p2p) = case.siw_servers {
        for size in SIZES {
            let report = ping_siw_server(&mut vm, &device, &options(size, case.crc, p2p));
            assert_eq!(report.pings, PINGS, "uwarp's client, {size} octets");
            let negotiated = report.connection.negotiated;
            assert_eq!(negotiated.crc, case.crc, "CRCs with siw's server");
            // siw's server prefers the Write RTR (siw_cm.c, siw_proc_mpareq).
            let rtr = p2p.map(|offered| if offered.write { Rtr::Write } else { Rtr::Read });
            assert_eq!(negotiated.rtr, rtr, "the RTR siw's server chose");
        }
    }
    if let Some(rtr) = case.siw_clients {
        for size in SIZES {
            let report = rping::serve_one(&device, &listener, &options(size, case.crc, None))
                .unwrap_or_else(|err| panic!("uwarp's server, {size} octets: {err}"));
            assert_eq!(report.pings, PINGS, "uwarp's server, {size} octets");
            let negotiated = report.connection.negotiated;
            assert_eq!(negotiated.crc, case.crc, "CRCs with siw's client");
            assert_eq!(negotiated.rtr, rtr, "the RTR with siw's client");
        }
    }
    vm.finish();
}

/// siw's rping in both roles against uwarp's, CRCs off.
fn crc_off(dpdk: bool) {
    interop(&Case {
        dpdk,
        siw: "",
        crc: false,
        siw_servers: Some(None),
        siw_clients: Some(None),
    });
}

/// siw's rping in both roles against uwarp's, CRCs on.
fn crc_on(dpdk: bool) {
    interop(&Case {
        dpdk,
        siw: "mpa_crc_required=1",
        crc: true,
        siw_servers: Some(None),
        siw_clients: Some(None),
    });
}

/// Peer-to-peer mode with `rtr` the only RTR type on offer: siw's client
/// offers it to uwarp's server, and uwarp's client offers it to siw's
/// server.
fn peer_to_peer(dpdk: bool, rtr: Rtr) {
    let siw = match rtr {
        Rtr::Write => "peer_to_peer=1 rtr_read=0",
        Rtr::Read => "peer_to_peer=1 rtr_write=0",
        Rtr::Send => panic!("siw never offers the Send RTR"),
    };
    interop(&Case {
        dpdk,
        siw,
        crc: false,
        siw_servers: Some(Some(RtrSet::only(rtr))),
        siw_clients: Some(Some(rtr)),
    });
}

/// Runs each scenario on both of uwarp's transports: `socket::NAME` and
/// `dpdk::NAME`.
macro_rules! on_both_transports {
    ($($name:ident => $scenario:expr),* $(,)?) => {
        mod socket {
            use super::*;
            $(#[test] fn $name() { ($scenario)(false) })*
        }
        mod dpdk {
            use super::*;
            $(#[test] fn $name() { ($scenario)(true) })*
        }
    };
}

on_both_transports!(
    rping_crc_off => crc_off,
    rping_crc_on => crc_on,
    peer_to_peer_write_rtr => |dpdk| peer_to_peer(dpdk, Rtr::Write),
    peer_to_peer_read_rtr => |dpdk| peer_to_peer(dpdk, Rtr::Read),
    revision_1 => mpa_revision_1,
    terminates_both_ways => terminates,
);

/// MPA revision 1 (RFC 5044, no IRD/ORD exchange): siw's client against
/// uwarp's server works; siw's server gives itself no Read credits in
/// revision 1, so its `rping -s` cannot post the Read of the first ping
/// and closes, which uwarp's client reports as a disconnection, not a hang.
fn mpa_revision_1(dpdk: bool) {
    if !root_or_skip("the siw VM (its tap)") {
        return;
    }
    let _serial = serial();
    let port = free_port();
    let size = 3000;
    let uwarp = uwarp_ip(dpdk);
    let command = format!(
        "{}; rping -c -a {uwarp} -p {port} -V -C {PINGS} -S {size}; true",
        siw_server(&size.to_string())
    );
    let mut vm = Vm::start("mpa_version=1", &command);
    let (device, listener) = listen_beside(&mut vm, dpdk, port);
    let revision_1 = Options {
        revision: Revision::Rfc5044,
        ..options(size, false, None)
    };

    match try_siw_server(&mut vm, &device, &revision_1) {
        Err(RpingError::Disconnected { .. }) => {}
        other => panic!("uwarp's revision-1 client against siw's server: {other:?}"),
    }

    let report = rping::serve_one(&device, &listener, &revision_1).expect("uwarp's server");
    assert_eq!(report.pings, PINGS);
    assert_eq!(report.connection.negotiated.revision, Revision::Rfc5044);
    vm.finish();
}

/// Terminates both ways (RFC 5040 section 5.2, an invalid STag): uwarp's
/// client advertises an STag it never registered (`bad_stag`), so siw's
/// server's RDMA Read is refused by uwarp with a Terminate in the RFC 5040
/// layout, which siw's kernel reports ("got TERMINATE") and siw's rping
/// sees as a failed Read before it closes;
/// then uwarp's server reads siw's client's buffer with a wrong STag, and
/// siw's Terminate (its own little-endian control word) fails uwarp's
/// Read with the error it names.
fn terminates(dpdk: bool) {
    if !root_or_skip("the siw VM (its tap)") {
        return;
    }
    let _serial = serial();
    let port = free_port();
    let uwarp = uwarp_ip(dpdk);
    let size = 64;
    let command = format!(
        "{}; rping -c -a {uwarp} -p {port} -V -C 1 -S {size}; true",
        siw_server(&size.to_string())
    );
    let mut vm = Vm::start("", &command);
    let (device, listener) = listen_beside(&mut vm, dpdk, port);
    let bad = Options {
        bad_stag: true,
        ..options(size, false, None)
    };

    match try_siw_server(&mut vm, &device, &bad) {
        Err(RpingError::Terminated(QpEvent::TerminateSent(TermError::RdmapInvalidStag))) => {}
        other => panic!("uwarp's client advertising a wrong STag to siw's server: {other:?}"),
    }
    // siw's rping server saw its Read fail (its queue pair in ERROR).
    vm.expect("wait for RDMA_READ_COMPLETE state 10");
    match rping::serve_one(&device, &listener, &bad) {
        Err(RpingError::Completion(wc)) => {
            assert_eq!(wc.opcode, WcOpcode::Read, "{wc:?}");
            assert_eq!(wc.status, WcStatus::RemoteAccessError, "{wc:?}");
            assert_eq!(wc.terminate, Some(TermError::RdmapInvalidStag), "{wc:?}");
        }
        other => panic!("uwarp's server reading siw's client with a wrong STag: {other:?}"),
    }
    vm.finish();
    let console = console_log();
    let got: Vec<&str> = console
        .lines()
        .filter_map(|line| line.split_once("] ").map(|(_, message)| message))
        .filter(|message| message.starts_with("siw: got TERMINATE"))
        .collect();
    // siw reads the control word in its own layout (its bit-fields are
    // little-endian, see tests/data/siw/README.md): RDMAP (layer 0),
    // remote protection (type 1) comes out with the nibbles swapped.
    assert_eq!(
        got,
        ["siw: got TERMINATE. layer 1, type 0, code 0"],
        "siw's console"
    );
}
