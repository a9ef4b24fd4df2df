//! `wirebench report FILE.json...`: renders saved reports, never measures. Text by default
//! (the same text the modes print, plus each run's environment); `--html` writes one
//! self-contained page with charts; `--compare` puts the runs side by side with ratios to
//! the first and warns when their environments differ in a way that changes results.
//!
//! A file that is not a report, or is from a newer schema, is bad input (exit 2).

mod load;

use std::path::{Path, PathBuf};

use wirebench_report::{Run, compare, env, html, stream_text, text};

use crate::Ctx;
use crate::error::UsageError;
pub use load::{Loaded, load, parse};

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
    /// The HTML page's title.
    #[arg(long, default_value = "wirebench report")]
    pub title: String,
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
    /// Page title.
    pub title: String,
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
        Ok(Self {
            files: a.files.clone(),
            html: a.html.clone(),
            compare: a.compare,
            table: a.table,
            title: a.title.clone(),
        })
    }
}

/// `wirebench report`: load every file (all or nothing), then print and/or write HTML.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let cfg = Config::from_args(args)?;
    let loaded = load(&cfg.files)?;
    let runs: Vec<Run<'_>> = loaded.iter().map(|l| Run { name: &l.name, report: &l.report }).collect();
    if cfg.compare {
        compare::write_text(&compare::compare(&runs), ctx.out)?;
    } else if cfg.html.is_none() {
        write_text(&runs, cfg.table, ctx.out)?;
    }
    if let Some(path) = &cfg.html {
        write_html(path, &cfg.title, &runs, cfg.compare)?;
        writeln!(ctx.out, "HTML report: {}", path.display())?;
    }
    Ok(())
}

/// Each run's text: a heading, its environment on one line, then the mode's report.
pub fn write_text(runs: &[Run<'_>], table: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for (i, r) in runs.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "== {} ==", r.name)?;
        writeln!(out, "{}", env::one_line(r.report))?;
        match compare::mode(r.report) {
            "ping" => text::ping(out, r.report, table)?,
            "stream" => stream_text::stream(out, r.report)?,
            "load" => crate::load::render_text(r.report, out)?,
            "hiccup" => {}
            _ => wirebench_report::proxy::summary(out, r.report)?,
        }
        wirebench_report::attribution::text(out, r.report)?;
    }
    Ok(())
}

/// Writes the HTML page of `runs` to `path`, atomically.
pub fn write_html(path: &Path, title: &str, runs: &[Run<'_>], compare: bool) -> anyhow::Result<()> {
    let page = html::Page { title, runs, compare };
    crate::output::write_atomic(path, |w| html::write(&page, w))
}
