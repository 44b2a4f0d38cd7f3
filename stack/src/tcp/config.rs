//! Per-connection settings.
//!
//! Defaults suit a datacenter: a 5 ms minimum RTO instead of RFC 6298's
//! 1 s (its section 2.4 allows a lower bound chosen by the operator), an
//! initial window of ten segments (RFC 6928), SACK and timestamps offered
//! (RFC 2018, RFC 7323), tail loss probes (RFC 8985 section 7), F-RTO
//! (RFC 5682), Nagle
//! on (RFC 896, RFC 5044 A.2), NewReno
//! congestion control (RFC 5681, RFC 6582; CUBIC, RFC 9438, on request)
//! and a FIN-WAIT-2 timeout of 60 s.

use crate::tcp::recovery::congestion::CongestionControl;
use crate::tcp::timers::time::Duration;

/// Keep-alive probing of an idle connection (RFC 9293 section 3.8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes after which the connection is dropped.
    pub probes: u32,
}

/// Settings of one connection, fixed when it is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The MSS this host can receive and send, from the local MTU (MTU
    /// minus 40 for IPv4); announced in the SYN.
    pub mss: u16,
    /// Capacity of the send queue in octets.
    pub send_buffer: usize,
    /// Capacity of the reassembly buffer in octets: data the consumer
    /// declines is held here.
    pub recv_buffer: usize,
    /// The window scale shift offered in the SYN (RFC 7323 section 2), at
    /// most 14.
    pub window_scale: u8,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// Offer timestamps (RFC 7323 sections 3-5).
    pub timestamps: bool,
    /// The tick of the timestamp clock. 1 ms keeps peers' PAWS sound over
    /// long idle periods (RFC 7323 section 5.4).
    pub timestamp_tick: Duration,
    /// Nagle's algorithm (RFC 9293 section 3.7.4); `false` is TCP_NODELAY.
    pub nagle: bool,
    /// The RTO before any RTT sample (RFC 6298 section 2.1).
    pub rto_initial: Duration,
    /// The lower bound of the RTO (RFC 6298 section 2.4).
    pub rto_min: Duration,
    /// The upper bound of the RTO (RFC 6298 section 2.5).
    pub rto_max: Duration,
    /// Consecutive retransmissions of data after which the connection is
    /// dropped (RFC 9293 section 3.8.3, R2).
    pub max_retransmits: u32,
    /// Retransmissions of a SYN after which the open fails.
    pub max_syn_retransmits: u32,
    /// The longest an ACK waits (RFC 9293 section 3.8.6.3; RFC 5681
    /// section 4.2 bounds it to 500 ms).
    pub ack_delay: Duration,
    /// Time spent in TIME-WAIT (2 MSL, RFC 9293 section 3.4.2).
    pub time_wait: Duration,
    /// How long a connection waits in FIN-WAIT-2 without hearing from the
    /// peer, our FIN acknowledged, for the peer's FIN; `None` waits
    /// forever, as RFC 9293 section 3.10.7.4 does. At the end the
    /// connection sends a RST, closes and reports [`crate::tcp::Event::TimedOut`]:
    /// the peer never closed its half. Like Linux's `tcp_fin_timeout`,
    /// 60 s by default.
    pub fin_wait2_timeout: Option<Duration>,
    /// Keep-alive probing, off when `None`.
    pub keep_alive: Option<KeepAlive>,
    /// Initial congestion window in segments (RFC 6928).
    pub initial_window: u32,
    /// The congestion control algorithm: NewReno (RFC 5681, RFC 6582) or
    /// CUBIC (RFC 9438).
    pub congestion: CongestionControl,
    /// Challenge ACKs sent per second at most (RFC 5961 section 7).
    pub challenge_ack_limit: u32,
    /// Separate out-of-order ranges the receiver keeps at most.
    pub max_ooo_ranges: usize,
    /// Send tail loss probes (RFC 8985 section 7) when SACK is in use.
    pub tail_loss_probes: bool,
    /// After a retransmission timeout, resend only the first segment and
    /// find out with F-RTO (RFC 5682; see the `frto` module) whether the
    /// timeout was spurious, undoing it if so; off, every timeout resends
    /// the whole flight.
    pub frto: bool,
    /// Lower the duplicate threshold for a flight of two or three
    /// segments that no new data can follow (RFC 5827 early retransmit;
    /// see `connection/early_retransmit.rs`).
    pub early_retransmit: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            window_scale: 7,
            sack: true,
            timestamps: true,
            timestamp_tick: Duration::from_millis(1),
            nagle: true,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(5),
            rto_max: Duration::from_secs(60),
            max_retransmits: 15,
            max_syn_retransmits: 6,
            ack_delay: Duration::from_millis(1),
            time_wait: Duration::from_secs(60),
            fin_wait2_timeout: Some(Duration::from_secs(60)),
            keep_alive: None,
            initial_window: 10,
            congestion: CongestionControl::NewReno,
            challenge_ack_limit: 100,
            max_ooo_ranges: 64,
            tail_loss_probes: true,
            frto: true,
            early_retransmit: true,
        }
    }
}
