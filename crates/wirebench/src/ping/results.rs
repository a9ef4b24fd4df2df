//! From what the engine measured to the report's `PingResults`.

use hdrhistogram::Histogram;
use wirebench_core::latency::{self, Summary};
use wirebench_core::report::{LatencyView, PingResults, RateResult, ResponderResult, ThreadInfo, encode_histogram};
use wirebench_core::schedule::Pacing;
use wirebench_core::wire::probe::Form;

use super::config::Config;
use super::engine::EngineOutput;

/// Below this share of the requested rate the report says the sender did not keep up.
const KEPT_UP_SHARE: f64 = 0.99;

fn view(measures: &str, h: &Histogram<u64>, ps: &[f64]) -> LatencyView {
    LatencyView { measures: measures.into(), summary: Summary::of(h, ps), histogram: encode_histogram(h) }
}

/// Builds the results.
pub(super) fn build(cfg: &Config, out: &EngineOutput) -> PingResults {
    let ps = &cfg.percentiles;
    let open = matches!(cfg.pacing, Pacing::Rate(_));
    let main = if open { "rtt_from_intended_send" } else { "rtt_from_send" };
    let full = Form::for_len(cfg.size) == Form::Full;
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
                latency: view(main, &st.rtt, ps),
                uncorrected: st.rtt_uncorrected.as_ref().map(|h| view("rtt_from_actual_send", h, ps)),
                warmup: view(main, &st.warmup, ps),
                network: has_times.then(|| view("network_rtt", &st.network, ps)),
                dwell: has_times.then(|| view("dwell", &st.dwell, ps)),
                one_way: if full { st.offset.result() } else { None },
                clamped: st.clamped,
                max_lost_in_a_row: st.runs.longest(),
                stopped: r.stopped,
                kernel: None,
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
        RateResult {
            requested_per_s: r.per_sec(),
            achieved_per_s: achieved,
            slip_mean_ns: out.slip.mean_ns(),
            slip_max_ns: out.slip.max_ns(),
            kept_up: achieved >= KEPT_UP_SHARE * r.per_sec(),
        }
    });
    PingResults {
        proto: cfg.proto.name().into(),
        target: cfg.target.addr().to_string(),
        pacing: if open { "open" } else { "closed" }.into(),
        probe_size: cfg.size,
        probe_form: Form::for_len(cfg.size).name().into(),
        sent: out.sent,
        warmup_sent: out.warmup_sent,
        timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
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
