//! `wirebench report FILE.json...`: renders saved reports, never measures. Text by default
//! (the same text the modes print, plus each run's environment); `--html` writes one
//! self-contained page with charts; `--compare` puts the runs side by side with ratios to
//! the first and warns when their environments differ in a way that changes results.
//!
//! A file that is not a report, is from a newer schema, or is over the reader's limits
//! (`wirebench_core::report::read`) is bad input (exit 2). Ctrl-C stops reading and
//! rendering at the next file or the next write (exit 1, no HTML file left behind).

mod load;
mod merge;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use wirebench_core::report::Results;
use wirebench_report::screen::Detail;
use wirebench_report::{Run, compare, env, html, render_text};

use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::shutdown::Shutdown;
pub use load::{Loaded, MAX_HELD_BYTES, load, load_each, parse};

/// `wirebench report` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Saved reports (`--json` of any mode, or a suite's `wirebench-report/*.json`).
    #[arg(required = true, value_name = "FILE.json")]
    pub files: Vec<PathBuf>,
    /// Write one self-contained HTML page (inline SVG charts, no network needed) here.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Side by side with ratios to the first run, and a warning when environments differ.
    #[arg(long)]
    pub compare: bool,
    /// Text: add each latency histogram's percentile distribution (HdrHistogram layout).
    #[arg(long)]
    pub table: bool,
    /// Text: every detail of each run (as the modes print with `-v`).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// The HTML page's title.
    #[arg(long, default_value = "wirebench report")]
    pub title: String,
    /// Merge the reports (shards of one load scenario, or ping or stream generators against
    /// the same server) into one: histograms added, counts summed, percentiles recomputed.
    #[arg(long, conflicts_with = "compare")]
    pub merge: bool,
    /// With --merge: write the merged report as JSON here (`-` for stdout).
    #[arg(long, value_name = "OUT.json", requires = "merge")]
    pub json: Option<PathBuf>,
    /// With --merge: merge the shards of a load run even when some are missing; the merged
    /// report says which (without it, a missing shard is an error).
    #[arg(long, requires = "merge")]
    pub partial: bool,
}

/// Validated `report` settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Files in the order given.
    pub files: Vec<PathBuf>,
    /// Where the HTML goes.
    pub html: Option<PathBuf>,
    /// Compare.
    pub compare: bool,
    /// Percentile tables in the text.
    pub table: bool,
    /// Every detail in the text.
    pub verbose: bool,
    /// Page title.
    pub title: String,
    /// Merge into one report.
    pub merge: bool,
    /// Where the merged JSON goes.
    pub json: Option<PathBuf>,
    /// Merge with shards missing.
    pub partial: bool,
}

impl Config {
    /// Checks the flags: `--compare` needs two reports.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        if a.compare && a.files.len() < 2 {
            return Err(UsageError("--compare needs at least two reports".into()));
        }
        if a.html.as_deref().is_some_and(|p| a.files.iter().any(|f| f == p)) {
            return Err(UsageError("--html would overwrite one of the reports".into()));
        }
        if a.json.as_deref().is_some_and(|p| a.files.iter().any(|f| f == p)) {
            return Err(UsageError("--json would overwrite one of the reports".into()));
        }
        Ok(Self {
            files: a.files.clone(),
            html: a.html.clone(),
            compare: a.compare,
            table: a.table,
            verbose: a.verbose,
            title: a.title.clone(),
            merge: a.merge,
            json: a.json.clone(),
            partial: a.partial,
        })
    }
}

/// A writer that fails once the stop flag is set, so a long render ends at its next write.
pub struct Stoppable<'a> {
    inner: &'a mut dyn Write,
    shutdown: &'a Shutdown,
}

impl<'a> Stoppable<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn Write, shutdown: &'a Shutdown) -> Self {
        Self { inner, shutdown }
    }

    fn check(&self) -> io::Result<()> {
        if self.shutdown.is_set() { Err(io::Error::other("stopped by Ctrl-C")) } else { Ok(()) }
    }
}

impl Write for Stoppable<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        self.inner.flush()
    }
}

impl std::fmt::Debug for Stoppable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stoppable").finish_non_exhaustive()
    }
}

/// `wirebench report`: text reads and prints one file at a time; merge, compare and HTML
/// load every file (all or nothing, [`MAX_HELD_BYTES`] at most), then print and/or write
/// HTML. Returns 3 when a merged load report's thresholds fail (every output written first,
/// the verdicts printed as `load` prints them), else 0.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    let cfg = Config::from_args(args)?;
    if !cfg.merge && !cfg.compare && cfg.html.is_none() {
        // One report in memory at a time, whatever the number of files.
        let stop = ctx.shutdown.clone();
        let mut out = Stoppable::new(ctx.out, &stop);
        let mut first = true;
        load_each(&cfg.files, &stop, |l| {
            if !std::mem::take(&mut first) {
                writeln!(out)?;
            }
            write_text(
                &[Run { name: &l.name, report: &l.report }],
                cfg.table,
                Detail::of(false, cfg.verbose),
                &mut out,
            )?;
            Ok(())
        })?;
        return Ok(0);
    }
    let mut loaded = load(&cfg.files, &ctx.shutdown)?;
    let mut warnings = Vec::new();
    if cfg.merge {
        let m = merge::merged(&loaded, &ctx.argv, cfg.partial)?;
        warnings = m.warnings;
        loaded = vec![m.loaded];
        if let Some(path) = &cfg.json {
            crate::output::write_json(path, &loaded[0].report)?;
        }
    }
    let runs: Vec<Run<'_>> = loaded.iter().map(|l| Run { name: &l.name, report: &l.report }).collect();
    let stop = ctx.shutdown.clone();
    let mut out = Stoppable::new(ctx.out, &stop);
    for w in &warnings {
        writeln!(out, "{w}")?;
    }
    if cfg.compare {
        compare::write_text(&compare::compare(&runs), &mut out)?;
    } else if cfg.html.is_none() {
        write_text(&runs, cfg.table, Detail::of(false, cfg.verbose), &mut out)?;
    }
    if let Some(path) = &cfg.html {
        write_html_until(path, &cfg.title, &runs, cfg.compare, &stop)?;
        writeln!(out, "HTML report: {}", path.display())?;
    }
    if !cfg.merge {
        return Ok(0);
    }
    let failed = merge::failed_thresholds(&loaded[0].report);
    if cfg.html.is_some() && failed {
        // the text (with its verdicts) was not printed: the verdicts, as `load` prints them
        if let Results::Load(l) = &loaded[0].report.results {
            wirebench_report::text::load::thresholds(l, &mut out)?;
        }
    }
    Ok(if failed { 3 } else { 0 })
}

/// Each run's text: a heading, its environment on one line, then the mode's report.
/// The default view folds every line to the screen's width; `-v` prints them whole.
pub fn write_text(runs: &[Run<'_>], table: bool, detail: Detail, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for (i, r) in runs.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "== {} ==", r.name)?;
        let one = |w: &mut dyn Write| {
            writeln!(w, "{}", env::one_line(r.report))?;
            render_text(r.report, w, detail, table)?;
            wirebench_report::attribution::text_at(w, r.report, detail)
        };
        if detail.verbose() { one(out)? } else { wirebench_report::screen::wrapped(out, one)? }
    }
    Ok(())
}

/// Writes the HTML page of `runs` to `path`, atomically.
pub fn write_html(path: &Path, title: &str, runs: &[Run<'_>], compare: bool) -> anyhow::Result<()> {
    write_html_until(path, title, runs, compare, &Shutdown::new())
}

/// [`write_html`], abandoned (no file written) when `stop` is set.
fn write_html_until(path: &Path, title: &str, runs: &[Run<'_>], compare: bool, stop: &Shutdown) -> anyhow::Result<()> {
    let page = html::Page { title, runs, compare };
    crate::output::write_atomic(path, |w| html::write(&page, &mut Stoppable::new(w, stop)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_render_fails_at_its_next_write() {
        let stop = Shutdown::new();
        let mut buf = Vec::new();
        let mut w = Stoppable::new(&mut buf, &stop);
        w.write_all(b"before").unwrap();
        stop.trigger();
        let e = w.write_all(b"after").unwrap_err();
        assert_eq!(e.to_string(), "stopped by Ctrl-C");
        assert_eq!(buf, b"before");
    }
}
