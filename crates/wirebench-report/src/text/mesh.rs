//! The mesh matrix in a terminal: per transport, a heatmap of p50, p99 and loss (rows are
//! sources, columns destinations), the fleet's merged percentiles, and the verdicts.
//!
//! Colours (ANSI backgrounds, when asked for) follow the thresholds the verdict used: loss
//! green at 0, yellow up to the threshold, red past it; p99 green up to half the threshold,
//! yellow up to it, red past it; p50 against the fleet's median p50 (green up to 2x, yellow
//! up to 5x, red past). Grey is a cell with too few probes. A bad cell also gets a `!`, so
//! the verdict reads without colour.

use std::collections::BTreeMap;
use std::io::{self, Write};

use wirebench_core::report::{CellJudged, MeshCell, MeshResults, Report, Results};

use crate::words::{summary_line, us};

/// How a cell is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heat {
    /// Fine.
    Green,
    /// Near the threshold.
    Yellow,
    /// Past it.
    Red,
    /// Not enough probes.
    Grey,
}

impl Heat {
    const fn ansi(self) -> &'static str {
        match self {
            Self::Green => "\x1b[30;42m",
            Self::Yellow => "\x1b[30;43m",
            Self::Red => "\x1b[97;41m",
            Self::Grey => "\x1b[30;47m",
        }
    }

    /// The CSS background of the HTML heatmap.
    pub const fn css(self) -> &'static str {
        match self {
            Self::Green => "#bfe6bf",
            Self::Yellow => "#f5e08a",
            Self::Red => "#f08a80",
            Self::Grey => "#e4e4e4",
        }
    }
}

/// What a heatmap shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Median round trip.
    P50,
    /// 99th percentile.
    P99,
    /// Lost over sent.
    Loss,
}

impl Metric {
    /// Every metric, in display order.
    pub const ALL: [Self; 3] = [Self::P50, Self::P99, Self::Loss];

    /// The heading.
    pub const fn title(self) -> &'static str {
        match self {
            Self::P50 => "p50 round trip (us)",
            Self::P99 => "p99 round trip (us)",
            Self::Loss => "loss (%)",
        }
    }
}

/// The median of every cell's p50 (the reference for p50 colours).
pub fn fleet_median_p50(m: &MeshResults) -> Option<u64> {
    let mut v: Vec<u64> = m.cells.iter().filter_map(|c| c.rtt.map(|r| r.p50_ns)).collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

#[expect(clippy::cast_precision_loss, reason = "display ratios")]
fn loss_pct(c: &MeshCell) -> f64 {
    if c.sent == 0 { 0.0 } else { 100.0 * c.lost as f64 / c.sent as f64 }
}

/// A cell's text and colour for `metric`.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn cell(m: &MeshResults, c: &MeshCell, metric: Metric, median_p50: Option<u64>) -> (String, Heat) {
    if c.verdict == CellJudged::Unknown && c.sent == 0 {
        return ("-".into(), Heat::Grey);
    }
    let t = &m.thresholds;
    let heat = |good: bool, bad: bool| match (c.verdict, good, bad) {
        (CellJudged::Unknown, ..) => Heat::Grey,
        (_, _, true) => Heat::Red,
        (_, true, _) => Heat::Green,
        _ => Heat::Yellow,
    };
    match metric {
        Metric::Loss => {
            let pct = loss_pct(c);
            (format!("{pct:.1}"), heat(c.lost == 0, pct > 100.0 * t.max_loss))
        }
        Metric::P99 => match c.rtt {
            None => ("lost".into(), heat(false, true)),
            Some(r) => (us(r.p99_ns as f64), heat(r.p99_ns.saturating_mul(2) <= t.max_p99_ns, r.p99_ns > t.max_p99_ns)),
        },
        Metric::P50 => match c.rtt {
            None => ("lost".into(), heat(false, true)),
            Some(r) => {
                let base = median_p50.unwrap_or(r.p50_ns).max(1);
                (us(r.p50_ns as f64), heat(r.p50_ns <= 2 * base, r.p50_ns > 5 * base))
            }
        },
    }
}

/// Cells by (src, dst) for one transport.
pub fn cells_of<'a>(m: &'a MeshResults, proto: &str) -> BTreeMap<(usize, usize), &'a MeshCell> {
    m.cells.iter().filter(|c| c.proto == proto).map(|c| ((c.src, c.dst), c)).collect()
}

/// The transports present, in display order.
pub fn protos(m: &MeshResults) -> Vec<&'static str> {
    ["udp", "tcp", "multicast"].into_iter().filter(|p| m.cells.iter().any(|c| c.proto == *p)).collect()
}

fn heatmap(out: &mut dyn Write, m: &MeshResults, proto: &str, metric: Metric, colour: bool) -> io::Result<()> {
    let cells = cells_of(m, proto);
    let median = fleet_median_p50(m);
    let labels: Vec<&str> = m.nodes.iter().map(wirebench_core::report::MeshNode::label).collect();
    let row_w = labels.iter().map(|l| l.len()).max().unwrap_or(4).max(4);
    let col_w = labels.iter().map(|l| l.len()).max().unwrap_or(6).clamp(7, 14);
    writeln!(out, "{proto} {}  (rows: from, columns: to)", metric.title())?;
    write!(out, "  {:row_w$}", "")?;
    for l in &labels {
        write!(out, " {l:>col_w$}")?;
    }
    writeln!(out)?;
    for (s, from) in labels.iter().enumerate() {
        write!(out, "  {from:row_w$}")?;
        for d in 0..labels.len() {
            let (text, heat) = if s == d {
                (".".to_owned(), None)
            } else if let Some(c) = cells.get(&(s, d)) {
                let (t, h) = cell(m, c, metric, median);
                (if h == Heat::Red { format!("{t}!") } else { t }, Some(h))
            } else if m.nodes[s].stamp {
                // A STAMP reflector probes nobody: an empty row, said so above the maps.
                (String::new(), None)
            } else if !m.nodes[s].reported {
                ("?".to_owned(), Some(Heat::Grey))
            } else {
                ("-".to_owned(), Some(Heat::Grey))
            };
            match heat {
                Some(h) if colour => write!(out, " {}{text:>col_w$}\x1b[0m", h.ansi())?,
                _ => write!(out, " {text:>col_w$}")?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The whole terminal view of a mesh status.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn mesh(out: &mut dyn Write, report: &Report, colour: bool) -> io::Result<()> {
    let Results::Mesh(m) = &report.results else { return Ok(()) };
    let window = m.window_ns.map_or_else(String::new, |w| format!(", window {}", humanize(w)));
    let reported = m.nodes.iter().filter(|n| n.reported).count();
    let reflectors = m.nodes.iter().filter(|n| n.stamp).count();
    let nodes = crate::words::counted(m.nodes.len() as u64, "node", "nodes");
    let reflectors = match reflectors {
        0 => String::new(),
        r => format!(", {}", crate::words::counted(r as u64, "STAMP reflector", "STAMP reflectors")),
    };
    writeln!(out, "mesh: {nodes}, {reported} reporting{reflectors} (from {}{window})", m.source)?;
    for n in m.nodes.iter().filter(|n| n.stamp) {
        let who = n.name.as_ref().map_or_else(|| n.addr.clone(), |name| format!("{name} ({})", n.addr));
        writeln!(out, "  {who}: stamp reflector, probes nobody (no row; its column is measured)")?;
    }
    for n in m.nodes.iter().filter(|n| !n.reported && !n.stamp) {
        let why = n.error.as_deref().unwrap_or("no agent asked");
        // an agent known only by its URL is named once
        match &n.name {
            Some(name) if *name != n.addr => writeln!(out, "  no row from {name} ({}): {why}", n.addr)?,
            _ => writeln!(out, "  no row from {}: {why}", n.addr)?,
        }
    }
    for proto in protos(m) {
        for metric in Metric::ALL {
            writeln!(out)?;
            heatmap(out, m, proto, metric, colour)?;
        }
    }
    writeln!(out)?;
    for c in &m.combined {
        writeln!(out, "fleet {} (every cell merged): {}", c.proto, summary_line(&c.latency.summary))?;
    }
    let t = &m.thresholds;
    writeln!(
        out,
        "a cell is bad past {:.2}% loss or p99 {} us (and judged from {} probes)",
        100.0 * t.max_loss,
        us(t.max_p99_ns as f64),
        t.min_probes
    )?;
    if m.problems.is_empty() {
        writeln!(out, "verdict: no problems")?;
    } else {
        for p in &m.problems {
            writeln!(out, "verdict: {}", p.summary)?;
        }
    }
    Ok(())
}

fn humanize(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{} s", ns / 1_000_000_000)
    } else {
        format!("{} ms", ns / 1_000_000)
    }
}

/// `6 nodes, 2 problems: node h3, path h1 -> h2`.
pub fn headline(m: &MeshResults) -> String {
    let kinds: Vec<&str> = m.problems.iter().map(|p| p.summary.as_str()).collect();
    format!(
        "{} nodes, {} cells, {}",
        m.nodes.len(),
        m.cells.len(),
        if kinds.is_empty() { "no problems".to_owned() } else { kinds.join("; ") }
    )
}
