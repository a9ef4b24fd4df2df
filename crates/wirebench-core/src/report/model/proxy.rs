//! Results of `wirebench proxy`.

use serde::{Deserialize, Serialize};

use super::LatencyView;

/// Results of `wirebench proxy`: what was asked of each direction against what the traffic
/// got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyResults {
    /// `udp` or `tcp`.
    pub proto: String,
    /// Where the proxy listened.
    pub listen: String,
    /// Where it forwarded to.
    pub upstream: String,
    /// UDP flows (client addresses) or TCP connections served.
    pub flows: u64,
    /// The first client's address (null when none came, and in reports written before it
    /// existed): with the upstream, it says which interfaces the traffic crossed.
    #[serde(default)]
    pub first_client: Option<String>,
    /// UDP flows refused (over the flow limit) or TCP connections whose upstream could not
    /// be reached (the client saw a clean close).
    pub flows_failed: u64,
    /// Client to upstream.
    pub up: ProxyDirection,
    /// Upstream to client.
    pub down: ProxyDirection,
    /// Per-interval figures, oldest first (empty when no interval was printed).
    pub intervals: Vec<ProxyInterval>,
}

/// One direction: requested and achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyDirection {
    /// What the flags asked for.
    pub requested: ProxyRequested,
    /// What the traffic got.
    pub achieved: ProxyAchieved,
}

/// The impairment asked for, in report units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyRequested {
    /// Fixed added delay, ns.
    pub delay_ns: u64,
    /// Jitter, ns (0 for none).
    pub jitter_ns: u64,
    /// `normal`, `uniform` or `pareto`; null without jitter.
    pub jitter_dist: Option<String>,
    /// `none`, `random` or `burst` (Gilbert-Elliott).
    pub loss_model: String,
    /// Long-run loss the model asks for, percent.
    pub loss_pct: f64,
    /// Gilbert-Elliott: good-to-bad probability, percent (null otherwise).
    pub loss_burst_p_pct: Option<f64>,
    /// Gilbert-Elliott: bad-to-good probability, percent (null otherwise).
    pub loss_burst_r_pct: Option<f64>,
    /// Share of packets held back, percent.
    pub reorder_pct: f64,
    /// How long a reordered packet is held back, ns.
    pub reorder_gap_ns: u64,
    /// Share of packets sent twice, percent.
    pub duplicate_pct: f64,
    /// Token-bucket rate, bits/s (null for none).
    pub rate_bps: Option<u64>,
    /// Token-bucket depth, bytes (null without a rate).
    pub burst_bytes: Option<u64>,
    /// Longest wait in the rate queue before a drop, ns.
    pub queue_limit_ns: u64,
}

/// What one direction's traffic got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyAchieved {
    /// Packets (UDP) or read chunks (TCP) that arrived.
    pub packets_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Delivered (first copies).
    pub packets_out: u64,
    /// Bytes sent, copies included.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Dropped by the queue limit.
    pub queue_drops: u64,
    /// Queue full: dropped because the proxy already held its byte budget of delayed
    /// packets (`--max-held`; 0 in reports written before it existed).
    #[serde(default)]
    pub full_drops: u64,
    /// Not forwarded for another reason (socket refused, flow gone, still waiting at the
    /// stop).
    pub send_drops: u64,
    /// `lost` over `packets_in`, percent: compare with the requested loss.
    pub loss_pct: f64,
    /// Every drop over `packets_in`, percent.
    pub drop_pct: f64,
    /// Delivered after a packet that arrived later (RFC 4737), count.
    pub reordered: u64,
    /// `reordered` over `packets_in`, percent.
    pub reorder_pct: f64,
    /// Extra copies sent.
    pub duplicates: u64,
    /// `duplicates` over `packets_in`, percent.
    pub duplicate_pct: f64,
    /// Bits/s that arrived, over the time arrivals were busy (silences over 100 ms left
    /// out).
    pub offered_bps: f64,
    /// Bits/s sent, over the time releases were busy (`active_ns`): compare with the
    /// requested rate.
    pub rate_bps: f64,
    /// Time releases were busy, ns: gaps between releases up to 100 ms count, longer
    /// silences do not (0 in reports written before it existed).
    #[serde(default)]
    pub active_ns: u64,
    /// Release minus arrival of every delivered packet: the delay the proxy added.
    pub added_delay: LatencyView,
    /// The part of `added_delay` spent in the rate limiter's queue (`queue_delay`), with a
    /// rate only.
    #[serde(default)]
    pub queue_delay: Option<LatencyView>,
    /// The rest of `added_delay`: release minus leaving the rate queue, i.e. the configured
    /// delay and jitter (and reorder gap) plus the proxy's own lateness (`path_delay`).
    #[serde(default)]
    pub path_delay: Option<LatencyView>,
}

/// One reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyInterval {
    /// Start, ns since the proxy started.
    pub start_ns: u64,
    /// Length, ns.
    pub duration_ns: u64,
    /// Client to upstream.
    pub up: ProxyIntervalSide,
    /// Upstream to client.
    pub down: ProxyIntervalSide,
}

/// One direction in one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProxyIntervalSide {
    /// Arrived.
    pub packets_in: u64,
    /// Delivered.
    pub packets_out: u64,
    /// Lost to the loss model, percent of arrived.
    pub loss_pct: f64,
    /// Every drop, percent of arrived.
    pub drop_pct: f64,
    /// Reordered, percent of arrived.
    pub reorder_pct: f64,
    /// Extra copies.
    pub duplicates: u64,
    /// Bits/s sent over the interval.
    pub rate_bps: f64,
    /// Added delay, median, ns (0 when nothing was delivered).
    pub delay_p50_ns: u64,
    /// Added delay, 99th percentile, ns.
    pub delay_p99_ns: u64,
}
