//! Congestion window arithmetic: one [`Congestion`] state per connection,
//! running the algorithm its [`CongestionControl`] selects.
//!
//! Both algorithms share:
//!
//! - slow start with appropriate byte counting (RFC 3465 section 2.2;
//!   CUBIC keeps it, RFC 9438 section 4.10): each ACK grows the window by
//!   the octets it acknowledges, at most L = 2*SMSS, and at most
//!   L = 1*SMSS in the slow start after a retransmission timeout (section
//!   2.3), when an ACK may cover segments that had arrived before the
//!   timeout and tells little of what the network carries now. Slow start
//!   stops at ssthresh: the
//!   rest of an ACK crossing it counts in congestion avoidance (as Linux's
//!   `tcp_slow_start` does), so a large ACK never overshoots the
//!   threshold. L = 2*SMSS, not Linux's every acknowledged octet: section
//!   2.2 allows no more, since a stretch ACK covering N segments would
//!   then release 2N segments back to back, and nothing paces our sender;
//!   with L = 2*SMSS the burst is at most N + 2. The window still doubles
//!   per round trip against a receiver acknowledging every second segment
//!   (RFC 5681 section 4.2), and against stretch ACKs of N segments (a
//!   dataplane core acknowledging a whole receive burst) grows by 2/N per
//!   round trip instead of 1/N;
//! - fast recovery (RFC 5681 section 3.2 with NewReno's partial ACKs, RFC
//!   6582 section 3.2), which CUBIC leaves unchanged (RFC 9438 section
//!   4.2); with SACK the window is not inflated and the sender counts the
//!   pipe instead (RFC 6675 section 5);
//! - the loss window after a timeout (RFC 5681 section 3.1, RFC 9438
//!   section 4.8), the initial window (RFC 6928) and the restart window
//!   after an idle period (RFC 5681 section 4.1).
//!
//! They differ in the decrease factor (1/2 for NewReno, RFC 5681 equation
//! 4; 0.7 for CUBIC, RFC 9438 section 4.6) and in congestion avoidance:
//! NewReno adds one SMSS per window acknowledged (RFC 5681 section 3.1),
//! CUBIC follows W_cubic(t) (RFC 9438 sections 4.2-4.5), never slower
//! than Reno's estimate (section 4.3), with fast convergence (section
//! 4.7).

use crate::tcp::timers::time::{Duration, Instant};

/// The congestion control algorithm of a connection
/// ([`crate::tcp::Config::congestion`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CongestionControl {
    /// NewReno: the window halves on loss and grows by one segment per
    /// round trip in congestion avoidance (RFC 5681 sections 3.1-3.2, RFC
    /// 6582).
    #[default]
    NewReno,
    /// CUBIC (RFC 9438): the window shrinks to 0.7 on loss and grows along
    /// a cubic function of the time since the last congestion event,
    /// never slower than Reno would (section 4.3).
    Cubic,
}

/// C of RFC 9438 section 4.1.1, in segments per second cubed.
const C: f64 = 0.4;
/// β_cubic of RFC 9438 section 4.6, as the fraction `BETA_NUM / BETA_DEN`.
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
const BETA: f64 = BETA_NUM as f64 / BETA_DEN as f64;
/// α_cubic of RFC 9438 section 4.3: Reno's average window with β_cubic.
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// The target stays below this multiple of cwnd (RFC 9438 section 4.2).
const MAX_TARGET_GROWTH: f64 = 1.5;

/// L of RFC 3465 section 2.2: slow start grows the window by at most this
/// many SMSS per ACK (outside the slow start after a timeout).
const SLOW_START_LIMIT: u32 = 2;

/// The initial window (RFC 6928 section 2): `segments` segments of
/// `smss`, capped to 14600 octets but never below two segments, and at
/// least one segment.
fn initial_window(smss: u32, segments: u32) -> u32 {
    segments
        .saturating_mul(smss)
        .min((2 * smss).max(14600))
        .max(smss)
}

/// Seconds in `duration`, as CUBIC's formulas count time.
fn seconds(duration: Duration) -> f64 {
    duration.micros() as f64 / 1e6
}

/// The congestion state of a sender, in octets.
#[derive(Debug, Clone)]
pub struct Congestion {
    cwnd: u32,
    ssthresh: u32,
    smss: u32,
    initial_segments: u32,
    /// In the slow start that follows a retransmission timeout, where
    /// L = 1*SMSS (RFC 3465 section 2.3); it ends at ssthresh or with a
    /// fast recovery.
    after_timeout: bool,
    avoidance: Avoidance,
}

/// What differs between the algorithms: growth in congestion avoidance
/// and the decrease factor.
#[derive(Debug, Clone)]
enum Avoidance {
    /// NewReno, with the octets acknowledged in congestion avoidance and
    /// not yet turned into window growth.
    NewReno { acked: u32 },
    /// CUBIC.
    Cubic(Cubic),
}

impl Congestion {
    /// The state at the start of a connection: the initial window of
    /// `initial_segments` segments of `smss` (RFC 6928), no threshold.
    pub fn new(algorithm: CongestionControl, smss: u32, initial_segments: u32) -> Self {
        let smss = smss.max(1);
        Congestion {
            cwnd: initial_window(smss, initial_segments),
            ssthresh: u32::MAX,
            smss,
            initial_segments,
            after_timeout: false,
            avoidance: match algorithm {
                CongestionControl::NewReno => Avoidance::NewReno { acked: 0 },
                CongestionControl::Cubic => Avoidance::Cubic(Cubic::default()),
            },
        }
    }

    /// The congestion window.
    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow start threshold.
    pub fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// A new sender MSS (RFC 5681 section 3.1 uses SMSS throughout).
    pub fn set_smss(&mut self, smss: u32) {
        self.smss = smss.max(1);
        self.cwnd = self.cwnd.max(self.smss);
    }

    /// `acked` octets of new data were acknowledged at `now` outside
    /// recovery. `srtt` is the smoothed RTT (zero before any sample);
    /// `cwnd_limited` tells whether the ACK answers data sent while the
    /// window was full (less than one SMSS of it free): CUBIC neither grows
    /// nor lets its clock run while the sender is application- or
    /// receiver-limited (RFC 9438 sections 4.2 and 5.8).
    pub fn on_ack(&mut self, now: Instant, acked: u32, srtt: Duration, cwnd_limited: bool) {
        let acked = if self.cwnd < self.ssthresh {
            self.slow_start(acked)
        } else {
            acked
        };
        if acked == 0 {
            return;
        }
        match &mut self.avoidance {
            Avoidance::NewReno { acked: pending } => {
                *pending = pending.saturating_add(acked);
                if *pending >= self.cwnd {
                    *pending -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(self.smss);
                }
            }
            Avoidance::Cubic(cubic) => {
                if cwnd_limited {
                    let growth = Growth {
                        now,
                        acked,
                        srtt,
                        cwnd: self.cwnd,
                        smss: self.smss,
                    };
                    self.cwnd = cubic.grow(&growth);
                } else {
                    cubic.pause(now);
                }
            }
        }
    }

    /// Slow start (RFC 3465 sections 2.2-2.3) for an ACK of `acked`
    /// octets: the window grows by them, at most L SMSS and no further
    /// than ssthresh. Returns the octets left over once the window
    /// reached ssthresh, for congestion avoidance.
    fn slow_start(&mut self, acked: u32) -> u32 {
        let limit = if self.after_timeout {
            1
        } else {
            SLOW_START_LIMIT
        };
        let growth = acked.min(limit.saturating_mul(self.smss));
        let room = self.ssthresh - self.cwnd;
        if growth < room {
            self.cwnd += growth;
            return 0;
        }
        self.cwnd = self.ssthresh;
        self.after_timeout = false;
        acked - room
    }

    /// The new threshold after a congestion event with `flight` octets
    /// outstanding: FlightSize / 2 (RFC 5681 equation 4) or FlightSize ×
    /// β_cubic (RFC 9438 section 4.6), at least two segments.
    fn decreased(&self, flight: u32) -> u32 {
        let reduced = match self.avoidance {
            Avoidance::NewReno { .. } => flight / 2,
            Avoidance::Cubic(_) => (u64::from(flight) * BETA_NUM / BETA_DEN) as u32,
        };
        reduced.max(2 * self.smss)
    }

    /// Lowers the threshold after a congestion event; CUBIC also updates
    /// W_max from the window before the reduction (RFC 9438 sections
    /// 4.6-4.8).
    fn congestion_event(&mut self, flight: u32, timeout: bool) {
        self.ssthresh = self.decreased(flight);
        let before = self.cwnd;
        match &mut self.avoidance {
            Avoidance::NewReno { acked } => *acked = 0,
            Avoidance::Cubic(cubic) if timeout => cubic.on_timeout(before),
            Avoidance::Cubic(cubic) => cubic.on_loss(before),
        }
    }

    /// Loss detected by duplicate ACKs or SACK (RFC 5681 section 3.2 step
    /// 2, RFC 9438 section 4.6). Without SACK the window is inflated by
    /// the three segments that left the network.
    pub fn enter_recovery(&mut self, flight: u32, sack: bool) {
        self.congestion_event(flight, false);
        self.after_timeout = false;
        self.cwnd = if sack {
            self.ssthresh
        } else {
            self.ssthresh + 3 * self.smss
        };
    }

    /// A further duplicate ACK during recovery without SACK.
    pub fn inflate(&mut self) {
        self.cwnd = self.cwnd.saturating_add(self.smss);
    }

    /// A partial ACK during recovery without SACK (RFC 6582 section 3.2
    /// step 5): deflate by the amount acknowledged, add back one segment.
    pub fn partial_ack(&mut self, acked: u32) {
        self.cwnd = self.cwnd.saturating_sub(acked);
        if acked >= self.smss {
            self.cwnd = self.cwnd.saturating_add(self.smss);
        }
        self.cwnd = self.cwnd.max(self.smss);
    }

    /// The ACK that ends recovery (RFC 6582 section 3.2 step 3).
    pub fn exit_recovery(&mut self, flight: u32) {
        self.cwnd = self.ssthresh.min(flight.max(self.smss) + self.smss);
    }

    /// The retransmission timer expired: the threshold drops as after a
    /// loss and the window to the loss window, one segment (RFC 5681
    /// section 3.1, RFC 9438 section 4.8).
    pub fn on_timeout(&mut self, flight: u32) {
        self.congestion_event(flight, true);
        self.cwnd = self.smss;
        self.after_timeout = true;
    }

    /// The recovery or timeout that reduced the window from `prior` was
    /// spurious (see [`crate::tcp::recovery::spurious`] and [`crate::tcp::recovery::frto`]): the
    /// response of RFC 4015 section 3.
    /// The threshold returns to pipe_prev, the larger of the window and
    /// the threshold before the reduction, and the window to what is in
    /// flight (`flight`) plus an initial window, never above the old one
    /// nor below the current one, so it climbs back in slow start
    /// without a burst. CUBIC gets its W_max and cwnd_prior back; its
    /// next stage starts where slow start ends.
    pub fn undo(&mut self, prior: &Congestion, flight: u32) {
        let initial = initial_window(self.smss, self.initial_segments);
        let restart = prior.cwnd.min(flight.saturating_add(initial));
        self.cwnd = self.cwnd.max(restart);
        self.ssthresh = self.ssthresh.max(prior.cwnd.max(prior.ssthresh));
        self.after_timeout = prior.after_timeout;
        self.avoidance = match &prior.avoidance {
            Avoidance::NewReno { .. } => Avoidance::NewReno { acked: 0 },
            Avoidance::Cubic(cubic) => Avoidance::Cubic(Cubic {
                epoch: None,
                ..cubic.clone()
            }),
        };
    }

    /// New data is about to go out at `now` with nothing in flight, after
    /// `idle` without sending. Longer than `rto`, the window restarts from
    /// min(cwnd, initial window) (RFC 5681 section 4.1) and CUBIC starts a
    /// new congestion avoidance stage when it gets there; shorter, CUBIC's
    /// clock skips the idle time (RFC 9438 section 5.8).
    pub fn resume(&mut self, now: Instant, idle: Duration, rto: Duration) {
        let restart = idle > rto;
        if restart {
            self.cwnd = self
                .cwnd
                .min(initial_window(self.smss, self.initial_segments));
        }
        match &mut self.avoidance {
            Avoidance::NewReno { acked } if restart => *acked = 0,
            Avoidance::NewReno { .. } => {}
            Avoidance::Cubic(cubic) if restart => cubic.epoch = None,
            Avoidance::Cubic(cubic) => cubic.pause(now),
        }
    }
}

/// What a CUBIC window update depends on.
#[derive(Debug, Clone, Copy)]
struct Growth {
    now: Instant,
    acked: u32,
    srtt: Duration,
    cwnd: u32,
    smss: u32,
}

/// CUBIC's state across congestion events (RFC 9438 section 4.1.2), in
/// octets: the algorithm counts segments, so octets are divided by the
/// SMSS wherever the constants need it (section 4.1).
#[derive(Debug, Clone, Default)]
struct Cubic {
    /// W_max; `None` before the first congestion event and after a
    /// timeout, when the next stage takes its starting window (sections
    /// 4.8 and 4.10).
    w_max: Option<f64>,
    /// cwnd_prior: the window just before the last reduction.
    cwnd_prior: f64,
    /// The current congestion avoidance stage, once one started.
    epoch: Option<Epoch>,
}

/// One congestion avoidance stage (RFC 9438 section 4.2).
#[derive(Debug, Clone, Copy)]
struct Epoch {
    /// t: the time spent in this stage, without the application-limited
    /// periods (section 5.8).
    elapsed: Duration,
    /// When `elapsed` was last brought up to date.
    clock: Instant,
    /// K, in seconds (figure 2).
    k: f64,
    /// W_max of this stage.
    w_max: f64,
    /// W_est, Reno's window (section 4.3).
    w_est: f64,
    /// Growth below one octet, kept for the next ACK.
    carry: f64,
}

impl Epoch {
    /// A stage starting at `now` with window `cwnd` towards `w_max`: K
    /// from figure 2, W_est from cwnd_epoch (section 4.3).
    fn new(now: Instant, cwnd: f64, w_max: f64, smss: f64) -> Self {
        Epoch {
            elapsed: Duration::ZERO,
            clock: now,
            k: ((w_max - cwnd) / smss / C).cbrt(),
            w_max,
            w_est: cwnd,
            carry: 0.0,
        }
    }

    /// W_cubic(t) of figure 1, in octets.
    fn w_cubic(&self, t: f64, smss: f64) -> f64 {
        C * (t - self.k).powi(3) * smss + self.w_max
    }
}

impl Cubic {
    /// A new ACK in congestion avoidance while the window was full
    /// (RFC 9438 sections 4.2-4.5); returns the new window.
    fn grow(&mut self, g: &Growth) -> u32 {
        let (cwnd, smss, acked) = (f64::from(g.cwnd), f64::from(g.smss), f64::from(g.acked));
        let w_max = *self.w_max.get_or_insert(cwnd);
        let epoch = self
            .epoch
            .get_or_insert_with(|| Epoch::new(g.now, cwnd, w_max, smss));
        epoch.elapsed = epoch.elapsed + g.now.saturating_since(epoch.clock);
        epoch.clock = g.now;
        let t = seconds(epoch.elapsed);
        // Section 4.2: the target one RTT ahead, between cwnd and 1.5 cwnd.
        let target = epoch
            .w_cubic(t + seconds(g.srtt), smss)
            .clamp(cwnd, MAX_TARGET_GROWTH * cwnd);
        // Section 4.3, figure 4 with octets: α_cubic turns 1 once Reno's
        // estimate reaches the window before the last reduction.
        let alpha = if epoch.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        epoch.w_est += alpha * acked * smss / cwnd;
        let exact = cwnd + epoch.carry;
        let next = if epoch.w_cubic(t, smss) < epoch.w_est {
            // The Reno-friendly region.
            exact.max(epoch.w_est)
        } else {
            // The concave (cwnd < W_max) or convex region (sections 4.4,
            // 4.5): (target - cwnd) / cwnd per segment acknowledged.
            exact + (target - cwnd) * acked / cwnd
        };
        let whole = next.floor();
        epoch.carry = next - whole;
        whole.min(f64::from(u32::MAX)) as u32
    }

    /// The window was not full: `elapsed` skips the time since the last
    /// update (section 5.8).
    fn pause(&mut self, now: Instant) {
        if let Some(epoch) = &mut self.epoch {
            epoch.clock = now;
        }
    }

    /// A loss with window `cwnd` before the reduction: W_max with fast
    /// convergence (section 4.7), cwnd_prior (section 4.6), and a new
    /// stage when avoidance resumes.
    fn on_loss(&mut self, cwnd: u32) {
        let cwnd = f64::from(cwnd);
        self.w_max = Some(match self.w_max {
            Some(w_max) if cwnd < w_max => cwnd * (1.0 + BETA) / 2.0,
            _ => cwnd,
        });
        self.cwnd_prior = cwnd;
        self.epoch = None;
    }

    /// A timeout: the first stage after it uses K = 0 and W_max =
    /// cwnd_epoch (section 4.8).
    fn on_timeout(&mut self, cwnd: u32) {
        self.w_max = None;
        self.cwnd_prior = f64::from(cwnd);
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn ack(cc: &mut Congestion, at_ms: u64, acked: u32) {
        cc.on_ack(Instant(at_ms * 1000), acked, Duration::ZERO, true);
    }

    fn cubic(cc: &Congestion) -> &Cubic {
        match &cc.avoidance {
            Avoidance::Cubic(cubic) => cubic,
            Avoidance::NewReno { .. } => panic!("not CUBIC"),
        }
    }

    #[test]
    fn slow_start_avoidance_recovery_timeout() {
        let mut cc = Congestion::new(CongestionControl::NewReno, 1000, 10);
        assert_eq!(cc.cwnd(), 10_000);
        ack(&mut cc, 0, 3000);
        assert_eq!(cc.cwnd(), 12_000, "L = 2*SMSS");
        cc.enter_recovery(11_000, false);
        assert_eq!(cc.ssthresh(), 5500);
        assert_eq!(cc.cwnd(), 8500);
        cc.inflate();
        cc.partial_ack(2000);
        assert_eq!(cc.cwnd(), 8500);
        cc.exit_recovery(4000);
        assert_eq!(cc.cwnd(), 5000);
        // Slow start up to ssthresh; the other 500 octets count in
        // congestion avoidance.
        ack(&mut cc, 0, 1000);
        assert_eq!(cc.cwnd(), 5500);
        for _ in 0..4 {
            ack(&mut cc, 0, 1000);
        }
        assert_eq!(cc.cwnd(), 5500);
        ack(&mut cc, 0, 1000);
        assert_eq!(cc.cwnd(), 6500);
        cc.on_timeout(6000);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1000, 3000));
    }

    #[test]
    fn slow_start_counts_up_to_two_segments_per_stretch_ack() {
        for algorithm in [CongestionControl::NewReno, CongestionControl::Cubic] {
            let mut cc = Congestion::new(algorithm, 1000, 10);
            // RFC 3465 section 2.2: an ACK of eight segments grows the
            // window by L = 2*SMSS, one of 1.5 segments by 1.5.
            ack(&mut cc, 0, 8000);
            assert_eq!(cc.cwnd(), 12_000, "{algorithm:?}");
            ack(&mut cc, 0, 1500);
            assert_eq!(cc.cwnd(), 13_500, "{algorithm:?}");
            // Section 2.3: L = 1*SMSS in the slow start after a timeout,
            // up to ssthresh.
            cc.on_timeout(20_000);
            let ssthresh = cc.ssthresh();
            while cc.cwnd() + 1000 < ssthresh {
                let before = cc.cwnd();
                ack(&mut cc, 0, 8000);
                assert_eq!(cc.cwnd(), before + 1000, "{algorithm:?}");
            }
            // A fast recovery ends the slow start after a timeout, and
            // with it L = 1*SMSS.
            cc.on_timeout(20_000);
            ack(&mut cc, 0, 8000);
            assert_eq!(cc.cwnd(), 2000, "{algorithm:?}");
            cc.enter_recovery(20_000, true);
            cc.exit_recovery(1000);
            assert!(cc.cwnd() < cc.ssthresh());
            let before = cc.cwnd();
            ack(&mut cc, 0, 8000);
            assert_eq!(cc.cwnd(), before + 2000, "{algorithm:?}");
        }
    }

    #[test]
    fn a_stretch_ack_crossing_ssthresh_stops_slow_start_there() {
        let mut cc = Congestion::new(CongestionControl::NewReno, 1000, 10);
        cc.ssthresh = 11_000;
        // 1000 octets of growth reach ssthresh; the other 7000 count in
        // congestion avoidance, short of a window's worth.
        ack(&mut cc, 0, 8000);
        assert_eq!(cc.cwnd(), 11_000);
        ack(&mut cc, 0, 4000);
        assert_eq!(cc.cwnd(), 12_000, "11000 octets acknowledged");
        let mut cc = Congestion::new(CongestionControl::Cubic, 1000, 10);
        cc.ssthresh = 10_500;
        // 500 octets of slow start, 1500 of congestion avoidance: Reno's
        // estimate (RFC 9438 section 4.3) adds 1500 * 1000 / 10500.
        ack(&mut cc, 0, 2000);
        assert_eq!(cc.cwnd(), 10_642);
        assert!(cubic(&cc).epoch.is_some(), "avoidance started");
    }

    #[test]
    fn undo_restores_the_threshold_and_climbs_back_without_a_burst() {
        for algorithm in [CongestionControl::NewReno, CongestionControl::Cubic] {
            let mut cc = Congestion::new(algorithm, 1000, 10);
            cc.cwnd = 100_000;
            cc.ssthresh = 80_000;
            let prior = cc.clone();
            cc.enter_recovery(100_000, true);
            cc.exit_recovery(60_000);
            assert!(cc.cwnd() < 100_000);
            // 60 segments in flight: the window may send ten more.
            cc.undo(&prior, 60_000);
            assert_eq!((cc.cwnd(), cc.ssthresh()), (70_000, 100_000));
            // Slow start up to the old window.
            ack(&mut cc, 0, 1000);
            assert_eq!(cc.cwnd(), 71_000, "{algorithm:?}");
            if let Avoidance::Cubic(cubic) = &cc.avoidance {
                assert_eq!(cubic.w_max, None, "the loss that never was");
                assert!(cubic.epoch.is_none());
            }
            // Never below the current window, never above the old one.
            cc.undo(&prior, 0);
            assert_eq!(cc.cwnd(), 71_000);
            cc.undo(&prior, 1_000_000);
            assert_eq!(cc.cwnd(), 100_000);
        }
        // Undone in slow start, slow start goes on.
        let mut cc = Congestion::new(CongestionControl::NewReno, 1000, 10);
        let prior = cc.clone();
        cc.enter_recovery(10_000, true);
        cc.undo(&prior, 10_000);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (10_000, u32::MAX));
    }

    #[test]
    fn restart_window_after_idle() {
        for algorithm in [CongestionControl::NewReno, CongestionControl::Cubic] {
            let mut cc = Congestion::new(algorithm, 1000, 10);
            for _ in 0..20 {
                ack(&mut cc, 0, 1000);
            }
            assert_eq!(cc.cwnd(), 30_000);
            cc.resume(Instant(0), ms(5), ms(5));
            assert_eq!(cc.cwnd(), 30_000, "not idle for longer than the RTO");
            cc.resume(Instant(0), ms(6), ms(5));
            assert_eq!(cc.cwnd(), 10_000, "{algorithm:?}: the restart window");
            cc.resume(Instant(0), ms(6), ms(5));
            assert_eq!(cc.cwnd(), 10_000);
        }
    }

    #[test]
    fn k_and_w_cubic() {
        // RFC 9438 figure 2: K = cbrt((100 - 70) / 0.4) = cbrt(75).
        let epoch = Epoch::new(Instant(0), 70.0, 100.0, 1.0);
        assert!((epoch.k - 75f64.cbrt()).abs() < 1e-12);
        assert!((epoch.k - 4.217).abs() < 1e-3);
        // Figure 1 starts at cwnd_epoch, reaches W_max at K and is
        // symmetric around it: concave before, convex after.
        assert!((epoch.w_cubic(0.0, 1.0) - 70.0).abs() < 1e-9);
        assert!((epoch.w_cubic(epoch.k, 1.0) - 100.0).abs() < 1e-12);
        assert!((epoch.w_cubic(2.0 * epoch.k, 1.0) - 130.0).abs() < 1e-9);
        let step = |t: f64| epoch.w_cubic(t + 1.0, 1.0) - epoch.w_cubic(t, 1.0);
        assert!(step(0.0) > step(1.0) && step(1.0) > step(2.0), "concave");
        assert!(step(5.0) < step(6.0) && step(6.0) < step(7.0), "convex");
        // Octets scale with the SMSS; W_max below cwnd gives a negative K.
        let bytes = Epoch::new(Instant(0), 70_000.0, 100_000.0, 1000.0);
        assert!((bytes.k - epoch.k).abs() < 1e-12);
        assert!((bytes.w_cubic(1.5, 1000.0) - 1000.0 * epoch.w_cubic(1.5, 1.0)).abs() < 1e-6);
        assert!(Epoch::new(Instant(0), 120.0, 100.0, 1.0).k < 0.0);
    }

    /// A CUBIC state out of slow start with window `cwnd` segments of 1000
    /// octets after a loss at `w_max` segments.
    fn cubic_after_loss(w_max: u32) -> Congestion {
        let mut cc = Congestion::new(CongestionControl::Cubic, 1000, 10);
        cc.cwnd = w_max * 1000;
        cc.enter_recovery(w_max * 1000, true);
        cc.exit_recovery(w_max * 1000);
        cc
    }

    #[test]
    fn multiplicative_decrease() {
        let mut cc = cubic_after_loss(100);
        // Section 4.6: ssthresh = cwnd = 0.7 FlightSize; W_max = 100.
        assert_eq!((cc.ssthresh(), cc.cwnd()), (70_000, 70_000));
        assert_eq!(cubic(&cc).w_max, Some(100_000.0));
        assert_eq!(cubic(&cc).cwnd_prior, 100_000.0);
        // Without SACK, three segments inflate the reduced window.
        cc.enter_recovery(70_000, false);
        assert_eq!((cc.ssthresh(), cc.cwnd()), (49_000, 52_000));
        // Never below two segments.
        cc.enter_recovery(1000, true);
        assert_eq!(cc.ssthresh(), 2000);
        // A timeout: 0.7 FlightSize, the loss window, W_max forgotten.
        let mut cc = cubic_after_loss(100);
        cc.on_timeout(50_000);
        assert_eq!((cc.ssthresh(), cc.cwnd()), (35_000, 1000));
        assert_eq!(cubic(&cc).w_max, None);
    }

    #[test]
    fn fast_convergence() {
        let mut cc = cubic_after_loss(100);
        // A loss below the previous W_max: W_max = cwnd (1 + β) / 2.
        cc.enter_recovery(80_000, true);
        assert_eq!(cubic(&cc).w_max, Some(70_000.0 * 0.85));
        assert_eq!(cubic(&cc).cwnd_prior, 70_000.0);
        // A loss above it remembers the window itself.
        cc.cwnd = 90_000;
        cc.enter_recovery(90_000, true);
        assert_eq!(cubic(&cc).w_max, Some(90_000.0));
    }

    #[test]
    fn concave_growth_reaches_w_max_at_k() {
        // An ACK clock of one segment per ACK, a window per 100 ms RTT, for
        // 10 s: the window follows W_cubic(t) from 70 segments up to W_max
        // = 100 at K (4.2 s), then beyond, or Reno's estimate once that is
        // larger.
        let mut cc = cubic_after_loss(100);
        let rtt = 100_000;
        let mut samples = Vec::new();
        for round in 0..100 {
            let acks = u64::from(cc.cwnd() / 1000);
            for i in 0..acks {
                cc.on_ack(Instant(round * rtt + i * rtt / acks), 1000, ms(100), true);
            }
            if round % 10 == 9 {
                let epoch = cubic(&cc).epoch.expect("in congestion avoidance");
                let expected = epoch.w_cubic(seconds(epoch.elapsed), 1000.0);
                // Section 4.3: Reno's estimate wins where it is larger.
                let expected = expected.max(epoch.w_est);
                let cwnd = cc.cwnd();
                assert!(
                    (f64::from(cwnd) - expected).abs() < 2000.0,
                    "round {round}: cwnd {cwnd}, expected {expected}"
                );
                samples.push(cwnd);
            }
        }
        let epoch = cubic(&cc).epoch.expect("in congestion avoidance");
        assert!((epoch.k - 75f64.cbrt()).abs() < 1e-9);
        let steps: Vec<i64> = samples
            .windows(2)
            .map(|w| i64::from(w[1]) - i64::from(w[0]))
            .collect();
        assert!(steps[0] > steps[1] && steps[1] > steps[2], "concave");
        assert!(steps[6] < steps[7] && steps[7] < steps[8], "convex");
        assert!(samples[3].abs_diff(100_000) < 2000, "{samples:?}");
    }

    #[test]
    fn reno_friendly_region_on_short_rtts() {
        // Long after the loss the cubic curve stays near W_max for seconds;
        // at a 100 us RTT Reno's estimate grows much faster: α_cubic = 0.53
        // segments per window acknowledged, then 1 past cwnd_prior.
        let mut cc = cubic_after_loss(100);
        let mut at = 0;
        let mut per_window = Vec::new();
        for _ in 0..100 {
            let start = cc.cwnd();
            let mut acked = 0;
            while acked < start {
                at += 1;
                cc.on_ack(Instant(at), 1000, Duration(100), true);
                acked += 1000;
            }
            per_window.push(cc.cwnd() - start);
        }
        let epoch = cubic(&cc).epoch.expect("in congestion avoidance");
        assert!(epoch.w_cubic(seconds(epoch.elapsed), 1000.0) < epoch.w_est);
        assert!(
            per_window[..40].iter().all(|&g| (520..=540).contains(&g)),
            "{per_window:?}"
        );
        assert!(
            per_window[70..].iter().all(|&g| (990..=1010).contains(&g)),
            "{per_window:?}"
        );
        assert!(cc.cwnd() > 120_000, "{}", cc.cwnd());
    }

    #[test]
    fn an_unfilled_window_neither_grows_nor_ages_the_curve() {
        let mut full = cubic_after_loss(100);
        let mut limited = cubic_after_loss(100);
        for at in 0..2000 {
            full.on_ack(Instant(at * 1000), 1000, ms(100), true);
            let full_window = !(1000..1500).contains(&at);
            limited.on_ack(Instant(at * 1000), 1000, ms(100), full_window);
        }
        let (full, limited) = (cubic(&full), cubic(&limited));
        let elapsed = |c: &Cubic| c.epoch.expect("started").elapsed;
        assert_eq!(elapsed(full), Duration(1_999_000));
        assert_eq!(elapsed(limited), Duration(1_499_000));
        // Idle time before a resumed transmission is skipped too.
        let mut cc = cubic_after_loss(100);
        ack(&mut cc, 0, 1000);
        cc.resume(Instant(50_000), ms(50), ms(100));
        ack(&mut cc, 60, 1000);
        assert_eq!(cubic(&cc).epoch.expect("started").elapsed, ms(10));
        // An idle period longer than the RTO ends the stage.
        cc.resume(Instant(500_000), ms(440), ms(100));
        assert!(cubic(&cc).epoch.is_none());
    }
}
