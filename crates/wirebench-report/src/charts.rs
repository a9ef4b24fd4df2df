//! Charts as inline SVG, drawn by plotters' SVG backend (no fonts, no scripts: the page opens
//! with no network). Three kinds: HdrHistogram's percentile distribution on its
//! "1/(1-percentile)" log axis, per-interval series, and labelled points (search trials).

use std::io;

use hdrhistogram::Histogram;
use plotters::prelude::*;
use wirebench_core::latency;

use crate::distribution::TICKS_PER_HALF_DISTANCE;

/// The mark of a data line in the SVG (axes and grid are 1 px, legend marks rectangles):
/// tests and the browser check count these.
pub const DATA_LINE_MARK: &str = r#"stroke-width="2" points=""#;

/// Chart size in pixels.
const SIZE: (u32, u32) = (880, 380);
/// Legend and axis text sizes as plotters takes them: its SVG writes 0.8 of the size given
/// (a legend of 20 is drawn at 16 px, axis labels of 17 at 13.7 px), and the page shows the
/// chart at about 1:1.
const LEGEND_FONT: u32 = 20;
const AXIS_FONT: u32 = 17;

/// Distinct colours (Tableau 10), one per line in order.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of line `i`.
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// One named series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
    /// Draw markers only (no line between points).
    pub markers_only: bool,
}

impl Line {
    /// A line through `points`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self { label: label.into(), points, markers_only: false }
    }
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("chart: {e}"))
}

/// The percentile distribution of `h` as HdrHistogram plots it: x is `1/(1-q)` (so 90 %,
/// 99 %, 99.9 % are equally spaced), y the value divided by `scale`. The maximum (q = 1,
/// infinitely far right) is placed at x = count, where the last sample sits.
#[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
pub fn percentile_points(h: &Histogram<u64>, scale: f64) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let last_x = (h.len() as f64).max(1.0);
    latency::distribution(h, TICKS_PER_HALF_DISTANCE)
        .into_iter()
        .map(|s| {
            let q = s.level / 100.0;
            let x = if q >= 1.0 { last_x } else { (1.0 / (1.0 - q)).min(last_x) };
            (x, s.value as f64 / scale)
        })
        .collect()
}

/// `90%` for 10, `99.9%` for 1000: the percentile a `1/(1-q)` axis value stands for.
pub fn percentile_label(x: f64) -> String {
    if x <= 1.0 {
        return "0%".into();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive digit count")]
    let digits = (x.log10().ceil() - 2.0).max(0.0) as usize;
    format!("{p:.digits$}%")
}

fn top(lines: &[Line], pick: impl Fn(&(f64, f64)) -> f64) -> f64 {
    lines.iter().flat_map(|l| l.points.iter().map(&pick)).fold(0.0, f64::max)
}

/// `12`, `1.5k`, `10M`: a short axis label.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if x.abs() >= 100.0 || x.fract().abs() < 1e-9 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text };
    format!("{text}{unit}")
}

/// A y range wider than this ratio (max over the smallest value) is drawn on a log scale,
/// so the body of the distribution is not flattened by its tail.
const LOG_Y_RATIO: f64 = 20.0;

/// SVG of a percentile distribution chart, one line per entry of `lines` (points from
/// [`percentile_points`]). y is linear, or logarithmic when the values span more than
/// [`LOG_Y_RATIO`].
pub fn percentile_chart(title: &str, y_desc: &str, lines: &[Line]) -> io::Result<String> {
    let x_max = top(lines, |p| p.0).max(10.0);
    let y_max = top(lines, |p| p.1).max(1e-3) * 1.05;
    let y_min =
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).filter(|y| *y > 0.0).fold(f64::INFINITY, f64::min);
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a few decades")]
    let decades = x_max.log10().floor().max(1.0) as usize;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut builder = ChartBuilder::on(&root);
        builder.caption(title, ("sans-serif", 22)).margin(12).x_label_area_size(42).y_label_area_size(64);
        let x = (1.0..x_max).log_scale();
        if y_min.is_finite() && y_max / y_min > LOG_Y_RATIO {
            let positive: Vec<Line> = lines
                .iter()
                .map(|l| Line { points: l.points.iter().copied().filter(|p| p.1 > 0.0).collect(), ..l.clone() })
                .collect();
            let mut chart = builder.build_cartesian_2d(x, (y_min * 0.9..y_max).log_scale()).map_err(err)?;
            let y_desc = format!("{y_desc}, log scale");
            let mut mesh = chart.configure_mesh();
            mesh.x_labels(decades + 1).x_label_formatter(&|x| percentile_label(*x));
            mesh.y_label_formatter(&|y| short_number(*y)).x_desc("percentile").y_desc(y_desc);
            mesh.label_style(("sans-serif", AXIS_FONT))
                .axis_desc_style(("sans-serif", AXIS_FONT + 1))
                .draw()
                .map_err(err)?;
            draw_lines(&mut chart, &positive)?;
        } else {
            let mut chart = builder.build_cartesian_2d(x, 0.0..y_max).map_err(err)?;
            let mut mesh = chart.configure_mesh();
            mesh.x_labels(decades + 1).x_label_formatter(&|x| percentile_label(*x));
            mesh.y_label_formatter(&|y| short_number(*y)).x_desc("percentile").y_desc(y_desc);
            mesh.label_style(("sans-serif", AXIS_FONT))
                .axis_desc_style(("sans-serif", AXIS_FONT + 1))
                .draw()
                .map_err(err)?;
            draw_lines(&mut chart, lines)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// SVG of a chart of series over a linear x axis (seconds, trial number, message size).
pub fn series_chart(title: &str, x_desc: &str, y_desc: &str, lines: &[Line]) -> io::Result<String> {
    let x_min = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).fold(f64::INFINITY, f64::min);
    let x_min = if x_min.is_finite() { x_min.min(0.0) } else { 0.0 };
    let x_max = top(lines, |p| p.0).max(x_min + 1.0);
    let y_max = top(lines, |p| p.1).max(1e-3) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| short_number(*x))
            .y_label_formatter(&|y| short_number(*y))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style(("sans-serif", AXIS_FONT))
            .axis_desc_style(("sans-serif", AXIS_FONT + 1))
            .draw()
            .map_err(err)?;
        draw_lines(&mut chart, lines)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    lines: &[Line],
) -> io::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, l) in lines.iter().enumerate() {
        let c = colour(i);
        let style = c.stroke_width(2);
        let series = if l.markers_only {
            chart.draw_series(l.points.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(err)?
        } else {
            chart.draw_series(LineSeries::new(l.points.iter().copied(), style)).map_err(err)?
        };
        // Legend marks are rectangles, so the only 2-px polylines in the SVG are data.
        series.label(l.label.clone()).legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], c.filled()));
    }
    if !lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", LEGEND_FONT))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis_labels() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(100_000.0), "99.999%");
    }

    #[test]
    fn short_labels() {
        let cases = [(0.0, "0"), (2.5, "2.5"), (12.0, "12"), (150.5, "150"), (2000.0, "2000"), (15_000.0, "15k")];
        for (v, want) in cases {
            assert_eq!(short_number(v), want);
        }
        assert_eq!(short_number(10_000_000.0), "10M");
        assert_eq!(short_number(5_450_000_000.0), "5.45G");
    }

    #[test]
    fn wide_ranges_get_a_log_axis() {
        let narrow = [Line::new("a", vec![(1.0, 10.0), (100.0, 19.0)])];
        assert!(!percentile_chart("t", "us", &narrow).unwrap().contains("log scale"));
        let wide = [Line::new("a", vec![(1.0, 10.0), (100.0, 4000.0)])];
        let svg = percentile_chart("t", "us", &wide).unwrap();
        assert!(svg.contains("us, log scale"));
        assert_eq!(svg.matches(DATA_LINE_MARK).count(), 1);
    }

    #[test]
    fn points_follow_the_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let pts = percentile_points(&h, 1000.0);
        assert!(pts.len() > 10);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "monotonic");
        assert!((pts[0].0 - 1.0).abs() < 1e-12, "the minimum sits at 1/(1-0)");
        let last = pts.last().unwrap();
        assert!((last.0 - 1000.0).abs() < 1e-9 && (last.1 - 1000.0).abs() < 1.0, "{last:?}");
    }

    #[test]
    fn a_chart_has_one_polyline_per_line() {
        let lines = vec![Line::new("a", vec![(1.0, 5.0), (10.0, 6.0)]), Line::new("b", vec![(1.0, 7.0), (100.0, 9.0)])];
        let svg = percentile_chart("t", "us", &lines).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..60]);
        assert_eq!(svg.matches(DATA_LINE_MARK).count(), 2, "one polyline per line: {svg}");
        assert!(svg.contains("99%"));
    }
}
