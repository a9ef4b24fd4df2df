//! TSV output of a stream run (the terminal text is `wirebench_report::text::stream`, shared
//! with `wirebench report`).

use std::io::{self, Write};

use wirebench_core::report::{Report, Results};

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
