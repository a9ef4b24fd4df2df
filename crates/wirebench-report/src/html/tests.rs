//! The page's skeleton: sections, charts with data, nothing fetched.

use super::*;
use crate::charts::DATA_LINE_MARK;
use crate::fixtures;

fn page(runs: &[Run<'_>], compare: bool) -> String {
    let mut out = Vec::new();
    write(&Page { title: "wirebench <report>", runs, compare }, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The SVG of each `<figure class="chart">`, in order.
fn charts(html: &str) -> Vec<&str> {
    html.split("<figure class=\"chart\">").skip(1).map(|f| &f[..f.find("</svg>").unwrap()]).collect()
}

#[test]
fn skeleton() {
    let (p, s) = (fixtures::ping(&[10_000]), fixtures::stream(1000, 900));
    let runs = [Run { name: "rtt", report: &p }, Run { name: "udp", report: &s }];
    let html = page(&runs, false);
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.trim_end().ends_with("</html>"));
    assert!(html.contains("<title>wirebench &lt;report&gt;</title>"), "the title is escaped");
    assert_eq!(html.matches("<section class=\"run\"").count(), 2);
    assert!(html.contains("id=\"overview\"") && !html.contains("id=\"compare\""));
    assert_eq!(html.matches("<h2>Environment</h2>").count(), 1, "the shared environment once");
    assert_eq!(html.matches("<td>kernel</td><td>6.18</td>").count(), 1, "not repeated under each run");
    assert!(html.contains("0.1.0 (a071b60d5d4e)"), "version and commit");
    // overview + ping section; stream: throughput, loss, search, sweep
    let c = charts(&html);
    assert_eq!(c.len(), 6, "{html}");
    assert!(html.contains("<h3>Size sweep</h3>") && html.contains("<td>1024</td>"));
    for svg in &c {
        assert!(svg.contains(DATA_LINE_MARK) || svg.contains("<circle"), "every chart has data: {svg}");
    }
}

#[test]
fn self_contained() {
    let p = fixtures::ping(&[10_000]);
    let html = page(&[Run { name: "rtt", report: &p }], false);
    for banned in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(banned), "{banned}");
    }
    // the only URL is the SVG namespace, which is never fetched
    assert_eq!(html.matches("http").count(), html.matches("http://www.w3.org/2000/svg").count());
}

#[test]
fn two_responders_give_two_lines() {
    let p = fixtures::ping(&[10_000, 50_000]);
    let html = page(&[Run { name: "mc", report: &p }], false);
    let c = charts(&html);
    assert_eq!(c[0].matches(DATA_LINE_MARK).count(), 2, "overview: one line per responder");
    assert!(c[0].contains("mc 10.0.0.1:7878") && c[0].contains("mc 10.0.0.2:7878"));
    assert_eq!(c[1].matches(DATA_LINE_MARK).count(), 2, "the run's own chart too");
}

#[test]
fn comparison_section_with_environment_warning() {
    let a = fixtures::ping(&[10_000]);
    let mut b = fixtures::ping(&[20_000]);
    b.meta.host.kernel = "6.1".into();
    let html = page(&[Run { name: "a", report: &a }, Run { name: "b", report: &b }], true);
    assert!(html.contains("id=\"compare\""));
    assert!(html.contains("<p class=\"warn\">warning: environments differ"));
    assert!(html.contains("kernel 6.18 vs 6.1"));
    assert_eq!(charts(&html)[0].matches(DATA_LINE_MARK).count(), 2, "one line per run");
}

#[test]
fn the_kernel_split_is_drawn_and_tabled_beside_the_round_trip() {
    let mut p = fixtures::ping(&[50_000]);
    let Results::Ping(ping) = &mut p.results else { unreachable!() };
    let mut stack = fixtures::view(2_000, 100);
    stack.measures = wirebench_core::report::Measure::StackRtt;
    let mut hosts = fixtures::view(48_000, 100);
    hosts.measures = wirebench_core::report::Measure::HostsShare;
    ping.responders[0].kernel = Some(fixtures::kernel(Some(stack), Some(hosts)));
    let html = page(&[Run { name: "k", report: &p }], false);
    let c = charts(&html);
    assert_eq!(c[1].matches(DATA_LINE_MARK).count(), 3, "round trip, stack to stack, the hosts' share");
    assert!(c[1].contains("stack to stack (kernel timestamps, both hosts"), "{}", c[1]);
    assert!(html.contains("<td>stack to stack (kernel timestamps, both hosts"), "{html}");
    assert!(
        html.contains("kernel timestamps (software TX, software RX, 100 of 100 replies): RTT p50"),
        "the text line too"
    );
}

#[test]
fn a_receiver_with_one_interval_gets_no_one_point_line() {
    // A search's last trial of 100 ms reported one interval: its throughput and loss charts
    // were single dots (the suite's stream-loss-free-64), which the page check refuses.
    let mut one = fixtures::stream(1000, 900);
    if let Results::Stream(s) = &mut one.results {
        s.receivers[0].intervals.truncate(1);
    }
    let html = page(&[Run { name: "search", report: &one }], false);
    assert!(!html.contains("<h3>Per interval</h3>"), "no interval charts");
    assert!(html.contains("One interval per receiver"), "{html}");
    assert_eq!(charts(&html).len(), 2, "the search and the sweep only");
    let two = fixtures::stream(1000, 900);
    let html = page(&[Run { name: "udp", report: &two }], false);
    assert!(html.contains("<h3>Per interval</h3>") && !html.contains("One interval per receiver"));
}

/// The relay's headline counts the live peers and, once any were, the retired ones (the
/// same numbers as the summary's rows and its "retired peers" line).
#[test]
fn a_relay_headline_counts_retired_peers() {
    let mut r = wirebench_core::report::RelayResults { groups: Vec::new(), ..fixtures::relay() };
    assert_eq!(super::relay_headline(&r), "0 groups, 0 peers: 0 datagrams forwarded, 0 re-emitted");
    r.retired.peers = 3;
    assert_eq!(super::relay_headline(&r), "0 groups, 0 peers (3 retired): 0 datagrams forwarded, 0 re-emitted");
}

/// Two runs on one host: the environment they share is one table; each run lists only what
/// differs (here the command line); long text wraps instead of running off the page; legends
/// are drawn at a readable size.
#[test]
fn the_environment_once_text_wraps_legends_readable() {
    let p = fixtures::ping(&[10_000]);
    let mut q = fixtures::ping(&[20_000]);
    q.meta.command_line = vec!["wirebench".into(), "ping".into(), "other:7878".into()];
    let html = page(&[Run { name: "a", report: &p }, Run { name: "b", report: &q }], false);
    assert_eq!(html.matches("<h2>Environment</h2>").count(), 1);
    assert_eq!(html.matches("<td>kernel</td>").count(), 1, "{html}");
    assert_eq!(html.matches("<h3>Environment of this run</h3>").count(), 2, "the command lines differ");
    assert_eq!(html.matches("<td>command line</td>").count(), 2);
    assert!(html.contains("white-space:pre-wrap") && html.contains("overflow-wrap:anywhere"), "pre wraps");
    assert!(!html.contains("overflow-x:auto"));
    // Every text of every chart (legends, axis labels, captions) at 13 px or more.
    for svg in charts(&html) {
        for size in svg.split("font-size=\"").skip(1).map(|t| t[..t.find('"').unwrap()].parse::<f64>().unwrap()) {
            assert!(size >= 13.0, "text at {size} px");
        }
    }
}

/// One run: its environment is the page's one table, and the run lists nothing again.
#[test]
fn one_run_has_one_environment_table() {
    let p = fixtures::ping(&[10_000]);
    let html = page(&[Run { name: "a", report: &p }], false);
    assert_eq!(html.matches("<table class=\"env\">").count(), 1);
    assert!(!html.contains("Environment of this run"));
}

/// A stream receiver's lines in the text (its loss split per interval, its wake-up delay) are
/// on the page word for word, and a trial failed by its queue is in the search's table.
#[test]
fn a_streams_receiver_and_trial_lines_are_on_the_page() {
    let mut r = fixtures::stream(1000, 936);
    let Results::Stream(s) = &mut r.results else { unreachable!() };
    s.sweep.clear();
    let search = s.search.as_mut().unwrap();
    search.trials[0] =
        wirebench_core::report::TrialRow { loss: 0.0, queue: true, delay_rise_ns: Some(5_120_000), ..search.trials[0] };
    let x = &mut s.receivers[0];
    let mut k = wirebench_core::snmp::Snmp::default();
    k.0.entry("Udp".into()).or_default().insert("RcvbufErrors".into(), 1);
    x.kernel = Some(k);
    x.attribute(None, &[]);
    x.wake = Some(wirebench_core::stream::wake::WakeDelay {
        available: true,
        stamped: 1000,
        p50_ns: 8_190,
        p99_ns: 61_400,
        max_ns: 2_000_000,
        ..Default::default()
    });
    let mut lines = crate::stream_loss::interval_lines(x);
    assert!(!lines.is_empty());
    lines.push(crate::stream_wake::line(x).unwrap());
    let html = page(&[Run { name: "udp", report: &r }], false);
    for l in &lines {
        assert!(html.contains(&escape(l)), "{l}");
    }
    assert!(html.contains("+5.12 ms") && html.contains("FAIL (queue)"), "the table");
}
