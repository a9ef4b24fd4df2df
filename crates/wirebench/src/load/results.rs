//! The report of a run so far: the shards merged, the delivery book tallied, handed to
//! `wirebench_core::load::results::build`.

use std::time::Duration;
use wirebench_core::units::nanos;

use wirebench_core::load::results::{Shape, build};
use wirebench_core::report::{LoadResults, LoadSecond};

use super::client::Plan;
use super::config::Config;
use super::stats::Stats;

/// Builds the results from what the clients recorded.
pub(super) fn results(
    cfg: &Config,
    plan: &Plan,
    stats: &Stats,
    series: Vec<LoadSecond>,
    cpu: (u64, u64),
    elapsed: Duration,
    room_in_process: bool,
) -> LoadResults {
    let shape = Shape {
        url: cfg.room_url(0),
        clients: cfg.sharding.part.len(),
        room_size: cfg.room_size,
        rate_per_client: cfg.rate.per_sec(),
        arrivals: cfg.arrivals.name(),
        mix: &cfg.mix,
        percentiles: &cfg.percentiles,
        thresholds: &cfg.thresholds,
        link_up: cfg.link_up,
        link_down: cfg.link_down,
        end_ns: plan.end_ns,
        ramp_ns: nanos(cfg.ramp),
    };
    let rec = stats.merged(cfg.mix.types().len());
    let (deliveries, replies) = stats.book.tally();
    let mut results = build(
        &shape,
        &rec,
        (&deliveries, &replies),
        stats.counts(),
        series,
        nanos(elapsed),
        cpu,
        crate::limits::max_rss_bytes(),
        room_in_process,
    );
    results.shard = cfg.sharding.record();
    // -- real apps: the subprotocol the server chose, when one was offered
    if !cfg.connect.subprotocols.is_empty() {
        results.connections.subprotocols = stats.handshakes.chosen().into_iter().collect();
    }
    results
}
