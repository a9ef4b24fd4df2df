//! Results of `wirebench mesh status`: the node-to-node matrix of one window, its
//! verdicts, and the histograms merged over the fleet.

use serde::{Deserialize, Serialize};

use super::LatencyView;
use crate::mesh::window::RttSummary;

/// The matrix and what it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshResults {
    /// `agents` (their `/v1/matrix`, histograms included) or `prometheus` (summaries only).
    pub source: String,
    /// Window length, ns, when the sources agree on one.
    pub window_ns: Option<u64>,
    /// Start of the newest window in the matrix, wall clock ns (agents only).
    pub window_start_unix_ns: Option<u64>,
    /// What made a cell bad.
    pub thresholds: MeshThresholds,
    /// Rows and columns, sorted by zone then name.
    pub nodes: Vec<MeshNode>,
    /// Every measured cell.
    pub cells: Vec<MeshCell>,
    /// Agents that gave no row (scope `agents`: `unreachable` for each, `no_matrix` when
    /// none gave one, `not_judged` when rows came but no cell in them is judged), then node, zone and path problems, unicast first, then multicast.
    pub problems: Vec<MeshProblem>,
    /// Per transport: every cell's histogram merged (agents only; percentiles after the merge).
    pub combined: Vec<MeshCombined>,
}

impl MeshResults {
    /// Whether any agent gave its row: without one there is no matrix to judge (a STAMP
    /// reflector never gives one).
    pub fn has_rows(&self) -> bool {
        self.nodes.iter().any(|n| n.reported)
    }

    /// Whether any cell is judged (good or bad): without one (no window closed yet, or every
    /// cell below `min_probes`) the verdict says nothing about the fleet.
    pub fn judged(&self) -> bool {
        self.cells.iter().any(|c| c.verdict != CellJudged::Unknown)
    }
}

/// Thresholds of a bad cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeshThresholds {
    /// Loss fraction above which a cell is bad.
    pub max_loss: f64,
    /// p99 above which a cell is bad, ns.
    pub max_p99_ns: u64,
    /// Fewer probes than this: unknown.
    pub min_probes: u64,
}

/// A row and column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshNode {
    /// Probe address (or the agent's URL when it could not be reached and nobody knew it).
    pub addr: String,
    /// Node name.
    pub name: Option<String>,
    /// Zone.
    pub zone: Option<String>,
    /// Whether its agent gave its row.
    pub reported: bool,
    /// Why not, when it was asked and did not.
    pub error: Option<String>,
    /// A STAMP reflector (a router): its column is measured, it has no row by design.
    #[serde(default)]
    pub stamp: bool,
}

impl MeshNode {
    /// What to call it.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.addr)
    }
}

named! {
    /// A cell's verdict against the thresholds.
    pub enum CellJudged {
        /// Within the loss and p99 bars.
        Good = "good",
        /// Past one of them.
        Bad = "bad",
        /// Too few probes to judge.
        Unknown = "unknown",
    }
}

/// One cell: `src` probing `dst` over `proto` in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshCell {
    /// Row (index into `nodes`).
    pub src: usize,
    /// Column.
    pub dst: usize,
    /// `udp`, `tcp` or `multicast`.
    pub proto: String,
    /// Probes decided.
    pub sent: u64,
    /// Of which lost.
    pub lost: u64,
    /// Round trips.
    pub rtt: Option<RttSummary>,
    /// Their histogram (agents only).
    pub histogram: Option<String>,
    /// `good`, `bad` or `unknown`.
    pub verdict: CellJudged,
}

/// A named problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshProblem {
    /// `unicast` (UDP and TCP, the worse of the two), `multicast`, or `agents` (an agent
    /// that gave no row).
    pub scope: String,
    /// `node`, `zone` or `path`; for scope `agents`, `unreachable` (an agent asked gave no
    /// row), `no_matrix` (none did) or `not_judged` (rows came, no cell in them is judged).
    pub kind: String,
    /// The nodes involved (indices).
    pub nodes: Vec<usize>,
    /// The zones involved.
    pub zones: Vec<String>,
    /// Node: its agent gave no row and nobody reached it.
    pub down: bool,
    /// One line, e.g. `node h3: row and column bad (5/5, 5/5)`.
    pub summary: String,
}

/// Every cell of one transport merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshCombined {
    /// Transport.
    pub proto: String,
    /// The merged histogram.
    pub latency: LatencyView,
}
