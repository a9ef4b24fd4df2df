//! The matrix from a Prometheus server that scrapes the agents: instant queries over its
//! HTTP API (`/api/v1/query`), joined on the `instance` label Prometheus adds. The numbers
//! are the agents' own window gauges, so they equal what `/v1/matrix` says for the same
//! window (without the histograms: percentiles cannot be merged from Prometheus).
//!
//! The queries ([`QUERIES`], also in docs/modes/mesh.md):
//! - `last_over_time(wirebench_mesh_agent_info[1h])`: every agent seen in the last hour;
//! - `wirebench_mesh_agent_info`: those whose last scrape worked (a failed scrape makes the
//!   series stale at once), the others have no row;
//! - `wirebench_mesh_peer_info`: names and zones of the peers, and which are STAMP
//!   reflectors (`kind="stamp"`);
//! - `wirebench_mesh_peer_window_sent`, `wirebench_mesh_peer_window_lost`,
//!   `wirebench_mesh_peer_rtt_seconds`: each cell's last window;
//! - `max(wirebench_mesh_window_seconds)`: the window length.
//!
//! Bounded as pulling the agents is: each query within `--timeout` and the stop signal, one
//! after another; every answer read within what is left of `--max-matrix` (its text while
//! it is parsed, then what is kept of it: [`Row`]s of the labels used, until the matrix is
//! built), and the matrix within what the answers leave. An answer that does not fit is
//! refused whole and no matrix is built from the others (Prometheus is named skipped); an
//! agent whose row does not fit is refused whole and named skipped, as a stop names
//! Prometheus. Each agent's row goes through [`MatrixBuilder::add_report`], checked as an
//! agent's own `/v1/matrix` is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::size_of;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use hyper::Uri;
use serde::Deserialize;
use serde_json::value::RawValue;
use wirebench_core::mesh::api::{API_VERSION, CellReport, MatrixReport, NodeRef, Proto};
use wirebench_core::mesh::matrix::{MatrixBuilder, Refused};
use wirebench_core::mesh::window::RttSummary;

use crate::http_client::{HttpClient, TooLong};
use crate::shutdown::Shutdown;

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

#[derive(Debug, Deserialize)]
struct Answer<'a> {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
}

#[derive(Debug, Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    /// Each sample's text, read one at a time into a [`Row`].
    #[serde(borrow)]
    result: Vec<&'a RawValue>,
}

/// The labels the matrix is built from (the others are not kept).
#[derive(Debug, Default, Deserialize)]
struct Labels {
    instance: Option<String>,
    addr: Option<String>,
    node: Option<String>,
    zone: Option<String>,
    peer: Option<String>,
    proto: Option<String>,
    quantile: Option<String>,
    /// `stamp` on a STAMP reflector's `wirebench_mesh_peer_info`.
    kind: Option<String>,
}

impl Labels {
    fn text(&self) -> usize {
        [&self.instance, &self.addr, &self.node, &self.zone, &self.peer, &self.proto, &self.quantile, &self.kind]
            .iter()
            .map(|l| l.as_ref().map_or(0, String::capacity))
            .sum()
    }
}

#[derive(Debug, Deserialize)]
struct Sample {
    #[serde(default)]
    metric: Labels,
    value: (f64, String),
}

/// What is kept of one sample.
#[derive(Debug)]
struct Row {
    labels: Labels,
    value: f64,
}

/// (instance, peer, proto).
type Key = (String, String, String);
/// A cell's window sent, lost, and round trip by quantile.
type CellRows = (Option<u64>, Option<u64>, BTreeMap<String, u64>);

/// Why a query gave no rows.
enum Failed {
    /// Its answer does not fit what is left of the budget: why.
    Budget(String),
    /// Prometheus cannot be asked, or answered an error.
    Error(anyhow::Error),
}

impl From<anyhow::Error> for Failed {
    fn from(e: anyhow::Error) -> Self {
        Self::Error(e)
    }
}

/// One instant query, its answer within `left` bytes (its text and the list of its samples
/// while they are read, plus the rows kept): the rows and what they hold, bytes.
async fn query(
    c: &HttpClient,
    base: &Uri,
    q: &str,
    token: Option<&str>,
    timeout: Duration,
    left: usize,
) -> Result<(Vec<Row>, usize), Failed> {
    let url: Uri =
        format!("{}/api/v1/query?query={}", base.to_string().trim_end_matches('/'), crate::http_client::query_value(q))
            .parse()
            .map_err(anyhow::Error::from)?;
    let too_long = |read: usize| {
        Failed::Budget(format!(
            "its answer to {q} passes what is left of the budget ({read} bytes read of {left} left)"
        ))
    };
    let (status, body) = match c.get(&url, token, left, timeout).await {
        Ok(got) => got,
        Err(e) if e.is::<TooLong>() => return Err(too_long(left + 1)),
        Err(e) => return Err(e.into()),
    };
    let a: Answer<'_> =
        serde_json::from_slice(&body).with_context(|| format!("Prometheus answered HTTP {status}, not its JSON"))?;
    if a.status != "success" {
        return Err(anyhow!("Prometheus: {} ({q})", a.error.unwrap_or(a.status)).into());
    }
    let data = a.data.context("Prometheus: no data")?;
    if data.result_type != "vector" {
        return Err(anyhow!("Prometheus: expected a vector for {q}, got {}", data.result_type).into());
    }
    let reading = body.len() + data.result.capacity() * size_of::<&RawValue>();
    let mut rows: Vec<Row> = Vec::new();
    let mut labels = 0;
    for raw in &data.result {
        let s: Sample = serde_json::from_str(raw.get())
            .with_context(|| format!("Prometheus answered HTTP {status}, not its JSON"))?;
        let Ok(value) = s.value.1.parse::<f64>() else { continue };
        labels += s.metric.text();
        // Grown here, so no allocation passes the budget before it is checked.
        let cap = if rows.len() < rows.capacity() { rows.capacity() } else { (2 * rows.capacity()).max(16) };
        let holds = labels + cap * size_of::<Row>();
        if reading + holds > left {
            return Err(too_long(reading + holds));
        }
        rows.reserve_exact(cap - rows.len());
        rows.push(Row { labels: s.metric, value });
    }
    let holds = labels + rows.capacity() * size_of::<Row>();
    Ok((rows, holds))
}

fn label(v: Option<&String>) -> Option<&str> {
    v.map(String::as_str).filter(|v| !v.is_empty())
}

fn node_of(l: &Labels, addr: Option<&String>) -> Option<NodeRef> {
    Some(NodeRef {
        addr: label(addr)?.to_owned(),
        name: label(l.node.as_ref()).map(str::to_owned),
        zone: label(l.zone.as_ref()).map(str::to_owned),
        stamp: l.kind.as_deref() == Some("stamp"),
    })
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "counts and ns from gauges")]
fn whole(v: f64) -> Option<u64> {
    (0.0..1e18).contains(&v).then(|| v.round() as u64)
}

/// Builds the matrix from what Prometheus holds now, within `budget` bytes (the answers
/// and the matrix together), unless `stop` comes first: the matrix, and whether it was
/// stopped. Prometheus is named skipped when it was stopped before it answered every query
/// or an answer did not fit: no matrix is built from part of the answers.
pub async fn matrix(
    c: &HttpClient,
    base: &Uri,
    token: Option<&str>,
    timeout: Duration,
    budget: usize,
    stop: &Shutdown,
) -> anyhow::Result<(MatrixBuilder, bool)> {
    let mut rows = Vec::with_capacity(QUERIES.len());
    let mut held = 0usize;
    let skipped = |why: &str| {
        let mut b = MatrixBuilder::new("prometheus");
        b.add_skipped(None, &base.to_string(), why);
        b
    };
    for (k, q) in QUERIES.into_iter().enumerate() {
        let left = budget.saturating_sub(held);
        let got = tokio::select! {
            got = query(c, base, q, token, timeout, left) => got,
            () = stop.stopped() => {
                let why = format!("stopped before it answered ({k} of {} queries answered)", QUERIES.len());
                return Ok((skipped(&why), true));
            }
        };
        match got {
            Ok((r, cost)) => {
                held += cost;
                rows.push(r);
            }
            Err(Failed::Budget(why)) => {
                let why = format!(
                    "not kept: {why}: {}; no matrix from part of the answers ({} of {} not asked)",
                    super::status::budget_words(budget),
                    QUERIES.len() - k - 1,
                    QUERIES.len()
                );
                return Ok((skipped(&why), false));
            }
            Err(Failed::Error(e)) => return Err(e),
        }
    }
    let answers = <[Vec<Row>; 7]>::try_from(rows).map_err(|_| anyhow!("query count"))?;
    Ok((join(answers, MatrixBuilder::new("prometheus").with_budget(budget.saturating_sub(held))), false))
}

/// The matrix from the answers to [`QUERIES`], in their order: each agent whose last scrape
/// worked is one report to [`MatrixBuilder::add_report`] (refused whole past `b`'s budget:
/// named skipped; refused as wrong: unreachable), each agent seen whose scrape failed is
/// named unreachable.
fn join(answers: [Vec<Row>; 7], mut b: MatrixBuilder) -> MatrixBuilder {
    let [known, up, peer_info, sent, lost, rtt, window] = answers;
    if let Some(w) = window.first().and_then(|r| whole(r.value * 1e9)) {
        b.set_window(w);
    }
    let mut agents: HashMap<String, NodeRef> = HashMap::new();
    for r in known {
        if let (Some(inst), Some(n)) = (label(r.labels.instance.as_ref()), node_of(&r.labels, r.labels.addr.as_ref())) {
            agents.insert(inst.to_owned(), n);
        }
    }
    let up: BTreeSet<String> = up.into_iter().filter_map(|r| r.labels.instance.filter(|i| !i.is_empty())).collect();
    let mut peers: HashMap<String, NodeRef> = HashMap::new();
    for r in peer_info {
        if let Some(n) = node_of(&r.labels, r.labels.peer.as_ref()) {
            peers.insert(n.addr.clone(), n);
        }
    }
    let key = |l: Labels| -> Option<Key> {
        Some((
            l.instance.filter(|v| !v.is_empty())?,
            l.peer.filter(|v| !v.is_empty())?,
            l.proto.filter(|v| !v.is_empty())?,
        ))
    };
    let mut cells: BTreeMap<Key, CellRows> = BTreeMap::new();
    for r in sent {
        if let (Some(v), Some(k)) = (whole(r.value), key(r.labels)) {
            cells.entry(k).or_default().0 = Some(v);
        }
    }
    for r in lost {
        if let (Some(v), Some(k)) = (whole(r.value), key(r.labels)) {
            cells.entry(k).or_default().1 = Some(v);
        }
    }
    for mut r in rtt {
        let q = r.labels.quantile.take().filter(|q| !q.is_empty());
        if let (Some(q), Some(ns), Some(k)) = (q, whole(r.value * 1e9), key(r.labels)) {
            cells.entry(k).or_default().2.insert(q, ns);
        }
    }
    // One report per agent whose last scrape worked, its cells with it (cells are in
    // instance order).
    let mut rows: BTreeMap<String, Vec<CellReport>> = up.iter().map(|i| (i.clone(), Vec::new())).collect();
    for ((inst, peer, proto), (sent, lost, qs)) in cells {
        let (Some(row), Some(proto), Some(sent)) = (rows.get_mut(&inst), Proto::parse(&proto), sent) else { continue };
        let lost = lost.unwrap_or(0).min(sent);
        let rtt = match (qs.get("0"), qs.get("0.5"), qs.get("0.99"), qs.get("1")) {
            (Some(&min_ns), Some(&p50_ns), Some(&p99_ns), Some(&max_ns))
                if min_ns <= p50_ns && p50_ns <= p99_ns && p99_ns <= max_ns && sent > lost =>
            {
                Some(RttSummary { count: sent - lost, min_ns, p50_ns, p99_ns, max_ns })
            }
            _ => None,
        };
        let peer = peers.get(&peer).cloned().unwrap_or_else(|| NodeRef::at(peer));
        row.push(CellReport {
            peer,
            proto,
            sent,
            received: sent - lost,
            lost,
            late: 0,
            duplicates: 0,
            rtt,
            histogram: None,
        });
    }
    let mut refused = Vec::new();
    for (inst, cells) in rows {
        let Some(agent) = agents.get(&inst) else { continue };
        let report = MatrixReport { api_version: API_VERSION, agent: agent.clone(), window: None, cells };
        match b.add_report(&report) {
            Ok(()) => {}
            Err(e @ Refused::Budget { .. }) => refused.push((agent, format!("not kept: {e}"), true)),
            Err(e) => refused.push((agent, format!("refused: {e}"), false)),
        }
    }
    // Named by their exact address (several agents can share an IP).
    for (n, why, skipped) in refused {
        b.node(n);
        if skipped {
            b.add_skipped(None, &n.addr, &why);
        } else {
            b.add_unreachable(None, &n.addr, &why);
        }
    }
    for (inst, n) in &agents {
        if !up.contains(inst) {
            b.node(n);
            b.add_unreachable(None, &n.addr, &format!("Prometheus has no current scrape of {inst}"));
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use wirebench_core::mesh::verdict::Thresholds;

    use super::*;

    fn row(labels: &[(&str, &str)], value: f64) -> Row {
        let mut l = Labels::default();
        for &(k, v) in labels {
            let slot = match k {
                "instance" => &mut l.instance,
                "addr" => &mut l.addr,
                "peer" => &mut l.peer,
                "proto" => &mut l.proto,
                "quantile" => &mut l.quantile,
                "kind" => &mut l.kind,
                _ => unreachable!("{k}"),
            };
            *slot = Some(v.to_owned());
        }
        Row { labels: l, value }
    }

    /// The answers for agents 127.0.0.2:(20000 + i), i in `agents`, each up and probing its
    /// own peer 127.0.0.3:(20000 + i) over UDP: 10 sent, none lost, 1 ms round trips.
    fn answers(agents: &[usize]) -> [Vec<Row>; 7] {
        let mut a: [Vec<Row>; 7] = Default::default();
        for i in agents {
            let (me, peer) = (format!("127.0.0.2:{}", 20_000 + i), format!("127.0.0.3:{}", 20_000 + i));
            let cell = [("instance", me.as_str()), ("peer", peer.as_str()), ("proto", "udp")];
            a[0].push(row(&[("instance", &me), ("addr", &me)], 1.0));
            a[1].push(row(&[("instance", &me), ("addr", &me)], 1.0));
            a[2].push(row(&[("instance", &me), ("peer", &peer)], 1.0));
            a[3].push(row(&cell, 10.0));
            a[4].push(row(&cell, 0.0));
            for q in ["0", "0.5", "0.99", "1"] {
                a[5].push(row(&[cell[0], cell[1], cell[2], ("quantile", q)], 0.001));
            }
        }
        a[6].push(row(&[], 10.0));
        a
    }

    /// An agent's row past what the answers leave of the budget is refused whole and named
    /// skipped (not dropped, not unreachable); the row that fits is kept and judged.
    #[test]
    fn an_agent_row_past_the_budget_is_named_skipped() {
        let one = join(answers(&[0]), MatrixBuilder::new("prometheus")).held();
        let m = join(answers(&[0, 1]), MatrixBuilder::new("prometheus").with_budget(one + 100))
            .finish(&Thresholds::default());
        let reported: Vec<&str> = m.nodes.iter().filter(|n| n.reported).map(|n| n.addr.as_str()).collect();
        assert_eq!(reported, ["127.0.0.2:20000"]);
        let named: Vec<(&str, &str)> = m.problems.iter().map(|p| (p.kind.as_str(), p.summary.as_str())).collect();
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!(named[0].0, "skipped");
        let want =
            format!("agent 127.0.0.2:20001 skipped: not kept: the matrix holds {one} of its {} bytes", one + 100);
        assert!(named[0].1.starts_with(&want), "{named:?}");
        assert_eq!(
            m.cells.iter().filter(|c| c.verdict == wirebench_core::report::CellJudged::Good).count(),
            1,
            "{:?}",
            m.cells
        );
        // With room for both, both rows are kept.
        let both = join(answers(&[0, 1]), MatrixBuilder::new("prometheus")).finish(&Thresholds::default());
        assert_eq!((both.nodes.iter().filter(|n| n.reported).count(), both.problems.len()), (2, 0));
    }

    /// A peer whose info says `kind="stamp"` is a STAMP reflector: a column, no row, not an
    /// agent that did not report.
    #[test]
    fn a_stamp_peer_from_prometheus_is_a_reflector() {
        let mut a = answers(&[0]);
        a[2][0].labels.kind = Some("stamp".into());
        let m = join(a, MatrixBuilder::new("prometheus")).finish(&Thresholds::default());
        let r = m.nodes.iter().find(|n| n.addr == "127.0.0.3:20000").unwrap();
        assert!(r.stamp && !r.reported);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
    }
}
