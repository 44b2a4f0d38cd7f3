//! perftest's bandwidth numbers (`print_report_bw`) from when messages
//! were posted and completed: MB/s of 2^20 octets, millions of messages
//! per second. The peak is perftest's: the shortest time per message over
//! any run of successive messages, from the first one's posting to the
//! last one's completion (skipped, as perftest skips it, above
//! [`PEAK_ITERS_LIMIT`] messages).

use std::time::Instant;

use super::params::PEAK_ITERS_LIMIT;
use super::BwReport;

/// Octets in perftest's megabyte.
const MB: f64 = 1_048_576.0;

/// When a measured loop's messages were posted and completed: each
/// one's times (for the peak), or only the first posting and the last
/// completion (above [`PEAK_ITERS_LIMIT`] messages, and on the send
/// test's server, which counts arrivals).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Timeline {
    every: bool,
    posted: Vec<Instant>,
    completed: Vec<Instant>,
    posted_count: u64,
    completed_count: u64,
}

impl Timeline {
    /// A timeline for a client's `iters` messages.
    pub(crate) fn client(iters: u64) -> Self {
        let every = iters <= PEAK_ITERS_LIMIT;
        let room = if every { iters as usize } else { 1 };
        Self {
            every,
            posted: Vec::with_capacity(room),
            completed: Vec::with_capacity(room),
            ..Self::default()
        }
    }

    /// A timeline of arrivals: the first and the last.
    pub(crate) fn arrivals() -> Self {
        Self::default()
    }

    /// A message was posted `at`.
    pub(crate) fn post(&mut self, at: Instant) {
        if self.every || self.posted.is_empty() {
            self.posted.push(at);
        }
        self.posted_count += 1;
    }

    /// A message completed (or arrived) `at`.
    pub(crate) fn complete(&mut self, at: Instant) {
        if !self.every {
            self.completed.clear();
        }
        self.completed.push(at);
        self.completed_count += 1;
    }

    /// Messages posted so far.
    pub(crate) fn posted(&self) -> u64 {
        self.posted_count
    }

    /// Messages completed (or arrived) so far.
    pub(crate) fn completed(&self) -> u64 {
        self.completed_count
    }
}

/// The client's report of `size`-octet messages.
pub(crate) fn client_report(size: u32, timeline: &Timeline) -> BwReport {
    let peak = if timeline.every {
        per_second(size, shortest_per_message(timeline))
    } else {
        0.0
    };
    report(size, timeline, peak)
}

/// The send test's server's report: the average from the first arrival
/// to the last (perftest's server prints no peak).
pub(crate) fn server_report(size: u32, timeline: &Timeline) -> BwReport {
    report(size, timeline, 0.0)
}

/// The report of the timeline's messages, from the first posting to the
/// last completion.
fn report(size: u32, timeline: &Timeline, bw_peak: f64) -> BwReport {
    let (Some(&first), Some(&last)) = (timeline.posted.first(), timeline.completed.last()) else {
        return BwReport::default();
    };
    let iters = timeline.completed();
    let seconds = last.duration_since(first).as_secs_f64();
    let rate = |amount: f64| if seconds > 0.0 { amount / seconds } else { 0.0 };
    BwReport {
        size: u64::from(size),
        iters,
        bw_peak,
        bw_avg: rate(f64::from(size) * iters as f64 / MB),
        msg_rate: rate(iters as f64 / 1e6),
    }
}

/// MB/s of one `size`-octet message every `seconds`.
fn per_second(size: u32, seconds: f64) -> f64 {
    if seconds > 0.0 {
        f64::from(size) / seconds / MB
    } else {
        0.0
    }
}

/// The shortest time per message, in seconds, over every run of
/// successive messages `i..=j`.
fn shortest_per_message(timeline: &Timeline) -> f64 {
    let Some(&start) = timeline.posted.first() else {
        return 0.0;
    };
    let at = |t: Instant| t.duration_since(start).as_secs_f64();
    let posted: Vec<f64> = timeline.posted.iter().map(|&t| at(t)).collect();
    let completed: Vec<f64> = timeline.completed.iter().map(|&t| at(t)).collect();
    let mut best = completed.last().copied().unwrap_or(0.0) - posted[0];
    for (i, &from) in posted.iter().enumerate() {
        for (j, &to) in completed.iter().enumerate().skip(i) {
            best = best.min((to - from) / (j - i + 1) as f64);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timeline(mut timeline: Timeline, posted_ms: &[u64], completed_ms: &[u64]) -> Timeline {
        let start = Instant::now();
        let at = |ms: &u64| start + Duration::from_millis(*ms);
        posted_ms.iter().for_each(|ms| timeline.post(at(ms)));
        completed_ms.iter().for_each(|ms| timeline.complete(at(ms)));
        timeline
    }

    #[test]
    fn average_and_peak_as_perftest_computes_them() {
        // Four 1 MiB messages in 400 ms, the middle two 50 ms apart.
        let run = timeline(Timeline::client(4), &[0, 0, 0, 0], &[100, 150, 200, 400]);
        let report = client_report(1 << 20, &run);
        assert_eq!((report.size, report.iters), (1 << 20, 4));
        assert!((report.bw_avg - 10.0).abs() < 1e-6, "{report:?}");
        assert!((report.msg_rate - 1e-5).abs() < 1e-12, "{report:?}");
        // Messages 0..=2 took 200 ms for three: 15 MB/s.
        assert!((report.bw_peak - 15.0).abs() < 1e-6, "{report:?}");
    }

    #[test]
    fn long_runs_keep_two_times_and_report_no_peak() {
        let iters = PEAK_ITERS_LIMIT + 1;
        let mut run = Timeline::client(iters);
        let start = Instant::now();
        for n in 0..iters {
            run.post(start);
            run.complete(start + Duration::from_micros(n + 1));
        }
        assert_eq!((run.posted.len(), run.completed.len()), (1, 1));
        assert_eq!((run.posted(), run.completed()), (iters, iters));
        let report = client_report(64, &run);
        assert_eq!((report.iters, report.bw_peak), (iters, 0.0));
        assert!(report.bw_avg > 0.0);
    }

    #[test]
    fn the_server_reports_no_peak() {
        let run = timeline(Timeline::arrivals(), &[0], &[100, 200, 300, 400, 500]);
        let report = server_report(1 << 20, &run);
        assert_eq!((report.iters, report.bw_peak), (5, 0.0));
        assert!((report.bw_avg - 10.0).abs() < 1e-6);
        assert_eq!(
            server_report(64, &Timeline::arrivals()),
            BwReport::default()
        );
    }
}
