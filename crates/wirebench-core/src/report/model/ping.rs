//! Results of `wirebench ping`.

use serde::{Deserialize, Serialize};

use super::{KernelResult, LatencyView};
use crate::clocksync::OneWay;

named! {
    /// How probes were paced.
    pub enum Pacing {
        /// The next probe goes when the last is answered or timed out.
        Closed = "closed",
        /// Probes go on a schedule, answered or not.
        Open = "open",
    }
}

named! {
    /// What a probe carries.
    pub enum ProbeForm {
        /// A round trip only.
        Compact = "compact",
        /// Four timestamps (the responder's receive and send times too).
        Full = "full",
    }
}

/// Results of a latency run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingResults {
    /// `udp` or `tcp`.
    pub proto: String,
    /// The target address (unicast or group).
    pub target: String,
    /// `closed` or `open`.
    pub pacing: Pacing,
    /// Probe size in bytes.
    pub probe_size: usize,
    /// `compact` (round trip only) or `full` (four timestamps).
    pub probe_form: ProbeForm,
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
    /// Why the run gave up before its end (outcome `peer_silent`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<GaveUp>,
}

/// Why a ping run gave up: the peer is really gone. Timeouts alone never end a run (a lossy
/// path is something to measure), only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum GaveUp {
    /// Nothing at all came back for `for_ns` (`ping --give-up-after`).
    Silence {
        /// How long nothing came back, ns.
        for_ns: u64,
    },
    /// The kernel reported the target unreachable (ICMP port, host or network unreachable).
    Unreachable,
    /// The TCP connection was closed or reset.
    Closed,
}

/// A responder that stopped answering before the end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// When its last reply came, ns after the run's start (the end of discovery).
    pub at_ns: u64,
    /// Measured probes after that with no reply, to the end of the run.
    pub unanswered: u64,
}

/// Requested vs achieved rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Each measured probe's actual minus intended send time (`send_lateness`): the
    /// sender's own share of the corrected round trip. Absent in reports of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness: Option<LatencyView>,
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
    /// The longest run of consecutive measured probes it did not answer in time.
    #[serde(default)]
    pub max_lost_in_a_row: u64,
    /// Set when it stopped answering before the end of the run (`latency::patience`): the
    /// probes it left unanswered at the end are at least 5 and more than twice its longest
    /// run of losses before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// The round trip split by kernel timestamps, when the transport had them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelResult>,
}
