//! The matrix from a Prometheus server that scrapes the agents: instant queries over its
//! HTTP API (`/api/v1/query`), joined on the `instance` label Prometheus adds. The numbers
//! are the agents' own window gauges, so they equal what `/v1/matrix` says for the same
//! window (without the histograms: percentiles cannot be merged from Prometheus).
//!
//! The queries ([`QUERIES`], also in docs/modes/mesh.md):
//! - `last_over_time(wirebench_mesh_agent_info[1h])`: every agent seen in the last hour;
//! - `wirebench_mesh_agent_info`: those whose last scrape worked (a failed scrape makes the
//!   series stale at once), the others have no row;
//! - `wirebench_mesh_peer_info`: names and zones of the peers;
//! - `wirebench_mesh_peer_window_sent`, `wirebench_mesh_peer_window_lost`,
//!   `wirebench_mesh_peer_rtt_seconds`: each cell's last window;
//! - `max(wirebench_mesh_window_seconds)`: the window length.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{Context as _, bail};
use hyper::Uri;
use serde::Deserialize;
use wirebench_core::mesh::api::{NodeRef, Proto};
use wirebench_core::mesh::matrix::MatrixBuilder;
use wirebench_core::mesh::window::RttSummary;

use crate::http_client::HttpClient;

/// Every query `mesh status --prometheus` sends.
pub const QUERIES: [&str; 7] = [
    "last_over_time(wirebench_mesh_agent_info[1h])",
    "wirebench_mesh_agent_info",
    "wirebench_mesh_peer_info",
    "wirebench_mesh_peer_window_sent",
    "wirebench_mesh_peer_window_lost",
    "wirebench_mesh_peer_rtt_seconds",
    "max(wirebench_mesh_window_seconds)",
];

/// Largest answer read from Prometheus.
const MAX_ANSWER: usize = 256 << 20;

#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Sample>,
}

#[derive(Debug, Deserialize)]
struct Sample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

type Rows = Vec<(BTreeMap<String, String>, f64)>;
/// (instance, peer, proto).
type Key = (String, String, String);
/// A cell's window sent, lost, and round trip by quantile.
type CellRows = (Option<u64>, Option<u64>, BTreeMap<String, u64>);

fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// One instant query.
async fn query(c: &HttpClient, base: &Uri, q: &str, token: Option<&str>, timeout: Duration) -> anyhow::Result<Rows> {
    let url: Uri = format!("{}/api/v1/query?query={}", base.to_string().trim_end_matches('/'), pct(q)).parse()?;
    let (status, body) = c.get(&url, token, MAX_ANSWER, timeout).await?;
    let a: Answer =
        serde_json::from_slice(&body).with_context(|| format!("Prometheus answered HTTP {status}, not its JSON"))?;
    if a.status != "success" {
        bail!("Prometheus: {} ({q})", a.error.unwrap_or(a.status));
    }
    let data = a.data.context("Prometheus: no data")?;
    if data.result_type != "vector" {
        bail!("Prometheus: expected a vector for {q}, got {}", data.result_type);
    }
    Ok(data.result.into_iter().filter_map(|s| s.value.1.parse::<f64>().ok().map(|v| (s.metric, v))).collect())
}

fn label<'a>(m: &'a BTreeMap<String, String>, k: &str) -> Option<&'a str> {
    m.get(k).map(String::as_str).filter(|v| !v.is_empty())
}

fn node_of(m: &BTreeMap<String, String>, addr_key: &str) -> Option<NodeRef> {
    Some(NodeRef {
        addr: label(m, addr_key)?.to_owned(),
        name: label(m, "node").map(str::to_owned),
        zone: label(m, "zone").map(str::to_owned),
    })
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "counts and ns from gauges")]
fn whole(v: f64) -> Option<u64> {
    (0.0..1e18).contains(&v).then(|| v.round() as u64)
}

/// Builds the matrix from what Prometheus holds now.
pub async fn matrix(
    c: &HttpClient,
    base: &Uri,
    token: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<MatrixBuilder> {
    let mut rows = Vec::with_capacity(QUERIES.len());
    for q in QUERIES {
        rows.push(query(c, base, q, token, timeout).await?);
    }
    let [known, up, peer_info, sent, lost, rtt, window] =
        <[Rows; 7]>::try_from(rows).map_err(|_| anyhow::anyhow!("query count"))?;
    let mut b = MatrixBuilder::new("prometheus");
    if let Some(w) = window.first().and_then(|(_, v)| whole(v * 1e9)) {
        b.set_window(w);
    }
    let mut agents: HashMap<String, NodeRef> = HashMap::new();
    for (m, _) in &known {
        if let (Some(inst), Some(n)) = (label(m, "instance"), node_of(m, "addr")) {
            agents.insert(inst.to_owned(), n);
        }
    }
    let up: Vec<&str> = up.iter().filter_map(|(m, _)| label(m, "instance")).collect();
    for inst in &up {
        if let Some(n) = agents.get(*inst) {
            b.mark_reported(n);
        }
    }
    let mut peers: HashMap<String, NodeRef> = HashMap::new();
    for (m, _) in &peer_info {
        if let Some(n) = node_of(m, "peer") {
            peers.insert(n.addr.clone(), n);
        }
    }
    let key = |m: &BTreeMap<String, String>| -> Option<Key> {
        Some((label(m, "instance")?.to_owned(), label(m, "peer")?.to_owned(), label(m, "proto")?.to_owned()))
    };
    let mut cells: BTreeMap<Key, CellRows> = BTreeMap::new();
    for (m, v) in &sent {
        if let (Some(k), Some(v)) = (key(m), whole(*v)) {
            cells.entry(k).or_default().0 = Some(v);
        }
    }
    for (m, v) in &lost {
        if let (Some(k), Some(v)) = (key(m), whole(*v)) {
            cells.entry(k).or_default().1 = Some(v);
        }
    }
    for (m, v) in &rtt {
        if let (Some(k), Some(q), Some(ns)) = (key(m), label(m, "quantile"), whole(v * 1e9)) {
            cells.entry(k).or_default().2.insert(q.to_owned(), ns);
        }
    }
    for ((inst, peer, proto), (sent, lost, qs)) in cells {
        let (Some(src), Some(proto), Some(sent)) = (agents.get(&inst), Proto::parse(&proto), sent) else { continue };
        let lost = lost.unwrap_or(0).min(sent);
        let dst = peers.get(&peer).cloned().unwrap_or(NodeRef { addr: peer, name: None, zone: None });
        let rtt = match (qs.get("0"), qs.get("0.5"), qs.get("0.99"), qs.get("1")) {
            (Some(&min_ns), Some(&p50_ns), Some(&p99_ns), Some(&max_ns))
                if min_ns <= p50_ns && p50_ns <= p99_ns && p99_ns <= max_ns && sent > lost =>
            {
                Some(RttSummary { count: sent - lost, min_ns, p50_ns, p99_ns, max_ns })
            }
            _ => None,
        };
        if up.contains(&inst.as_str()) {
            b.add_cell(src, &dst, proto, sent, lost, rtt);
        }
    }
    for (inst, n) in &agents {
        if !up.contains(&inst.as_str()) {
            let ip = n.addr.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
            b.node(n);
            b.add_unreachable(ip, &n.addr, &format!("Prometheus has no current scrape of {inst}"));
        }
    }
    Ok(b)
}
