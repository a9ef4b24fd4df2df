//! Two mesh agents in namespaces scraped by a real Prometheus (the Debian package) with
//! native histograms on, so that it asks for protobuf: the sum of the agents' per-peer UDP
//! native histograms holds, bucket by bucket, the round trips of their merged HdrHistograms
//! (read from the agents' `/v1/matrix` for the same windows), and the fleet p99 query of
//! docs/modes/mesh.md lies in the native bucket of the merged HdrHistogram's p99.

#![cfg(feature = "netns-tests")]

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use wirebench::mesh::metrics::WINDOW_RTT;
use wirebench_core::mesh::api::{MatrixReport, Proto};
use wirebench_core::report::decode_histogram;

use crate::lab::{Lab, sh};
use crate::mesh::{get, try_get, wait_for};

const NET: &str = "10.77.62";
const PROM: &str = "10.77.62.100:9090";
/// Native histogram schema the agents export: buckets `2^(1/8)` wide.
const SCHEMA_BASE: f64 = 1.090_507_732_665_257_7;
/// The fleet p99 query docs/modes/mesh.md gives, exactly as printed there.
const FLEET_P99_UDP_NATIVE: &str =
    "histogram_quantile(0.99, sum(wirebench_mesh_peer_window_rtt_seconds{proto=\"udp\"}))";

/// An instant query evaluated at `time` (Unix seconds): Prometheus's JSON answer.
fn query_at(q: &str, time: f64) -> serde_json::Value {
    let enc: String = q
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let (status, body) = get(PROM.parse().unwrap(), &format!("/api/v1/query?query={enc}&time={time:.3}"), None);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {v}");
    v
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a number as a string: {v}"))
}

/// A count as Prometheus prints it (a whole number in a string).
fn count(v: &serde_json::Value) -> u64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a count as a string: {v}"))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Every UDP cell's HdrHistogram of the agents' latest windows, merged; with the windows.
fn merged(agents: &[SocketAddr]) -> (Histogram<u64>, Vec<Option<u64>>) {
    let mut all: Option<Histogram<u64>> = None;
    let mut windows = Vec::new();
    for a in agents {
        let (status, body) = get(*a, "/v1/matrix", None);
        assert_eq!(status, 200, "{body}");
        let m: MatrixReport = serde_json::from_str(&body).unwrap();
        windows.push(m.window.map(|w| w.index));
        for c in m.cells.iter().filter(|c| c.proto == Proto::Udp) {
            let Some(h) = c.histogram.as_deref() else { continue };
            let h = decode_histogram(h).unwrap();
            // Auto-resizing, at the cells' precision: the same buckets, any range.
            all.get_or_insert_with(|| Histogram::new(h.sigfig()).unwrap()).add(&h).unwrap();
        }
    }
    (all.expect("round trips in the windows"), windows)
}

#[test]
fn prometheus_quantile_of_summed_native_histograms_is_the_merged_hdrhistograms() {
    let _alone = crate::lab::heavy();
    let mut lab = Lab::new("nhist");
    let hosts = lab.bridged_hosts(2, NET);
    let sw = lab.name("sw");
    sh(&["ip", "-n", &sw, "addr", "add", &format!("{NET}.100/24"), "dev", "br0"]);
    lab.attach_root(&sw, &format!("{NET}.254/24"));
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).to_str().unwrap().to_owned();
    std::fs::write(path("peers"), format!("{NET}.1:7878 name=a1\n{NET}.2:7878 name=a2\n")).unwrap();
    for (i, h) in hosts.iter().enumerate() {
        let ip = format!("{NET}.{}", i + 1);
        let (listen, http, name) = (format!("{ip}:7878"), format!("{ip}:9878"), format!("a{}", i + 1));
        // Windows of 5 s against scrapes every second: most scrapes find the window the
        // agents still serve.
        let args = ["mesh", "agent", "--listen", &listen, "--http", &http, "--name", &name, "--peers", &path("peers")];
        let mut args = args.to_vec();
        args.extend_from_slice(&["--window", "5s", "--timeout", "1s", "--rate", "50/s"]);
        lab.serve(h, &args);
    }
    let agents: Vec<SocketAddr> = (1..=2).map(|i| format!("{NET}.{i}:9878").parse().unwrap()).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: wirebench-native\n    static_configs:\n      - targets: [\"{NET}.1:9878\", \"{NET}.2:9878\"]\n"
    );
    std::fs::write(path("prometheus.yml"), config).unwrap();
    lab.spawn(
        &sw,
        "prometheus",
        &[
            &format!("--config.file={}", path("prometheus.yml")),
            &format!("--storage.tsdb.path={}", path("data")),
            &format!("--web.listen-address={PROM}"),
            "--enable-feature=native-histograms",
        ],
    );
    wait_for(Duration::from_secs(60), "Prometheus ready", || {
        (try_get(PROM.parse().unwrap(), "/-/ready") == Some(200)).then_some(())
    });
    // Both agents scraped (protobuf accepted), each with a histogram per transport; where
    // native buckets are, Prometheus keeps those and not the classic ones (as the docs say).
    wait_for(Duration::from_secs(60), "four native histograms in Prometheus", || {
        let t = unix_now();
        let up = query_at("sum(up{job=\"wirebench-native\"})", t);
        let n = query_at(&format!("count({WINDOW_RTT})"), t);
        let up = up["data"]["result"][0]["value"][1].as_str() == Some("2");
        (up && n["data"]["result"][0]["value"][1].as_str() == Some("4")).then_some(())
    });
    let classic = query_at(&format!("count({WINDOW_RTT}_bucket)"), unix_now());
    assert_eq!(classic["data"]["result"], serde_json::json!([]), "{classic}");

    // Prometheus's sum and the agents' windows are of the same probes when count and sum
    // agree: poll for such a moment. Queries are evaluated a second and a half back, so the
    // scrapes they see were stored before they ran and both see the same ones.
    let sum_q = format!("sum({WINDOW_RTT}{{proto=\"udp\"}})");
    let end = Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    let (hdr, buckets, promql) = loop {
        assert!(Instant::now() < end, "Prometheus's sum never matched the agents' windows; last: {last}");
        let t = unix_now() - 1.5;
        let (before, w1) = merged(&agents);
        let sum = query_at(&sum_q, t);
        let q = query_at(FLEET_P99_UDP_NATIVE, t);
        let (_, w2) = merged(&agents);
        let h = &sum["data"]["result"][0]["histogram"][1];
        last = format!("{sum} at windows {w1:?} / {w2:?}, agents count {}", before.len());
        if w1 != w2 || h.is_null() {
            std::thread::park_timeout(Duration::from_millis(200));
            continue;
        }
        let hdr_sum = before.mean() * before.len() as f64 / 1e9;
        if count(&h["count"]) == before.len() && (num(&h["sum"]) - hdr_sum).abs() <= 1e-9 * hdr_sum {
            break (before, h["buckets"].as_array().unwrap().clone(), num(&q["data"]["result"][0]["value"][1]));
        }
        std::thread::park_timeout(Duration::from_millis(200));
    };

    // Every bucket of the sum holds exactly the merged round trips within its bounds.
    let in_bounds = |lo: f64, hi: f64| {
        hdr.iter_recorded()
            .filter(|v| {
                let s = v.value_iterated_to() as f64 / 1e9;
                lo < s && s <= hi
            })
            .map(|v| v.count_at_value())
            .sum::<u64>()
    };
    let mut total = 0;
    for b in &buckets {
        let (lo, hi, n) = (num(&b[1]), num(&b[2]), count(&b[3]));
        assert!((hi / lo - SCHEMA_BASE).abs() < 1e-9, "a schema 3 bucket: {b}");
        assert_eq!(n, in_bounds(lo, hi), "bucket {b}");
        total += n;
    }
    assert_eq!(total, hdr.len(), "every round trip in a bucket");

    // The quantile: Prometheus interpolates inside the native bucket that holds the merged
    // HdrHistogram's p99, so the two differ by less than one bucket's width.
    let p99 = hdr.value_at_quantile(0.99) as f64 / 1e9;
    let index = (p99.log2() * 8.0).ceil();
    let (lo, hi) = (((index - 1.0) / 8.0).exp2(), (index / 8.0).exp2());
    eprintln!(
        "fleet UDP p99 over {} round trips in {} buckets: Prometheus {promql:.9} s, merged HdrHistogram {p99:.9} s, bucket ({lo:.9}, {hi:.9}]",
        hdr.len(),
        buckets.len()
    );
    assert!(lo * (1.0 - 1e-12) <= promql && promql <= hi * (1.0 + 1e-12), "{promql} outside ({lo}, {hi}]");
    assert!((promql / p99).max(p99 / promql) <= SCHEMA_BASE, "{promql} vs {p99}");
}
