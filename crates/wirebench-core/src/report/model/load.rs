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
    /// Deliveries to other members: expected, arrived, and why the missing ones are missing.
    pub deliveries: LoadAccount,
    /// Replies to requests: expected, arrived, and why the missing ones are missing.
    pub replies: LoadAccount,
    /// Mean and largest send slip behind the intended time, ns.
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// The generator's own health: its slip and CPU per second and whether it, rather than
    /// the server, missed the rate asked for (absent in reports written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<super::stream::GeneratorHealth>,
    /// Every event type together (`all`): each count the sum of the type rows' (so its
    /// `sent` counts requests too, and its `expected` and `arrived` both deliveries and
    /// replies: `deliveries` and `replies` split them), its histograms the merge of theirs.
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
    /// `--shard K/N`: the part of the scenario this process ran (absent for a whole run and
    /// in a merged report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<LoadShard>,
    /// A merge of shards made with `report --merge --partial` while some were missing:
    /// which (absent in every other report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<LoadPartial>,
}

/// The shards a partial merge lacks (`report --merge --partial`): its counts are those of
/// the shards present only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadPartial {
    /// N of `--shard K/N`.
    pub count: u64,
    /// The missing shards' K, ascending.
    pub missing: Vec<u64>,
}

/// `load`: the sends the scenario's schedules asked for in the measured window (from each
/// client's start to the end of sending, or a stop), and where those not made went, so
/// `asked = sent + unsent + lost` (`generator.schedule`; `wirebench_core::generator::schedule`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSchedule {
    /// Sends every client's schedule asked for: a connected client's from when it
    /// connected, a client that never connected from when it was to join.
    pub asked: u64,
    /// Sends made (the run's `sent`).
    pub sent: u64,
    /// Sends due to clients that stayed connected that they never made (cut off by the end
    /// or a stop: the generator fell behind).
    pub unsent: u64,
    /// Sends the schedules of dropped clients asked for after their last send, and of
    /// clients that never connected (fixed arrivals: exact; Poisson: the expected count).
    pub lost: u64,
    /// Clients that connected and were then dropped before the end of sending: closed by
    /// the server, connection lost, a read or write failed.
    pub dropped_clients: u64,
    /// Clients that never connected (a failed or refused handshake).
    pub failed_clients: u64,
}

/// The part of a sharded scenario one process ran: a block of whole rooms and their
/// members, numbered as in the whole scenario (`wirebench_core::load::shard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadShard {
    /// K (1-based).
    pub index: u64,
    /// N.
    pub count: u64,
    /// First room.
    pub first_room: u64,
    /// One past the last room.
    pub end_room: u64,
    /// First client id.
    pub first_client: u64,
    /// One past the last client id.
    pub end_client: u64,
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
    /// `--subprotocol`: the subprotocol the server chose, with how many connected clients
    /// it chose it for (absent when none was offered; a merge adds the counts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subprotocols: BTreeMap<String, u64>,
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
    /// Deliveries to other members (every one timed in `delay`).
    pub received: u64,
    /// Deliveries (a relayed type) or replies (a request type) expected when the events
    /// were sent: every other member that had joined and not left, or the sender.
    pub expected: u64,
    /// Of the expected ones, arrived.
    pub arrived: u64,
    /// Expected but never arrived: `expected - arrived`.
    pub missing: u64,
    /// Arrivals nobody expected (sent before the receiver joined, an echo of a relayed
    /// type, a request relayed to others).
    pub unexpected: u64,
    /// Arrival minus the send time embedded in the message (`delay_from_send`).
    pub delay: LatencyView,
    /// Arrival minus the intended send time (`delay_from_intended_send`, coordinated
    /// omission corrected).
    pub delay_intended: LatencyView,
    /// Request events: reply arrival minus the embedded send time (`reply_from_send`).
    pub reply: Option<LatencyView>,
}

/// Expected messages of one direction and the fate of the missing ones (see
/// `wirebench_core::load::delivery`): `expected = arrived + missing`,
/// `missing = dropped + late + sum(closed)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadAccount {
    /// Expected when sent.
    pub expected: u64,
    /// Arrived.
    pub arrived: u64,
    /// Never arrived.
    pub missing: u64,
    /// Missing with a later message of the same sender arrived: skipped while connected
    /// (a server that drops messages for a member that falls behind).
    pub dropped: u64,
    /// Missing after the last that arrived, the receiver connected to the end: not
    /// arrived by the end of the run.
    pub late: u64,
    /// Missing after the last that arrived, the receiver's connection ended early: by how
    /// it ended (`server close 1013 (...)`, `connection lost (no close frame)`, ...).
    pub closed: BTreeMap<String, u64>,
    /// Arrivals beyond the expected ones (duplicates).
    pub duplicates: u64,
}

named! {
    /// Where a shaped link's achieved figures come from.
    pub enum LinkMethod {
        /// Each frame's actual write to the socket (upload).
        Socket = "socket",
        /// Computed by the shaper from the arrival times; no frame is held (download).
        Modelled = "modelled",
    }
}

/// A shaped direction: requested vs achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadLink {
    /// Rate asked for, bits/s (`None`: unlimited).
    pub requested_bps: Option<u64>,
    /// Added one-way delay asked for, ns.
    pub requested_delay_ns: u64,
    /// Where the achieved figures come from: `socket` (upload: each frame's actual write
    /// to the socket) or `modelled` (download: computed by the shaper from the arrival
    /// times; no frame is held).
    pub method: LinkMethod,
    /// Payload bits/s of the busiest client, first to last frame (upload: as written to
    /// the socket; download: as the model delivered them).
    pub achieved_bps_max_client: f64,
    /// Frames shaped.
    pub frames: u64,
    /// Time each frame spent in the shaper (rate queue plus added delay): `shaper_hold`
    /// (upload: hand-over to the actual write) or `modelled_shaper_hold` (download).
    pub hold: LatencyView,
}

/// One second of a load run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The second's delays from send (HdrHistogram V2+DEFLATE, base64), so that shards'
    /// seconds merge exactly (absent in reports written before `report --merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_histogram: Option<String>,
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

/// The subprotocol line every view of a load run shows (text, HTML): what the clients
/// offered (`config.connect.subprotocols`) and what the server chose for how many clients,
/// e.g. `subprotocol: offered v1, v2; the server chose v2 for 4 clients`. Several choices
/// (servers behind one balancer that differ, or merged parts that differ) are all listed,
/// with `(mixed)`. `None` when none was offered and none chosen (a hand-edited file with
/// choices but no offer still gets its line: the choices are facts of the run).
pub fn subprotocol_words(r: &super::Report) -> Option<String> {
    let super::Results::Load(l) = &r.results else { return None };
    let offered: Vec<&str> = r
        .config
        .pointer("/connect/subprotocols")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    if offered.is_empty() && l.connections.subprotocols.is_empty() {
        return None;
    }
    let chosen: Vec<String> = l
        .connections
        .subprotocols
        .iter()
        .map(|(p, n)| format!("{} for {n} clients", if p.is_empty() { "none" } else { p }))
        .collect();
    let chose = match chosen.len() {
        0 => "- (no client connected)".to_owned(),
        1 => chosen.concat(),
        _ => format!("{} (mixed)", chosen.join(", ")),
    };
    Some(format!("subprotocol: offered {}; the server chose {chose}", offered.join(", ")))
}

/// The line every view of a partial merge shows: `PARTIAL: shard 2/3 missing (report
/// --merge --partial): the counts and percentiles are those of the shards present`.
pub fn partial_words(l: &LoadResults) -> Option<String> {
    let p = l.partial.as_ref()?;
    let names: Vec<String> = p.missing.iter().map(|k| format!("{k}/{}", p.count)).collect();
    Some(format!(
        "PARTIAL: {} {} missing (report --merge --partial): the counts and percentiles are those of the shards present",
        if names.len() == 1 { "shard" } else { "shards" },
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests;
