//! The HTML of a stream run: the summary, per-interval throughput and loss of each
//! receiver, the loss-free rate search and the size sweep.

use std::io::{self, Write};

use wirebench_core::report::{Results, StreamResults};

use super::{captured, figure, single, table};
use crate::Run;
use crate::charts::{self, Line};
use crate::text::stream::{self as stream_text, intervals, loss_percent};
use crate::words::{bits_words, rate_words};

/// `udp 1468 B: 21.30 Gbit/s, loss 15.586%; loss-free 4.841M msg/s`.
pub(super) fn headline(s: &StreamResults) -> String {
    let mut parts = vec![format!("{} {} {} B", s.proto, s.direction, s.size)];
    for r in &s.receivers {
        parts.push(format!(
            "{}: {} {}, loss {:.3}%",
            r.addr,
            rate_words(r.per_s()),
            bits_words(r.bits_per_s()),
            loss_percent(r)
        ));
    }
    if let Some(x) = &s.search {
        parts.push(format!("loss-free {} ({})", rate_words(x.best_per_s), bits_words(x.best_bits_per_s)));
    }
    parts.join("; ")
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Stream(s) = &r.report.results else { return Ok(()) };
    let text = captured(|w| stream_text::summary(w, r.report))?;
    writeln!(out, "<pre>{}</pre>", super::escape(&text))?;
    let (mut rate, mut loss) = (Vec::new(), Vec::new());
    // A line needs two intervals: one is a dot that says no more than the summary above (a
    // search's last short trial has one), and a chart of dots is a degenerate chart.
    for x in s.receivers.iter().filter(|x| x.intervals.len() >= 2) {
        let iv = intervals(&x.intervals);
        let label = format!("{} ({})", x.addr, x.direction);
        rate.push(Line::new(label.clone(), iv.iter().map(|i| (i.end_s, i.bits_per_s / 1e6)).collect()));
        loss.push(Line::new(label, iv.iter().map(|i| (i.end_s, i.loss_percent)).collect()));
    }
    if rate.is_empty() && s.receivers.iter().any(|x| x.intervals.len() == 1) {
        writeln!(out, "<p>One interval per receiver: no per-interval chart (the summary holds it).</p>")?;
    }
    if !rate.is_empty() {
        writeln!(out, "<h3>Per interval</h3>")?;
        let svg = charts::series_chart(&format!("{}: throughput", r.name), "seconds", "Mbit/s", &rate)?;
        figure(out, &svg, "Payload throughput received in each interval, per receiver.")?;
        let svg = charts::series_chart(&format!("{}: loss", r.name), "seconds", "loss (%)", &loss)?;
        figure(out, &svg, "Messages missing in each interval as a share of those expected, per receiver.")?;
    }
    if let Some(search) = &s.search {
        search_section(out, r.name, s, search)?;
    }
    if !s.sweep.is_empty() {
        writeln!(out, "<h3>Size sweep</h3>")?;
        #[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
        let pts: Vec<(f64, f64)> = s.sweep.iter().map(|x| (x.size as f64, x.bits_per_s / 1e6)).collect();
        let svg = charts::series_chart(
            &format!("{}: size sweep", r.name),
            "message size (bytes)",
            "Mbit/s",
            &single("received", pts),
        )?;
        figure(out, &svg, "Throughput received at each message size.")?;
        let rows: Vec<Vec<String>> = s
            .sweep
            .iter()
            .map(|x| {
                vec![
                    x.size.to_string(),
                    rate_words(x.per_s),
                    bits_words(x.bits_per_s),
                    format!("{:.4}%", x.loss * 100.0),
                ]
            })
            .collect();
        table(out, "sweep", &["size (B)", "received", "throughput", "loss"], &rows)?;
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
fn search_section(
    out: &mut dyn Write,
    name: &str,
    s: &StreamResults,
    search: &wirebench_core::report::SearchResult,
) -> io::Result<()> {
    writeln!(
        out,
        "<h3>Highest loss-free rate: {} ({})</h3>",
        rate_words(search.best_per_s),
        bits_words(search.best_bits_per_s)
    )?;
    let offered = |t: &wirebench_core::report::TrialRow| t.rate_per_s.unwrap_or(t.sent_per_s);
    let mut pass = Line::new("passed", Vec::new());
    let mut fail = Line::new("failed", Vec::new());
    for (i, t) in search.trials.iter().enumerate() {
        let p = ((i + 1) as f64, offered(t));
        if t.passed { pass.points.push(p) } else { fail.points.push(p) }
    }
    pass.markers_only = true;
    fail.markers_only = true;
    let lines: Vec<Line> = [pass, fail].into_iter().filter(|l| !l.points.is_empty()).collect();
    let svg = charts::series_chart(&format!("{name}: rate search"), "trial", "messages/s offered", &lines)?;
    figure(
        out,
        &svg,
        &format!(
            "Each trial's offered rate; passed means loss within {:.4}% and no queue building.",
            search.loss_target * 100.0
        ),
    )?;
    let rows: Vec<Vec<String>> = search
        .trials
        .iter()
        .enumerate()
        .map(|(i, t)| {
            vec![
                (i + 1).to_string(),
                t.rate_per_s.map_or_else(|| "max".into(), rate_words),
                bits_words(offered(t) * 8.0 * s.size as f64),
                t.sent.to_string(),
                t.received.to_string(),
                format!("{:.4}%", t.loss * 100.0),
                stream_text::rise_words(t.delay_rise_ns),
                stream_text::verdict_words(t, search.loss_target).into(),
            ]
        })
        .collect();
    table(out, "trials", &["trial", "rate", "offered", "sent", "received", "loss", "delay rise", "verdict"], &rows)
}
