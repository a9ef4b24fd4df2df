//! wirebench's renderers: pure functions from a `Report` (or a histogram in it) to text,
//! HTML and SVG, writing to any `io::Write`. No sockets, no clocks, no files: `report` and
//! `--compare` run on saved JSON anywhere.
//!
//! - [`attribution`]: the stall meter's line and verdict, kernel counters and the loss split,
//!   kernel timestamps; its HTML (charts beside the run's latency).
//! - [`distribution`]: HdrHistogram's percentile distribution (the layout Aeron's Ping
//!   prints, and the `.hgrm` file format HdrHistogram's plotter reads).
//! - [`hlog`]: HdrHistogram interval logs.
//! - [`words`]: the number words every renderer shares (microseconds, rates, counts, the
//!   one-line summary of a histogram); it imports no other module.
//! - [`text`]: [`render_text`], any saved report's own text, and each mode's renderer:
//!   [`text::ping`], [`text::stream`] (and listen), [`text::listen`]'s closing lines,
//!   [`text::proxy`], [`text::load`], [`text::mesh`], [`text::relay`].
//! - [`generator`], [`stream_loss`], [`stream_wake`]: lines several renderers share (the
//!   generator's health, a receiver's loss split and wake-up times).
//! - [`screen`]: how much a text view shows (`-q`, default, `-v`) and the width it keeps.
//! - [`env`]: a run's environment as rows, and the differences that matter.
//! - [`compare`]: runs side by side with ratios.
//! - [`charts`]: SVG charts (plotters); [`html`]: one self-contained page of runs.

pub mod attribution;
pub mod charts;
pub mod compare;
pub mod distribution;
pub mod env;
#[cfg(test)]
mod fixtures;
pub mod generator;
pub mod hlog;
pub mod html;
pub mod screen;
pub mod stream_loss;
pub mod stream_wake;
pub mod text;
pub mod words;

pub use text::render_text;

use wirebench_core::report::Report;

/// A report with the name it is shown under (its file name, or the suite's step).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The name (`ping-udp`, `rtt.json`).
    pub name: &'a str,
    /// The report.
    pub report: &'a Report,
}

#[cfg(test)]
mod tests {
    use wirebench_core::latency::{DEFAULT_PERCENTILES, Summary, histogram, record, value_at_percentile};
    use wirebench_core::report::{Results, encode_histogram};

    use super::*;

    /// One run, every view: the summary line, `--compare`, the HTML headline and table, and
    /// the percentile table all show the same p99.9 (rank 999 of 1,000: 999 us; HdrHistogram
    /// Rust's own `value_at_percentile(99.9)` gives the maximum, 1000 us).
    #[test]
    fn every_view_shows_the_same_p99_9() {
        let mut h = histogram();
        for i in 1..=1_000u64 {
            record(&mut h, i * 1_000);
        }
        let want = value_at_percentile(&h, 99.9);
        assert_eq!(want, h.highest_equivalent(999_000));
        assert_ne!(want, h.value_at_percentile(99.9), "the case the crate gets wrong");
        let mut report = fixtures::ping(&[1_000]);
        let Results::Ping(ping) = &mut report.results else { unreachable!() };
        ping.responders[0].latency.summary = Summary::of(&h, &DEFAULT_PERCENTILES);
        ping.responders[0].latency.histogram = encode_histogram(&h);
        let run = Run { name: "r", report: &report };

        let mut text = Vec::new();
        text::ping::ping(&mut text, &report, false, screen::Detail::Normal).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(" p99.9 999 p99.99 1000 max 1000 "), "{text}");

        let cmp = compare::compare(&[run, run]);
        let row = cmp.tables[0].rows.iter().find(|r| r.name == "p99.9").unwrap();
        #[expect(clippy::cast_precision_loss, reason = "exact below 2^53")]
        let w = want as f64;
        assert_eq!(row.values, [Some(w), Some(w)]);

        let mut page = Vec::new();
        html::write(&html::Page { title: "t", runs: &[run], compare: false }, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.contains("p99 990 p99.9 999 max 1000 us"), "headline");
        assert!(page.contains("<td>999</td><td>1000</td><td>1000</td>"), "latency table: p99.9, p99.99, max");

        // the distribution's rows are ranks of the same definition
        let mut table = Vec::new();
        distribution::write(&h, 1.0, &mut table).unwrap();
        let rows = distribution::parse(&String::from_utf8(table).unwrap()).unwrap();
        for (v, q, _) in rows.iter().skip(1) {
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "integral ns")]
            let v = *v as u64;
            assert_eq!(v, value_at_percentile(&h, q * 100.0), "row at {q}");
        }
    }
}
