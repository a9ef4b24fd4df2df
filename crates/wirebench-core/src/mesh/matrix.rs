//! The fleet matrix: rows from every agent's latest window (or from Prometheus), checked,
//! merged, judged. Histograms are merged whole, so the fleet's percentiles are exact.
//!
//! Nothing from an agent is trusted: a report whose numbers do not add up (received plus
//! lost not equal to sent, percentiles out of order, a histogram that disagrees with its
//! counts or is wider than a mesh histogram can be) is refused whole, and its row shows
//! why.

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
    LatencyView, MeshCell, MeshCombined, MeshNode, MeshProblem, MeshResults, MeshThresholds, decode_histogram,
    encode_histogram,
};

/// Most cells one agent may report (three transports to the most peers a source gives).
pub const MAX_CELLS: usize = 3 * super::peer::MAX_PEERS;
/// Longest histogram text accepted in a cell.
const MAX_HISTOGRAM_TEXT: usize = 64 << 10;

#[derive(Debug, Clone)]
struct Cell {
    sent: u64,
    lost: u64,
    rtt: Option<RttSummary>,
    histogram: Option<(String, Histogram<u64>)>,
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
        }
    }

    /// The index of node `r`, added if new; labels fill in as sources learn them.
    pub fn node(&mut self, r: &NodeRef) -> usize {
        let i = *self.index.entry(r.addr.clone()).or_insert_with(|| {
            self.nodes.push(MeshNode { addr: r.addr.clone(), name: None, zone: None, reported: false, error: None });
            self.nodes.len() - 1
        });
        let n = &mut self.nodes[i];
        if n.name.is_none() {
            n.name.clone_from(&r.name);
        }
        if n.zone.is_none() {
            n.zone.clone_from(&r.zone);
        }
        i
    }

    /// Adds one agent's `/v1/matrix`, or refuses it whole with the reason.
    pub fn add_report(&mut self, rep: &MatrixReport) -> Result<(), String> {
        if rep.api_version != API_VERSION {
            return Err(format!("API version {} (this build reads {API_VERSION})", rep.api_version));
        }
        check_node(&rep.agent)?;
        if rep.cells.len() > MAX_CELLS {
            return Err(format!("{} cells (at most {MAX_CELLS})", rep.cells.len()));
        }
        let mut cells = Vec::with_capacity(rep.cells.len());
        for c in &rep.cells {
            check_node(&c.peer)?;
            let bad = |why: &str| format!("cell to {} ({}): {why}", c.peer.addr, c.proto.name());
            if c.received.checked_add(c.lost) != Some(c.sent) {
                return Err(bad("received + lost != sent"));
            }
            if let Some(r) = &c.rtt
                && (r.count != c.received || !(r.min_ns <= r.p50_ns && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns))
            {
                return Err(bad("round-trip summary disagrees with itself or the counts"));
            }
            let histogram = match &c.histogram {
                None => None,
                Some(text) => {
                    let h = decode_mesh_histogram(text).map_err(|e| bad(&e))?;
                    if h.len() != c.received || RttSummary::of(&h) != c.rtt {
                        return Err(bad("histogram disagrees with the counts"));
                    }
                    Some((text.clone(), h))
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
                self.cells.insert((src, dst, c.proto), cell);
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
    /// one host), else listed under `label`. Call after every report is added.
    pub fn add_unreachable(&mut self, ip: Option<IpAddr>, label: &str, why: &str) {
        let hits: Vec<usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.reported && n.error.is_none())
            .filter(|(_, n)| ip.is_some_and(|ip| n.addr.parse::<SocketAddr>().is_ok_and(|a| a.ip() == ip)))
            .map(|(i, _)| i)
            .collect();
        let i = if let [one] = hits[..] {
            one
        } else {
            self.node(&NodeRef { addr: label.to_owned(), name: None, zone: None })
        };
        if !self.nodes[i].reported {
            self.nodes[i].error = Some(why.to_owned());
        }
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
        if s != d {
            self.cells.insert((s, d, proto), Cell { sent, lost: lost.min(sent), rtt, histogram: None });
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
        }
        let zones: Vec<Option<String>> = nodes.iter().map(|n| n.zone.clone()).collect();
        let mut unicast = Grid::new(zones.clone());
        let mut multicast = Grid::new(zones);
        for (i, n) in nodes.iter().enumerate() {
            unicast.no_row[i] = !n.reported;
            multicast.no_row[i] = !n.reported;
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
            if let Some((_, h)) = &c.histogram {
                let m = merged.entry(proto).or_insert_with(crate::latency::histogram);
                let _ = m.add(h);
            }
            cells.push(MeshCell {
                src,
                dst,
                proto: proto.name().to_owned(),
                sent: c.sent,
                lost: c.lost,
                rtt: c.rtt,
                histogram: c.histogram.as_ref().map(|(text, _)| text.clone()),
                verdict: match v {
                    CellVerdict::Good => "good",
                    CellVerdict::Bad => "bad",
                    CellVerdict::Unknown => "unknown",
                }
                .to_owned(),
            });
        }
        cells.sort_by(|a, b| (a.src, a.dst, &a.proto).cmp(&(b.src, b.dst, &b.proto)));
        let mut named = describe("unicast", &unicast, &nodes);
        if any_multicast {
            named.extend(describe("multicast", &multicast, &nodes));
        }
        let judged = cells.iter().any(|c| c.verdict != "unknown");
        let mut problems = no_rows(&self.source, &nodes, &named, judged, t.min_probes);
        problems.extend(named);
        let combined = merged
            .into_iter()
            .map(|(p, h)| MeshCombined {
                proto: p.name().to_owned(),
                latency: LatencyView {
                    measures: "rtt_from_send".into(),
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

/// The agents asked that gave no row (unless a verdict already names the node down), and,
/// when no agent gave one, that there is no matrix; when rows came but no cell in them is
/// judged (none has `min_probes`: no window closed yet, or every cell too thin), that
/// nothing is judged yet. A status that heard nothing judgeable must not read as
/// healthy.
fn no_rows(source: &str, nodes: &[MeshNode], named: &[MeshProblem], judged: bool, min_probes: u64) -> Vec<MeshProblem> {
    let mut out: Vec<MeshProblem> = nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| !n.reported && !named.iter().any(|p| p.down && p.nodes.contains(i)))
        .filter_map(|(i, n)| {
            let why = n.error.as_deref()?;
            Some(MeshProblem {
                scope: "agents".into(),
                kind: "unreachable".into(),
                nodes: vec![i],
                zones: n.zone.iter().cloned().collect(),
                down: false,
                summary: format!("agent {} unreachable: {why}", n.label()),
            })
        })
        .collect();
    if !nodes.iter().any(|n| n.reported) {
        let summary = if source == "prometheus" {
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
                "no cell judged yet: no closed window holds {min_probes} probes of any cell (just started? wait one window)"
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
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;
    use crate::mesh::api::{CellReport, WindowRef};
    use crate::mesh::window::histogram_of;

    fn node(i: usize) -> NodeRef {
        NodeRef { addr: format!("10.0.0.{i}:7878"), name: Some(format!("n{i}")), zone: None }
    }

    fn cell(peer: usize, proto: Proto, samples: &[u32], lost: u64) -> CellReport {
        let h = histogram_of(samples);
        let received = samples.len() as u64;
        CellReport {
            peer: node(peer),
            proto,
            sent: received + lost,
            received,
            lost,
            late: 0,
            duplicates: 0,
            rtt: RttSummary::of(&h),
            histogram: (received > 0).then(|| encode_histogram(&h)),
        }
    }

    fn report(me: usize, cells: Vec<CellReport>) -> MatrixReport {
        MatrixReport {
            api_version: API_VERSION,
            agent: node(me),
            window: Some(WindowRef { index: 3, len_ns: 10_000_000_000, start_unix_ns: 1_000 + me as u64 }),
            cells,
        }
    }

    /// Four agents; node 4's agent is down and nobody reaches it.
    fn fleet() -> MatrixBuilder {
        let mut b = MatrixBuilder::new("agents");
        for me in 1..=3 {
            let mut cells = Vec::new();
            for peer in (1..=4).filter(|&p| p != me) {
                let (samples, lost): (Vec<u32>, u64) =
                    if peer == 4 { (vec![], 10) } else { ((1..=10).map(|i| me as u32 * 1000 + i).collect(), 0) };
                cells.push(cell(peer, Proto::Udp, &samples, lost));
            }
            b.add_report(&report(me, cells)).unwrap();
        }
        b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "connection refused");
        b
    }

    #[test]
    fn merges_rows_and_names_a_dead_node() {
        let r = fleet().finish(&Thresholds::default());
        assert_eq!(r.nodes.iter().map(MeshNode::label).collect::<Vec<_>>(), ["n1", "n2", "n3", "n4"]);
        assert!(!r.nodes[3].reported && r.nodes[3].error.as_deref() == Some("connection refused"));
        assert_eq!(r.cells.len(), 9);
        assert_eq!(r.window_start_unix_ns, Some(1_003));
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert_eq!((r.problems[0].kind.as_str(), r.problems[0].down), ("node", true));
        assert_eq!(r.problems[0].summary, "unicast node n4: agent unreachable and column bad (3/3)");
        // Exact merge: 60 samples, 1001..1010, 2001..2010, 3001..3010 twice each.
        let all = &r.combined[0].latency.summary;
        assert_eq!(all.count, 60);
        let mut h = crate::latency::histogram();
        for me in 1..=3u64 {
            for i in 1..=10 {
                h.record_n(me * 1000 + i, 2).unwrap();
            }
        }
        assert_eq!(all.at(50.0), Some(crate::latency::percentile::value_at_percentile(&h, 50.0)));
        assert_eq!(all.max_ns, h.max());
    }

    #[test]
    fn no_agent_answering_is_no_matrix_not_no_problems() {
        // The only agent asked did not answer (issue 11: "1 nodes, 0 reporting" read
        // "verdict: no problems").
        let mut b = MatrixBuilder::new("agents");
        b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://127.0.0.1:9/", "connection refused");
        let r = b.finish(&Thresholds::default());
        assert!(!r.has_rows());
        let named: Vec<(&str, &str, &str)> =
            r.problems.iter().map(|p| (p.scope.as_str(), p.kind.as_str(), p.summary.as_str())).collect();
        assert_eq!(
            named,
            [
                ("agents", "unreachable", "agent http://127.0.0.1:9/ unreachable: connection refused"),
                ("agents", "no_matrix", "no agent gave its row: no matrix to judge"),
            ]
        );
        assert_eq!(r.problems[0].nodes, [0]);
        // Prometheus with no series of any agent: nothing asked, nothing to judge.
        let r = MatrixBuilder::new("prometheus").finish(&Thresholds::default());
        assert!(r.nodes.is_empty() && !r.has_rows());
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].summary, "Prometheus holds no current scrape of any agent: no matrix to judge");
    }

    #[test]
    fn rows_with_no_judged_cell_are_not_judged_not_no_problems() {
        // Agents that answer before their first window closed (no window, no cells), or
        // whose cells all hold fewer than min_probes: before, "verdict: no problems".
        let not_judged = |b: MatrixBuilder| {
            let r = b.finish(&Thresholds::default());
            assert!(r.has_rows() && !r.judged());
            r.problems.iter().map(|p| (p.scope.clone(), p.kind.clone(), p.summary.clone())).collect::<Vec<_>>()
        };
        let want = [(
            "agents".to_owned(),
            "not_judged".to_owned(),
            "no cell judged yet: no closed window holds 5 probes of any cell (just started? wait one window)"
                .to_owned(),
        )];
        let mut b = MatrixBuilder::new("agents");
        for me in 1..=2 {
            b.add_report(&MatrixReport { window: None, ..report(me, Vec::new()) }).unwrap();
        }
        assert_eq!(not_judged(b), want);
        let mut b = MatrixBuilder::new("agents");
        b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 4], 0)])).unwrap();
        assert_eq!(not_judged(b), want);
        let mut b = MatrixBuilder::new("prometheus");
        b.add_cell(&node(1), &node(2), Proto::Udp, 0, 0, None);
        assert_eq!(not_judged(b), want);
        // One judged cell (here bad: nothing answered) is a verdict.
        let mut b = MatrixBuilder::new("agents");
        b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 4], 0), cell(3, Proto::Tcp, &[], 5)])).unwrap();
        let r = b.finish(&Thresholds::default());
        assert!(r.judged());
        assert_eq!(r.problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(), ["path"]);
    }

    #[test]
    fn an_unreachable_agent_whose_node_answers_is_named_and_a_dead_node_once() {
        // n4's agent API is down, but n4 still answers every probe: no node problem, and the
        // agent is still named (before: "no problems").
        let mut b = MatrixBuilder::new("agents");
        for me in 1..=3 {
            let cells = (1..=4).filter(|&p| p != me).map(|p| cell(p, Proto::Udp, &[100; 10], 0)).collect();
            b.add_report(&report(me, cells)).unwrap();
        }
        b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "HTTP 503");
        let r = b.finish(&Thresholds::default());
        assert!(r.has_rows());
        let named: Vec<&str> = r.problems.iter().map(|p| p.summary.as_str()).collect();
        assert_eq!(named, ["agent n4 unreachable: HTTP 503"]);
        // A dead node (nobody reaches it either) is named once, as the node down.
        let r = fleet().finish(&Thresholds::default());
        let named: Vec<&str> = r.problems.iter().map(|p| p.summary.as_str()).collect();
        assert_eq!(named, ["unicast node n4: agent unreachable and column bad (3/3)"]);
        // A node only known as a peer (its agent not asked) is not an unreachable agent.
        let mut b = MatrixBuilder::new("agents");
        b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 10], 0)])).unwrap();
        assert!(b.finish(&Thresholds::default()).problems.is_empty());
    }

    #[test]
    fn an_unreachable_agent_sharing_an_address_is_the_one_without_a_row() {
        // Three agents on one host: 127.0.0.1:1, :2 and :3; the one on :3 is down.
        let at = |p: u16| NodeRef { addr: format!("127.0.0.1:{p}"), name: None, zone: None };
        let mut b = MatrixBuilder::new("agents");
        for me in [1u16, 2] {
            let cells = [1u16, 2, 3]
                .into_iter()
                .filter(|&p| p != me)
                .map(|p| CellReport { peer: at(p), ..cell(0, Proto::Udp, &[100], 0) })
                .collect();
            b.add_report(&MatrixReport { agent: at(me), ..report(0, cells) }).unwrap();
        }
        b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://127.0.0.1:9003", "refused");
        let r = b.finish(&Thresholds::default());
        assert_eq!(r.nodes.len(), 3);
        assert_eq!((r.nodes[2].addr.as_str(), r.nodes[2].error.as_deref()), ("127.0.0.1:3", Some("refused")));
    }

    #[test]
    fn nodes_sharing_a_name_are_shown_by_address() {
        let mut b = MatrixBuilder::new("agents");
        let same = |p: u16| NodeRef { addr: format!("127.0.0.1:{p}"), name: Some("vm".into()), zone: None };
        b.add_report(&MatrixReport {
            agent: same(1),
            ..report(0, vec![CellReport { peer: same(2), ..cell(0, Proto::Udp, &[9], 0) }])
        })
        .unwrap();
        let r = b.finish(&Thresholds::default());
        assert_eq!(r.nodes.iter().map(MeshNode::label).collect::<Vec<_>>(), ["127.0.0.1:1", "127.0.0.1:2"]);
    }

    #[test]
    fn reports_that_do_not_add_up_are_refused_whole() {
        let mut b = MatrixBuilder::new("agents");
        let mut c = cell(2, Proto::Tcp, &[5, 6, 7], 0);
        c.sent = 4;
        assert!(b.add_report(&report(1, vec![c])).unwrap_err().contains("received + lost"));
        let mut c = cell(2, Proto::Tcp, &[5, 6, 7], 0);
        c.histogram = Some(encode_histogram(&histogram_of(&[5, 6])));
        assert!(b.add_report(&report(1, vec![c])).unwrap_err().contains("histogram disagrees"));
        let mut wide = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 5).unwrap();
        wide.record(5).unwrap();
        let mut c = cell(2, Proto::Tcp, &[5], 0);
        c.histogram = Some(encode_histogram(&wide));
        assert!(b.add_report(&report(1, vec![c])).unwrap_err().contains("wider or finer"));
        let mut bad_peer = cell(2, Proto::Udp, &[5], 0);
        bad_peer.peer.addr = "not an address".into();
        assert!(b.add_report(&report(1, vec![bad_peer])).is_err());
        let mut r = report(1, vec![]);
        r.api_version = 9;
        assert!(b.add_report(&r).is_err());
        assert!(b.finish(&Thresholds::default()).nodes.is_empty(), "nothing of the refused reports kept");
    }

    #[test]
    fn a_slow_pair_is_a_path_and_multicast_is_judged_apart() {
        let mut b = MatrixBuilder::new("agents");
        for me in 1..=3 {
            let mut cells = Vec::new();
            for peer in (1..=3).filter(|&p| p != me) {
                let slow = me == 1 && peer == 2;
                let samples: Vec<u32> = (0..10).map(|_| if slow { 50_000_000 } else { 20_000 }).collect();
                cells.push(cell(peer, Proto::Udp, &samples, 0));
                // n3 neither hears the group nor is heard on it.
                if me == 3 || peer == 3 {
                    cells.push(cell(peer, Proto::Multicast, &[], 10));
                } else {
                    cells.push(cell(peer, Proto::Multicast, &samples, 0));
                }
            }
            b.add_report(&report(me, cells)).unwrap();
        }
        let r = b.finish(&Thresholds::default());
        let summaries: Vec<&str> = r.problems.iter().map(|p| p.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "unicast path n1 -> n2",
                "multicast node n3: row and column bad (row 2/2, column 2/2)",
                "multicast path n1 -> n2",
            ]
        );
    }
}
