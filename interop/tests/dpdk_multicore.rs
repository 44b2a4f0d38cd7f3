//! Two dataplane cores per host: two uwarp hosts on DPDK's net_af_packet
//! with `qpairs=2`, whose kernel side spreads the flows over the two
//! receive queues by its own hash (PACKET_FANOUT_HASH), joined by a veth
//! pair in a network namespace the test makes for its own thread (the
//! pair goes away with the thread, on every exit path).
//!
//! - `TcpHost`s, cores on threads: connections opened from both sides
//!   carry data intact, and every core of both hosts owns some of them
//!   (each flow owned by the core whose queue its first answer came in
//!   on; segments that come in on the other core's queue are forwarded).
//! - iWARP devices, cores stepped by the application (the `Stepper`):
//!   rping's Sends, RDMA Reads and RDMA Writes, data validated, over
//!   several queue pairs.
//!
//! Needs root (namespaces, af_packet).

use uwarp_testing::dpdk_rig;

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dpdk_rig::{eal, listen_logging, lock, Apps, Log, TestApp};
use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::HostReport;
use uwarp::{CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig};
use uwarp_control::TcpHost;
use uwarp_dataplane::Device as Port;
use uwarp_interop::rping::{self, Options};

/// Dataplane cores per host, and queue pairs per af_packet device.
const CORES: u16 = 2;
/// Connections each host opens to the other.
const CONNECTIONS_EACH_WAY: usize = 8;
/// Octets each connection carries.
const OCTETS: usize = 48 * 1024;
/// The port both hosts listen on.
const PORT: u16 = 7000;

fn sh(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// Moves the calling thread into a network namespace of its own and makes
/// a veth pair there, `mca` and `mcb`: links up, checksum and
/// segmentation offloads off (so frames carry real checksums), no IPv6.
/// The namespace, and the pair with it, goes when the thread and the
/// sockets in it are gone.
fn private_veth_pair() {
    // SAFETY: unshare affects only the calling thread's namespaces.
    let ret = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(ret, 0, "unshare: {}", std::io::Error::last_os_error());
    sh(
        "ip",
        &["link", "add", "mca", "type", "veth", "peer", "name", "mcb"],
    );
    for end in ["mca", "mcb"] {
        sh(
            "sysctl",
            &["-qw", &format!("net.ipv6.conf.{end}.disable_ipv6=1")],
        );
        sh(
            "ethtool",
            &[
                "-K", end, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
            ],
        );
        sh("ip", &["link", "set", end, "up"]);
    }
}

/// The af_packet device on `end` (`mca` or `mcb`), `CORES` queue pairs,
/// in the EAL's `--vdev` syntax, named after `test` (vdev names are the
/// process's).
fn af_packet_vdev(test: &str, end: &str) -> String {
    format!("net_af_packet_{test}_{end},iface={end},qpairs={CORES}")
}

/// The af_packet ports on `mca` and `mcb` ([`af_packet_vdev`]).
fn af_packet_ports(test: &str) -> (Port, Port) {
    let port = |end: &str| {
        let vdev = af_packet_vdev(test, end);
        let (name, args) = vdev.split_once(',').expect("a name and arguments");
        Port::create_vdev(eal(), name, args).expect("an af_packet port")
    };
    (port("mca"), port("mcb"))
}

/// The host at 10.91.0.`last` with `CORES` dataplane cores.
fn host_config(last: u8) -> HostConfig {
    let mut host = HostConfig::new(Ipv4Address::new(10, 91, 0, last), 24);
    host.mac = Some(EthernetAddress([2, 0, 0, 91, 0, last]));
    host.dataplane_cores = CORES;
    host.mempool.capacity = 4095;
    host.tcp = dpdk_rig::test_config();
    host
}

/// What connection `id` sends: its id in every octet's neighbourhood.
fn payload(id: usize) -> Vec<u8> {
    (0..OCTETS).map(|i| (i * 7 + id * 31) as u8).collect()
}

/// Every core of `report` took some flows over.
fn check_spread(name: &str, report: &HostReport) {
    let owned: Vec<u64> = report.cores.iter().map(|c| c.flows_added).collect();
    eprintln!(
        "{name}: flows per core {owned:?}, forwarded {}, handed over {}",
        report.setup.forwarded, report.setup.handed_over
    );
    assert_eq!(owned.len(), usize::from(CORES));
    assert_eq!(
        owned.iter().sum::<u64>(),
        2 * CONNECTIONS_EACH_WAY as u64,
        "{name}: every connection, active or passive, on a dataplane core"
    );
    assert!(
        owned.iter().all(|&n| n > 0),
        "{name}: each core owns some flows: {owned:?}"
    );
}

#[test]
fn tcp_hosts_with_two_cores_each_spread_connections_from_both_sides() {
    if !uwarp_testing::root_or_skip("network namespaces and af_packet") {
        return;
    }
    std::thread::spawn(|| {
        private_veth_pair();
        let (a_port, b_port) = af_packet_ports("tcp");
        let a = TcpHost::start(eal(), a_port, host_config(1)).expect("host A");
        let b = TcpHost::start(eal(), b_port, host_config(2)).expect("host B");
        let (a_apps, b_apps) = (Apps::default(), Apps::default());
        listen_logging(&a, PORT, &a_apps);
        listen_logging(&b, PORT, &b_apps);
        let next_id = AtomicUsize::new(0);
        let open = |from: &TcpHost<TestApp>, to: &TcpHost<TestApp>| {
            for _ in 0..CONNECTIONS_EACH_WAY {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let log = Log::default();
                lock(&log).outbox = payload(id);
                let remote = SocketAddrV4::new(to.address().ip, PORT);
                from.connect(remote, TestApp::new(log)).expect("connect");
            }
        };
        open(&a, &b);
        open(&b, &a);
        // Every accepted connection received its sender's payload.
        let deadline = Instant::now() + Duration::from_secs(20);
        let complete = |apps: &Apps| {
            let apps = apps.lock().expect("apps");
            apps.len() == CONNECTIONS_EACH_WAY
                && apps
                    .values()
                    .all(|log| lock(log).left_edge == OCTETS as u64)
        };
        while !(complete(&a_apps) && complete(&b_apps)) {
            assert!(Instant::now() < deadline, "the data did not all arrive");
            std::thread::sleep(Duration::from_millis(10));
        }
        let expected: Vec<Vec<u8>> = (0..2 * CONNECTIONS_EACH_WAY).map(payload).collect();
        for apps in [&a_apps, &b_apps] {
            for log in apps.lock().expect("apps").values() {
                let log = lock(log);
                assert!(!log.has_overlap());
                assert!(expected.contains(&log.stream()), "a stream arrived changed");
            }
        }
        check_spread("A", &a.shutdown());
        check_spread("B", &b.shutdown());
    })
    .join()
    .expect("the test thread");
}

#[test]
fn rdma_operations_over_two_stepped_cores_each() {
    if !uwarp_testing::root_or_skip("network namespaces and af_packet") {
        return;
    }
    std::thread::spawn(|| {
        private_veth_pair();
        let open = |end, last| {
            let port = DpdkPort::Vdev(af_packet_vdev("rdma", end));
            let dpdk = DpdkConfig::new(port, host_config(last), CoreThreads::Inline);
            Device::open(DeviceConfig::dpdk(dpdk)).expect("a device")
        };
        let server = open("mca", 1);
        let client = open("mcb", 2);
        let listener = server.listen("10.91.0.1:0").expect("listen");
        let addr = listener.local_addr();
        let options = Options {
            size: 3000,
            count: 20,
            validate: true,
            timeout: Some(Duration::from_secs(20)),
            ..Options::default()
        };
        std::thread::scope(|scope| {
            let served = scope.spawn(|| {
                (0..4)
                    .map(|_| rping::serve_one(&server, &listener, &options).expect("a server"))
                    .collect::<Vec<_>>()
            });
            for _ in 0..4 {
                let report = rping::run_client(&client, addr, &options).expect("a client");
                assert_eq!(report.pings, options.count);
            }
            let served = served.join().expect("the server thread");
            assert!(served.iter().all(|report| report.pings == options.count));
        });
    })
    .join()
    .expect("the test thread");
}
