//! uwarp's side of the tests against the siw VM of `scripts/siw-vm/`
//! ([`uwarp_testing::siw_vm`] drives the VM itself).

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use uwarp::{Device, DeviceConfig, Listener};
use uwarp_interop::rping;
pub use uwarp_testing::siw_vm::*;

/// uwarp's device for a test against the VM, listening on `port`: on
/// DPDK (net_af_packet on the tap, at [`DPDK_IP`]) once run.sh has made
/// the tap, or on the kernel's sockets on every address (the tap's may
/// not exist yet). Call it while the VM boots.
pub fn listening_device(vm: &mut Vm, dpdk: bool, port: u16) -> (Device, Listener) {
    let (device, listen) = if dpdk {
        vm.wait_for_tap();
        let vdev = format!("net_af_packet0,iface={TAP}");
        let device = rping::open_dpdk_vdev(&vdev, DPDK_IP, 24).expect("a DPDK device on the tap");
        (device, DPDK_IP)
    } else {
        let device = Device::open(DeviceConfig::default()).expect("open a device");
        (device, Ipv4Addr::UNSPECIFIED)
    };
    let listener = device
        .listen(SocketAddr::V4(SocketAddrV4::new(listen, port)))
        .expect("listen");
    (device, listener)
}
