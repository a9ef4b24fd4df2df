//! `report --merge` of load shards on loopback: the exit code follows the merged thresholds
//! (3 when one fails, after every output is written), a missing shard is refused unless
//! `--partial` (which marks the text, JSON and HTML), and parts that did not run together
//! are refused. The shards are two real `load --shard K/2` runs started by one `--start-at`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::support::{assert_valid_report, read_json, wirebench};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Shards 1/2 and 2/2 of one scenario (10 clients in rooms of 5, 1 s, threshold p99<1h),
/// run together against an in-process room; their reports in `dir`.
fn two_shards(dir: &Path) -> [PathBuf; 2] {
    let room = wirebench::room::RoomServer::start(&wirebench::room::Config::loopback()).unwrap();
    let url = format!("ws://{}/rooms/m", room.local_addr());
    let start = SystemTime::now() + Duration::from_secs(2);
    let start_at = format!("{:.3}", start.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64());
    let runs: Vec<_> = (1..=2)
        .map(|k| {
            let (url, start_at, json) = (url.clone(), start_at.clone(), dir.join(format!("s{k}.json")));
            std::thread::spawn(move || {
                let shard = format!("{k}/2");
                let r = wirebench(&[
                    "load",
                    &url,
                    "--clients",
                    "10",
                    "--room-size",
                    "5",
                    "--rate",
                    "10/s",
                    "-d",
                    "1s",
                    "--threshold",
                    "p99<1h",
                    "--shard",
                    &shard,
                    "--start-at",
                    &start_at,
                    "-q",
                    "--json",
                    p(&json),
                ]);
                assert_eq!(r.code, 0, "shard {shard}: {}{}", r.out, r.err);
                json
            })
        })
        .collect();
    let files: Vec<PathBuf> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    room.stop();
    [files[0].clone(), files[1].clone()]
}

/// `v` with every threshold (config and results) replaced by `expr`, saved as `to`.
fn with_threshold(v: &Value, expr: &str, to: &Path) -> PathBuf {
    let mut v = v.clone();
    v["config"]["thresholds"] = serde_json::json!([expr]);
    for t in v["results"]["thresholds"].as_array_mut().unwrap() {
        t["expr"] = expr.into();
    }
    std::fs::write(to, v.to_string()).unwrap();
    to.to_owned()
}

#[test]
fn merged_thresholds_set_the_exit_code_and_missing_shards_are_refused_unless_partial() {
    let dir = tempfile::tempdir().unwrap();
    let [s1, s2] = two_shards(dir.path());
    let (all_json, all_html) = (dir.path().join("all.json"), dir.path().join("all.html"));
    // every threshold holds: 0
    let r = wirebench(&["report", "--merge", p(&s1), p(&s2), "--json", p(&all_json)]);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(r.out.contains("threshold p99<1h: ") && r.out.contains(" ok"), "{}", r.out);
    // one fails on the merged histogram: 3, after the JSON and the page are written, with
    // load's verdict line (also when --html replaces the text)
    let (v1, v2) = (read_json(&s1), read_json(&s2));
    let f1 = with_threshold(&v1, "p50<1ns", &dir.path().join("f1.json"));
    let f2 = with_threshold(&v2, "p50<1ns", &dir.path().join("f2.json"));
    for html in [false, true] {
        let _ = std::fs::remove_file(&all_json);
        let mut a = vec!["report", "--merge", p(&f1), p(&f2), "--json", p(&all_json)];
        if html {
            a.extend(["--html", p(&all_html)]);
        }
        let r = wirebench(&a);
        assert_eq!(r.code, 3, "html {html}: {}{}", r.out, r.err);
        assert!(r.out.contains("threshold p50<1ns: ") && r.out.contains(" ms FAILED"), "{}", r.out);
        let m = read_json(&all_json);
        assert_valid_report(&m);
        assert_eq!(m["results"]["thresholds"][0]["passed"], false);
        if html {
            assert!(std::fs::read_to_string(&all_html).unwrap().contains("FAIL"));
        }
    }
    // a shard missing: one line, exit 2, naming it
    let r = wirebench(&["report", "--merge", p(&s1)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert_eq!(
        r.err.trim(),
        "error: shard 2/2 missing: got 1/2 (merge every shard of the run, or give --partial to merge these anyway)"
    );
    // --partial: merged, and every view says it is partial
    let r = wirebench(&["report", "-v", "--merge", "--partial", p(&s2), "--json", p(&all_json)]);
    assert_eq!(r.code, 0, "{}", r.err);
    let partial = "PARTIAL: shard 1/2 missing (report --merge --partial): the counts and percentiles are those of \
                   the shards present";
    assert!(r.out.contains(partial), "{}", r.out);
    assert!(r.out.contains("merged from 1 report ("), "one shard, counted in words: {}", r.out);
    let m = read_json(&all_json);
    assert_valid_report(&m);
    assert_eq!(m["results"]["partial"], serde_json::json!({"count": 2, "missing": [1]}));
    assert_eq!(m["results"]["clients"], v2["results"]["clients"]);
    let r = wirebench(&["report", p(&all_json), "--html", p(&all_html)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(std::fs::read_to_string(&all_html).unwrap().contains(partial));
    // --partial is for --merge
    let r = wirebench(&["report", "--partial", p(&s1)]);
    assert_eq!(r.code, 2, "{}", r.err);
}

#[test]
fn parts_that_did_not_run_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let [s1, s2] = two_shards(dir.path());
    let mut v2 = read_json(&s2);
    // shard 2 as if it had started an hour after shard 1
    let v1 = read_json(&s1);
    let started: SystemTime = humantime::parse_rfc3339(v1["meta"]["started_at"].as_str().unwrap()).unwrap();
    let late = started + Duration::from_secs(3600);
    v2["meta"]["started_at"] = humantime::format_rfc3339_micros(late).to_string().into();
    let moved = dir.path().join("late.json");
    std::fs::write(&moved, v2.to_string()).unwrap();
    let r = wirebench(&["report", "--merge", p(&s1), p(&moved)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert_eq!(r.err.trim().lines().count(), 1, "{}", r.err);
    let d1 = v1["meta"]["duration_ns"].as_u64().unwrap();
    let gap_ns = 3_600_000_000_000 - d1;
    let want = format!(
        "error: s1 ended {}.{:03} s before late started: the parts did not run together",
        gap_ns / 1_000_000_000,
        gap_ns % 1_000_000_000 / 1_000_000
    );
    assert!(r.err.starts_with(&want), "{}\nwant {want}", r.err);
    // 1.5 s apart and overlapping (both 10 s long here): merged with a warning
    v2["meta"]["started_at"] =
        humantime::format_rfc3339_micros(started + Duration::from_millis(1500)).to_string().into();
    let (mut long1, spread) = (v1.clone(), dir.path().join("spread.json"));
    (long1["meta"]["duration_ns"], v2["meta"]["duration_ns"]) = (10_000_000_000u64.into(), 10_000_000_000u64.into());
    std::fs::write(&spread, v2.to_string()).unwrap();
    std::fs::write(&s1, long1.to_string()).unwrap();
    let r = wirebench(&["report", "--merge", p(&s1), p(&spread)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("warning: spread started 1.500 s after s1 (more than 1 s"), "{}", r.out);
}
