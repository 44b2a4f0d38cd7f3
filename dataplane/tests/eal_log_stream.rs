//! DPDK's log goes to C's `stderr` itself once the EAL runs, not to the
//! `fopencookie` stream of `rte_eal_init` that also calls `syslog(3)`:
//! a message logged by the EAL's interrupt thread while the process
//! exits deadlocked `exit`'s flush of that stream (see
//! `uwarp_dataplane::eal`, and docs/dpdk.md's "Exit and teardown").

use uwarp_dataplane::{Eal, EalConfig};

#[test]
fn the_log_stream_is_plain_stderr() {
    Eal::init(&EalConfig::virtual_devices(Vec::<String>::new()))
        .expect("the EAL starts without devices");
    // SAFETY: the EAL runs; both only read pointers.
    let (stream, stderr) = unsafe { (dpdk_sys::rte_log_get_stream(), dpdk_sys::stderr) };
    assert_eq!(
        stream, stderr,
        "DPDK logs through the stream rte_eal_init opened (stderr and syslog)"
    );
}
