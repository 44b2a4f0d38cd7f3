//! perftest's bandwidth numbers (`print_report_bw`) from when messages
//! were posted and completed: MB/s of 2^20 octets, millions of messages
//! per second. The peak is perftest's: the shortest time per message over
//! any run of successive messages, from the first one's posting to the
//! last one's completion (skipped, as perftest skips it, above
//! [`PEAK_ITERS_LIMIT`] messages).

use std::time::Instant;

use super::data::Timeline;
use super::params::PEAK_ITERS_LIMIT;
use super::BwReport;

/// Octets in perftest's megabyte.
const MB: f64 = 1_048_576.0;

/// The client's report of `size`-octet messages.
pub(crate) fn client_report(size: u32, timeline: &Timeline) -> BwReport {
    let iters = timeline.completed.len() as u64;
    let (Some(&first), Some(&last)) = (timeline.posted.first(), timeline.completed.last()) else {
        return BwReport::default();
    };
    let peak = if iters <= PEAK_ITERS_LIMIT {
        per_second(size, shortest_per_message(timeline))
    } else {
        0.0
    };
    report(size, iters, first, last, peak)
}

/// The send test's server's report: the average from the first arrival
/// to the last (perftest's server prints no peak).
pub(crate) fn server_report(size: u32, iters: u64, timeline: &Timeline) -> BwReport {
    match (timeline.posted.first(), timeline.completed.last()) {
        (Some(&first), Some(&last)) => report(size, iters, first, last, 0.0),
        _ => BwReport::default(),
    }
}

/// The report of `iters` messages between `first` and `last`.
fn report(size: u32, iters: u64, first: Instant, last: Instant, bw_peak: f64) -> BwReport {
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

    fn timeline(posted_ms: &[u64], completed_ms: &[u64]) -> Timeline {
        let start = Instant::now();
        let at = |ms: &u64| start + Duration::from_millis(*ms);
        Timeline {
            posted: posted_ms.iter().map(at).collect(),
            completed: completed_ms.iter().map(at).collect(),
        }
    }

    #[test]
    fn average_and_peak_as_perftest_computes_them() {
        // Four 1 MiB messages in 400 ms, the middle two 50 ms apart.
        let run = timeline(&[0, 0, 0, 0], &[100, 150, 200, 400]);
        let report = client_report(1 << 20, &run);
        assert_eq!((report.size, report.iters), (1 << 20, 4));
        assert!((report.bw_avg - 10.0).abs() < 1e-6, "{report:?}");
        assert!((report.msg_rate - 1e-5).abs() < 1e-12, "{report:?}");
        // Messages 0..=2 took 200 ms for three: 15 MB/s.
        assert!((report.bw_peak - 15.0).abs() < 1e-6, "{report:?}");
    }

    #[test]
    fn the_server_reports_no_peak() {
        let run = timeline(&[0], &[500]);
        let report = server_report(1 << 20, 5, &run);
        assert_eq!(report.bw_peak, 0.0);
        assert!((report.bw_avg - 10.0).abs() < 1e-6);
        assert_eq!(
            server_report(64, 5, &Timeline::default()),
            BwReport::default()
        );
    }
}
