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

#[cfg(test)]
mod tests {
    use wirebench_core::mesh::api::MatrixReport;
    use wirebench_core::mesh::matrix::MatrixBuilder;
    use wirebench_core::mesh::verdict::Thresholds;
    use wirebench_core::report::{Attribution, HiccupResult, ListenTotals, StreamDirection};

    use super::*;
    use crate::fixtures;

    fn text_of(r: &Report, detail: Detail) -> String {
        let mut out = Vec::new();
        render_text(r, &mut out, detail, false).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn of(results: Results) -> Report {
        Report { results, ..fixtures::ping(&[1_000]) }
    }

    fn seed(name: &str) -> Report {
        let path = format!("{}/../../fuzz/seeds/report_html/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// A listen at which nothing arrived: a stream report with direction `listen`.
    fn listen() -> Report {
        let mut r = fixtures::stream(1000, 1000);
        let Results::Stream(s) = &mut r.results else { unreachable!("a stream fixture") };
        (s.direction, s.search, s.listen) = (StreamDirection::Listen, None, Some(ListenTotals::default()));
        s.sweep.clear();
        s.sender = None;
        s.receivers.clear();
        r.config = serde_json::json!({ "listen": "0.0.0.0:7879" });
        r
    }

    fn mesh() -> Report {
        let text = include_str!("../../../fuzz/seeds/mesh_matrix/two-cells.json");
        let mut b = MatrixBuilder::new("agents");
        b.add_report(&serde_json::from_str::<MatrixReport>(text).unwrap()).unwrap();
        of(Results::Mesh(b.finish(&Thresholds::default())))
    }

    /// A report of each mode a command saves, and a line only its mode's renderer writes.
    fn every_mode() -> Vec<(&'static str, Report, &'static str)> {
        vec![
            ("ping", fixtures::ping(&[10_000]), "ping udp 10.0.0.1:7878: closed loop, 32-byte compact probes"),
            ("stream", fixtures::stream(1000, 936), "stream udp forward: highest rate with loss <= "),
            ("listen", listen(), "nothing arrived at 0.0.0.0:7879: no stream message in 1.5 s"),
            ("proxy", seed("report-proxy.json"), "proxy udp 127.0.0.1:52423 -> 127.0.0.1:51169: 1 flow"),
            ("load", fixtures::load(), "deliveries: 400 expected, 100 arrived (25.00%)"),
            ("mesh", mesh(), "mesh: 3 nodes, 1 reporting (from agents, window 60 s)"),
            ("relay", of(Results::Relay(fixtures::relay())), "relay 6a440ce4eee9b564 on 10.77.94.2:7880"),
        ]
    }

    /// `report FILE` prints the body of every mode a command saves: each report's text
    /// has a line only its mode's renderer writes.
    #[test]
    fn every_mode_saved_renders_its_own_body() {
        for (mode, r, line) in every_mode() {
            for detail in [Detail::Normal, Detail::Verbose] {
                let t = text_of(&r, detail);
                assert!(t.contains(line), "{mode} ({detail:?}): {line:?} in\n{t}");
            }
        }
    }

    /// A report of every mode, as this version writes it, reads back to the same JSON.
    #[test]
    fn every_modes_report_reads_back_to_the_same_json() {
        let hiccup = ("hiccup", of(Results::Hiccup), "");
        for (mode, r, _) in every_mode().into_iter().chain([hiccup]) {
            let written = serde_json::to_value(&r).unwrap();
            let back: Report = serde_json::from_value(written.clone()).unwrap();
            assert_eq!(serde_json::to_value(&back).unwrap(), written, "{mode}");
        }
    }

    /// A hiccup run's figures are its stall meter's, which the attribution prints for every
    /// report: its own body is empty, and the attribution has the worst second.
    #[test]
    fn a_hiccup_runs_body_is_its_attribution() {
        let mut r = of(Results::Hiccup);
        let h = HiccupResult {
            interval_ns: 1_000_000,
            wakeups: 100,
            corrected: 0,
            lateness: fixtures::view(10_000, 100),
            seconds: Vec::new(),
            cpu_ns: None,
        };
        r.attribution = Some(Attribution { hiccup: Some(h), ..Attribution::default() });
        assert_eq!(text_of(&r, Detail::Verbose), "");
        let mut out = Vec::new();
        crate::attribution::text_at(&mut out, &r, Detail::Verbose).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(t.contains("a sleeping thread on this host wakes up to "), "{t}");
    }
}
