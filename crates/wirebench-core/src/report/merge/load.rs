//! Merging load reports: the shards of one scenario (`load --shard K/N`).

use std::collections::BTreeMap;

use super::{Input, MergeError, add_all, add_views, err, finite_sum, sat_sum, weighted_mean};
use crate::latency::value_at_percentile;
use crate::load::Threshold;
use crate::load::results::verdict;
use crate::report::{
    LatencyView, LoadAccount, LoadConnections, LoadLink, LoadPartial, LoadResults, LoadSecond, LoadTypeResult,
    ProcessUse, Results, ThresholdResult, decode_histogram, encode_histogram,
};

fn parts<'a>(inputs: &[Input<'a>]) -> Vec<(&'a str, &'a LoadResults)> {
    inputs
        .iter()
        .filter_map(|i| match &i.report.results {
            Results::Load(l) => Some((i.name, l)),
            _ => None,
        })
        .collect()
}

fn account(accounts: &[&LoadAccount]) -> LoadAccount {
    let mut a = LoadAccount::default();
    for x in accounts {
        a.expected = a.expected.saturating_add(x.expected);
        a.arrived = a.arrived.saturating_add(x.arrived);
        a.missing = a.missing.saturating_add(x.missing);
        a.dropped = a.dropped.saturating_add(x.dropped);
        a.late = a.late.saturating_add(x.late);
        a.duplicates = a.duplicates.saturating_add(x.duplicates);
        for (k, v) in &x.closed {
            let n: &mut u64 = a.closed.entry(k.clone()).or_default();
            *n = n.saturating_add(*v);
        }
    }
    a
}

fn type_row(name: &str, rows: &[(&str, &LoadTypeResult)]) -> Result<LoadTypeResult, MergeError> {
    let what = |v: &str| format!("type {name} {v}");
    let first = rows[0].1;
    let sum = |f: fn(&LoadTypeResult) -> u64| sat_sum(rows.iter().map(|(_, r)| f(r)));
    let reply = if rows.iter().all(|(_, r)| r.reply.is_none()) {
        None
    } else {
        let with: Vec<(&str, &LatencyView)> =
            rows.iter().filter_map(|(n, r)| r.reply.as_ref().map(|v| (*n, v))).collect();
        Some(add_views(&what("reply"), with)?)
    };
    Ok(LoadTypeResult {
        name: first.name.clone(),
        share_pct: first.share_pct,
        request: rows.iter().any(|(_, r)| r.request),
        size: first.size,
        sent: sum(|r| r.sent),
        received: sum(|r| r.received),
        expected: sum(|r| r.expected),
        arrived: sum(|r| r.arrived),
        missing: sum(|r| r.missing),
        unexpected: sum(|r| r.unexpected),
        delay: add_views(&what("delay"), rows.iter().map(|(n, r)| (*n, &r.delay)))?,
        delay_intended: add_views(&what("delay_intended"), rows.iter().map(|(n, r)| (*n, &r.delay_intended)))?,
        reply,
    })
}

fn link(name: &str, links: &[(&str, Option<&LoadLink>)]) -> Result<Option<LoadLink>, MergeError> {
    let present: Vec<(&str, &LoadLink)> = links.iter().filter_map(|(n, l)| l.map(|l| (*n, l))).collect();
    let Some((_, first)) = present.first() else { return Ok(None) };
    Ok(Some(LoadLink {
        requested_bps: first.requested_bps,
        requested_delay_ns: first.requested_delay_ns,
        method: first.method,
        achieved_bps_max_client: present.iter().map(|(_, l)| l.achieved_bps_max_client).fold(0.0, f64::max),
        frames: sat_sum(present.iter().map(|(_, l)| l.frames)),
        hold: add_views(name, present.iter().map(|(n, l)| (*n, &l.hold)))?,
    }))
}

/// Seconds of the run added up by `at_s` (the shards started together: `--start-at`), each
/// second's percentiles from its added histogram.
fn series(parts: &[(&str, &LoadResults)]) -> Result<Vec<LoadSecond>, MergeError> {
    let mut by_s: BTreeMap<u64, Vec<(&str, &LoadSecond)>> = BTreeMap::new();
    for (name, l) in parts {
        for row in &l.series {
            by_s.entry(row.at_s).or_default().push((name, row));
        }
    }
    let mut out = Vec::with_capacity(by_s.len());
    for (at_s, rows) in by_s {
        let what = format!("second {at_s}");
        let mut texts = Vec::with_capacity(rows.len());
        for (name, r) in &rows {
            let t = r.delay_histogram.as_deref().ok_or_else(|| {
                err(format!("{name}: {what} has no histogram (written before report --merge existed): run it again"))
            })?;
            texts.push((*name, t));
        }
        let h = add_all(&what, texts)?;
        out.push(LoadSecond {
            at_s,
            sent: sat_sum(rows.iter().map(|(_, r)| r.sent)),
            received: sat_sum(rows.iter().map(|(_, r)| r.received)),
            delay_p50_ns: value_at_percentile(&h, 50.0),
            delay_p99_ns: value_at_percentile(&h, 99.0),
            delay_histogram: Some(encode_histogram(&h)),
        });
    }
    Ok(out)
}

/// The subprotocols the server chose, added over the parts (each client is in one part).
fn chosen(parts: &[(&str, &LoadResults)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (_, l) in parts {
        for (k, v) in &l.connections.subprotocols {
            let n: &mut u64 = out.entry(k.clone()).or_default();
            *n = n.saturating_add(*v);
        }
    }
    out
}

/// A threshold judged again on the merged histograms (its scope as `load` reads it).
fn judge(expr: &str, l: &LoadResults) -> Result<ThresholdResult, MergeError> {
    let t: Threshold = expr.parse().map_err(|_| err(format!("threshold '{expr}' does not parse")))?;
    let view = match t.scope.as_deref() {
        None => Some(&l.overall.delay),
        Some("reply") => l.overall.reply.as_ref(),
        Some(name) => l
            .types
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| if r.request { r.reply.as_ref() } else { Some(&r.delay) }),
    };
    let Some(view) = view else { return Ok(ThresholdResult { expr: expr.into(), value_ns: None, passed: false }) };
    let h = decode_histogram(&view.histogram).map_err(|e| err(format!("threshold '{expr}': {e}")))?;
    Ok(verdict(&t, &h))
}

/// The most shards a merge takes (`load --shard K/N` with N up to this): a report's
/// `shard.count` sizes the list of missing shards, and a file is not trusted.
pub(super) const MAX_SHARDS: u64 = 1 << 16;

/// "1/3", "1/3 and 3/3", "1/5, 3/5 and 5/5".
pub(super) fn shard_list(ks: &[u64], count: u64) -> String {
    let names: Vec<String> = ks.iter().map(|k| format!("{k}/{count}")).collect();
    match names.split_last() {
        None => "none".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The shards of `1..=count` not in `seen`: refused, or (`partial`) what the merge lacks.
fn missing_shards(seen: &BTreeMap<u64, &str>, count: u64, partial: bool) -> Result<Option<LoadPartial>, MergeError> {
    // `merge` refuses a count past MAX_SHARDS; the bound is kept here too, where the list
    // is allocated, so no count from a file can size it.
    let missing: Vec<u64> = (1..=count.min(MAX_SHARDS)).filter(|k| !seen.contains_key(k)).collect();
    if missing.is_empty() {
        return Ok(None);
    }
    if !partial {
        let got: Vec<u64> = seen.keys().copied().collect();
        return Err(err(format!(
            "{} {} missing: got {} (merge every shard of the run, or give --partial to merge these anyway)",
            if missing.len() == 1 { "shard" } else { "shards" },
            shard_list(&missing, count),
            shard_list(&got, count)
        )));
    }
    Ok(Some(LoadPartial { count, missing }))
}

/// The shards' results as one; shards missing are refused unless `partial`.
pub(super) fn merge(inputs: &[Input<'_>], partial: bool) -> Result<LoadResults, MergeError> {
    let parts = parts(inputs);
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    let counts: Vec<u64> = parts.iter().filter_map(|(_, l)| l.shard.map(|s| s.count)).collect();
    if !counts.is_empty() && counts.len() != parts.len() {
        return Err(err("some reports are shards (--shard K/N) and some are whole runs: merge the shards of one run"));
    }
    if counts.windows(2).any(|w| w[0] != w[1]) {
        return Err(err("the reports come from different shardings (--shard K/N with different N)"));
    }
    for (name, l) in &parts {
        if let Some(s) = l.shard {
            if s.count > MAX_SHARDS {
                return Err(err(format!("{name}: shard {}/{}: at most {MAX_SHARDS} shards", s.index, s.count)));
            }
            if s.index == 0 || s.index > s.count {
                return Err(err(format!("{name}: shard {}/{} is not one of 1..={}", s.index, s.count, s.count)));
            }
        }
        if let Some(s) = l.shard
            && let Some(other) = seen.insert(s.index, name)
        {
            return Err(err(format!("shard {}/{} is given twice ({other} and {name})", s.index, s.count)));
        }
    }
    let missing = match counts.first() {
        Some(&count) => missing_shards(&seen, count, partial)?,
        None => None,
    };
    let first = parts[0].1;
    if let Some((name, l)) = parts.iter().find(|(_, l)| l.types.len() != first.types.len()) {
        return Err(err(format!(
            "{name}: {} event types where {} has {}",
            l.types.len(),
            parts[0].0,
            first.types.len()
        )));
    }
    let sum = |f: fn(&LoadResults) -> u64| sat_sum(parts.iter().map(|(_, l)| f(l)));
    let fsum = |what: &str, f: fn(&LoadResults) -> f64| finite_sum(what, parts.iter().map(|(_, l)| f(l)));
    let mut types = Vec::with_capacity(first.types.len());
    for (i, t) in first.types.iter().enumerate() {
        let rows: Vec<(&str, &LoadTypeResult)> = parts.iter().map(|(n, l)| (*n, &l.types[i])).collect();
        if let Some((name, r)) = rows.iter().find(|(_, r)| r.name != t.name) {
            return Err(err(format!("{name}: event type {} is {} where {} has {}", i + 1, r.name, parts[0].0, t.name)));
        }
        types.push(type_row(&t.name, &rows)?);
    }
    let overall_rows: Vec<(&str, &LoadTypeResult)> = parts.iter().map(|(n, l)| (*n, &l.overall)).collect();
    let overall = type_row("all", &overall_rows)?;
    let (user_ns, system_ns) = (sum(|l| l.process.user_ns), sum(|l| l.process.system_ns));
    let (sent, received) = (sum(|l| l.sent), sum(|l| l.received));
    let events = sent.saturating_add(received);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for (_, l) in &parts {
        for (k, v) in &l.errors {
            let n: &mut u64 = errors.entry(k.clone()).or_default();
            *n = n.saturating_add(*v);
        }
    }
    let links = |f: fn(&LoadResults) -> Option<&LoadLink>| parts.iter().map(|(n, l)| (*n, f(l))).collect::<Vec<_>>();
    let mut merged = LoadResults {
        url: first.url.clone(),
        clients: sum(|l| l.clients),
        room_size: first.room_size,
        rate_per_client: first.rate_per_client,
        arrivals: first.arrivals.clone(),
        pacing: first.pacing.clone(),
        connections: LoadConnections {
            connected: sum(|l| l.connections.connected),
            failed: sum(|l| l.connections.failed),
            disconnects: sum(|l| l.connections.disconnects),
            connect_time: add_views("connections", parts.iter().map(|(n, l)| (*n, &l.connections.connect_time)))?,
            subprotocols: chosen(&parts),
        },
        requested_send_per_s: fsum("requested_send_per_s", |l| l.requested_send_per_s)?,
        achieved_send_per_s: fsum("achieved_send_per_s", |l| l.achieved_send_per_s)?,
        received_per_s: fsum("received_per_s", |l| l.received_per_s)?,
        sent,
        received,
        deliveries: account(&parts.iter().map(|(_, l)| &l.deliveries).collect::<Vec<_>>()),
        replies: account(&parts.iter().map(|(_, l)| &l.replies).collect::<Vec<_>>()),
        slip_mean_ns: weighted_mean(parts.iter().map(|(_, l)| (l.slip_mean_ns, l.sent))),
        slip_max_ns: parts.iter().map(|(_, l)| l.slip_max_ns).max().unwrap_or(0),
        generator: super::generator_health::merge(&parts)?,
        overall,
        types,
        link_up: link("link up", &links(|l| l.link_up.as_ref()))?,
        link_down: link("link down", &links(|l| l.link_down.as_ref()))?,
        errors,
        series: series(&parts)?,
        thresholds: Vec::new(),
        process: ProcessUse {
            user_ns,
            system_ns,
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            per_event_ns: if events == 0 { 0.0 } else { user_ns.saturating_add(system_ns) as f64 / events as f64 },
            max_rss_bytes: parts.iter().map(|(_, l)| l.process.max_rss_bytes).max().unwrap_or(0),
            room_in_process: parts.iter().any(|(_, l)| l.process.room_in_process),
        },
        shard: None,
        partial: missing,
    };
    merged.thresholds = first.thresholds.iter().map(|t| judge(&t.expr, &merged)).collect::<Result<_, _>>()?;
    Ok(merged)
}
