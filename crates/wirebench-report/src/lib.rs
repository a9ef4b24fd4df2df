//! wirebench's renderers: pure functions from a `Report` (or a histogram in it) to text,
//! HTML and SVG, writing to any `io::Write`. No sockets, no clocks, no files: `report` and
//! `--compare` run on saved JSON anywhere.
//!
//! - [`distribution`]: HdrHistogram's percentile distribution (the layout Aeron's Ping
//!   prints, and the `.hgrm` file format HdrHistogram's plotter reads).
//! - [`hlog`]: HdrHistogram interval logs.
//! - [`proxy`]: the proxy's requested-vs-achieved lines and table.
//! - [`text`]: the one-line summaries and the terminal report of a run;
//!   [`stream_text`]: the same for a stream run.
//! - [`env`]: a run's environment as rows, and the differences that matter.
//! - [`compare`]: runs side by side with ratios.
//! - [`mesh`]: the mesh matrix as a terminal heatmap with its verdicts.
//! - [`charts`]: SVG charts (plotters); [`html`]: one self-contained page of runs.

pub mod charts;
pub mod compare;
pub mod distribution;
pub mod env;
#[cfg(test)]
mod fixtures;
pub mod hlog;
pub mod html;
pub mod mesh;
pub mod proxy;
pub mod stream_text;
pub mod text;

use wirebench_core::report::Report;

/// A report with the name it is shown under (its file name, or the suite's step).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The name (`ping-udp`, `rtt.json`).
    pub name: &'a str,
    /// The report.
    pub report: &'a Report,
}
