//! uwarp on `net_af_packet` over a veth pair into a network namespace.
//!
//! `scripts/topo-veth.sh` makes the namespace with the kernel's end of
//! the pair (checksum offloads off, so frames carry real checksums); uwarp
//! attaches to the other end. The kernel pings uwarp 1000 times from the
//! namespace, uwarp resolves the kernel's MAC by ARP and pings it 100
//! times. Needs root.

mod common;

use common::{is_root, ping_both_ways, script, KernelSide};
use uwarp_dataplane::{Device, Eal, EalConfig};

const NS: &str = "uwv0";

/// Removes the namespace and the veth pair on every exit path.
struct Topology;

impl Drop for Topology {
    fn drop(&mut self) {
        script("topo-veth.sh", &["down", NS]);
    }
}

#[test]
fn kernel_and_uwarp_ping_each_other_over_af_packet() {
    if !is_root() {
        eprintln!("SKIPPED: network namespaces need root");
        return;
    }
    script("topo-veth.sh", &["down", NS]);
    script("topo-veth.sh", &["up", NS, "10.78.0.1/24"]);
    let _topology = Topology;
    let vdev = format!("net_af_packet0,iface={NS}-u,qpairs=1");
    let eal = Eal::init(&EalConfig::virtual_devices([vdev]))
        .expect("the EAL starts with a net_af_packet device");
    let device = Device::by_name(eal, "net_af_packet0").expect("the af_packet port");
    let kernel = KernelSide {
        ip: [10, 78, 0, 1],
        iface: "uwv0-k",
        exec: &["ip", "netns", "exec", NS],
    };
    ping_both_ways(eal, device, [10, 78, 0, 2], &kernel);
}
