//! Terminal text of `wirebench proxy`: what was requested, one line per interval, and the
//! final requested-vs-achieved table per direction.

use std::io::{self, Write};

use wirebench_core::report::{
    Outcome, ProxyAchieved, ProxyDirection, ProxyInterval, ProxyIntervalSide, ProxyRequested, Report, Results,
};
use wirebench_core::units::humanize_ns;

use crate::screen::Detail;

/// `60.76mbit/s`, `1.2gbit/s`, `950kbit/s`.
pub fn bps(v: f64) -> String {
    let (x, unit) = if v >= 1e9 {
        (v / 1e9, "gbit/s")
    } else if v >= 1e6 {
        (v / 1e6, "mbit/s")
    } else if v >= 1e3 {
        (v / 1e3, "kbit/s")
    } else {
        (v, "bit/s")
    };
    format!("{x:.2}{unit}")
}

fn ns(v: u64) -> String {
    humanize_ns(u128::from(v))
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "display of a positive mean")]
fn ns_f(v: f64) -> String {
    ns(v.max(0.0).round() as u64)
}

fn pct(v: f64) -> String {
    let s = format!("{v:.4}");
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

fn requested_text(r: &ProxyRequested) -> [String; 5] {
    let jitter = match (&r.jitter_dist, r.jitter_ns) {
        (Some(d), j) if j > 0 => format!(" jitter {} {d}", ns(j)),
        _ => String::new(),
    };
    let loss = match (r.loss_burst_p_pct, r.loss_burst_r_pct) {
        (Some(p), Some(q)) => {
            format!("{} (burst p {} r {}, mean burst {:.1})", pct(r.loss_pct), pct(p), pct(q), 100.0 / q)
        }
        _ => pct(r.loss_pct),
    };
    let rate = r.rate_bps.map_or_else(
        || "none".to_owned(),
        |b| {
            #[expect(clippy::cast_precision_loss, reason = "display")]
            let f = b as f64;
            format!("{} (burst {} B, queue {})", bps(f), r.burst_bytes.unwrap_or(0), ns(r.queue_limit_ns))
        },
    );
    let reorder =
        if r.reorder_pct > 0.0 { format!("{} (gap {})", pct(r.reorder_pct), ns(r.reorder_gap_ns)) } else { pct(0.0) };
    [format!("{}{jitter}", ns(r.delay_ns)), loss, reorder, pct(r.duplicate_pct), rate]
}

/// The impairment asked of each direction, one line each.
pub fn requested_lines(out: &mut dyn Write, up: &ProxyRequested, down: &ProxyRequested) -> io::Result<()> {
    for (name, r) in [("up", up), ("down", down)] {
        let [delay, loss, reorder, dup, rate] = requested_text(r);
        writeln!(out, "  {name:<4} delay {delay}, loss {loss}, reorder {reorder}, duplicate {dup}, rate {rate}")?;
    }
    Ok(())
}

fn side(s: &ProxyIntervalSide) -> String {
    // An interval that delivered nothing has no delay to show (its fields are 0), not 0 ns.
    let delay = |v: u64| if s.packets_out == 0 { "-".to_owned() } else { ns(v) };
    format!(
        "{} in {} out, delay p50 {} p99 {}, loss {}, drops {}, reorder {}, dup {}, {}",
        s.packets_in,
        s.packets_out,
        delay(s.delay_p50_ns),
        delay(s.delay_p99_ns),
        pct(s.loss_pct),
        pct(s.drop_pct),
        pct(s.reorder_pct),
        s.duplicates,
        bps(s.rate_bps)
    )
}

/// One interval: `[  3.0s] up: ... | down: ...`.
pub fn interval_line(out: &mut dyn Write, iv: &ProxyInterval) -> io::Result<()> {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let end = (iv.start_ns + iv.duration_ns) as f64 / 1e9;
    writeln!(out, "[{end:6.1}s] up: {} | down: {}", side(&iv.up), side(&iv.down))
}

/// A side in a default view's interval line: `216 in p50 1.002ms p99 1.019ms 55.11kbit/s`,
/// and the loss, drops, reordering and duplicates there were.
fn short_side(s: &ProxyIntervalSide) -> String {
    use std::fmt::Write as _;
    let delay = |v: u64| if s.packets_out == 0 { "-".to_owned() } else { ns(v) };
    let mut line =
        format!("{} in p50 {} p99 {} {}", s.packets_in, delay(s.delay_p50_ns), delay(s.delay_p99_ns), bps(s.rate_bps));
    for (what, v) in [("loss", s.loss_pct), ("drops", s.drop_pct), ("reorder", s.reorder_pct)] {
        if v > 0.0 {
            let _ = write!(line, " {what} {}", pct(v));
        }
    }
    if s.duplicates > 0 {
        let _ = write!(line, " dup {}", s.duplicates);
    }
    line
}

/// One interval at a level of detail: `-v` [`interval_line`]; the default a shorter line,
/// and none for an interval in which nothing came in either way; `-q` none.
pub fn interval_at(out: &mut dyn Write, iv: &ProxyInterval, detail: Detail) -> io::Result<()> {
    match detail {
        Detail::Verbose => interval_line(out, iv),
        Detail::Quiet => Ok(()),
        Detail::Normal if iv.up.packets_in == 0 && iv.down.packets_in == 0 => Ok(()),
        Detail::Normal => {
            #[expect(clippy::cast_precision_loss, reason = "display")]
            let end = (iv.start_ns + iv.duration_ns) as f64 / 1e9;
            let line = format!("[{end:6.1}s] up {} | down {}", short_side(&iv.up), short_side(&iv.down));
            writeln!(out, "{}", crate::screen::wrap(&line))
        }
    }
}

/// `p50 .. p90 .. p99 .. p99.9 .. max .. (mean .., sd ..)` of a view, or what is missing.
fn delay_words(v: &wirebench_core::report::LatencyView, all: bool) -> String {
    let s = &v.summary;
    let q = |p: f64| s.at(p).map_or_else(|| "-".to_owned(), ns);
    if s.count == 0 {
        return "nothing delivered".to_owned();
    }
    if !all {
        return format!("p50 {} p99 {} max {}", q(50.0), q(99.0), ns(s.max_ns));
    }
    format!(
        "p50 {} p90 {} p99 {} p99.9 {} max {} (mean {}, sd {})",
        q(50.0),
        q(90.0),
        q(99.0),
        q(99.9),
        ns(s.max_ns),
        ns_f(s.mean_ns),
        ns_f(s.stddev_ns)
    )
}

fn achieved_text(a: &ProxyAchieved, all: bool) -> [String; 5] {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let active = a.active_ns as f64 / 1e9;
    [
        delay_words(&a.added_delay, all),
        format!(
            "{} ({} of {}); queue drops {}, queue full {}, send drops {}",
            pct(a.loss_pct),
            a.lost,
            a.packets_in,
            a.queue_drops,
            a.full_drops,
            a.send_drops
        ),
        format!("{} ({})", pct(a.reorder_pct), a.reordered),
        format!("{} ({})", pct(a.duplicate_pct), a.duplicates),
        format!("{} over {active:.2} s active (offered {})", bps(a.rate_bps), bps(a.offered_bps)),
    ]
}

fn direction(out: &mut dyn Write, name: &str, d: &ProxyDirection, all: bool) -> io::Result<()> {
    writeln!(out, "{name}: {} in, {} delivered", d.achieved.packets_in, d.achieved.packets_out)?;
    let req = requested_text(&d.requested);
    let ach = achieved_text(&d.achieved, all);
    let mut rows: Vec<(&str, String, String)> = vec![("added delay", req[0].clone(), ach[0].clone())];
    // With a rate, the added delay is the wait in the rate queue plus the configured delay.
    if let (Some(q), Some(p)) = (&d.achieved.queue_delay, &d.achieved.path_delay) {
        rows.push(("  rate queue", format!("up to {}", ns(d.requested.queue_limit_ns)), delay_words(q, all)));
        rows.push(("  delay", req[0].clone(), delay_words(p, all)));
    }
    let a = &d.achieved;
    // the default view leaves out the reorder and duplicate rows when none was asked or seen
    let shown = [
        true,
        all || d.requested.reorder_pct > 0.0 || a.reordered > 0,
        all || d.requested.duplicate_pct > 0.0 || a.duplicates > 0,
        true,
    ];
    for (i, row) in ["loss", "reorder", "duplicate", "rate"].into_iter().enumerate().filter(|(i, _)| shown[*i]) {
        rows.push((row, req[i + 1].clone(), ach[i + 1].clone()));
    }
    let w = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    for (row, r, a) in rows {
        writeln!(out, "  {row:<11}  requested {r:<w$}  achieved {a}")?;
    }
    Ok(())
}

/// The final report of a proxy run, every row whole (`-v`, the HTML page).
pub fn summary(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    summary_at(out, report, Detail::Verbose)
}

/// `proxy udp A -> B: 1 flow; up 1352 of 1353 delivered, added p50 1.003ms; down ...`:
/// `proxy -q`'s one line.
pub fn quiet_line(report: &Report) -> Option<String> {
    let Results::Proxy(p) = &report.results else { return None };
    let side = |d: &ProxyDirection| {
        let a = &d.achieved;
        let p50 =
            a.added_delay.summary.at(50.0).filter(|_| a.added_delay.summary.count > 0).map_or_else(|| "-".into(), ns);
        format!("{} of {} delivered, added p50 {p50}", a.packets_out, a.packets_in)
    };
    Some(format!(
        "proxy {} {} -> {}: {}; up {}; down {}",
        p.proto,
        p.listen,
        p.upstream,
        crate::words::counted(p.flows, "flow", "flows"),
        side(&p.up),
        side(&p.down)
    ))
}

/// The final report at a level of detail: `-q` [`quiet_line`]; the default view gives the
/// delay's p50, p99 and max and the rows asked for or seen, folded to the screen's width.
pub fn summary_at(out: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    match detail {
        Detail::Quiet => quiet_line(report).map_or(Ok(()), |l| writeln!(out, "{l}")),
        Detail::Normal => crate::screen::wrapped(out, |w| summary_of(w, report, false)),
        Detail::Verbose => summary_of(out, report, true),
    }
}

fn summary_of(out: &mut dyn Write, report: &Report, all: bool) -> io::Result<()> {
    let Results::Proxy(p) = &report.results else { return Ok(()) };
    writeln!(
        out,
        "proxy {} {} -> {}: {} ({} refused or unreachable)",
        p.proto,
        p.listen,
        p.upstream,
        crate::words::counted(p.flows, "flow", "flows"),
        p.flows_failed
    )?;
    direction(out, "up (client -> upstream)", &p.up, all)?;
    direction(out, "down (upstream -> client)", &p.down, all)?;
    if report.outcome == Outcome::Interrupted {
        writeln!(out, "interrupted: results so far")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side_of(packets_in: u64, packets_out: u64, p50: u64) -> ProxyIntervalSide {
        ProxyIntervalSide {
            packets_in,
            packets_out,
            loss_pct: 0.0,
            drop_pct: 0.0,
            reorder_pct: 0.0,
            duplicates: 0,
            rate_bps: 0.0,
            delay_p50_ns: p50,
            delay_p99_ns: p50,
        }
    }

    /// An interval that delivered nothing shows no delay (it has none), never "0ns", which
    /// reads as a measured zero; one that delivered shows its percentiles.
    #[test]
    fn an_idle_interval_has_no_delay() {
        assert!(side(&side_of(0, 0, 0)).starts_with("0 in 0 out, delay p50 - p99 -,"), "{}", side(&side_of(0, 0, 0)));
        assert!(side(&side_of(5, 0, 0)).starts_with("5 in 0 out, delay p50 - p99 -,"));
        assert!(side(&side_of(5, 5, 10_011_000)).starts_with("5 in 5 out, delay p50 10.011ms p99 10.011ms,"));
    }

    /// A proxy that served one flow says `1 flow`, not `1 flows`.
    #[test]
    fn the_summary_counts_flows_in_english() {
        let mut r: Report = serde_json::from_str(include_str!("../../../../fuzz/seeds/report_html/report-proxy.json"))
            .expect("the proxy report seed reads");
        let Results::Proxy(p) = &mut r.results else { panic!("a proxy report") };
        p.flows = 1;
        let mut one = Vec::new();
        summary(&mut one, &r).unwrap();
        let one = String::from_utf8(one).unwrap();
        assert!(one.lines().next().unwrap().ends_with(": 1 flow (0 refused or unreachable)"), "{one}");
        let Results::Proxy(p) = &mut r.results else { panic!("a proxy report") };
        p.flows = 2;
        let mut two = Vec::new();
        summary(&mut two, &r).unwrap();
        assert!(String::from_utf8(two).unwrap().contains(": 2 flows (0 refused"));
    }

    #[test]
    fn units() {
        assert_eq!(bps(60_760_000.0), "60.76mbit/s");
        assert_eq!(bps(5.2e9), "5.20gbit/s");
        assert_eq!(pct(1.0), "1%");
        assert_eq!(pct(0.25), "0.25%");
    }
}
