//! The HTML of a load run: the headline, per event type the departure-to-arrival delay
//! (and request-to-reply), the overall delay distribution with one line per type, the
//! per-second series, and the thresholds.

use std::io::{self, Write};

use wirebench_core::report::{LatencyView, LinkMethod, LoadAccount, LoadLink, LoadResults, Results, decode_histogram};

use super::{figure, table};
use crate::Run;
use crate::charts::{self, Line};
use crate::words::us;

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn at(v: &LatencyView, p: f64) -> String {
    // nothing timed: no value, not a 0
    v.summary.at(p).filter(|_| v.summary.count > 0).map_or_else(|| "-".into(), |ns| us(ns as f64))
}

/// `200 clients x 2/s: sent 400/s of 400/s, 100.00% of expected deliveries arrived, delay
/// p50 160 us p99 650 us`.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub(super) fn headline(l: &LoadResults) -> String {
    let d = &l.deliveries;
    let arrived =
        if d.expected == 0 { "-".into() } else { format!("{:.2}%", d.arrived as f64 * 100.0 / d.expected as f64) };
    let max = if l.overall.delay.summary.count == 0 { "-".into() } else { us(l.overall.delay.summary.max_ns as f64) };
    format!(
        "{} clients x {}/s in rooms of {}: sent {:.0}/s of {:.0}/s, {arrived} of {} expected deliveries arrived, delay p50 {} p99 {} max {} us{}{}",
        l.clients,
        l.rate_per_client,
        l.room_size,
        l.achieved_send_per_s,
        l.requested_send_per_s,
        d.expected,
        at(&l.overall.delay, 50.0),
        at(&l.overall.delay, 99.0),
        max,
        if l.thresholds.iter().any(|t| !t.passed) { ", a threshold FAILED" } else { "" },
        wirebench_core::load::results::nothing_arrived(l)
            .map_or_else(String::new, |w| format!("; no measurement: {w}"))
    )
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn missing_pct(missing: u64, expected: u64) -> String {
    if expected == 0 { "-".into() } else { format!("{:.2}%", missing as f64 * 100.0 / expected as f64) }
}

/// `deliveries: 131811 of 478900 missing: ...`, the causes as the text report names them.
fn missing_words(what: &str, a: &LoadAccount) -> String {
    let closed: Vec<String> = a.closed.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!(
        "{what}: {} of {} missing ({}): {} dropped while connected, {} lost when connections closed early{}, {} not arrived by the end",
        a.missing,
        a.expected,
        missing_pct(a.missing, a.expected),
        a.dropped,
        a.closed.values().sum::<u64>(),
        if closed.is_empty() { String::new() } else { format!(" ({})", closed.join(", ")) },
        a.late
    )
}

/// A shaped direction in words; a modelled one says so.
#[expect(clippy::cast_precision_loss, reason = "display values")]
fn link_words(name: &str, k: &LoadLink) -> String {
    let rate = k.requested_bps.map_or_else(|| "unlimited".into(), |b| format!("{:.3} Mbit/s", b as f64 / 1e6));
    let (label, achieved) = if k.method == LinkMethod::Modelled {
        (" (modelled, nothing held)", "modelled")
    } else {
        ("", "achieved at the socket")
    };
    format!(
        "{name} link{label}: requested {rate}, +{} us one way; {achieved} {:.3} Mbit/s (busiest client), hold p50 {} us",
        us(k.requested_delay_ns as f64),
        k.achieved_bps_max_client / 1e6,
        at(&k.hold, 50.0)
    )
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Load(l) = &r.report.results else { return Ok(()) };
    writeln!(out, "<p>{}</p>", super::escape(&headline(l)))?;
    for line in [wirebench_core::report::partial_words(l), wirebench_core::report::subprotocol_words(r.report)]
        .into_iter()
        .flatten()
    {
        writeln!(out, "<p>{}</p>", super::escape(&line))?;
    }
    let mut rows = Vec::new();
    // the `all` row as the JSON and the terminal have it: the sum of the type rows (a
    // relayed type's expected and arrived are deliveries, a request type's its replies)
    let kinds = l.types.iter().map(|t| (t, if t.request { "request" } else { "relayed" }));
    for (t, kind) in std::iter::once((&l.overall, "-")).chain(kinds) {
        rows.push(vec![
            t.name.clone(),
            format!("{:.1}%", t.share_pct),
            kind.into(),
            t.sent.to_string(),
            t.expected.to_string(),
            t.arrived.to_string(),
            missing_pct(t.missing, t.expected),
            at(&t.delay, 50.0),
            at(&t.delay, 99.0),
            at(&t.delay_intended, 99.0),
            t.reply.as_ref().map_or_else(|| "-".into(), |v| at(v, 50.0)),
        ]);
    }
    table(
        out,
        "load",
        &[
            "event",
            "share",
            "kind",
            "sent",
            "expected",
            "arrived",
            "missing",
            "delay p50 us",
            "p99",
            "p99 from intended",
            "reply p50 us",
        ],
        &rows,
    )?;
    for (what, a) in [("deliveries", &l.deliveries), ("replies", &l.replies)] {
        if a.missing > 0 {
            writeln!(out, "<p>{}</p>", super::escape(&missing_words(what, a)))?;
        }
    }
    for (name, link) in [("upload", &l.link_up), ("download", &l.link_down)] {
        if let Some(k) = link {
            writeln!(out, "<p>{}</p>", super::escape(&link_words(name, k)))?;
        }
    }
    if let Some(g) = &l.generator {
        // the same words as the terminal's (`load`, `report`)
        let line = crate::generator::line_of(g, &crate::generator::LOAD);
        writeln!(out, "<p class=\"generator\">{}</p>", super::escape(&line))?;
    }
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
