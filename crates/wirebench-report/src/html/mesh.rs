//! The HTML of a mesh status: the verdicts, then per transport a heatmap table (rows are
//! sources, columns destinations; each cell shows p50 / p99 and loss, coloured by the worse
//! of its loss and p99 against the thresholds; hovering shows every number), the merged
//! fleet percentiles and the nodes. Inline styles only: no script, nothing fetched.

use std::io::{self, Write};

use wirebench_core::report::{MeshCell, MeshResults, Results};

use super::{escape, table};
use crate::Run;
use crate::text::mesh::{Heat, Metric, cell, cells_of, fleet_median_p50, headline as text_headline, protos};
use crate::words::{summary_line, us};

pub(super) fn headline(m: &MeshResults) -> String {
    text_headline(m)
}

fn worse(a: Heat, b: Heat) -> Heat {
    let rank = |h: Heat| match h {
        Heat::Grey => 0,
        Heat::Green => 1,
        Heat::Yellow => 2,
        Heat::Red => 3,
    };
    if rank(a) >= rank(b) { a } else { b }
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn hover(m: &MeshResults, c: &MeshCell) -> String {
    let (from, to) = (m.nodes[c.src].label(), m.nodes[c.dst].label());
    let rtt = c.rtt.map_or_else(
        || "no reply".to_owned(),
        |r| {
            format!(
                "min {} p50 {} p99 {} max {} us ({} replies)",
                us(r.min_ns as f64),
                us(r.p50_ns as f64),
                us(r.p99_ns as f64),
                us(r.max_ns as f64),
                r.count
            )
        },
    );
    format!("{from} -> {to} {}: {rtt}; lost {} of {}; {}", c.proto, c.lost, c.sent, c.verdict)
}

fn heatmap(out: &mut dyn Write, m: &MeshResults, proto: &str) -> io::Result<()> {
    let cells = cells_of(m, proto);
    let median = fleet_median_p50(m);
    writeln!(out, "<h3>{proto}: p50 / p99 round trip (us) and loss</h3>")?;
    write!(out, "<table class=\"heat\"><tr><th>from \\ to</th>")?;
    for n in &m.nodes {
        write!(out, "<th title=\"{}\">{}</th>", escape(&n.addr), escape(n.label()))?;
    }
    writeln!(out, "</tr>")?;
    for (s, from) in m.nodes.iter().enumerate() {
        let zone = from.zone.as_deref().map_or_else(String::new, |z| format!(" <small>{}</small>", escape(z)));
        write!(out, "<tr><th title=\"{}\">{}{zone}</th>", escape(&from.addr), escape(from.label()))?;
        for d in 0..m.nodes.len() {
            if s == d {
                write!(out, "<td class=\"self\"></td>")?;
                continue;
            }
            let Some(c) = cells.get(&(s, d)) else {
                let why = if from.reported {
                    "not probed"
                } else if from.stamp {
                    "stamp reflector: probes nobody"
                } else {
                    "no row: agent not reporting"
                };
                write!(out, "<td style=\"background:{}\" title=\"{why}\">-</td>", Heat::Grey.css())?;
                continue;
            };
            let (p50, h50) = cell(m, c, Metric::P50, median);
            let (p99, h99) = cell(m, c, Metric::P99, median);
            let (loss, hl) = cell(m, c, Metric::Loss, median);
            let heat = worse(worse(h50, h99), hl);
            write!(
                out,
                "<td style=\"background:{}\" title=\"{}\">{} / {}<br><small>{}%</small></td>",
                heat.css(),
                escape(&hover(m, c)),
                escape(&p50),
                escape(&p99),
                escape(&loss)
            )?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</table>")
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Mesh(m) = &r.report.results else { return Ok(()) };
    writeln!(
        out,
        "<style>table.heat td{{text-align:center;font-size:12px;min-width:64px}}table.heat td.self{{background:#fff}}</style>"
    )?;
    writeln!(out, "<p>{}</p>", escape(&headline(m)))?;
    let verdicts: Vec<Vec<String>> = if m.problems.is_empty() {
        vec![vec!["-".into(), "-".into(), "no problems".into()]]
    } else {
        m.problems.iter().map(|p| vec![p.scope.clone(), p.kind.clone(), p.summary.clone()]).collect()
    };
    table(out, "verdicts", &["scope", "kind", "verdict"], &verdicts)?;
    for proto in protos(m) {
        heatmap(out, m, proto)?;
    }
    if !m.combined.is_empty() {
        let rows: Vec<Vec<String>> =
            m.combined.iter().map(|c| vec![c.proto.clone(), summary_line(&c.latency.summary)]).collect();
        table(out, "combined", &["transport", "every cell merged (us)"], &rows)?;
    }
    let rows: Vec<Vec<String>> = m
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.label().to_owned(),
                n.addr.clone(),
                n.zone.clone().unwrap_or_default(),
                if n.reported {
                    "yes".into()
                } else if n.stamp {
                    "stamp reflector: probes nobody".into()
                } else {
                    n.error.clone().unwrap_or_else(|| "no".into())
                },
            ]
        })
        .collect();
    table(out, "nodes", &["node", "address", "zone", "row reported"], &rows)
}
