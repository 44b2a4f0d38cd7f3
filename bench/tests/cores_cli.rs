//! `uwarp-perf --cores N`: dataplane cores per host where the DPDK
//! transport runs. A loopback run of each operation on two cores per end
//! moves its data, and a device or transport that cannot take the cores
//! is refused with an error that says why.

mod common;

use common::{perf_refused as refused, perf_stdout, QUICK_LOOPBACK};

#[test]
fn loopback_runs_every_operation_on_two_cores_per_end() {
    for op in ["write", "read", "send"] {
        let mut args = vec!["loopback", "--cores", "2", "--op", op, "--json"];
        args.extend(QUICK_LOOPBACK);
        let report: serde_json::Value = serde_json::from_slice(&perf_stdout(&args)).unwrap();
        for field in ["bw_gbps", "lat_p50_us", "setup_per_s"] {
            let value = report["dpdk"][field].as_f64().unwrap_or(0.0);
            assert!(value > 0.0, "{op}: {field} = {value}");
        }
        // Each end's frames, by the core whose queue they came from.
        for end in ["counters", "server_counters"] {
            let host = &report["dpdk"][end]["host"];
            let per_core: Vec<u64> = host["frames_received_per_core"]
                .as_array()
                .map(|cores| cores.iter().filter_map(|n| n.as_u64()).collect())
                .unwrap_or_default();
            assert_eq!(per_core.len(), 2, "{op}, {end}: {host}");
            let total = host["frames_received"].as_u64();
            assert_eq!(Some(per_core.iter().sum()), total, "{op}, {end}: {host}");
        }
    }
}

#[test]
fn cores_need_the_dpdk_transport_and_at_least_one() {
    let socket = refused(&["loopback", "--transport", "socket", "--cores", "2"]);
    assert!(
        socket.contains("--cores") && socket.contains("need the dpdk transport"),
        "{socket}"
    );
    let none = refused(&["loopback", "--cores", "0"]);
    assert!(none.contains("--cores: give at least 1"), "{none}");
    let two_host = refused(&[
        "write-bw",
        "--server",
        "--transport",
        "socket",
        "--cores",
        "2",
    ]);
    assert!(
        two_host.contains("--cores") && two_host.contains("are for --transport dpdk"),
        "{two_host}"
    );
    // Even at its default: the socket transport has no cores to set.
    let default = refused(&[
        "write-bw",
        "--server",
        "--transport",
        "socket",
        "--cores",
        "1",
    ]);
    assert!(default.contains("are for --transport dpdk"), "{default}");
}

#[test]
fn a_device_with_fewer_queues_than_cores_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: net_af_packet needs root");
        return;
    }
    // net_af_packet on the loopback interface: one queue pair by default.
    let eal = "--vdev net_af_packet_cores0,iface=lo";
    for mode in [
        &["write-bw", "--server"][..],
        &["tcp", "--role", "sink", "--listen", "5000"][..],
    ] {
        let mut args = mode.to_vec();
        args.extend(["--eal", eal, "--ip", "10.93.0.1/24", "--cores", "2"]);
        let error = refused(&args);
        assert!(
            error.contains("2 dataplane cores need as many receive and transmit queues")
                && error.contains("net_af_packet has 1 receive and 1 transmit queues"),
            "{mode:?}: {error}"
        );
    }
}
