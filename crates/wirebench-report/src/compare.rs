//! Runs side by side: the figures that matter per mode, each run's ratio to the first run
//! of its mode (the baseline), and the environment differences that make a comparison
//! suspect.
//!
//! Latency figures come from the embedded histograms (all responders merged when there are
//! several), never from averaging percentiles.

mod load;

use std::io::{self, Write};

use hdrhistogram::Histogram;
use wirebench_core::latency::value_at_percentile;
use wirebench_core::report::{ReceiverResult, Report, Results, decode_histogram};

use crate::Run;
use crate::env::{self, Difference};
use crate::words::{bits_words, rate_words, us};

/// One figure of every run of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    /// `p50`, `throughput`, ...
    pub name: &'static str,
    /// One value per run (`None`: the run has no such figure).
    pub values: Vec<Option<f64>>,
}

impl MetricRow {
    /// Each value divided by the baseline's (the first run's); `None` when either is missing
    /// or the baseline is 0.
    pub fn ratios(&self) -> Vec<Option<f64>> {
        let base = self.values.first().copied().flatten().filter(|b| *b != 0.0);
        self.values.iter().map(|v| Some((*v)? / base?)).collect()
    }
}

/// Runs of one mode side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// `ping`, `stream` or `load`.
    pub mode: &'static str,
    /// Column headings: the runs' names, baseline first.
    pub runs: Vec<String>,
    /// One row per figure.
    pub rows: Vec<MetricRow>,
    /// What the figures measure, where a reader must know it (stream: the time the rates
    /// are over), one line each.
    pub notes: Vec<String>,
}

/// Everything `--compare` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// One table per mode present, in the order modes first appear.
    pub tables: Vec<Table>,
    /// Per run after the first: its name and how its environment differs from the first's.
    pub environment: Vec<(String, Vec<Difference>)>,
}

/// The histogram a ping run is judged by: all responders merged, or its only one.
pub fn ping_histogram(r: &Report) -> Option<Histogram<u64>> {
    let Results::Ping(p) = &r.results else { return None };
    let mut views = p.responders.iter().map(|r| &r.latency);
    let mut merged = decode_histogram(&views.next()?.histogram).ok()?;
    for v in views {
        merged.add(decode_histogram(&v.histogram).ok()?).ok()?;
    }
    Some(merged)
}

/// Latency figures of a ping run, ns: p50, p99, p99.9, max; and lost probes.
#[expect(clippy::cast_precision_loss, reason = "ratios of latencies")]
fn ping_values(r: &Report) -> Vec<Option<f64>> {
    let Results::Ping(p) = &r.results else { return vec![None; 5] };
    let lost = p.responders.iter().map(|r| r.lost).sum::<u64>() as f64;
    match ping_histogram(r).filter(|h| !h.is_empty()) {
        Some(h) => {
            let q = |p: f64| Some(value_at_percentile(&h, p) as f64);
            vec![q(50.0), q(99.0), q(99.9), Some(h.max() as f64), Some(lost)]
        }
        None => vec![None, None, None, None, Some(lost)],
    }
}

/// Stream figures: payload bits/s and messages/s received (all receivers), loss percent
/// (`1 - received / sent` over all receivers), and the highest loss-free rate if searched.
#[expect(clippy::cast_precision_loss, reason = "ratios")]
fn stream_values(r: &Report) -> Vec<Option<f64>> {
    let Results::Stream(s) = &r.results else { return vec![None; 4] };
    let bits = s.receivers.iter().map(ReceiverResult::bits_per_s).sum();
    let per_s = s.receivers.iter().map(ReceiverResult::per_s).sum();
    let sent: u64 = s.receivers.iter().map(|x| x.sent).sum();
    let got: u64 = s.receivers.iter().map(|x| x.total.received.min(x.sent)).sum();
    let loss = (sent > 0).then(|| 100.0 * (sent - got) as f64 / sent as f64);
    vec![Some(bits), Some(per_s), loss, s.search.as_ref().map(|x| x.best_per_s)]
}

const PING_ROWS: [&str; 5] = ["p50", "p99", "p99.9", "max", "lost"];
const STREAM_ROWS: [&str; 4] = ["throughput", "received", "loss", "loss-free rate"];

fn table(mode: &'static str, names: &[&'static str], runs: &[&Run<'_>], f: fn(&Report) -> Vec<Option<f64>>) -> Table {
    let values: Vec<Vec<Option<f64>>> = runs.iter().map(|r| f(r.report)).collect();
    Table {
        mode,
        runs: runs.iter().map(|r| r.name.to_owned()).collect(),
        rows: names
            .iter()
            .enumerate()
            .map(|(i, name)| MetricRow { name, values: values.iter().map(|v| v[i]).collect() })
            .filter(|row| row.values.iter().any(Option::is_some))
            .collect(),
        notes: Vec::new(),
    }
}

/// The time a stream run's rates are over, in words (its first receiver's; `None` when it
/// has none).
fn stream_time_base(r: &Report) -> Option<&'static str> {
    let Results::Stream(s) = &r.results else { return None };
    let x = s.receivers.first()?;
    Some(if r.config.get("merged_from").is_some() {
        "each generator's own time (merged)"
    } else if x.over_receive_time() {
        "the receiving time (first to last arrival)"
    } else if x.over_send_time() {
        "the sending time"
    } else {
        "each receiver's first to last arrival"
    })
}

/// The stream table's note: what `throughput` and `received` are over, and a warning when
/// runs differ in it (a TCP run from before rates were over the receiving time against one
/// after: their ratio compares unlike figures).
fn stream_notes(runs: &[&Run<'_>]) -> Vec<String> {
    let bases: Vec<(&str, &str)> = runs.iter().filter_map(|r| Some((r.name, stream_time_base(r.report)?))).collect();
    let Some(&(_, first)) = bases.first() else { return Vec::new() };
    if bases.iter().all(|b| b.1 == first) {
        return vec![format!("throughput and received: payload and messages received per second of {first}")];
    }
    let each: Vec<String> = bases.iter().map(|(n, b)| format!("{n} {b}")).collect();
    vec![format!(
        "warning: throughput and received are over different times ({}): their ratios compare unlike figures",
        each.join(", ")
    )]
}

/// Compares `runs`: the first run of each mode is that mode's baseline; environments are
/// compared with the very first run. Proxy runs get no table.
pub fn compare(runs: &[Run<'_>]) -> Comparison {
    let mut tables = Vec::new();
    let mut modes: Vec<&'static str> = Vec::new();
    for r in runs {
        let m = mode(r.report);
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    for m in modes {
        let of_mode: Vec<&Run<'_>> = runs.iter().filter(|r| mode(r.report) == m).collect();
        match m {
            "ping" => tables.push(table(m, &PING_ROWS, &of_mode, ping_values)),
            "stream" => {
                let mut t = table(m, &STREAM_ROWS, &of_mode, stream_values);
                t.notes = stream_notes(&of_mode);
                tables.push(t);
            }
            "load" => tables.push(table(m, &load::ROWS, &of_mode, load::values)),
            // A proxy run is a tool's setting, not a measurement to rank: not compared.
            _ => {}
        }
    }
    let environment = match runs.split_first() {
        Some((base, rest)) => rest
            .iter()
            .map(|r| (r.name.to_owned(), env::differences(&base.report.meta, &r.report.meta)))
            .filter(|(_, d)| !d.is_empty())
            .collect(),
        None => Vec::new(),
    };
    Comparison { tables, environment }
}

/// The mode of a report, as its JSON tag (one definition, beside the merge that checks it).
pub use wirebench_core::report::merge::mode;

/// A figure in words: µs for latencies, Gbit/s, msg/s, percent, a count.
pub fn format_value(row: &str, v: f64) -> String {
    match row {
        "p50" | "p99" | "p99.9" | "max" | "delay p50" | "delay p99" | "delay p99.9" | "delay max" | "reply p50"
        | "reply p99" => format!("{} us", us(v)),
        "throughput" => bits_words(v),
        "received" | "loss-free rate" | "sent/s" | "delivered/s" => rate_words(v),
        "loss" | "deliveries missing" | "replies missing" => format!("{v:.3}%"),
        "cpu/event" => format!("{:.2} us", v / 1e3),
        _ => format!("{v:.0}"),
    }
}

/// `x1.24`, `x0.011`, `x10.5`; `-` when there is no ratio.
pub fn format_ratio(r: Option<f64>) -> String {
    match r {
        None => "-".into(),
        Some(r) if r >= 10.0 => format!("x{r:.1}"),
        Some(r) if r >= 0.1 || r == 0.0 => format!("x{r:.2}"),
        Some(r) => format!("x{r:.3}"),
    }
}

/// The one-line warning for runs whose environments differ, if any do.
pub fn environment_warning(c: &Comparison) -> Option<String> {
    if c.environment.is_empty() {
        return None;
    }
    let parts: Vec<String> = c
        .environment
        .iter()
        .map(|(name, diffs)| {
            let d: Vec<String> = diffs.iter().map(|d| format!("{} {} vs {}", d.what, d.baseline, d.other)).collect();
            format!("{name}: {}", d.join(", "))
        })
        .collect();
    Some(format!(
        "warning: environments differ from the first run's, so ratios may reflect the host: {}",
        parts.join("; ")
    ))
}

/// The comparison as terminal text: per mode, one row per figure, one column per run
/// (value and ratio to the baseline), then the environment warning.
pub fn write_text(c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    for (i, t) in c.tables.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{} runs (ratios against {})", t.mode, t.runs[0])?;
        let mut grid = vec![std::iter::once(String::new()).chain(t.runs.iter().cloned()).collect::<Vec<_>>()];
        for row in &t.rows {
            let ratios = row.ratios();
            let mut line = vec![row.name.to_owned()];
            for (j, v) in row.values.iter().enumerate() {
                let cell = v.map_or_else(|| "-".into(), |v| format_value(row.name, v));
                line.push(if j == 0 { cell } else { format!("{cell} ({})", format_ratio(ratios[j])) });
            }
            grid.push(line);
        }
        let widths: Vec<usize> =
            (0..grid[0].len()).map(|k| grid.iter().map(|r| r[k].chars().count()).max().unwrap_or(0)).collect();
        for r in &grid {
            let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
        }
        for n in &t.notes {
            writeln!(out, "{n}")?;
        }
    }
    if let Some(w) = environment_warning(c) {
        writeln!(out, "\n{w}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() <= b * 0.001)
    }

    #[test]
    fn ping_figures_and_ratios() {
        // 100 samples 10..109 us against 100 samples 20..119 us
        let (first, second) = (fixtures::ping(&[10_000]), fixtures::ping(&[20_000]));
        let c = compare(&[Run { name: "a", report: &first }, Run { name: "b", report: &second }]);
        assert_eq!(c.tables.len(), 1);
        let t = &c.tables[0];
        assert_eq!((t.mode, t.runs.as_slice()), ("ping", ["a".to_owned(), "b".to_owned()].as_slice()));
        let names: Vec<&str> = t.rows.iter().map(|r| r.name).collect();
        assert_eq!(names, ["p50", "p99", "p99.9", "max", "lost"]);
        let p50 = &t.rows[0];
        assert!(close(p50.values[0], 59_000.0) && close(p50.values[1], 69_000.0), "{p50:?}");
        let ratios = p50.ratios();
        assert_eq!(ratios[0], Some(1.0));
        assert!(close(ratios[1], 69.0 / 59.0), "{ratios:?}");
        let max = &t.rows[3];
        assert!(close(max.values[0], 109_000.0) && close(max.values[1], 119_000.0));
        assert_eq!(t.rows[4].values, [Some(1.0), Some(1.0)], "lost");
        assert!(c.environment.is_empty());
    }

    #[test]
    fn several_responders_are_merged_before_percentiles() {
        let two = fixtures::ping(&[10_000, 110_000]);
        let h = ping_histogram(&two).unwrap();
        assert_eq!(h.len(), 200);
        let c = compare(&[Run { name: "two", report: &two }]);
        assert!(close(c.tables[0].rows[0].values[0], 109_000.0), "the median of 200 merged samples");
    }

    #[test]
    fn stream_figures_and_a_zero_baseline() {
        let (a, b) = (fixtures::stream(1000, 1000), fixtures::stream(1000, 900));
        let c = compare(&[Run { name: "a", report: &a }, Run { name: "b", report: &b }]);
        let t = &c.tables[0];
        assert_eq!(t.mode, "stream");
        let row = |n: &str| t.rows.iter().find(|r| r.name == n).unwrap();
        assert!(close(row("throughput").values[0], 8e6) && close(row("throughput").values[1], 7.2e6));
        assert!(close(row("throughput").ratios()[1], 0.9));
        assert_eq!(row("loss").values, [Some(0.0), Some(10.0)]);
        assert_eq!(row("loss").ratios(), [None, None], "no ratio against a loss of 0");
        assert_eq!(row("loss-free rate").values, [Some(1000.0), Some(1000.0)]);
    }

    /// A TCP run whose rates are over the receiving time against one over the sending time
    /// (written before): the table says so rather than rank unlike figures silently.
    #[test]
    fn stream_tables_say_what_the_rates_are_over() {
        let a = fixtures::stream(1000, 1000);
        let mut b = fixtures::stream(1000, 1000);
        if let Results::Stream(tcp) = &mut b.results {
            tcp.receivers[0].recv_ns = 2_000_000_000;
        }
        let same = compare(&[Run { name: "a", report: &a }, Run { name: "a2", report: &a }]);
        assert_eq!(
            same.tables[0].notes,
            ["throughput and received: payload and messages received per second of the sending time"]
        );
        let c = compare(&[Run { name: "a", report: &a }, Run { name: "b", report: &b }]);
        let t = &c.tables[0];
        let row = |n: &str| t.rows.iter().find(|r| r.name == n).unwrap();
        assert!(close(row("throughput").ratios()[1], 0.5), "b's bytes over twice the time");
        assert_eq!(t.notes.len(), 1);
        assert!(
            t.notes[0].starts_with("warning: throughput and received are over different times")
                && t.notes[0].contains("a the sending time, b the receiving time (first to last arrival)"),
            "{:?}",
            t.notes
        );
        let mut text = Vec::new();
        write_text(&c, &mut text).unwrap();
        assert!(String::from_utf8(text).unwrap().contains(&t.notes[0]));
    }

    #[test]
    fn modes_get_their_own_tables_and_environments_are_checked() {
        let p = fixtures::ping(&[10_000]);
        let mut s = fixtures::stream(1000, 1000);
        s.meta.host.clocksource = "hpet".into();
        let c = compare(&[Run { name: "p", report: &p }, Run { name: "s", report: &s }]);
        assert_eq!(c.tables.iter().map(|t| t.mode).collect::<Vec<_>>(), ["ping", "stream"]);
        let w = environment_warning(&c).unwrap();
        assert!(w.contains("s: clocksource tsc vs hpet"), "{w}");
    }

    #[test]
    fn ratio_words() {
        assert_eq!(format_ratio(Some(1.2345)), "x1.23");
        assert_eq!(format_ratio(Some(0.0112)), "x0.011");
        assert_eq!(format_ratio(Some(10.48)), "x10.5");
        assert_eq!(format_ratio(None), "-");
    }

    #[test]
    fn text_table() {
        let (a, b) = (fixtures::ping(&[10_000]), fixtures::ping(&[20_000]));
        let c = compare(&[Run { name: "a", report: &a }, Run { name: "b", report: &b }]);
        let mut out = Vec::new();
        write_text(&c, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ping runs (ratios against a)");
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["a", "b"]);
        assert!(lines[2].starts_with("p50    59.0 us  69.1 us (x1.17)"), "{text}");
        assert!(lines[6].starts_with("lost   1        1 (x1.00)"), "{text}");
        assert_eq!(lines.len(), 7, "no environment warning: {text}");
    }
}
