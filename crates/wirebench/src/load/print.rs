//! The terminal view of a load run: one line a second, then tables per event type.

use std::io::{self, Write};

use wirebench_core::report::{LatencyView, LoadResults, LoadSecond, Outcome, Report, Results};
use wirebench_core::units::humanize_ns;

/// One progress line.
pub(super) fn second(r: &LoadSecond, open: u64) -> String {
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
    let mut c = vec![s.count.to_string(), if s.count == 0 { "-".into() } else { format!("{:.3}", s.mean_ns / 1e6) }];
    c.extend(ps.iter().map(|&p| s.at(p).map_or_else(|| "-".into(), ms)));
    c.push(ms(s.max_ns));
    c
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

/// The whole report.
pub(super) fn report(ps: &[f64], report: &Report, w: &mut dyn Write) -> io::Result<()> {
    let Results::Load(l) = &report.results else { return Ok(()) };
    match report.outcome {
        Outcome::Completed => {}
        Outcome::Interrupted => writeln!(w, "interrupted: partial results")?,
        Outcome::PeerSilent => writeln!(w, "the server closed every connection mid-run: partial results")?,
    }
    summary(l, w)?;
    let mut head: Vec<String> =
        ["type", "share%", "bytes", "sent", "recv", "avg ms"].iter().map(|s| (*s).into()).collect();
    head.extend(ps.iter().map(|p| format!("p{p}")));
    head.push("max".into());
    let row = |t: &wirebench_core::report::LoadTypeResult, v: &LatencyView| {
        let mut r = vec![t.name.clone(), format!("{:.1}", t.share_pct), t.size.to_string(), t.sent.to_string()];
        let c = cells(v, ps);
        r.push(c[0].clone());
        r.extend(c.into_iter().skip(1));
        r
    };
    writeln!(w, "\ndelay from departure to arrival at every other member (ms):")?;
    let mut rows: Vec<Vec<String>> = l.types.iter().filter(|t| !t.request).map(|t| row(t, &t.delay)).collect();
    rows.push(row(&l.overall, &l.overall.delay));
    table(w, &head, &rows)?;
    let req: Vec<Vec<String>> = l.types.iter().filter_map(|t| t.reply.as_ref().map(|v| row(t, v))).collect();
    if !req.is_empty() {
        writeln!(w, "\nrequest to reply (ms):")?;
        table(w, &head, &req)?;
    }
    let p = |v: &LatencyView, q: f64| v.summary.at(q).map_or_else(|| "-".into(), ms);
    let last = *ps.last().unwrap_or(&99.0);
    writeln!(
        w,
        "\nfrom the intended send time (coordinated omission corrected): p50 {} p{last} {} max {} ms",
        p(&l.overall.delay_intended, 50.0),
        p(&l.overall.delay_intended, last),
        ms(l.overall.delay_intended.summary.max_ns)
    )?;
    for (name, link) in [("upload", &l.link_up), ("download", &l.link_down)] {
        if let Some(k) = link {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let rate = k.requested_bps.map_or_else(|| "unlimited".into(), |b| format!("{:.3} Mbit/s", b as f64 / 1e6));
            writeln!(
                w,
                "{name} link: requested {rate} + {} one way; achieved {:.3} Mbit/s (busiest client), hold p50 {} ms max {} ms over {} frames",
                humanize_ns(u128::from(k.requested_delay_ns)),
                k.achieved_bps_max_client / 1e6,
                p(&k.hold, 50.0),
                ms(k.hold.summary.max_ns),
                k.frames
            )?;
        }
    }
    for t in &l.thresholds {
        let v = t.value_ns.map_or_else(|| "no data".into(), |v| format!("{} ms", ms(v)));
        writeln!(w, "threshold {}: {v} {}", t.expr, if t.passed { "ok" } else { "FAILED" })?;
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn summary(l: &LoadResults, w: &mut dyn Write) -> io::Result<()> {
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
    writeln!(
        w,
        "server receive {:.1} msg/s (requested {:.1}), server send {:.1} msg/s, as the clients see it; slip mean {} max {}",
        l.achieved_send_per_s,
        l.requested_send_per_s,
        l.received_per_s,
        humanize_ns(u128::from(l.slip_mean_ns)),
        humanize_ns(u128::from(l.slip_max_ns))
    )?;
    let pr = &l.process;
    writeln!(
        w,
        "cpu {:.2}s user {:.2}s sys, {:.2} us per message event{}; peak rss {:.1} MB",
        pr.user_ns as f64 / 1e9,
        pr.system_ns as f64 / 1e9,
        pr.per_event_ns / 1e3,
        if pr.room_in_process { " (room in this process)" } else { "" },
        pr.max_rss_bytes as f64 / 1e6,
    )?;
    if !l.errors.is_empty() {
        let e: Vec<String> = l.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(w, "errors: {}", e.join(", "))?;
    }
    Ok(())
}
