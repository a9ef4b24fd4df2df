//! From recordings to the report: merged histograms per event type and overall, the
//! delivery accounting, rates over one stated time base, links, thresholds, and the verdict
//! on a run in which nothing arrived.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::delivery::{Account, End};
use super::record::{ErrorKind, Recording, TypeRec};
use super::{Link, Mix, Stat, Threshold};
use crate::latency::{Summary, value_at_percentile};
use crate::report::{
    LatencyView, LinkMethod, LoadAccount, LoadConnections, LoadLink, LoadResults, LoadSecond, LoadTypeResult, Measure,
    ProcessUse, ThresholdResult, encode_histogram,
};

/// What a run was asked to do (the parts of its configuration the results restate).
#[derive(Debug, Clone)]
pub struct Shape<'a> {
    /// The URL of the first room.
    pub url: String,
    /// Clients.
    pub clients: u64,
    /// Members per room.
    pub room_size: u64,
    /// Events per second per client.
    pub rate_per_client: f64,
    /// `fixed` or `poisson`.
    pub arrivals: &'static str,
    /// The event mix.
    pub mix: &'a Mix,
    /// Percentiles to report.
    pub percentiles: &'a [f64],
    /// Thresholds to judge.
    pub thresholds: &'a [Threshold],
    /// Upload shaping.
    pub link_up: Option<Link>,
    /// Download shaping.
    pub link_down: Option<Link>,
    /// Sends stop this long after the start, ns.
    pub end_ns: u64,
    /// Clients join evenly over this, ns.
    pub ramp_ns: u64,
}

/// Run-wide counts the generator keeps outside the recordings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Handshakes completed.
    pub connected: u64,
    /// Connection attempts that failed.
    pub failed: u64,
    /// Connections lost before the end.
    pub disconnects: u64,
    /// Upload payload bits/s of the busiest client, as written to its socket.
    pub up_bps_max: u64,
    /// Download payload bits/s of the busiest client, as the model delivered.
    pub down_bps_max: u64,
    /// Frames written through the upload shaper.
    pub up_frames: u64,
    /// Frames through the download model.
    pub down_frames: u64,
}

fn view(measures: Measure, h: &Histogram<u64>, ps: &[f64]) -> LatencyView {
    LatencyView { measures, summary: Summary::of(h, ps), histogram: encode_histogram(h) }
}

fn row(r: &TypeRec, name: &str, share_pct: f64, request: bool, size: u64, ps: &[f64]) -> LoadTypeResult {
    LoadTypeResult {
        name: name.into(),
        share_pct,
        request,
        size,
        sent: r.sent,
        received: r.delay.len(),
        expected: r.expected,
        arrived: r.arrived.min(r.expected),
        missing: r.expected.saturating_sub(r.arrived),
        unexpected: r.unexpected,
        delay: view(Measure::DelayFromSend, &r.delay, ps),
        delay_intended: view(Measure::DelayFromIntendedSend, &r.delay_intended, ps),
        reply: (request || !r.reply.is_empty()).then(|| view(Measure::ReplyFromSend, &r.reply, ps)),
    }
}

/// The `all` row: every count the sum of the type rows' (a relayed type's expected and
/// arrived are its deliveries to other members, a request type's its replies, so the row's
/// are both), its histograms the merge of theirs. Each type's `arrived` is capped at its
/// `expected` (duplicates beyond it are not arrivals), so the row adds the capped values.
fn overall(all: &TypeRec, types: &[LoadTypeResult], request: bool, ps: &[f64]) -> LoadTypeResult {
    let mut r = row(all, "all", 100.0, request, 0, ps);
    r.arrived = types.iter().map(|t| t.arrived).sum();
    r.missing = types.iter().map(|t| t.missing).sum();
    r
}

/// The report's form of an [`Account`].
pub fn account(a: &Account) -> LoadAccount {
    LoadAccount {
        expected: a.expected,
        arrived: a.arrived,
        missing: a.missing,
        dropped: a.dropped,
        late: a.late,
        closed: a.closed.iter().map(|(e, n)| (End::name(*e), *n)).collect(),
        duplicates: a.duplicates,
    }
}

/// Builds the results. `rec` is every worker's recordings merged (its current second is
/// the series' last, partial row); `elapsed_ns` is how long the run took.
#[expect(clippy::too_many_arguments, reason = "the parts of a run, each from its own place")]
pub fn build(
    shape: &Shape<'_>,
    rec: &Recording,
    tally: (&Account, &Account),
    counts: Counts,
    mut series: Vec<LoadSecond>,
    elapsed_ns: u64,
    cpu: (u64, u64),
    max_rss_bytes: u64,
    room_in_process: bool,
) -> LoadResults {
    let ps = shape.percentiles;
    let mut all = TypeRec::new();
    for t in &rec.types {
        all.add(t);
    }
    let replies = all.reply.len();
    let types: Vec<LoadTypeResult> = shape
        .mix
        .types()
        .iter()
        .zip(&rec.types)
        .enumerate()
        .map(|(i, (t, r))| row(r, &t.name, shape.mix.share(i) * 100.0, t.request, t.size as u64, ps))
        .collect();
    let thresholds = shape.thresholds.iter().map(|t| judge(t, &all, &rec.types, shape.mix)).collect();
    if rec.second_sent + rec.second_received > 0 {
        // the last, partial second (the one percentile definition: latency::value_at_percentile)
        let at_s = series.last().map_or(1, |r| r.at_s + 1);
        let q = |p: f64| value_at_percentile(&rec.second, p);
        series.push(LoadSecond {
            at_s,
            sent: rec.second_sent,
            received: rec.second_received,
            delay_p50_ns: q(50.0),
            delay_p99_ns: q(99.0),
            delay_histogram: Some(encode_histogram(&rec.second)),
        });
    }
    let secs = send_secs(shape.end_ns, shape.ramp_ns, elapsed_ns);
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let per_s = |v: u64| v as f64 / secs;
    let received = all.delay.len() + replies;
    let events = all.sent + received;
    let link = |l: Option<Link>, method: LinkMethod, measures: Measure, bps: u64, frames: u64, h: &Histogram<u64>| {
        l.map(|l| LoadLink {
            requested_bps: l.rate.map(crate::units::BitRate::bps),
            requested_delay_ns: l.delay_ns,
            method,
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            achieved_bps_max_client: bps as f64,
            frames,
            hold: view(measures, h, ps),
        })
    };
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let requested = shape.clients as f64 * shape.rate_per_client;
    let (user_ns, system_ns) = cpu;
    LoadResults {
        url: shape.url.clone(),
        clients: shape.clients,
        room_size: shape.room_size,
        rate_per_client: shape.rate_per_client,
        arrivals: shape.arrivals.into(),
        pacing: "open_loop".into(),
        connections: LoadConnections {
            connected: counts.connected,
            failed: counts.failed,
            disconnects: counts.disconnects,
            connect_time: view(Measure::ConnectTime, &rec.connect, ps),
            subprotocols: BTreeMap::new(),
        },
        requested_send_per_s: requested,
        achieved_send_per_s: per_s(all.sent),
        received_per_s: per_s(received),
        sent: all.sent,
        received,
        deliveries: account(tally.0),
        replies: account(tally.1),
        slip_mean_ns: if all.sent == 0 {
            0
        } else {
            u64::try_from(rec.slip_sum / u128::from(all.sent)).unwrap_or(u64::MAX)
        },
        slip_max_ns: rec.slip_max,
        generator: None,
        overall: overall(&all, &types, replies > 0 || shape.mix.types().iter().any(|t| t.request), ps),
        types,
        link_up: link(
            shape.link_up,
            LinkMethod::Socket,
            Measure::ShaperHold,
            counts.up_bps_max,
            counts.up_frames,
            &rec.up_hold,
        ),
        link_down: link(
            shape.link_down,
            LinkMethod::Modelled,
            Measure::ModelledShaperHold,
            counts.down_bps_max,
            counts.down_frames,
            &rec.down_hold,
        ),
        errors: ErrorKind::ALL
            .iter()
            .zip(rec.errors)
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| (k.name().to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
        series,
        thresholds,
        process: ProcessUse {
            user_ns,
            system_ns,
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            per_event_ns: if events == 0 { 0.0 } else { (user_ns + system_ns) as f64 / events as f64 },
            max_rss_bytes,
            room_in_process,
        },
        shard: None,
        partial: None,
    }
}

/// The time base of the rates, seconds: the mean client's sending time. Clients join
/// evenly over the ramp and send until the end (or a stop), so on average from ramp / 2.
pub fn send_secs(end_ns: u64, ramp_ns: u64, elapsed_ns: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "seconds")]
    let s = end_ns.min(elapsed_ns).saturating_sub(ramp_ns / 2) as f64 / 1e9;
    s.max(1e-9)
}

/// A threshold's verdict: the statistic of its scope's delays (or replies); a scope with
/// nothing recorded fails.
pub fn judge(t: &Threshold, all: &TypeRec, per: &[TypeRec], mix: &Mix) -> ThresholdResult {
    let h = match t.scope.as_deref() {
        None => &all.delay,
        Some("reply") => &all.reply,
        Some(name) => match mix.types().iter().position(|e| e.name == name) {
            Some(i) if mix.types()[i].request => &per[i].reply,
            Some(i) => &per[i].delay,
            None => return ThresholdResult { expr: t.expr.clone(), value_ns: None, passed: false },
        },
    };
    verdict(t, h)
}

/// A threshold's verdict on one histogram (empty: nothing to measure, fails).
pub fn verdict(t: &Threshold, h: &Histogram<u64>) -> ThresholdResult {
    // the one percentile definition, as latency::Summary uses
    let value_ns = (!h.is_empty()).then(|| match t.stat {
        Stat::Percentile(p) => value_at_percentile(h, p),
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a mean of ns")]
        Stat::Mean => h.mean().round() as u64,
        Stat::Max => h.max(),
    });
    ThresholdResult { expr: t.expr.clone(), value_ns, passed: value_ns.is_some_and(|v| t.passes(v)) }
}

/// Why a run measured nothing it was meant to, if it did not: expected deliveries and
/// none arrived, or requests and no reply. A run like that exits 1.
pub fn nothing_arrived(l: &LoadResults) -> Option<String> {
    let relayed: Vec<&LoadTypeResult> = l.types.iter().filter(|t| !t.request).collect();
    let echoes: u64 = relayed.iter().map(|t| t.reply.as_ref().map_or(0, |v| v.summary.count)).sum();
    let mut why = Vec::new();
    if l.deliveries.expected > 0 && relayed.iter().all(|t| t.received == 0) {
        let mut s = format!(
            "nothing was delivered to other members ({} deliveries expected): the server does not relay to the room",
            l.deliveries.expected
        );
        if echoes > 0 {
            let _ = write!(s, " ({echoes} messages came back to their own senders: an echo server?)");
        }
        why.push(s);
    }
    if l.replies.expected > 0 && l.replies.arrived == 0 {
        why.push(format!(
            "no request was answered ({} requests sent): the server does not reply to \"req\":true \
             (use a --mix without request types for a server that only relays)",
            l.replies.expected
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Results of one room of five clients that connected and sent nothing in a 1 s run: a base
/// for the tests of what reads load reports.
#[cfg(test)]
pub(crate) fn quiet_room() -> LoadResults {
    use crate::load::Mix;
    use crate::load::delivery::Account;
    use crate::load::record::Recording;
    let mix = Mix::parse("cursor=1", &[]).unwrap();
    let shape = Shape {
        url: "ws://h:1/r-0".into(),
        clients: 5,
        room_size: 5,
        rate_per_client: 200.0,
        arrivals: "fixed",
        mix: &mix,
        percentiles: &[50.0],
        thresholds: &[],
        link_up: None,
        link_down: None,
        end_ns: 1_000_000_000,
        ramp_ns: 0,
    };
    let a = Account::default();
    build(&shape, &Recording::new(1), (&a, &a), Counts::default(), Vec::new(), 1_000_000_000, (0, 0), 0, false)
}

#[cfg(test)]
mod tests;
