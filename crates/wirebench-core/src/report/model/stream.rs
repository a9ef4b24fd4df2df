//! Results of `wirebench stream` and `wirebench listen`.

use serde::{Deserialize, Serialize};

use crate::stream::StreamCounts;

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
