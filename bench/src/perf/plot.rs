//! `--plot FILE.svg`: a chart of a run, written as SVG text by hand:
//! bandwidth (Gbit/s) for the bandwidth modes, median and 99th
//! percentile latency for the latency modes, against the message size
//! on a logarithmic axis.

use std::fmt::Write;

use super::report::RunReport;
use super::Metric;

/// The drawing's size and the plot area's margins, in pixels.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 110.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Horizontal grid lines.
const Y_TICKS: usize = 5;
/// One colour per series.
const COLOURS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];

/// One line of the chart: its name and its (message size, value) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's text.
    pub name: &'static str,
    /// Points in order of size.
    pub points: Vec<(f64, f64)>,
}

/// The chart of `report`.
pub fn chart(report: &RunReport) -> String {
    let phases = &report.outcome.phases;
    let (unit, series) = match report.mode.metric {
        Metric::Bandwidth => (
            "Gbit/s",
            vec![Series {
                name: "bandwidth",
                points: phases
                    .iter()
                    .filter_map(|p| Some((p.size as f64, p.bandwidth()?.0)))
                    .collect(),
            }],
        ),
        Metric::Latency => {
            let line = |name, pick: fn(&[f64; 5]) -> f64| Series {
                name,
                points: phases
                    .iter()
                    .filter_map(|p| Some((p.size as f64, pick(&p.summary.latency?.values()))))
                    .collect(),
            };
            (
                "microseconds",
                vec![line("p50", |v| v[0]), line("p99", |v| v[2])],
            )
        }
    };
    let title = format!(
        "uwarp-perf {} over {} ({} QP)",
        report.mode.name(),
        report.transport,
        report.outcome.qps
    );
    svg(&title, unit, &series)
}

/// The SVG document of `series` under `title`, values in `unit`.
pub fn svg(title: &str, unit: &str, series: &[Series]) -> String {
    let points = || series.iter().flat_map(|s| s.points.iter().copied());
    let (mut x_min, mut x_max) = points().fold((f64::MAX, f64::MIN), |(lo, hi), (x, _)| {
        (lo.min(x.max(1.0).log2()), hi.max(x.max(1.0).log2()))
    });
    if x_min >= x_max {
        (x_min, x_max) = (x_min.min(x_max) - 1.0, x_max.max(x_min) + 1.0);
    }
    let y_max = nice_ceiling(points().map(|(_, y)| y).fold(0.0, f64::max));
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + (x.max(1.0).log2() - x_min) / (x_max - x_min) * plot_w;
    let py = |y: f64| TOP + plot_h - y.clamp(0.0, y_max) / y_max * plot_h;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" font-size="14" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    for i in 0..=Y_TICKS {
        let value = y_max * i as f64 / Y_TICKS as f64;
        let y = py(value);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            number(value)
        );
    }
    let mut sizes: Vec<f64> = points().map(|(x, _)| x).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let every = sizes.len().div_ceil(12).max(1);
    for size in sizes.iter().step_by(every) {
        let x = px(*size);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            size_label(*size)
        );
    }
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">message size (octets)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        out,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(unit)
    );
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .map(|(j, &(x, y))| {
                format!(
                    "{}{:.1},{:.1}",
                    if j == 0 { "M" } else { "L" },
                    px(x),
                    py(y)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<path d="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for &(x, y) in &s.points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{} B: {} {}</title></circle>"#,
                px(x),
                py(y),
                x,
                number(y),
                escape(unit)
            );
        }
        let legend_y = TOP + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{legend_y:.1}" x2="{:.1}" y2="{legend_y:.1}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            WIDTH - RIGHT + 10.0,
            WIDTH - RIGHT + 30.0,
            WIDTH - RIGHT + 35.0,
            legend_y + 4.0,
            escape(s.name)
        );
    }
    out += "</svg>\n";
    out
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
    let size = size as u64;
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}K", s >> 10),
        s => s.to_string(),
    }
}

/// Text safe inside SVG elements.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_becomes_one_path_with_a_circle_per_point() {
        let series = [Series {
            name: "bandwidth",
            points: (1..=23)
                .map(|k| ((1u64 << k) as f64, k as f64 * 0.7))
                .collect(),
        }];
        let svg = svg("write-bw <dpdk>", "Gbit/s", &series);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<path ").count(), 1);
        assert_eq!(svg.matches("<circle ").count(), 23);
        assert!(svg.contains("write-bw &lt;dpdk&gt;"));
        assert!(svg.contains(">8M<") && svg.contains(">2<"));
        // Every point lies inside the plot area.
        let path = svg.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
        for point in path.split(' ') {
            let (x, y) = point[1..].split_once(',').unwrap();
            let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
            assert!((LEFT..=WIDTH - RIGHT).contains(&x), "{x}");
            assert!((TOP..=HEIGHT - BOTTOM).contains(&y), "{y}");
        }
    }

    #[test]
    fn one_point_and_zero_values_still_draw() {
        let series = [Series {
            name: "p50",
            points: vec![(8.0, 0.0)],
        }];
        let svg = svg("t", "microseconds", &series);
        assert!(svg.contains("<path d=\"M") && !svg.contains("NaN"));
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
