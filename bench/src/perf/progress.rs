//! A one-line progress bar on standard error, for runs that last longer
//! than a second when standard error is a terminal: how far the run is
//! (messages of `-n`, or time of `-D`) and the rate so far. It draws at
//! most five times a second and erases itself when the run ends.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::protocol::Stop;

/// How long a run goes before the bar appears.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// The least time between two drawings.
const REDRAW_EVERY: Duration = Duration::from_millis(200);
/// Updates between two looks at the clock.
const CLOCK_EVERY: u64 = 64;
/// Characters of the bar itself.
const WIDTH: usize = 30;

/// The bar of one measurement.
pub struct Progress {
    label: String,
    stop: Stop,
    start: Instant,
    last_drawn: Option<Instant>,
    updates: u64,
    enabled: bool,
}

impl Progress {
    /// A bar for a run labelled `label` that ends at `stop`; drawn only
    /// when `wanted` and standard error is a terminal.
    pub fn new(wanted: bool, label: String, stop: Stop) -> Self {
        Progress {
            label,
            stop,
            start: Instant::now(),
            last_drawn: None,
            updates: 0,
            enabled: wanted && std::io::stderr().is_terminal(),
        }
    }

    /// `done` messages (or round trips) are complete.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        self.updates += 1;
        if self.updates % CLOCK_EVERY != 0 {
            return;
        }
        let now = Instant::now();
        let elapsed = now - self.start;
        let due = self
            .last_drawn
            .is_none_or(|last| now - last >= REDRAW_EVERY);
        if elapsed < QUIET_FOR || !due {
            return;
        }
        self.last_drawn = Some(now);
        let fraction = match self.stop {
            Stop::Iters(total) => done as f64 / total.max(1) as f64,
            Stop::Duration(total) => elapsed.as_secs_f64() / total.as_secs_f64(),
        };
        let line = render(&self.label, fraction, done as f64 / elapsed.as_secs_f64());
        let _ = write!(std::io::stderr(), "\r{line}");
    }

    /// Erases the bar, if it was drawn.
    pub fn finish(&mut self) {
        if self.last_drawn.take().is_some() {
            let _ = write!(std::io::stderr(), "\r{:width$}\r", "", width = WIDTH + 60);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// One drawing: `label [#####-----]  45% 123456 msg/s`.
fn render(label: &str, fraction: f64, rate: f64) -> String {
    let fraction = fraction.clamp(0.0, 1.0);
    let filled = (fraction * WIDTH as f64).round() as usize;
    format!(
        "{label} [{}{}] {:>3.0}% {rate:.0} msg/s",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        fraction * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_fraction_done() {
        let line = render("65536 B", 0.5, 1234.4);
        assert_eq!(
            line,
            format!(
                "65536 B [{}{}]  50% 1234 msg/s",
                "#".repeat(15),
                "-".repeat(15)
            )
        );
        assert!(render("x", 7.0, 0.0).contains(&format!("[{}] 100%", "#".repeat(WIDTH))));
    }

    #[test]
    fn a_hidden_bar_never_draws() {
        let mut bar = Progress::new(false, "x".into(), Stop::Iters(1000));
        for done in 0..1000 {
            bar.update(done);
        }
        assert!(bar.last_drawn.is_none());
    }
}
