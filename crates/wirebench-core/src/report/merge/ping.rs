//! Merging ping reports: several generators against the same responders (one scenario).
//! Responders are matched by address; what only one process can know (clock offset, the
//! kernel timestamps' split, when a responder stopped, the generator's thread) is left out
//! or taken from the first report, as the docs say.

use std::collections::BTreeMap;

use super::{Input, MergeError, add_views, finite_sum, sat_sum, weighted_mean};
use crate::report::{LatencyView, PingResults, RateResult, ResponderResult, Results};

fn optional<'a>(what: &str, views: &[(&'a str, Option<&'a LatencyView>)]) -> Result<Option<LatencyView>, MergeError> {
    let present: Vec<(&str, &LatencyView)> = views.iter().filter_map(|(n, v)| v.map(|v| (*n, v))).collect();
    if present.is_empty() { Ok(None) } else { add_views(what, present).map(Some) }
}

fn responder(addr: &str, rows: &[(&str, &ResponderResult)]) -> Result<ResponderResult, MergeError> {
    let what = |v: &str| format!("responder {addr} {v}");
    let sum = |f: fn(&ResponderResult) -> u64| sat_sum(rows.iter().map(|(_, r)| f(r)));
    let opt =
        |f: fn(&ResponderResult) -> Option<&LatencyView>| rows.iter().map(|(n, r)| (*n, f(r))).collect::<Vec<_>>();
    Ok(ResponderResult {
        addr: addr.to_owned(),
        received: sum(|r| r.received),
        lost: sum(|r| r.lost),
        late: sum(|r| r.late),
        duplicates: sum(|r| r.duplicates),
        latency: add_views(&what("latency"), rows.iter().map(|(n, r)| (*n, &r.latency)))?,
        uncorrected: optional(&what("uncorrected"), &opt(|r| r.uncorrected.as_ref()))?,
        warmup: add_views(&what("warmup"), rows.iter().map(|(n, r)| (*n, &r.warmup)))?,
        network: optional(&what("network"), &opt(|r| r.network.as_ref()))?,
        dwell: optional(&what("dwell"), &opt(|r| r.dwell.as_ref()))?,
        one_way: None,
        clamped: sum(|r| r.clamped),
        max_lost_in_a_row: rows.iter().map(|(_, r)| r.max_lost_in_a_row).max().unwrap_or(0),
        stopped: None,
        kernel: None,
    })
}

/// The generators' results as one.
pub(super) fn merge(inputs: &[Input<'_>]) -> Result<PingResults, MergeError> {
    let parts: Vec<(&str, &PingResults)> = inputs
        .iter()
        .filter_map(|i| match &i.report.results {
            Results::Ping(p) => Some((i.name, p)),
            _ => None,
        })
        .collect();
    let first = parts[0].1;
    let mut by_addr: BTreeMap<&str, Vec<(&str, &ResponderResult)>> = BTreeMap::new();
    for (name, p) in &parts {
        for r in &p.responders {
            by_addr.entry(r.addr.as_str()).or_default().push((name, r));
        }
    }
    let responders = by_addr.iter().map(|(addr, rows)| responder(addr, rows)).collect::<Result<Vec<_>, _>>()?;
    let combined = if responders.len() > 1 || parts.iter().any(|(_, p)| p.combined.is_some()) {
        Some(add_views("combined", responders.iter().map(|r| ("merged", &r.latency)))?)
    } else {
        None
    };
    let rates: Vec<&RateResult> = parts.iter().filter_map(|(_, p)| p.rate.as_ref()).collect();
    let rate = if rates.is_empty() {
        None
    } else {
        Some(RateResult {
            requested_per_s: finite_sum("rate.requested_per_s", rates.iter().map(|r| r.requested_per_s))?,
            achieved_per_s: finite_sum("rate.achieved_per_s", rates.iter().map(|r| r.achieved_per_s))?,
            slip_mean_ns: weighted_mean(
                parts.iter().filter_map(|(_, p)| p.rate.as_ref().map(|r| (r.slip_mean_ns, p.sent))),
            ),
            slip_max_ns: rates.iter().map(|r| r.slip_max_ns).max().unwrap_or(0),
            kept_up: rates.iter().all(|r| r.kept_up),
            // Every generator's lateness, or none (a part from an older version has none).
            lateness: parts
                .iter()
                .map(|(name, p)| p.rate.as_ref().and_then(|r| r.lateness.as_ref()).map(|v| (*name, v)))
                .collect::<Option<Vec<_>>>()
                .map(|views| add_views("rate.lateness", views))
                .transpose()?,
        })
    };
    Ok(PingResults {
        proto: first.proto.clone(),
        target: first.target.clone(),
        pacing: first.pacing,
        probe_size: first.probe_size,
        probe_form: first.probe_form,
        sent: sat_sum(parts.iter().map(|(_, p)| p.sent)),
        warmup_sent: sat_sum(parts.iter().map(|(_, p)| p.warmup_sent)),
        timeout_ns: first.timeout_ns,
        rate,
        thread: first.thread.clone(),
        responders,
        combined,
        ignored: sat_sum(parts.iter().map(|(_, p)| p.ignored)),
        gave_up: parts.iter().find_map(|(_, p)| p.gave_up),
    })
}
