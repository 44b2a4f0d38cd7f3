//! Checksum offload on a memory link (`HostConfig::memory_link_offloads`):
//! two uwarp TCP hosts on the two ends of a net_ring pair in this process.
//!
//! - With it on at both ends, TCP frames leave with the partial checksums
//!   of the offload contract and (`HostConfig::payloads_by_reference`,
//!   on in every host here) their payloads by reference: external-buffer
//!   segments into the send queue, chained to the headers. The other end
//!   takes them as verified and as they lie, and the data arrives intact.
//! - A receiver without it checks those frames in software and drops them
//!   as bad checksums (after gathering the chained ones into one
//!   segment): nothing that leaves a port this way is taken on trust by a
//!   port that did not ask for it.

use uwarp_testing::dpdk_rig;

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use dpdk_rig::{eal, listen_logging, lock, Apps, Log, TestApp};
use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::HostConfig;
use uwarp::HostReport;
use uwarp_control::TcpHost;
use uwarp_dataplane::ring_pair;
use uwarp_dataplane::runtime::TxCounters;

/// Octets the client sends.
const OCTETS: usize = 1 << 20;
/// The port the server listens on.
const PORT: u16 = 7100;

/// The host at 10.`subnet`.0.`last`, with or without the offload.
fn host_config(subnet: u8, last: u8, offloads: bool) -> HostConfig {
    let mut host = HostConfig::new(Ipv4Address::new(10, subnet, 0, last), 24);
    host.mac = Some(EthernetAddress([2, 0, 0, subnet, 0, last]));
    host.tcp = dpdk_rig::test_config();
    host.memory_link_offloads = offloads;
    host.payloads_by_reference = true;
    host
}

/// A client host (10.`subnet`.0.1, the offload on) and a server host
/// (10.`subnet`.0.2, the offload as `server_offloads` says) on a net_ring
/// pair, the server listening on [`PORT`] and logging into the returned
/// apps, the client connected and sending `payload`.
fn connected(
    subnet: u8,
    server_offloads: bool,
    payload: Vec<u8>,
) -> (TcpHost<TestApp>, TcpHost<TestApp>, Apps) {
    let (a, b) = ring_pair(eal(), 1, 1024).expect("a ring pair");
    let client = TcpHost::start(eal(), a, host_config(subnet, 1, true)).expect("client host");
    let server =
        TcpHost::start(eal(), b, host_config(subnet, 2, server_offloads)).expect("server host");
    let apps = Apps::default();
    listen_logging(&server, PORT, &apps);
    let log = Log::default();
    lock(&log).outbox = payload;
    let remote = SocketAddrV4::new(server.address().ip, PORT);
    client.connect(remote, TestApp::new(log)).expect("connect");
    (client, server, apps)
}

/// A transmit counter, summed over the host's queues.
fn sent(report: &HostReport, counter: fn(&TxCounters) -> u64) -> u64 {
    report.transmit.iter().map(counter).sum()
}

fn offloaded(report: &HostReport) -> u64 {
    sent(report, |tx| tx.checksums_offloaded)
}

fn referenced(report: &HostReport) -> u64 {
    sent(report, |tx| tx.payloads_referenced)
}

fn gathered(report: &HostReport) -> u64 {
    report.dataplanes.iter().map(|d| d.gathered).sum()
}

/// Frames dropped for a bad IPv4 or TCP checksum (an offloaded frame's
/// IPv4 checksum is 0, so it fails that first).
fn bad_checksums(report: &HostReport) -> u64 {
    let nets = report.dataplanes.iter().map(|d| &d.net);
    nets.chain([&report.net])
        .map(|net| net.ipv4_bad_checksum + net.tcp_bad_checksum)
        .sum()
}

#[test]
fn both_ends_with_it_carry_data_intact_on_partial_checksums() {
    let payload: Vec<u8> = (0..OCTETS).map(|i| (i * 13 + i / 251) as u8).collect();
    let (client, server, apps) = connected(93, true, payload.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = apps
            .lock()
            .expect("apps")
            .values()
            .any(|log| lock(log).left_edge == OCTETS as u64);
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "the data did not all arrive");
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = apps.lock().expect("apps").values().next().cloned();
    let log = log.expect("an accepted connection");
    assert_eq!(lock(&log).stream(), payload, "the stream arrived changed");
    let (client, server) = (client.shutdown(), server.shutdown());
    // Every data segment (about 720 of them) went out offloaded, those
    // the dataplane core sent (all but the first few) by reference.
    let segments = (OCTETS / 1460) as u64;
    assert!(offloaded(&client) > segments, "{client:?}");
    assert!(referenced(&client) > segments * 9 / 10, "{client:?}");
    assert!(offloaded(&server) > 0, "the server's ACKs too: {server:?}");
    assert_eq!(referenced(&server), 0, "ACKs carry no payload");
    assert_eq!(gathered(&server), 0, "taken as they came: {server:?}");
    assert_eq!(bad_checksums(&client), 0);
    assert_eq!(bad_checksums(&server), 0);
}

#[test]
fn a_receiver_without_it_drops_partial_checksums() {
    let (client, server, apps) = connected(94, false, vec![7; OCTETS]);
    // The handshake passes (with one queue the control core's frames go
    // through the dataplane core with their checksums), and so may what
    // the control core sends before the hand-over; the dataplane core's
    // segments arrive with partial checksums and are dropped, again at
    // each retransmission.
    std::thread::sleep(Duration::from_millis(1000));
    for log in apps.lock().expect("apps").values() {
        assert!(lock(log).left_edge < OCTETS as u64, "the transfer stalls");
    }
    let (client, server) = (client.shutdown(), server.shutdown());
    assert!(offloaded(&client) >= 1, "{client:?}");
    assert!(bad_checksums(&server) >= 2, "{server:?}");
    assert!(gathered(&server) >= 1, "{server:?}");
}
