//! What `mesh status` does with an agent's `/v1/matrix` (arbitrary bytes from a host it does
//! not control): parse, check, merge, judge. It must never panic, and a report it accepts
//! must come out with every cell adding up (`lost <= sent`) and its nodes in range.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::mesh::api::MatrixReport;
use wirebench_core::mesh::matrix::MatrixBuilder;
use wirebench_core::mesh::verdict::Thresholds;

fuzz_target!(|data: &[u8]| {
    let Ok(report) = serde_json::from_slice::<MatrixReport>(data) else {
        return;
    };
    let mut b = MatrixBuilder::new("agents");
    let accepted = b.add_report(&report).is_ok();
    b.add_unreachable(Some([127, 0, 0, 1].into()), "http://127.0.0.1:9878", "fuzz");
    let m = b.finish(&Thresholds::default());
    for c in &m.cells {
        assert!(accepted, "a refused report left cells behind");
        assert!(c.lost <= c.sent && c.src < m.nodes.len() && c.dst < m.nodes.len() && c.src != c.dst);
    }
});
