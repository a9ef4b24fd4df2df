//! `wirebench suite` end to end, scaled down: every step writes a valid report.

use crate::support::{assert_valid_report, read_json, wirebench};

#[test]
fn suite_writes_a_valid_report_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("wirebench-report");
    let r = wirebench(&["suite", "--out", out.to_str().unwrap(), "--scale", "0.05"]);
    assert_eq!(r.code, 0, "{r:?}");
    for step in [
        "ping-udp",
        "ping-udp-full",
        "ping-tcp",
        "ping-udp-open-10k",
        "stream-udp-1468",
        "stream-udp-64",
        "stream-tcp",
        "stream-loss-free-64",
        "load-ws-200",
    ] {
        let path = out.join(format!("{step}.json"));
        let v = read_json(&path);
        assert_valid_report(&v);
        assert_eq!(v["outcome"], "completed", "{step}");
        assert!(r.out.contains(step), "the table names {step}: {}", r.out);
    }
    assert!(r.out.contains("p99.99"));
    // The TCP row's sent column is a write rate, and the table says so.
    assert!(r.out.contains("stream-tcp: sent is what the sender wrote into its socket"), "{}", r.out);
    // one HTML page of every step, and where it is
    let html = out.join("index.html");
    assert!(r.out.contains(&format!("report: {}", html.display())), "{}", r.out);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<section class=\"run\"").count(),
        11,
        "4 pings, the ping through the proxy, the proxy, 4 streams, the load step"
    );
    assert!(page.contains("<h2>proxy</h2>") && page.contains("added delay by percentile"));
    assert!(page.contains("<h2>load") && page.contains(": delay by percentile"), "the load run has its section");
}
