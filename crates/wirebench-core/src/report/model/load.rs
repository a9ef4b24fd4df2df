//! Results of `wirebench load`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::LatencyView;

/// Results of `wirebench load`: WebSocket clients in rooms, an open-loop event mix, the
/// delay from departure to arrival at every other member, and request-to-reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadResults {
    /// The URL the clients connected to (with `{room}` filled for the first room).
    pub url: String,
    /// Clients asked for.
    pub clients: u64,
    /// Members per room.
    pub room_size: u64,
    /// Intended events per second per client.
    pub rate_per_client: f64,
    /// `fixed` (random phase) or `poisson`.
    pub arrivals: String,
    /// How sends were timed: always `open_loop` (sends keep to the schedule whatever the
    /// replies do).
    pub pacing: String,
    /// Connections: time to a completed WebSocket handshake, failures, drops.
    pub connections: LoadConnections,
    /// Events all clients together meant to send per second once connected.
    pub requested_send_per_s: f64,
    /// Events sent per second over the mean client's sending time (duration plus half the
    /// ramp): what the server received, as the clients see it.
    pub achieved_send_per_s: f64,
    /// Messages the clients received per second (what the server sent, as the clients see
    /// it), replies included.
    pub received_per_s: f64,
    /// Events sent.
    pub sent: u64,
    /// Messages received (relays and replies).
    pub received: u64,
    /// Mean and largest send slip behind the intended time, ns.
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// Every event type together.
    pub overall: LoadTypeResult,
    /// One row per event type, in mix order.
    pub types: Vec<LoadTypeResult>,
    /// Upload shaping: requested and achieved (`None`: no `--link`).
    pub link_up: Option<LoadLink>,
    /// Download shaping (`None`: no `--link-down`).
    pub link_down: Option<LoadLink>,
    /// Errors by kind (send failures, malformed messages, protocol errors, ...).
    pub errors: BTreeMap<String, u64>,
    /// One row per second of the run.
    pub series: Vec<LoadSecond>,
    /// Thresholds and their verdicts.
    pub thresholds: Vec<ThresholdResult>,
    /// This process's CPU time and peak memory.
    pub process: ProcessUse,
}

/// Connection figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadConnections {
    /// Clients whose handshake completed.
    pub connected: u64,
    /// Connection attempts that failed.
    pub failed: u64,
    /// Connections the server closed or lost before the end.
    pub disconnects: u64,
    /// TCP connect plus WebSocket handshake, per client (`connect_time`).
    pub connect_time: LatencyView,
}

/// One event type (or all of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadTypeResult {
    /// The type's name (`all` for the overall row).
    pub name: String,
    /// Share of the mix, percent.
    pub share_pct: f64,
    /// A request (answered to the sender only).
    pub request: bool,
    /// Message size, bytes (0 in the overall row).
    pub size: u64,
    /// Events sent.
    pub sent: u64,
    /// Deliveries to other members.
    pub received: u64,
    /// Arrival minus the send time embedded in the message (`delay_from_send`).
    pub delay: LatencyView,
    /// Arrival minus the intended send time (`delay_from_intended_send`, coordinated
    /// omission corrected).
    pub delay_intended: LatencyView,
    /// Request events: reply arrival minus the embedded send time (`reply_from_send`).
    pub reply: Option<LatencyView>,
}

/// A shaped direction: requested vs achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadLink {
    /// Rate asked for, bits/s (`None`: unlimited).
    pub requested_bps: Option<u64>,
    /// Added one-way delay asked for, ns.
    pub requested_delay_ns: u64,
    /// Payload bits/s through the shaper of the busiest client, first to last frame.
    pub achieved_bps_max_client: f64,
    /// Frames shaped.
    pub frames: u64,
    /// Time each frame spent in the shaper (rate queue plus added delay): `shaper_hold`.
    pub hold: LatencyView,
}

/// One second of a load run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadSecond {
    /// Seconds since the run began (end of the interval).
    pub at_s: u64,
    /// Events sent in it.
    pub sent: u64,
    /// Messages received in it.
    pub received: u64,
    /// Delay from send, median, ns (0 when nothing arrived).
    pub delay_p50_ns: u64,
    /// Delay from send, 99th percentile, ns.
    pub delay_p99_ns: u64,
}

/// One threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// As given, e.g. `p96<300ms`.
    pub expr: String,
    /// The measured value, ns (`None` when there was nothing to measure: fails).
    pub value_ns: Option<u64>,
    /// Passed?
    pub passed: bool,
}

/// What the generating process used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProcessUse {
    /// User CPU, ns.
    pub user_ns: u64,
    /// System CPU, ns.
    pub system_ns: u64,
    /// CPU per message event (one send or one receive), ns.
    pub per_event_ns: f64,
    /// Peak resident set, bytes.
    pub max_rss_bytes: u64,
    /// Whether a room server ran in this process (its CPU is then included).
    pub room_in_process: bool,
}
