//! What a run says about itself: the measuring host's own stalls (the stall meter), the
//! kernel's drop counters across the run, and the round trip split by kernel timestamps.

use serde::{Deserialize, Serialize};

use super::LatencyView;
use crate::counters::{Delta, LossSplit};
use crate::hiccup::HiccupSecond;

/// The attribution section of a report: absent in reports written before it existed, and
/// each part absent when it was turned off or could not be measured (`notes` says why).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// The stall meter that ran beside the measurement (`--no-hiccup` turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hiccup: Option<HiccupResult>,
    /// How much the kernel's counters rose during the run (host-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Delta>,
    /// The run's lost packets split by those counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossSplit>,
    /// The kernel's view of a TCP ping's connection at the end of the run (`TCP_INFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfo>,
    /// What could not be measured, and why (a missing counter, timestamps the kernel or NIC
    /// does not give).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What the stall meter recorded: how late its thread woke, every `interval_ns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiccupResult {
    /// The interval it asked to sleep, ns.
    pub interval_ns: u64,
    /// Wake-ups.
    pub wakeups: u64,
    /// Values added for the wake-ups a stall made it miss (coordinated-omission
    /// correction, as jHiccup records them).
    pub corrected: u64,
    /// Lateness of every wake-up (`wakeup_lateness`): `wakeups + corrected` values.
    pub lateness: LatencyView,
    /// Per second of the run: values, the latest wake-up, the 99th percentile.
    pub seconds: Vec<HiccupSecond>,
    /// The meter thread's own CPU time over its run (`schedstat`: exact), ns; its share of
    /// one core is this over `(wakeups + corrected) × interval_ns`
    /// (`hiccup::cost_share`). Absent where the kernel keeps no schedstat, and in reports
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
}

/// `TCP_INFO` of one connection, as the kernel gave it: its own RTT estimate (from the
/// ACKs, independent of the probes' timing) and its retransmission counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Smoothed round trip (`tcpi_rtt`), µs.
    pub srtt_us: u32,
    /// Its mean deviation (`tcpi_rttvar`), µs.
    pub rttvar_us: u32,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub retransmits: u32,
    /// Segments counted as lost when read (`tcpi_lost`).
    pub lost: u32,
    /// Reordering degree (`tcpi_reordering`): starts at `net.ipv4.tcp_reordering` or what
    /// the kernel remembers for that host, raised when reordering is seen.
    pub reordering: u32,
}

/// A responder's round trips split by kernel timestamps (`SO_TIMESTAMPING`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelResult {
    /// Kind of the probes' TX timestamps: `software`, `hardware` or `none`.
    pub tx: String,
    /// Kind of the replies' RX timestamps.
    pub rx: String,
    /// Measured replies.
    pub replies: u64,
    /// Of those, with a TX timestamp of their probe.
    pub tx_stamps: u64,
    /// With an RX timestamp.
    pub rx_stamps: u64,
    /// Kernel times later (RX) or earlier (TX) than the application's own: impossible,
    /// never used, reported so a reader can see the check held.
    pub out_of_order: u64,
    /// Stack to stack: `stack_rtt` (this host's TX to RX timestamp minus the responder's
    /// kernel-to-send dwell: both hosts' wake-ups excluded) or `pinger_stack_rtt` (the
    /// responder's wake-up and dwell included: compact probes, or a responder without
    /// timestamps).
    pub stack: Option<LatencyView>,
    /// Per reply, the round trip minus stack to stack (`hosts_share`): the hosts' own send
    /// path, wake-up and scheduling.
    pub hosts: Option<LatencyView>,
}
