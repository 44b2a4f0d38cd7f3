//! Shared by the runtime tests: handlers that ping and count, frame
//! builders for the peer side, and the topology scripts.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::process::Command as Process;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp_dataplane::net::{EchoReply, InterfaceAddress, Resolution, TcpMeta};
use uwarp_dataplane::runtime::{
    assemble, tcp_segment, ControlContext, ControlCore, ControlHandler, DataplaneCore, FlowHandler,
    TxBatch,
};
use uwarp_dataplane::{Mbuf, Mempool, MempoolConfig};
use uwarp_dataplane::{Port, Queues};

/// A control core handler that pings `target` `count` times, one request
/// in flight at a time (resent after a second), and records the replies.
#[derive(Debug, Default)]
pub struct Pinger {
    pub target: Option<Ipv4Address>,
    pub count: u16,
    pub next_seq: u16,
    pub last_sent: Option<Instant>,
    pub replies: Vec<EchoReply>,
    /// How many pings were answered, readable while the core runs.
    pub answered: Arc<AtomicU16>,
}

impl Pinger {
    pub fn new(target: Ipv4Address, count: u16) -> Self {
        Pinger {
            target: Some(target),
            count,
            ..Pinger::default()
        }
    }

    /// Waits (up to `timeout`) until every ping was answered.
    pub fn wait_answered(answered: &AtomicU16, count: u16, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while answered.load(Ordering::Acquire) < count {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// Replies with distinct sequence numbers and the payload we sent.
    pub fn distinct_replies(&self) -> usize {
        let mut seqs: Vec<u16> = self
            .replies
            .iter()
            .filter(|r| r.payload_len == PING_PAYLOAD.len())
            .map(|r| r.seq)
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs.len()
    }
}

pub const PING_IDENT: u16 = 0x7557;
pub const PING_PAYLOAD: &[u8] = b"uwarp echo request payload";

impl ControlHandler for Pinger {
    type Flow = ();

    fn on_echo_reply(&mut self, _now: Instant, reply: EchoReply) {
        if reply.ident == PING_IDENT && Some(reply.src) == self.target {
            self.replies.push(reply);
            if reply.seq == self.next_seq {
                self.next_seq += 1;
                self.last_sent = None;
                self.answered.store(self.next_seq, Ordering::Release);
            }
        }
    }

    fn poll(&mut self, now: Instant, ctx: &mut ControlContext<'_, ()>) {
        let Some(target) = self.target else { return };
        if self.next_seq >= self.count {
            return;
        }
        let due = self
            .last_sent
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
        if !due {
            return;
        }
        let sent = ctx.iface.send_echo_request(
            now,
            target,
            PING_IDENT,
            self.next_seq,
            PING_PAYLOAD,
            ctx.tx,
        );
        if let Resolution::Known(_) = sent {
            self.last_sent = Some(now);
        }
    }
}

/// A dataplane handler for tests without flows.
#[derive(Debug, Default)]
pub struct NoFlows;

impl FlowHandler for NoFlows {
    type Flow = ();

    fn on_packet(&mut self, _: Instant, _: &mut (), _: &TcpMeta, _: Mbuf, _: &mut TxBatch) {}
}

/// A dataplane handler that records the segments of its flows.
#[derive(Debug, Default)]
pub struct Recorder {
    pub segments: Vec<(u32, Vec<u8>)>,
}

impl FlowHandler for Recorder {
    type Flow = u32;

    fn on_packet(
        &mut self,
        _: Instant,
        flow: &mut u32,
        meta: &TcpMeta,
        packet: Mbuf,
        _: &mut TxBatch,
    ) {
        let (head, tail) = tcp_segment(&packet, meta);
        self.segments.push((*flow, [head, tail].concat()));
    }
}

pub fn pool(eal: &uwarp_dataplane::Eal, name: &str, capacity: u32) -> Arc<Mempool> {
    let config = MempoolConfig {
        capacity,
        cache_size: 32,
        ..MempoolConfig::default()
    };
    Arc::new(Mempool::new(eal, name, &config, None).expect("mempool"))
}

pub fn address(mac: [u8; 6], ip: [u8; 4]) -> InterfaceAddress {
    InterfaceAddress {
        mac: EthernetAddress(mac),
        ip: Ipv4Address::from(ip),
        prefix_len: 24,
        gateway: None,
        vlan: None,
    }
}

/// Whether this process may create taps, veths and namespaces.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `scripts/<name> args...`, panicking with its output on failure.
pub fn script(name: &str, args: &[&str]) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "scripts", name]
        .iter()
        .collect();
    let out = Process::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command, returning (success, stdout + stderr).
pub fn run(program: &str, args: &[&str]) -> (bool, String) {
    let out = Process::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Parses ping's summary: (transmitted, received).
pub fn ping_summary(output: &str) -> Option<(u32, u32)> {
    let line = output.lines().find(|l| l.contains("packets transmitted"))?;
    let mut numbers = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().ok());
    Some((numbers.next()??, numbers.next()??))
}

/// The cores of a ping test on `port`: uwarp at `ours` pinging `theirs`
/// `count` times, one dataplane core without flows.
pub fn ping_cores(
    port: &Port,
    queues: Queues,
    pool: &Arc<Mempool>,
    ours: [u8; 4],
    theirs: [u8; 4],
    count: u16,
) -> (ControlCore<Pinger>, Vec<DataplaneCore<NoFlows>>) {
    let mac = port.mac_address().expect("MAC");
    let config = uwarp_dataplane::net::InterfaceConfig::new(address(mac, ours));
    let pinger = Pinger::new(Ipv4Address::from(theirs), count);
    assemble(
        config,
        queues,
        std::slice::from_ref(pool),
        pinger,
        vec![NoFlows],
    )
    .expect("cores")
}

/// The kernel's end of a ping test: its address, the interface uwarp is
/// reached through, and the command prefix that runs a program there
/// (empty for the host, `ip netns exec NS` for a namespace).
pub struct KernelSide<'a> {
    pub ip: [u8; 4],
    pub iface: &'a str,
    pub exec: &'a [&'a str],
}

impl KernelSide<'_> {
    fn run(&self, program: &str, args: &[&str]) -> (bool, String) {
        match self.exec.split_first() {
            None => run(program, args),
            Some((first, rest)) => {
                let mut all: Vec<&str> = rest.to_vec();
                all.push(program);
                all.extend_from_slice(args);
                run(first, &all)
            }
        }
    }
}

/// uwarp (on the port of `device`, at `uwarp_ip`, control core and one
/// dataplane core on threads) and the kernel ping each other: uwarp 100
/// times, then the kernel 1000 times after forgetting uwarp's MAC, so each
/// side resolves the other by ARP. Asserts no loss, ARP resolved both ways,
/// the interface's counters, and every mbuf back in the pool at the end.
pub fn ping_both_ways(
    eal: &'static uwarp_dataplane::Eal,
    device: uwarp_dataplane::Device,
    uwarp_ip: [u8; 4],
    kernel: &KernelSide<'_>,
) {
    use uwarp_dataplane::runtime::{start_port, Placement, Runtime};

    let pool = pool(eal, "ping", 4095);
    let (port, queues) = start_port(eal, device, 1, &pool).expect("port");
    let mac = port.mac_address().expect("MAC");
    let (control, dataplanes) = ping_cores(&port, queues, &pool, uwarp_ip, kernel.ip, 100);
    let answered = control.handler().answered.clone();
    let runtime = Runtime::spawn(eal, control, dataplanes, &Placement::Unpinned).expect("spawn");

    // uwarp first: it resolves the kernel's MAC by ARP and pings it.
    let all_answered = Pinger::wait_answered(&answered, 100, Duration::from_secs(10));
    // Then the kernel, made to resolve uwarp's MAC by ARP itself.
    kernel.run("ip", &["neigh", "flush", "dev", kernel.iface]);
    let target = Ipv4Address::from(uwarp_ip).to_string();
    let (ok, out) = kernel.run(
        "ping",
        &["-c", "1000", "-i", "0.002", "-W", "2", "-q", &target],
    );
    let (_, neigh) = kernel.run("ip", &["neigh", "show", &target, "dev", kernel.iface]);
    let stopped = runtime.shutdown();

    assert!(ok, "the kernel's ping failed: {out}");
    let summary = ping_summary(&out).unwrap_or_else(|| panic!("ping said: {out}"));
    assert_eq!(
        summary,
        (1000, 1000),
        "the kernel's ping lost replies: {out}"
    );
    let mac_text = EthernetAddress(mac).to_string().replace('-', ":");
    assert!(
        neigh.to_lowercase().contains(&mac_text),
        "the kernel resolved {target} to {mac_text}: {neigh}"
    );
    assert!(all_answered, "uwarp's 100 pings were answered");
    assert_eq!(stopped.control.handler().distinct_replies(), 100);
    let iface = stopped.control.iface();
    assert!(
        iface.neighbor(Ipv4Address::from(kernel.ip)).is_some(),
        "uwarp resolved the kernel's MAC by ARP"
    );
    let counters = iface.counters();
    assert!(counters.icmp_echo_replied >= 1000, "{counters:?}");
    assert!(counters.icmp_echo_replies_received >= 100, "{counters:?}");
    assert!(counters.arp_requests_answered >= 1, "{counters:?}");
    assert!(counters.arp_requests_sent >= 1, "{counters:?}");
    assert_eq!(stopped.dataplanes[0].counters().control_ring_full, 0);
    drop(stopped);
    drop(port);
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
}
