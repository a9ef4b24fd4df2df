//! The report DTOs: plain data, serde, kept apart from engine state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clocksync::OneWay;
use crate::latency::Summary;
use crate::stream::StreamCounts;

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One run of one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// See [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Where, when and how the run happened.
    pub meta: Meta,
    /// The validated configuration of the mode, as the mode serialises it.
    pub config: serde_json::Value,
    /// How the run ended.
    pub outcome: Outcome,
    /// What was measured.
    pub results: Results,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Reached its count or duration.
    Completed,
    /// Stopped by the user (Ctrl-C): what was measured until then.
    Interrupted,
    /// The peer stopped answering mid-run: what was measured until then.
    PeerSilent,
}

/// The environment of a run, so that runs can be compared honestly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `"wirebench"`.
    pub tool: String,
    /// Crate version.
    pub version: String,
    /// The full command line.
    pub command_line: Vec<String>,
    /// Start time, RFC 3339, UTC.
    pub started_at: String,
    /// Wall time the run took, ns.
    pub duration_ns: u64,
    /// The host the report was written on.
    pub host: Host,
    /// The git commit wirebench was built from, when built from a git checkout (reports
    /// written before this field existed read as `None`).
    #[serde(default)]
    pub git_commit: Option<String>,
}

/// The host's identity and the settings that change results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Current clocksource.
    pub clocksource: String,
    /// Sysctls that matter for network measurements, by name.
    pub sysctls: BTreeMap<String, String>,
    /// The interfaces the run's traffic used, where known: the one toward the target, and
    /// the default route's (empty in reports written before this field existed).
    #[serde(default)]
    pub interfaces: Vec<NetInterface>,
}

/// Mode-specific results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant, reason = "one value per run; boxing would only complicate matching")]
pub enum Results {
    /// `wirebench ping`.
    Ping(PingResults),
    /// `wirebench stream`.
    Stream(StreamResults),

    /// `wirebench proxy`.
    Proxy(ProxyResults),
    /// `wirebench load` (issue 4).
    Load(LoadResults),
}

/// Results of a latency run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingResults {
    /// `udp` or `tcp`.
    pub proto: String,
    /// The target address (unicast or group).
    pub target: String,
    /// `closed` or `open`.
    pub pacing: String,
    /// Probe size in bytes.
    pub probe_size: usize,
    /// `compact` (round trip only) or `full` (four timestamps).
    pub probe_form: String,
    /// Measured probes sent.
    pub sent: u64,
    /// Warm-up probes sent.
    pub warmup_sent: u64,
    /// Reply timeout, ns: later replies are lost and counted late.
    pub timeout_ns: u64,
    /// Open loop: how well the generator kept its rate.
    pub rate: Option<RateResult>,
    /// Where the measuring thread ran.
    pub thread: ThreadInfo,
    /// One entry per responder (several for multicast).
    pub responders: Vec<ResponderResult>,
    /// Several responders: all of them merged (percentiles after the merge).
    pub combined: Option<LatencyView>,
    /// Datagrams that were not replies to this run (other sessions, malformed, foreign).
    pub ignored: u64,
}

/// Requested vs achieved rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    /// Probes per second asked for.
    pub requested_per_s: f64,
    /// Probes per second sent, first to last send.
    pub achieved_per_s: f64,
    /// Mean of actual minus intended send time, ns.
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// False when the generator fell short of the rate (achieved below 99 % of requested):
    /// the latency then includes the sender's own backlog, which the corrected view shows
    /// and the uncorrected one hides.
    pub kept_up: bool,
}

/// Where the measuring thread ran (blocking ping-pong on two vCPUs is bimodal, so this
/// tells the user which mode they measured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// Busy-polling instead of blocking.
    pub spin: bool,
    /// The CPU it was pinned to, if any.
    pub pinned_cpu: Option<usize>,
    /// The CPUs it was seen on during the run.
    pub seen_cpus: Vec<usize>,
}

/// One histogram, what it measures, its summary and the histogram itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyView {
    /// What is timed: `rtt_from_send` (closed loop), `rtt_from_intended_send`
    /// (open loop, coordinated-omission corrected), `rtt_from_actual_send` (open loop,
    /// uncorrected), `network_rtt` (dwell subtracted), `dwell`, or `added_delay` (proxy:
    /// release minus arrival); load: `delay_from_send`, `delay_from_intended_send`,
    /// `reply_from_send`, `connect_time`, `shaper_hold`.
    pub measures: String,
    /// Summary values.
    pub summary: Summary,
    /// HdrHistogram V2+DEFLATE, base64.
    pub histogram: String,
}

/// Everything measured about one responder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponderResult {
    /// The responder's address.
    pub addr: String,
    /// Replies within the timeout.
    pub received: u64,
    /// Probes with no reply within the timeout.
    pub lost: u64,
    /// Of the lost, those whose reply came after the timeout.
    pub late: u64,
    /// Replies to a probe already answered.
    pub duplicates: u64,
    /// The main view (corrected in open loop).
    pub latency: LatencyView,
    /// Open loop: the uncorrected view.
    pub uncorrected: Option<LatencyView>,
    /// Warm-up round trips, excluded from the results.
    pub warmup: LatencyView,
    /// Full form: round trip minus the responder's dwell time.
    pub network: Option<LatencyView>,
    /// Full form: the responder's dwell time.
    pub dwell: Option<LatencyView>,
    /// Full form: clock offset and one-way delays with their bound.
    pub one_way: Option<OneWay>,
    /// Samples clamped to the histogram range or with impossible timestamps.
    pub clamped: u64,
}

/// Results of a throughput and loss run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResults {
    /// `udp` or `tcp`.
    pub proto: String,
    /// `forward` (client sends), `reverse` (serve sends) or `both`.
    pub direction: String,
    /// Message size, bytes (UDP payload or TCP frame).
    pub size: usize,
    /// Parallel publishers per destination.
    pub publishers: u16,
    /// Messages per second asked for (`None`: flat out).
    pub rate_per_s: Option<f64>,
    /// What this client sent (forward).
    pub sender: Option<SenderResult>,
    /// One row per receiver: each serve (forward), or this client (reverse).
    pub receivers: Vec<ReceiverResult>,
    /// `--find-max-rate`: the trials and the answer.
    pub search: Option<SearchResult>,
    /// `--sizes`: one row per size.
    pub sweep: Vec<SweepRow>,
    /// Things the user should know (buffers capped by sysctls, GSO off, ...).
    pub warnings: Vec<String>,
}

/// The sending side of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SenderResult {
    /// Messages sent (all publishers and destinations).
    pub messages: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Messages per second achieved, first to last send.
    pub per_s: f64,
    /// Payload bits per second achieved.
    pub bits_per_s: f64,
    /// Mean send slip behind the schedule, ns (paced runs).
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// UDP GSO was used.
    pub gso: bool,
    /// TCP: segments retransmitted (from `TCP_INFO`).
    pub retransmits: Option<u64>,
}

/// One receiver's view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiverResult {
    /// The receiver (a serve's address, or `local` for this client in reverse runs).
    pub addr: String,
    /// Which way this receiver's data flowed: `forward` or `reverse`.
    pub direction: String,
    /// Messages the sender says it sent to this receiver.
    pub sent: u64,
    /// All publishers together.
    pub total: StreamCounts,
    /// Per publisher.
    pub publishers: Vec<StreamCounts>,
    /// One row per interval, all publishers together.
    pub intervals: Vec<IntervalRow>,
}

/// One interval of a receiver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// End of the interval, ns since the run began.
    pub at_ns: u64,
    /// What arrived in it.
    pub counts: StreamCounts,
}

/// The highest loss-free rate search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Loss allowed, as a share (0.001 = 0.1 %).
    pub loss_target: f64,
    /// Each trial in order.
    pub trials: Vec<TrialRow>,
    /// The highest passing rate, messages/s (0 if none passed).
    pub best_per_s: f64,
    /// The same in payload bits/s.
    pub best_bits_per_s: f64,
}

/// One trial of a search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    /// Rate asked for, messages/s (`None`: flat out).
    pub rate_per_s: Option<f64>,
    /// Rate achieved by the sender, messages/s.
    pub sent_per_s: f64,
    /// Messages sent.
    pub sent: u64,
    /// Unique messages received.
    pub received: u64,
    /// Loss share.
    pub loss: f64,
    /// Within the target?
    pub passed: bool,
}

/// One size of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Message size.
    pub size: usize,
    /// Messages per second received.
    pub per_s: f64,
    /// Payload bits per second received.
    pub bits_per_s: f64,
    /// Loss share.
    pub loss: f64,
}

// ---- wirebench proxy (issue 5) ----

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
    /// Not forwarded for another reason (socket refused, flow gone, store full).
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
    /// Bits/s that arrived, first to last arrival.
    pub offered_bps: f64,
    /// Bits/s sent, first to last release.
    pub rate_bps: f64,
    /// Release minus arrival of every delivered packet: the delay the proxy added.
    pub added_delay: LatencyView,
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

/// A network interface a run used, with its MTU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetInterface {
    /// Interface name (`eth0`, `lo`).
    pub name: String,
    /// Its MTU in bytes, if it could be read.
    pub mtu: Option<u32>,
    /// Why it is listed: `route to ADDR`, `--interface`, or `default route`.
    pub role: String,
}

// ---- wirebench load (issue 4) ----

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
