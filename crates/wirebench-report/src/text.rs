//! Terminal text of saved runs: [`render_text`], the one entry point that renders any
//! report's own text, and each mode's renderer in its own module.

pub mod listen;
pub mod load;
pub mod mesh;
pub mod ping;
pub mod proxy;
pub mod relay;
pub mod stream;

use std::io::{self, Write};

use wirebench_core::report::{Report, Results};

use crate::screen::Detail;

/// The mode's own text of a report at a level of detail; `table` adds a ping run's
/// percentile distribution. One arm per kind of results and no catch-all, so a mode that can
/// be saved cannot be left without its text: a new kind of results that forgets its
/// renderer does not compile.
pub fn render_text(report: &Report, out: &mut dyn Write, detail: Detail, table: bool) -> io::Result<()> {
    match &report.results {
        Results::Ping(_) => ping::ping(out, report, table, detail),
        // `listen` saves a stream report (direction `listen`)
        Results::Stream(_) => stream::stream(out, report, detail),
        Results::Proxy(_) => proxy::summary_at(out, report, detail),
        Results::Load(_) => load::text(out, report, detail),
        Results::Mesh(_) => mesh::mesh(out, report, false),
        // its figures are the report's stall meter, which every report's attribution prints
        Results::Hiccup => Ok(()),
        Results::Relay(r) => relay::text(out, r),
    }
}
