//! The terminal text of a ping run.

use std::io::{self, Write};

use wirebench_core::clocksync::OneWay;
use wirebench_core::latency::Summary;
use wirebench_core::report::{
    GaveUp, LatencyView, Measure, Outcome, Pacing, PingResults, ProbeForm, Report, ResponderResult, Results, Stopped,
    decode_histogram,
};

use crate::distribution;
use crate::screen::Detail;
use crate::words::{pct_line, summary_line, us, us_u, value_at};

fn one_way_line(o: &OneWay) -> String {
    let b = us_u(o.bound_ns);
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let offset = us(o.offset_ns as f64);
    let mark = |clamped: bool| if clamped { " (an estimate below 0 was shown as 0)" } else { "" };
    format!(
        "one-way (± {b} us): forward p50 {} p99 {}{}, reverse p50 {} p99 {}{}; clock offset {} us",
        us_u(o.forward.p50_ns),
        us_u(o.forward.p99_ns),
        mark(o.forward.clamped_at_zero),
        us_u(o.reverse.p50_ns),
        us_u(o.reverse.p99_ns),
        mark(o.reverse.clamped_at_zero),
        offset,
    )
}

/// How the main view was measured, in words.
pub fn view_words(v: &LatencyView) -> &'static str {
    match v.measures {
        Measure::RttFromIntendedSend => "round trip from intended send (coordinated omission corrected)",
        Measure::RttFromActualSend => "round trip from actual send (uncorrected)",
        Measure::NetworkRtt => "round trip minus responder dwell",
        Measure::Dwell => "responder dwell",
        Measure::StackRtt => "stack to stack (kernel timestamps, both hosts' wake-ups out)",
        Measure::PingerStackRtt => "stack to stack (kernel timestamps, this host's wake-up out)",
        Measure::HostsShare => "the hosts' own share (round trip minus stack to stack)",
        Measure::SendLateness => "the sender's own lateness (actual minus intended send time)",
        _ => "round trip",
    }
}

/// A responder's headline: its round trips' percentiles and counts (late replies and
/// duplicates when there were any), and in an open loop whose sender
/// was late by a share worth naming, that lateness (which the corrected figures include).
/// `ping` prints it as its summary line and `ping -q` alone.
pub fn responder_headline(p: &PingResults, r: &ResponderResult) -> String {
    let s = &r.latency.summary;
    let late = sender_lateness_p50(p, r)
        .map_or_else(String::new, |ns| format!(" | includes the sender's own lateness, p50 {} us", us_u(ns)));
    let nonzero = |what: &str, n: u64| if n > 0 { format!(" {what} {n}") } else { String::new() };
    format!(
        "{}: {} | count {} lost {}{}{}{late}",
        r.addr,
        pct_line(s),
        s.count,
        r.lost,
        nonzero("late", r.late),
        nonzero("dup", r.duplicates)
    )
}

/// The sender's lateness p50 when it is worth naming beside a responder's corrected p50:
/// at least 1 us and 5 % of it.
pub fn sender_lateness_p50(p: &PingResults, r: &ResponderResult) -> Option<u64> {
    let late = value_at(p.rate.as_ref()?.lateness.as_ref()?, 50.0)?;
    let p50 = value_at(&r.latency, 50.0)?;
    (late >= 1_000 && late * 20 >= p50).then_some(late)
}

fn responder(out: &mut dyn Write, p: &PingResults, r: &ResponderResult, table: bool, detail: Detail) -> io::Result<()> {
    let all = detail.verbose();
    let view = |s: &Summary| if all { summary_line(s) } else { pct_line(s) };
    writeln!(out, "{}", responder_headline(p, r))?;
    writeln!(out, "  measures: {}", view_words(&r.latency))?;
    if all {
        writeln!(out, "  all figures: {} | late {} dup {}", summary_line(&r.latency.summary), r.late, r.duplicates)?;
    }
    if r.lost > 0 {
        writeln!(out, "  timeouts in a row: at most {}", r.max_lost_in_a_row)?;
    }
    if let Some(st) = &r.stopped {
        writeln!(out, "  {}", stopped_line(&r.addr, st))?;
    }
    if let Some(u) = &r.uncorrected {
        writeln!(out, "  uncorrected (from actual send): {}", view(&u.summary))?;
    }
    if let (Some(n), Some(d)) = (&r.network, &r.dwell) {
        writeln!(
            out,
            "  network (dwell subtracted): {} ; dwell p50 {} max {} us",
            view(&n.summary),
            value_at(d, 50.0).map_or_else(|| "-".into(), us_u),
            us_u(d.summary.max_ns)
        )?;
    }
    if let Some(o) = &r.one_way {
        writeln!(out, "  {}", one_way_line(o))?;
    }
    if let Some(k) = r.kernel.as_ref().filter(|_| all) {
        writeln!(out, "  {}", crate::attribution::kernel_line(k, r.uncorrected.as_ref().unwrap_or(&r.latency)))?;
    }
    if r.warmup.summary.count > 0 && all {
        writeln!(
            out,
            "  warm-up (excluded): {} replies, p50 {} max {} us",
            r.warmup.summary.count,
            value_at(&r.warmup, 50.0).map_or_else(|| "-".into(), us_u),
            us_u(r.warmup.summary.max_ns)
        )?;
    }
    if r.clamped > 0 {
        writeln!(out, "  {} samples clamped (outside 1 ns..1 h or impossible timestamps)", r.clamped)?;
    }
    if table {
        table_of(out, &r.latency)?;
    }
    Ok(())
}

/// `responder 10.0.0.2:7878 stopped answering at 2.514 s (its last reply; 1873 probes
/// after it unanswered)`.
pub fn stopped_line(addr: &str, st: &Stopped) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let at_s = st.at_ns as f64 / 1e9;
    format!(
        "responder {addr} stopped answering at {at_s:.3} s (its last reply; {} probes after it unanswered)",
        st.unanswered
    )
}

/// Why a run gave up, in words.
pub fn gave_up_words(g: Option<&GaveUp>) -> String {
    match g {
        Some(GaveUp::Silence { for_ns }) => {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let s = *for_ns as f64 / 1e9;
            format!("nothing answered for {s:.1} s: gave up")
        }
        Some(GaveUp::Unreachable) => "the target is unreachable (ICMP unreachable): gave up".into(),
        Some(GaveUp::Closed) => "the connection was closed: gave up".into(),
        None => "the responder stopped answering".into(),
    }
}

fn table_of(out: &mut dyn Write, v: &LatencyView) -> io::Result<()> {
    match decode_histogram(&v.histogram) {
        Ok(h) => {
            writeln!(out, "\nHistogram of {} in microseconds", view_words(v))?;
            distribution::write(&h, 1000.0, out)?;
            writeln!(out)
        }
        Err(e) => writeln!(out, "  (histogram unreadable: {e})"),
    }
}

/// The terminal report of a ping run: header, one line per responder with its details,
/// the combined line, the rate line; `table` adds the percentile distribution. `-q` is one
/// [`responder_headline`] per responder; the default view leaves out the kernel timestamps'
/// split, the warm-up and the minimum, mean and deviation (`-v` and the HTML page show
/// them), and folds what it prints to the screen's width.
pub fn ping(out: &mut dyn Write, report: &Report, table: bool, detail: Detail) -> io::Result<()> {
    let Results::Ping(p) = &report.results else {
        return writeln!(out, "not a ping report");
    };
    match detail {
        Detail::Quiet => p.responders.iter().try_for_each(|r| writeln!(out, "{}", responder_headline(p, r))),
        Detail::Normal => crate::screen::wrapped(out, |w| ping_at(w, report, p, table, detail)),
        Detail::Verbose => ping_at(out, report, p, table, detail),
    }
}

fn ping_at(out: &mut dyn Write, report: &Report, p: &PingResults, table: bool, detail: Detail) -> io::Result<()> {
    // `ping --poisson` records its seed in the config: exponential gaps, not a fixed period.
    header(out, p, report.config.get("poisson").is_some_and(|v| !v.is_null()), detail)?;
    for r in &p.responders {
        responder(out, p, r, table, detail)?;
    }
    if let Some(c) = &p.combined {
        let line = if detail.verbose() { summary_line(&c.summary) } else { pct_line(&c.summary) };
        writeln!(out, "all {} responders: {line}", p.responders.len())?;
        if table {
            table_of(out, c)?;
        }
    }
    if let Some(rate) = &p.rate {
        let late = match &rate.lateness {
            Some(v) => format!(
                "the sender's own lateness p50 {} p99 {} max {} us",
                value_at(v, 50.0).map_or_else(|| "-".into(), us_u),
                value_at(v, 99.0).map_or_else(|| "-".into(), us_u),
                us_u(v.summary.max_ns)
            ),
            None => format!("send slip mean {} max {} us", us_u(rate.slip_mean_ns), us_u(rate.slip_max_ns)),
        };
        writeln!(
            out,
            "rate: requested {:.0}/s, achieved {:.0}/s, {late}{}",
            rate.requested_per_s,
            rate.achieved_per_s,
            if rate.kept_up { "" } else { " -- the sender could NOT keep this rate; see the corrected view" }
        )?;
    }
    if p.ignored > 0 {
        writeln!(out, "ignored {} datagrams that were not replies to this run", p.ignored)?;
    }
    match report.outcome {
        Outcome::Completed => Ok(()),
        Outcome::Interrupted => writeln!(out, "interrupted: results so far"),
        Outcome::PeerSilent => writeln!(out, "{}; results so far", gave_up_words(p.gave_up.as_ref())),
    }
}

fn header(out: &mut dyn Write, p: &PingResults, poisson: bool, detail: Detail) -> io::Result<()> {
    let pacing = match (p.pacing == Pacing::Open, poisson) {
        (true, true) => "open loop (Poisson sampling)",
        (true, false) => "open loop",
        (false, _) => "closed loop",
    };
    let form = if p.probe_form == ProbeForm::Full { "four timestamps" } else { "round trip only" };
    let wait = if p.thread.spin { "busy-poll" } else { "blocking" };
    let cpus: Vec<String> = p.thread.seen_cpus.iter().map(ToString::to_string).collect();
    let pin = p.thread.pinned_cpu.map_or_else(|| "unpinned".to_owned(), |c| format!("pinned to cpu {c}"));
    if !detail.verbose() {
        return writeln!(
            out,
            "ping {} {}: {pacing}, {}-byte {} probes, {} + {} warm-up",
            p.proto, p.target, p.probe_size, p.probe_form, p.sent, p.warmup_sent
        );
    }
    writeln!(
        out,
        "ping {} {}: {pacing}, {}-byte {} probes ({form}), {wait}, {pin}, ran on cpu {}; {} probes + {} warm-up",
        p.proto,
        p.target,
        p.probe_size,
        p.probe_form,
        if cpus.is_empty() { "?".to_owned() } else { cpus.join(",") },
        p.sent,
        p.warmup_sent
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::latency::Percentile;
    use wirebench_core::report::RateResult;

    #[test]
    fn dwell_and_warm_up_read_a_p50_the_percentile_list_left_out() {
        // `ping --percentiles 90,99`: no summary lists p50, and the network line once ended
        // in "dwell p50  max 100 us" (and the warm-up line in "p50 -").
        let mut r = crate::fixtures::ping(&[20_000]);
        let Results::Ping(p) = &mut r.results else { unreachable!() };
        let x = &mut p.responders[0];
        x.network = Some(crate::fixtures::view(10_000, 100));
        x.dwell = Some(crate::fixtures::view(1_000, 100));
        let listed = vec![Percentile { p: 90.0, ns: 1 }, Percentile { p: 99.0, ns: 2 }];
        for v in [&mut x.latency, &mut x.warmup, x.network.as_mut().unwrap(), x.dwell.as_mut().unwrap()] {
            v.summary.percentiles.clone_from(&listed);
        }
        let mut out = Vec::new();
        ping(&mut out, &r, false, Detail::Verbose).unwrap();
        let t = String::from_utf8(out).unwrap();
        // dwell: 1, 2, .. 100 us, p50 the 50th (50,000 ns, whose highest equivalent at 3
        // significant digits is 50,015); warm-up: 20 .. 29 us, p50 the 5th (24,000: 24,015)
        assert!(t.contains("; dwell p50 50.0 max 100 us\n"), "{t}");
        assert!(t.contains("warm-up (excluded): 10 replies, p50 24.0 max 29.0 us\n"), "{t}");
        // a listed p50 is the summary's, as before
        let Results::Ping(p) = &mut r.results else { unreachable!() };
        p.responders[0].dwell.as_mut().unwrap().summary.percentiles = vec![Percentile { p: 50.0, ns: 7_000 }];
        let mut out = Vec::new();
        ping(&mut out, &r, false, Detail::Verbose).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("; dwell p50 7.00 max 100 us\n"));
    }

    /// An open loop's headline names the sender's lateness when it is at least 5 % of the
    /// corrected p50 (and 1 us), in the same line (`ping -q` prints that line alone); the
    /// rate line gives its percentiles whatever its size.
    #[test]
    fn an_open_loops_headline_names_the_senders_lateness_worth_naming() {
        let mut report = crate::fixtures::ping(&[200_000]);
        let p50 = match &report.results {
            Results::Ping(p) => value_at(&p.responders[0].latency, 50.0).expect("a p50"),
            _ => unreachable!("a ping fixture"),
        };
        for (late_ns, named) in [(p50 / 10, true), (p50 / 19, true), (p50 / 22, false), (900, false)] {
            let mut late = crate::fixtures::view(late_ns, 1);
            late.measures = wirebench_core::report::Measure::SendLateness;
            let Results::Ping(p) = &mut report.results else { unreachable!("a ping fixture") };
            p.rate = Some(RateResult {
                requested_per_s: 1000.0,
                achieved_per_s: 1000.0,
                slip_mean_ns: late_ns,
                slip_max_ns: late_ns,
                kept_up: true,
                lateness: Some(late),
            });
            let head = responder_headline(p, &p.responders[0]);
            let words = format!("includes the sender's own lateness, p50 {} us", us_u(late_ns));
            assert_eq!(head.ends_with(&words), named, "{late_ns} ns of {p50}: {head}");
            let mut text = Vec::new();
            ping(&mut text, &report, false, Detail::Verbose).unwrap();
            let text = String::from_utf8(text).unwrap();
            assert!(text.contains(&head), "{text}");
            let rate = format!("the sender's own lateness p50 {0} p99 {0} max {0} us", us_u(late_ns));
            assert!(text.contains(&rate), "{text}");
        }
    }
}
