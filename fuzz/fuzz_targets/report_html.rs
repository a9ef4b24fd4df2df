//! The HTML page (`wirebench report --html`, the suite's index.html) of every report that
//! `read_report` accepts from arbitrary bytes: charts from hostile numbers (NaN, infinities,
//! empty and one-point series, huge ranges) must not panic or run unbounded.

#![no_main]

use std::io;

use libfuzzer_sys::fuzz_target;
use wirebench_core::report::read_report;
use wirebench_report::{Run, html};

fuzz_target!(|data: &[u8]| {
    let Ok(report) = read_report(|| Ok(data)) else {
        return;
    };
    let run = Run { name: "fuzz", report: &report };
    let _ = html::write(&html::Page { title: "fuzz", runs: &[run, run], compare: true }, &mut io::sink());
});
