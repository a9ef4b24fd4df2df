//! `wirebench report --merge`: several reports of one scenario (the shards of a load run,
//! several ping or stream generators against one server) made into one, exactly: histograms
//! are added (HdrHistogram's own add) and every percentile is computed after the add, never
//! averaged; counters are summed, saturating at `u64::MAX` (a file is not trusted), and rates
//! summed, a sum that is not finite refused (stream: `merge/stream.rs`).
//!
//! Refused, with one line naming the inputs and what differs: reports of different modes,
//! of different scenarios (their `config` differs anywhere but in the fields a part may
//! differ in, such as `shard`), the same shard twice, and histograms that do not decode or
//! do not add. Modes whose parts are not additive (mesh, proxy, relay, hiccup) are refused
//! too. So are parts that did not run together (`merge/window.rs`: their run windows do not
//! overlap) and, unless [`Options::partial`], the shards of a load run with some missing.

mod generator_health;
mod load;
mod ping;
mod stream;
mod window;

use hdrhistogram::Histogram;

use super::{LatencyView, Outcome, Report, Results, decode_histogram, encode_histogram};
use crate::latency::Summary;

/// One input: a report and the name it is known by (its file).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Shown in errors.
    pub name: &'a str,
    /// The report.
    pub report: &'a Report,
}

/// Why reports cannot be merged: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MergeError(pub String);

/// How to merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Merge the shards of a load run even when some are missing (`report --merge
    /// --partial`); the merged results say which ([`super::LoadPartial`]).
    pub partial: bool,
}

/// A merged report, and the warnings to print beside it (one line each).
#[derive(Debug, Clone)]
pub struct Merged {
    /// The report.
    pub report: Report,
    /// Things the user should know that do not make the merge wrong (parts that started
    /// more than [`window::START_SPREAD_NS`] apart).
    pub warnings: Vec<String>,
}

pub use window::START_SPREAD_NS;

fn err(msg: impl Into<String>) -> MergeError {
    MergeError(msg.into())
}

/// Top-level `config` keys a part of a scenario may have of its own: which shard, and the
/// process's own outputs and placement (ping and stream write these into their `config`).
pub const PER_PART: [&str; 11] =
    ["shard", "json", "series", "hgrm", "hlog", "quiet", "table", "cpu", "interface", "log", "poisson"];

/// The mode's name as the results tag it.
pub fn mode(r: &Report) -> &'static str {
    match r.results {
        Results::Ping(_) => "ping",
        Results::Stream(_) => "stream",
        Results::Proxy(_) => "proxy",
        Results::Load(_) => "load",
        Results::Mesh(_) => "mesh",
        Results::Hiccup => "hiccup",
        Results::Relay(_) => "relay",
    }
}

/// The first place two JSON values differ: its path and both values (shortened).
pub fn first_difference(path: &str, left: &serde_json::Value, right: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (left, right) {
        (Value::Object(lm), Value::Object(rm)) => {
            let keys: std::collections::BTreeSet<&String> = lm.keys().chain(rm.keys()).collect();
            keys.into_iter().find_map(|k| {
                let at = format!("{path}.{k}");
                match (lm.get(k), rm.get(k)) {
                    (Some(lv), Some(rv)) => first_difference(&at, lv, rv),
                    (lv, rv) => Some(format!("{at} differs ({} vs {})", short(lv), short(rv))),
                }
            })
        }
        (Value::Array(la), Value::Array(ra)) if la.len() == ra.len() => {
            la.iter().zip(ra).enumerate().find_map(|(i, (lv, rv))| first_difference(&format!("{path}[{i}]"), lv, rv))
        }
        _ if left == right => None,
        _ => Some(format!("{path} differs ({} vs {})", short(Some(left)), short(Some(right)))),
    }
}

fn short(v: Option<&serde_json::Value>) -> String {
    let Some(v) = v else { return "absent".into() };
    let s = v.to_string();
    if s.chars().count() > 60 { format!("{}...", s.chars().take(57).collect::<String>()) } else { s }
}

/// Checks that every input is a report of the first's mode and scenario.
pub fn check_compatible(inputs: &[Input<'_>]) -> Result<(), MergeError> {
    let first = inputs.first().ok_or_else(|| err("nothing to merge"))?;
    let strip = |r: &Report| {
        let mut c = r.config.clone();
        if let Some(m) = c.as_object_mut() {
            for k in PER_PART {
                m.remove(k);
            }
        }
        c
    };
    let base = strip(first.report);
    for i in &inputs[1..] {
        let (ma, mb) = (mode(first.report), mode(i.report));
        if ma != mb {
            return Err(err(format!(
                "{} is a {ma} report and {} a {mb} report: merge reports of one mode",
                first.name, i.name
            )));
        }
        if let Some(d) = first_difference("config", &base, &strip(i.report)) {
            return Err(err(format!("{} and {} are not parts of one scenario: {d}", first.name, i.name)));
        }
    }
    Ok(())
}

/// Merges reports of one scenario into one, every shard required (see the module's
/// documentation).
pub fn merge(inputs: &[Input<'_>]) -> Result<Report, MergeError> {
    merge_with(inputs, Options::default()).map(|m| m.report)
}

/// [`merge`] with `opts`, and the warnings.
pub fn merge_with(inputs: &[Input<'_>], opts: Options) -> Result<Merged, MergeError> {
    check_compatible(inputs)?;
    let warnings = window::check(inputs)?;
    let first = inputs[0].report;
    let results = match &first.results {
        Results::Load(_) => Results::Load(load::merge(inputs, opts.partial)?),
        Results::Ping(_) => {
            // Load refuses a shard given twice and stream the same parts twice; a ping
            // report given twice (or a copy of it) would count every probe twice.
            for (i, a) in inputs.iter().enumerate() {
                let same = |b: &&Input<'_>| b.report.meta == a.report.meta && b.report.results == a.report.results;
                if let Some(b) = inputs[i + 1..].iter().find(same) {
                    return Err(err(format!("{} and {} are the same run: give each report once", a.name, b.name)));
                }
            }
            Results::Ping(ping::merge(inputs)?)
        }
        Results::Stream(_) => Results::Stream(stream::merge(inputs)?),
        _ => {
            return Err(err(format!(
                "{}: {} reports cannot be merged (load, ping and stream can)",
                inputs[0].name,
                mode(first)
            )));
        }
    };
    let mut meta = first.meta.clone();
    let mut earliest = window::started_ns(&inputs[0])?;
    for i in inputs {
        let start = window::started_ns(i)?;
        if start < earliest {
            earliest = start;
            meta.started_at.clone_from(&i.report.meta.started_at);
        }
        meta.duration_ns = meta.duration_ns.max(i.report.meta.duration_ns);
    }
    let worst = |o: Outcome| match o {
        Outcome::Completed => 0,
        Outcome::Interrupted => 1,
        Outcome::PeerSilent => 2,
    };
    let outcome = inputs.iter().map(|i| i.report.outcome).max_by_key(|o| worst(*o)).unwrap_or(Outcome::Completed);
    let mut config = first.config.clone();
    if let Some(m) = config.as_object_mut() {
        for k in PER_PART {
            m.remove(k);
        }
        m.insert("merged_from".into(), inputs.iter().map(|i| i.name).collect::<Vec<_>>().into());
    }
    let report = Report { schema_version: first.schema_version, meta, config, outcome, results, attribution: None };
    Ok(Merged { report, warnings })
}

/// Decodes one embedded histogram, naming it on failure.
fn decode(name: &str, what: &str, text: &str) -> Result<Histogram<u64>, MergeError> {
    decode_histogram(text).map_err(|e| err(format!("{name}: {what}: {e}")))
}

/// Histograms added in order, the first's configuration kept and its counts grown to hold
/// every part's largest value (a part's range is where its recorder had grown to; each is
/// bounded by the decoder).
fn add_all<'a>(what: &str, parts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Histogram<u64>, MergeError> {
    let mut total: Option<Histogram<u64>> = None;
    for (name, text) in parts {
        let mut h = decode(name, what, text)?;
        match &mut total {
            None => {
                h.auto(true);
                total = Some(h);
            }
            Some(t) => t.add(&h).map_err(|e| err(format!("{name}: {what}: does not add ({e:?})")))?,
        }
    }
    total.ok_or_else(|| err(format!("{what}: nothing to merge")))
}

/// One view from several: the histograms added, the summary recomputed at the first's
/// percentiles.
fn add_views<'a>(
    what: &str,
    views: impl IntoIterator<Item = (&'a str, &'a LatencyView)>,
) -> Result<LatencyView, MergeError> {
    let views: Vec<(&str, &LatencyView)> = views.into_iter().collect();
    let first = views.first().ok_or_else(|| err(format!("{what}: nothing to merge")))?.1;
    if let Some((name, v)) = views.iter().find(|(_, v)| v.measures != first.measures) {
        return Err(err(format!("{name}: {what} measures {} where the first measures {}", v.measures, first.measures)));
    }
    let h = add_all(what, views.iter().map(|(n, v)| (*n, v.histogram.as_str())))?;
    let ps: Vec<f64> = first.summary.percentiles.iter().map(|q| q.p).collect();
    Ok(LatencyView { measures: first.measures.clone(), summary: Summary::of(&h, &ps), histogram: encode_histogram(&h) })
}

/// A mean over parts, weighted by their counts (integer arithmetic, rounded down). Exact for
/// any counts from files: each part's share is added as a quotient and a remainder of the
/// total count, so nothing overflows (a running sum of products did, with two parts near
/// `u64::MAX`).
fn weighted_mean(parts: impl IntoIterator<Item = (u64, u64)>) -> u64 {
    let parts: Vec<(u64, u64)> = parts.into_iter().collect();
    let n: u128 = parts.iter().map(|&(_, count)| u128::from(count)).sum();
    if n == 0 {
        return 0;
    }
    let (mut q, mut r) = (0u128, 0u128);
    for (mean, count) in parts {
        let t = u128::from(mean) * u128::from(count);
        q += t / n;
        r += t % n;
        if r >= n {
            q += 1;
            r -= n;
        }
    }
    u64::try_from(q).unwrap_or(u64::MAX)
}

/// Counts from files added saturating: a report with huge counts gives `u64::MAX`, not an
/// overflow (a panic in debug builds, a wrapped figure in release).
fn sat_sum(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, u64::saturating_add)
}

/// Rates from files added. The reader refuses a number that is not finite, but finite parts
/// can add up to infinity: refused, naming the field.
fn finite_sum(what: &str, xs: impl IntoIterator<Item = f64>) -> Result<f64, MergeError> {
    let s: f64 = xs.into_iter().sum();
    if s.is_finite() {
        Ok(s)
    } else {
        Err(err(format!("{what}: the parts add up to a number that is not finite (a report holds one too large)")))
    }
}

#[cfg(test)]
mod tests;
