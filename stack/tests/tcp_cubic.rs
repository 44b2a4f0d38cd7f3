//! CUBIC (RFC 9438) end to end over a clean path with a 100 ms RTT and a
//! single loss: the window drops to β_cubic = 0.7 of W_max (section 4.6)
//! and grows back along W_cubic(t) (section 4.2): concave up to W_max at
//! K, a plateau around it, then convex (sections 4.4-4.5). NewReno over
//! the same path halves and grows one segment per RTT (RFC 5681 section
//! 3.1). Time is simulated; only the shape of the window is asserted.

mod tcp_common;

use std::collections::VecDeque;
use std::sync::OnceLock;
use tcp_common::*;
use uwarp_stack::tcp::{Config, CongestionControl, Connection, Duration, Instant};

const ONE_WAY: Duration = Duration::from_millis(50);
const RTT: f64 = 0.1;
/// The one data segment lost is the first sent with cwnd at this many
/// segments.
const LOSS_AT_SEGMENTS: u32 = 100;
const RUN: Duration = Duration::from_secs(12);
/// C of RFC 9438 section 4.1.1.
const C: f64 = 0.4;

/// A bulk transfer's congestion window over time around one loss.
struct Trace {
    /// (time, cwnd) after every event.
    samples: Vec<(Instant, u32)>,
    /// cwnd just before the loss was detected, in segments.
    w_max: f64,
    /// ssthresh set by the loss, in segments.
    ssthresh: f64,
    /// When the window first grew past ssthresh after the loss: the start
    /// of congestion avoidance.
    avoidance_from: Instant,
    smss: f64,
}

impl Trace {
    /// The window in segments `secs` into congestion avoidance.
    fn at(&self, secs: f64) -> f64 {
        let t = self.avoidance_from + Duration((secs * 1e6) as u64);
        let i = self.samples.partition_point(|&(at, _)| at <= t);
        assert!(
            i < self.samples.len(),
            "{secs} s is past the end of the run"
        );
        f64::from(self.samples[i - 1].1) / self.smss
    }

    /// The window's growth from `from` to `to` seconds into avoidance.
    fn growth(&self, from: f64, to: f64) -> f64 {
        self.at(to) - self.at(from)
    }
}

/// Runs `conn`'s timers if due.
fn run_timers(conn: &mut Connection, now: Instant) {
    if conn.poll_at().is_some_and(|at| at <= now) {
        conn.on_timer(now);
    }
}

/// A sends without end to B over a path of fixed delay (no bottleneck)
/// that loses one data segment, once cwnd reached `LOSS_AT_SEGMENTS`.
fn bulk_transfer_with_one_loss(congestion: CongestionControl) -> Trace {
    // The handshake ran at zero RTT: a WAN floor keeps the RTO above the
    // path's RTT until it is measured.
    let cfg = Config {
        congestion,
        rto_min: Duration::from_millis(200),
        send_buffer: 4 << 20,
        recv_buffer: 4 << 20,
        ..no_nagle()
    };
    let mut pair = Pair::connected(cfg.clone(), cfg);
    pair.b_rx.consume = true;
    let smss = pair.a.emss() as u32;
    let data = vec![0x5a; 64 * 1024];
    let end = pair.now + RUN;
    // Both directions share the delay, so one queue stays in time order.
    let mut path: VecDeque<(Instant, Wire)> = VecDeque::new();
    let mut lost = false;
    let mut loss: Option<(u32, u32)> = None;
    let mut avoidance_from = None;
    let mut samples = Vec::new();
    while pair.now <= end {
        let now = pair.now;
        // One segment at a time, each answered at once, as a dataplane does.
        let due = path.front().is_some_and(|(at, _)| *at <= now);
        if let Some((_, wire)) = due.then(|| path.pop_front()).flatten() {
            let (cwnd, recoveries) = (pair.a.cwnd(), pair.a.stats().fast_recoveries);
            pair.deliver(&wire);
            if pair.a.stats().fast_recoveries > recoveries {
                loss = Some((cwnd, pair.a.ssthresh()));
            }
        }
        pair.b_rx.offered.clear();
        run_timers(&mut pair.a, now);
        run_timers(&mut pair.b, now);
        while pair.a.send_capacity() > 0 {
            let room = pair.a.send_capacity().min(data.len());
            pair.a.send(&data[..room]);
        }
        let lose_next = !lost && pair.a.cwnd() >= LOSS_AT_SEGMENTS * smss;
        for (from_a, conn) in [(true, &mut pair.a), (false, &mut pair.b)] {
            for bytes in drain(conn, now) {
                let wire = Wire { from_a, bytes };
                if from_a && lose_next && !lost && wire.payload_len() > 0 {
                    lost = true;
                    continue;
                }
                path.push_back((now + ONE_WAY, wire));
            }
        }
        let cwnd = pair.a.cwnd();
        samples.push((now, cwnd));
        if let Some((_, ssthresh)) = loss {
            if avoidance_from.is_none() && cwnd > ssthresh {
                avoidance_from = Some(now);
            }
        }
        let next = [
            path.front().map(|(at, _)| *at),
            pair.a.poll_at(),
            pair.b.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a bulk transfer always has something pending");
        pair.now = next.max(now);
    }
    assert_eq!(pair.a.stats().fast_recoveries, 1, "{congestion:?}");
    assert_eq!(pair.a.stats().timeouts, 0, "{congestion:?}");
    assert_eq!(pair.a.stats().retransmissions, 1, "{congestion:?}");
    let (w_max, ssthresh) = loss.expect("the loss was detected");
    let smss = f64::from(smss);
    Trace {
        samples,
        w_max: f64::from(w_max) / smss,
        ssthresh: f64::from(ssthresh) / smss,
        avoidance_from: avoidance_from.expect("avoidance started"),
        smss,
    }
}

/// The CUBIC run, shared by the tests.
fn cubic() -> &'static Trace {
    static TRACE: OnceLock<Trace> = OnceLock::new();
    TRACE.get_or_init(|| bulk_transfer_with_one_loss(CongestionControl::Cubic))
}

#[test]
fn cubic_recovers_along_the_cubic_curve_towards_w_max() {
    let trace = cubic();
    let (w_max, cwnd_epoch) = (trace.w_max, trace.ssthresh);
    // Section 4.6: the window is cut to 0.7 W_max (0.7 of FlightSize,
    // which a few SACKed segments put slightly above cwnd).
    let beta = cwnd_epoch / w_max;
    assert!((0.69..0.73).contains(&beta), "beta {beta}, W_max {w_max}");
    assert!(w_max > f64::from(LOSS_AT_SEGMENTS), "W_max {w_max}");
    // Figure 2: K, then figure 1.
    let k = ((w_max - cwnd_epoch) / C).cbrt();
    let w_cubic = |t: f64| C * (t - k).powi(3) + w_max;
    for eighth in 1..=16 {
        let t = k * f64::from(eighth) / 8.0;
        let (cwnd, curve) = (trace.at(t), w_cubic(t));
        assert!(
            (cwnd - curve).abs() < 0.03 * w_max,
            "t = {t:.2} s: cwnd {cwnd:.1} segments, W_cubic {curve:.1}, W_max {w_max:.1}, K {k:.2}"
        );
    }
    // Back at W_max after K seconds.
    assert!((trace.at(k) - w_max).abs() < 0.03 * w_max);
    // Concave: most of the way back in the first half of K.
    assert!(trace.growth(0.0, k / 2.0) > 3.0 * trace.growth(k / 2.0, k));
    // A plateau around W_max, then convex probing beyond it.
    assert!(trace.growth(1.5 * k, 2.0 * k) > 3.0 * trace.growth(k, 1.5 * k));
    assert!(trace.at(2.0 * k) > 1.2 * w_max);
}

#[test]
fn newreno_halves_and_adds_one_segment_per_rtt() {
    let reno = bulk_transfer_with_one_loss(CongestionControl::NewReno);
    let half = reno.ssthresh / reno.w_max;
    assert!((0.49..0.53).contains(&half), "{half}");
    let per_rtt = reno.growth(1.0, 5.0) / (4.0 / RTT);
    assert!((0.9..1.1).contains(&per_rtt), "{per_rtt} segments per RTT");
    // The same loss on the same path: CUBIC is back at W_max by K, NewReno
    // far below it.
    let cubic = cubic();
    assert_eq!(cubic.w_max, reno.w_max, "identical until the loss");
    let k = ((cubic.w_max - cubic.ssthresh) / C).cbrt();
    assert!(
        reno.at(k) < 0.85 * cubic.at(k),
        "{} {}",
        reno.at(k),
        cubic.at(k)
    );
}
