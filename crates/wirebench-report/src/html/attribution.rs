//! The attribution section of a run: its text, and the stall meter's charts beside the run's
//! own latency.

use std::io::{self, Write};

use wirebench_core::report::{LatencyView, Report, decode_histogram};

use crate::charts::{self, Line};

fn points(v: &LatencyView) -> Vec<(f64, f64)> {
    decode_histogram(&v.histogram).map(|h| charts::percentile_points(&h, 1000.0)).unwrap_or_default()
}

/// The HTML of the attribution section: its text, the stall meter's percentile
/// distribution beside the run's own latency (same axes), and its per-second series when
/// the run lasted two seconds or more.
pub(crate) fn html(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Some(a) = &report.attribution else { return Ok(()) };
    writeln!(out, "<h3>Attribution</h3>")?;
    let text = super::captured(|w| crate::attribution::text(w, report))?;
    writeln!(out, "<pre>{}</pre>", super::escape(&text))?;
    let Some(h) = &a.hiccup else { return Ok(()) };
    let mut lines = Vec::new();
    if let Some((what, v)) = crate::attribution::main_view(report) {
        lines.push(Line::new(what, points(v)));
    }
    lines.push(Line::new("this host's stalls (hiccup)", points(&h.lateness)));
    lines.retain(|l| !l.points.is_empty());
    if !lines.is_empty() {
        let svg = charts::percentile_chart("The run beside this host's own stalls", "microseconds", &lines)?;
        super::figure(out, &svg, "percentile distribution of the stall meter's lateness, with the run's latency")?;
    }
    if h.seconds.len() >= 2 {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let series = |f: fn(&wirebench_core::hiccup::HiccupSecond) -> u64| {
            h.seconds.iter().map(|s| (s.at_s as f64, f(s) as f64 / 1000.0)).collect::<Vec<_>>()
        };
        let lines = [Line::new("latest wake-up", series(|s| s.max_ns)), Line::new("p99", series(|s| s.p99_ns))];
        let svg = charts::series_chart("This host's stalls per second", "seconds", "microseconds late", &lines)?;
        super::figure(out, &svg, "the stall meter's latest and 99th percentile wake-up per second")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wirebench_core::report::{Attribution, HiccupResult};

    use super::*;
    use crate::fixtures;

    fn report_with(h: HiccupResult) -> Report {
        let mut r = fixtures::ping(&[1_000_000]);
        r.attribution = Some(Attribution { hiccup: Some(h), ..Attribution::default() });
        r
    }

    #[test]
    fn the_html_draws_the_stalls_beside_the_run() {
        let r = report_with(fixtures::stalls(1_000_000));
        let mut out = Vec::new();
        html(&mut out, &r).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.contains("<h3>Attribution</h3>"));
        // two charts: the percentile distribution (run and stalls: two lines) and the series
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert_eq!(page.matches(charts::DATA_LINE_MARK).count(), 4);
        // a report without the section renders nothing
        let mut none = Vec::new();
        html(&mut none, &fixtures::ping(&[1_000])).unwrap();
        assert!(none.is_empty());
    }
}
