//! Loopback ping against an in-process serve: counts add up, nothing is lost, the report
//! validates, the files parse.

use wirebench_core::report::{Report, Results};

use crate::support::{assert_valid_report, read_json, serve, wirebench};

fn ping_results(path: &std::path::Path) -> (serde_json::Value, Report) {
    let v = read_json(path);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v.clone()).expect("a Report");
    (v, r)
}

#[test]
fn udp_closed_loop_counts_add_up() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("udp.json");
    let hgrm = dir.path().join("udp.hgrm");
    let target = srv.local_addr().to_string();
    let run = wirebench(&[
        "ping",
        &target,
        "--count",
        "2000",
        "--warmup",
        "100",
        "--json",
        json.to_str().unwrap(),
        "--hgrm",
        hgrm.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let counters = srv.stop();
    let (_, report) = ping_results(&json);
    let Results::Ping(p) = report.results else { panic!("ping results") };
    assert_eq!((p.sent, p.warmup_sent), (2000, 100));
    assert_eq!(p.responders.len(), 1);
    let r = &p.responders[0];
    assert_eq!((r.received, r.lost, r.late, r.duplicates), (2000, 0, 0, 0));
    assert_eq!(r.latency.summary.count, 2000);
    assert_eq!(r.warmup.summary.count, 100);
    assert!(r.latency.summary.min_ns > 0 && r.latency.summary.min_ns <= r.latency.summary.max_ns);
    // serve answered the measured probes, the warm-up and at least one discovery probe
    assert!(counters.udp_probes > 2100, "{counters:?}");
    assert_eq!(counters.malformed + counters.foreign + counters.bad_version + counters.unexpected_kind, 0);
    // the summary line and the hgrm agree on the count
    assert!(run.out.contains("count 2000 lost 0 late 0"), "{}", run.out);
    let rows = wirebench_report::distribution::parse(&std::fs::read_to_string(&hgrm).unwrap()).unwrap();
    assert_eq!(rows.last().unwrap().2, 2000);
    assert!((rows.last().unwrap().1 - 1.0).abs() < 1e-12);
}

#[test]
fn tcp_closed_loop_counts_add_up() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tcp.json");
    let target = srv.local_addr().to_string();
    let run = wirebench(&[
        "ping",
        &target,
        "--proto",
        "tcp",
        "--count",
        "2000",
        "--warmup",
        "0",
        "--size",
        "100",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let counters = srv.stop();
    let (_, report) = ping_results(&json);
    let Results::Ping(p) = report.results else { panic!("ping results") };
    assert_eq!(p.proto, "tcp");
    let r = &p.responders[0];
    assert_eq!((r.received, r.lost), (2000, 0));
    assert!(counters.tcp_probes >= 2000 && counters.tcp_connections == 1, "{counters:?}");
    // 100-byte probes are the full form: dwell and one-way with a bound
    let ow = r.one_way.expect("one-way estimate");
    assert!(ow.bound_ns > 0);
    assert!(r.network.as_ref().unwrap().summary.count == 2000);
}

#[test]
fn open_loop_reports_both_views_and_the_rate() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("open.json");
    let hlog = dir.path().join("open.hlog");
    let target = srv.local_addr().to_string();
    let run = wirebench(&[
        "ping",
        &target,
        "--rate",
        "5k/s",
        "--count",
        "3000",
        "--warmup",
        "0",
        "--size",
        "48",
        "--json",
        json.to_str().unwrap(),
        "--hlog",
        hlog.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    srv.stop();
    let (_, report) = ping_results(&json);
    let Results::Ping(p) = report.results else { panic!("ping results") };
    assert_eq!(p.pacing, "open");
    let rate = p.rate.expect("rate result");
    assert!((rate.requested_per_s - 5000.0).abs() < 1e-9);
    assert!(rate.achieved_per_s > 0.0);
    let r = &p.responders[0];
    assert_eq!(r.latency.measures, "rtt_from_intended_send");
    let unc = r.uncorrected.as_ref().expect("uncorrected view");
    assert_eq!(unc.measures, "rtt_from_actual_send");
    assert_eq!(unc.summary.count, r.latency.summary.count);
    // measured from an earlier instant, the corrected view is never below the uncorrected
    assert!(r.latency.summary.max_ns >= unc.summary.max_ns);
    assert!(r.latency.summary.at(50.0) >= unc.summary.at(50.0));
    assert_eq!(r.received + r.lost, 3000);
    // the interval log holds every measured reply, one histogram per second
    let text = std::fs::read(&hlog).unwrap();
    let mut total = 0;
    let mut intervals = 0;
    for e in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&text) {
        if let Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(i)) = e {
            total += wirebench_core::report::decode_histogram(i.encoded_histogram()).unwrap().len();
            intervals += 1;
        }
    }
    assert_eq!(total, r.received);
    assert!(intervals >= 1);
}

#[test]
fn percentiles_flag_and_table() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let run = wirebench(&["ping", &target, "--count", "500", "--percentiles", "50,96,99.99", "--table"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.out.contains(" p50 ") && run.out.contains(" p96 ") && run.out.contains(" p99.99 "), "{}", run.out);
    assert!(!run.out.contains(" p90 "));
    assert!(run.out.contains("       Value     Percentile TotalCount 1/(1-Percentile)"), "{}", run.out);
    assert!(run.out.contains("#[Max     ="));
}
