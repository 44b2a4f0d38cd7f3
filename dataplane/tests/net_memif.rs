//! Two uwarp processes over `net_memif`: each pings the other.
//!
//! The test binary runs without libtest's harness: it starts two copies of
//! itself, a memif server and a memif client (`scripts/topo-memif.sh`
//! names their `--vdev`s), once with the server started first and once
//! with the client first. Each process steps its cores from one thread,
//! pings the other 200 times and answers the other's pings; both must
//! finish with every ping answered both ways and every mbuf back in its
//! pool. The server publishes its socket only once its port has started
//! (a memif server accepts clients from the moment it is probed, and a
//! client that connects before the server's port starts gets a link that
//! carries nothing); the client retries until it finds it.

mod common;

use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use common::{ping_cores, script};
use uwarp_dataplane::runtime::{port_config, Stepper};
use uwarp_dataplane::{Device, Eal, EalConfig, Port};

const PINGS: u16 = 200;
const SOCKET: &str = "/tmp/uwarp-test-memif/memif.sock";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--side") {
        side(&args[i + 1], &args[i + 2]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("memif_both_orders: test");
        return;
    }
    for first in ["server", "client"] {
        let out = script("topo-memif.sh", &["up", SOCKET]);
        let mut vdevs = out.split_whitespace();
        let (server, client) = (vdevs.next().unwrap(), vdevs.next().unwrap());
        let spawn = |role: &str, vdev: &str| -> Child {
            Process::new(&args[0])
                .args(["--side", role, vdev])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a side")
        };
        let (a, b) = if first == "server" {
            let a = spawn("server", server);
            std::thread::sleep(Duration::from_millis(500));
            (a, spawn("client", client))
        } else {
            let a = spawn("client", client);
            std::thread::sleep(Duration::from_millis(500));
            (a, spawn("server", server))
        };
        let results = [a.wait_with_output(), b.wait_with_output()];
        script("topo-memif.sh", &["down", SOCKET]);
        for result in results {
            let out = result.expect("a side ran");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.status.success(),
                "{first} first: a side failed:\n{text}"
            );
            assert!(text.contains("PASS"), "{first} first:\n{text}");
        }
        println!("memif, {first} started first: ok");
    }
    println!("test result: ok. 1 passed");
}

/// One process: `role` at 10.80.0.1 (server) or .2 (client) on `vdev`.
fn side(role: &str, vdev: &str) {
    let server = role == "server";
    let (ours, theirs) = if server { (1, 2) } else { (2, 1) };
    // A memif server listens from the moment it is probed, before its port
    // is configured and started, and a client that connects in between
    // gets a link that carries nothing. The server therefore listens under
    // a private name and publishes the socket once its port has started.
    let private = format!("{SOCKET}.{}", std::process::id());
    let vdev = if server {
        vdev.replace(SOCKET, &private)
    } else {
        vdev.to_owned()
    };
    let config = EalConfig::virtual_devices([vdev]).file_prefix(&format!("uwarp-memif-{role}"));
    let eal = Eal::init(&config).expect("EAL with net_memif");
    let pool = common::pool(eal, role, 4095);
    let device = Device::by_name(eal, "net_memif0").expect("the memif port");
    let config = port_config(&device.capabilities().expect("capabilities"), 1);
    let mut port =
        Port::configure(eal, device, &config, std::slice::from_ref(&pool)).expect("configure");
    if server {
        port.start().expect("start the server");
        std::fs::rename(&private, SOCKET).expect("publish the server's socket");
    } else {
        // The client cannot start before the server's socket is there.
        port.start_until_link_up(Duration::from_secs(2), Duration::from_secs(15))
            .unwrap_or_else(|e| panic!("{role}: start: {e}"));
    }
    let queues = port.take_queues().expect("queues");
    let (control, dataplanes) = ping_cores(
        &port,
        queues,
        &pool,
        [10, 80, 0, ours],
        [10, 80, 0, theirs],
        PINGS,
    );
    let mut cores = Stepper::new(control, dataplanes);
    // Both directions done: our pings answered and theirs answered by us;
    // then a second more so the peer's last replies get through.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut done_at = None;
    while Instant::now() < deadline {
        let now = Instant::now();
        if cores.step(now) == 0 {
            std::thread::yield_now();
        }
        let ours_done = cores.control.handler().distinct_replies() == usize::from(PINGS);
        let theirs_done = cores.control.iface().counters().icmp_echo_replied >= u64::from(PINGS);
        if ours_done && theirs_done && done_at.is_none() {
            done_at = Some(now);
        }
        if done_at.is_some_and(|t| now.duration_since(t) > Duration::from_secs(1)) {
            break;
        }
    }
    let replies = cores.control.handler().distinct_replies();
    let answered = cores.control.iface().counters().icmp_echo_replied;
    let stopped = cores.shutdown();
    drop(stopped);
    drop(port);
    let in_use = pool.in_use();
    println!("{role}: our pings answered {replies}/{PINGS}, theirs answered {answered}, mbufs out {in_use}");
    assert_eq!(
        replies,
        usize::from(PINGS),
        "{role}: our pings were answered"
    );
    assert!(answered >= u64::from(PINGS), "{role}: we answered theirs");
    assert_eq!(in_use, 0, "{role}: every mbuf is back in the pool");
    println!("{role}: PASS");
}
