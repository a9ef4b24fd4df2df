//! One self-contained HTML page of runs: inline CSS and inline SVG charts, no scripts, no
//! fonts, no links to fetch, so it opens anywhere with no network.
//!
//! Layout: an overview (every ping run's percentile distribution on one chart, hdr-plot
//! style, and a table of each run's headline figures), the comparison when asked, then one
//! section per run with its tables, charts and environment.

mod attribution;
mod load;
mod mesh;
mod ping;
mod proxy;
mod stream;

use std::io::{self, Write};

use wirebench_core::report::{Outcome, Results};

use crate::Run;
use crate::charts::{self, Line};
use crate::compare::{self, Comparison};
use crate::env;

/// What the page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The `<h1>` and `<title>`.
    pub title: &'a str,
    /// The runs, in order.
    pub runs: &'a [Run<'a>],
    /// Add the side-by-side comparison.
    pub compare: bool,
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:960px;\
padding:0 16px 48px;color:#222;line-height:1.4}h1{margin:24px 0 4px}h2{margin-top:40px;border-bottom:1px solid #ddd}\
h3{margin:20px 0 6px}.sub{color:#666;margin:0 0 12px}table{border-collapse:collapse;margin:8px 0;font-size:14px}\
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}\
th{background:#f4f4f4}.env td,.env th,.runs td,.runs th{text-align:left}.env td{font-family:ui-monospace,monospace;\
font-size:13px}td{overflow-wrap:break-word}\
figure{margin:12px 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}figcaption{color:#666;font-size:13px}\
.warn{background:#fff4e0;border-left:4px solid #f0a020;padding:6px 10px}pre{background:#f8f8f8;padding:8px;\
white-space:pre-wrap;overflow-wrap:anywhere;font-size:13px}nav a{margin-right:12px}";

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes a table: a header row, then rows; cells are escaped.
fn table(out: &mut dyn Write, class: &str, head: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    write!(out, "<table class=\"{class}\"><tr>")?;
    for h in head {
        write!(out, "<th>{}</th>", escape(h))?;
    }
    writeln!(out, "</tr>")?;
    for r in rows {
        write!(out, "<tr>")?;
        for c in r {
            write!(out, "<td>{}</td>", escape(c))?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</table>")
}

/// Writes a chart (SVG from [`charts`]) with its caption.
pub(crate) fn figure(out: &mut dyn Write, svg: &str, caption: &str) -> io::Result<()> {
    writeln!(out, "<figure class=\"chart\">{svg}<figcaption>{}</figcaption></figure>", escape(caption))
}

/// The anchor of run `i`.
fn anchor(i: usize) -> String {
    format!("run-{}", i + 1)
}

/// Writes the page.
pub fn write(page: &Page<'_>, out: &mut dyn Write) -> io::Result<()> {
    let title = escape(page.title);
    writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">")?;
    writeln!(out, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")?;
    writeln!(out, "<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>")?;
    writeln!(out, "<h1>{title}</h1>")?;
    writeln!(out, "<p class=\"sub\">{} run(s), rendered from saved reports.</p>", page.runs.len())?;
    write!(out, "<nav>")?;
    for (i, r) in page.runs.iter().enumerate() {
        write!(out, "<a href=\"#{}\">{}</a>", anchor(i), escape(r.name))?;
    }
    writeln!(out, "</nav>")?;
    overview(out, page.runs)?;
    if page.compare && page.runs.len() > 1 {
        comparison(out, &compare::compare(page.runs))?;
    }
    let envs: Vec<Vec<(String, String)>> = page.runs.iter().map(|r| env::rows(r.report)).collect();
    let common = common_rows(&envs);
    if !common.is_empty() {
        writeln!(out, "<section id=\"environment\">\n<h2>Environment</h2>")?;
        let note = if page.runs.len() > 1 { "The same for every run; each run lists what differs." } else { "" };
        writeln!(out, "<p class=\"sub\">{note}</p>")?;
        let rows: Vec<Vec<String>> = common.iter().map(|(k, v)| vec![k.clone(), v.clone()]).collect();
        table(out, "env", &["setting", "value"], &rows)?;
        writeln!(out, "</section>")?;
    }
    for (i, r) in page.runs.iter().enumerate() {
        let own: Vec<(String, String)> = envs[i].iter().filter(|row| !common.contains(row)).cloned().collect();
        run(out, i, r, &own)?;
    }
    let versions: Vec<String> = page.runs.first().map(|r| env::version(&r.report.meta)).into_iter().collect();
    writeln!(out, "<footer><p class=\"sub\">wirebench {}</p></footer>\n</body>\n</html>", escape(&versions.join("")))
}

/// Every ping run's distribution on one chart (one line per run, or per responder when a
/// run has several), and the headline figures of every run.
fn overview(out: &mut dyn Write, runs: &[Run<'_>]) -> io::Result<()> {
    writeln!(out, "<section id=\"overview\">\n<h2>Overview</h2>")?;
    let mut lines = Vec::new();
    for r in runs {
        lines.extend(ping::lines(r.name, r.report));
    }
    if !lines.is_empty() {
        let svg = charts::percentile_chart("Round-trip latency by percentile", "latency (us)", &lines)?;
        figure(
            out,
            &svg,
            "Every ping run (one line per responder): the HdrHistogram percentile distribution, x on a 1/(1-percentile) log scale.",
        )?;
    }
    let rows: Vec<Vec<String>> = runs.iter().map(headline).collect();
    table(out, "runs", &["run", "mode", "outcome", "headline"], &rows)?;
    writeln!(out, "</section>")
}

fn headline(r: &Run<'_>) -> Vec<String> {
    let outcome = match r.report.outcome {
        Outcome::Completed => "completed",
        Outcome::Interrupted => "interrupted",
        Outcome::PeerSilent => "peer went silent",
    };
    let what = match &r.report.results {
        Results::Ping(p) => ping::headline(p),
        Results::Stream(s) => stream::headline(s),
        Results::Proxy(p) => proxy::headline(p),
        Results::Load(l) => load::headline(l),
        Results::Mesh(m) => mesh::headline(m),
        Results::Hiccup => r.report.attribution.as_ref().and_then(|a| a.hiccup.as_ref()).map_or_else(
            || "no stall meter".into(),
            |h| format!("stall meter: {}", crate::words::summary_line(&h.lateness.summary)),
        ),
        Results::Relay(r) => relay_headline(r),
    };
    vec![r.name.to_owned(), compare::mode(r.report).to_owned(), outcome.to_owned(), what]
}

fn comparison(out: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    writeln!(out, "<section id=\"compare\">\n<h2>Comparison</h2>")?;
    if let Some(w) = compare::environment_warning(c) {
        writeln!(out, "<p class=\"warn\">{}</p>", escape(&w))?;
    }
    for t in &c.tables {
        writeln!(out, "<h3>{} runs, ratios against {}</h3>", t.mode, escape(&t.runs[0]))?;
        let mut head = vec![""];
        head.extend(t.runs.iter().map(String::as_str));
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|row| {
                let ratios = row.ratios();
                std::iter::once(row.name.to_owned())
                    .chain(row.values.iter().enumerate().map(|(j, v)| {
                        let cell = v.map_or_else(|| "-".into(), |v| compare::format_value(row.name, v));
                        if j == 0 { cell } else { format!("{cell} ({})", compare::format_ratio(ratios[j])) }
                    }))
                    .collect()
            })
            .collect();
        table(out, "compare", &head, &rows)?;
        for n in &t.notes {
            writeln!(out, "<p>{}</p>", escape(n))?;
        }
    }
    writeln!(out, "</section>")
}

/// The environment rows every run shares (same setting, same value), in the first run's order.
fn common_rows(envs: &[Vec<(String, String)>]) -> Vec<(String, String)> {
    let Some((first, rest)) = envs.split_first() else { return Vec::new() };
    first.iter().filter(|row| rest.iter().all(|e| e.contains(row))).cloned().collect()
}

fn run(out: &mut dyn Write, i: usize, r: &Run<'_>, own_env: &[(String, String)]) -> io::Result<()> {
    writeln!(out, "<section class=\"run\" id=\"{}\">\n<h2>{}</h2>", anchor(i), escape(r.name))?;
    writeln!(out, "<p class=\"sub\">{}</p>", escape(&r.report.meta.command_line.join(" ")))?;
    match &r.report.results {
        Results::Ping(_) => ping::section(out, r)?,
        Results::Stream(_) => stream::section(out, r)?,
        Results::Proxy(_) => proxy::section(out, r)?,
        Results::Load(_) => load::section(out, r)?,
        Results::Mesh(_) => mesh::section(out, r)?,
        // the stall meter's figures are the attribution section below
        Results::Hiccup => {}
        Results::Relay(x) => {
            let text = captured(|w| crate::text::relay::text(w, x))?;
            writeln!(out, "<h3>Relay</h3>\n<pre>{}</pre>", escape(&text))?;
        }
    }
    attribution::html(out, r.report)?;
    if !own_env.is_empty() {
        writeln!(out, "<h3>Environment of this run</h3>")?;
        let rows: Vec<Vec<String>> = own_env.iter().map(|(k, v)| vec![k.clone(), v.clone()]).collect();
        table(out, "env", &["setting", "value"], &rows)?;
    }
    writeln!(out, "</section>")
}

/// Text from a renderer that writes to `io::Write`, for a `<pre>`.
pub(crate) fn captured(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<String> {
    let mut buf = Vec::new();
    f(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A chart's only series.
fn single(label: &str, points: Vec<(f64, f64)>) -> Vec<Line> {
    vec![Line::new(label, points)]
}

#[cfg(test)]
mod tests;

/// The overview line of a relay run: what it carried.
fn relay_headline(r: &wirebench_core::report::RelayResults) -> String {
    let (fwd, re) = r.groups.iter().fold((0, 0), |(f, e), g| (f + g.forwarded.datagrams, e + g.reemitted.datagrams));
    let retired = if r.retired.peers > 0 { format!(" ({} retired)", r.retired.peers) } else { String::new() };
    format!("{} groups, {} peers{retired}: {fwd} datagrams forwarded, {re} re-emitted", r.groups.len(), r.peers.len())
}
