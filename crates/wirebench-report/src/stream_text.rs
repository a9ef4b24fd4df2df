//! Terminal text of a stream run: the summary `wirebench stream` prints at the end, the
//! per-interval rows of each receiver (iperf's report), the search trials and the size sweep.

use std::io::{self, Write};

use wirebench_core::report::{IntervalRow, Outcome, ReceiverResult, Report, Results, SweepRow, TrialRow};

use crate::text::{bits_words, rate_words};

/// Loss of a receiver in percent: `1 - received / sent` (0 when nothing was sent).
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn loss_percent(r: &ReceiverResult) -> f64 {
    if r.sent == 0 { 0.0 } else { 100.0 * r.sent.saturating_sub(r.total.received) as f64 / r.sent as f64 }
}

/// The end-of-run summary.
pub fn summary(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Results::Stream(s) = &report.results else { return Ok(()) };
    writeln!(
        out,
        "stream {} {}: {}-byte messages, {} publisher(s), rate {}",
        s.proto,
        s.direction,
        s.size,
        s.publishers,
        s.rate_per_s.map_or_else(|| "max".to_owned(), |r| format!("{} per publisher", rate_words(r)))
    )?;
    if let Some(t) = &s.sender {
        writeln!(
            out,
            "sender: sent {} messages, {} {}{}{}",
            t.messages,
            rate_words(t.per_s),
            bits_words(t.bits_per_s),
            if t.gso { " (UDP GSO)" } else { "" },
            t.retransmits.map_or_else(String::new, |r| format!(", {r} TCP retransmits")),
        )?;
    }
    for r in &s.receivers {
        let c = &r.total;
        let span = c.span_ns();
        writeln!(
            out,
            "{}: received {} of {} sent ({} missing, loss {:.4}%), {} {}, out of order {} (avg offset {:.1}), dup {}, gaps {} (mean {:.1} msgs, {:.3} ms), jitter {:.2} us",
            r.addr,
            c.received,
            r.sent,
            r.sent.saturating_sub(c.received),
            loss_percent(r),
            rate_words(c.per_sec(span)),
            bits_words(c.bits_per_sec(span)),
            c.out_of_order,
            c.avg_offset(),
            c.duplicates,
            c.gaps,
            c.mean_gap(),
            c.mean_gap_ns() / 1e6,
            c.jitter_ns / 1000.0
        )?;
    }
    if let Some(search) = &s.search {
        writeln!(
            out,
            "highest rate with loss <= {:.4}%: {} {} ({} trials)",
            search.loss_target * 100.0,
            rate_words(search.best_per_s),
            bits_words(search.best_bits_per_s),
            search.trials.len()
        )?;
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

/// One line per search trial.
pub fn trial(out: &mut dyn Write, t: &TrialRow, size: usize) -> io::Result<()> {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let bits = |r: f64| bits_words(r * 8.0 * size as f64);
    writeln!(
        out,
        "  trial at {:>14} ({:>14}): sent {:>10} received {:>10} loss {:>8.4}%  {}",
        t.rate_per_s.map_or_else(|| "max".to_owned(), rate_words),
        t.rate_per_s.map_or_else(|| bits(t.sent_per_s), bits),
        t.sent,
        t.received,
        t.loss * 100.0,
        if t.passed { "pass" } else { "FAIL" }
    )
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
pub fn stream(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let Results::Stream(s) = &report.results else {
        return writeln!(out, "not a stream report");
    };
    summary(out, report)?;
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
            trial(out, t, s.size)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn report_of_a_saved_stream() {
        let mut out = Vec::new();
        stream(&mut out, &fixtures::stream(1000, 900)).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "stream udp forward: 1000-byte messages, 1 publisher(s), rate max");
        assert!(
            lines[1].starts_with(
                "127.0.0.1:7878: received 900 of 1000 sent (100 missing, loss 10.0000%), 900 msg/s 7.2 Mbit/s"
            ),
            "{text}"
        );
        assert_eq!(lines[2], "highest rate with loss <= 0.0000%: 1.0k msg/s 8.0 Mbit/s (2 trials)");
        assert_eq!(lines[4], "intervals at 127.0.0.1:7878 (forward):");
        assert_eq!(lines[5].split_whitespace().collect::<Vec<_>>(), ["seconds", "received", "throughput", "loss"]);
        assert_eq!(
            lines[6].split_whitespace().collect::<Vec<_>>(),
            ["0.500", "900", "msg/s", "7.2", "Mbit/s", "10.000%"]
        );
        assert!(text.contains("search trials (loss target 0.0000%):"));
        assert!(lines.iter().any(|l| l.ends_with("FAIL")) && lines.iter().any(|l| l.ends_with("pass")));
        assert!(text.contains("size sweep:\n  size     64 B:"), "{text}");
    }
}
