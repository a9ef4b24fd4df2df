//! The HTML of a ping run: per-responder figures and the percentile distribution of each
//! of its views.

use std::io::{self, Write};

use wirebench_core::latency::value_at_percentile;
use wirebench_core::report::{LatencyView, PingResults, Report, Results, decode_histogram};

use super::{captured, figure, table};
use crate::Run;
use crate::charts::{self, Line};
use crate::text::ping as text;
use crate::words::us;

/// The percentile points of a view, in µs (none if the histogram is unreadable).
fn points(v: &LatencyView) -> Vec<(f64, f64)> {
    decode_histogram(&v.histogram).map(|h| charts::percentile_points(&h, 1000.0)).unwrap_or_default()
}

/// One chart line per responder of a ping run (its main view), named after the run and,
/// when there are several, the responder. Nothing for other modes.
pub(super) fn lines(name: &str, r: &Report) -> Vec<Line> {
    let Results::Ping(p) = &r.results else { return Vec::new() };
    let many = p.responders.len() > 1;
    p.responders
        .iter()
        .map(|x| Line::new(if many { format!("{name} {}", x.addr) } else { name.to_owned() }, points(&x.latency)))
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// `udp closed, 20000 probes: p50 12.8 us, p99 16.1 us, max 4387 us, 0 lost`.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub(super) fn headline(p: &PingResults) -> String {
    let mut parts = vec![format!("{} {} {} B", p.proto, p.pacing, p.probe_size)];
    for r in &p.responders {
        let h = decode_histogram(&r.latency.histogram).ok().filter(|h| !h.is_empty());
        let figs = h.map_or_else(
            || "no replies".to_owned(),
            |h| {
                let q = |p: f64| us(value_at_percentile(&h, p) as f64);
                format!("p50 {} p99 {} p99.9 {} max {} us", q(50.0), q(99.0), q(99.9), us(h.max() as f64))
            },
        );
        parts.push(format!("{}: {figs}, {} lost", r.addr, r.lost));
    }
    parts.join("; ")
}

fn row(addr: &str, v: &LatencyView, lost: Option<u64>) -> Vec<String> {
    let s = &v.summary;
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let u = |ns: u64| us(ns as f64);
    let mut cells = vec![addr.to_owned(), text::view_words(v).to_owned(), s.count.to_string()];
    cells.push(lost.map_or_else(|| "-".into(), |l| l.to_string()));
    cells.push(u(s.min_ns));
    cells.extend(s.percentiles.iter().map(|q| u(q.ns)));
    cells.extend([u(s.max_ns), us(s.mean_ns)]);
    cells
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Ping(p) = &r.report.results else { return Ok(()) };
    let text = captured(|w| text::ping(w, r.report, false, crate::screen::Detail::Verbose))?;
    writeln!(out, "<pre>{}</pre>", super::escape(&text))?;
    let pct: Vec<String> = p
        .responders
        .first()
        .map(|x| x.latency.summary.percentiles.iter().map(|q| crate::words::pct_label(q.p)).collect())
        .unwrap_or_default();
    let mut head = vec!["responder", "measures", "count", "lost", "min"];
    head.extend(pct.iter().map(String::as_str));
    head.extend(["max", "mean"]);
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for x in &p.responders {
        rows.push(row(&x.addr, &x.latency, Some(x.lost)));
        lines.push(Line::new(format!("{} {}", x.addr, text::view_words(&x.latency)), points(&x.latency)));
        let kernel = x.kernel.as_ref();
        let split = [kernel.and_then(|k| k.stack.as_ref()), kernel.and_then(|k| k.hosts.as_ref())];
        for v in [x.uncorrected.as_ref(), x.network.as_ref()].into_iter().chain(split).flatten() {
            rows.push(row(&x.addr, v, None));
            lines.push(Line::new(format!("{} {}", x.addr, text::view_words(v)), points(v)));
        }
    }
    if let Some(c) = &p.combined {
        rows.push(row("all responders", c, None));
    }
    writeln!(out, "<h3>Latency (microseconds)</h3>")?;
    table(out, "latency", &head, &rows)?;
    lines.retain(|l| !l.points.is_empty());
    if !lines.is_empty() {
        let svg = charts::percentile_chart(&format!("{}: latency by percentile", r.name), "latency (us)", &lines)?;
        figure(
            out,
            &svg,
            "One line per responder and view. Per-second latency is not in the JSON report: `ping --hlog FILE` writes it as an HdrHistogram interval log.",
        )?;
    }
    Ok(())
}
