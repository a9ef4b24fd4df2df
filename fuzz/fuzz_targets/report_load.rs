//! `read_report` (how `wirebench report` loads a saved file: streamed, within its limits,
//! every histogram decoded) on arbitrary bytes, then the text renderers on what it accepts:
//! each mode's terminal text (with percentile tables) and `--compare`. Nothing may panic,
//! and time and memory stay bounded (run with -rss_limit_mb and -timeout). The HTML page,
//! whose charts cost a hundred times more per input, has its own target: `report_html`.

#![no_main]

use std::io;

use libfuzzer_sys::fuzz_target;
use wirebench_core::report::read_report;
use wirebench_report::screen::Detail;
use wirebench_report::{Run, attribution, compare, render_text};

fuzz_target!(|data: &[u8]| {
    let Ok(report) = read_report(|| Ok(data)) else {
        return;
    };
    let run = Run { name: "fuzz", report: &report };
    let mut sink = io::sink();
    for detail in [Detail::Quiet, Detail::Normal, Detail::Verbose] {
        let _ = render_text(&report, &mut sink, detail, true);
        let _ = attribution::text_at(&mut sink, &report, detail);
    }
    let _ = compare::write_text(&compare::compare(&[run, run]), &mut sink);
});
