//! What a simulated run depends on, drawn from a seed.

use super::link::{LinkConfig, Stall};
use super::rng::SimRng;
use crate::tcp::config::Config;
use crate::tcp::timers::time::Duration;

/// Everything a simulated run depends on.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed of every random choice.
    pub seed: u64,
    /// Both directions' impairments.
    pub link: LinkConfig,
    /// The active side's settings.
    pub client: Config,
    /// The passive side's settings.
    pub server: Config,
    /// Octets the client sends.
    pub client_bytes: u64,
    /// Octets the server sends.
    pub server_bytes: u64,
    /// Send records (MPA FPDUs) rather than byte stream.
    pub records: bool,
    /// Octets a receiver reads per millisecond; `None` reads at once.
    pub read_rate: Option<u64>,
    /// Probability a receiver consumes (places) a piece of data instead of
    /// declining it.
    pub consume: f64,
    /// Lower the client's MSS to this value after this much time.
    pub mss_drop: Option<(Duration, u16)>,
    /// Both sides open actively at once (RFC 9293 section 3.5, figure 7)
    /// instead of the server listening.
    pub simultaneous_open: bool,
    /// Receivers advertise this window (as MPA would from its buffers)
    /// instead of their reassembly buffer's free space.
    pub fixed_window: Option<u32>,
    /// Blind segments (RST, SYN, FIN, data at random sequence and
    /// acknowledgment numbers) injected once both sides are established.
    pub injections: u32,
    /// Each side sends what it has after every segment it takes in, as a
    /// dataplane core does, instead of once after all those arriving at
    /// the same time: every out-of-order segment then has its own
    /// duplicate ACK.
    pub poll_each_segment: bool,
}

impl Scenario {
    /// A scenario drawn from `seed`: link impairments, options, sizes,
    /// buffers and reader speed all vary.
    pub fn random(seed: u64) -> Self {
        let mut rng = SimRng::new(seed ^ 0x5eed);
        let lossy = rng.chance(0.7);
        let link = LinkConfig {
            delay: Duration(rng.between(10, 500)),
            jitter: Duration(rng.between(0, 100)),
            loss: if lossy {
                rng.between(0, 80) as f64 / 1000.0
            } else {
                0.0
            },
            duplicate: if lossy {
                rng.between(0, 30) as f64 / 1000.0
            } else {
                0.0
            },
            reorder: if lossy {
                rng.between(0, 50) as f64 / 1000.0
            } else {
                0.0
            },
            split: if rng.chance(0.15) { 0.1 } else { 0.0 },
            merge: if rng.chance(0.15) { 0.1 } else { 0.0 },
            displace: 0.0,
            bandwidth: 0,
            stall: None,
        };
        let starved = rng.chance(0.15);
        let mut configs = [Config::default(), Config::default()];
        for config in configs.iter_mut() {
            config.mss = rng.between(200, 1460) as u16;
            config.sack = rng.chance(0.8);
            config.timestamps = rng.chance(0.8);
            config.window_scale = rng.between(0, 8) as u8;
            config.nagle = rng.chance(0.5);
            config.time_wait = Duration::from_secs(60);
            config.send_buffer = rng.between(4, 64) as usize * 1024;
            config.recv_buffer = if starved {
                rng.between(2, 8) as usize * 1024
            } else {
                rng.between(16, 128) as usize * 1024
            };
            config.max_retransmits = 30;
            config.max_syn_retransmits = 30;
        }
        let [client, server] = configs;
        let mut scenario = Scenario {
            seed,
            client,
            server,
            client_bytes: rng.between(0, 200_000),
            server_bytes: if rng.chance(0.5) {
                rng.between(0, 50_000)
            } else {
                0
            },
            records: rng.chance(0.7),
            read_rate: starved.then(|| rng.between(500, 4000)),
            consume: if rng.chance(0.5) {
                rng.between(0, 100) as f64 / 100.0
            } else {
                0.0
            },
            simultaneous_open: rng.chance(0.1),
            fixed_window: rng.chance(0.1).then(|| rng.between(16, 512) as u32 * 1024),
            injections: if rng.chance(0.2) { 200 } else { 0 },
            poll_each_segment: false,
            mss_drop: rng.chance(0.1).then(|| {
                (
                    Duration(rng.between(1_000, 50_000)),
                    rng.between(100, 500) as u16,
                )
            }),
            link,
        };
        // Drawn last, so the draws above stay those of earlier versions.
        if lossy && rng.chance(0.3) {
            scenario.link.displace = rng.between(1, 50) as f64 / 1000.0;
        }
        scenario.poll_each_segment = rng.chance(0.3);
        // Stalls longer than the 5 ms minimum RTO: timeouts with nothing
        // lost, for F-RTO (RFC 5682) to find spurious.
        if rng.chance(0.1) {
            scenario.link.stall = Some(Stall {
                every: Duration::from_millis(rng.between(20, 200)),
                length: Duration::from_millis(rng.between(6, 20)),
            });
        }
        // A fixed window larger than the buffer suits a consumer that
        // places most data; a slow reader behind it would only drop data.
        if starved {
            scenario.fixed_window = None;
        } else if scenario.fixed_window.is_some() {
            scenario.consume = scenario.consume.max(0.5);
        }
        scenario
    }

    /// Whether an RFC 5044 A.1 exception may split a record: a shrinking
    /// MSS, or a window starved by a slow reader.
    pub fn may_split(&self) -> bool {
        self.read_rate.is_some() || self.mss_drop.is_some()
    }

    /// Whether a segment may start inside a record: after a split, or when
    /// the peer acknowledged part of a segment (a middlebox cut it, or a
    /// receiver with a fixed window kept only the part its buffer held).
    pub fn may_misalign(&self) -> bool {
        self.may_split()
            || self.link.split > 0.0
            || self.link.merge > 0.0
            || self.fixed_window.is_some()
    }
}
