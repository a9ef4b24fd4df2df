//! The agent's JSON API (`/v1/matrix`, `/v1/peers`): what `mesh status` merges. Plain serde
//! data; every number is validated where it is used (a status pulls from agents it does not
//! control, so nothing here is trusted).

use serde::{Deserialize, Serialize};

use super::window::RttSummary;

/// The API version this build serves and reads.
pub const API_VERSION: u32 = 1;

/// What a matrix cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    /// UDP probe round trip.
    Udp,
    /// TCP probe round trip on a kept-open connection.
    Tcp,
    /// A probe to the multicast group, answered by unicast: sender to receiver reachability.
    Multicast,
}

impl Proto {
    /// Every transport, in display order.
    pub const ALL: [Self; 3] = [Self::Udp, Self::Tcp, Self::Multicast];

    /// The label value.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Multicast => "multicast",
        }
    }

    /// From a label value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A node as the API names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeRef {
    /// Probe address (`ip:port`): the identity.
    pub addr: String,
    /// Node name, if known.
    #[serde(default)]
    pub name: Option<String>,
    /// Zone, if known.
    #[serde(default)]
    pub zone: Option<String>,
    /// A STAMP reflector (a router): probed, it probes nobody, so it has no row.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stamp: bool,
}

impl NodeRef {
    /// An agent at `addr`, with no labels.
    pub fn at(addr: impl Into<String>) -> Self {
        Self { addr: addr.into(), name: None, zone: None, stamp: false }
    }
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_false(b: &bool) -> bool {
    !*b
}

/// The window a matrix covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowRef {
    /// Window number since the agent started.
    pub index: u64,
    /// Length, ns.
    pub len_ns: u64,
    /// Start, wall clock (ns since the Unix epoch).
    pub start_unix_ns: u64,
}

/// One cell of the agent's row: it probing one peer over one transport in one window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellReport {
    /// The probed peer (the receiver, for multicast).
    pub peer: NodeRef,
    /// Transport.
    pub proto: Proto,
    /// Probes sent in the window.
    pub sent: u64,
    /// Answered within the timeout.
    pub received: u64,
    /// Not answered within the timeout.
    pub lost: u64,
    /// Replies after the timeout.
    #[serde(default)]
    pub late: u64,
    /// Duplicate replies.
    #[serde(default)]
    pub duplicates: u64,
    /// Round trips, when any was answered.
    #[serde(default)]
    pub rtt: Option<RttSummary>,
    /// The round trips' HdrHistogram (V2 + DEFLATE, base64), when any was answered.
    #[serde(default)]
    pub histogram: Option<String>,
}

/// `GET /v1/matrix`: the agent's latest closed window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixReport {
    /// [`API_VERSION`].
    pub api_version: u32,
    /// The agent.
    pub agent: NodeRef,
    /// The window; `None` before the first one closed.
    pub window: Option<WindowRef>,
    /// One per (probed peer, transport).
    pub cells: Vec<CellReport>,
}

/// A peer in `GET /v1/peers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerReport {
    /// The peer.
    pub peer: NodeRef,
    /// Whether this agent probes it.
    pub probed: bool,
    /// Why (`full`, `zone`, `inter_zone`, `sampled`), when probed.
    #[serde(default)]
    pub level: Option<String>,
}

/// `GET /v1/peers`: everything discovery found, and the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeersReport {
    /// [`API_VERSION`].
    pub api_version: u32,
    /// The agent.
    pub agent: NodeRef,
    /// Probes per second per peer per transport.
    pub rate_per_peer: f64,
    /// Probes per second planned in total.
    pub probes_per_s: f64,
    /// The budget.
    pub budget_per_s: f64,
    /// Every peer discovered (the agent itself left out).
    pub peers: Vec<PeerReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_names_parse_back() {
        assert_eq!(Proto::ALL.map(Proto::name), ["udp", "tcp", "multicast"]);
        for p in Proto::ALL {
            assert_eq!(Proto::parse(p.name()), Some(p));
        }
        assert_eq!(Proto::parse("UDP"), None);
    }

    #[test]
    fn stamp_is_written_only_when_set_and_absent_reads_false() {
        let plain = NodeRef::at("10.0.0.1:7000");
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"addr":"10.0.0.1:7000","name":null,"zone":null}"#);
        let stamp = NodeRef { stamp: true, ..plain.clone() };
        assert_eq!(serde_json::to_value(&stamp).unwrap()["stamp"], true);
        assert_eq!(serde_json::from_str::<NodeRef>(r#"{"addr":"10.0.0.1:7000"}"#).unwrap(), plain);
    }
}
