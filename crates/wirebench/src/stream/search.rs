//! `--find-max-rate` and `--sizes`: loops of quiet trials, with a bar of their own that
//! counts trials (or sizes) and the trial lines printed around it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wirebench_core::ratesearch::{Ending, RateSearch, SearchSteps, queue_built, reached};
use wirebench_core::report::{ReceiverResult, SearchEnding, SearchResult, StreamResults, SweepRow, TrialRow};
use wirebench_core::units::Span;
use wirebench_report::words::rate_words;

use super::session::{Live, RunOut, RunSpec};
use super::{Config, once};
use crate::ctx::Ctx;
use crate::flow::send::Behind;
use crate::progress::{Progress, Total};

/// No bar and no lines: a trial of a search or a sweep (the search has its own bar).
fn quiet_trial() -> Live {
    Live::default()
}

/// Loss of a run: `1 - received / sent` over every receiver.
fn loss_of(r: &RunOut) -> (u64, u64, f64) {
    let sent: u64 = r.receivers.iter().map(|x| x.sent).sum();
    let got: u64 = r.receivers.iter().map(|x| x.total.received.min(x.sent)).sum();
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    let loss = if sent == 0 { 1.0 } else { 1.0 - got as f64 / sent as f64 };
    (sent, got, loss)
}

/// How much the one-way delay rose in a trial (the receiver whose rose most), and whether a
/// queue built on the path (`ratesearch::queue_built`; a trial's sender resumes after a
/// stall, so no catch-up burst of its own built it).
fn queue_of(r: &RunOut) -> (Option<i64>, bool) {
    let rises = || r.receivers.iter().filter_map(|x| x.total.delay);
    (rises().map(|d| d.rise_ns).max(), rises().any(|d| queue_built(&d)))
}

/// The slowest rate a search tries, messages/s: a trial must carry a few messages (4) to
/// say anything, and never slower than 1 a second.
fn search_floor(trial: Duration) -> f64 {
    (4.0 / trial.as_secs_f64().max(1e-3)).max(1.0)
}

/// The search's plan, said before its first trial.
fn say_plan(
    out: &mut dyn std::io::Write,
    cfg: &Config,
    top_rate: Option<f64>,
    steps: &SearchSteps,
    budget: usize,
) -> std::io::Result<()> {
    writeln!(
        out,
        "finding the highest rate with loss <= {:.4}% and no queue building: trials of {}, from {} down to {} by tenths, then halving the bracket to {:.1}% (at most {budget} trials)",
        cfg.loss_target * 100.0,
        Span(cfg.trial),
        top_rate.map_or_else(|| "flat out".to_owned(), rate_words),
        rate_words(steps.floor),
        steps.resolution * 100.0,
    )
}

pub(super) fn find_max_rate(cfg: &Config, ctx: &mut Ctx<'_>, results: &mut StreamResults) -> anyhow::Result<RunOut> {
    let trial = |rate: Option<f64>, ctx: &mut Ctx<'_>| {
        let spec = RunSpec { size: cfg.size, rate, count: None, duration: cfg.trial, behind: Behind::Resume };
        once(cfg, &spec, ctx, &quiet_trial())
    };
    let steps = SearchSteps { floor: search_floor(cfg.trial), ..SearchSteps::default() };
    // The budget before the first trial: from the rate given, or from the fastest any
    // sender manages (10^8 msg/s); the real one follows from the first trial.
    let top_rate = cfg.rate.per_sec(cfg.size);
    let budget = RateSearch::new(top_rate.unwrap_or(1e8), cfg.loss_target, steps).max_trials();
    if !cfg.quiet {
        say_plan(ctx.out, cfg, top_rate, &steps, budget)?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let label = crate::progress::label("find-max-rate", cfg.group.map_or(cfg.targets[0], SocketAddr::V4));
    let bar = Progress::start(label, Total::CountOf(budget as u64, "trials"), Arc::clone(&done), cfg.quiet);
    // First trial: the top of the range, flat out or the --rate given.
    let first = trial(top_rate, ctx)?;
    let achieved = first.sender.map_or(0.0, |s| s.per_s / f64::from(cfg.parallel));
    let top = top_rate.unwrap_or(achieved);
    let mut search = RateSearch::new(top, cfg.loss_target, steps);
    let mut rows = Vec::new();
    let mut record = |r: &RunOut, rate: Option<f64>, s: &mut RateSearch, ctx: &mut Ctx<'_>| {
        let (sent, got, loss) = loss_of(r);
        // what a sender sent over the trial, and the rate it reached while sending: the rate
        // asked, unless it fell short beyond the stalls it skipped
        let asked = rate.unwrap_or(top);
        let sent_per_s = r.sender.map_or(0.0, |x| x.per_s / f64::from(cfg.parallel));
        let achieved = r.sender.map_or(0.0, |x| reached(asked, sent_per_s, r.skipped_ns, x.send_ns));
        let (delay, queue) = queue_of(r);
        let t = s.on_result_achieved(asked, achieved, sent_per_s, loss, queue);
        let row = TrialRow {
            rate_per_s: rate,
            sent_per_s: r.sender.map_or(0.0, |x| x.per_s),
            sent,
            received: got,
            loss,
            passed: t.passed,
            delay_rise_ns: delay,
            queue,
        };
        if !cfg.quiet {
            bar.suspend(|| wirebench_report::text::stream::trial(ctx.out, &row, cfg.size, cfg.loss_target)).ok();
        }
        rows.push(row);
        done.fetch_add(1, Ordering::Relaxed);
    };
    record(&first, top_rate, &mut search, ctx);
    let mut last = first;
    while let Some(rate) = search.next_rate() {
        if ctx.shutdown.is_set() || last.peer_lost.is_some() {
            break;
        }
        last = trial(Some(rate), ctx)?;
        record(&last, Some(rate), &mut search, ctx);
    }
    drop(bar);
    let best = search.result();
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let best_bits = best * 8.0 * cfg.size as f64;
    let ending = match search.ending() {
        Ending::TopPassed(_) => SearchEnding::TopPassed,
        Ending::SenderLimited(_) => SearchEnding::SenderLimited,
        Ending::Found(_) => SearchEnding::Found,
        Ending::NothingPassed(_) => SearchEnding::NothingPassed,
        Ending::OutOfTrials(_) | Ending::Running => SearchEnding::Stopped,
    };
    results.search = Some(SearchResult {
        loss_target: cfg.loss_target,
        trials: rows,
        best_per_s: best,
        best_bits_per_s: best_bits,
        ending,
        floor_per_s: steps.floor,
    });
    Ok(last)
}

pub(super) fn sweep(cfg: &Config, ctx: &mut Ctx<'_>, results: &mut StreamResults) -> anyhow::Result<RunOut> {
    let mut last = RunOut::default();
    let done = Arc::new(AtomicU64::new(0));
    let label = crate::progress::label("sizes", cfg.group.map_or(cfg.targets[0], SocketAddr::V4));
    let total = Total::CountOf(cfg.sizes.len() as u64, "sizes");
    let bar = Progress::start(label, total, Arc::clone(&done), cfg.quiet);
    for &size in &cfg.sizes {
        if ctx.shutdown.is_set() || last.peer_lost.is_some() {
            break;
        }
        let spec =
            RunSpec { size, rate: cfg.rate.per_sec(size), count: None, duration: cfg.trial, behind: Behind::CatchUp };
        last = once(cfg, &spec, ctx, &quiet_trial())?;
        let (_, _, loss) = loss_of(&last);
        let got: f64 = last.receivers.iter().map(ReceiverResult::per_s).sum();
        let bits: f64 = last.receivers.iter().map(ReceiverResult::bits_per_s).sum();
        let row = SweepRow { size, per_s: got, bits_per_s: bits, loss, sent_per_s: last.sender.map(|s| s.per_s) };
        if !cfg.quiet {
            bar.suspend(|| wirebench_report::text::stream::sweep_row(ctx.out, &row)).ok();
        }
        results.sweep.push(row);
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(last)
}
