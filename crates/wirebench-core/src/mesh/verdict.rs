//! Pingmesh's verdicts on a matrix (Guo et al., SIGCOMM 2015, section 5): a node whose row
//! *and* column are bad is a node problem (its own stack, NIC or link); a bad zone pair is a
//! zone problem (a spine, an inter-zone link); a bad cell left over is a path problem.
//!
//! Order matters: a zone pair is judged first, but only where it stays bad with any one of
//! its nodes left out (so one bad node is never a bad zone); cells a zone explains are not
//! evidence against its nodes; cells explained by either are not reported again as paths.
//!
//! - A cell is *known* once it has at least `min_probes` probes decided, and *bad* when its
//!   loss passes `max_loss` or its p99 passes `max_p99_ns`. An unanswered cell is bad.
//! - Zone: for two zones (or one zone with itself), the cells between them: at least 2
//!   known and at least 80 % bad, and still so without any one node's cells.
//! - Node, worst first (cells of a node already named are no evidence against the others):
//!   at least 3 nodes; among the cells no zone explains, the node's column has at least
//!   2 known cells, at least half of them bad; and its row is at least half bad too, or its
//!   agent is unreachable (no row at all: then every known cell of its column must be bad,
//!   so a dead agent, not one stale report, makes a node "down").
//! - A STAMP reflector (a router) has no row by design: that is no evidence against it. It
//!   is named itself when every known cell of its column is bad (at least 2); a bad cell of
//!   its column short of that is a path, which names it too.
//! - Path: any other bad cell; both directions of a pair bad are one path, `a <-> b`.

/// Thresholds for a bad cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Loss fraction above which a cell is bad (0.01 = 1 %).
    pub max_loss: f64,
    /// p99 round trip above which a cell is bad, ns.
    pub max_p99_ns: u64,
    /// Fewer decided probes than this: not enough to judge.
    pub min_probes: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self { max_loss: 0.01, max_p99_ns: 10_000_000, min_probes: 5 }
    }
}

/// A cell's numbers, as the verdict needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellInput {
    /// Probes decided.
    pub sent: u64,
    /// Of which lost.
    pub lost: u64,
    /// p99 round trip, when any was answered.
    pub p99_ns: Option<u64>,
}

/// What one cell is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellVerdict {
    /// Too few probes (or none).
    Unknown,
    /// Within the thresholds.
    Good,
    /// Loss or p99 past a threshold.
    Bad,
}

impl CellInput {
    /// The cell's verdict.
    pub fn verdict(&self, t: &Thresholds) -> CellVerdict {
        if self.sent == 0 || self.sent < t.min_probes {
            return CellVerdict::Unknown;
        }
        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
        let loss = self.lost.min(self.sent) as f64 / self.sent as f64;
        let slow = self.p99_ns.is_some_and(|p| p > t.max_p99_ns);
        if loss > t.max_loss || slow || self.lost >= self.sent { CellVerdict::Bad } else { CellVerdict::Good }
    }
}

/// A named problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Node `i`: its row and column are bad; `down` when its agent gave no row and nobody
    /// reached it.
    Node {
        /// Node index.
        node: usize,
        /// No row and an all-bad column.
        down: bool,
    },
    /// STAMP reflector `node`: every known cell of its column is bad.
    Reflector {
        /// Node index.
        node: usize,
    },
    /// Zones `a` and `b` (equal for a zone with itself).
    Zone {
        /// One zone.
        a: String,
        /// The other.
        b: String,
    },
    /// One pair of nodes.
    Path {
        /// Source.
        src: usize,
        /// Destination.
        dst: usize,
        /// Both directions bad.
        both: bool,
    },
}

/// The grid the verdicts work on: `n` nodes, each cell `(src, dst)` at `src * n + dst`.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Zone of each node.
    pub zones: Vec<Option<String>>,
    /// Whether each node's agent gave no row (unreachable).
    pub no_row: Vec<bool>,
    /// Whether each node is a STAMP reflector (no row by design, not unreachable).
    pub reflector: Vec<bool>,
    /// Verdict of each cell.
    pub cells: Vec<CellVerdict>,
}

impl Grid {
    /// `n` nodes, every cell unknown, every agent reporting.
    pub fn new(zones: Vec<Option<String>>) -> Self {
        let n = zones.len();
        Self { zones, no_row: vec![false; n], reflector: vec![false; n], cells: vec![CellVerdict::Unknown; n * n] }
    }

    fn n(&self) -> usize {
        self.zones.len()
    }

    /// Cell `(src, dst)`.
    pub fn at(&self, src: usize, dst: usize) -> CellVerdict {
        self.cells[src * self.n() + dst]
    }

    /// Sets cell `(src, dst)`.
    pub fn set(&mut self, src: usize, dst: usize, v: CellVerdict) {
        let n = self.n();
        self.cells[src * n + dst] = v;
    }

    /// (known, bad) among `cells`.
    fn count(&self, cells: impl Iterator<Item = (usize, usize)>) -> (usize, usize) {
        cells.fold((0, 0), |(k, b), (s, d)| match self.at(s, d) {
            CellVerdict::Unknown => (k, b),
            CellVerdict::Good => (k + 1, b),
            CellVerdict::Bad => (k + 1, b + 1),
        })
    }

    /// Whether `cells` look like one failure of all of them: at least 2 known, at least 80 %
    /// bad.
    fn mostly_bad(&self, cells: &[(usize, usize)]) -> bool {
        let (known, bad) = self.count(cells.iter().copied());
        known >= 2 && bad * 5 >= known * 4
    }

    /// Every problem: zones first, then nodes, then paths.
    pub fn problems(&self) -> Vec<Problem> {
        let n = self.n();
        let mut out = Vec::new();
        let mut explained = vec![false; n * n];
        let mut zones: Vec<&str> = self.zones.iter().flatten().map(String::as_str).collect();
        zones.sort_unstable();
        zones.dedup();
        for (ai, a) in zones.iter().enumerate() {
            for b in &zones[ai..] {
                let in_zone = |i: usize, z: &str| self.zones[i].as_deref() == Some(z);
                let pairs: Vec<(usize, usize)> = (0..n)
                    .flat_map(|s| (0..n).map(move |d| (s, d)))
                    .filter(|&(s, d)| s != d)
                    .filter(|&(s, d)| (in_zone(s, a) && in_zone(d, b)) || (in_zone(s, b) && in_zone(d, a)))
                    .collect();
                // Still mostly bad without any one node: one bad node is not a bad zone.
                let without = |x: usize| -> Vec<(usize, usize)> {
                    pairs.iter().copied().filter(|&(s, d)| s != x && d != x).collect()
                };
                if self.mostly_bad(&pairs) && (0..n).all(|x| self.mostly_bad(&without(x))) {
                    out.push(Problem::Zone { a: (*a).to_owned(), b: (*b).to_owned() });
                    for (s, d) in pairs {
                        explained[s * n + d] = true;
                    }
                }
            }
        }
        // Nodes, worst first: once a node is named, its cells are no evidence against the
        // others (with 3 nodes, one dead node leaves each other row and column half bad).
        // A named node's cells are all explained, so it is never named twice: at most n turns.
        for _ in 0..n {
            let mut worst: Option<(usize, bool, f64)> = None;
            for i in 0..n {
                let open = |s: usize, d: usize| s != d && !explained[s * n + d];
                let (ck, cb) = self.count((0..n).filter(|&s| open(s, i)).map(|s| (s, i)));
                let (rk, rb) = self.count((0..n).filter(|&d| open(i, d)).map(|d| (i, d)));
                let column_bad = ck >= 2 && 2 * cb >= ck;
                let down = (self.no_row[i] || self.reflector[i]) && rk == 0 && ck >= 2 && cb == ck;
                let row_bad = rk >= 2 && 2 * rb >= rk;
                if !(column_bad && (row_bad || down)) {
                    continue;
                }
                #[expect(clippy::cast_precision_loss, reason = "a ratio")]
                let how_bad = if down { 2.0 } else { (cb as f64 / ck as f64).min(rb as f64 / rk as f64) };
                if worst.is_none_or(|(_, _, w)| how_bad > w) {
                    worst = Some((i, down, how_bad));
                }
            }
            let Some((i, down, _)) = worst else { break };
            out.push(if self.reflector[i] { Problem::Reflector { node: i } } else { Problem::Node { node: i, down } });
            for j in 0..n {
                explained[i * n + j] = true;
                explained[j * n + i] = true;
            }
        }
        for s in 0..n {
            for d in 0..n {
                if s == d || explained[s * n + d] || self.at(s, d) != CellVerdict::Bad {
                    continue;
                }
                let both = self.at(d, s) == CellVerdict::Bad && !explained[d * n + s];
                if both && d < s {
                    continue; // reported as (d, s)
                }
                out.push(Problem::Path { src: s, dst: d, both });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CellVerdict::{Bad, Good, Unknown};

    fn grid(n: usize, zone_of: impl Fn(usize) -> Option<&'static str>) -> Grid {
        let mut g = Grid::new((0..n).map(|i| zone_of(i).map(str::to_owned)).collect());
        for s in 0..n {
            for d in 0..n {
                if s != d {
                    g.set(s, d, Good);
                }
            }
        }
        g
    }

    #[test]
    fn cell_verdicts() {
        let t = Thresholds { max_loss: 0.01, max_p99_ns: 1_000_000, min_probes: 5 };
        let c = |sent, lost, p99| CellInput { sent, lost, p99_ns: p99 };
        assert_eq!(c(0, 0, None).verdict(&t), Unknown);
        assert_eq!(c(4, 4, None).verdict(&t), Unknown, "too few to judge");
        assert_eq!(c(100, 1, Some(10)).verdict(&t), Good, "1 % is not past 1 %");
        assert_eq!(c(100, 2, Some(10)).verdict(&t), Bad);
        assert_eq!(c(100, 0, Some(1_000_001)).verdict(&t), Bad);
        assert_eq!(c(100, 0, Some(1_000_000)).verdict(&t), Good, "at the p99 bound is not past it");
        let any = Thresholds { min_probes: 0, ..t };
        assert_eq!(c(0, 0, None).verdict(&any), Unknown, "no probe is never a verdict");
        assert_eq!(c(5, 5, None).verdict(&t), Bad, "nothing answered");
        let lenient = Thresholds { max_loss: 1.0, ..t };
        assert_eq!(c(5, 5, None).verdict(&lenient), Bad, "unanswered is bad whatever the loss threshold");
    }

    #[test]
    fn a_healthy_mesh_has_no_problems() {
        assert!(grid(6, |_| None).problems().is_empty());
    }

    #[test]
    fn a_bad_row_and_column_is_a_node() {
        let mut g = grid(6, |_| None);
        for j in 0..6 {
            if j != 2 {
                g.set(2, j, Bad);
                g.set(j, 2, Bad);
            }
        }
        assert_eq!(g.problems(), vec![Problem::Node { node: 2, down: false }]);
    }

    #[test]
    fn a_dead_agent_is_a_node_down() {
        let mut g = grid(6, |_| None);
        g.no_row[4] = true;
        for j in 0..6 {
            g.set(4, j, Unknown);
            if j != 4 {
                g.set(j, 4, Bad);
            }
        }
        assert_eq!(g.problems(), vec![Problem::Node { node: 4, down: true }]);
        // The agent's API is down but its node still answers probes: not a node problem.
        for j in 0..6 {
            if j != 4 {
                g.set(j, 4, Good);
            }
        }
        assert!(g.problems().is_empty());
    }

    /// A reflector: its row empty by design. A healthy one is no problem, one bad cell of its
    /// column is a path, every known cell bad names the reflector.
    #[test]
    fn a_stamp_reflector_is_judged_by_its_column_alone() {
        let mut g = grid(4, |_| None);
        g.reflector[3] = true;
        for j in 0..3 {
            g.set(3, j, Unknown);
        }
        assert!(g.problems().is_empty(), "no row is no evidence against a reflector");
        g.set(0, 3, Bad);
        assert_eq!(g.problems(), vec![Problem::Path { src: 0, dst: 3, both: false }]);
        g.set(1, 3, Bad);
        g.set(2, 3, Unknown);
        assert_eq!(g.problems(), vec![Problem::Reflector { node: 3 }]);
        g.set(2, 3, Bad);
        g.set(0, 1, Bad);
        assert_eq!(
            g.problems(),
            vec![Problem::Reflector { node: 3 }, Problem::Path { src: 0, dst: 1, both: false }],
            "its cells are not paths again"
        );
    }

    #[test]
    fn one_bad_cell_is_a_path_and_both_directions_one_pair() {
        let mut g = grid(6, |_| None);
        g.set(1, 3, Bad);
        assert_eq!(g.problems(), vec![Problem::Path { src: 1, dst: 3, both: false }]);
        g.set(3, 1, Bad);
        assert_eq!(g.problems(), vec![Problem::Path { src: 1, dst: 3, both: true }]);
    }

    #[test]
    fn a_bad_zone_pair_is_a_zone_not_many_paths() {
        // Zones a (0..3) and b (3..6); everything between them bad, inside fine.
        let zone = |i: usize| Some(if i < 3 { "a" } else { "b" });
        let mut g = grid(6, zone);
        for s in 0..6 {
            for d in 0..6 {
                if zone(s) != zone(d) {
                    g.set(s, d, Bad);
                }
            }
        }
        assert_eq!(g.problems(), vec![Problem::Zone { a: "a".into(), b: "b".into() }]);
    }

    #[test]
    fn many_bad_zone_pairs_leave_room_to_name_every_bad_node() {
        // Six zones of two, every pair between zones bad (fifteen zone pairs), and three
        // nodes without a zone whose every cell is bad: each is a node, not two-way paths.
        const Z: [&str; 6] = ["z0", "z1", "z2", "z3", "z4", "z5"];
        let zone = |i: usize| (i < 12).then(|| Z[i / 2]);
        let mut g = grid(15, zone);
        for s in 0..15 {
            for d in 0..15 {
                if s != d && (s >= 12 || d >= 12 || zone(s) != zone(d)) {
                    g.set(s, d, Bad);
                }
            }
        }
        let p = g.problems();
        assert_eq!(p.iter().filter(|x| matches!(x, Problem::Zone { .. })).count(), 15, "{p:?}");
        let nodes: Vec<Problem> = (12..15).map(|node| Problem::Node { node, down: false }).collect();
        assert_eq!(p[15..], nodes[..], "{p:?}");
    }

    #[test]
    fn a_node_problem_is_not_also_a_zone_or_paths() {
        let zone = |i: usize| Some(if i < 3 { "a" } else { "b" });
        let mut g = grid(6, zone);
        for j in 0..6 {
            if j != 0 {
                g.set(0, j, Bad);
                g.set(j, 0, Bad);
            }
        }
        g.set(4, 5, Bad); // and one unrelated path
        assert_eq!(
            g.problems(),
            vec![Problem::Node { node: 0, down: false }, Problem::Path { src: 4, dst: 5, both: false }]
        );
    }

    #[test]
    fn one_bad_node_in_a_zone_of_two_is_a_node_not_a_zone() {
        let zone = |i: usize| Some(if i < 2 { "a" } else { "b" });
        let mut g = grid(6, zone);
        for j in 1..6 {
            g.set(0, j, Bad);
            g.set(j, 0, Bad);
        }
        assert_eq!(g.problems(), vec![Problem::Node { node: 0, down: false }]);
    }

    #[test]
    fn in_a_mesh_of_three_one_bad_node_is_named_alone() {
        let mut g = grid(3, |_| None);
        for j in 0..2 {
            g.set(2, j, Bad);
            g.set(j, 2, Bad);
        }
        assert_eq!(g.problems(), vec![Problem::Node { node: 2, down: false }]);
    }

    #[test]
    fn two_nodes_cannot_tell_a_node_from_a_path() {
        let mut g = grid(2, |_| None);
        g.set(0, 1, Bad);
        g.set(1, 0, Bad);
        assert_eq!(g.problems(), vec![Problem::Path { src: 0, dst: 1, both: true }]);
    }

    /// Every cell (s, d) with `pick(s, d)` set bad.
    fn bad_where(g: &mut Grid, pick: impl Fn(usize, usize) -> bool) {
        let n = g.zones.len();
        for s in 0..n {
            for d in 0..n {
                if s != d && pick(s, d) {
                    g.set(s, d, Bad);
                }
            }
        }
    }

    #[test]
    fn a_zone_bad_within_itself_is_one_zone() {
        let zone = |i: usize| Some(if i < 3 { "a" } else { "b" });
        let mut g = grid(6, zone);
        bad_where(&mut g, |s, d| s < 3 && d < 3);
        assert_eq!(g.problems(), vec![Problem::Zone { a: "a".into(), b: "a".into() }]);
    }

    #[test]
    fn of_three_zones_the_bad_pair_is_named() {
        let zone = |i: usize| Some(["a", "b", "c"][i / 2]);
        let mut g = grid(6, zone);
        // between a (0, 1) and c (4, 5), both ways; b is fine with both
        bad_where(&mut g, |s, d| (s < 2 && d >= 4) || (s >= 4 && d < 2));
        assert_eq!(g.problems(), vec![Problem::Zone { a: "a".into(), b: "c".into() }]);
        // and a bad path inside b beside it
        g.set(2, 3, Bad);
        assert_eq!(
            g.problems(),
            vec![Problem::Zone { a: "a".into(), b: "c".into() }, Problem::Path { src: 2, dst: 3, both: false }]
        );
    }

    #[test]
    fn scattered_bad_cells_are_paths_not_a_node_or_zone() {
        let zone = |i: usize| Some(if i < 3 { "a" } else { "b" });
        let mut g = grid(6, zone);
        for (s, d) in [(0, 1), (2, 3), (4, 5), (5, 4), (3, 0)] {
            g.set(s, d, Bad);
        }
        assert_eq!(
            g.problems(),
            vec![
                Problem::Path { src: 0, dst: 1, both: false },
                Problem::Path { src: 2, dst: 3, both: false },
                Problem::Path { src: 3, dst: 0, both: false },
                Problem::Path { src: 4, dst: 5, both: true },
            ]
        );
    }

    #[test]
    fn mostly_bad_is_at_least_two_known_and_eighty_percent_bad() {
        // cells (0, d) of a mesh of 11: `bad` of them bad, `good` good, the rest unknown
        let judged = |bad: usize, good: usize| {
            let mut g = Grid::new(vec![None; 11]);
            for d in 1..=bad {
                g.set(0, d, Bad);
            }
            for d in bad + 1..=bad + good {
                g.set(0, d, Good);
            }
            let cells: Vec<(usize, usize)> = (1..11).map(|d| (0, d)).collect();
            g.mostly_bad(&cells)
        };
        assert!(judged(4, 1), "4 of 5 is 80 %");
        assert!(!judged(3, 1), "3 of 4 is 75 %");
        assert!(judged(8, 2) && !judged(7, 3));
        assert!(judged(2, 0) && !judged(1, 0), "at least 2 known");
        assert!(!judged(0, 0));
    }

    #[test]
    fn a_zone_pair_at_eighty_percent_is_a_zone_and_below_is_paths() {
        // a = 0..5, b = 5..10: 50 cells between them. Every node of both zones has 2 good
        // cells: 40 of 50 bad (80 %), and without any one node 32 of 40 (80 %).
        let zone = |i: usize| Some(if i < 5 { "a" } else { "b" });
        let mut g = grid(10, zone);
        bad_where(&mut g, |s, d| zone(s) != zone(d));
        for i in 0..5 {
            g.set(i, 5 + i, Good);
            g.set(5 + i, (i + 1) % 5, Good);
        }
        assert_eq!(g.problems(), vec![Problem::Zone { a: "a".into(), b: "b".into() }]);
        // one more good cell: 39 of 50 (78 %), no zone; no node either (node 0's row is 6 of
        // 9 good): 25 pairs are paths, the 14 with no good direction both ways
        g.set(0, 6, Good);
        let p = g.problems();
        assert_eq!(p.len(), 25, "{p:?}");
        assert!(p.iter().all(|p| matches!(p, Problem::Path { .. })), "{p:?}");
        assert_eq!(p.iter().filter(|p| matches!(p, Problem::Path { both: true, .. })).count(), 14);
    }

    #[test]
    fn two_bad_nodes_at_once_are_both_named_the_down_one_first() {
        let mut g = grid(6, |_| None);
        bad_where(&mut g, |s, d| s == 1 || d == 1);
        assert_eq!(g.problems(), vec![Problem::Node { node: 1, down: false }]);
        bad_where(&mut g, |s, d| s == 4 || d == 4);
        assert_eq!(g.problems(), vec![Problem::Node { node: 1, down: false }, Problem::Node { node: 4, down: false }]);
        // node 4's agent gives no row: a node down, named before a node merely bad
        g.no_row[4] = true;
        for d in 0..6 {
            g.set(4, d, Unknown);
        }
        assert_eq!(g.problems(), vec![Problem::Node { node: 4, down: true }, Problem::Node { node: 1, down: false }]);
    }

    #[test]
    fn a_node_without_a_row_and_a_partly_good_column_is_not_down() {
        let mut g = grid(6, |_| None);
        g.no_row[4] = true;
        for d in 0..6 {
            g.set(4, d, Unknown);
        }
        // 3 of 5 peers do not reach it, 2 do: its node answers, the 3 are paths
        for s in 0..3 {
            g.set(s, 4, Bad);
        }
        assert_eq!(g.problems(), (0..3).map(|s| Problem::Path { src: s, dst: 4, both: false }).collect::<Vec<_>>());
    }

    #[test]
    fn a_row_half_bad_is_enough_for_a_node_less_is_not() {
        // node 0's column all bad, its row bad to `k` of 4 peers
        let row_bad = |k: usize| {
            let mut g = grid(5, |_| None);
            bad_where(&mut g, |s, d| d == 0 || (s == 0 && d <= k));
            g.problems()
        };
        assert_eq!(row_bad(2), vec![Problem::Node { node: 0, down: false }]);
        assert_eq!(
            row_bad(1),
            vec![
                Problem::Path { src: 0, dst: 1, both: true },
                Problem::Path { src: 2, dst: 0, both: false },
                Problem::Path { src: 3, dst: 0, both: false },
                Problem::Path { src: 4, dst: 0, both: false },
            ]
        );
    }

    #[test]
    fn a_two_way_path_beside_a_named_node_is_still_named() {
        // whichever other node is named: its cells are explained, the pair's are not
        for node in [0, 1, 4, 5] {
            let mut g = grid(6, |_| None);
            bad_where(&mut g, |s, d| s == node || d == node);
            g.set(2, 3, Bad);
            g.set(3, 2, Bad);
            assert_eq!(
                g.problems(),
                vec![Problem::Node { node, down: false }, Problem::Path { src: 2, dst: 3, both: true }],
                "node {node}"
            );
        }
    }

    #[test]
    fn any_two_equally_bad_nodes_are_both_named_the_lower_first() {
        // naming the first explains only its own cells: the other's column and row stay open
        for a in 0..6 {
            for b in a + 1..6 {
                let mut g = grid(6, |_| None);
                bad_where(&mut g, |s, d| s == a || d == a || s == b || d == b);
                assert_eq!(
                    g.problems(),
                    vec![Problem::Node { node: a, down: false }, Problem::Node { node: b, down: false }],
                    "nodes {a} and {b}"
                );
            }
        }
    }

    #[test]
    fn a_column_half_bad_is_enough_for_a_node_less_is_not() {
        // node 0's row all bad, its column bad from `k` of 4 peers
        let column_bad = |k: usize| {
            let mut g = grid(5, |_| None);
            bad_where(&mut g, |s, d| s == 0 || (d == 0 && s <= k));
            g.problems()
        };
        assert_eq!(column_bad(2), vec![Problem::Node { node: 0, down: false }]);
        assert_eq!(
            column_bad(1),
            vec![
                Problem::Path { src: 0, dst: 1, both: true },
                Problem::Path { src: 0, dst: 2, both: false },
                Problem::Path { src: 0, dst: 3, both: false },
                Problem::Path { src: 0, dst: 4, both: false },
            ]
        );
    }

    #[test]
    fn the_worse_node_is_named_first() {
        // node 4: row and column 4 of 5 bad (0.8); node 1: column all bad, row 3 of 5 (0.6,
        // the lesser of the two). Node 4 first; without its cells node 1 is still half bad.
        let mut g = grid(6, |_| None);
        bad_where(&mut g, |s, d| (d == 4 && s != 5) || (s == 4 && d != 5) || d == 1 || (s == 1 && d <= 2));
        assert_eq!(g.problems(), vec![Problem::Node { node: 4, down: false }, Problem::Node { node: 1, down: false }]);
        // the same transposed: node 1's row all bad, its column 3 of 5 (0.6); node 4 first
        let mut g = grid(6, |_| None);
        bad_where(&mut g, |s, d| (s == 4 && d != 5) || (d == 4 && s != 5) || s == 1 || (d == 1 && s <= 2));
        assert_eq!(g.problems(), vec![Problem::Node { node: 4, down: false }, Problem::Node { node: 1, down: false }]);
    }
}
