//! Load runs side by side: rates, the shares of expected deliveries and replies that went missing,
//! delay and reply percentiles from the merged histograms, and the generator's CPU per
//! message event.

use hdrhistogram::Histogram;
use wirebench_core::latency::value_at_percentile;
use wirebench_core::report::{LatencyView, LoadAccount, Report, Results, decode_histogram};

/// The figures of a load comparison, in order.
pub(super) const ROWS: [&str; 11] = [
    "sent/s",
    "delivered/s",
    "deliveries missing",
    "replies missing",
    "delay p50",
    "delay p99",
    "delay p99.9",
    "delay max",
    "reply p50",
    "reply p99",
    "cpu/event",
];

fn histogram(v: &LatencyView) -> Option<Histogram<u64>> {
    decode_histogram(&v.histogram).ok().filter(|h| !h.is_empty())
}

/// The figures of one load run (ns for delays, percent for missing, ns for CPU).
#[expect(clippy::cast_precision_loss, reason = "ratios and display values")]
pub(super) fn values(r: &Report) -> Vec<Option<f64>> {
    let Results::Load(l) = &r.results else { return vec![None; ROWS.len()] };
    // the one percentile definition, as ping's comparison uses it
    let q = |h: &Option<Histogram<u64>>, p: f64| h.as_ref().map(|h| value_at_percentile(h, p) as f64);
    let delay = histogram(&l.overall.delay);
    let reply = l.overall.reply.as_ref().and_then(histogram);
    // the `deliveries` and `replies` lines' shares, by name: the `all` row's missing is both
    let missing = |a: &LoadAccount| (a.expected > 0).then(|| 100.0 * a.missing as f64 / a.expected as f64);
    vec![
        Some(l.achieved_send_per_s),
        Some(l.received_per_s),
        missing(&l.deliveries),
        missing(&l.replies),
        q(&delay, 50.0),
        q(&delay, 99.0),
        q(&delay, 99.9),
        delay.as_ref().map(|h| h.max() as f64),
        q(&reply, 50.0),
        q(&reply, 99.0),
        Some(l.process.per_event_ns),
    ]
}
