//! `wirebench report` on reports saved by real runs: text, one HTML page, comparison;
//! environment capture (interface, MTU, git commit) in what ping and stream save; bad input
//! exits 2 with one line; a report written before the environment fields existed still loads.

use std::path::{Path, PathBuf};

use crate::support::{assert_valid_report, read_json, serve, wirebench, wirebench_with};

/// A ping and a stream saved to `dir`, against an in-process serve.
fn saved_runs(dir: &Path) -> (PathBuf, PathBuf) {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let ping = dir.join("rtt.json");
    let r = wirebench(&["ping", &target, "--count", "300", "--warmup", "10", "-q", "--json", ping.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let stream = dir.join("udp.json");
    let args = ["stream", &target, "--count", "2000", "--rate", "20k/s", "--size", "256", "-q", "--json"];
    let r = wirebench(&[&args[..], &[stream.to_str().unwrap()]].concat());
    assert_eq!(r.code, 0, "{r:?}");
    (ping, stream)
}

#[test]
fn reports_record_the_interface_mtu_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (ping, stream) = saved_runs(dir.path());
    for path in [ping, stream] {
        let v = read_json(&path);
        assert_valid_report(&v);
        let first = &v["meta"]["host"]["interfaces"][0];
        assert_eq!(first["name"], "lo", "{path:?}: {first}");
        assert!(first["role"].as_str().unwrap().starts_with("route to 127.0.0.1:"), "{first}");
        assert!(first["mtu"].as_u64().unwrap() > 0);
        // built from a git checkout (the tests run in one)
        assert_eq!(v["meta"]["git_commit"].as_str().map(str::len), Some(40), "{}", v["meta"]);
    }
}

/// Proxy and load reports recorded the default route's interface (eth0, MTU 1400) after a
/// run on loopback, and `--compare` then warned of an MTU difference that was not there.
#[test]
fn a_load_report_records_the_interface_that_carried_the_traffic() {
    let room = wirebench::room::RoomServer::start(&wirebench::room::Config::loopback()).unwrap();
    let url = format!("ws://{}/rooms/t", room.local_addr());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    let r = wirebench(&["load", &url, "--clients", "2", "--duration", "1s", "-q", "--json", json.to_str().unwrap()]);
    room.stop();
    assert_eq!(r.code, 0, "{r:?}");
    let v = read_json(&json);
    let first = &v["meta"]["host"]["interfaces"][0];
    assert_eq!(first["name"], "lo", "{first}");
    assert!(first["role"].as_str().unwrap().starts_with("route to 127.0.0.1:"), "{first}");
}

#[test]
fn text_html_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let (ping, stream) = saved_runs(dir.path());
    let (p, s) = (ping.to_str().unwrap(), stream.to_str().unwrap());

    let r = wirebench(&["report", p, s]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("== rtt ==\n"), "{}", r.out);
    assert!(r.out.contains("\n== udp ==\n"));
    assert!(r.out.contains("ping udp 127.0.0.1:"), "the ping text");
    assert!(r.out.contains("stream udp forward: 256-byte messages"), "the stream text");
    assert!(r.out.contains("received 2000 of 2000 sent"));
    let r = wirebench(&["report", p, "--table"]);
    assert!(r.out.contains("1/(1-Percentile)"), "--table adds the distribution");

    let html = dir.path().join("page.html");
    let r = wirebench(&["report", p, s, "--html", html.to_str().unwrap(), "--title", "two runs"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.out.trim(), format!("HTML report: {}", html.display()));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>two runs</title>"));
    assert_eq!(page.matches("<section class=\"run\"").count(), 2);
    assert!(page.contains(wirebench_report::charts::DATA_LINE_MARK), "the latency chart has data");
    assert!(!page.contains("<script"));

    let r = wirebench(&["report", p, p, "--compare"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("ping runs (ratios against "), "{}", r.out);
    assert!(r.out.contains("(x1.00)"), "a run against itself: {}", r.out);
    assert!(!r.out.contains("warning"), "same environment: {}", r.out);
}

#[test]
fn compare_warns_when_environments_differ() {
    let dir = tempfile::tempdir().unwrap();
    let (ping, _) = saved_runs(dir.path());
    let mut v = read_json(&ping);
    v["meta"]["host"]["kernel"] = "5.10.0-old".into();
    v["meta"]["host"]["sysctls"]["net.core.rmem_max"] = "212992".into();
    let other = dir.path().join("older.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let r = wirebench(&["report", ping.to_str().unwrap(), other.to_str().unwrap(), "--compare"]);
    assert_eq!(r.code, 0, "{r:?}");
    let warning = r.out.lines().find(|l| l.starts_with("warning: environments differ")).expect("a warning");
    assert!(warning.contains("older: kernel ") && warning.contains("vs 5.10.0-old"), "{warning}");
    assert!(warning.contains("net.core.rmem_max"), "{warning}");
}

#[test]
fn a_report_from_before_the_environment_fields_loads() {
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
    let v = read_json(Path::new(seed));
    assert!(v["meta"].get("git_commit").is_none() && v["meta"]["host"].get("interfaces").is_none());
    assert_valid_report(&v);
    let r = wirebench(&["report", seed]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("== report-ping-full =="));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let not_json = write("notes.json", "hello");
    let not_report = write("other.json", r#"{"name": "something else"}"#);
    let newer = write("newer.json", r#"{"schema_version": 2, "meta": {}}"#);
    let bad_histogram = {
        let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
        let mut v = read_json(Path::new(seed));
        v["results"]["responders"][0]["latency"]["histogram"] = "AAAA".into();
        write("broken.json", &v.to_string())
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["report", &not_json], "notes.json: not JSON"),
        (vec!["report", &not_report], "other.json: not a wirebench report"),
        (vec!["report", &newer], "newer.json: schema_version 2 is newer than this wirebench reads (1)"),
        (vec!["report", &bad_histogram], "broken.json: responder"),
        (vec!["report", "/nonexistent/r.json"], "cannot read /nonexistent/r.json"),
        (vec!["report", &not_json, "--compare"], "--compare needs at least two reports"),
        (vec!["report"], "FILE.json"),
    ];
    for (args, want) in cases {
        let r = wirebench(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: one line, got {:?}", r.err);
        assert!(r.err.contains(want), "{args:?}: {:?} should mention {want}", r.err);
        assert!(r.out.is_empty(), "{args:?}: nothing printed before the error");
    }
}

/// A 96 KB report whose histograms declared 5 significant digits over 1..2^63 took 8 s to
/// render (and 3.7 MB over 120 s) while ignoring Ctrl-C: refused at load now, in one line.
/// Text reads one file at a time: the first is printed before the second is read (a bad
/// second file comes after the first's text). What holds every report at once refuses
/// files over its budget together, before reading any (sparse files: nothing is written).
#[test]
fn text_reads_one_file_at_a_time_and_merging_has_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "hello").unwrap();
    let r = wirebench(&["report", seed, bad.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.out.starts_with("== report-ping-full =="), "the first report's text came first: {r:?}");
    assert!(r.err.contains("bad.json: not JSON"), "{r:?}");
    let big: Vec<String> = (0..2)
        .map(|i| {
            let p = dir.path().join(format!("big{i}.json"));
            std::fs::File::create(&p).unwrap().set_len(wirebench::report::MAX_HELD_BYTES / 2 + 1).unwrap();
            p.to_str().unwrap().to_owned()
        })
        .collect();
    for extra in [&["--merge"][..], &["--compare"], &["--html", dir.path().join("r.html").to_str().unwrap()]] {
        let mut args = vec!["report", &big[0], &big[1]];
        args.extend(extra);
        let r = wirebench(&args);
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.err.contains("the reports are 257 MiB together, over the 256MiB read at once"), "{r:?}");
        assert!(r.out.is_empty(), "{r:?}");
    }
}

#[test]
fn histograms_beyond_the_precision_and_range_bounds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
    let mut v = read_json(Path::new(seed));
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, 5).unwrap();
    h.record(1_000).unwrap();
    v["results"]["responders"][0]["latency"]["histogram"] = wirebench_core::report::encode_histogram(&h).into();
    let path = dir.path().join("precise.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let t0 = std::time::Instant::now();
    let r = wirebench(&["report", path.to_str().unwrap(), "--html", dir.path().join("p.html").to_str().unwrap()]);
    assert_eq!((r.code, r.err.lines().count()), (2, 1), "{r:?}");
    assert!(r.err.contains("precise.json: responder") && r.err.contains("5 significant digits"), "{}", r.err);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5), "refused, not rendered");
}

#[test]
fn ctrl_c_stops_report_with_exit_1_and_no_html_file() {
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let stop = wirebench::Shutdown::new();
    stop.trigger();
    let r = wirebench_with(&["report", seed, "--html", html.to_str().unwrap()], stop);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("stopped by Ctrl-C"), "{}", r.err);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no page and no temporary file");
}

/// Two `stream` generators at once against one serve, then `report --merge`: the merged
/// sender and receiver counts are the parts' sums in the JSON and in the text, and the
/// same file twice is refused.
#[test]
fn two_stream_generators_against_one_serve_merge_into_their_sums() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (gen1, gen2) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let run = |json: &Path| {
        let args = ["stream", &target, "--count", "3000", "--rate", "20k/s", "--size", "256", "-P", "2", "-q"];
        wirebench(&[&args[..], &["--json", json.to_str().unwrap()]].concat())
    };
    let runs = std::thread::scope(|sc| {
        let (ja, jb) = (sc.spawn(|| run(&gen1)), sc.spawn(|| run(&gen2)));
        [ja.join().unwrap(), jb.join().unwrap()]
    });
    for r in &runs {
        assert_eq!(r.code, 0, "{r:?}");
    }
    srv.stop();
    let merged = dir.path().join("m.json");
    let r = wirebench(&[
        "report",
        "--merge",
        "-v",
        gen1.to_str().unwrap(),
        gen2.to_str().unwrap(),
        "--json",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let m = read_json(&merged);
    assert_valid_report(&m);
    let (pa, pb) = (read_json(&gen1), read_json(&gen2));
    let u = |v: &serde_json::Value, path: &str| v.pointer(path).and_then(serde_json::Value::as_u64).expect(path);
    let sum = |path: &str| u(&pa, path) + u(&pb, path);
    for path in ["/results/sender/messages", "/results/sender/bytes"] {
        assert_eq!(u(&m, path), sum(path), "{path}");
    }
    assert_eq!(u(&m, "/results/sender/messages"), 2 * 2 * 3000);
    for field in ["received", "bytes", "expected", "duplicates", "out_of_order", "gaps", "too_old"] {
        let path = format!("/results/receivers/0/total/{field}");
        assert_eq!(u(&m, &path), sum(&path), "{path}");
    }
    assert_eq!(u(&m, "/results/receivers/0/sent"), sum("/results/receivers/0/sent"));
    assert_eq!(m["results"]["receivers"].as_array().unwrap().len(), 1, "one serve, one receiver");
    assert_eq!(m["results"]["receivers"][0]["publishers"].as_array().unwrap().len(), 4);
    let rate = |v: &serde_json::Value| v["results"]["sender"]["per_s"].as_f64().unwrap();
    assert!((rate(&m) - (rate(&pa) + rate(&pb))).abs() < 1e-6 * rate(&m), "rates add up");
    // the text says the same
    let (sent, received) = (sum("/results/sender/messages"), sum("/results/receivers/0/total/received"));
    assert!(r.out.contains("== merged =="), "{}", r.out);
    assert!(r.out.contains(&format!("sender: sent {sent} messages")), "{}", r.out);
    assert!(r.out.contains("rates: merged: each generator's rate over its own sending time, summed"), "{}", r.out);
    let rsent = sum("/results/receivers/0/sent");
    assert!(r.out.contains(&format!("{target}: received {received} of {rsent} sent")), "{}", r.out);
    let again = wirebench(&["report", "--merge", gen1.to_str().unwrap(), gen1.to_str().unwrap()]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.err.contains("are the same run"), "{}", again.err);
}

/// `report FILE` of a saved relay run prints the relay's summary (before: the heading and
/// the environment only, its text dispatch falling through to the proxy's renderer).
#[test]
fn report_prints_a_relays_body() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("relay.json");
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let args = ["relay", "--listen", &listen, "--peers", "127.0.0.2", "--group", "239.255.79.10:5086"];
    let r =
        wirebench(&[&args[..], &["--check-wait", "100ms", "-d", "200ms", "--json", json.to_str().unwrap()]].concat());
    assert_eq!(r.code, 0, "{r:?}");
    let id = read_json(&json)["results"]["relay_id"].as_str().unwrap().to_owned();
    let text = wirebench_report::screen::unfold(&r.out);
    let summary = text.lines().skip_while(|l| !l.starts_with(&format!("relay {id} on "))).collect::<Vec<_>>();
    assert!(summary.len() >= 3, "{}", r.out);
    let shown = wirebench(&["report", json.to_str().unwrap(), "-v"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    for line in &summary {
        assert!(shown.out.contains(line), "{line}\n{}", shown.out);
    }
    assert!(shown.out.contains("  group 239.255.79.10:5086: local 0 dgrams"), "{}", shown.out);
    assert!(shown.out.contains("  relay port: dropped 0 from non-peers"), "{}", shown.out);
}

/// `report FILE` of a saved proxy run prints the proxy's lines.
#[test]
fn report_prints_a_proxys_body() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("proxy.json");
    let target = srv.local_addr().to_string();
    let args = ["proxy", "--listen", "127.0.0.1:0", "--upstream", &target, "-d", "100ms", "--json"];
    let r = wirebench(&[&args[..], &[json.to_str().unwrap()]].concat());
    assert_eq!(r.code, 0, "{r:?}");
    let shown = wirebench(&["report", json.to_str().unwrap()]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.out.contains("proxy udp 127.0.0.1:"), "{}", shown.out);
    assert!(shown.out.contains(&format!(" -> {target}: 0 flows")), "{}", shown.out);
}

/// `report FILE` of a saved `wirebench hiccup` run prints what the run printed: the
/// meter's line, the worst second and what the tail means (before: the line only).
#[test]
fn report_prints_the_stall_meters_body() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hiccup.json");
    let r = wirebench(&["hiccup", "--duration", "200ms", "-q", "--json", json.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let shown = wirebench(&["report", json.to_str().unwrap(), "-v"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    for line in wirebench_report::screen::unfold(&r.out).lines() {
        assert!(shown.out.contains(line), "{line}\n{}", shown.out);
    }
    assert!(shown.out.contains("\nworst second: "), "{}", shown.out);
    assert!(shown.out.contains("\na sleeping thread on this host wakes up to "), "{}", shown.out);
}
