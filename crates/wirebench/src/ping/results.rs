//! From what the engine measured to the report's `PingResults`.

use hdrhistogram::Histogram;
use wirebench_core::counters::Snapshot;
use wirebench_core::latency::{self, KernelStats, StackScope, Summary};
use wirebench_core::report::{
    Attribution, KernelResult, LatencyView, Measure, Pacing, PingResults, ProbeForm, RateResult, ResponderResult,
    ThreadInfo, encode_histogram,
};
use wirebench_core::units::nanos;
use wirebench_core::wire::probe::Form;

use super::config::Config;
use super::engine::EngineOutput;

/// Below this share of the requested rate the report says the sender did not keep up.
const KEPT_UP_SHARE: f64 = 0.99;

fn view(measures: Measure, h: &Histogram<u64>, ps: &[f64]) -> LatencyView {
    LatencyView { measures, summary: Summary::of(h, ps), histogram: encode_histogram(h) }
}

/// Builds the results.
pub fn build(cfg: &Config, out: &EngineOutput) -> PingResults {
    let ps = &cfg.percentiles;
    let open = cfg.pacing.is_open();
    let main = if open { Measure::RttFromIntendedSend } else { Measure::RttFromSend };
    let full = cfg.form() == Form::Full;
    let responders: Vec<ResponderResult> = out
        .responders
        .iter()
        .map(|r| {
            let st = &r.stats;
            let has_times = full && !st.dwell.is_empty();
            ResponderResult {
                addr: r.addr.to_string(),
                received: st.received,
                lost: st.lost(out.sent, out.measure_start_seq),
                late: st.late,
                duplicates: st.duplicates,
                latency: view(main.clone(), &st.rtt, ps),
                uncorrected: st.rtt_uncorrected.as_ref().map(|h| view(Measure::RttFromActualSend, h, ps)),
                warmup: view(main.clone(), &st.warmup, ps),
                network: has_times.then(|| view(Measure::NetworkRtt, &st.network, ps)),
                dwell: has_times.then(|| view(Measure::Dwell, &st.dwell, ps)),
                one_way: if full { st.offset.result() } else { None },
                clamped: st.clamped,
                max_lost_in_a_row: st.runs.longest(),
                stopped: r.stopped,
                kernel: (out.timestamps.rx || st.kernel.replies > 0).then(|| kernel(&st.kernel, ps)),
            }
        })
        .collect();
    let combined = (out.responders.len() > 1).then(|| {
        let mut all = latency::histogram();
        for r in &out.responders {
            // Same bounds and precision: cannot fail.
            let _ = all.add(&r.stats.rtt);
        }
        view(main, &all, ps)
    });
    let rate = cfg.rate().map(|r| {
        let achieved = out.slip.achieved_per_sec().unwrap_or(0.0);
        // Kept up with what the schedule asked for: a Poisson schedule's own rate over a
        // finite run differs from the requested mean by chance, which is not falling behind.
        let asked = match cfg.pacing {
            wirebench_core::schedule::Pacing::Poisson { .. } => out.slip.scheduled_per_sec().unwrap_or(r.per_sec()),
            _ => r.per_sec(),
        };
        RateResult {
            requested_per_s: r.per_sec(),
            achieved_per_s: achieved,
            slip_mean_ns: out.slip.mean_ns(),
            slip_max_ns: out.slip.max_ns(),
            kept_up: achieved >= KEPT_UP_SHARE * asked,
            lateness: Some(view(Measure::SendLateness, &out.lateness, ps)),
        }
    });
    PingResults {
        proto: cfg.proto.name().into(),
        target: cfg.target.addr().to_string(),
        pacing: if open { Pacing::Open } else { Pacing::Closed },
        probe_size: cfg.size,
        probe_form: if full { ProbeForm::Full } else { ProbeForm::Compact },
        sent: out.sent,
        warmup_sent: out.warmup_sent,
        timeout_ns: nanos(cfg.timeout),
        rate,
        thread: ThreadInfo {
            spin: cfg.spin,
            pinned_cpu: cfg.cpu,
            seen_cpus: (0..128).filter(|c| out.cpus_seen & (1 << c) != 0).collect(),
        },
        responders,
        combined,
        ignored: out.ignored,
        gave_up: out.gave_up,
    }
}

fn kind(software: u64, hardware: u64) -> String {
    if hardware > 0 {
        "hardware"
    } else if software > 0 {
        "software"
    } else {
        "none"
    }
    .into()
}

/// A responder's round trips split by kernel timestamps.
fn kernel(k: &KernelStats, ps: &[f64]) -> KernelResult {
    let measures = match k.scope {
        Some(StackScope::BothHosts) => Measure::StackRtt,
        _ => Measure::PingerStackRtt,
    };
    let split = !k.stack.is_empty();
    KernelResult {
        tx: kind(k.tx, k.hardware),
        rx: kind(k.rx, k.hardware),
        replies: k.replies,
        tx_stamps: k.tx,
        rx_stamps: k.rx,
        out_of_order: k.rx_after_app + k.tx_before_app,
        stack: split.then(|| view(measures, &k.stack, ps)),
        hosts: split.then(|| view(Measure::HostsShare, &k.hosts, ps)),
    }
}

/// The attribution section of a ping run: the kernel counters across it (host-wide), its
/// lost probes split by them, and notes on the timestamps it could not have. The stall
/// meter's part is added by the caller.
pub fn attribution(
    out: &EngineOutput,
    lost: u64,
    before: &Snapshot,
    after: &Snapshot,
    stamp_note: Option<String>,
) -> Attribution {
    let counters = before.delta(after);
    let mut notes: Vec<String> = stamp_note.into_iter().collect();
    if out.timestamps.rx && !out.timestamps.tx {
        notes.push(
            "TX timestamps unavailable (the device gave none): round trips are not split into stack to stack and \
             the hosts' own share"
                .into(),
        );
    }
    let this_host_only = out.responders.iter().any(|r| r.stats.kernel.scope == Some(StackScope::ThisHost));
    let full = out.responders.iter().any(|r| !r.stats.dwell.is_empty());
    if this_host_only && full {
        notes.push(
            "the responder did not stamp its receive time with its kernel's (an older serve): its wake-up is \
             inside stack to stack"
                .into(),
        );
    }
    notes.extend(counters.missing.iter().map(|m| format!("counter unavailable: {m}")));
    Attribution { loss: Some(counters.split_loss(lost)), counters: Some(counters), notes, ..Attribution::default() }
}
