//! The HTML of a load run: the headline, per event type the departure-to-arrival delay
//! (and request-to-reply), the overall delay distribution with one line per type, the
//! per-second series, and the thresholds.

use std::io::{self, Write};

use wirebench_core::report::{LatencyView, LoadResults, Results, decode_histogram};

use super::{figure, table};
use crate::Run;
use crate::charts::{self, Line};
use crate::text::us;

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn at(v: &LatencyView, p: f64) -> String {
    v.summary.at(p).map_or_else(|| "-".into(), |ns| us(ns as f64))
}

/// `200 clients x 2/s: sent 400/s of 400/s, delay p50 160 us p99 650 us`.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub(super) fn headline(l: &LoadResults) -> String {
    format!(
        "{} clients x {}/s in rooms of {}: sent {:.0}/s of {:.0}/s, delay p50 {} p99 {} max {} us{}",
        l.clients,
        l.rate_per_client,
        l.room_size,
        l.achieved_send_per_s,
        l.requested_send_per_s,
        at(&l.overall.delay, 50.0),
        at(&l.overall.delay, 99.0),
        us(l.overall.delay.summary.max_ns as f64),
        if l.thresholds.iter().any(|t| !t.passed) { ", a threshold FAILED" } else { "" }
    )
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Load(l) = &r.report.results else { return Ok(()) };
    writeln!(out, "<p>{}</p>", super::escape(&headline(l)))?;
    let mut rows = Vec::new();
    for t in std::iter::once(&l.overall).chain(l.types.iter()) {
        rows.push(vec![
            t.name.clone(),
            format!("{:.1}%", t.share_pct),
            t.sent.to_string(),
            t.received.to_string(),
            at(&t.delay, 50.0),
            at(&t.delay, 99.0),
            at(&t.delay_intended, 99.0),
            t.reply.as_ref().map_or_else(|| "-".into(), |v| at(v, 50.0)),
        ]);
    }
    table(
        out,
        "load",
        &["event", "share", "sent", "received", "delay p50 us", "p99", "p99 from intended", "reply p50 us"],
        &rows,
    )?;
    let mut lines = Vec::new();
    for t in std::iter::once(&l.overall).chain(l.types.iter()) {
        if let Ok(h) = decode_histogram(&t.delay.histogram) {
            let pts = charts::percentile_points(&h, 1000.0);
            if !pts.is_empty() {
                lines.push(Line::new(t.name.clone(), pts));
            }
        }
    }
    if !lines.is_empty() {
        let svg = charts::percentile_chart(&format!("{}: delay by percentile", r.name), "delay (us)", &lines)?;
        figure(out, &svg, "Departure to arrival at every other member of the room, per event type.")?;
    }
    if !l.series.is_empty() {
        #[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
        let pts = |f: &dyn Fn(&wirebench_core::report::LoadSecond) -> f64| {
            l.series.iter().map(|s| (s.at_s as f64, f(s))).collect::<Vec<_>>()
        };
        #[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
        let rates =
            [Line::new("sent/s", pts(&|s| s.sent as f64)), Line::new("received/s", pts(&|s| s.received as f64))];
        let svg = charts::series_chart(&format!("{}: messages per second", r.name), "seconds", "messages", &rates)?;
        figure(out, &svg, "Events sent and messages received per second, all clients.")?;
        #[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
        let delays = [
            Line::new("p50", pts(&|s| s.delay_p50_ns as f64 / 1000.0)),
            Line::new("p99", pts(&|s| s.delay_p99_ns as f64 / 1000.0)),
        ];
        let svg = charts::series_chart(&format!("{}: delay per second", r.name), "seconds", "delay (us)", &delays)?;
        figure(out, &svg, "Delay from send, per second.")?;
    }
    if !l.thresholds.is_empty() {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let rows: Vec<Vec<String>> = l
            .thresholds
            .iter()
            .map(|t| {
                vec![
                    t.expr.clone(),
                    t.value_ns.map_or_else(|| "-".into(), |v| format!("{} us", us(v as f64))),
                    if t.passed { "pass" } else { "FAIL" }.into(),
                ]
            })
            .collect();
        table(out, "thresholds", &["threshold", "value", "verdict"], &rows)?;
    }
    Ok(())
}
