//! The kernel and uwarp on the two sides of a tap (`net_tap`).
//!
//! uwarp runs its control core and one dataplane core on threads; the
//! kernel pings uwarp's address 1000 times from its side of the tap while
//! uwarp pings the kernel 100 times. No reply may be lost, and each side
//! must have resolved the other's MAC address by ARP. Needs root.

mod common;

use common::{is_root, ping_both_ways, script, KernelSide};
use uwarp_dataplane::{Device, Eal, EalConfig};

const TAP: &str = "uwtap0";

/// Takes the tap's kernel side down on every exit path.
struct Topology;

impl Drop for Topology {
    fn drop(&mut self) {
        script("topo-tap.sh", &["down", TAP]);
    }
}

#[test]
fn kernel_and_uwarp_ping_each_other_over_a_tap() {
    if !is_root() {
        eprintln!("SKIPPED: creating a tap needs root");
        return;
    }
    let eal = Eal::init(&EalConfig::virtual_devices([format!(
        "net_tap0,iface={TAP}"
    )]))
    .expect("the EAL starts with a net_tap device");
    let device = Device::by_name(eal, "net_tap0").expect("the tap port");
    script("topo-tap.sh", &["up", TAP, "10.77.0.1/24"]);
    let _topology = Topology;
    let kernel = KernelSide {
        ip: [10, 77, 0, 1],
        iface: TAP,
        exec: &[],
    };
    ping_both_ways(eal, device, [10, 77, 0, 2], &kernel);
}
