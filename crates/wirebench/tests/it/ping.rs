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

/// `--quiet` prints each responder's line with the same counts as the full output, the
/// duplicates included (it used to stop at `late N`).
#[test]
fn quiet_prints_the_counts_of_the_full_line() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let args = ["ping", &target, "--count", "200", "--warmup", "10", "--no-hiccup"];
    let quiet = wirebench(&[&args[..], &["-q"]].concat());
    assert_eq!(quiet.code, 0, "{quiet:?}");
    let line = quiet.out.lines().find(|l| l.starts_with(&format!("{target}: "))).expect("a responder line");
    assert!(line.ends_with("| count 200 lost 0"), "late and duplicates only when there were any: {line}");
    let full = wirebench(&args);
    assert_eq!(full.code, 0, "{full:?}");
    let counts = |l: &str| l.rsplit_once(" | ").map(|(_, c)| c.to_owned());
    let full_line = full.out.lines().find(|l| l.starts_with(&format!("{target}: "))).expect("a responder line");
    assert_eq!(counts(line), counts(full_line), "{line}\n{full_line}");
    assert!(srv.stop().udp_probes >= 2 * 210, "both runs' probes and warm-ups were answered");
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
    let Results::Ping(p) = report.results else { panic!("a ping report") };
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
    assert!(run.out.contains("| count 2000 lost 0\n"), "{}", run.out);
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
    let Results::Ping(p) = report.results else { panic!("a ping report") };
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
    let Results::Ping(p) = report.results else { panic!("a ping report") };
    assert_eq!(p.pacing, wirebench_core::report::Pacing::Open);
    let rate = p.rate.expect("rate result");
    assert!((rate.requested_per_s - 5000.0).abs() < 1e-9);
    assert!(rate.achieved_per_s > 0.0);
    let r = &p.responders[0];
    assert_eq!(r.latency.measures, wirebench_core::report::Measure::RttFromIntendedSend);
    let unc = r.uncorrected.as_ref().expect("uncorrected view");
    assert_eq!(unc.measures, wirebench_core::report::Measure::RttFromActualSend);
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

/// `--percentiles` without 50: the dwell and warm-up lines still give a p50 (they printed
/// "dwell p50  max" once), the one the saved histograms give.
#[test]
fn a_p50_the_list_leaves_out_is_the_histograms() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let args = ["ping", &target, "--count", "300", "--size", "64", "--percentiles", "90,99"];
    let run = wirebench(&[&args[..], &["--json", json.to_str().unwrap(), "-v"]].concat());
    assert_eq!(run.code, 0, "{run:?}");
    let (_, r) = ping_results(&json);
    let Results::Ping(p) = r.results else { panic!("a ping report") };
    let x = &p.responders[0];
    let p50 = |v: &wirebench_core::report::LatencyView| {
        assert!(v.summary.at(50.0).is_none(), "the JSON summary lists what was asked");
        let h = wirebench_core::report::decode_histogram(&v.histogram).unwrap();
        wirebench_report::words::us(wirebench_core::latency::value_at_percentile(&h, 50.0) as f64)
    };
    let dwell = x.dwell.as_ref().expect("64-byte probes carry the dwell");
    let line = format!("; dwell p50 {} max ", p50(dwell));
    assert!(run.out.contains(&line), "{line}: {}", run.out);
    let line = format!("warm-up (excluded): {} replies, p50 {} max ", x.warmup.summary.count, p50(&x.warmup));
    assert!(run.out.contains(&line), "{line}: {}", run.out);
}

/// A multicast group and port of this test's own (other tests and test runs on this host use
/// other ports: a socket bound to a group port hears every group joined on the host at that
/// port), and two serves on 127.0.0.1 that joined it.
fn two_group_serves(n: u8) -> (String, wirebench::serve::Server, wirebench::serve::Server) {
    use std::net::{Ipv4Addr, SocketAddrV4};
    let port = 20_000 + (std::process::id() % 10_000) as u16 * 2 + u16::from(n);
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 79, n), port);
    let cfg = wirebench::serve::Config {
        join: vec![group],
        interface: Some(Ipv4Addr::LOCALHOST),
        ..wirebench::serve::Config::loopback()
    };
    let start = || wirebench::serve::Server::start(&cfg, wirebench::Shutdown::new()).expect("serve joins on loopback");
    (group.to_string(), start(), start())
}

fn ping_multicast(group: &str, count: &str, timeout: &str, json: &std::path::Path) -> crate::support::Run {
    let args = ["--interface", "127.0.0.1", "--loop", "--responders", "2", "--warmup", "0", "--timeout", timeout];
    let mut all = vec!["ping", group, "--count", count, "--json", json.to_str().unwrap()];
    all.extend(args);
    wirebench(&all)
}

/// Both serves receive the group's probes on the same group port; each must answer from its
/// own address, so each is its own row (before: one row, every reply a duplicate).
#[test]
fn two_serves_on_one_host_are_two_rows_without_duplicates() {
    let (group, a, b) = two_group_serves(0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mc.json");
    let r = ping_multicast(&group, "500", "2s", &json);
    assert_eq!(r.code, 0, "{r:?}");
    let (_, report) = ping_results(&json);
    let Results::Ping(p) = report.results else { panic!("ping results") };
    let mut addrs: Vec<String> = p.responders.iter().map(|x| x.addr.clone()).collect();
    addrs.sort();
    let mut want = vec![a.local_addr().to_string(), b.local_addr().to_string()];
    want.sort();
    assert_eq!(addrs, want);
    for x in &p.responders {
        assert_eq!((x.received, x.lost, x.duplicates), (500, 0, 0), "{}", x.addr);
    }
    assert_eq!(p.combined.expect("two responders merged").summary.count, 1_000);
    assert_eq!(a.stop().udp_probes + b.stop().udp_probes, 2 * 501, "every probe and the discovery one, once each");
}

/// One of two multicast responders is stopped mid-run: the run goes on with the other, and
/// says when the stopped one last answered.
#[test]
fn a_multicast_responder_that_stops_is_named_and_the_run_goes_on() {
    let (group, a, b) = two_group_serves(1);
    let (a_addr, b_addr) = (a.local_addr().to_string(), b.local_addr().to_string());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mc-stop.json");
    // A 20 s timeout: waiting it out even once would take longer than the whole run.
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| ping_multicast(&group, "3000", "20s", &json));
        let t0 = std::time::Instant::now();
        while b.counters().udp_probes < 1_000 {
            assert!(t0.elapsed().as_secs() < 60, "serve never reached 1000 probes");
            std::thread::yield_now();
        }
        b.stop();
        h.join().unwrap()
    });
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains(&format!("responder {b_addr} stopped answering at ")), "{}", r.out);
    let (_, report) = ping_results(&json);
    assert!(
        report.meta.duration_ns < 20_000_000_000,
        "the stopped responder was not waited out: {}",
        report.meta.duration_ns
    );
    let Results::Ping(p) = report.results else { panic!("ping results") };
    let row = |addr: &str| p.responders.iter().find(|x| x.addr == addr).expect("a row per serve").clone();
    let (alive, gone) = (row(&a_addr), row(&b_addr));
    assert_eq!((alive.received, alive.lost, alive.stopped), (3_000, 0, None));
    let stopped = gone.stopped.expect("named as stopped");
    assert_eq!(stopped.unanswered, 3_000 - gone.received);
    assert_eq!(gone.max_lost_in_a_row, stopped.unanswered);
    assert!(gone.received >= 999 && gone.received < 3_000, "{}", gone.received);
    drop(a);
}
