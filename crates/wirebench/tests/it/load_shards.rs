//! `load --shard K/N`, `--start-at` and `report --merge`: three namespaces each run one shard
//! against a room in a fourth; the merged report adds up to the shards', no room is split, and
//! merge refuses other scenarios and corrupt files. The Kubernetes Job's arguments are the
//! CLI's (its server-side dry run is in `mesh_k8s`).

#[cfg(feature = "netns-tests")]
use serde_json::Value;

use crate::support::wirebench;

fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Job's container arguments parse as `wirebench load` flags, and `--shard auto/N`
/// matches `completions: N` (a mismatch would run some rooms twice or never).
#[test]
fn the_kubernetes_job_runs_valid_load_flags_one_shard_per_index() {
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/load-job.yaml")).unwrap();
    let args: Vec<String> = text
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim_start()[2..].trim().replace("$(START_AT)", "2026-11-23T04:00:00Z"))
        .collect();
    assert_eq!(args[0], "load");
    let refs: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let parsed: wirebench::load::Args = wirebench::flags::parse_mode("load", &refs).expect("the Job's flags parse");
    let completions: String =
        text.lines().find_map(|l| l.trim().strip_prefix("completions: ").map(str::to_owned)).unwrap();
    assert_eq!(parsed.shard.as_deref(), Some(format!("auto/{completions}").as_str()));
    assert_eq!(text.lines().find_map(|l| l.trim().strip_prefix("parallelism: ")), Some(completions.as_str()));
    assert!(parsed.output.json.is_some() && parsed.start_at.is_some());
}

/// Bad `--shard` and `--start-at` values: one line, exit 2, before any connection.
#[test]
fn bad_shards_and_start_times_exit_2_in_one_line() {
    for (args, want) in [
        (vec!["--shard", "4/3"], "--shard 4/3: K must be 1 to 3"),
        (vec!["--shard", "1/0"], "--shard: N must be at least 1"),
        (vec!["--shard", "1/4"], "3 rooms cannot be split 4 ways"),
        (vec!["--shard", "auto/3"], "JOB_COMPLETION_INDEX"),
        (vec!["--start-at", "yesterday"], "--start-at 'yesterday'"),
        (vec!["--start-at", "1000000000"], "--start-at was"),
    ] {
        let mut a = vec!["load", "ws://127.0.0.1:9/rooms/t", "--clients", "15", "--room-size", "5", "-d", "1s"];
        a.extend(args);
        let r = wirebench(&a);
        assert_eq!(r.code, 2, "{a:?}: {}", r.err);
        assert!(r.err.contains(want) && r.err.trim().lines().count() == 1, "{a:?}: {}", r.err);
    }
}

#[cfg(feature = "netns-tests")]
fn load(v: &Value) -> &Value {
    &v["results"]
}

#[cfg(feature = "netns-tests")]
fn u(v: &Value) -> u64 {
    v.as_u64().expect("an integer")
}

#[cfg(feature = "netns-tests")]
mod netns {
    use std::time::{Duration, Instant, SystemTime};

    use super::{load, u};
    use crate::lab::{BIN, Lab};
    use crate::support::{assert_valid_report, read_json, wirebench};

    const NET: &str = "10.77.78";

    fn wait_for_port(addr: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let sa: std::net::SocketAddr = addr.parse().unwrap();
        while std::net::TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "the room at {addr} did not start");
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    fn hist(v: &Value) -> hdrhistogram::Histogram<u64> {
        wirebench_core::report::decode_histogram(v["histogram"].as_str().unwrap()).unwrap()
    }

    use serde_json::Value;

    #[test]
    fn three_shards_in_namespaces_merge_into_the_whole_scenario() {
        let _alone = crate::lab::heavy();
        let mut lab = Lab::new("shd");
        let hosts = lab.bridged_hosts(4, NET);
        lab.attach_root(&lab.name("sw"), &format!("{NET}.200/24"));
        let room_addr = format!("{NET}.1:8090");
        lab.spawn(&hosts[0], BIN, &["room", "--listen", &room_addr]);
        wait_for_port(&room_addr);
        let dir = tempfile::tempdir().unwrap();
        // 35 clients in rooms of 5: 7 rooms, split 3, 2, 2 (the first shard takes the extra)
        let start = SystemTime::now() + Duration::from_secs(3);
        let start_at = format!("{:.3}", start.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64());
        let url = format!("ws://{room_addr}/rooms/t");
        let runs: Vec<_> = (1..=3)
            .map(|k| {
                let (ns, url, start_at) = (hosts[k].clone(), url.clone(), start_at.clone());
                let json = dir.path().join(format!("s{k}.json"));
                std::thread::spawn(move || {
                    let shard = format!("{k}/3");
                    let args = [
                        "load",
                        &url,
                        "--clients",
                        "35",
                        "--room-size",
                        "5",
                        "--rate",
                        "20/s",
                        "-d",
                        "2s",
                        "--mix",
                        "cursor=3,save=1",
                        "--shard",
                        &shard,
                        "--start-at",
                        &start_at,
                        "-q",
                        "--json",
                        json.to_str().unwrap(),
                    ];
                    (crate::lab::Lab::run(&ns, &args), json)
                })
            })
            .collect();
        let outs: Vec<_> = runs.into_iter().map(|t| t.join().unwrap()).collect();
        let mut shards = Vec::new();
        for (out, json) in &outs {
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            let v = read_json(json);
            assert_valid_report(&v);
            shards.push(v);
        }
        // no room split: contiguous blocks of whole rooms, each block's client ids exactly its
        // rooms' members (client i is in room i / 5 in every process: load/client.rs)
        let blocks: Vec<(u64, u64, u64, u64)> = shards
            .iter()
            .map(|s| {
                let sh = &load(s)["shard"];
                (u(&sh["first_room"]), u(&sh["end_room"]), u(&sh["first_client"]), u(&sh["end_client"]))
            })
            .collect();
        assert_eq!(blocks, [(0, 3, 0, 15), (3, 5, 15, 25), (5, 7, 25, 35)]);
        for s in &shards {
            let l = load(s);
            let sh = &l["shard"];
            assert_eq!(u(&sh["first_client"]), u(&sh["first_room"]) * 5);
            assert_eq!(u(&sh["end_client"]), (u(&sh["end_room"]) * 5).min(35));
            assert_eq!(u(&l["clients"]), u(&sh["end_client"]) - u(&sh["first_client"]));
            assert_eq!(u(&l["connections"]["connected"]), u(&l["clients"]));
            assert!(u(&l["deliveries"]["arrived"]) > 0);
        }
        let files: Vec<String> = outs.iter().map(|(_, j)| j.to_str().unwrap().to_owned()).collect();
        let (all_json, all_html) = (dir.path().join("all.json"), dir.path().join("all.html"));
        let mut a = vec!["report", "--merge"];
        a.extend(files.iter().map(String::as_str));
        a.extend(["--json", all_json.to_str().unwrap(), "--html", all_html.to_str().unwrap()]);
        let r = wirebench(&a);
        assert_eq!(r.code, 0, "{}", r.err);
        let merged = read_json(&all_json);
        assert_valid_report(&merged);
        let m = load(&merged);
        let sum = |f: &dyn Fn(&Value) -> u64| shards.iter().map(|s| f(load(s))).sum::<u64>();
        assert_eq!(u(&m["clients"]), 35);
        assert_eq!(u(&m["sent"]), sum(&|l| u(&l["sent"])));
        assert_eq!(u(&m["received"]), sum(&|l| u(&l["received"])));
        assert_eq!(u(&m["deliveries"]["expected"]), sum(&|l| u(&l["deliveries"]["expected"])));
        assert_eq!(u(&m["deliveries"]["arrived"]), sum(&|l| u(&l["deliveries"]["arrived"])));
        // the merged histogram is the union of the shards' recorded values
        // (a histogram is stored with its range cut at its largest value: the union grows to
        // the largest of any shard)
        let mut union = hist(&load(&shards[0])["overall"]["delay"]);
        union.auto(true);
        for s in &shards[1..] {
            union.add(hist(&load(s)["overall"]["delay"])).unwrap();
        }
        assert_eq!(hist(&m["overall"]["delay"]), union);
        assert_eq!(u(&m["overall"]["delay"]["summary"]["count"]), union.len());
        let p99 = wirebench_core::latency::value_at_percentile(&union, 99.0);
        let listed = m["overall"]["delay"]["summary"]["percentiles"].as_array().unwrap();
        assert_eq!(listed.iter().find(|q| q["p"] == 99.0).map(|q| u(&q["ns"])), Some(p99));
        let series_sent: u64 = m["series"].as_array().unwrap().iter().map(|r| u(&r["sent"])).sum();
        assert_eq!(series_sent, u(&m["sent"]), "every second of every shard is in the merged series");
        // the same numbers in the text and the page
        let text = wirebench(&["report", all_json.to_str().unwrap()]);
        assert!(
            text.out.contains(&format!("clients 35 connected {}", u(&m["connections"]["connected"]))),
            "{}",
            text.out
        );
        let html = std::fs::read_to_string(&all_html).unwrap();
        assert!(html.contains(&u(&m["sent"]).to_string()));
        assert!(text.out.contains("merged from 3 reports"), "{}", text.out);
        // a different scenario, and a corrupt file: one line, exit 2
        let mut other = shards[1].clone();
        other["config"]["rate_per_client"] = 25.0.into();
        let other_path = dir.path().join("other.json");
        std::fs::write(&other_path, other.to_string()).unwrap();
        let r = wirebench(&["report", "--merge", &files[0], other_path.to_str().unwrap()]);
        assert_eq!(r.code, 2);
        assert!(
            r.err.contains("config.rate_per_client differs (20.0 vs 25.0)") && r.err.trim().lines().count() == 1,
            "{}",
            r.err
        );
        let text = std::fs::read_to_string(&files[2]).unwrap();
        let torn = dir.path().join("torn.json");
        std::fs::write(&torn, &text[..text.len() / 2]).unwrap();
        let r = wirebench(&["report", "--merge", &files[0], torn.to_str().unwrap()]);
        assert_eq!(r.code, 2);
        assert!(r.err.contains("torn.json: not JSON") && r.err.trim().lines().count() == 1, "{}", r.err);
    }
}
