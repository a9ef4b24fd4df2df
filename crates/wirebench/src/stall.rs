//! The stall meter (jHiccup's method) beside every run that measures, and the loop
//! `wirebench hiccup` runs on its own.
//!
//! Method. A thread with 1 ns timer slack sleeps to absolute due times on
//! `CLOCK_MONOTONIC`, one `--hiccup-interval` apart (1 ms by default), and records how late
//! each wake-up came into an HdrHistogram with a per-second series
//! (`wirebench_core::hiccup`: a stall also counts the wake-ups it made the thread miss, as
//! jHiccup does). Whatever else this process timed during a stall was delayed by the same
//! platform, so the report can say whose a tail is (`hiccup::verdict`). Its loop reads the
//! clock, sleeps and records: no allocation, no lock, no formatting.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wirebench_core::units::nanos;

use anyhow::Context as _;
use wirebench_core::hiccup::{HiccupRecorder, Hiccups, MAX_INTERVAL_NS, MIN_INTERVAL_NS};
use wirebench_core::latency::{DEFAULT_PERCENTILES, Summary};
use wirebench_core::report::{Attribution, HiccupResult, LatencyView, Report, Results, encode_histogram};
use wirebench_core::units::Span;
use wirebench_net::rusage::{task_sched, thread_id};
use wirebench_net::timer::{mono_now_ns, set_timer_slack, sleep_until};

use crate::error::UsageError;

/// The stall meter's flags, on every mode that measures.
#[derive(Debug, Clone, clap::Args)]
pub struct HiccupArgs {
    /// The stall meter's sleep interval (10us to 1s): a thread records how late it wakes.
    #[arg(long, value_name = "SPAN", default_value = "1ms", help_heading = "Attribution")]
    pub hiccup_interval: Span,
    /// No stall meter beside the run.
    #[arg(long, help_heading = "Attribution")]
    pub no_hiccup: bool,
}

impl Default for HiccupArgs {
    fn default() -> Self {
        Self { hiccup_interval: Span(Duration::from_millis(1)), no_hiccup: false }
    }
}

impl HiccupArgs {
    /// The interval in ns, checked.
    pub fn interval_ns(&self) -> Result<u64, UsageError> {
        checked_interval("--hiccup-interval", self.hiccup_interval)
    }
}

/// An interval in ns, checked against the meter's range; `flag` names it in the error.
pub(crate) fn checked_interval(flag: &str, span: Span) -> Result<u64, UsageError> {
    let ns = nanos(span.0);
    if !(MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) {
        return Err(UsageError(format!("{flag} {span} is outside 10us..=1s")));
    }
    Ok(ns)
}

/// Sleeps and records until `stop` is set or `until_ns` (monotonic) passes; calls
/// `on_first_wake` once, after the first wake-up (from then on a stall is seen). Returns
/// the recording and the thread's own CPU time over the loop (`schedstat`, read before and
/// after: nothing per wake-up).
pub(crate) fn record(
    interval_ns: u64,
    stop: &AtomicBool,
    until_ns: Option<u64>,
    on_first_wake: impl FnOnce(),
) -> (HiccupRecorder, Option<u64>) {
    // Without it the kernel may wake this normal thread up to 50 us late on purpose.
    let _ = set_timer_slack(1);
    let me = thread_id();
    let cpu0 = task_sched(me);
    let mut rec = HiccupRecorder::new(interval_ns, mono_now_ns());
    let mut due = rec.first_due();
    let mut first = Some(on_first_wake);
    while !stop.load(Ordering::Relaxed) && until_ns.is_none_or(|u| due <= u) {
        if sleep_until(due).is_err() {
            break;
        }
        due = rec.on_wake(due, mono_now_ns());
        if let Some(f) = first.take() {
            f();
        }
    }
    let cpu = cpu0.zip(task_sched(me)).map(|(a, b)| b.run_ns.saturating_sub(a.run_ns));
    (rec, cpu)
}

/// The meter's loop on the calling thread, until `until_ns` (monotonic, `wirebench_net::
/// timer::mono_now_ns`) or `stop` (for tests of the loop itself).
pub fn record_until(interval_ns: u64, stop: &AtomicBool, until_ns: u64) -> HiccupRecorder {
    record(interval_ns, stop, Some(until_ns), || {}).0
}

/// A stall meter running on its own thread beside a measurement.
#[derive(Debug)]
pub struct Meter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(HiccupRecorder, Option<u64>)>,
}

impl Meter {
    /// Starts a meter unless `--no-hiccup`.
    pub fn start(a: &HiccupArgs) -> anyhow::Result<Option<Self>> {
        if a.no_hiccup {
            return Ok(None);
        }
        let interval = a.interval_ns()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("hiccup".into())
            .spawn(move || record(interval, &flag, None, || {}))
            .context("cannot start the stall meter")?;
        Ok(Some(Self { stop, thread }))
    }

    /// Stops it (within one interval) and returns what it recorded, summarised at the
    /// percentiles `ps`.
    pub fn finish(self, ps: &[f64]) -> Option<HiccupResult> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().map(|(r, cpu)| result(r.finish(), cpu, ps))
    }
}

/// The attribution section with the meter's result (`None` without a meter).
pub fn attribution(meter: Option<Meter>) -> Option<Attribution> {
    let hiccup = meter?.finish(&DEFAULT_PERCENTILES)?;
    Some(Attribution { hiccup: Some(hiccup), ..Attribution::default() })
}

/// The percentiles a report's summaries show (the user's `--percentiles`), so the stall
/// meter's line lists the same ones.
fn percentiles_of(report: &Report) -> Vec<f64> {
    let s = match &report.results {
        Results::Ping(p) => p.responders.first().map(|r| &r.latency.summary),
        Results::Load(l) => Some(&l.overall.delay.summary),
        _ => None,
    };
    s.map_or_else(|| DEFAULT_PERCENTILES.to_vec(), |s| s.percentiles.iter().map(|q| q.p).collect())
}

/// Adds the meter's result to `report`'s attribution section.
pub fn attach(report: &mut Report, meter: Option<Meter>) {
    let Some(h) = meter.and_then(|m| m.finish(&percentiles_of(report))) else { return };
    report.attribution.get_or_insert_with(Attribution::default).hiccup = Some(h);
}

/// The report's form of a meter's recording, with its thread's own CPU time.
pub fn result(h: Hiccups, cpu_ns: Option<u64>, ps: &[f64]) -> HiccupResult {
    HiccupResult {
        interval_ns: h.interval_ns,
        wakeups: h.wakeups,
        corrected: h.corrected,
        lateness: LatencyView {
            measures: wirebench_core::report::Measure::WakeupLateness,
            summary: Summary::of(&h.histogram, ps),
            histogram: encode_histogram(&h.histogram),
        },
        seconds: h.seconds,
        cpu_ns,
    }
}
