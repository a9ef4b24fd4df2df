//! `wirebench hiccup`: the stall meter ([`crate::stall`]) on its own, for a duration, with
//! its summary on the terminal and its report in JSON.

use std::path::PathBuf;
use std::time::SystemTime;
use wirebench_core::units::nanos;

use wirebench_core::latency::DEFAULT_PERCENTILES;
use wirebench_core::report::{Attribution, Outcome, Report, Results};
use wirebench_core::units::Span;
use wirebench_net::timer::mono_now_ns;

use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::stall::{checked_interval, record, result};

/// `wirebench hiccup` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How long to measure.
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time", default_value = "10s")]
    pub duration: Span,
    /// Sleep interval (10us to 1s).
    #[arg(long, default_value = "1ms")]
    pub interval: Span,
    /// Write the JSON report.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print only the summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `wirebench hiccup`: how late this host wakes a sleeping thread, on its own.
pub fn run(a: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let interval_ns = checked_interval("--interval", a.interval)?;
    if a.duration.0.is_zero() {
        return Err(UsageError("--duration must be above 0".into()).into());
    }
    let started = SystemTime::now();
    let t0 = mono_now_ns();
    let until = t0.saturating_add(nanos(a.duration.0));
    let out = &mut *ctx.out;
    // From 2 s on: a bar on a terminal, a plain line every 5 s otherwise (as ping's).
    let progress = crate::progress::Progress::start(
        "hiccup".into(),
        crate::progress::Total::Time(a.duration.0),
        std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
        a.quiet,
    );
    let (rec, cpu) = record(interval_ns, ctx.shutdown.flag(), Some(until), || {
        // Printed once the meter runs, so whoever waits for it knows a stall will be seen.
        if !a.quiet {
            let _ = writeln!(out, "wirebench hiccup: waking every {} for {} (Ctrl-C to stop)", a.interval, a.duration);
            let _ = out.flush();
        }
    });
    drop(progress);
    let duration_ns = mono_now_ns().saturating_sub(t0);
    let h = result(rec.finish(), cpu, &DEFAULT_PERCENTILES);
    wirebench_report::attribution::hiccup_summary(ctx.out, &h)?;
    let report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, duration_ns),
        config: serde_json::json!({ "interval_ns": interval_ns, "duration_ns": a.duration.0.as_nanos() }),
        outcome: if ctx.shutdown.is_set() { Outcome::Interrupted } else { Outcome::Completed },
        results: Results::Hiccup,
        attribution: Some(Attribution { hiccup: Some(h), ..Attribution::default() }),
    };
    if let Some(p) = &a.json {
        crate::output::write_json(p, &report)?;
    }
    Ok(report)
}
