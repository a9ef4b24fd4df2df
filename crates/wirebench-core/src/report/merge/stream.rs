//! Merging stream reports: several `wirebench stream` generators run at the same time with
//! one scenario against the same serves (or listeners). Additive counts are summed; what is
//! derived from them (missing, loss, mean offset, mean gap) is recomputed from the sums,
//! because the model keeps only the counts. Rates are the sum of each part's rate over its
//! own sending time; the merged `send_ns` is the time that gives that rate from the summed
//! count (count / summed rate: each part's sending time when they all sent equally long).
//!
//! A receiver (matched by address and direction) sums its parts' `StreamCounts` (received,
//! bytes, expected, duplicates, out of order and their offsets, gaps, too old); jitter is
//! the largest part's and first/last arrival the earliest/latest (not additive). Its
//! per-publisher rows are the parts' rows one after the other (each is one real stream);
//! its interval rows are added by index, each ending at the latest part's end. The kernel
//! counters of a receiver host are host-wide, so a receiver that several parts fed keeps
//! none (each part's snapshot counts the others' datagrams too), nor the loss split made
//! from them; the sender's `SndbufErrors` (host-wide too) and the generator's health (one
//! process's threads, CPU and verdict) are kept only from a merge of one.
//!
//! Refused: a rate search or a size sweep (each generator searched alone), `listen`
//! reports (two listeners of one group hear the same datagrams), parts of a different
//! proto, direction or size, the same run twice, and reports with no sending time.

use std::collections::BTreeMap;

use super::{Input, MergeError, err, finite_sum, sat_sum, weighted_mean};
use crate::report::{IntervalRow, ReceiverResult, Results, SenderResult, StreamDirection, StreamResults};
use crate::stream::StreamCounts;

fn parts<'a>(inputs: &[Input<'a>]) -> Vec<(&'a str, &'a StreamResults)> {
    inputs
        .iter()
        .filter_map(|i| match &i.report.results {
            Results::Stream(s) => Some((i.name, s)),
            _ => None,
        })
        .collect()
}

/// The time that gives `count` at the summed rate `per_s` (ns, rounded); `fallback` when
/// nothing was counted.
#[expect(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "rates")]
fn time_base(count: u64, per_s: f64, fallback: u64) -> u64 {
    if count == 0 || per_s <= 0.0 { fallback } else { (count as f64 * 1e9 / per_s).round() as u64 }
}

/// Messages per second of `count` over `ns`.
#[expect(clippy::cast_precision_loss, reason = "rates")]
fn rate(count: u64, ns: u64) -> f64 {
    if ns == 0 { 0.0 } else { count as f64 * 1e9 / ns as f64 }
}

fn check(parts: &[(&str, &StreamResults)]) -> Result<(), MergeError> {
    let (first_name, first) = parts[0];
    for (name, s) in parts {
        if s.search.is_some() || !s.sweep.is_empty() {
            let what = if s.search.is_some() { "a rate search (--find-max-rate)" } else { "a size sweep (--sizes)" };
            return Err(err(format!(
                "{name}: {what} does not add (each generator searched alone): merge plain stream runs"
            )));
        }
        if s.listen.is_some() || s.receivers.iter().any(|r| r.direction == StreamDirection::Listen) {
            return Err(err(format!(
                "{name}: listen reports do not add (listeners of one group hear the same datagrams): show them side by side instead"
            )));
        }
        for (what, mine, theirs) in [
            ("proto", s.proto.to_string(), first.proto.to_string()),
            ("direction", s.direction.to_string(), first.direction.to_string()),
            ("size", s.size.to_string(), first.size.to_string()),
        ] {
            if mine != theirs {
                return Err(err(format!("{name}: {what} {mine} where {first_name} has {theirs}")));
            }
        }
        if let Some(t) = s.sender
            && t.messages > 0
            && t.send_ns == 0
        {
            return Err(err(format!("{name}: no sending time (written before it was recorded): run it again")));
        }
        if let Some(r) = s.receivers.iter().find(|r| r.send_ns == 0 && r.total.received > 0) {
            return Err(err(format!(
                "{name}: receiver {} has no sending time (written before it was recorded): run it again",
                r.addr
            )));
        }
    }
    for (i, (a, sa)) in parts.iter().enumerate() {
        if let Some((b, _)) = parts[i + 1..].iter().find(|(_, sb)| sb == sa) {
            return Err(err(format!("{a} and {b} are the same run: give each generator's report once")));
        }
    }
    Ok(())
}

fn sender(parts: &[(&str, &StreamResults)]) -> Result<Option<SenderResult>, MergeError> {
    let s: Vec<&SenderResult> = parts.iter().filter_map(|(_, p)| p.sender.as_ref()).collect();
    if s.is_empty() {
        return Ok(None);
    }
    let messages = sat_sum(s.iter().map(|t| t.messages));
    let per_s = finite_sum("sender.per_s", s.iter().map(|t| t.per_s))?;
    let retransmits: Vec<u64> = s.iter().filter_map(|t| t.retransmits).collect();
    Ok(Some(SenderResult {
        messages,
        bytes: sat_sum(s.iter().map(|t| t.bytes)),
        per_s,
        bits_per_s: finite_sum("sender.bits_per_s", s.iter().map(|t| t.bits_per_s))?,
        send_ns: time_base(messages, per_s, s.iter().map(|t| t.send_ns).max().unwrap_or(0)),
        slip_mean_ns: weighted_mean(s.iter().map(|t| (t.slip_mean_ns, t.messages))),
        slip_max_ns: s.iter().map(|t| t.slip_max_ns).max().unwrap_or(0),
        gso: s.iter().any(|t| t.gso),
        retransmits: (!retransmits.is_empty()).then(|| sat_sum(retransmits)),
        // host-wide: generators on one host would each count the others' drops
        sndbuf_errors: if s.len() == 1 { s[0].sndbuf_errors } else { None },
        qdisc_drops: if s.len() == 1 { s[0].qdisc_drops } else { None },
    }))
}

/// Interval rows added by index; each ends at the latest part's end of that row. A row's
/// loss split, made from host-wide counters like the receiver's, is kept only from a merge
/// of one (then the rows still add up to the receiver's split).
fn intervals(rows: &[&ReceiverResult]) -> Vec<IntervalRow> {
    let n = rows.iter().map(|r| r.intervals.len()).max().unwrap_or(0);
    (0..n)
        .map(|k| {
            let mut out = IntervalRow { at_ns: 0, counts: StreamCounts::default(), loss_split: None };
            for row in rows.iter().filter_map(|r| r.intervals.get(k)) {
                out.at_ns = out.at_ns.max(row.at_ns);
                out.counts.add(&row.counts);
            }
            if let [one] = rows {
                out.loss_split = one.intervals.get(k).and_then(|r| r.loss_split);
            }
            out
        })
        .collect()
}

fn receiver(rows: &[&ReceiverResult]) -> ReceiverResult {
    let mut total = StreamCounts::default();
    for r in rows {
        total.add(&r.total);
    }
    let per_s = rows.iter().map(|r| rate(r.total.received, r.time_base_ns())).sum();
    ReceiverResult {
        addr: rows[0].addr.clone(),
        direction: rows[0].direction,
        sent: sat_sum(rows.iter().map(|r| r.sent)),
        total,
        publishers: rows.iter().flat_map(|r| r.publishers.iter().copied()).collect(),
        intervals: intervals(rows),
        send_ns: time_base(total.received, per_s, rows.iter().map(|r| r.send_ns).max().unwrap_or(0)),
        // the merged time base is `send_ns`, made from each part's own time base above
        recv_ns: 0,
        foreign: sat_sum(rows.iter().map(|r| r.foreign)),
        kernel: if rows.len() == 1 { rows[0].kernel.clone() } else { None },
        // split by those counters: kept with them
        loss_split: if rows.len() == 1 { rows[0].loss_split } else { None },
        // one receiving thread's: parts fed by different threads do not add
        wake: if rows.len() == 1 { rows[0].wake } else { None },
    }
}

/// The generators' results as one.
pub(super) fn merge(inputs: &[Input<'_>]) -> Result<StreamResults, MergeError> {
    let parts = parts(inputs);
    check(&parts)?;
    let first = parts[0].1;
    let mut order: Vec<Vec<&ReceiverResult>> = Vec::new();
    let mut index: BTreeMap<(&str, StreamDirection), usize> = BTreeMap::new();
    for (_, s) in &parts {
        for r in &s.receivers {
            let k = *index.entry((r.addr.as_str(), r.direction)).or_insert_with(|| {
                order.push(Vec::new());
                order.len() - 1
            });
            order[k].push(r);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let warnings: Vec<String> =
        parts.iter().flat_map(|(_, s)| &s.warnings).filter(|w| seen.insert(w.as_str())).cloned().collect();
    Ok(StreamResults {
        proto: first.proto,
        direction: first.direction,
        size: first.size,
        publishers: first.publishers,
        rate_per_s: first.rate_per_s,
        sender: sender(&parts)?,
        receivers: order.iter().map(|rows| receiver(rows)).collect(),
        search: None,
        sweep: Vec::new(),
        warnings,
        listen: None,
        // each process's own threads, CPU and verdict: one part's is kept, several are not
        // one generator's
        generator: if parts.len() == 1 { first.generator.clone() } else { None },
    })
}

#[cfg(test)]
mod tests;
