//! Opening devices on the DPDK transport by configuration alone, the way
//! an application does: no DPDK type named, the EAL started by the
//! library.
//!
//! - Two devices on the ends of a `VirtualLink` connect, and an RDMA
//!   Write crosses from one to the other intact.
//! - A virtual device DPDK cannot create, a port it does not have, and a
//!   link end that carries a device already are refused with errors that
//!   name them.
//! - EAL arguments other than those the process's EAL runs with are
//!   refused with an error, not a panic, and the running EAL stays.

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::*;
use uwarp_testing::pair::{connect_devices, contents, fill, Devices, CQ_DEPTH};

/// The host at 10.72.0.`last`, with a small pool (the tests of this
/// binary run side by side in the EAL's 256 MiB).
fn host(last: u8) -> HostConfig {
    let mut host = HostConfig::new(Ipv4Address::new(10, 72, 0, last), 24);
    host.mac = Some(EthernetAddress([2, 0, 0, 72, 0, last]));
    host.mempool.capacity = 2047;
    host
}

/// The configuration of a device at 10.72.0.`last` on `port`.
fn config(port: DpdkPort, last: u8, threads: CoreThreads) -> DeviceConfig {
    DeviceConfig::dpdk(DpdkConfig::new(port, host(last), threads))
}

/// The text of the error `result` must be.
fn refusal(result: Result<Device, Error>) -> String {
    match result {
        Ok(device) => panic!("opened {device:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn an_rdma_write_crosses_a_virtual_link() {
    let _serial = uwarp_testing::serial();
    let (a, b) = VirtualLink::pair(1, 1024).expect("a virtual link");
    let devices = Devices {
        server: Device::open(config(DpdkPort::Link(a), 1, CoreThreads::Spawned))
            .expect("the server's device"),
        client: Device::open(config(DpdkPort::Link(b), 2, CoreThreads::Spawned))
            .expect("the client's device"),
        listen: "10.72.0.1:0",
    };
    let (client, server) = connect_devices(
        devices,
        CQ_DEPTH,
        ConnectParams::default(),
        LocalParams::default(),
        |_, _| {},
    )
    .expect("connected");

    let remote = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    let source = client.pd.alloc_mr(64 << 10, Access::LOCAL_WRITE).unwrap();
    let target = server.pd.alloc_mr(64 << 10, remote).unwrap();
    let data = fill(&source, 72);
    let write = SendOp::Write {
        remote_addr: target.addr(),
        rkey: target.rkey(),
    };
    let wr = SendWr::new(1, write, Payload::Sgl(vec![source.whole()]));
    client.qp.post_send(wr).unwrap();
    assert_eq!(client.expect_ok().opcode, WcOpcode::Write);
    // Read it back: the Read Response comes after the Write was placed.
    let sink = client.pd.alloc_mr(64 << 10, Access::LOCAL_WRITE).unwrap();
    let read = SendOp::Read {
        remote_addr: target.addr(),
        rkey: target.rkey(),
    };
    client
        .qp
        .post_send(SendWr::new(2, read, Payload::Sgl(vec![sink.whole()])))
        .unwrap();
    assert_eq!(client.expect_ok().opcode, WcOpcode::Read);
    assert_eq!(contents(&target), data, "the Write arrived intact");
    assert_eq!(contents(&sink), data, "the Read brought it back");

    let report = client.device.close().expect("a DPDK device's report");
    assert!(report.cores.iter().any(|core| core.flows_added > 0));
}

#[test]
fn ports_that_cannot_be_had_are_refused_by_name() {
    let bogus = refusal(Device::open(config(
        DpdkPort::Vdev("net_bogus0,iface=nothing".into()),
        3,
        CoreThreads::Inline,
    )));
    assert!(
        bogus.contains("virtual device net_bogus0") && bogus.contains("rte_vdev_init"),
        "{bogus}"
    );
    let absent = refusal(Device::open(config(
        DpdkPort::Named("net_absent0".into()),
        3,
        CoreThreads::Inline,
    )));
    assert!(absent.contains("no DPDK port net_absent0"), "{absent}");

    let (a, _b) = VirtualLink::pair(1, 64).expect("a virtual link");
    let first = Device::open(config(DpdkPort::Link(a.clone()), 4, CoreThreads::Inline))
        .expect("the end's device");
    let second = refusal(Device::open(config(
        DpdkPort::Link(a),
        5,
        CoreThreads::Inline,
    )));
    assert!(second.contains("carries a device already"), "{second}");
    drop(first);
}

#[test]
fn eal_arguments_unlike_the_running_eals_are_refused() {
    // The EAL runs (a link starts it if nothing did), as a device without
    // EAL arguments finds it.
    let (a, _b) = VirtualLink::pair(1, 64).expect("a virtual link");
    let mut dpdk = DpdkConfig::new(DpdkPort::Link(a), host(6), CoreThreads::Inline);
    dpdk.start_eal().expect("the running EAL");

    dpdk.eal = Some(vec!["--vdev".into(), "net_null_uwcfg0".into()]);
    let early = dpdk.start_eal().expect_err("other EAL arguments");
    assert!(early.to_string().contains("already initialised"), "{early}");
    let refused = refusal(Device::open(DeviceConfig::dpdk(dpdk.clone())));
    assert!(refused.contains("already initialised"), "{refused}");
    assert!(refused.contains("net_null_uwcfg0"), "{refused}");

    // The EAL still serves devices that ask for nothing of it.
    dpdk.eal = None;
    let device = Device::open(DeviceConfig::dpdk(dpdk)).expect("a device on the running EAL");
    drop(device);
}
