//! Merges the shards into the report's [`LoadResults`].

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use wirebench_core::latency::{Summary, value_at_percentile};
use wirebench_core::load::{Link, Stat, Threshold};
use wirebench_core::report::{
    LatencyView, LoadConnections, LoadLink, LoadResults, LoadSecond, LoadTypeResult, ProcessUse, ThresholdResult,
    encode_histogram,
};

use super::client::Plan;
use super::config::Config;
use super::stats::{ErrorKind, Stats, histogram};

fn view(measures: &str, h: &Histogram<u64>, ps: &[f64]) -> LatencyView {
    LatencyView { measures: measures.into(), summary: Summary::of(h, ps), histogram: encode_histogram(h) }
}

struct Merged {
    sent: u64,
    received: u64,
    delay: Histogram<u64>,
    delay_intended: Histogram<u64>,
    reply: Histogram<u64>,
}

impl Merged {
    fn new() -> Self {
        Self { sent: 0, received: 0, delay: histogram(), delay_intended: histogram(), reply: histogram() }
    }

    fn row(&self, name: &str, share_pct: f64, request: bool, size: u64, ps: &[f64]) -> LoadTypeResult {
        LoadTypeResult {
            name: name.into(),
            share_pct,
            request,
            size,
            sent: self.sent,
            received: self.received,
            delay: view("delay_from_send", &self.delay, ps),
            delay_intended: view("delay_from_intended_send", &self.delay_intended, ps),
            reply: (request || !self.reply.is_empty()).then(|| view("reply_from_send", &self.reply, ps)),
        }
    }
}

/// Builds the results from what the clients recorded.
pub(super) fn build(
    cfg: &Config,
    plan: &Plan,
    stats: &Stats,
    series: Vec<LoadSecond>,
    cpu: (u64, u64),
    elapsed: Duration,
    room_in_process: bool,
) -> LoadResults {
    let ps = &cfg.percentiles;
    let n = cfg.mix.types().len();
    let mut per: Vec<Merged> = (0..n).map(|_| Merged::new()).collect();
    let (mut connect, mut up_hold, mut down_hold) = (histogram(), histogram(), histogram());
    let (mut slip_sum, mut slip_max) = (0u128, 0u64);
    let mut errors = [0u64; ErrorKind::ALL.len()];
    let mut tail = (0u64, 0u64, histogram());
    for sh in stats.shards() {
        for (m, r) in per.iter_mut().zip(&sh.types) {
            m.sent += r.sent;
            m.received += r.received;
            let _ = m.delay.add(&r.delay);
            let _ = m.delay_intended.add(&r.delay_intended);
            let _ = m.reply.add(&r.reply);
        }
        let _ = connect.add(&sh.connect);
        let _ = up_hold.add(&sh.up_hold);
        let _ = down_hold.add(&sh.down_hold);
        slip_sum += sh.slip_sum;
        slip_max = slip_max.max(sh.slip_max);
        for (e, v) in errors.iter_mut().zip(sh.errors) {
            *e += v;
        }
        tail.0 += sh.second_sent;
        tail.1 += sh.second_received;
        let _ = tail.2.add(&sh.second);
    }
    let mut all = Merged::new();
    for m in &per {
        all.sent += m.sent;
        all.received += m.received;
        let _ = all.delay.add(&m.delay);
        let _ = all.delay_intended.add(&m.delay_intended);
        let _ = all.reply.add(&m.reply);
    }
    let replies = all.reply.len();
    let types: Vec<LoadTypeResult> = cfg
        .mix
        .types()
        .iter()
        .enumerate()
        .map(|(i, t)| per[i].row(&t.name, cfg.mix.share(i) * 100.0, t.request, t.size as u64, ps))
        .collect();
    let thresholds = cfg.thresholds.iter().map(|t| judge(t, &all, &per, cfg)).collect();
    let mut series = series;
    if tail.0 + tail.1 > 0 {
        let at_s = series.last().map_or(1, |r| r.at_s + 1);
        let q = |p: f64| value_at_percentile(&tail.2, p);
        series.push(LoadSecond { at_s, sent: tail.0, received: tail.1, delay_p50_ns: q(50.0), delay_p99_ns: q(99.0) });
    }
    // Rates over the mean client's sending time: clients join evenly over the ramp and
    // send until the end (or until a stop), so on average from ramp / 2.
    let half_ramp = cfg.ramp / 2;
    let send_secs = Duration::from_nanos(plan.end_ns).min(elapsed).saturating_sub(half_ramp).as_secs_f64().max(1e-9);
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let per_s = |v: u64| v as f64 / send_secs;
    let events = all.sent + all.received + replies;
    let link = |l: Option<Link>, bps: u64, frames: u64, h: &Histogram<u64>| {
        l.map(|l| LoadLink {
            requested_bps: l.rate.map(wirebench_core::units::BitRate::bps),
            requested_delay_ns: l.delay_ns,
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            achieved_bps_max_client: bps as f64,
            frames,
            hold: view("shaper_hold", h, ps),
        })
    };
    let get = Stats::get;
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let requested = cfg.clients as f64 * cfg.rate.per_sec();
    let (user_ns, system_ns) = cpu;
    let cpu_ns = user_ns + system_ns;
    LoadResults {
        url: cfg.room_url(0),
        clients: cfg.clients,
        room_size: cfg.room_size,
        rate_per_client: cfg.rate.per_sec(),
        arrivals: cfg.arrivals.name().into(),
        pacing: "open_loop".into(),
        connections: LoadConnections {
            connected: get(&stats.connected),
            failed: get(&stats.failed),
            disconnects: get(&stats.disconnects),
            connect_time: view("connect_time", &connect, ps),
        },
        requested_send_per_s: requested,
        achieved_send_per_s: per_s(all.sent),
        received_per_s: per_s(all.received + replies),
        sent: all.sent,
        received: all.received + replies,
        slip_mean_ns: if all.sent == 0 {
            0
        } else {
            u64::try_from(slip_sum / u128::from(all.sent)).unwrap_or(u64::MAX)
        },
        slip_max_ns: slip_max,
        overall: all.row("all", 100.0, replies > 0, 0, ps),
        types,
        link_up: link(cfg.link_up, get(&stats.up_bps_max), get(&stats.up_frames), &up_hold),
        link_down: link(cfg.link_down, get(&stats.down_bps_max), get(&stats.down_frames), &down_hold),
        errors: ErrorKind::ALL
            .iter()
            .zip(errors)
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| (k.name().to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
        series,
        thresholds,
        process: ProcessUse {
            user_ns,
            system_ns,
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            per_event_ns: if events == 0 { 0.0 } else { cpu_ns as f64 / events as f64 },
            max_rss_bytes: super::limits::max_rss_bytes(),
            room_in_process,
        },
    }
}

fn judge(t: &Threshold, all: &Merged, per: &[Merged], cfg: &Config) -> ThresholdResult {
    let h = match t.scope.as_deref() {
        None => &all.delay,
        Some("reply") => &all.reply,
        Some(name) => cfg.mix.types().iter().position(|e| e.name == name).map_or(&all.delay, |i| &per[i].delay),
    };
    let value_ns = (!h.is_empty()).then(|| match t.stat {
        Stat::Percentile(p) => value_at_percentile(h, p),
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a mean of ns")]
        Stat::Mean => h.mean().round() as u64,
        Stat::Max => h.max(),
    });
    ThresholdResult { expr: t.expr.clone(), value_ns, passed: value_ns.is_some_and(|v| t.passes(v)) }
}
