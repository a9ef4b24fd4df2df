//! Terminal text of a stream run: the summary `wirebench stream` prints at the end, the
//! per-interval rows of each receiver (iperf's report), the search trials and the size sweep;
//! and the interval rows as TSV (`stream --log`).

use std::io::{self, Write};

use wirebench_core::report::{
    IntervalRow, Outcome, ReceiverResult, Report, Results, SearchEnding, SearchResult, SenderResult, StreamDirection,
    StreamResults, SweepRow, Transport, TrialRow, owed_of,
};

use crate::screen::Detail;
use crate::words::{bits_words, rate_words, secs_words};

/// Loss of a receiver in percent: `1 - received / sent` (0 when nothing was sent).
pub fn loss_percent(r: &ReceiverResult) -> f64 {
    100.0 * r.loss()
}

/// The first line: what was run, and for a search or a sweep what the summary reports.
fn heading(out: &mut dyn Write, s: &StreamResults) -> io::Result<()> {
    let rate = |r: Option<f64>| r.map_or_else(|| "max".to_owned(), |r| format!("{} per publisher", rate_words(r)));
    if let Some(search) = &s.search {
        writeln!(
            out,
            "stream {} {}: highest rate with loss <= {:.4}%, {}-byte messages, {} publisher(s), from {}",
            s.proto,
            s.direction,
            search.loss_target * 100.0,
            s.size,
            s.publishers,
            rate(s.rate_per_s).replace("max", "flat out")
        )
    } else if !s.sweep.is_empty() {
        let sizes: Vec<String> = s.sweep.iter().map(|r| r.size.to_string()).collect();
        writeln!(
            out,
            "stream {} {}: size sweep over {} bytes, {} publisher(s), rate {}",
            s.proto,
            s.direction,
            sizes.join(", "),
            s.publishers,
            rate(s.rate_per_s)
        )
    } else {
        writeln!(
            out,
            "stream {} {}: {}-byte messages, {} publisher(s), rate {}",
            s.proto,
            s.direction,
            s.size,
            s.publishers,
            rate(s.rate_per_s)
        )
    }
}

/// What a search found, in words that say how it ended.
fn search_line(out: &mut dyn Write, search: &SearchResult) -> io::Result<()> {
    let n = search.trials.len();
    let best = format!("{} {}", rate_words(search.best_per_s), bits_words(search.best_bits_per_s));
    let target = search.loss_target * 100.0;
    match search.ending {
        SearchEnding::TopPassed => writeln!(
            out,
            "highest rate with loss <= {target:.4}%: {best} (the first trial, at the top, passed: the sender, not the path, is the limit)"
        ),
        SearchEnding::SenderLimited => writeln!(
            out,
            "highest rate with loss <= {target:.4}%: {best}, all the sender could send ({n} trials; it fell short of the rate asked: the sender, not the path, is the limit)"
        ),
        SearchEnding::NothingPassed => writeln!(
            out,
            "highest rate with loss <= {target:.4}%: none: every rate down to {} lost more ({n} trials)",
            rate_words(search.floor_per_s)
        ),
        SearchEnding::Stopped => {
            writeln!(out, "search stopped after {n} trials: the best passing rate so far is {best}")
        }
        SearchEnding::Found | SearchEnding::Unrecorded => {
            // the lowest failure above the answer: did it lose, or only build a queue?
            let offered = |t: &TrialRow| t.rate_per_s.unwrap_or(t.sent_per_s);
            let next = search
                .trials
                .iter()
                .filter(|t| !t.passed && offered(t) > search.best_per_s)
                .min_by(|a, b| offered(a).total_cmp(&offered(b)));
            let why = match next {
                Some(t) if t.queue && t.loss <= search.loss_target => format!(
                    "the next rate up lost no more, but the one-way delay rose {} in it: a queue built",
                    rise_words(t.delay_rise_ns)
                ),
                _ => "the next rate up lost more".to_owned(),
            };
            writeln!(out, "highest rate with loss <= {target:.4}%: {best} ({n} trials; {why})")
        }
    }
}

/// The end-of-run summary, every line whole (`-v`, and the HTML page).
pub fn summary(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    summary_of(out, report, Detail::Verbose)
}

/// The end-of-run summary at a level of detail: `-q` is the receivers' lines (one per
/// receiver: what arrived of what was sent) and any problem; the default view leaves out
/// the generator's health when it kept its rate, the receivers' wake-up times, how rates
/// are reckoned and the per-interval loss splits (`-v` prints them), and folds its lines
/// to the screen's width.
pub fn summary_at(out: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    match detail {
        Detail::Verbose => summary_of(out, report, detail),
        Detail::Normal => crate::screen::wrapped(out, |w| summary_of(w, report, detail)),
        Detail::Quiet => {
            let Results::Stream(s) = &report.results else { return Ok(()) };
            if let Some(search) = &s.search {
                return search_line(out, search);
            }
            for r in &s.receivers {
                writeln!(out, "{}", receiver_headline(r))?;
            }
            match &s.sender {
                // no receiver asked (--no-control): what was sent is the run's one line
                Some(t) if s.receivers.is_empty() => writeln!(out, "{}", sender_line(s, t)),
                _ => Ok(()),
            }
        }
    }
}

fn summary_of(out: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    let Results::Stream(s) = &report.results else { return Ok(()) };
    let all = detail.verbose();
    heading(out, s)?;
    if let Some(search) = &s.search {
        search_line(out, search)?;
        if let Some(t) = search.trials.last() {
            writeln!(
                out,
                "the lines below are the last trial (at {})",
                t.rate_per_s.map_or_else(|| "flat out".to_owned(), rate_words)
            )?;
        }
    }
    if let Some(last) = s.sweep.last() {
        let best = s.sweep.iter().max_by(|a, b| a.bits_per_s.total_cmp(&b.bits_per_s));
        if let Some(b) = best {
            writeln!(out, "size sweep: most throughput {} at {} bytes", bits_words(b.bits_per_s), b.size)?;
        }
        writeln!(out, "the lines below are the last size ({} bytes)", last.size)?;
    }
    if let Some(t) = &s.sender {
        writeln!(out, "{}", sender_line(s, t))?;
    }
    if let Some(g) = s.generator.as_ref().filter(|g| all || crate::generator::missed(g)) {
        writeln!(out, "{}", crate::generator::line(g))?;
    }
    receivers_part(out, report, s, detail)?;
    if let Some(w) = s.listen.and_then(|l| l.wake).filter(|_| all) {
        writeln!(out, "{}", crate::stream_wake::words("listen", &w))?;
    }
    if let Some(r) =
        s.receivers.iter().find(|r| r.direction != wirebench_core::report::StreamDirection::Listen).filter(|_| all)
    {
        if report.config.get("merged_from").is_some() {
            writeln!(
                out,
                "rates: merged: each generator's rate over its own sending time, summed (the time shown is the count over that sum)"
            )?;
        } else if r.over_receive_time() {
            writeln!(
                out,
                "rates: received payload per second of the receiving time (each receiver's first to last arrival, on its clock; a TCP sender's last write returns while its socket buffers and the path's queues still hold what it wrote)"
            )?;
        } else if r.over_send_time() {
            writeln!(
                out,
                "rates: per second of the sending time (first send to the end of the last, on the sender's clock: {} for {})",
                if r.direction == wirebench_core::report::StreamDirection::Reverse {
                    "serve's"
                } else {
                    "this client's"
                },
                r.addr
            )?;
        } else {
            writeln!(out, "rates: per second of each receiver's first to last arrival (no sending time recorded)")?;
        }
    }
    for w in &s.warnings {
        writeln!(out, "warning: {w}")?;
    }
    match report.outcome {
        Outcome::Interrupted => writeln!(out, "interrupted: results so far"),
        Outcome::PeerSilent => writeln!(out, "a receiver went away: results so far"),
        Outcome::Completed => Ok(()),
    }
}

/// `sender: sent 20000 messages in 2.000 s: 10.0k msg/s 16.0 Mbit/s (UDP GSO)`.
fn sender_line(s: &StreamResults, t: &SenderResult) -> String {
    // TCP: a write returns once the socket buffer holds the bytes, long before they arrive
    let (verb, what) = if s.proto == Transport::Tcp { ("wrote", "write rate ") } else { ("sent", "") };
    format!(
        "sender: {verb} {} messages in {}: {what}{} {}{}{}",
        t.messages,
        secs_words(t.send_ns, 3),
        rate_words(t.per_s),
        bits_words(t.bits_per_s),
        if t.gso { " (UDP GSO)" } else { "" },
        t.retransmits.map_or_else(String::new, |r| format!(", {r} TCP retransmits")),
    )
}

/// The receivers' part of the summary, printed whatever rows the run came back with: a
/// row per receiver; a line for each receiver the run owed and has no row of (its serve's
/// results never came); a listen's "nothing arrived"; where the receivers of a run that
/// asked none report. A summary cannot end without saying what its receivers got.
fn receivers_part(out: &mut dyn Write, report: &Report, s: &StreamResults, detail: Detail) -> io::Result<()> {
    let group = report.config.get("group").and_then(serde_json::Value::as_str);
    for r in &s.receivers {
        // the sender's batching and counters are known for this client's own sending (forward)
        let sender =
            if r.direction == wirebench_core::report::StreamDirection::Forward { s.sender.as_ref() } else { None };
        receiver_lines(out, r, sender, group, detail)?;
    }
    if s.listen.is_some() {
        if s.receivers.is_empty() {
            writeln!(out, "{}", listen_heard_nothing(report, s))?;
        }
        return Ok(());
    }
    let (targets, no_control) = owed_of(&report.config);
    if no_control {
        return writeln!(
            out,
            "receivers: none asked (--no-control): each receiver, e.g. `wirebench listen`, reports what arrived there"
        );
    }
    let missing = s.missing_receivers(&targets, no_control);
    // Stopped before anything was sent: nothing was owed yet.
    let never_started = report.outcome == Outcome::Interrupted && s.sender.is_none();
    for addr in &missing {
        if never_started {
            writeln!(out, "{addr}: not started: stopped before serve answered")?;
        } else {
            writeln!(out, "{addr}: no results: its serve's final counts never came, so what it received is unknown")?;
        }
    }
    if s.receivers.is_empty() && missing.is_empty() {
        writeln!(out, "receivers: none in this report")?;
    }
    Ok(())
}

/// The line a listen report at which nothing arrived ends its receivers with (`None` for
/// any other report): what `wirebench listen` prints at its end and `report` prints of it.
pub fn listen_nothing_line(report: &Report) -> Option<String> {
    match &report.results {
        Results::Stream(s) if s.listen_heard_nothing() => Some(listen_heard_nothing(report, s)),
        _ => None,
    }
}

/// `nothing arrived at 0.0.0.0:7879 (joined 239.1.2.3:7879): no stream message in 3.0 s;
/// ...`: a listen that heard no stream message, and what would look like that.
fn listen_heard_nothing(report: &Report, s: &StreamResults) -> String {
    let at = report.config.get("listen").and_then(serde_json::Value::as_str).unwrap_or("the listen address");
    let joined: Vec<&str> = report
        .config
        .get("join")
        .and_then(serde_json::Value::as_array)
        .map(|j| j.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let foreign = s.listen.map_or(0, |l| l.foreign);
    let other =
        if foreign > 0 { format!(" ({foreign} datagrams that were not stream messages)") } else { String::new() };
    let why = if joined.is_empty() {
        "a sender sending to another address or port, or a filter on the way (a firewall)"
    } else {
        "the group coming in on another interface than the one joined (--interface), a sender sending to \
         another group or port, or a filter on the way (a firewall)"
    };
    format!(
        "nothing arrived at {at}{}: no stream message in {}{other}; {why} would each look like this",
        if joined.is_empty() { String::new() } else { format!(" (joined {})", joined.join(", ")) },
        secs_words(report.meta.duration_ns, 1),
    )
}

/// `10.0.0.2:7878: nothing arrived of 2000 sent: ...`, for a receiver that got none of what
/// was sent to it: what would look like that, for a group or a unicast receiver.
fn nothing_arrived_line(r: &ReceiverResult, group: Option<&str>) -> String {
    let why = match (group, r.direction) {
        (Some(g), StreamDirection::Forward) => format!(
            "{g} not heard there: serve joined the group on another interface than the one the stream went out on \
             (serve --interface, stream --interface), no multicast route between them, or a filter on the way"
        ),
        (_, StreamDirection::Reverse) => {
            "a filter on the way back (a firewall here or between), or a route that does not reach this client".into()
        }
        _ => "a filter on the way (a firewall), or a route that does not reach serve's data port".into(),
    };
    format!("{}: nothing arrived of {} sent: {why} would each look like this", r.addr, r.sent)
}

/// A receiver's line, and what its host's kernel and its socket say about the loss.
/// A receiver's headline: `ADDR: received 900 of 1000 sent (100 missing, loss 10.0000%),
/// 900 msg/s 7.2 Mbit/s over 1.000 s`, what `stream -q` prints per receiver.
pub fn receiver_headline(r: &ReceiverResult) -> String {
    let c = &r.total;
    let over = if r.over_receive_time() {
        format!(" over {} of arrival", secs_words(r.recv_ns, 3))
    } else if r.send_ns > 0 {
        format!(" over {}", secs_words(r.send_ns, 3))
    } else {
        String::new()
    };
    format!(
        "{}: received {} of {} sent ({} missing, loss {:.4}%), {} {}{over}",
        r.addr,
        c.received,
        r.sent,
        r.sent.saturating_sub(c.received),
        loss_percent(r),
        rate_words(r.per_s()),
        bits_words(r.bits_per_s()),
    )
}

fn receiver_lines(
    out: &mut dyn Write,
    r: &ReceiverResult,
    sender: Option<&SenderResult>,
    group: Option<&str>,
    detail: Detail,
) -> io::Result<()> {
    let c = &r.total;
    let all = detail.verbose();
    // the receiver's rate and bits on a line of their own when the headline runs long
    let head = receiver_headline(r);
    match head.split_once("%), ").filter(|_| !all && head.chars().count() > crate::screen::WIDTH) {
        Some((counts, rates)) => writeln!(out, "{counts}%)\n  {rates}")?,
        None => writeln!(out, "{head}")?,
    }
    let offset = if all || c.out_of_order > 0 { format!(" (avg offset {:.1})", c.avg_offset()) } else { String::new() };
    let gaps = if all || c.gaps > 0 {
        format!(" (mean {:.1} msgs, {:.3} ms)", c.mean_gap(), c.mean_gap_ns() / 1e6)
    } else {
        String::new()
    };
    writeln!(
        out,
        "  out of order {}{offset}, dup {}, gaps {}{gaps}, jitter {:.2} us",
        c.out_of_order,
        c.duplicates,
        c.gaps,
        c.jitter_ns / 1000.0
    )?;
    if r.nothing_arrived() {
        writeln!(out, "{}", nothing_arrived_line(r, group))?;
    }
    let per_interval = if all { crate::stream_loss::interval_lines(r) } else { Vec::new() };
    for line in crate::stream_loss::lines(r, sender).into_iter().chain(per_interval) {
        writeln!(out, "{line}")?;
    }
    if let Some(line) = crate::stream_wake::line(r).filter(|_| all) {
        writeln!(out, "{line}")?;
    }
    if let Some(line) = queue_line(r, sender) {
        writeln!(out, "{line}")?;
    }
    if r.foreign > 0 {
        writeln!(out, "{}: {} datagrams at the receiver were not this session's stream messages", r.addr, r.foreign)?;
    }
    Ok(())
}

/// `ADDR: one-way delay rose 8.12 ms over 1.61 s of the sending (...): a queue built on the
/// path`, when one did (`ratesearch::queue_built`); and when this client's sender fell
/// behind by about as long, that its catch-up burst alone queues that much.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn queue_line(r: &ReceiverResult, sender: Option<&SenderResult>) -> Option<String> {
    let d = r.total.delay?;
    if !wirebench_core::ratesearch::queue_built(&d) {
        return None;
    }
    let slip = if r.direction == wirebench_core::report::StreamDirection::Reverse {
        0
    } else {
        sender.map_or(0, |s| s.slip_max_ns)
    };
    let burst = if i64::try_from(slip).unwrap_or(i64::MAX) * 2 >= d.rise_ns {
        format!(
            " (or the sender's catch-up did: it fell up to {:.2} ms behind and sent what it owed at once)",
            slip as f64 / 1e6
        )
    } else {
        String::new()
    };
    Some(format!(
        "{}: one-way delay rose {:.2} ms over {} of the sending (lowest of its last quarter against its first): \
         a queue built on the path, the rate is above what it holds{burst}",
        r.addr,
        d.rise_ns as f64 / 1e6,
        secs_words(d.over_ns, 2)
    ))
}

/// One line per search trial (`loss_target`: the search's, a share).
pub fn trial(out: &mut dyn Write, t: &TrialRow, size: usize, loss_target: f64) -> io::Result<()> {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let bits = |r: f64| bits_words(r * 8.0 * size as f64);
    writeln!(
        out,
        "  trial at {:>14} ({:>14}): sent {:>10} received {:>10} loss {:>8.4}%  delay {:>10}  {}",
        t.rate_per_s.map_or_else(|| "max".to_owned(), rate_words),
        t.rate_per_s.map_or_else(|| bits(t.sent_per_s), bits),
        t.sent,
        t.received,
        t.loss * 100.0,
        rise_words(t.delay_rise_ns),
        verdict_words(t, loss_target)
    )
}

/// A rise of the one-way delay: `+4.12 ms`, `-0.01 ms`, or `-` when not measured.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn rise_words(ns: Option<i64>) -> String {
    ns.map_or_else(|| "-".to_owned(), |v| format!("{:+.2} ms", v as f64 / 1e6))
}

/// A trial's verdict: `pass`, `FAIL`, or `FAIL (queue)` when only a queue building failed
/// it (its loss was within `loss_target`).
pub fn verdict_words(t: &TrialRow, loss_target: f64) -> &'static str {
    match (t.passed, t.queue && t.loss <= loss_target) {
        (true, _) => "pass",
        (false, true) => "FAIL (queue)",
        (false, false) => "FAIL",
    }
}

/// One line per swept size.
pub fn sweep_row(out: &mut dyn Write, r: &SweepRow) -> io::Result<()> {
    writeln!(
        out,
        "  size {:>6} B: {:>14}  {:>14}  loss {:.4}%",
        r.size,
        rate_words(r.per_s),
        bits_words(r.bits_per_s),
        r.loss * 100.0
    )
}

/// One interval of a receiver as seen on its own: length (ns), messages/s, bits/s, loss %.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalStats {
    /// End of the interval, seconds since the run began.
    pub end_s: f64,
    /// Messages per second received in it.
    pub per_s: f64,
    /// Payload bits per second received in it.
    pub bits_per_s: f64,
    /// Missing as a share of expected in it, percent.
    pub loss_percent: f64,
}

/// The per-interval rates and loss of a receiver's rows.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn intervals(rows: &[IntervalRow]) -> Vec<IntervalStats> {
    let mut prev = 0;
    rows.iter()
        .map(|row| {
            let span = row.at_ns.saturating_sub(prev);
            prev = row.at_ns;
            let c = &row.counts;
            let expected = c.received + c.missing();
            IntervalStats {
                end_s: row.at_ns as f64 / 1e9,
                per_s: c.per_sec(span),
                bits_per_s: c.bits_per_sec(span),
                loss_percent: if expected == 0 { 0.0 } else { 100.0 * c.missing() as f64 / expected as f64 },
            }
        })
        .collect()
}

/// The report of a saved stream run: the summary, then each receiver's intervals, the
/// search trials and the sweep.
pub fn stream(out: &mut dyn Write, report: &Report, detail: Detail) -> io::Result<()> {
    let Results::Stream(s) = &report.results else {
        return writeln!(out, "not a stream report");
    };
    summary_at(out, report, detail)?;
    if !detail.verbose() {
        return Ok(());
    }
    for r in s.receivers.iter().filter(|r| !r.intervals.is_empty()) {
        writeln!(out, "\nintervals at {} ({}):", r.addr, r.direction)?;
        writeln!(out, "{:>9} {:>16} {:>14} {:>9}", "seconds", "received", "throughput", "loss")?;
        for i in intervals(&r.intervals) {
            writeln!(
                out,
                "{:>9.3} {:>16} {:>14} {:>8.3}%",
                i.end_s,
                rate_words(i.per_s),
                bits_words(i.bits_per_s),
                i.loss_percent
            )?;
        }
    }
    if let Some(search) = &s.search {
        writeln!(out, "\nsearch trials (loss target {:.4}%):", search.loss_target * 100.0)?;
        for t in &search.trials {
            trial(out, t, s.size, search.loss_target)?;
        }
    }
    if !s.sweep.is_empty() {
        writeln!(out, "\nsize sweep:")?;
        for r in &s.sweep {
            sweep_row(out, r)?;
        }
    }
    Ok(())
}

/// Interval rows as TSV: seconds, receiver, messages/s, Mbit/s, received, missing, out of
/// order, duplicates, jitter µs.
pub fn tsv(w: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Results::Stream(s) = &report.results else { return Ok(()) };
    writeln!(w, "seconds\treceiver\tmsgs_per_s\tmbit_per_s\treceived\tmissing\tout_of_order\tduplicates\tjitter_us")?;
    for r in &s.receivers {
        let mut prev_at = 0;
        for row in &r.intervals {
            let span = row.at_ns - prev_at;
            prev_at = row.at_ns;
            let c = &row.counts;
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let secs = row.at_ns as f64 / 1e9;
            writeln!(
                w,
                "{secs:.3}\t{}\t{:.1}\t{:.3}\t{}\t{}\t{}\t{}\t{:.2}",
                r.addr,
                c.per_sec(span),
                c.bits_per_sec(span) / 1e6,
                c.received,
                c.missing(),
                c.out_of_order,
                c.duplicates,
                c.jitter_ns / 1000.0
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wirebench_core::stream::StreamCounts;

    use super::*;
    use crate::fixtures;

    #[test]
    fn report_of_a_saved_stream() {
        let mut out = Vec::new();
        stream(&mut out, &fixtures::stream(1000, 900), Detail::Verbose).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The fixture has a search and a sweep: the summary says what it reports.
        assert_eq!(
            lines[0],
            "stream udp forward: highest rate with loss <= 0.0000%, 1000-byte messages, 1 publisher(s), from flat out"
        );
        assert_eq!(
            lines[1],
            "highest rate with loss <= 0.0000%: 1.0k msg/s 8.0 Mbit/s (2 trials; the next rate up lost more)"
        );
        assert_eq!(lines[2], "the lines below are the last trial (at 1.0k msg/s)");
        assert_eq!(lines[3], "size sweep: most throughput 4.10 Gbit/s at 1024 bytes");
        assert_eq!(lines[4], "the lines below are the last size (1024 bytes)");
        assert!(
            lines[5].starts_with(
                "127.0.0.1:7878: received 900 of 1000 sent (100 missing, loss 10.0000%), 900 msg/s 7.2 Mbit/s over 1.000 s"
            ),
            "{text}"
        );
        assert_eq!(
            lines[6],
            "  out of order 0 (avg offset 0.0), dup 0, gaps 0 (mean 0.0 msgs, 0.000 ms), jitter 0.00 us"
        );
        assert!(lines[7].starts_with("rates: per second of the sending time"), "{text}");
        let at = lines.iter().position(|l| *l == "intervals at 127.0.0.1:7878 (forward):").expect(&text);
        assert_eq!(lines[at + 1].split_whitespace().collect::<Vec<_>>(), ["seconds", "received", "throughput", "loss"]);
        assert_eq!(
            lines[at + 2].split_whitespace().collect::<Vec<_>>(),
            ["0.500", "900", "msg/s", "7.2", "Mbit/s", "10.000%"]
        );
        assert!(text.contains("search trials (loss target 0.0000%):"));
        assert!(lines.iter().any(|l| l.ends_with("FAIL")) && lines.iter().any(|l| l.ends_with("pass")));
        assert!(text.contains("size sweep:\n  size     64 B:"), "{text}");
    }

    fn text_of(r: &Report) -> String {
        let mut out = Vec::new();
        summary(&mut out, r).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn receiver_mut(r: &mut Report) -> &mut ReceiverResult {
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        s.search = None;
        s.sweep.clear();
        &mut s.receivers[0]
    }

    /// The suite's "stream-udp-64" row: 64 of 10,031,424 received within 37 µs of each
    /// other. Over the sending time that is 64 a second, not the 1.7M a second the
    /// receiver's own first-to-last window made of it.
    #[test]
    fn near_total_loss_is_not_a_high_rate() {
        let mut r = fixtures::stream(10_031_424, 64);
        let x = receiver_mut(&mut r);
        x.total.first_ns = 1_000;
        x.total.last_ns = 38_000;
        x.send_ns = 1_000_000_000;
        assert!((x.per_s() - 64.0).abs() < 1e-9, "{}", x.per_s());
        let text = text_of(&r);
        assert!(text.contains("64 msg/s 512.0 kbit/s over 1.000 s"), "{text}");
        assert!(text.contains("rates: per second of the sending time"), "{text}");
    }

    /// TCP: the sender's writes took 1 s, the bytes 1.25 s to arrive (the rest sat in its
    /// socket buffers). The receiver's rate is over the 1.25 s, the sender's line is its
    /// write rate, and the rates line says which time it is.
    #[test]
    fn tcp_rates_are_over_the_receiving_time_and_the_sender_writes() {
        let mut r = fixtures::stream(1000, 1000);
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        s.proto = Transport::Tcp;
        s.sender = Some(wirebench_core::report::SenderResult {
            messages: 1000,
            bytes: 1_000_000,
            per_s: 1000.0,
            bits_per_s: 8e6,
            send_ns: 1_000_000_000,
            slip_mean_ns: 0,
            slip_max_ns: 0,
            gso: false,
            retransmits: Some(0),
            sndbuf_errors: None,
            qdisc_drops: None,
        });
        let x = receiver_mut(&mut r);
        x.recv_ns = 1_250_000_000;
        assert!((x.bits_per_s() - 6.4e6).abs() < 1e-3, "{}", x.bits_per_s());
        let text = text_of(&r);
        assert!(text.contains("sender: wrote 1000 messages in 1.000 s: write rate 1.0k msg/s 8.0 Mbit/s"), "{text}");
        assert!(text.contains("800 msg/s 6.4 Mbit/s over 1.250 s of arrival"), "{text}");
        assert!(text.contains("rates: received payload per second of the receiving time"), "{text}");
    }

    #[test]
    fn the_receiving_hosts_drops_are_said() {
        let mut r = fixtures::stream(1000, 936);
        let x = receiver_mut(&mut r);
        let snmp = |v: i64| {
            let mut k = wirebench_core::snmp::Snmp::default();
            k.0.entry("Udp".into()).or_default().insert("RcvbufErrors".into(), v);
            Some(k)
        };
        x.kernel = snmp(1);
        x.attribute(None, &[]);
        let text = text_of(&r);
        assert!(
            text.contains(
                ": of 64 missing, 1 dropped by the receiving host's socket buffers (Udp InErrors +1, RcvbufErrors +1"
            ),
            "{text}"
        );
        assert!(text.contains("63 elsewhere on the path"), "{text}");
        assert!(text.contains("counters are host-wide"), "{text}");
        let x = receiver_mut(&mut r);
        x.kernel = snmp(0);
        x.attribute(None, &[]);
        assert!(text_of(&r).contains(": of 64 missing, 0 dropped by the receiving host's socket buffers"));
        // the same numbers in the JSON
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["results"]["receivers"][0]["loss_split"]["elsewhere"], 64);
        // per interval: the rows' splits in the JSON add up to it, and each row that lost is
        // a line of the text and of the HTML page
        let rows = v["results"]["receivers"][0]["intervals"].as_array().unwrap();
        let part = |f: &str| rows.iter().map(|x| x["loss_split"][f].as_u64().unwrap()).sum::<u64>();
        assert_eq!((part("missing"), part("elsewhere"), part("socket")), (64, 64, 0));
        let lines = crate::stream_loss::interval_lines(receiver_mut(&mut r));
        assert!(!lines.is_empty());
        // (the page shows the same lines: `html::tests`)
        let text = text_of(&r);
        for l in &lines {
            assert!(text.contains(l.as_str()), "{l}\n{text}");
        }
        receiver_mut(&mut r).foreign = 7;
        assert!(text_of(&r).contains("7 datagrams at the receiver were not this session's stream messages"));
    }

    #[test]
    fn the_receivers_wake_up_delay_is_the_same_in_text_and_json() {
        let mut r = fixtures::stream(1000, 1000);
        let w = wirebench_core::stream::wake::WakeDelay {
            available: true,
            stamped: 1000,
            p50_ns: 8_190,
            p99_ns: 61_400,
            max_ns: 2_000_000,
            ..Default::default()
        };
        receiver_mut(&mut r).wake = Some(w);
        let line = crate::stream_wake::line(receiver_mut(&mut r)).unwrap();
        assert!(line.contains("p50 8.19 us, p99 61.4 us, max 2000 us"), "{line}");
        assert!(text_of(&r).contains(&line));
        let v = serde_json::to_value(&r).unwrap();
        let j = &v["results"]["receivers"][0]["wake"];
        assert_eq!(
            (j["p50_ns"].as_u64(), j["p99_ns"].as_u64(), j["max_ns"].as_u64()),
            (Some(8_190), Some(61_400), Some(2_000_000))
        );
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_search_says_how_it_ended() {
        let mut r = fixtures::stream(1000, 900);
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        s.sweep.clear();
        let line = |r: &Report| text_of(r).lines().nth(1).unwrap().to_owned();
        assert!(line(&r).ends_with("(2 trials; the next rate up lost more)"), "{}", line(&r));
        for (ending, want) in [
            (SearchEnding::TopPassed, "the first trial, at the top, passed"),
            (SearchEnding::SenderLimited, "all the sender could send"),
            (SearchEnding::NothingPassed, "none: every rate down to 2 msg/s lost more (2 trials)"),
            (SearchEnding::Stopped, "search stopped after 2 trials"),
        ] {
            let Results::Stream(s) = &mut r.results else { unreachable!() };
            s.search.as_mut().unwrap().ending = ending;
            assert!(line(&r).contains(want), "{ending}: {}", line(&r));
        }
        let text = text_of(&r);
        assert!(text.starts_with("stream udp forward: highest rate with loss <= 0.0000%, 1000-byte messages, 1 publisher(s), from flat out\n"), "{text}");
        assert!(text.contains("the lines below are the last trial (at 1.0k msg/s)"), "{text}");
    }

    /// A plain run to `targets` (the config `wirebench stream` writes), whose rows are the
    /// fixture's one receiver at 127.0.0.1:7878.
    fn run_to(targets: &[&str], extra: &serde_json::Value) -> Report {
        let mut r = fixtures::stream(1000, 1000);
        receiver_mut(&mut r);
        r.config = serde_json::json!({ "targets": targets, "no_control": false, "group": null });
        if let (Some(c), Some(e)) = (r.config.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        r
    }

    fn rows_mut(r: &mut Report) -> &mut Vec<ReceiverResult> {
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        &mut s.receivers
    }

    /// A run whose serve's results never came: a row short, the summary says which
    /// receiver and that what it got is unknown (before, it printed nothing there), and
    /// the report counts as failed (exit 1).
    #[test]
    fn a_receiver_without_results_is_said_never_left_out() {
        let mut r = run_to(&["127.0.0.1:7878", "127.0.0.2:7878"], &serde_json::json!({}));
        let t = text_of(&r);
        assert!(t.contains("127.0.0.1:7878: received 1000 of 1000 sent"), "{t}");
        assert!(
            t.contains(
                "127.0.0.2:7878: no results: its serve's final counts never came, so what it received is unknown"
            ),
            "{t}"
        );
        assert!(wirebench_core::report::receivers_failed(&r));
        rows_mut(&mut r).clear();
        let t = text_of(&r);
        assert_eq!(t.matches(": no results: ").count(), 2, "{t}");
        // both rows there: nothing more said, nothing failed
        let ok = run_to(&["127.0.0.1:7878"], &serde_json::json!({}));
        assert!(!text_of(&ok).contains("no results") && !wirebench_core::report::receivers_failed(&ok));
    }

    /// `--no-control`: the run asked no receiver; the summary says where they report.
    #[test]
    fn a_run_that_asked_no_receiver_says_where_they_report() {
        let mut r = run_to(&["239.255.0.1:7879"], &serde_json::json!({ "no_control": true }));
        rows_mut(&mut r).clear();
        let t = text_of(&r);
        assert!(
            t.contains("receivers: none asked (--no-control): each receiver, e.g. `wirebench listen`, reports what arrived there"),
            "{t}"
        );
        assert!(!wirebench_core::report::receivers_failed(&r));
        // a report with no targets recorded and no rows still says so
        let mut bare = fixtures::stream(1000, 1000);
        rows_mut(&mut bare).clear();
        assert!(text_of(&bare).contains("receivers: none in this report"), "{}", text_of(&bare));
    }

    /// A same-host multicast stream whose serve joined on another interface: 100 % loss,
    /// all of it "elsewhere on the path". The line under the receiver says what looks like
    /// that, and the run fails (exit 1).
    #[test]
    fn a_receiver_that_heard_nothing_gets_the_reasons() {
        let mut r = run_to(&["127.0.0.1:7878"], &serde_json::json!({ "group": "239.255.77.1:18102" }));
        let x = &mut rows_mut(&mut r)[0];
        x.total = StreamCounts::default();
        x.intervals.clear();
        let t = text_of(&r);
        let lines: Vec<&str> = t.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("127.0.0.1:7878: received 0 of 1000 sent")).expect(&t);
        assert!(lines[at + 1].starts_with("  out of order 0"), "{t}");
        assert_eq!(
            lines[at + 2],
            "127.0.0.1:7878: nothing arrived of 1000 sent: 239.255.77.1:18102 not heard there: serve joined the group on \
             another interface than the one the stream went out on (serve --interface, stream --interface), no \
             multicast route between them, or a filter on the way would each look like this"
        );
        assert!(wirebench_core::report::receivers_failed(&r));
        r.config["group"] = serde_json::Value::Null;
        assert!(text_of(&r).contains("nothing arrived of 1000 sent: a filter on the way (a firewall), or a route"));
    }

    /// A listen at which nothing arrived says so, and what would look like that.
    #[test]
    fn a_listen_that_heard_nothing_says_so() {
        let mut r = fixtures::stream(0, 0);
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        (s.direction, s.search, s.listen) =
            (StreamDirection::Listen, None, Some(wirebench_core::report::ListenTotals::default()));
        s.sweep.clear();
        s.receivers.clear();
        r.config = serde_json::json!({ "listen": "0.0.0.0:7879", "join": ["239.1.2.3:7879"] });
        r.meta.duration_ns = 3_000_000_000;
        let t = text_of(&r);
        assert!(
            t.contains(
                "nothing arrived at 0.0.0.0:7879 (joined 239.1.2.3:7879): no stream message in 3.0 s; the group coming in \
                 on another interface than the one joined (--interface), a sender sending to another group or port, or \
                 a filter on the way (a firewall) would each look like this"
            ),
            "{t}"
        );
        assert!(wirebench_core::report::receivers_failed(&r));
    }

    /// A trial that lost nothing but built a queue failed: its line, the search's line and
    /// the JSON say so (the HTML table too: `html::tests`) with the same rise; a run whose delay rose beyond the
    /// bar says so under its receiver.
    #[test]
    fn a_trial_failed_by_its_queue_says_so_in_text_and_json() {
        let mut r = fixtures::stream(1000, 1000);
        let Results::Stream(s) = &mut r.results else { unreachable!() };
        s.sweep.clear();
        let search = s.search.as_mut().unwrap();
        search.trials[0] = TrialRow { loss: 0.0, queue: true, delay_rise_ns: Some(5_120_000), ..search.trials[0] };
        search.trials[1].delay_rise_ns = Some(-20_000);
        let text = text_of(&r);
        assert!(
            text.lines().nth(1).unwrap().ends_with(
                "(2 trials; the next rate up lost no more, but the one-way delay rose +5.12 ms in it: a queue built)"
            ),
            "{text}"
        );
        let Results::Stream(s) = &r.results else { unreachable!() };
        let mut lines = Vec::new();
        for t in &s.search.as_ref().unwrap().trials {
            trial(&mut lines, t, 1000, 0.0).unwrap();
        }
        let lost = TrialRow { loss: 0.01, ..s.search.as_ref().unwrap().trials[0] };
        assert_eq!(verdict_words(&lost, 0.0), "FAIL", "it lost too: no '(queue)'");
        let lines = String::from_utf8(lines).unwrap();
        assert!(lines.contains("loss   0.0000%  delay   +5.12 ms  FAIL (queue)\n"), "{lines}");
        assert!(lines.contains("loss   0.0000%  delay   -0.02 ms  pass\n"), "{lines}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["results"]["search"]["trials"][0]["delay_rise_ns"], 5_120_000);
        assert_eq!(v["results"]["search"]["trials"][0]["queue"], true);
        // a receiver whose delay rose 8 ms over 1.6 s: a queue built; 1 ms: none
        let rx = receiver_mut(&mut r);
        rx.total.delay = Some(wirebench_core::stream::delay::DelayRise { rise_ns: 8_000_000, over_ns: 1_600_000_000 });
        assert!(
            text_of(&r).contains(
                "127.0.0.1:7878: one-way delay rose 8.00 ms over 1.60 s of the sending (lowest of its last quarter against \
                 its first): a queue built on the path, the rate is above what it holds\n"
            ),
            "{}",
            text_of(&r)
        );
        // a sender that fell 6 ms behind and caught up: that alone queues about as long
        let mut snd = SenderResult {
            messages: 1,
            bytes: 1,
            per_s: 0.0,
            bits_per_s: 0.0,
            send_ns: 1,
            slip_mean_ns: 0,
            slip_max_ns: 6_000_000,
            gso: true,
            retransmits: None,
            sndbuf_errors: None,
            qdisc_drops: None,
        };
        let line = queue_line(receiver_mut(&mut r), Some(&snd)).unwrap();
        assert!(
            line.ends_with(
                "(or the sender's catch-up did: it fell up to 6.00 ms behind and sent what it owed at once)"
            )
        );
        snd.slip_max_ns = 3_000_000;
        assert!(queue_line(receiver_mut(&mut r), Some(&snd)).unwrap().ends_with("the rate is above what it holds"));
        receiver_mut(&mut r).total.delay =
            Some(wirebench_core::stream::delay::DelayRise { rise_ns: 1_000_000, over_ns: 1_600_000_000 });
        assert!(!text_of(&r).contains("one-way delay rose"));
    }
}
