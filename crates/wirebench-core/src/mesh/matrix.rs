//! The fleet matrix: rows from every agent's latest window (or from Prometheus), checked,
//! merged, judged. Histograms are merged whole, so the fleet's percentiles are exact.
//!
//! Nothing from an agent is trusted: a report whose numbers do not add up (received plus
//! lost not equal to sent, percentiles out of order, a histogram that disagrees with its
//! counts or is wider than a mesh histogram can be) is refused whole, and its row shows
//! why.
//!
//! What the matrix holds is bounded ([`MatrixBuilder::with_budget`]): each cell costs
//! [`CELL_BYTES`] plus its histogram's text (a histogram is decoded to check it and again,
//! one at a time, to merge it in [`MatrixBuilder::finish`]; never kept decoded: a decoded
//! mesh histogram is 64 KiB for microsecond round trips, up to about 200 KiB for one that
//! claims the longest timeout, from a text of a hundred bytes), each node [`NODE_BYTES`]
//! plus its labels. A report that would pass the budget is refused whole
//! ([`Refused::Budget`]), checked cell by cell as it is read.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::net::{IpAddr, SocketAddr};

use base64::Engine as _;
use hdrhistogram::Histogram;

use super::api::{API_VERSION, MatrixReport, NodeRef, Proto};
use super::peer::check_label;
use super::verdict::{CellInput, CellVerdict, Grid, Problem, Thresholds};
use super::window::{MAX_TIMEOUT_NS, RttSummary};
use crate::latency::{DEFAULT_PERCENTILES, Summary};
use crate::report::{
    CellJudged, LatencyView, MeshCell, MeshCombined, MeshNode, MeshProblem, MeshResults, MeshThresholds,
    decode_histogram, encode_histogram,
};

/// Most cells one agent may report (three transports to the most peers a source gives).
pub const MAX_CELLS: usize = 3 * super::peer::MAX_PEERS;
/// Longest histogram text accepted in a cell.
const MAX_HISTOGRAM_TEXT: usize = 64 << 10;
/// What one cell costs the budget besides its histogram's text: the cell, its key and the
/// map's share (rounded up), and the cell it becomes in the results.
pub const CELL_BYTES: usize = 256;
/// What one node costs the budget besides its address, name and zone (twice: the builder's
/// and the index's copy of the address).
pub const NODE_BYTES: usize = 256;

#[derive(Debug, Clone)]
struct Cell {
    sent: u64,
    lost: u64,
    rtt: Option<RttSummary>,
    /// The histogram's text, checked (decoded again to merge).
    histogram: Option<String>,
}

/// Why a report was not added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Its numbers do not add up, or it is another API version: why.
    Invalid(String),
    /// Keeping it would take the matrix past its budget.
    Budget {
        /// The budget, bytes.
        budget: usize,
        /// What the matrix held before it, bytes.
        held: usize,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) => f.write_str(why),
            Self::Budget { budget, held } => {
                write!(f, "the matrix holds {held} of its {budget} bytes: this row would pass them")
            }
        }
    }
}

impl From<String> for Refused {
    fn from(why: String) -> Self {
        Self::Invalid(why)
    }
}

/// Collects rows, then [`Self::finish`]es into [`MeshResults`].
#[derive(Debug, Clone)]
pub struct MatrixBuilder {
    source: String,
    nodes: Vec<MeshNode>,
    index: HashMap<String, usize>,
    cells: BTreeMap<(usize, usize, Proto), Cell>,
    window_ns: Option<u64>,
    window_start: Option<u64>,
    /// Bytes the matrix may hold, and holds.
    budget: usize,
    held: usize,
    /// Agents not asked or not kept (by their node index): named `skipped`, not unreachable.
    skipped: Vec<usize>,
}

fn check_node(r: &NodeRef) -> Result<(), String> {
    r.addr.parse::<SocketAddr>().map_err(|_| format!("'{}' is not an ip:port", r.addr))?;
    for (what, v) in [("name", &r.name), ("zone", &r.zone)] {
        if let Some(v) = v {
            check_label(what, v)?;
        }
    }
    Ok(())
}

/// Reads a mesh histogram, refusing (before allocating it) one of more than 3 significant
/// digits or a range past the longest timeout: such a header would cost tens of MiB.
fn decode_mesh_histogram(text: &str) -> Result<Histogram<u64>, String> {
    if text.len() > MAX_HISTOGRAM_TEXT {
        return Err("histogram text too long".into());
    }
    let raw = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("histogram: {e}"))?;
    let cookie = raw.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let mut header = [0u8; 40];
    match cookie {
        Some(0x1c84_9314) => {
            let body = raw.get(8..).ok_or("histogram: truncated")?;
            flate2::read::ZlibDecoder::new(body).read_exact(&mut header).map_err(|_| "histogram: truncated")?;
        }
        Some(0x1c84_9313) => header.copy_from_slice(raw.get(..40).ok_or("histogram: truncated")?),
        _ => return Err("histogram: not an HdrHistogram V2 encoding".into()),
    }
    let sigfig = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    let mut hi = [0u8; 8];
    hi.copy_from_slice(&header[24..32]);
    if sigfig > 3 || u64::from_be_bytes(hi) > 2 * MAX_TIMEOUT_NS {
        return Err("histogram: wider or finer than a mesh histogram".into());
    }
    decode_histogram(text).map_err(|e| e.to_string())
}

impl MatrixBuilder {
    /// An empty matrix from `source` (`agents` or `prometheus`).
    pub fn new(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            nodes: Vec::new(),
            index: HashMap::new(),
            cells: BTreeMap::new(),
            window_ns: None,
            window_start: None,
            budget: usize::MAX,
            held: 0,
            skipped: Vec::new(),
        }
    }

    /// The same, holding at most `bytes` (see the module's doc for what counts).
    #[must_use]
    pub fn with_budget(mut self, bytes: usize) -> Self {
        self.budget = bytes;
        self
    }

    /// Bytes held so far, as the budget counts them.
    pub fn held(&self) -> usize {
        self.held
    }

    fn node_bytes(r: &NodeRef) -> usize {
        NODE_BYTES + 2 * r.addr.len() + r.name.as_ref().map_or(0, String::len) + r.zone.as_ref().map_or(0, String::len)
    }

    /// The index of node `r`, added if new; labels fill in as sources learn them, and a
    /// prober that calls it a STAMP reflector makes it one.
    pub fn node(&mut self, r: &NodeRef) -> usize {
        let i = *self.index.entry(r.addr.clone()).or_insert_with(|| {
            self.held = self.held.saturating_add(Self::node_bytes(r));
            self.nodes.push(MeshNode {
                addr: r.addr.clone(),
                name: None,
                zone: None,
                reported: false,
                error: None,
                stamp: false,
            });
            self.nodes.len() - 1
        });
        let n = &mut self.nodes[i];
        n.stamp |= r.stamp;
        if n.name.is_none() {
            n.name.clone_from(&r.name);
        }
        if n.zone.is_none() {
            n.zone.clone_from(&r.zone);
        }
        i
    }

    /// Adds one agent's `/v1/matrix`, or refuses it whole with the reason.
    pub fn add_report(&mut self, rep: &MatrixReport) -> Result<(), Refused> {
        if rep.api_version != API_VERSION {
            return Err(format!("API version {} (this build reads {API_VERSION})", rep.api_version).into());
        }
        check_node(&rep.agent)?;
        if rep.cells.len() > MAX_CELLS {
            return Err(format!("{} cells (at most {MAX_CELLS})", rep.cells.len()).into());
        }
        // What keeping it costs, counted as it is read (the nodes at most: some may be known).
        let left = self.budget.saturating_sub(self.held);
        let over = Refused::Budget { budget: self.budget, held: self.held };
        let mut cost = Self::node_bytes(&rep.agent);
        let mut cells = Vec::new();
        for c in &rep.cells {
            cost += CELL_BYTES + Self::node_bytes(&c.peer) + c.histogram.as_ref().map_or(0, String::len);
            if cost > left {
                return Err(over);
            }
            check_node(&c.peer)?;
            let bad = |why: &str| format!("cell to {} ({}): {why}", c.peer.addr, c.proto.name());
            if c.received.checked_add(c.lost) != Some(c.sent) {
                return Err(bad("received + lost != sent").into());
            }
            if let Some(r) = &c.rtt
                && (r.count != c.received || !(r.min_ns <= r.p50_ns && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns))
            {
                return Err(bad("round-trip summary disagrees with itself or the counts").into());
            }
            let histogram = match &c.histogram {
                None => None,
                Some(text) => {
                    let h = decode_mesh_histogram(text).map_err(|e| bad(&e))?;
                    if h.len() != c.received || RttSummary::of(&h) != c.rtt {
                        return Err(bad("histogram disagrees with the counts").into());
                    }
                    Some(text.clone())
                }
            };
            cells.push((c, Cell { sent: c.sent, lost: c.lost, rtt: c.rtt, histogram }));
        }
        let src = self.node(&rep.agent);
        // An agent's own name and zone win over what its peers' lists call it.
        if rep.agent.name.is_some() {
            self.nodes[src].name.clone_from(&rep.agent.name);
        }
        if rep.agent.zone.is_some() {
            self.nodes[src].zone.clone_from(&rep.agent.zone);
        }
        self.nodes[src].reported = true;
        self.nodes[src].error = None;
        for (c, cell) in cells {
            let dst = self.node(&c.peer);
            if dst != src {
                let text = cell.histogram.as_ref().map_or(0, String::len);
                if let Some(old) = self.cells.insert((src, dst, c.proto), cell) {
                    self.held = self.held.saturating_sub(CELL_BYTES + old.histogram.map_or(0, |t| t.len()));
                }
                self.held = self.held.saturating_add(CELL_BYTES + text);
            }
        }
        if let Some(w) = rep.window {
            self.window_ns = Some(w.len_ns);
            self.window_start = Some(self.window_start.map_or(w.start_unix_ns, |s| s.max(w.start_unix_ns)));
        }
        Ok(())
    }

    /// An agent that did not answer (or was refused): its row is missing. It is matched to
    /// the one node at `ip` whose row is missing (several agents can share an address on
    /// one host; a STAMP reflector is never an agent), else to the one whose name (as its peers know it) is the host in `label`
    /// (`http://node-c:9878/`), else listed under `label`. Call after every report is added.
    pub fn add_unreachable(&mut self, ip: Option<IpAddr>, label: &str, why: &str) {
        self.missing(ip, label, why);
    }

    /// An agent whose row is missing because it was not asked or not kept (the budget was
    /// spent, or the run was stopped): matched as [`Self::add_unreachable`] does, and named
    /// `skipped`, not unreachable. Call after every report is added.
    pub fn add_skipped(&mut self, ip: Option<IpAddr>, label: &str, why: &str) {
        let i = self.missing(ip, label, why);
        if !self.nodes[i].reported {
            self.skipped.push(i);
        }
    }

    fn missing(&mut self, ip: Option<IpAddr>, label: &str, why: &str) -> usize {
        let hits: Vec<usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.reported && n.error.is_none() && !n.stamp)
            .filter(|(_, n)| ip.is_some_and(|ip| n.addr.parse::<SocketAddr>().is_ok_and(|a| a.ip() == ip)))
            .map(|(i, _)| i)
            .collect();
        let host = label.split_once("://").map_or(label, |(_, rest)| rest);
        let host = host.split(['/', ':']).next().unwrap_or_default();
        let named: Vec<usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.reported && n.error.is_none() && !n.stamp && !host.is_empty())
            .filter(|(_, n)| n.name.as_deref() == Some(host))
            .map(|(i, _)| i)
            .collect();
        let i = match (&hits[..], &named[..]) {
            ([one], _) | ([], [one]) => *one,
            ([_, _, ..], [one]) if hits.contains(one) => *one,
            _ => self.node(&NodeRef::at(label)),
        };
        if !self.nodes[i].reported {
            self.nodes[i].error = Some(why.to_owned());
        }
        i
    }

    /// A cell known only by its summary (Prometheus). Marks `src` as reported.
    pub fn add_cell(
        &mut self,
        src: &NodeRef,
        dst: &NodeRef,
        proto: Proto,
        sent: u64,
        lost: u64,
        rtt: Option<RttSummary>,
    ) {
        let (s, d) = (self.node(src), self.node(dst));
        self.nodes[s].reported = true;
        if s != d
            && self.cells.insert((s, d, proto), Cell { sent, lost: lost.min(sent), rtt, histogram: None }).is_none()
        {
            self.held = self.held.saturating_add(CELL_BYTES);
        }
    }

    /// Marks node `r` as having given its row (Prometheus: its scrape worked).
    pub fn mark_reported(&mut self, r: &NodeRef) {
        let i = self.node(r);
        self.nodes[i].reported = true;
        self.nodes[i].error = None;
    }

    /// Sets the window length (Prometheus: what the agents export).
    pub fn set_window(&mut self, len_ns: u64) {
        self.window_ns = Some(len_ns);
    }

    /// Sorts the nodes (zone, then name, then address), judges every cell and names the
    /// problems.
    pub fn finish(self, thresholds: &Thresholds) -> MeshResults {
        let t = thresholds;
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            (&x.zone, x.label(), &x.addr).cmp(&(&y.zone, y.label(), &y.addr))
        });
        let mut new_of = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of[old] = new;
        }
        let mut nodes: Vec<MeshNode> = order.iter().map(|&o| self.nodes[o].clone()).collect();
        // Two nodes with one name (agents on one host all default to its host name) would be
        // two rows called the same: those are shown by address.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for n in &nodes {
            if let Some(name) = &n.name {
                *seen.entry(name.clone()).or_default() += 1;
            }
        }
        for n in &mut nodes {
            if n.name.as_ref().is_some_and(|name| seen[name] > 1) {
                n.name = None;
            }
            // A node that gave a row is an agent, whatever a peer list called it.
            n.stamp &= !n.reported;
        }
        let zones: Vec<Option<String>> = nodes.iter().map(|n| n.zone.clone()).collect();
        let mut unicast = Grid::new(zones.clone());
        let mut multicast = Grid::new(zones);
        for (i, n) in nodes.iter().enumerate() {
            unicast.no_row[i] = !n.reported && !n.stamp;
            multicast.no_row[i] = !n.reported && !n.stamp;
            unicast.reflector[i] = n.stamp;
            multicast.reflector[i] = n.stamp;
        }
        let mut cells = Vec::with_capacity(self.cells.len());
        let mut merged: BTreeMap<Proto, Histogram<u64>> = BTreeMap::new();
        let mut any_multicast = false;
        for (&(s, d, proto), c) in &self.cells {
            let (src, dst) = (new_of[s], new_of[d]);
            let v = CellInput { sent: c.sent, lost: c.lost, p99_ns: c.rtt.map(|r| r.p99_ns) }.verdict(t);
            let grid = if proto == Proto::Multicast {
                any_multicast = true;
                &mut multicast
            } else {
                &mut unicast
            };
            let worse = match (grid.at(src, dst), v) {
                (CellVerdict::Bad, _) | (_, CellVerdict::Bad) => CellVerdict::Bad,
                (CellVerdict::Good, _) | (_, CellVerdict::Good) => CellVerdict::Good,
                _ => CellVerdict::Unknown,
            };
            grid.set(src, dst, worse);
            // Checked when it was added: decoded again, one at a time.
            if let Some(h) = c.histogram.as_deref().and_then(|t| decode_mesh_histogram(t).ok()) {
                let m = merged.entry(proto).or_insert_with(crate::latency::histogram);
                let _ = m.add(&h);
            }
            cells.push(MeshCell {
                src,
                dst,
                proto: proto.name().to_owned(),
                sent: c.sent,
                lost: c.lost,
                rtt: c.rtt,
                histogram: c.histogram.clone(),
                verdict: match v {
                    CellVerdict::Good => CellJudged::Good,
                    CellVerdict::Bad => CellJudged::Bad,
                    CellVerdict::Unknown => CellJudged::Unknown,
                },
            });
        }
        cells.sort_by(|a, b| (a.src, a.dst, &a.proto).cmp(&(b.src, b.dst, &b.proto)));
        let mut named = describe("unicast", &unicast, &nodes);
        if any_multicast {
            named.extend(describe("multicast", &multicast, &nodes));
        }
        let judged = cells.iter().any(|c| c.verdict != CellJudged::Unknown);
        let skipped: Vec<bool> = order.iter().map(|o| self.skipped.contains(o)).collect();
        let mut problems = no_rows(&self.source, &nodes, &skipped, &named, judged, t.min_probes);
        problems.extend(named);
        let combined = merged
            .into_iter()
            .map(|(p, h)| MeshCombined {
                proto: p.name().to_owned(),
                latency: LatencyView {
                    measures: crate::report::Measure::RttFromSend,
                    summary: Summary::of(&h, &DEFAULT_PERCENTILES),
                    histogram: encode_histogram(&h),
                },
            })
            .collect();
        MeshResults {
            source: self.source,
            window_ns: self.window_ns,
            window_start_unix_ns: self.window_start,
            thresholds: MeshThresholds { max_loss: t.max_loss, max_p99_ns: t.max_p99_ns, min_probes: t.min_probes },
            nodes,
            cells,
            problems,
            combined,
        }
    }
}

/// The agents asked that gave no row (unless a verdict already names the node down; those
/// not asked or not kept are `skipped`), and,
/// when no agent gave one, that there is no matrix; when rows came but no cell in them is
/// judged (none has `min_probes`: no window closed yet, or every cell too thin), that
/// nothing is judged yet. A status that heard nothing judgeable must not read as
/// healthy.
fn no_rows(
    source: &str,
    nodes: &[MeshNode],
    skipped: &[bool],
    named: &[MeshProblem],
    judged: bool,
    min_probes: u64,
) -> Vec<MeshProblem> {
    let mut out: Vec<MeshProblem> = nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| !n.reported && !named.iter().any(|p| p.down && p.nodes.contains(i)))
        .filter_map(|(i, n)| {
            let why = n.error.as_deref()?;
            let kind = if skipped[i] { "skipped" } else { "unreachable" };
            // From Prometheus, a row named by a URL is Prometheus itself (stopped, or an
            // answer past the budget): no agent's row could be read.
            let who = if source == "prometheus" && n.addr.contains("://") { "Prometheus" } else { "agent" };
            Some(MeshProblem {
                scope: "agents".into(),
                kind: kind.into(),
                nodes: vec![i],
                zones: n.zone.iter().cloned().collect(),
                down: false,
                summary: format!("{who} {} {kind}: {why}", n.label()),
            })
        })
        .collect();
    if !nodes.iter().any(|n| n.reported) {
        let summary = if source == "prometheus" && skipped.contains(&true) {
            "no agent's row read from Prometheus: no matrix to judge"
        } else if source == "prometheus" {
            "Prometheus holds no current scrape of any agent: no matrix to judge"
        } else {
            "no agent gave its row: no matrix to judge"
        };
        out.push(MeshProblem {
            scope: "agents".into(),
            kind: "no_matrix".into(),
            nodes: Vec::new(),
            zones: Vec::new(),
            down: false,
            summary: summary.into(),
        });
    } else if !judged {
        out.push(MeshProblem {
            scope: "agents".into(),
            kind: "not_judged".into(),
            nodes: Vec::new(),
            zones: Vec::new(),
            down: false,
            summary: format!(
                "no cell judged yet: no closed window has {min_probes} probes of a cell (just started? wait a window)"
            ),
        });
    }
    out
}

/// Names the problems of `grid`.
fn describe(scope: &str, grid: &Grid, nodes: &[MeshNode]) -> Vec<MeshProblem> {
    let n = nodes.len();
    let tally = |cells: &mut dyn Iterator<Item = (usize, usize)>| {
        let (mut known, mut bad) = (0, 0);
        for (s, d) in cells {
            match grid.at(s, d) {
                CellVerdict::Bad => (known, bad) = (known + 1, bad + 1),
                CellVerdict::Good => known += 1,
                CellVerdict::Unknown => {}
            }
        }
        format!("{bad}/{known}")
    };
    grid.problems()
        .into_iter()
        .map(|p| match p {
            Problem::Node { node, down } => {
                let row = tally(&mut (0..n).filter(|&d| d != node).map(|d| (node, d)));
                let col = tally(&mut (0..n).filter(|&s| s != node).map(|s| (s, node)));
                let what = if down {
                    format!("agent unreachable and column bad ({col})")
                } else {
                    format!("row and column bad (row {row}, column {col})")
                };
                MeshProblem {
                    scope: scope.into(),
                    kind: "node".into(),
                    nodes: vec![node],
                    zones: nodes[node].zone.iter().cloned().collect(),
                    down,
                    summary: format!("{scope} node {}: {what}", nodes[node].label()),
                }
            }
            Problem::Reflector { node } => {
                let col = tally(&mut (0..n).filter(|&s| s != node).map(|s| (s, node)));
                MeshProblem {
                    scope: scope.into(),
                    kind: "node".into(),
                    nodes: vec![node],
                    zones: nodes[node].zone.iter().cloned().collect(),
                    down: false,
                    summary: format!(
                        "{scope} stamp reflector {}: column bad ({col}), it answers none of its probers well",
                        nodes[node].label()
                    ),
                }
            }
            Problem::Zone { a, b } => MeshProblem {
                scope: scope.into(),
                kind: "zone".into(),
                nodes: Vec::new(),
                summary: if a == b {
                    format!("{scope} zone {a}: paths inside it bad")
                } else {
                    format!("{scope} zones {a} <-> {b}: paths between them bad")
                },
                zones: if a == b { vec![a] } else { vec![a, b] },
                down: false,
            },
            Problem::Path { src, dst, both } => MeshProblem {
                scope: scope.into(),
                kind: "path".into(),
                nodes: vec![src, dst],
                zones: Vec::new(),
                down: false,
                summary: format!(
                    "{scope} path {} {} {}",
                    nodes[src].label(),
                    if both { "<->" } else { "->" },
                    nodes[dst].label()
                ),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests;
