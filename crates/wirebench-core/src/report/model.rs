//! The report DTOs: plain data, serde, kept apart from engine state. What every report
//! shares is here; each mode's results are in `model/<mode>.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::latency::Summary;

/// A closed set of names a report field takes: an enum whose variants serialize to exactly
/// the names given (the JSON is what it was when the field was a string), with `as_str`
/// and `Display` giving the same name.
macro_rules! named {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v,)+
        }

        impl $name {
            /// The name, as in the JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$v => $s,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod attribution;
mod load;
mod mesh;
mod ping;
mod proxy;
mod relay;
mod stream;

pub use attribution::*;
pub use load::*;
pub use mesh::*;
pub use ping::*;
pub use proxy::*;
pub use relay::*;
pub use stream::*;

/// The socket sysctls that change network measurements: recorded in every report, and a
/// difference between two runs is worth a warning when they are compared.
pub const SOCKET_SYSCTLS: [&str; 6] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.busy_poll",
    "net.core.busy_read",
];

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
    /// How much of it is the measuring host's own (stall meter, kernel counters, kernel
    /// timestamps); absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
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
    /// The full command line, secrets hidden (`--token`, `--header`, `--cookie` values; URL passwords).
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
    /// `wirebench load`.
    Load(LoadResults),
    /// `wirebench mesh status`.
    Mesh(MeshResults),
    /// `wirebench hiccup`: the stall meter on its own (its figures are in `attribution`).
    Hiccup,
    /// `wirebench relay`.
    Relay(RelayResults),
}

/// What a histogram times. The set grows with the modes, so a name this version does not
/// know reads as [`Measure::Other`] and is written back as it was.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Measure {
    /// `rtt_from_send`: a closed loop's round trip.
    RttFromSend,
    /// `rtt_from_intended_send`: an open loop's round trip from the intended send time
    /// (coordinated omission corrected).
    RttFromIntendedSend,
    /// `rtt_from_actual_send`: an open loop's round trip from the actual send (uncorrected).
    RttFromActualSend,
    /// `network_rtt`: the round trip minus the responder's dwell.
    NetworkRtt,
    /// `dwell`: the responder's dwell.
    Dwell,
    /// `added_delay`: proxy, release minus arrival.
    AddedDelay,
    /// `queue_delay`: proxy, time in the rate queue.
    QueueDelay,
    /// `path_delay`: proxy, the added delay alone.
    PathDelay,
    /// `delay_from_send`: load, a message's delay to another member.
    DelayFromSend,
    /// `delay_from_intended_send`: load, the same from the intended send time.
    DelayFromIntendedSend,
    /// `reply_from_send`: load, request to reply.
    ReplyFromSend,
    /// `connect_time`: load, a client's connection.
    ConnectTime,
    /// `shaper_hold`: load, time a frame spent in the upload shaper.
    ShaperHold,
    /// `modelled_shaper_hold`: load, the download shaper's computed hold.
    ModelledShaperHold,
    /// `wakeup_lateness`: the stall meter.
    WakeupLateness,
    /// `stack_rtt`: kernel timestamps, both hosts' wake-ups out.
    StackRtt,
    /// `pinger_stack_rtt`: kernel timestamps, this host's wake-up out.
    PingerStackRtt,
    /// `hosts_share`: the round trip minus stack to stack.
    HostsShare,
    /// `relay_added_delay`: a relay's added delay.
    RelayAddedDelay,
    /// `send_lateness`: an open loop's actual minus intended send time.
    SendLateness,
    /// A name this version does not know, kept as it was.
    Other(String),
}

impl Measure {
    const NAMED: [(Self, &'static str); 20] = [
        (Self::RttFromSend, "rtt_from_send"),
        (Self::RttFromIntendedSend, "rtt_from_intended_send"),
        (Self::RttFromActualSend, "rtt_from_actual_send"),
        (Self::NetworkRtt, "network_rtt"),
        (Self::Dwell, "dwell"),
        (Self::AddedDelay, "added_delay"),
        (Self::QueueDelay, "queue_delay"),
        (Self::PathDelay, "path_delay"),
        (Self::DelayFromSend, "delay_from_send"),
        (Self::DelayFromIntendedSend, "delay_from_intended_send"),
        (Self::ReplyFromSend, "reply_from_send"),
        (Self::ConnectTime, "connect_time"),
        (Self::ShaperHold, "shaper_hold"),
        (Self::ModelledShaperHold, "modelled_shaper_hold"),
        (Self::WakeupLateness, "wakeup_lateness"),
        (Self::StackRtt, "stack_rtt"),
        (Self::PingerStackRtt, "pinger_stack_rtt"),
        (Self::HostsShare, "hosts_share"),
        (Self::RelayAddedDelay, "relay_added_delay"),
        (Self::SendLateness, "send_lateness"),
    ];

    /// The name, as in the JSON.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Other(s) => s,
            known => Self::NAMED.iter().find(|(m, _)| m == known).map_or("", |(_, s)| s),
        }
    }
}

impl From<String> for Measure {
    fn from(s: String) -> Self {
        Self::NAMED.into_iter().find(|(_, n)| *n == s).map_or(Self::Other(s), |(m, _)| m)
    }
}

impl From<Measure> for String {
    fn from(m: Measure) -> Self {
        match m {
            Measure::Other(s) => s,
            known => known.as_str().to_owned(),
        }
    }
}

impl std::fmt::Display for Measure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One histogram, what it measures, its summary and the histogram itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyView {
    /// What is timed: `rtt_from_send` (closed loop), `rtt_from_intended_send`
    /// (open loop, coordinated-omission corrected), `rtt_from_actual_send` (open loop,
    /// uncorrected), `network_rtt` (dwell subtracted), `dwell`, or `added_delay` (proxy:
    /// release minus arrival); load: `delay_from_send`, `delay_from_intended_send`,
    /// `reply_from_send`, `connect_time`, `shaper_hold`, `modelled_shaper_hold`; relay:
    /// `relay_added_delay`.
    pub measures: Measure,
    /// Summary values.
    pub summary: Summary,
    /// HdrHistogram V2+DEFLATE, base64.
    pub histogram: String,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_read_back_from_their_names_and_unknown_ones_are_kept() {
        // the names the JSON has always used
        assert_eq!(Measure::NetworkRtt.as_str(), "network_rtt");
        assert_eq!(serde_json::to_string(&Measure::RttFromSend).unwrap(), r#""rtt_from_send""#);
        // every name reads back to its own measure, in each direction
        for (m, name) in Measure::NAMED {
            assert_eq!((m.as_str(), m.to_string()), (name, name.to_owned()));
            assert_eq!(Measure::from(name.to_owned()), m);
            assert_eq!(String::from(m), name);
        }
        let other = Measure::from("future_delay".to_owned());
        assert_eq!(other, Measure::Other("future_delay".into()));
        assert_eq!((other.as_str(), String::from(other.clone())), ("future_delay", "future_delay".to_owned()));
    }
}
