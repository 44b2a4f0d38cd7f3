//! `Device::close`: what a DPDK device's cores counted, end to end. Two
//! devices on a net_ring pair run one rping connection (Sends, RDMA
//! Reads and RDMA Writes, data validated) that the client then
//! disconnects, and are closed; each one's `HostReport` shows the
//! connection handed over to its dataplane core and traffic on every
//! path, and nothing dropped, reset or malformed on the clean link. A
//! device of the socket transport has no cores to report on.

use uwarp_testing::dpdk_rig;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dpdk_rig::{device_pair, small_pool};
use uwarp::HostReport;
use uwarp::{CoreThreads, Device, DeviceConfig};
use uwarp_interop::rping::{self, Options};

const PINGS: u64 = 20;

/// Two devices joined by a net_ring pair: 10.68.0.1 (the server) and
/// 10.68.0.2.
fn devices(threads: CoreThreads) -> (Device, Device) {
    device_pair(68, 1024, threads, |dpdk| small_pool(&mut dpdk.host))
}

/// Two devices with their cores as `threads` says, after one rping
/// connection of `PINGS` pings from the client to the server,
/// disconnected by the client at the end: (server, client).
fn one_connection(threads: CoreThreads) -> (Device, Device) {
    let (server, client) = devices(threads);
    let options = Options {
        size: 3000,
        count: PINGS,
        validate: true,
        timeout: Some(Duration::from_secs(30)),
        ..Options::default()
    };
    let listener = server.listen("10.68.0.1:0").expect("listen");
    let addr: SocketAddr = listener.local_addr();
    let served = std::thread::scope(|scope| {
        let served = scope.spawn(|| rping::serve_one(&server, &listener, &options));
        let client_report = rping::run_client(&client, addr, &options).expect("the client");
        assert_eq!(client_report.pings, PINGS);
        served.join().expect("the server thread")
    });
    assert_eq!(served.expect("the server").pings, PINGS);
    drop(listener);
    (server, client)
}

/// What holds for `end` of one connection, cleanly closed, on a clean
/// link with one dataplane core, whenever the device closed (its last
/// ACK may still have been on the way).
fn assert_clean(end: &str, report: &HostReport) {
    let setup = &report.setup;
    assert_eq!(setup.handed_over, 1, "{end}: {report:#?}");
    assert_eq!(setup.resets_sent, 0, "{end}: {report:#?}");
    assert_eq!(setup.syns_dropped, 0, "{end}: {report:#?}");
    assert_eq!(setup.malformed, 0, "{end}: {report:#?}");
    assert_eq!(setup.failed, 0, "{end}: {report:#?}");
    // The handshake's segments went through the control core.
    assert!(report.net.tcp_segments > 0, "{end}: {report:#?}");
    // The interface's only drop can be the peer's gratuitous ARP at its
    // start: an announcement from a sender not known yet, unless this
    // host was resolving the peer's address by then.
    assert_eq!(
        report.net.dropped, report.net.arp_not_for_us,
        "{end}: {report:#?}"
    );
    assert!(report.net.arp_not_for_us <= 1, "{end}: {report:#?}");
    assert_eq!(report.cores.len(), 1, "{end}: {report:#?}");
    let core = &report.cores[0];
    assert_eq!(core.flows_added, 1, "{end}: {report:#?}");
    assert!(core.segments_received > 0, "{end}: {report:#?}");
    assert_eq!(core.malformed, 0, "{end}: {report:#?}");
    let dataplane = &report.dataplanes[0];
    assert!(dataplane.to_flows > 0, "{end}: {report:#?}");
    assert!(dataplane.to_control > 0, "{end}: {report:#?}");
    assert_eq!(dataplane.control_ring_full, 0, "{end}: {report:#?}");
    assert_eq!(dataplane.gather_failed, 0, "{end}: {report:#?}");
    assert_eq!(dataplane.net.dropped, 0, "{end}: {report:#?}");
    let transmit = &report.transmit[0];
    assert!(transmit.sent > 0, "{end}: {report:#?}");
    assert_eq!(transmit.backlog_full, 0, "{end}: {report:#?}");
    assert_eq!(transmit.no_buffer, 0, "{end}: {report:#?}");
    // The impairment stage was off: it dropped nothing.
    assert_eq!(report.impaired.len(), 1, "{end}: {report:#?}");
    let (rx, tx) = &report.impaired[0];
    assert_eq!(rx.dropped + tx.dropped, 0, "{end}: {report:#?}");
}

#[test]
fn closing_devices_on_threaded_cores_reports_what_they_counted() {
    let (server, client) = one_connection(CoreThreads::Spawned);
    let client = client.close().expect("a DPDK device reports");
    let server = server.close().expect("a DPDK device reports");
    assert_clean("client", &client);
    assert_clean("server", &server);
}

/// Steps both inline devices until neither has found work for `quiet`
/// (longer than any timer a closed connection leaves, such as the
/// delayed ACK): every frame sent has been received, nothing is queued.
/// Only a pass that found nothing ends it, so a thread descheduled after
/// a busy pass does not mistake that time for quiet.
fn settle(devices: [&Device; 2], quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut idle_since = Instant::now();
    loop {
        assert!(Instant::now() < deadline, "the devices never went quiet");
        let work: usize = devices.iter().map(|device| device.progress()).sum();
        if work > 0 {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= quiet {
            return;
        }
    }
}

#[test]
fn closing_settled_inline_devices_drops_nothing_at_shutdown() {
    let (server, client) = one_connection(CoreThreads::Inline);
    settle([&server, &client], Duration::from_millis(20));
    let client = client.close().expect("a DPDK device reports");
    let server = server.close().expect("a DPDK device reports");
    assert_clean("client", &client);
    assert_clean("server", &server);
    // Nothing was in flight or queued when they closed.
    assert_eq!(client.dropped_at_shutdown, 0, "{client:#?}");
    assert_eq!(server.dropped_at_shutdown, 0, "{server:#?}");
    // The client disconnected: its flow waits out TIME-WAIT (60 s by
    // default) in its core's table. The server's closed in LAST-ACK, on
    // the client's last ACK, and left the table.
    assert_eq!(client.cores[0].flows_closed, 0, "{client:#?}");
    assert_eq!(server.cores[0].flows_closed, 1, "{server:#?}");
    // The client's flow gave its buffers back on reaching TIME-WAIT; the
    // server's never was there.
    assert_eq!(client.cores[0].tx.buffers_released, 1, "{client:#?}");
    assert_eq!(server.cores[0].tx.buffers_released, 0, "{server:#?}");
}

#[test]
fn a_socket_device_has_no_host_report() {
    let device = Device::open(DeviceConfig::default()).expect("a socket device");
    assert!(device.close().is_none());
}
