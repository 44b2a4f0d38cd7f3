//! A one-line progress bar on standard error, drawn by `indicatif`, for
//! runs that last longer than a second when standard error is a
//! terminal: how far the run is (messages of `-n`, or time of `-D`) and
//! the rate so far. It draws at most five times a second and erases
//! itself when the run ends.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};

use super::protocol::Stop;

/// How long a run goes before the bar appears.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// The most drawings a second.
const REDRAWS_PER_SECOND: u8 = 5;
/// Updates between two looks at the clock.
const CLOCK_EVERY: u64 = 64;
/// The bar's length: the fraction done in thousandths.
const STEPS: u64 = 1000;
/// One drawing: `label [#####-----]  45% 123456 msg/s`.
const TEMPLATE: &str = "{prefix} [{bar:30}] {percent:>3}% {msg}";

/// The bar of one measurement.
pub struct Progress {
    bar: ProgressBar,
    stop: Stop,
    start: Instant,
    shown: bool,
    updates: u64,
    enabled: bool,
}

impl Progress {
    /// A bar for a run labelled `label` that ends at `stop`; drawn only
    /// when `wanted` and standard error is a terminal.
    pub fn new(wanted: bool, label: String, stop: Stop) -> Self {
        let target = if wanted {
            ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND)
        } else {
            ProgressDrawTarget::hidden()
        };
        Self::with_target(target, label, stop)
    }

    /// A bar drawn on `target` (which hides it when it is no terminal).
    fn with_target(target: ProgressDrawTarget, label: String, stop: Stop) -> Self {
        let style = ProgressStyle::with_template(TEMPLATE)
            .expect("the template is valid")
            .progress_chars("#-");
        let bar = ProgressBar::with_draw_target(Some(STEPS), target)
            .with_style(style)
            .with_prefix(label)
            // A bar dropped by a run that failed erases itself too.
            .with_finish(ProgressFinish::AndClear);
        Progress {
            enabled: !bar.is_hidden(),
            bar,
            stop,
            start: Instant::now(),
            shown: false,
            updates: 0,
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
        let elapsed = self.start.elapsed();
        if elapsed < QUIET_FOR {
            return;
        }
        self.shown = true;
        let fraction = match self.stop {
            Stop::Iters(total) => done as f64 / total.max(1) as f64,
            Stop::Duration(total) => elapsed.as_secs_f64() / total.as_secs_f64(),
        };
        let rate = done as f64 / elapsed.as_secs_f64();
        self.bar.set_message(format!("{rate:.0} msg/s"));
        self.bar
            .set_position((fraction.clamp(0.0, 1.0) * STEPS as f64).round() as u64);
    }

    /// Erases the bar, if it was drawn.
    pub fn finish(&mut self) {
        if std::mem::take(&mut self.shown) {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use indicatif::TermLike;

    use super::*;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn written(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            self.0.lock().unwrap().push(s.to_owned());
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            self.write_str("<clear>")
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A bar on `screen` whose run started `ago`.
    fn bar(screen: &Screen, stop: Stop, ago: Duration) -> Progress {
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let mut bar = Progress::with_target(target, "65536 B".into(), stop);
        bar.start -= ago;
        bar
    }

    #[test]
    fn the_bar_fills_with_the_fraction_done_and_goes_at_the_end() {
        let screen = Screen::default();
        let mut progress = bar(&screen, Stop::Iters(1000), Duration::from_secs(2));
        for _ in 0..CLOCK_EVERY {
            progress.update(500);
        }
        let drawn = screen.written();
        let line = drawn.iter().rfind(|l| l.starts_with("65536 B ["));
        let line = line.unwrap_or_else(|| panic!("{drawn:?}"));
        let filled = format!("65536 B [{}{}]  50% ", "#".repeat(15), "-".repeat(15));
        assert!(line.starts_with(&filled), "{line:?}");
        // 500 messages in a little more than 2 s.
        let rate: f64 = line[filled.len()..]
            .trim_end_matches(" msg/s")
            .parse()
            .unwrap();
        assert!((200.0..=250.0).contains(&rate), "{line:?}");
        progress.finish();
        assert_eq!(screen.written().last().map(String::as_str), Some("<clear>"));
    }

    #[test]
    fn a_run_by_time_fills_the_bar_with_the_time_gone() {
        let screen = Screen::default();
        let stop = Stop::Duration(Duration::from_secs(8));
        let mut progress = bar(&screen, stop, Duration::from_secs(2));
        for _ in 0..CLOCK_EVERY {
            progress.update(7);
        }
        let drawn = screen.written();
        assert!(drawn.iter().any(|l| l.contains("]  25% ")), "{drawn:?}");
    }

    #[test]
    fn a_short_run_never_draws() {
        let screen = Screen::default();
        let mut progress = bar(&screen, Stop::Iters(1000), Duration::ZERO);
        for done in 0..1000 {
            progress.update(done);
        }
        progress.finish();
        drop(progress);
        assert_eq!(screen.written(), Vec::<String>::new());
    }

    #[test]
    fn a_hidden_bar_never_draws() {
        let mut bar = Progress::new(false, "x".into(), Stop::Iters(1000));
        for done in 0..1000 {
            bar.update(done);
        }
        assert!(!bar.enabled && !bar.shown);
    }
}
