//! What a run says about itself, in words and charts: the stall meter's line and its
//! verdict on the run's latency, the kernel counters across the run and the split of its
//! losses, and a responder's round trip split by kernel timestamps. Every figure comes
//! from the report's histograms and counts, so every view shows the same numbers.

use std::io::{self, Write};

use wirebench_core::counters::{Delta, LossSplit};
use wirebench_core::hiccup::{Blame, verdict};
use wirebench_core::report::{HiccupResult, KernelResult, LatencyView, Report, Results, TcpInfo, decode_histogram};

use crate::screen::Detail;
use crate::words::{summary_line, us};

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn dur(ns: u64) -> String {
    if ns >= 1_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{} us", us(ns as f64)) }
}

/// `hiccups (this host's stalls: a thread woken every 1ms, 10000 wake-ups + 199 missed):
/// min .. p50 .. max .. us`.
pub fn hiccup_line(h: &HiccupResult) -> String {
    let missed = if h.corrected > 0 { format!(" + {} missed in stalls", h.corrected) } else { String::new() };
    // what the meter itself cost, so a user can weigh it (`--hiccup-interval`, `--no-hiccup`)
    let cost = h.cpu_ns.map_or_else(String::new, |c| {
        let share = wirebench_core::hiccup::cost_share(c, h.wakeups + h.corrected, h.interval_ns);
        format!("; the meter's own CPU {:.2}% of one core", share * 100.0)
    });
    format!(
        "hiccups (this host's own stalls: a thread woken every {}, {} wake-ups{missed}): {}{cost}",
        dur(h.interval_ns),
        h.wakeups,
        summary_line(&h.lateness.summary)
    )
}

/// The stall meter in a default view's one line: `stalls (this host, 1.0 ms timer): p50 22.3
/// p99 1693 p99.9 6685 max 8684 us`, the figures of [`hiccup_line`] that matter.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn hiccup_short(h: &HiccupResult) -> String {
    use std::fmt::Write as _;
    let s = &h.lateness.summary;
    let mut line = format!("stalls (this host, {} timer):", dur(h.interval_ns));
    for q in s.percentiles.iter().filter(|q| [50.0, 99.0, 99.9].contains(&q.p)) {
        let _ = write!(line, " {} {}", crate::words::pct_label(q.p), us(q.ns as f64));
    }
    let _ = write!(line, " max {} us", us(s.max_ns as f64));
    if h.corrected > 0 {
        let _ = write!(line, ", {} wake-ups missed", h.corrected);
    }
    line
}

/// The verdict on `latency` (a run's main view) against the stalls, in one line, when
/// there are enough values (`wirebench_core::hiccup::verdict`). The figures and the words
/// come from the one verdict: the words name the band of `X / Y` it found, so they always
/// read true of the two figures printed beside them.
pub fn verdict_line(what: &str, latency: &LatencyView, stalls: &HiccupResult) -> Option<String> {
    let lat = decode_histogram(&latency.histogram).ok()?;
    let hic = decode_histogram(&stalls.lateness.histogram).ok()?;
    let found = verdict(&lat, &hic)?;
    let p = crate::words::pct_label(found.p);
    let (x, y) = (dur(found.latency_ns), dur(found.hiccup_ns));
    let (relation, whose) = match found.blame {
        Blame::Within => ("within", "this host, not the network"),
        Blame::Mostly => ("at most twice", "mostly this host: the network's share cannot be told apart from it"),
        Blame::Partly => ("2 to 10 times", "part this host, part the network or the far end"),
        Blame::Network => ("over 10 times", "the network or the far end, not this host"),
    };
    Some(format!("{p} {what} of {x} is {relation} the platform's own stalls (hiccup {p} {y}): {whose}"))
}

/// The stall meter on its own (`wirebench hiccup`): its line and the worst second.
pub fn hiccup_summary(out: &mut dyn Write, h: &HiccupResult) -> io::Result<()> {
    writeln!(out, "{}", hiccup_line(h))?;
    hiccup_tail(out, h)
}

/// What `wirebench hiccup` prints after the meter's line: the worst second and what the
/// tail means for measurements on this host.
fn hiccup_tail(out: &mut dyn Write, h: &HiccupResult) -> io::Result<()> {
    if let Some(worst) = h.seconds.iter().max_by_key(|s| s.max_ns) {
        writeln!(out, "worst second: {} s after the start, latest wake-up {}", worst.at_s, dur(worst.max_ns))?;
    }
    let p999 = h.lateness.summary.at(99.9).unwrap_or(h.lateness.summary.max_ns);
    writeln!(
        out,
        "a sleeping thread on this host wakes up to {} late at p99.9: latency tails of that size measured here \
         are this host's own (the verdict lines of ping, load and proxy reports compare them)",
        dur(p999)
    )
}

/// The main latency view of a report and what it is called, for the verdict.
pub(crate) fn main_view(report: &Report) -> Option<(&'static str, &LatencyView)> {
    match &report.results {
        Results::Ping(p) => {
            p.combined.as_ref().or_else(|| p.responders.first().map(|r| &r.latency)).map(|v| ("round trip", v))
        }
        Results::Load(l) => Some(("delay", &l.overall.delay)),
        _ => None,
    }
}

fn counters_line(d: &Delta) -> String {
    let mut parts = Vec::new();
    if let Some(u) = d.udp_total() {
        parts.push(format!(
            "Udp InErrors +{} (RcvbufErrors +{}), SndbufErrors +{}, NoPorts +{}",
            u.in_errors, u.rcvbuf_errors, u.sndbuf_errors, u.no_ports
        ));
    }
    if let Some(q) = d.qdisc_drops {
        parts.push(format!("egress qdisc drops +{q}"));
    }
    if let Some(t) = d.tcp_retrans_segs {
        parts.push(format!("Tcp RetransSegs +{t}"));
    }
    if let Some(s) = d.softnet {
        parts.push(format!("softnet dropped +{} squeezed +{}", s.dropped, s.time_squeeze));
    }
    for i in &d.interfaces {
        parts.push(format!(
            "{} rx_dropped +{} rx_errors +{} rx_missed +{} tx_dropped +{} tx_errors +{}",
            i.name, i.rx_dropped, i.rx_errors, i.rx_missed_errors, i.tx_dropped, i.tx_errors
        ));
    }
    format!("kernel counters during the run ({}): {}", d.scope, parts.join("; "))
}

/// The counters that rose across the run and can lose a run's datagrams (UDP errors, qdisc,
/// softnet and interface drops), in one line; `None` when none rose. A default view prints
/// it; `-v` prints [`counters_line`] whole.
fn counters_rose(d: &Delta) -> Option<String> {
    let mut parts = Vec::new();
    let mut add = |name: String, v: u64| {
        if v > 0 {
            parts.push(format!("{name} +{v}"));
        }
    };
    if let Some(u) = d.udp_total() {
        add("Udp InErrors".into(), u.in_errors);
        add("RcvbufErrors".into(), u.rcvbuf_errors);
        add("SndbufErrors".into(), u.sndbuf_errors);
    }
    add("egress qdisc drops".into(), d.qdisc_drops.unwrap_or(0));
    add("softnet dropped".into(), d.softnet.map_or(0, |s| s.dropped));
    for i in &d.interfaces {
        add(format!("{} rx_dropped", i.name), i.rx_dropped);
        add(format!("{} rx_missed", i.name), i.rx_missed_errors);
        add(format!("{} tx_dropped", i.name), i.tx_dropped);
    }
    (!parts.is_empty()).then(|| format!("kernel drop counters rose ({}): {}", d.scope, parts.join(", ")))
}

/// `of 12 probes lost: 0 never left this host (dropped after the send: SndbufErrors +0,
/// egress qdisc drops +0: the larger, they overlap), 0 refused by a socket on this host
/// (InErrors), 0 dropped by the NIC or softnet, 12 elsewhere on the path or at the far end`.
/// `counters`: the figures behind the first share (this host sent: ping); `None` when this
/// host did not send (listen: the sender's own drops are not seen here).
pub fn loss_line(what: &str, s: &LossSplit, counters: Option<&Delta>) -> String {
    let first = match counters {
        Some(d) => {
            let sndbuf = d.udp_total().map(|u| u.sndbuf_errors);
            let figures = crate::stream_loss::sender_figures(sndbuf, d.qdisc_drops)
                .unwrap_or_else(|| "SndbufErrors or egress qdisc drops: not read".into());
            format!("{} never left this host (dropped after the send: {figures})", s.send_buffer)
        }
        None => "the sender's own drops not seen (this host did not send: SndbufErrors and egress qdisc drops \
                 are the sending host's)"
            .to_owned(),
    };
    format!(
        "of {} {what}: {first}, {} refused by a socket on this host \
         (InErrors, RcvbufErrors among them{}), {} dropped by the NIC or softnet here, {} elsewhere on the path or at the far end \
         (counters are host-wide{})",
        s.missing,
        s.socket,
        if s.socket > 0 { ": raise the receive buffer, sysctl -w net.core.rmem_max=16777216" } else { "" },
        s.nic,
        s.elsewhere,
        if s.excess > 0 { format!("; they rose {} beyond what this run lost", s.excess) } else { String::new() }
    )
}

/// `TCP_INFO (the probe connection at the end of the run): kernel srtt 48 us (rttvar 12 us),
/// 0 retransmits, 0 lost, reordering 3`: the kernel's integers as the JSON has them.
pub fn tcp_info_line(t: &TcpInfo) -> String {
    format!(
        "TCP_INFO (the probe connection at the end of the run): kernel srtt {} us (rttvar {} us), {} retransmits, \
         {} lost, reordering {}",
        t.srtt_us, t.rttvar_us, t.retransmits, t.lost, t.reordering
    )
}

/// The value at `p` of a view, listed or not (`crate::words::value_at`).
fn at(v: &LatencyView, p: f64) -> u64 {
    crate::words::value_at(v, p).unwrap_or(0)
}

/// `  kernel timestamps (software TX and RX): stack to stack p50 16.2 us ...; RTT p50
/// 57.3 us, of which 41.1 us is the two hosts' own send, wake-up and scheduling`.
pub fn kernel_line(k: &KernelResult, rtt: &LatencyView) -> String {
    let kinds = format!("{} TX, {} RX", k.tx, k.rx);
    let Some(stack) = &k.stack else {
        return format!(
            "kernel timestamps ({kinds}): no round trip could be split ({} of {} replies had an RX stamp, {} a TX stamp)",
            k.rx_stamps, k.replies, k.tx_stamps
        );
    };
    let (r50, s50) = (at(rtt, 50.0), at(stack, 50.0));
    let whose = if stack.measures == wirebench_core::report::Measure::StackRtt {
        "the two hosts' own send path, wake-up and scheduling"
    } else {
        "this host's own send path, wake-up and scheduling (the responder's is inside stack to stack: probes of 48 bytes or more split it too)"
    };
    format!(
        "kernel timestamps ({kinds}, {} of {} replies): RTT p50 {}, of which {} is {whose}; stack to stack p50 {} (p99 {}, max {})",
        stack.summary.count,
        k.replies,
        dur(r50),
        dur(r50.saturating_sub(s50)),
        dur(s50),
        dur(at(stack, 99.0)),
        dur(stack.summary.max_ns)
    )
}

/// The attribution lines of a report: the stall meter and its verdict, the counters, the
/// loss split, notes. Nothing when the report has no attribution section.
pub fn text(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    text_at(out, report, Detail::Verbose)
}

/// [`text`] at a level of detail: the default view gives the stall meter's short line, its
/// verdict, the drop counters that rose, the loss split and the notes, each folded to the
/// screen's width; `-v` gives every line whole; `-q` nothing.
pub fn text_at(out: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    match detail {
        Detail::Quiet => Ok(()),
        Detail::Verbose => full(out, report),
        Detail::Normal => crate::screen::wrapped(out, |w| short(w, report)),
    }
}

fn short(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Some(a) = &report.attribution else { return Ok(()) };
    if let Some(h) = &a.hiccup {
        writeln!(out, "{}", hiccup_short(h))?;
        if matches!(report.results, Results::Hiccup) {
            hiccup_tail(out, h)?;
        } else if let Some(line) = main_view(report).and_then(|(what, v)| verdict_line(what, v, h)) {
            writeln!(out, "  {line}")?;
        }
    }
    if let Some(line) = a.counters.as_ref().and_then(counters_rose) {
        writeln!(out, "{line}")?;
    }
    loss_split(out, report)?;
    for n in &a.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

fn loss_split(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Some(a) = &report.attribution else { return Ok(()) };
    if let Some(s) = a.loss.as_ref().filter(|s| s.missing > 0) {
        let what = match report.results {
            Results::Ping(_) if s.missing == 1 => "probe lost",
            Results::Ping(_) => "probes lost",
            _ => "missing",
        };
        // listen (a stream report with its totals) does not run on the sender
        let sent_here = !matches!(&report.results, Results::Stream(x) if x.listen.is_some());
        writeln!(out, "{}", loss_line(what, s, a.counters.as_ref().filter(|_| sent_here)))?;
    }
    Ok(())
}

fn full(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Some(a) = &report.attribution else { return Ok(()) };
    if let Some(h) = &a.hiccup {
        writeln!(out, "{}", hiccup_line(h))?;
        if matches!(report.results, Results::Hiccup) {
            // the meter on its own: what `wirebench hiccup` printed after its line
            hiccup_tail(out, h)?;
        } else if let Some(line) = main_view(report).and_then(|(what, v)| verdict_line(what, v, h)) {
            writeln!(out, "  {line}")?;
        }
    }
    if let Some(d) = &a.counters {
        writeln!(out, "{}", counters_line(d))?;
    }
    loss_split(out, report)?;
    if let Some(t) = &a.tcp_info {
        writeln!(out, "{}", tcp_info_line(t))?;
    }
    for n in &a.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wirebench_core::counters::{Snapshot, Udp};
    use wirebench_core::report::{Attribution, HiccupResult};

    use super::*;
    use crate::fixtures;

    #[test]
    fn the_line_ends_with_the_meters_own_cost_when_it_was_read() {
        let mut h = fixtures::stalls(10_000);
        assert!(!hiccup_line(&h).contains("own CPU"));
        h.cpu_ns = Some(1_800_000); // 1.8 ms over 100 wake-ups of 1 ms
        assert!(hiccup_line(&h).ends_with(" us; the meter's own CPU 1.80% of one core"), "{}", hiccup_line(&h));
    }

    fn report_with(h: HiccupResult) -> Report {
        let mut r = fixtures::ping(&[1_000_000]);
        r.attribution = Some(Attribution { hiccup: Some(h), ..Attribution::default() });
        r
    }

    fn text_of(r: &Report) -> String {
        let mut out = Vec::new();
        text(&mut out, r).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A view of 98 values of `low` and two of `high`: its p99 (rank 99 of 100) is `high`.
    fn two_tailed(low: u64, high: u64) -> LatencyView {
        let mut h = wirebench_core::latency::histogram();
        for v in std::iter::repeat_n(low, 98).chain([high, high]) {
            wirebench_core::latency::record(&mut h, v);
        }
        let mut v = fixtures::view(low, 1);
        v.histogram = wirebench_core::report::encode_histogram(&h);
        v
    }

    /// The verdict's line for a round trip p99 of `x` against stalls p99 of `y` (ns).
    fn verdict_of(x: u64, y: u64) -> String {
        let mut h = fixtures::stalls(1_000);
        h.lateness = two_tailed(1_000, y);
        verdict_line("round trip", &two_tailed(1_000, x), &h).unwrap()
    }

    /// Each band in its own words, the figures beside them the ones the band was found
    /// from. The first case is the line a user read as a contradiction: a round trip
    /// longer than the stalls, said to be "within" them.
    #[test]
    fn the_verdict_says_how_the_two_figures_compare_in_every_band() {
        assert_eq!(
            verdict_of(80_300, 58_200),
            "p99 round trip of 80.3 us is at most twice the platform's own stalls (hiccup p99 58.2 us): \
             mostly this host: the network's share cannot be told apart from it"
        );
        assert_eq!(
            verdict_of(58_200, 80_300),
            "p99 round trip of 58.2 us is within the platform's own stalls (hiccup p99 80.3 us): this host, not the network"
        );
        assert_eq!(
            verdict_of(80_300, 20_000),
            "p99 round trip of 80.3 us is 2 to 10 times the platform's own stalls (hiccup p99 20.0 us): \
             part this host, part the network or the far end"
        );
        assert_eq!(
            verdict_of(80_300, 5_000),
            "p99 round trip of 80.3 us is over 10 times the platform's own stalls (hiccup p99 5.00 us): \
             the network or the far end, not this host"
        );
        // equal figures are within; the same figure shown on both sides reads true
        assert!(verdict_of(80_300, 80_300).contains(" is within the platform's own stalls (hiccup p99 80.3 us)"));
    }

    #[test]
    fn the_verdict_sits_under_the_stall_meters_line() {
        // round trips of 1.0-1.1 ms: p99 1.098 ms
        let host = text_of(&report_with(fixtures::stalls(1_000_000)));
        assert!(host.contains("hiccups (this host's own stalls: a thread woken every 1.0 ms, 100 wake-ups)"), "{host}");
        assert!(host.contains("\n  p99 round trip of 1.1 ms is within the platform's own stalls"), "{host}");
        let net = text_of(&report_with(fixtures::stalls(5_000)));
        assert!(
            net.contains("over 10 times the platform's own stalls (hiccup p99 103 us): the network or the far end"),
            "{net}"
        );
    }

    /// Probes this host's own egress qdisc dropped: the counters line and the split name the
    /// qdisc's drops beside SndbufErrors, the larger counted (they overlap); a report of
    /// listen, which does not run on the sender, says it cannot see the sender's drops.
    #[test]
    fn this_hosts_qdisc_drops_are_named_in_ping_and_not_claimed_by_listen() {
        let before = Snapshot { udp: Some(Udp::default()), qdisc_drops: Some(7), ..Snapshot::default() };
        let after = Snapshot {
            udp: Some(Udp { sndbuf_errors: 3, ..Udp::default() }),
            qdisc_drops: Some(7 + 4_831),
            ..Snapshot::default()
        };
        let delta = before.delta(&after);
        let mut r = fixtures::ping(&[1_000]);
        r.attribution =
            Some(Attribution { loss: Some(delta.split_loss(4_831)), counters: Some(delta), ..Attribution::default() });
        let t = text_of(&r);
        assert!(t.contains("SndbufErrors +3, NoPorts +0; egress qdisc drops +4831"), "{t}");
        assert!(
            t.contains(
                "of 4831 probes lost: 4831 never left this host (dropped after the send: SndbufErrors +3, egress qdisc \
                 drops +4,831: the larger, they overlap), 0 refused"
            ),
            "{t}"
        );
        assert!(t.contains("0 elsewhere on the path or at the far end"), "{t}");
        let mut l = fixtures::stream(100, 90);
        if let Results::Stream(s) = &mut l.results {
            s.listen = Some(wirebench_core::report::ListenTotals::default());
        }
        l.attribution = r.attribution.clone();
        let t = text_of(&l);
        assert!(t.contains("of 4831 missing: the sender's own drops not seen (this host did not send"), "{t}");
    }

    #[test]
    fn counters_and_the_loss_split_are_labelled_host_wide() {
        let before = Snapshot { udp: Some(Udp::default()), ..Snapshot::default() };
        let after =
            Snapshot { udp: Some(Udp { in_errors: 3, rcvbuf_errors: 3, ..Udp::default() }), ..Snapshot::default() };
        let delta = before.delta(&after);
        let mut r = fixtures::ping(&[1_000]);
        r.attribution = Some(Attribution {
            loss: Some(delta.split_loss(5)),
            counters: Some(delta),
            notes: vec!["TX timestamps unavailable".into()],
            tcp_info: Some(TcpInfo { srtt_us: 48, rttvar_us: 12, retransmits: 2, lost: 1, reordering: 3 }),
            ..Attribution::default()
        });
        let t = text_of(&r);
        assert!(t.contains("kernel counters during the run (host-wide): Udp InErrors +3 (RcvbufErrors +3)"), "{t}");
        assert!(
            t.contains("of 5 probes lost: 0 never left this host (dropped after the send: SndbufErrors +0), 3 refused"),
            "{t}"
        );
        assert!(t.contains("3 refused by a socket on this host"), "{t}");
        // the 16 MiB every stream and listen socket asks for (as stream's split and doctor
        // say), not 8 MiB, which would still cap them
        assert!(t.contains("raise the receive buffer, sysctl -w net.core.rmem_max=16777216)"), "{t}");
        assert!(t.contains("2 elsewhere on the path or at the far end (counters are host-wide)"), "{t}");
        let over = LossSplit::of(2, 0, 3, 0);
        assert_eq!(over.excess, 1);
        assert!(
            loss_line("missing", &over, None)
                .ends_with("(counters are host-wide; they rose 1 beyond what this run lost)")
        );
        assert!(t.contains("note: TX timestamps unavailable"), "{t}");
        // one lost probe is one probe, not "1 probes"
        r.attribution.as_mut().unwrap().loss = Some(before.delta(&before).split_loss(1));
        let one = text_of(&r);
        assert!(one.contains("\nof 1 probe lost: 0 never left this host"), "{one}");
        assert!(
            t.contains("TCP_INFO (the probe connection at the end of the run): kernel srtt 48 us (rttvar 12 us), 2 retransmits, 1 lost, reordering 3"),
            "{t}"
        );
    }

    #[test]
    fn the_kernel_line_reads_percentiles_the_summary_does_not_list() {
        // `ping --percentiles 50,96,99.99`: the views' summaries have no p99 (the fixture's
        // list only p50), and the line once printed "p99 0.00 us" under a p50 of microseconds.
        let rtt = fixtures::view(20_000, 100);
        let mut stack = fixtures::view(10_000, 100);
        let k = fixtures::kernel(Some(stack.clone()), None);
        // p99 of 10, 11, ... 109 us is the 99th sample, 108 us (108,031 ns: its highest
        // equivalent at 3 significant digits)
        let line = kernel_line(&k, &rtt);
        assert!(line.contains("RTT p50 70.0 us, of which 10.0 us is"), "{line}");
        assert!(line.ends_with("stack to stack p50 60.0 us (p99 108 us, max 109 us)"), "{line}");
        // and without p50 in the summaries either
        stack.summary.percentiles.clear();
        let mut rtt = rtt;
        rtt.summary.percentiles.clear();
        let k = KernelResult { stack: Some(stack), ..k };
        let line = kernel_line(&k, &rtt);
        assert!(line.contains("RTT p50 69.1 us, of which 10.0 us is"), "{line}");
        assert!(line.ends_with("stack to stack p50 59.0 us (p99 108 us, max 109 us)"), "{line}");
    }
}
