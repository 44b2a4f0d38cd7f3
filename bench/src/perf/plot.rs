//! `--plot FILE.svg`: charts of a run against the message size on a
//! logarithmic axis, drawn with plotters' SVG backend (its text laid out
//! by estimate, with no font files: the viewer draws the labels in its
//! own sans-serif).
//!
//! - [`chart`]: a two-host run: bandwidth (Gbit/s) for the bandwidth
//!   modes, median and 99th percentile latency for the latency modes.
//! - [`loopback_chart`]: a loopback or `compare` run: bandwidth above,
//!   latency below, a line (two for latency) per transport.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Report, RunReport};
use super::session::Phase;
use super::Metric;

/// The size of a chart with one panel, in pixels; each more panel adds
/// its height.
const WIDTH: u32 = 720;
const PANEL_HEIGHT: u32 = 420;
/// Room for the title, and for the axes' labels.
const TITLE: u32 = 30;
const X_LABELS: u32 = 40;
const Y_LABELS: u32 = 60;
const MARGIN: u32 = 10;
/// Horizontal grid lines.
const Y_TICKS: usize = 6;
/// The most sizes labelled on the horizontal axis.
const X_TICKS: usize = 12;
/// One colour per series, in turn.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// One line of a chart: its name and its (message size, value) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's text.
    pub name: String,
    /// Points in order of size.
    pub points: Vec<(f64, f64)>,
}

/// One plot area of a chart: the lines drawn in it and their unit.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The vertical axis's unit.
    pub unit: &'static str,
    /// The lines.
    pub series: Vec<Series>,
}

/// The bandwidth of `phases` (Gbit/s), as the series `name`.
fn bandwidth(name: String, phases: &[Phase]) -> Series {
    let points = phases
        .iter()
        .filter_map(|p| Some((p.size as f64, p.bandwidth()?.0)))
        .collect();
    Series { name, points }
}

/// The median and 99th percentile latency of `phases` (microseconds),
/// as the series `p50` and `p99` after `prefix`.
fn latency(prefix: &str, phases: &[Phase]) -> [Series; 2] {
    let line = |name: &str, pick: fn(&[f64; 5]) -> f64| Series {
        name: format!("{prefix}{name}"),
        points: phases
            .iter()
            .filter_map(|p| Some((p.size as f64, pick(&p.summary.latency?.values()))))
            .collect(),
    };
    [line("p50", |v| v[0]), line("p99", |v| v[2])]
}

/// The unit of bandwidth panels.
const GBPS: &str = "Gbit/s";
/// The unit of latency panels.
const MICROSECONDS: &str = "microseconds";

/// The chart of a two-host run.
pub fn chart(report: &RunReport) -> String {
    let phases = &report.outcome.phases;
    let panel = match report.mode.metric {
        Metric::Bandwidth => Panel {
            unit: GBPS,
            series: vec![bandwidth("bandwidth".into(), phases)],
        },
        Metric::Latency => Panel {
            unit: MICROSECONDS,
            series: latency("", phases).into(),
        },
    };
    let title = format!(
        "uwarp-perf {} over {} ({} QP)",
        report.mode.name(),
        report.transport,
        report.outcome.qps
    );
    svg(&title, &[panel])
}

/// The chart of a loopback or `compare` run: its bandwidth run above,
/// its latency run below, each transport's lines in both.
pub fn loopback_chart(report: &Report) -> String {
    let runs = &report.runs;
    let bandwidth = Panel {
        unit: GBPS,
        series: runs
            .iter()
            .map(|(name, m)| {
                bandwidth(
                    format!("{name} {}", report.workload.op.name()),
                    &m.bandwidth,
                )
            })
            .collect(),
    };
    let latency = Panel {
        unit: MICROSECONDS,
        series: runs
            .iter()
            .flat_map(|(name, m)| latency(&format!("{name} write "), &m.latency))
            .collect(),
    };
    let transports: Vec<&str> = runs.iter().map(|(name, _)| *name).collect();
    let title = format!(
        "uwarp-perf loopback over {}: {} bandwidth, Write ping-pong latency",
        transports.join(" and "),
        report.workload.op.name()
    );
    svg(&title, &[bandwidth, latency])
}

/// The SVG document of `panels`, one above the other, under `title`.
pub fn svg(title: &str, panels: &[Panel]) -> String {
    let mut out = String::new();
    let height = TITLE + PANEL_HEIGHT * panels.len().max(1) as u32;
    // Drawing into a string fails only on errors of the drawing itself
    // (a range with no width), which `draw` rules out.
    draw(&mut out, (WIDTH, height), title, panels).expect("an SVG chart draws into a string");
    out
}

/// Draws the chart into `out`.
fn draw(
    out: &mut String,
    size: (u32, u32),
    title: &str,
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    for (area, panel) in root
        .split_evenly((panels.len().max(1), 1))
        .iter()
        .zip(panels)
    {
        draw_panel(area, panel)?;
    }
    root.present()?;
    Ok(())
}

/// The points of every series of `panel`.
fn points(panel: &Panel) -> impl Iterator<Item = (f64, f64)> + '_ {
    panel.series.iter().flat_map(|s| s.points.iter().copied())
}

/// The horizontal axis: log2 of the message size, its ticks at sizes
/// measured.
struct SizeAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for SizeAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = (value - self.range.start) / (self.range.end - self.range.start);
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    /// Every tick, or every second (third ...) when there are more than
    /// `hint` allows.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let every = self.ticks.len().div_ceil(hint.max_num_points().max(1));
        self.ticks.iter().copied().step_by(every.max(1)).collect()
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// The horizontal axis of `panel`: a tick at each size measured.
fn x_axis(panel: &Panel) -> SizeAxis {
    let mut sizes: Vec<f64> = points(panel).map(|(x, _)| log2(x)).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let (mut low, mut high) = match (sizes.first(), sizes.last()) {
        (Some(&low), Some(&high)) => (low, high),
        _ => (0.0, 1.0),
    };
    if low >= high {
        (low, high) = (low - 1.0, high + 1.0);
    }
    // A little room at both ends, so the first and last dots show whole.
    let pad = (high - low) * 0.03;
    SizeAxis {
        range: low - pad..high + pad,
        ticks: sizes,
    }
}

/// The plot area of `panel` in `area`: the grid, the axes and their
/// labels, a line with a dot per point for each series, the legend.
fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
) -> Result<(), Box<dyn std::error::Error>> {
    let y_max = nice_ceiling(points(panel).map(|(_, y)| y).fold(0.0, f64::max));
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(x_axis(panel), 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("message size (octets)")
        .y_desc(panel.unit)
        .x_labels(X_TICKS)
        .x_label_formatter(&|x| size_label(2f64.powf(*x)))
        .y_labels(Y_TICKS)
        .y_label_formatter(&|y| number(*y))
        .light_line_style(WHITE)
        .draw()?;
    for (i, series) in panel.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let at = |&(x, y): &(f64, f64)| (log2(x), y);
        chart
            .draw_series(LineSeries::new(
                series.points.iter().map(at),
                colour.stroke_width(2),
            ))?
            .label(series.name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
        chart.draw_series(
            series
                .points
                .iter()
                .map(|point| Circle::new(at(point), 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The logarithm of a size, sizes below 1 taken as 1.
fn log2(size: f64) -> f64 {
    size.max(1.0).log2()
}

/// The smallest of 1, 2 and 5 times a power of ten at or above `value`
/// (1 for nothing to show).
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&nice| nice >= value)
        .unwrap_or(10.0 * power)
}

/// A tick's value: at most three decimals, no trailing zeros.
fn number(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A message size: `512`, `64K`, `8M`.
fn size_label(size: f64) -> String {
    let size = size.round() as u64;
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}K", s >> 10),
        s => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points of the polyline of each series, in order.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("<polyline ")
            .skip(1)
            .map(|line| {
                let points = line.split("points=\"").nth(1).unwrap();
                let points = points.split('"').next().unwrap();
                points
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
    }

    /// The text of every `<text>` element.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let text = t.split_once('>').unwrap().1;
                text.split("</text>").next().unwrap().trim()
            })
            .collect()
    }

    fn sweep(name: &str, scale: f64) -> Series {
        Series {
            name: name.into(),
            points: (1..=23)
                .map(|k| ((1u64 << k) as f64, k as f64 * scale))
                .collect(),
        }
    }

    #[test]
    fn a_sweep_becomes_one_line_with_a_dot_per_point() {
        let panel = Panel {
            unit: "Gbit/s",
            series: vec![sweep("bandwidth", 0.7)],
        };
        let svg = svg("write-bw <dpdk>", &[panel]);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        let lines = polylines(&svg);
        // The line itself; the legend's sample is a polyline too.
        assert_eq!(lines.iter().filter(|l| l.len() == 23).count(), 1, "{svg}");
        assert_eq!(svg.matches("<circle ").count(), 23);
        let texts = texts(&svg);
        for label in [
            "write-bw &lt;dpdk&gt;",
            "bandwidth",
            "Gbit/s",
            "message size (octets)",
            "2",
            "32K",
            "8M",
        ] {
            assert!(texts.contains(&label), "{label}: {texts:?}");
        }
        // Every point lies inside the drawing, and the line rises left
        // to right as the values do.
        let line = lines.iter().find(|l| l.len() == 23).unwrap();
        for &(x, y) in line {
            assert!((0.0..WIDTH as f64).contains(&x), "{x}");
            assert!((0.0..(TITLE + PANEL_HEIGHT) as f64).contains(&y), "{y}");
        }
        assert!(line.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 < w[0].1));
    }

    #[test]
    fn panels_stack_with_a_line_and_a_legend_entry_per_series() {
        let bandwidth = Panel {
            unit: "Gbit/s",
            series: vec![sweep("dpdk write", 1.0), sweep("socket write", 0.5)],
        };
        let latency = Panel {
            unit: "microseconds",
            series: vec![sweep("dpdk write p50", 2.0), sweep("dpdk write p99", 3.0)],
        };
        let svg = svg("loopback", &[bandwidth, latency]);
        let lines = polylines(&svg);
        let full: Vec<_> = lines.iter().filter(|l| l.len() == 23).collect();
        assert_eq!(full.len(), 4, "{svg}");
        assert_eq!(svg.matches("<circle ").count(), 4 * 23);
        // The latency lines are drawn below the bandwidth lines.
        let bottom = |line: &Vec<(f64, f64)>| line.iter().map(|p| p.1).fold(0.0, f64::max);
        assert!(bottom(full[1]) < (TITLE + PANEL_HEIGHT) as f64);
        assert!(full[2].iter().all(|p| p.1 > (TITLE + PANEL_HEIGHT) as f64));
        let texts = texts(&svg);
        for label in [
            "dpdk write",
            "socket write",
            "dpdk write p50",
            "dpdk write p99",
            "microseconds",
        ] {
            assert!(texts.contains(&label), "{label}: {texts:?}");
        }
    }

    #[test]
    fn one_point_and_zero_values_still_draw() {
        let panel = Panel {
            unit: "microseconds",
            series: vec![Series {
                name: "p50".into(),
                points: vec![(8.0, 0.0)],
            }],
        };
        let svg = svg("t", &[panel]);
        assert_eq!(svg.matches("<circle ").count(), 1);
        assert!(texts(&svg).contains(&"8") && !svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(0.42), 0.5);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(4.0), "4");
        assert_eq!(size_label(65536.0), "64K");
        assert_eq!(size_label(8388608.0), "8M");
        assert_eq!(size_label(96.0), "96");
    }
}
