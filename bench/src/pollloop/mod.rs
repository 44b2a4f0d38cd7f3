//! `uwarp-perf pollloop`: the bare dataplane poll loop in packets per
//! second, beside `dpdk-testpmd` in io forwarding mode over the same kind
//! of link, in the same run.
//!
//! uwarp's side is one [`DataplaneCore`] whose single flow sends every
//! segment it receives straight back out, so each packet goes through the
//! whole receive path (burst, Ethernet/IPv4/TCP validation with checksums
//! in software, flow-table lookup) and the transmit path. testpmd's io
//! mode only moves mbufs between queues without reading them: it is the
//! ceiling a loop that touches no packet data can reach on the link.
//!
//! - `ring`: a net_ring port whose transmit ring is its receive ring, with
//!   32 frames circling (testpmd: `--vdev net_ring0 --tx-first`).
//! - `memif`: two processes over net_memif, each running uwarp's loop
//!   (the far one is this binary started again with `--far-side`), 32
//!   frames bouncing between them; the reference is two testpmds. Each
//!   process's loop is pinned to its own CPU. The memif client (the far
//!   side) puts the frames in flight, in both runs: it is the last to see
//!   the link come up, and frames the server sends as soon as it sees the
//!   link can be lost while the client is still setting up its rings.

mod forwarder;
pub mod testpmd;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp_dataplane::net::{FourTuple, InterfaceAddress};
use uwarp_dataplane::runtime::{start_port, Command, CoreLink, DataplaneCore, TxBatch};
use uwarp_dataplane::{
    ring_loopback, Device, Eal, EalConfig, Mbuf, Mempool, MempoolConfig, Port, Queues,
};

use forwarder::{segment_frame, Forwarder};
use testpmd::{Testpmd, TestpmdConfig};

/// The link the loop runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// A net_ring loopback in this process.
    Ring,
    /// net_memif to a testpmd process.
    Memif,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Ring => "ring",
            Link::Memif => "memif",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct PollLoopConfig {
    /// The link.
    pub link: Link,
    /// Seconds measured (after one second of warm-up).
    pub seconds: u64,
    /// Frames circulating (testpmd's `--tx-first` sends one burst of 32).
    pub frames: usize,
    /// The CPU uwarp's loop (and testpmd's near-side forwarding lcore)
    /// runs on; the far side gets the other one.
    pub cpu: usize,
}

/// The two rates, in packets per second.
#[derive(Clone, Debug)]
pub struct PollLoopReport {
    /// The configuration measured.
    pub config: PollLoopConfig,
    /// uwarp's poll loop.
    pub uwarp_pps: f64,
    /// testpmd's io forwarding (the median of its per-second reports).
    pub testpmd_pps: f64,
}

impl PollLoopReport {
    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "mode": "pollloop",
            "link": self.config.link.name(),
            "frames": self.config.frames,
            "seconds": self.config.seconds,
            "uwarp": { "pps": self.uwarp_pps },
            "testpmd": { "pps": self.testpmd_pps },
            "ratio": self.uwarp_pps / self.testpmd_pps,
        })
    }

    /// The report as a table.
    pub fn to_text(&self) -> String {
        format!(
            "poll loop on {} ({} frames in flight, {} s each)\n\
             {:<28}{:>14.0} packets/s\n\
             {:<28}{:>14.0} packets/s\n\
             {:<28}{:>14.2}\n",
            self.config.link.name(),
            self.config.frames,
            self.config.seconds,
            "uwarp rx→classify→tx",
            self.uwarp_pps,
            "dpdk-testpmd io forwarding",
            self.testpmd_pps,
            "ratio",
            self.uwarp_pps / self.testpmd_pps
        )
    }
}

/// Runs uwarp's loop, then testpmd, on `config.link`.
pub fn run(config: &PollLoopConfig) -> Result<PollLoopReport, String> {
    if config.frames == 0 || config.frames > 512 || config.seconds == 0 {
        return Err("frames must be 1 to 512 and seconds positive".into());
    }
    let prefix = format!("uwarp-perf-{}", std::process::id());
    let eal = Eal::init(&EalConfig::virtual_devices(Vec::<String>::new()).file_prefix(&prefix))
        .map_err(|e| format!("the EAL did not start: {e}"))?;
    let other_cpu = usize::from(config.cpu == 0);
    let (uwarp_pps, testpmd_pps) = match config.link {
        Link::Ring => {
            let device = ring_loopback(eal, 1, 1024).map_err(|e| e.to_string())?;
            let uwarp = ForwardLoop::start(eal, device)?.run(eal, config)?;
            let vdevs = ["net_ring0".to_owned()];
            let near = testpmd_lcores(config.cpu, other_cpu);
            let reference = Testpmd::start(&TestpmdConfig {
                lcores: &near,
                vdevs: &vdevs,
                tx_first: true,
                file_prefix: &format!("{prefix}-ring"),
            })?;
            (uwarp, median(reference.rates(1, config.seconds as usize))?)
        }
        Link::Memif => memif(eal, config, &prefix, other_cpu)?,
    };
    Ok(PollLoopReport {
        config: config.clone(),
        uwarp_pps,
        testpmd_pps,
    })
}

/// `--lcores` putting testpmd's main lcore on `main` and its forwarding
/// lcore on `forward`.
fn testpmd_lcores(forward: usize, main: usize) -> String {
    format!("0@{main},1@{forward}")
}

/// The MAC of both sides of the benchmark's memif link (they also use
/// the same IP address): the frames in flight are addressed to it, so each
/// side's loop takes them as its own flow's.
const LOOP_MAC: &str = "02:fe:00:00:00:01";

/// The `--vdev` value of one side (`role` server or client) of a memif
/// link over the Unix socket `socket`, with the MAC address `mac`.
pub(crate) fn memif_vdev(role: &str, socket: &str, mac: &str) -> String {
    format!("net_memif0,role={role},socket={socket},socket-abstract=no,mac={mac}")
}

/// uwarp's loop against another uwarp-perf process forwarding the frames
/// back, then the same with two testpmds.
fn memif(
    eal: &'static Eal,
    config: &PollLoopConfig,
    prefix: &str,
    far_cpu: usize,
) -> Result<(f64, f64), String> {
    let socket = format!("/tmp/{prefix}-memif.sock");
    let server = memif_vdev("server", &socket, LOOP_MAC);
    let (name, args) = server.split_once(',').expect("a vdev has arguments");
    let device = Device::create_vdev(eal, name, args).map_err(|e| e.to_string())?;
    let near = ForwardLoop::start(eal, device)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let far = FarSide(
        std::process::Command::new(exe)
            .args(["pollloop", "--link", "memif", "--far-side", &socket])
            .args(["--seconds", &(config.seconds + 3).to_string()])
            .args(["--cpu", &far_cpu.to_string()])
            .args(["--frames", &config.frames.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the far side: {e}"))?,
    );
    let near_config = PollLoopConfig {
        frames: 0,
        ..config.clone()
    };
    let uwarp = near.run(eal, &near_config);
    drop(far);
    let _ = std::fs::remove_file(&socket);
    let uwarp = uwarp?;

    let near = Testpmd::start(&TestpmdConfig {
        lcores: &testpmd_lcores(config.cpu, far_cpu),
        vdevs: &[server],
        tx_first: false,
        file_prefix: &format!("{prefix}-near"),
    })?;
    near.wait_started(Duration::from_secs(20))?;
    let far = Testpmd::start(&TestpmdConfig {
        lcores: &testpmd_lcores(far_cpu, config.cpu),
        vdevs: &[memif_vdev("client", &socket, LOOP_MAC)],
        tx_first: true,
        file_prefix: &format!("{prefix}-far"),
    })?;
    let reference = median(near.rates(2, config.seconds as usize));
    drop(far);
    drop(near);
    let _ = std::fs::remove_file(&socket);
    Ok((uwarp, reference?))
}

/// The far side of the memif run: puts `frames` frames in flight and
/// forwards what comes back for `seconds`, on `cpu`, then exits.
pub fn run_far_side(socket: &str, seconds: u64, cpu: usize, frames: usize) -> Result<(), String> {
    let prefix = format!("uwarp-perf-{}", std::process::id());
    let eal = Eal::init(
        &EalConfig::virtual_devices([memif_vdev("client", socket, LOOP_MAC)]).file_prefix(&prefix),
    )
    .map_err(|e| format!("the EAL did not start: {e}"))?;
    let device = Device::by_name(eal, "net_memif0").map_err(|e| e.to_string())?;
    let config = PollLoopConfig {
        link: Link::Memif,
        seconds,
        frames,
        cpu,
    };
    ForwardLoop::start(eal, device)?.run(eal, &config).map(drop)
}

/// Kills the far-side process when dropped.
struct FarSide(std::process::Child);

impl Drop for FarSide {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(mut rates: Vec<u64>) -> Result<f64, String> {
    if rates.is_empty() {
        return Err("dpdk-testpmd printed no rates (did it start? run it by hand to see)".into());
    }
    rates.sort_unstable();
    Ok(rates[rates.len() / 2] as f64)
}

/// uwarp's forwarding loop on a started port.
struct ForwardLoop {
    port: Port,
    queues: Queues,
    pool: Arc<Mempool>,
}

impl ForwardLoop {
    /// Starts `device` with one queue pair (a memif server must be started
    /// before its client connects).
    fn start(eal: &'static Eal, device: Device) -> Result<Self, String> {
        let pool_config = MempoolConfig {
            capacity: 4095,
            cache_size: 64,
            ..MempoolConfig::default()
        };
        let pool =
            Arc::new(Mempool::new(eal, "pollloop", &pool_config, None).map_err(|e| e.to_string())?);
        let (port, queues) = start_port(eal, device, 1, &pool).map_err(|e| e.to_string())?;
        Ok(ForwardLoop { port, queues, pool })
    }

    /// Waits for the link, puts `config.frames` frames in flight and runs
    /// the loop pinned to `config.cpu`; returns packets per second over
    /// `config.seconds` after a second of warm-up.
    fn run(mut self, eal: &'static Eal, config: &PollLoopConfig) -> Result<f64, String> {
        // Frames sent before a memif peer connects are lost: wait for it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.port.link().is_ok_and(|l| l.up) {
            if Instant::now() > deadline {
                return Err(format!("the {} link did not come up", config.link.name()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mac = self.port.mac_address().map_err(|e| e.to_string())?;
        let address = InterfaceAddress {
            mac: EthernetAddress(mac),
            ip: Ipv4Address::new(10, 81, 0, 1),
            prefix_len: 24,
            gateway: None,
            vlan: None,
        };
        let tuple = FourTuple {
            local_ip: address.ip,
            local_port: 4791,
            remote_ip: Ipv4Address::new(10, 81, 0, 2),
            remote_port: 50000,
        };
        let link = Arc::new(CoreLink::default());
        let frame = segment_frame(&address, &tuple);
        let _ = link.send_command(Command::AddFlow(tuple, ()));
        for _ in 0..config.frames {
            let mbuf = Mbuf::from_slice(&self.pool, &frame).map_err(|e| e.to_string())?;
            let _ = link.send_command(Command::Packet(mbuf));
        }
        let (rx, tx) = (self.queues.rx.remove(0), self.queues.tx.remove(0));
        let tx = TxBatch::new(tx, Arc::clone(&self.pool));
        let mut core = DataplaneCore::new(rx, tx, address, link, Forwarder::default());
        let pps =
            std::thread::scope(|scope| scope.spawn(|| measure(eal, &mut core, config)).join())
                .map_err(|_| "the poll loop panicked".to_owned())?;
        core.shutdown();
        if pps == 0.0 {
            return Err(format!(
                "no packet went round on {} (is the far side up?)",
                config.link.name()
            ));
        }
        Ok(pps)
    }
}

/// Polls `core` on this thread, pinned to `config.cpu`: a second of
/// warm-up, then `config.seconds` measured.
fn measure(eal: &Eal, core: &mut DataplaneCore<Forwarder>, config: &PollLoopConfig) -> f64 {
    core_affinity::set_for_current(core_affinity::CoreId { id: config.cpu });
    let registered = eal.register_current_thread().is_ok();
    let warm_up = Instant::now() + Duration::from_secs(1);
    while Instant::now() < warm_up {
        core.poll(Instant::now());
    }
    let (start, before) = (Instant::now(), core.handler().forwarded);
    let end = start + Duration::from_secs(config.seconds);
    let mut now = start;
    while now < end {
        core.poll(now);
        now = Instant::now();
    }
    if registered {
        eal.unregister_current_thread();
    }
    (core.handler().forwarded - before) as f64 / now.duration_since(start).as_secs_f64()
}
