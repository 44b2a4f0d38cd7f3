//! A process that polls its `net_memif` port survives its peer's exits.
//!
//! When a memif peer closes its end, DPDK's interrupt thread unmaps the
//! link's shared rings while the polling thread may be inside a burst
//! (`dpdk-sys/csrc/memif_guard.c`); before the guard, the polling process
//! died of SIGSEGV now and then, e.g. `rdma_xserver` on uwarp when its
//! client exited. Here a memif server polls its queues without pause,
//! receiving and sending full bursts of 1500-octet frames, while
//! `CLIENTS` clients one after the other connect, exchange frames with it
//! for a while and exit without stopping their ports (the kernel closes
//! their end). The server must live through every exit, see the link
//! come up for each client, and end with every mbuf back in its pool.
//!
//! Then `ROUNDS` pairs of processes stop their ports at the same instant
//! (to the millisecond): the driver's teardown on the application's
//! thread (`rte_eth_dev_stop`) and the interrupt thread's handling of the
//! peer's close each free the shared regions, with no lock between them.
//! A memif port now stops and closes on the interrupt thread
//! (`memif_guard.c`); both processes of every round must end well. (This
//! phase did not make the unserialised teardowns collide here: it passed
//! without the change too; it keeps the serialised ones honest.)
//!
//! Runs without libtest's harness: the test starts copies of itself as the
//! server and the clients (needs root for the EAL's shared memory).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::script;
use uwarp_dataplane::runtime::port_config;
use uwarp_dataplane::{Device, Eal, EalConfig, Mbuf, Mempool, Port, RxQueue, TxQueue};

const CLIENTS: usize = 25;
const ROUNDS: usize = 12;
const SOCKET: &str = "/tmp/uwarp-test-memif-exit/memif.sock";
const FRAME: usize = 1500;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--side") {
        let vdev = &args[i + 2];
        match args[i + 1].as_str() {
            "server" => server(vdev),
            _ => client(vdev),
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--stop-at") {
        let at = Duration::from_nanos(args[i + 1].parse().expect("a time"));
        stop_at(&args[i + 2], &args[i + 3], SystemTime::UNIX_EPOCH + at);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("memif_server_survives_peer_exits: test");
        return;
    }
    if !common::is_root() {
        println!("skipped: DPDK's net_memif needs root");
        return;
    }
    let out = script("topo-memif.sh", &["up", SOCKET]);
    let mut vdevs = out.split_whitespace();
    let (server_vdev, client_vdev) = (vdevs.next().unwrap(), vdevs.next().unwrap());
    let spawn = |role: &str, vdev: &str| -> Child {
        Process::new(&args[0])
            .args(["--side", role, vdev])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a side")
    };
    let mut server = spawn("server", server_vdev);
    let mut lines = BufReader::new(server.stdout.take().expect("server's stdout")).lines();
    let mut next_line = |what: &str| -> String {
        lines
            .next()
            .unwrap_or_else(|| panic!("the server ended before it {what}"))
            .expect("read the server's output")
    };
    assert_eq!(next_line("listened"), "server: listening");
    for i in 0..CLIENTS {
        let client = spawn("client", client_vdev)
            .wait_with_output()
            .expect("a client ran");
        assert!(
            client.status.success(),
            "client {i} failed: {}",
            String::from_utf8_lossy(&client.stdout)
        );
        assert_eq!(
            next_line("saw a client"),
            format!("server: client {} came", i + 1)
        );
        assert_eq!(
            next_line("saw a client go"),
            format!("server: client {} left", i + 1)
        );
        println!("client {i}: exchanged frames, exited; the server lives on");
    }
    drop(server.stdin.take());
    let status = server.wait().expect("the server ended");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    script("topo-memif.sh", &["down", SOCKET]);
    assert!(
        status.success(),
        "the server died: {status}\n{}",
        rest.join("\n")
    );
    assert!(
        rest.iter().any(|l| l == "server: PASS"),
        "{}",
        rest.join("\n")
    );
    for round in 0..ROUNDS {
        stopping_together(&args[0], round);
    }
    println!("test result: ok. 1 passed");
}

fn eal_and_pool(role: &str, vdev: &str) -> (&'static Eal, std::sync::Arc<Mempool>) {
    let config = EalConfig::virtual_devices([vdev.to_owned()])
        .file_prefix(&format!("uwarp-memif-exit-{role}-{}", std::process::id()));
    let eal = Eal::init(&config).expect("EAL with net_memif");
    (eal, common::pool(eal, role, 4095))
}

fn configure(eal: &'static Eal, pool: &std::sync::Arc<Mempool>) -> (Port, RxQueue, TxQueue) {
    let device = Device::by_name(eal, "net_memif0").expect("the memif port");
    let config = port_config(&device.capabilities().expect("capabilities"), 1);
    let mut port =
        Port::configure(eal, device, &config, std::slice::from_ref(pool)).expect("configure");
    let mut queues = port.take_queues().expect("queues");
    let (rx, tx) = (queues.rx.remove(0), queues.tx.remove(0));
    (port, rx, tx)
}

/// One burst each way: everything received is freed, and a full burst
/// of frames (broadcast, a protocol nobody speaks) is offered.
fn exchange(rx: &mut RxQueue, tx: &mut TxQueue, pool: &Mempool, received: &mut Vec<Mbuf>) {
    received.clear();
    rx.rx_burst(received, 32);
    received.clear();
    let mut frames = Vec::with_capacity(32);
    while frames.len() < 32 {
        let Ok(mut frame) = Mbuf::alloc(pool) else {
            break;
        };
        let Ok(data) = frame.append(FRAME as u16) else {
            break;
        };
        data.fill(0);
        data[..6].fill(0xff);
        data[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        frames.push(frame);
    }
    tx.tx_burst(&mut frames);
}

/// Polls without pause until its standard input closes, printing each
/// time a client came (link up) and left (link down).
fn server(vdev: &str) {
    // The server publishes its socket only once its port has started
    // (tests/net_memif.rs says why).
    let private = format!("{SOCKET}.{}", std::process::id());
    let vdev = vdev.replace(SOCKET, &private);
    let (eal, pool) = eal_and_pool("server", &vdev);
    let (mut port, mut rx, mut tx) = configure(eal, &pool);
    port.start().expect("start the server");
    assert!(
        port.guards_memif_teardown(),
        "server: bursts hold memif's teardown lock"
    );
    std::fs::rename(&private, SOCKET).expect("publish the server's socket");
    println!("server: listening");
    let stdin_closed = watch_stdin();
    let (mut up, mut clients) = (false, 0);
    let mut received = Vec::new();
    let mut last_look = Instant::now();
    while !stdin_closed.is_finished() {
        exchange(&mut rx, &mut tx, &pool, &mut received);
        if last_look.elapsed() >= Duration::from_millis(5) {
            last_look = Instant::now();
            let now_up = port.link().is_ok_and(|l| l.up);
            if now_up != up {
                up = now_up;
                if up {
                    clients += 1;
                    println!("server: client {clients} came");
                } else {
                    println!("server: client {clients} left");
                }
            }
        }
    }
    drop((rx, tx));
    port.stop().expect("stop");
    drop(port);
    assert_eq!(pool.in_use(), 0, "server: every mbuf is back in the pool");
    println!("server: PASS");
}

/// A thread that ends when standard input closes.
fn watch_stdin() -> std::thread::JoinHandle<()> {
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    })
}

/// Connects, exchanges frames for a random while (20-120 ms), and exits
/// with its port still started.
fn client(vdev: &str) {
    let (eal, pool) = eal_and_pool("client", vdev);
    let (mut port, mut rx, mut tx) = configure(eal, &pool);
    assert!(port.is_memif_client(), "its devargs say role=client");
    port.start_until_link_up(Duration::from_secs(2), Duration::from_secs(15))
        .expect("client: link up");
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    let stay = Duration::from_millis(20 + u64::from(nanos % 100));
    let start = Instant::now();
    let mut received = Vec::new();
    while start.elapsed() < stay {
        exchange(&mut rx, &mut tx, &pool, &mut received);
    }
    println!("client: exchanged frames for {stay:?}, exiting with the port up");
    // SAFETY: _exit ends the process at once: no destructor runs, the
    // port is neither stopped nor closed, and the kernel closes the link.
    unsafe { libc::_exit(0) }
}

/// A server and a client that stop their ports at the same instant, 2 s
/// from now; both must end well.
fn stopping_together(program: &str, round: usize) {
    let out = script("topo-memif.sh", &["up", SOCKET]);
    let mut vdevs = out.split_whitespace();
    let (server_vdev, client_vdev) = (vdevs.next().unwrap(), vdevs.next().unwrap());
    let at = SystemTime::now() + Duration::from_secs(2);
    let at = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string();
    let spawn = |role: &str, vdev: &str| -> Child {
        Process::new(program)
            .args(["--stop-at", &at, role, vdev])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a side")
    };
    let server = spawn("server", server_vdev);
    std::thread::sleep(Duration::from_millis(300));
    let client = spawn("client", client_vdev);
    for (role, side) in [("server", server), ("client", client)] {
        let out = side.wait_with_output().expect("a side ran");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "round {round}: the {role} failed: {}\n{text}",
            out.status
        );
    }
    script("topo-memif.sh", &["down", SOCKET]);
    println!("round {round}: both ends stopped at once and ended well");
}

/// One end of [`stopping_together`]: up, exchanging frames until `at`,
/// then stopping its port and ending.
fn stop_at(role: &str, vdev: &str, at: SystemTime) {
    let (eal, pool) = eal_and_pool(role, vdev);
    let (mut port, mut rx, mut tx) = configure(eal, &pool);
    port.start_until_link_up(Duration::from_millis(500), Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{role}: link up: {e}"));
    let mut received = Vec::new();
    while SystemTime::now() < at {
        exchange(&mut rx, &mut tx, &pool, &mut received);
    }
    drop((rx, tx));
    port.stop().expect("stop");
    drop(port);
}
