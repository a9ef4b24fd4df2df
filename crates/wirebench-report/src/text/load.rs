//! The terminal view of a load run: one line a second, then tables per event type; the
//! same for a saved report (`wirebench report`).

use std::fmt::Write as _;
use std::io::{self, Write};

use wirebench_core::load::results::nothing_arrived;
use wirebench_core::report::{
    LatencyView, LinkMethod, LoadAccount, LoadLink, LoadResults, LoadSecond, LoadTypeResult, Outcome, Report, Results,
    subprotocol_words,
};
use wirebench_core::units::humanize_ns;

use crate::screen::Detail;

/// One progress line.
pub fn second(r: &LoadSecond, open: u64) -> String {
    format!(
        "{:>4}s sent {:>7} recv {:>7} delay p50 {:>9} p99 {:>9} open {open}",
        r.at_s,
        r.sent,
        r.received,
        humanize_ns(u128::from(r.delay_p50_ns)),
        humanize_ns(u128::from(r.delay_p99_ns))
    )
}

fn ms(ns: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let v = ns as f64 / 1e6;
    format!("{v:.3}")
}

fn cells(v: &LatencyView, ps: &[f64]) -> Vec<String> {
    let s = &v.summary;
    if s.count == 0 {
        // nothing was timed: no value, not a 0
        return std::iter::once("-".to_owned()).chain(ps.iter().map(|_| "-".into())).chain(["-".into()]).collect();
    }
    let mut c = vec![format!("{:.3}", s.mean_ns / 1e6)];
    c.extend(ps.iter().map(|&p| s.at(p).map_or_else(|| "-".into(), ms)));
    c.push(ms(s.max_ns));
    c
}

/// `12.5%` of `part` in `whole`, `-` when there is no whole.
#[expect(clippy::cast_precision_loss, reason = "display values")]
fn share(part: u64, whole: u64) -> String {
    if whole == 0 { "-".into() } else { format!("{:.2}%", part as f64 * 100.0 / whole as f64) }
}

/// One direction's accounting in words.
fn account(what: &str, a: &LoadAccount) -> String {
    let mut s = format!("{what}: {} expected, {} arrived ({})", a.expected, a.arrived, share(a.arrived, a.expected));
    if a.missing > 0 {
        let mut why = Vec::new();
        if a.dropped > 0 {
            why.push(format!("{} dropped while connected (a later message from the same sender arrived)", a.dropped));
        }
        if !a.closed.is_empty() {
            let n: u64 = a.closed.values().sum();
            let by: Vec<String> = a.closed.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            why.push(format!("{n} lost when connections closed early ({})", by.join(", ")));
        }
        if a.late > 0 {
            why.push(format!("{} not arrived by the end", a.late));
        }
        let _ = write!(s, ", {} missing: {}", a.missing, why.join(", "));
    }
    if a.duplicates > 0 {
        let _ = write!(s, ", {} duplicates", a.duplicates);
    }
    s
}

fn table(w: &mut dyn Write, head: &[String], rows: &[Vec<String>]) -> io::Result<()> {
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            std::iter::once(head)
                .chain(rows.iter().map(Vec::as_slice))
                .map(|r| r.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in std::iter::once(head).chain(rows.iter().map(Vec::as_slice)) {
        let line: Vec<String> = r.iter().enumerate().map(|(i, c)| format!("{c:>w$}", w = widths[i])).collect();
        writeln!(w, "{}", line.join("  "))?;
    }
    Ok(())
}

/// `ws://host/rooms/demo: 10 clients, 140 of 140 deliveries (100.00%), delay p50 1.076 p99
/// 6.382 max 6.476 ms`: `load -q`'s one line (and a partial run, the failed thresholds).
fn quiet_line(report: &Report) -> Option<String> {
    let Results::Load(l) = &report.results else { return None };
    let url = report.config.get("url").and_then(serde_json::Value::as_str).unwrap_or("load");
    let url = wirebench_core::load::vars::mask_password(url);
    let d = &l.overall.delay.summary;
    let at = |p: f64| d.at(p).map_or_else(|| "-".into(), ms);
    let mut line = format!(
        "{url}: {} clients, {} of {} deliveries ({}), delay p50 {} p99 {} max {} ms",
        l.clients,
        l.deliveries.arrived,
        l.deliveries.expected,
        share(l.deliveries.arrived, l.deliveries.expected),
        at(50.0),
        at(99.0),
        if d.count == 0 { "-".into() } else { ms(d.max_ns) }
    );
    match report.outcome {
        Outcome::Completed => {}
        Outcome::Interrupted => line.push_str("; interrupted: partial results"),
        Outcome::PeerSilent => line.push_str("; the server closed every connection: partial results"),
    }
    let failed: Vec<&str> = l.thresholds.iter().filter(|t| !t.passed).map(|t| t.expr.as_str()).collect();
    if !failed.is_empty() {
        let _ = write!(line, "; FAILED {}", failed.join(", "));
    }
    Some(line)
}

/// The whole report at a level of detail: `-q` is [`quiet_line`]; the default view gives the
/// summary, one line for all the delays and one for all the replies (the per-type tables,
/// the CPU and the generator's health when it kept its rate are `-v`'s), folded to the
/// screen's width.
pub fn report_at(ps: &[f64], report: &Report, w: &mut dyn Write, detail: Detail) -> io::Result<()> {
    match detail {
        Detail::Quiet => quiet_line(report).map_or(Ok(()), |line| writeln!(w, "{line}")),
        Detail::Normal => crate::screen::wrapped(w, |w| short(ps, report, w)),
        Detail::Verbose => self::report(ps, report, w),
    }
}

fn short(ps: &[f64], report: &Report, w: &mut dyn Write) -> io::Result<()> {
    let Results::Load(l) = &report.results else { return Ok(()) };
    outcome(report, w)?;
    summary(l, w, Detail::Normal)?;
    if let Some(line) = subprotocol_words(report) {
        writeln!(w, "{line}")?;
    }
    let line = |what: &str, v: &LatencyView| {
        let mut cells = cells(v, ps).into_iter();
        let mut s = format!("{what} (ms): count {} avg {}", v.summary.count, cells.next().unwrap_or_default());
        for (p, c) in ps.iter().zip(cells.by_ref()) {
            let _ = write!(s, " p{p} {c}");
        }
        let _ = write!(s, " max {}", cells.next().unwrap_or_default());
        s
    };
    writeln!(w, "{}", line("delay to every other member", &l.overall.delay))?;
    if let Some(v) = &l.overall.reply {
        writeln!(w, "{}", line("request to reply", v))?;
    }
    tail(ps, l, w)
}

fn outcome(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    match report.outcome {
        Outcome::Completed => Ok(()),
        Outcome::Interrupted => writeln!(w, "interrupted: partial results"),
        Outcome::PeerSilent => writeln!(w, "the server closed every connection mid-run: partial results"),
    }
}

/// The whole report.
fn report(ps: &[f64], report: &Report, w: &mut dyn Write) -> io::Result<()> {
    let Results::Load(l) = &report.results else { return Ok(()) };
    outcome(report, w)?;
    summary(l, w, Detail::Verbose)?;
    if let Some(line) = subprotocol_words(report) {
        writeln!(w, "{line}")?;
    }
    counts(l, w)?;
    let mut head: Vec<String> = ["type", "count", "avg ms"].iter().map(|s| (*s).into()).collect();
    head.extend(ps.iter().map(|p| format!("p{p}")));
    head.push("max".into());
    let row = |name: String, v: &LatencyView| {
        let mut r = vec![name, v.summary.count.to_string()];
        r.extend(cells(v, ps));
        r
    };
    writeln!(w, "\ndelay from departure to arrival at every other member (ms):")?;
    // a request type has a row here only when the server relayed it to others (unexpected)
    let mut rows: Vec<Vec<String>> =
        l.types.iter().filter(|t| !t.request || t.received > 0).map(|t| row(t.name.clone(), &t.delay)).collect();
    rows.push(row(l.overall.name.clone(), &l.overall.delay));
    table(w, &head, &rows)?;
    let mut req: Vec<Vec<String>> = l
        .types
        .iter()
        .filter_map(|t| {
            // a relayed type that came back to its sender: no reply was expected
            let name = if t.request { t.name.clone() } else { format!("{} (echo)", t.name) };
            Some(row(name, t.reply.as_ref()?))
        })
        .collect();
    if !req.is_empty() {
        if let Some(v) = &l.overall.reply {
            req.push(row(l.overall.name.clone(), v));
        }
        writeln!(w, "\nrequest to reply (ms):")?;
        table(w, &head, &req)?;
    }
    writeln!(w)?;
    tail(ps, l, w)
}

/// What both views end with: the types nothing was delivered for, the corrected delay, the
/// links, the thresholds and a run that measured nothing.
fn tail(ps: &[f64], l: &LoadResults, w: &mut dyn Write) -> io::Result<()> {
    let silent: Vec<String> = l
        .types
        .iter()
        .filter(|t| !t.request && t.received == 0 && t.sent > 0)
        .map(|t| format!("{} ({} sent, {} deliveries expected)", t.name, t.sent, t.expected))
        .collect();
    if !silent.is_empty() {
        writeln!(w, "nothing was delivered for: {}", silent.join(", "))?;
    }
    let p = |v: &LatencyView, q: f64| {
        if v.summary.count == 0 { "-".into() } else { v.summary.at(q).map_or_else(|| "-".into(), ms) }
    };
    let last = *ps.last().unwrap_or(&99.0);
    writeln!(
        w,
        "from the intended send time (coordinated omission corrected): p50 {} p{last} {} max {} ms",
        p(&l.overall.delay_intended, 50.0),
        p(&l.overall.delay_intended, last),
        if l.overall.delay_intended.summary.count == 0 {
            "-".into()
        } else {
            ms(l.overall.delay_intended.summary.max_ns)
        }
    )?;
    for (name, link) in [("upload", &l.link_up), ("download", &l.link_down)] {
        if let Some(k) = link {
            links(w, name, k, &p)?;
        }
    }
    thresholds(l, w)?;
    if let Some(why) = nothing_arrived(l) {
        writeln!(w, "no measurement: {why}")?;
    }
    Ok(())
}

/// Sent, expected, arrived and missing per event type, and the `all` row: the sum of the
/// rows above it, column by column (a relayed type's expected and arrived are deliveries to
/// the other members, a request type's its replies; the `deliveries` and `replies` lines
/// split the row's). The same figures as the JSON's `types` and `overall`.
fn counts(l: &LoadResults, w: &mut dyn Write) -> io::Result<()> {
    let head: Vec<String> = ["type", "share%", "bytes", "kind", "sent", "expected", "arrived", "missing"]
        .iter()
        .map(|s| (*s).into())
        .collect();
    let row = |t: &LoadTypeResult, kind: &str, bytes: String| {
        vec![
            t.name.clone(),
            format!("{:.1}", t.share_pct),
            bytes,
            kind.into(),
            t.sent.to_string(),
            t.expected.to_string(),
            t.arrived.to_string(),
            share(t.missing, t.expected),
        ]
    };
    let mut rows: Vec<Vec<String>> =
        l.types.iter().map(|t| row(t, if t.request { "request" } else { "relayed" }, t.size.to_string())).collect();
    // the types' sizes differ: the row of them all has none (its `size` field is 0)
    rows.push(row(&l.overall, "-", "-".into()));
    writeln!(
        w,
        "\nevents sent and their arrivals (relayed: deliveries to every other member; request: replies; all: the sum):"
    )?;
    table(w, &head, &rows)
}

fn links(w: &mut dyn Write, name: &str, k: &LoadLink, p: &dyn Fn(&LatencyView, f64) -> String) -> io::Result<()> {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let rate = k.requested_bps.map_or_else(|| "unlimited".into(), |b| format!("{:.3} Mbit/s", b as f64 / 1e6));
    let (label, achieved) = if k.method == LinkMethod::Modelled {
        (" (modelled: computed from arrival times, no frame is held)", "modelled")
    } else {
        ("", "achieved at the socket")
    };
    writeln!(
        w,
        "{name} link{label}: requested {rate} + {} one way; {achieved} {:.3} Mbit/s (busiest client), hold p50 {} ms max {} ms over {} frames",
        humanize_ns(u128::from(k.requested_delay_ns)),
        k.achieved_bps_max_client / 1e6,
        p(&k.hold, 50.0),
        if k.hold.summary.count == 0 { "-".into() } else { ms(k.hold.summary.max_ns) },
        k.frames
    )
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn summary(l: &LoadResults, w: &mut dyn Write, detail: Detail) -> io::Result<()> {
    let all = detail.verbose();
    let c = &l.connections;
    writeln!(
        w,
        "clients {} connected {} failed {} dropped {}; connect p50 {} ms max {} ms",
        l.clients,
        c.connected,
        c.failed,
        c.disconnects,
        c.connect_time.summary.at(50.0).map_or_else(|| "-".into(), ms),
        ms(c.connect_time.summary.max_ns)
    )?;
    if let Some(s) = &l.shard {
        writeln!(
            w,
            "shard {}/{}: rooms {}..{}, client ids {}..{}",
            s.index, s.count, s.first_room, s.end_room, s.first_client, s.end_client
        )?;
    }
    let slip = if all {
        format!(
            "; slip mean {} max {}",
            humanize_ns(u128::from(l.slip_mean_ns)),
            humanize_ns(u128::from(l.slip_max_ns))
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "server receive {:.1} msg/s (requested {:.1}), server send {:.1} msg/s, as the clients see it{slip}",
        l.achieved_send_per_s, l.requested_send_per_s, l.received_per_s,
    )?;
    if let Some(g) = l.generator.as_ref().filter(|g| all || crate::generator::missed(g)) {
        writeln!(w, "{}", crate::generator::line_of(g, &crate::generator::LOAD))?;
    }
    writeln!(w, "{}", account("deliveries", &l.deliveries))?;
    if l.replies.expected > 0 || l.replies.arrived > 0 {
        writeln!(w, "{}", account("replies", &l.replies))?;
    }
    let unexpected = l.overall.unexpected;
    if unexpected > 0 {
        writeln!(
            w,
            "unexpected arrivals: {unexpected} (sent before the receiver joined, echoes of relayed types, requests relayed to others)"
        )?;
    }
    let pr = &l.process;
    if !all {
        return errors(l, w);
    }
    writeln!(
        w,
        "cpu {:.2}s user {:.2}s sys, {:.2} us per message event{}; peak rss {:.1} MB",
        pr.user_ns as f64 / 1e9,
        pr.system_ns as f64 / 1e9,
        pr.per_event_ns / 1e3,
        if pr.room_in_process { " (room in this process)" } else { "" },
        pr.max_rss_bytes as f64 / 1e6,
    )?;
    errors(l, w)
}

fn errors(l: &LoadResults, w: &mut dyn Write) -> io::Result<()> {
    if !l.errors.is_empty() {
        let e: Vec<String> = l.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(w, "errors: {}", e.join(", "))?;
    }
    Ok(())
}

/// The thresholds' verdicts, one line each (`threshold p99<20ms: 12.345 ms FAILED`).
pub fn thresholds(l: &LoadResults, w: &mut dyn Write) -> io::Result<()> {
    for t in &l.thresholds {
        let v = t.value_ns.map_or_else(|| "no data".into(), |v| format!("{} ms", ms(v)));
        writeln!(w, "threshold {}: {v} {}", t.expr, if t.passed { "ok" } else { "FAILED" })?;
    }
    Ok(())
}

/// The terminal text of a saved load report (for `wirebench report`), at the percentiles the
/// run recorded.
pub fn text(w: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    let ps: Vec<f64> = match &report.results {
        Results::Load(l) => l.overall.delay.summary.percentiles.iter().map(|p| p.p).collect(),
        _ => return Ok(()),
    };
    if let Some(from) = report.config.get("merged_from").and_then(|v| v.as_array()) {
        let names: Vec<&str> = from.iter().filter_map(|v| v.as_str()).collect();
        writeln!(
            w,
            "merged from {} ({}): histograms added, counts summed; peak rss is the largest one's",
            crate::words::counted(names.len() as u64, "report", "reports"),
            names.join(", ")
        )?;
    }
    if let Results::Load(l) = &report.results
        && let Some(line) = wirebench_core::report::partial_words(l)
    {
        writeln!(w, "{line}")?;
    }
    report_at(&ps, report, w, detail)
}

#[cfg(test)]
mod tests {

    /// The counts table: one row per event type (a request's expected and arrived are its
    /// replies) and the `all` row, the sum of the rows above it column by column, with no
    /// size (`-`: its types' sizes differ, and the 0 in its `size` field read as "0 bytes").
    /// The delay and reply tables count what they time.
    #[test]
    fn the_all_row_is_the_sum_of_the_rows_and_has_no_size() {
        let r = crate::fixtures::load();
        let mut out = Vec::new();
        super::report(&[50.0, 99.0], &r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let counts: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| !l.starts_with("events sent and their arrivals"))
            .skip(2)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(counts[0], ["cursor", "75.0", "128", "relayed", "100", "400", "100", "75.00%"], "{text}");
        assert_eq!(counts[1], ["save", "25.0", "128", "request", "100", "100", "100", "0.00%"], "{text}");
        // the sum of the rows: 200 events sent, 400 deliveries and 100 replies expected
        assert_eq!(counts[2], ["all", "100.0", "-", "-", "200", "500", "200", "60.00%"], "{text}");
        let count_of = |table: &str| {
            let row = text.lines().skip_while(|l| !l.starts_with(table)).find(|l| l.trim_start().starts_with("all "));
            row.and_then(|r| r.split_whitespace().nth(1)).map(str::to_owned)
        };
        assert_eq!(count_of("delay from departure").as_deref(), Some("100"), "{text}");
        assert_eq!(count_of("request to reply").as_deref(), Some("100"), "{text}");
    }
}
