use super::*;
use crate::load::delivery::Account;
use crate::load::record::{Arrival, Recording};
use crate::load::results::{Counts, Shape, build};
use crate::load::{Mix, Threshold};
use crate::report::{LinkMethod, LoadPartial, LoadResults, LoadShard};
use crate::rng::SplitMix64;

fn seed(name: &str) -> Report {
    let path = format!("{}/../../fuzz/seeds/report_load/{name}", env!("CARGO_MANIFEST_DIR"));
    crate::report::read_report(|| std::fs::File::open(&path)).unwrap()
}

fn mix() -> Mix {
    Mix::parse("cursor=3,save=1", &["save"]).unwrap()
}

/// Seeded deliveries and replies into `rec`.
fn feed(rec: &mut Recording, rng: &mut SplitMix64, n: u64) {
    for _ in 0..n {
        rec.on_send(0, rng.next_u64() % 1_000, 4);
        let d = 1_000 + rng.next_u64() % 50_000_000;
        rec.on_delivery(0, d, Some(d + rng.next_u64() % 1_000_000), Arrival::Expected);
        rec.on_send(1, 0, 1);
        rec.on_reply(1, 2_000 + rng.next_u64() % 9_000_000, Arrival::Expected);
        crate::latency::record(&mut rec.connect, 100_000 + rng.next_u64() % 1_000_000);
    }
}

fn results(rec: &Recording, clients: u64, ts: &[Threshold], shard: Option<LoadShard>) -> LoadResults {
    let m = mix();
    let shape = Shape {
        url: "ws://h:1/r-0".into(),
        clients,
        room_size: 5,
        rate_per_client: 2.0,
        arrivals: "fixed",
        mix: &m,
        percentiles: &[50.0, 99.0, 99.9],
        thresholds: ts,
        link_up: None,
        link_down: None,
        end_ns: 10_000_000_000,
        ramp_ns: 0,
    };
    let d = Account { expected: 40, arrived: 30, missing: 10, late: 10, ..Account::default() };
    let counts = Counts { connected: clients, ..Counts::default() };
    let mut l =
        build(&shape, rec, (&d, &Account::default()), counts, Vec::new(), 10_000_000_000, (1_000, 500), 7, false);
    l.shard = shard;
    l
}

fn report(l: LoadResults, k: u64) -> Report {
    let mut r = seed("report-ping-full.json");
    r.config = serde_json::json!({"clients": 15, "room_size": 5, "shard": format!("{k}/3")});
    r.results = Results::Load(l);
    r
}

fn shard(index: u64) -> LoadShard {
    let p = crate::load::shard::part(crate::load::shard::Shard { index, count: 3 }, 15, 5).unwrap();
    LoadShard {
        index,
        count: 3,
        first_room: p.rooms.start,
        end_room: p.rooms.end,
        first_client: p.clients.start,
        end_client: p.clients.end,
    }
}

fn load(r: &Report) -> &LoadResults {
    match &r.results {
        Results::Load(l) => l,
        _ => panic!("a load report"),
    }
}

/// Three shards fed seeded values merge into exactly what one recording fed every value
/// gives: every histogram equal, every count the sum, every percentile recomputed.
#[test]
fn merged_shards_equal_one_run_fed_every_value() {
    let ts: Vec<Threshold> = ["p99<20ms", "save:p50<1s"].iter().map(|t| t.parse().unwrap()).collect();
    let mut whole = Recording::new(2);
    let mut shards = Vec::new();
    for k in 1..=3u64 {
        let (mut rng, mut again) = (SplitMix64::new(k), SplitMix64::new(k));
        let mut rec = Recording::new(2);
        feed(&mut rec, &mut rng, 300 * k);
        feed(&mut whole, &mut again, 300 * k);
        shards.push(report(results(&rec, 5, &ts, Some(shard(k))), k));
    }
    let inputs: Vec<Input<'_>> =
        shards.iter().zip(["a", "b", "c"]).map(|(report, name)| Input { name, report }).collect();
    let merged = merge(&inputs).unwrap();
    let m = load(&merged);
    let one = results(&whole, 15, &ts, None);
    for (got, want) in std::iter::once((&m.overall, &one.overall)).chain(m.types.iter().zip(&one.types)) {
        assert_eq!(decode_histogram(&got.delay.histogram).unwrap(), decode_histogram(&want.delay.histogram).unwrap());
        assert_eq!(got.delay.summary, want.delay.summary, "{}", got.name);
        assert_eq!(got.delay_intended.summary, want.delay_intended.summary);
        assert_eq!(got.reply.as_ref().map(|v| &v.summary), want.reply.as_ref().map(|v| &v.summary));
        assert_eq!(
            (got.sent, got.received, got.expected, got.arrived),
            (want.sent, want.received, want.expected, want.arrived)
        );
    }
    assert_eq!(m.connections.connect_time.summary, one.connections.connect_time.summary);
    assert_eq!((m.sent, m.received, m.clients, m.connections.connected), (one.sent, one.received, 15, 15));
    assert_eq!(m.sent, 2 * 300 * (1 + 2 + 3));
    let sum = |f: fn(&LoadResults) -> u64| shards.iter().map(|r| f(load(r))).sum::<u64>();
    assert_eq!(m.deliveries.expected, sum(|l| l.deliveries.expected));
    assert_eq!((m.process.user_ns, m.process.system_ns), (3_000, 1_500));
    assert_eq!(m.thresholds, one.thresholds);
    assert_eq!(m.series.len(), 1);
    assert_eq!(
        (m.series[0].delay_p50_ns, m.series[0].delay_p99_ns),
        (one.series[0].delay_p50_ns, one.series[0].delay_p99_ns)
    );
    assert_eq!(m.series[0].sent, one.series[0].sent);
    assert!(m.shard.is_none() && merged.config.get("shard").is_none());
    // one input (--partial: the others are missing): its own numbers
    let alone = merge_with(&inputs[..1], Options { partial: true }).unwrap().report;
    let a = load(&alone);
    let l0 = load(&shards[0]);
    assert_eq!(
        (a.overall.delay.summary.clone(), a.sent, a.series.clone()),
        (l0.overall.delay.summary.clone(), l0.sent, l0.series.clone())
    );
}

#[test]
fn different_scenarios_and_bad_inputs_are_refused_in_one_line() {
    let mut rec = Recording::new(2);
    feed(&mut rec, &mut SplitMix64::new(9), 10);
    let a = report(results(&rec, 5, &[], Some(shard(1))), 1);
    let mut b = report(results(&rec, 5, &[], Some(shard(2))), 2);
    b.config["room_size"] = 6.into();
    let e = |rs: &[(&str, &Report)]| {
        let inputs: Vec<Input<'_>> = rs.iter().map(|(name, report)| Input { name, report }).collect();
        merge(&inputs).unwrap_err().to_string()
    };
    assert_eq!(
        e(&[("a.json", &a), ("b.json", &b)]),
        "a.json and b.json are not parts of one scenario: config.room_size differs (5 vs 6)"
    );
    assert_eq!(e(&[("a.json", &a), ("a2.json", &a)]), "shard 1/3 is given twice (a.json and a2.json)");
    let whole = report(results(&rec, 5, &[], None), 2);
    assert!(e(&[("a.json", &a), ("w.json", &whole)]).starts_with("some reports are shards"));
    let ping = seed("report-ping-full.json");
    assert_eq!(
        e(&[("a.json", &a), ("p.json", &ping)]),
        "a.json is a load report and p.json a ping report: merge reports of one mode"
    );
    let mut bad = report(results(&rec, 5, &[], Some(shard(2))), 2);
    if let Results::Load(l) = &mut bad.results {
        l.types[0].delay.histogram = "AAAA".into();
    }
    let c = report(results(&rec, 5, &[], Some(shard(3))), 3);
    let msg = e(&[("a.json", &a), ("bad.json", &bad), ("c.json", &c)]);
    assert!(msg.starts_with("bad.json: type cursor delay: histogram does not decode"), "{msg}");
    let mut old = report(results(&rec, 5, &[], Some(shard(2))), 2);
    if let Results::Load(l) = &mut old.results {
        l.series[0].delay_histogram = None;
    }
    assert!(
        e(&[("a.json", &a), ("old.json", &old), ("c.json", &c)]).starts_with("old.json: second 1 has no histogram")
    );
    let stream = seed("report-stream-search.json");
    assert!(e(&[("s.json", &stream)]).starts_with("s.json: a rate search (--find-max-rate) does not add"));
    assert!(e(&[]).contains("nothing to merge"));
    for m in [e(&[("a.json", &a), ("b.json", &b)]), e(&[("a.json", &a), ("bad.json", &bad), ("c.json", &c)])] {
        assert!(!m.contains('\n'));
    }
}

/// Three shards of one run (`shard(k)`), fed alike, `secs` long each.
fn three(secs: u64) -> Vec<Report> {
    let mut rec = Recording::new(2);
    feed(&mut rec, &mut SplitMix64::new(5), 20);
    (1..=3)
        .map(|k| {
            let mut r = report(results(&rec, 5, &[], Some(shard(k))), k);
            r.meta.duration_ns = secs * 1_000_000_000;
            r
        })
        .collect()
}

fn named<'a>(rs: &'a [Report], names: &[&'a str]) -> Vec<Input<'a>> {
    rs.iter().zip(names).map(|(report, name)| Input { name, report }).collect()
}

#[test]
fn missing_shards_are_refused_unless_partial() {
    let rs = three(1);
    let (one, three_) = (&rs[0], &rs[2]);
    let picked = [one.clone(), three_.clone()];
    let inputs = named(&picked, &["s1.json", "s3.json"]);
    assert_eq!(
        merge(&inputs).unwrap_err().to_string(),
        "shard 2/3 missing: got 1/3 and 3/3 (merge every shard of the run, or give --partial to merge these anyway)"
    );
    assert_eq!(
        merge(&inputs[..1]).unwrap_err().to_string(),
        "shards 2/3 and 3/3 missing: got 1/3 (merge every shard of the run, or give --partial to merge these anyway)"
    );
    let m = merge_with(&inputs, Options { partial: true }).unwrap();
    let l = load(&m.report);
    assert_eq!(l.partial, Some(LoadPartial { count: 3, missing: vec![2] }));
    assert_eq!(l.clients, load(one).clients + load(three_).clients);
    assert!(m.warnings.is_empty());
    // every shard: not partial, with or without --partial
    let all = named(&rs, &["a", "b", "c"]);
    assert_eq!(load(&merge_with(&all, Options { partial: true }).unwrap().report).partial, None);
    assert_eq!(load::shard_list(&[1, 3, 5], 5), "1/5, 3/5 and 5/5");
}

/// A shard from a file is not trusted: `count` sized the list of missing shards (a
/// `"count": 18446744073709551615` made `report --merge` try to list them all: it hung,
/// filling memory), and an index outside 1..=N was counted as a shard of the run.
#[test]
fn a_shard_number_out_of_range_is_refused_without_listing_it() {
    let rs = three(1);
    for (index, count, want) in [
        (1, u64::MAX, "s.json: shard 1/18446744073709551615: at most 65536 shards"),
        (4, 3, "s.json: shard 4/3 is not one of 1..=3"),
        (0, 3, "s.json: shard 0/3 is not one of 1..=3"),
    ] {
        let mut r = rs[0].clone();
        if let Results::Load(l) = &mut r.results {
            l.shard = Some(LoadShard { index, count, ..shard(1) });
        }
        for partial in [false, true] {
            let picked = [r.clone()];
            let e = merge_with(&named(&picked, &["s.json"]), Options { partial }).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
    }
    // the largest N allowed: still merged, the missing shards listed
    let mut r = rs[0].clone();
    if let Results::Load(l) = &mut r.results {
        l.shard = Some(LoadShard { index: 1, count: load::MAX_SHARDS, ..shard(1) });
    }
    let picked = [r];
    let m = merge_with(&named(&picked, &["s.json"]), Options { partial: true }).unwrap();
    assert_eq!(load(&m.report).partial.as_ref().map(|p| p.missing.len()), Some(65_535));
}

#[test]
fn parts_that_did_not_run_together_are_refused_and_spread_starts_warned() {
    let mut rs = three(10);
    // 0.9 s apart: lined up by one --start-at, nothing said
    rs[1].meta.started_at = "2026-11-22T00:00:00.9Z".into();
    assert!(merge_with(&named(&rs, &["a", "b", "c"]), Options::default()).unwrap().warnings.is_empty());
    // 1.5 s apart, still overlapping: merged, with a warning
    rs[1].meta.started_at = "2026-11-22T00:00:01.5Z".into();
    let m = merge_with(&named(&rs, &["a", "b", "c"]), Options::default()).unwrap();
    assert_eq!(
        m.warnings,
        ["warning: b started 1.500 s after a (more than 1 s: not lined up by one --start-at); the per-second series \
          adds seconds counted from each part's own start"]
    );
    // c began 2.5 s after a and b ended (both 10 s long, from 0 and 1.5 s)
    rs[2].meta.started_at = "2026-11-22T00:00:12.5Z".into();
    assert_eq!(
        merge(&named(&rs, &["a", "b", "c"])).unwrap_err().to_string(),
        "a ended 2.500 s before c started: the parts did not run together (their run windows must overlap)"
    );
    rs[2].meta.started_at = "yesterday".into();
    let e = merge(&named(&rs, &["a", "b", "c"])).unwrap_err().to_string();
    assert!(e.starts_with("c: meta.started_at 'yesterday' is not an RFC 3339 time"), "{e}");
}

#[test]
fn chosen_subprotocols_add_up_over_the_shards() {
    let mut rs = three(1);
    for (r, (p, n)) in rs.iter_mut().zip([("chat", 5), ("chat", 5), ("v2", 5)]) {
        r.config["connect"] = serde_json::json!({"subprotocols": ["chat", "v2"]});
        if let Results::Load(l) = &mut r.results {
            l.connections.subprotocols.insert(p.into(), n);
        }
    }
    let m = merge(&named(&rs, &["a", "b", "c"])).unwrap();
    let got: Vec<(&str, u64)> = load(&m).connections.subprotocols.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(got, [("chat", 10), ("v2", 5)]);
    // counts from files that do not fit: saturated, not a panic
    let mut big = rs.clone();
    for r in &mut big {
        if let Results::Load(l) = &mut r.results {
            l.connections.subprotocols.insert("chat".into(), u64::MAX);
        }
    }
    let saturated = merge(&named(&big, &["a", "b", "c"])).unwrap();
    assert_eq!(load(&saturated).connections.subprotocols.get("chat"), Some(&u64::MAX));
    // every view's line: the parts differ, so every choice with its clients, and "mixed"
    assert_eq!(
        crate::report::subprotocol_words(&m).unwrap(),
        "subprotocol: offered chat, v2; the server chose chat for 10 clients, v2 for 5 clients (mixed)"
    );
    // the parts agree: kept as it is
    let agree = merge(&named(&rs[..2], &["a", "b"])).map_err(|e| e.to_string());
    assert!(agree.as_ref().is_err_and(|e| e.starts_with("shard 3/3 missing")), "{agree:?}");
    let agree = merge_with(&named(&rs[..2], &["a", "b"]), Options { partial: true }).unwrap().report;
    assert_eq!(
        crate::report::subprotocol_words(&agree).unwrap(),
        "subprotocol: offered chat, v2; the server chose chat for 10 clients"
    );
    // none offered: no line
    assert_eq!(crate::report::subprotocol_words(&three(1)[0]), None);
}

#[test]
fn ping_generators_against_one_server_add_up() {
    let gen1 = seed("report-ping-full.json");
    // each generator writes its own file and may pin its own CPU: still one scenario
    let mut gen2 = gen1.clone();
    gen2.config["json"] = "other.json".into();
    gen2.config["cpu"] = 1.into();
    // and draws its own Poisson seed (`ping --poisson`)
    gen2.config["poisson"] = serde_json::json!({ "seed": 7 });
    gen2.meta.started_at = "2026-11-22T00:00:00.5Z".into();
    let same = merge(&[Input { name: "a", report: &gen1 }, Input { name: "a2", report: &gen1 }]).unwrap_err();
    assert_eq!(same.to_string(), "a and a2 are the same run: give each report once");
    gen2.meta.duration_ns = gen1.meta.duration_ns + 250_000_000;
    let inputs = [Input { name: "a", report: &gen1 }, Input { name: "b", report: &gen2 }];
    let m = merge(&inputs).unwrap();
    // the earlier start (the whole second, though its text sorts after "…00.5Z"), the longer run
    assert_eq!(m.meta.started_at, "2026-11-22T00:00:00Z");
    assert_eq!(m.meta.duration_ns, 1_250_000_000);
    let (Results::Ping(got), Results::Ping(one)) = (&m.results, &gen1.results) else { panic!("ping") };
    assert_eq!(got.sent, 2 * one.sent);
    let (mine, one_r) = (&got.responders[0], &one.responders[0]);
    assert_eq!((mine.received, mine.lost), (2 * one_r.received, 2 * one_r.lost));
    assert_eq!(mine.latency.summary.count, 2 * one_r.latency.summary.count);
    // the same values twice: every percentile as before
    assert_eq!(mine.latency.summary.percentiles, one_r.latency.summary.percentiles);
    let mut want = decode_histogram(&one_r.latency.histogram).unwrap();
    want.add(want.clone()).unwrap();
    assert_eq!(decode_histogram(&mine.latency.histogram).unwrap(), want);
    let mut other = gen1.clone();
    other.config["size"] = 999.into();
    let msg =
        merge(&[Input { name: "a", report: &gen1 }, Input { name: "c", report: &other }]).unwrap_err().to_string();
    assert_eq!(msg, "a and c are not parts of one scenario: config.size differs (48 vs 999)");
}

#[test]
fn the_first_difference_is_named_with_its_path() {
    let a = serde_json::json!({"x": 1, "m": [{"n": "a"}, {"n": "b"}]});
    let b = serde_json::json!({"x": 1, "m": [{"n": "a"}, {"n": "c"}]});
    assert_eq!(first_difference("config", &a, &b).unwrap(), r#"config.m[1].n differs ("b" vs "c")"#);
    assert_eq!(first_difference("config", &a, &a), None);
    let c = serde_json::json!({"x": 1});
    assert_eq!(first_difference("config", &c, &a).unwrap(), r#"config.m differs (absent vs [{"n":"a"},{"n":"b"}])"#);
    // values up to 60 characters (as JSON) are shown whole, longer ones cut to 57 and "..."
    let (sixty, long) = ("s".repeat(58), "s".repeat(59));
    let d = first_difference("config", &serde_json::json!({"x": sixty}), &serde_json::json!({"x": long})).unwrap();
    assert_eq!(d, format!("config.x differs (\"{sixty}\" vs \"{}...)", &long[..56]));
    assert_eq!(weighted_mean([(10, 1), (20, 3)]), 17);
    // exact with counts and means near the top (a sum of products overflowed u128)
    assert_eq!(weighted_mean([(u64::MAX, u64::MAX), (u64::MAX - 2, u64::MAX)]), u64::MAX - 1);
    assert_eq!(weighted_mean([(u64::MAX, u64::MAX), (0, u64::MAX), (0, 0)]), u64::MAX / 2);
    // a carry leaves the remainder's rest for the next parts: (4 + 4 + 2) / 5, the first carry
    // at the second part, the next one at the third
    assert_eq!(weighted_mean([(4, 1), (4, 1), (2, 1), (0, 1), (0, 1)]), 2);
}

/// Every count of a load shard near `u64::MAX` (a file is not trusted): the merge adds them
/// saturating (the plain sums panicked with "attempt to add with overflow" in debug builds
/// and wrapped in release), and rates that add up to infinity are refused in one line.
#[test]
fn load_counts_near_the_top_saturate_and_rates_too_large_are_refused() {
    use crate::generator::{GeneratorVerdict, SlipSecond};
    use crate::report::{GeneratorHealth, LoadAccount, LoadLink};
    const BIG: u64 = u64::MAX - 1;
    let huge_account = |a: &mut LoadAccount| {
        (a.expected, a.arrived, a.missing, a.dropped, a.late, a.duplicates) = (BIG, BIG, BIG, BIG, BIG, BIG);
        a.closed.insert("1006".into(), BIG);
    };
    let mut rs = three(1);
    for r in &mut rs {
        let Results::Load(l) = &mut r.results else { panic!("load") };
        (l.sent, l.received, l.clients, l.slip_mean_ns) = (BIG, BIG, BIG, BIG);
        let c = &mut l.connections;
        (c.connected, c.failed, c.disconnects) = (BIG, BIG, BIG);
        huge_account(&mut l.deliveries);
        huge_account(&mut l.replies);
        for t in l.types.iter_mut().chain(std::iter::once(&mut l.overall)) {
            (t.sent, t.received, t.expected, t.arrived, t.missing, t.unexpected) = (BIG, BIG, BIG, BIG, BIG, BIG);
        }
        (l.series[0].sent, l.series[0].received) = (BIG, BIG);
        l.errors.insert("timeout".into(), BIG);
        (l.process.user_ns, l.process.system_ns) = (BIG, BIG);
        l.link_up = Some(LoadLink {
            requested_bps: Some(1_000),
            requested_delay_ns: 0,
            method: LinkMethod::Socket,
            achieved_bps_max_client: 1.0,
            frames: BIG,
            hold: l.overall.delay.clone(),
        });
        l.generator = Some(GeneratorHealth {
            threads: 1,
            asked_per_s: Some(1.0),
            achieved_per_s: 1.0,
            cpu_ns: 1,
            cpu_share: 0.5,
            wait_ns: None,
            verdict: GeneratorVerdict::Kept,
            slip_seconds: vec![SlipSecond { at_s: 1, sends: BIG, mean_ns: BIG, max_ns: BIG }],
            cpu_seconds: Vec::new(),
            behind: Vec::new(),
            schedule: None,
        });
    }
    let two = |rs: &[Report]| merge_with(&named(&rs[..2], &["a", "b"]), Options { partial: true });
    let merged = two(&rs).unwrap().report;
    let l = load(&merged);
    let max = u64::MAX;
    assert_eq!((l.sent, l.received, l.clients, l.slip_mean_ns), (max, max, max, BIG));
    let conn = &l.connections;
    assert_eq!((conn.connected, conn.failed, conn.disconnects), (max, max, max));
    for a in [&l.deliveries, &l.replies] {
        assert_eq!((a.expected, a.arrived, a.missing, a.dropped, a.late, a.duplicates), (max, max, max, max, max, max));
        assert_eq!(a.closed.get("1006"), Some(&max));
    }
    for t in l.types.iter().chain(std::iter::once(&l.overall)) {
        assert_eq!(
            (t.sent, t.received, t.expected, t.arrived, t.missing, t.unexpected),
            (max, max, max, max, max, max)
        );
    }
    assert_eq!((l.series[0].sent, l.series[0].received), (max, max));
    assert_eq!(l.errors.get("timeout"), Some(&max));
    assert_eq!((l.process.user_ns, l.process.system_ns, l.process.per_event_ns), (max, max, 1.0));
    assert_eq!(l.link_up.as_ref().map(|k| k.frames), Some(max));
    let g = l.generator.as_ref().expect("both shards have one");
    assert_eq!(g.slip_seconds, [SlipSecond { at_s: 1, sends: max, mean_ns: BIG, max_ns: BIG }]);
    // rates too large to add: refused, the field named
    for r in &mut rs {
        let Results::Load(l) = &mut r.results else { panic!("load") };
        l.achieved_send_per_s = f64::MAX;
    }
    let e = two(&rs).unwrap_err().to_string();
    assert_eq!(
        e,
        "achieved_send_per_s: the parts add up to a number that is not finite (a report holds one too large)"
    );
    for r in &mut rs {
        let Results::Load(l) = &mut r.results else { panic!("load") };
        l.achieved_send_per_s = 1.0;
        l.generator.as_mut().unwrap().achieved_per_s = f64::MAX;
    }
    assert!(two(&rs).unwrap_err().to_string().starts_with("generator.achieved_per_s: the parts add up"));
}

/// Two ping generators' counts near `u64::MAX`: saturated, not a panic (debug) or a wrapped
/// figure (release); a rate too large to add refused in one line.
#[test]
fn ping_counts_near_the_top_saturate_and_rates_too_large_are_refused() {
    const BIG: u64 = u64::MAX - 1;
    let mut gen1 = seed("report-ping-full.json");
    let Results::Ping(p) = &mut gen1.results else { panic!("ping") };
    (p.sent, p.warmup_sent, p.ignored) = (BIG, BIG, BIG);
    p.rate.as_mut().expect("the seed has a rate").slip_mean_ns = BIG;
    for r in &mut p.responders {
        (r.received, r.lost, r.late, r.duplicates, r.clamped) = (BIG, BIG, BIG, BIG, BIG);
    }
    let mut gen2 = gen1.clone();
    gen2.config["json"] = "other.json".into();
    gen2.meta.started_at = "2026-11-22T00:00:00.5Z".into();
    let both = |a: &Report, b: &Report| merge(&[Input { name: "a", report: a }, Input { name: "b", report: b }]);
    let m = both(&gen1, &gen2).unwrap();
    let Results::Ping(got) = &m.results else { panic!("ping") };
    let max = u64::MAX;
    assert_eq!((got.sent, got.warmup_sent, got.ignored), (max, max, max));
    assert_eq!(got.rate.as_ref().map(|r| r.slip_mean_ns), Some(BIG));
    for r in &got.responders {
        assert_eq!((r.received, r.lost, r.late, r.duplicates, r.clamped), (max, max, max, max, max));
    }
    for g in [&mut gen1, &mut gen2] {
        let Results::Ping(p) = &mut g.results else { panic!("ping") };
        p.rate.as_mut().unwrap().achieved_per_s = f64::MAX;
    }
    assert_eq!(
        both(&gen1, &gen2).unwrap_err().to_string(),
        "rate.achieved_per_s: the parts add up to a number that is not finite (a report holds one too large)"
    );
}

/// Open-loop generators' own lateness merges as histograms (counts add, the p50 is the
/// merged one's); a part without it (an older version's) leaves the merged run without.
#[test]
fn ping_generators_lateness_merges_as_histograms() {
    let late = |ns: u64, n: u64| {
        let mut h = crate::latency::histogram();
        for _ in 0..n {
            crate::latency::record(&mut h, ns);
        }
        LatencyView {
            measures: crate::report::Measure::SendLateness,
            summary: crate::latency::Summary::of(&h, &[50.0]),
            histogram: encode_histogram(&h),
        }
    };
    let mut gen1 = seed("report-ping-full.json");
    let mut gen2 = gen1.clone();
    gen2.config["json"] = "other.json".into();
    for (r, (ns, n)) in [(&mut gen1, (1_000, 300)), (&mut gen2, (9_000, 100))] {
        let Results::Ping(p) = &mut r.results else { panic!("ping") };
        p.rate.as_mut().expect("the seed has a rate").lateness = Some(late(ns, n));
    }
    let both = |a: &Report, b: &Report| merge(&[Input { name: "a", report: a }, Input { name: "b", report: b }]);
    let m = both(&gen1, &gen2).unwrap();
    let Results::Ping(got) = &m.results else { panic!("ping") };
    let v = got.rate.as_ref().and_then(|r| r.lateness.as_ref()).expect("merged lateness");
    assert_eq!(v.summary.count, 400);
    let h = crate::report::decode_histogram(&v.histogram).unwrap();
    assert!(h.equivalent(crate::latency::value_at_percentile(&h, 50.0), 1_000));
    assert!(h.equivalent(h.max(), 9_000));
    let Results::Ping(p) = &mut gen2.results else { panic!("ping") };
    p.rate.as_mut().expect("the seed has a rate").lateness = None;
    let m = both(&gen1, &gen2).unwrap();
    let Results::Ping(got) = &m.results else { panic!("ping") };
    assert_eq!(got.rate.as_ref().map(|r| r.lateness.is_none()), Some(true));
}

/// The merged run starts at the earliest part's start, compared as times: with mixed
/// precision the text order is not the time order ("…00.5Z" sorts before "…00Z"), in
/// either order of the parts.
#[test]
fn the_merged_start_is_the_earliest_in_time_not_in_text() {
    let gen1 = seed("report-ping-full.json");
    let mut early = gen1.clone();
    early.meta.started_at = "2026-11-22T00:00:00Z".into();
    let mut late = gen1.clone();
    late.config["json"] = "other.json".into();
    late.meta.started_at = "2026-11-22T00:00:00.5Z".into();
    for (a, b) in [(&early, &late), (&late, &early)] {
        let m = merge(&[Input { name: "a", report: a }, Input { name: "b", report: b }]).unwrap();
        assert_eq!(m.meta.started_at, "2026-11-22T00:00:00Z");
    }
}

/// Config arrays of different lengths are different scenarios: refused, not compared over
/// their common part.
#[test]
fn config_arrays_of_different_lengths_are_different_scenarios() {
    let base = serde_json::json!({ "targets": ["a", "b"] });
    let longer = serde_json::json!({ "targets": ["a", "b", "c"] });
    let d = first_difference("config", &base, &longer).expect("a difference");
    assert!(d.starts_with("config.targets differs"), "{d}");
    assert!(first_difference("config", &base, &base.clone()).is_none());
    // and two reports so configured are refused, either one first
    let gen1 = seed("report-ping-full.json");
    let (mut two, mut three) = (gen1.clone(), gen1.clone());
    two.config["targets"] = base["targets"].clone();
    three.config["targets"] = longer["targets"].clone();
    three.meta.started_at = "2026-11-22T00:00:00.5Z".into();
    for (a, b) in [(&two, &three), (&three, &two)] {
        let e = merge(&[Input { name: "a", report: a }, Input { name: "b", report: b }]).unwrap_err().to_string();
        assert!(e.starts_with("a and b are not parts of one scenario: config.targets differs"), "{e}");
    }
}

/// Load histograms grow with what they hold, so two shards' delays cover different ranges;
/// the sum holds both, whichever comes first.
#[test]
fn histograms_of_different_ranges_add_in_either_order() {
    let (mut short, mut long) = (crate::load::record::histogram(), crate::load::record::histogram());
    crate::latency::record(&mut short, 2_000);
    crate::latency::record(&mut long, 40_000_000_000);
    let (s, l) = (encode_histogram(&short), encode_histogram(&long));
    for parts in [[("a", s.as_str()), ("b", l.as_str())], [("b", l.as_str()), ("a", s.as_str())]] {
        let sum = add_all("delay", parts).unwrap();
        assert_eq!((sum.len(), sum.min(), sum.max()), (2, short.min(), long.max()));
    }
}

/// Two ping generators: the optional views a part carries are added like the latency,
/// and a combined view is made once there are several responders (or a part had one).
#[test]
fn ping_merges_optional_views_and_combines_several_responders() {
    let gen1 = seed("report-ping-full.json");
    let mut gen2 = gen1.clone();
    gen2.meta.started_at = "2026-11-22T00:00:00.5Z".into();
    let ping = |r: &Report| match &r.results {
        Results::Ping(p) => p.clone(),
        _ => panic!("ping"),
    };
    let merged =
        |b: &Report| ping(&merge(&[Input { name: "a", report: &gen1 }, Input { name: "b", report: b }]).unwrap());
    let one = ping(&gen1);
    let one_r = &one.responders[0];
    let count = |v: &Option<crate::report::LatencyView>| v.as_ref().map(|v| v.summary.count);
    assert!(one_r.uncorrected.is_some() && one.combined.is_none(), "the seed has an uncorrected view, no combined");

    // one responder in both: its views added, no combined view
    let same = merged(&gen2);
    assert_eq!(same.responders.len(), 1);
    assert_eq!(count(&same.responders[0].uncorrected), count(&one_r.uncorrected).map(|c| 2 * c));
    assert_eq!(same.combined, None);

    // another responder in the second: two rows, combined over both
    let mut other = gen2.clone();
    let Results::Ping(p) = &mut other.results else { panic!("ping") };
    p.responders[0].addr = "127.0.0.1:7001".into();
    let two = merged(&other);
    assert_eq!(two.responders.len(), 2);
    assert_eq!(count(&two.combined), Some(2 * one_r.latency.summary.count));

    // one responder, but a part that had a combined view: kept
    let mut with_combined = gen2.clone();
    let Results::Ping(p) = &mut with_combined.results else { panic!("ping") };
    p.combined = Some(p.responders[0].latency.clone());
    assert_eq!(count(&merged(&with_combined).combined), Some(2 * one_r.latency.summary.count));
}

/// The bounds are inclusive: windows that touch ran together, starts exactly 1 s apart are
/// lined up; and of parts tied at a start or an end, messages name the first given.
#[test]
fn run_windows_at_their_bounds_and_ties() {
    let at = |rs: &mut [Report], starts: [&str; 3]| {
        for (r, s) in rs.iter_mut().zip(starts) {
            r.meta.started_at = format!("2026-11-22T00:00:{s}Z");
        }
    };
    let go = |rs: &[Report]| merge_with(&named(rs, &["a", "b", "c"]), Options::default()).map_err(|e| e.to_string());
    let mut rs = three(10);
    // c starts the instant a and b end
    at(&mut rs, ["00", "00", "10"]);
    let m = go(&rs).unwrap();
    assert!(m.warnings[0].starts_with("warning: c started 10.000 s after a "), "{:?}", m.warnings);
    // b exactly 1 s after a and c
    at(&mut rs, ["00", "01", "00"]);
    assert!(go(&rs).unwrap().warnings.is_empty());
    // a and b end together, 2.5 s before c starts: a is named
    at(&mut rs, ["00", "00", "12.5"]);
    assert!(go(&rs).is_err_and(|e| e.starts_with("a ended 2.500 s before c started")));
    // b and c start together, 2.5 s after a ends: b is named
    at(&mut rs, ["00", "12.5", "12.5"]);
    assert!(go(&rs).is_err_and(|e| e.starts_with("a ended 2.500 s before b started")));
    // a and b start together, c 1.5 s later: the warning names a
    at(&mut rs, ["00", "00", "01.5"]);
    assert!(go(&rs).unwrap().warnings[0].starts_with("warning: c started 1.500 s after a "));
}
