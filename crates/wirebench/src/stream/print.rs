//! Terminal and TSV output of a stream run.

use std::io::{self, Write};

use wirebench_core::report::{Report, Results, SweepRow, TrialRow};

use super::session::{bits_words, rate_words};

/// The end-of-run summary.
pub(super) fn summary(out: &mut dyn Write, report: &Report) -> io::Result<()> {
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
        let missing = r.sent.saturating_sub(c.received);
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let loss = if r.sent == 0 { 0.0 } else { 100.0 * missing as f64 / r.sent as f64 };
        writeln!(
            out,
            "{}: received {} of {} sent ({} missing, loss {:.4}%), {} {}, out of order {} (avg offset {:.1}), dup {}, gaps {} (mean {:.1} msgs, {:.3} ms), jitter {:.2} us",
            r.addr,
            c.received,
            r.sent,
            missing,
            loss,
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
        wirebench_core::report::Outcome::Interrupted => writeln!(out, "interrupted: results so far"),
        wirebench_core::report::Outcome::PeerSilent => writeln!(out, "a receiver went away: results so far"),
        wirebench_core::report::Outcome::Completed => Ok(()),
    }
}

/// One line per search trial.
pub(super) fn trial(out: &mut dyn Write, t: &TrialRow, size: usize) {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let bits = |r: f64| bits_words(r * 8.0 * size as f64);
    let _ = writeln!(
        out,
        "  trial at {:>14} ({:>14}): sent {:>10} received {:>10} loss {:>8.4}%  {}",
        t.rate_per_s.map_or_else(|| "max".to_owned(), rate_words),
        t.rate_per_s.map_or_else(|| bits(t.sent_per_s), bits),
        t.sent,
        t.received,
        t.loss * 100.0,
        if t.passed { "pass" } else { "FAIL" }
    );
}

/// One line per swept size.
pub(super) fn sweep_row(out: &mut dyn Write, r: &SweepRow) {
    let _ = writeln!(
        out,
        "  size {:>6} B: {:>14}  {:>14}  loss {:.4}%",
        r.size,
        rate_words(r.per_s),
        bits_words(r.bits_per_s),
        r.loss * 100.0
    );
}

/// Interval rows as TSV: seconds, receiver, messages/s, Mbit/s, received, missing, out of
/// order, duplicates, jitter µs.
pub(super) fn tsv(w: &mut dyn Write, report: &Report) -> io::Result<()> {
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
