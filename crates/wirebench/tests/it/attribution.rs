//! Attribution: kernel timestamps split a round trip (loopback, and a veth pair between
//! namespaces), the run goes on with a note where a timestamp kind is missing, and the
//! kernel counters account for a ping's losses.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use wirebench::ping::engine::{self, EngineConfig};
use wirebench_core::report::{KernelResult, Report, ResponderResult, Results};
use wirebench_core::schedule::{Pacing, Stop};
use wirebench_net::clock::MonoClock;
use wirebench_net::io::{ProbeIo, Received, Stamp, Support};
use wirebench_net::udp::{UdpProbeIo, Wait};

use crate::support::{assert_valid_report, read_json, serve, wirebench};

fn report(path: &std::path::Path) -> Report {
    let v = read_json(path);
    assert_valid_report(&v);
    serde_json::from_value(v).unwrap()
}

fn responder(r: &Report) -> &ResponderResult {
    let Results::Ping(p) = &r.results else { panic!("a ping report") };
    &p.responders[0]
}

/// A split that holds together: every reply stamped both ways and split, no kernel time on
/// the wrong side of the application's, and stack to stack inside the round trip.
fn assert_split(k: &KernelResult, r: &ResponderResult, measures: &str) {
    assert_eq!((k.tx.as_str(), k.rx.as_str()), ("software", "software"));
    assert_eq!(k.replies, r.received);
    assert_eq!((k.tx_stamps, k.rx_stamps), (k.replies, k.replies), "every probe and reply stamped");
    assert_eq!(k.out_of_order, 0, "no RX stamp after the application's receive, no TX stamp before its send");
    let stack = k.stack.as_ref().expect("a stack-to-stack view");
    let hosts = k.hosts.as_ref().expect("the hosts' share");
    assert_eq!(stack.measures.as_str(), measures);
    assert_eq!((stack.summary.count, hosts.summary.count), (k.replies, k.replies));
    let p50 = |v: &wirebench_core::report::LatencyView| v.summary.at(50.0).unwrap();
    assert!(p50(stack) < p50(&r.latency), "stack to stack {} below the round trip {}", p50(stack), p50(&r.latency));
    assert!(stack.summary.max_ns <= r.latency.summary.max_ns);
    // Per reply, the hosts' share is the round trip minus stack to stack, over the same
    // replies: the means add up (within the histograms' 3 significant digits).
    let sum = stack.summary.mean_ns + hosts.summary.mean_ns;
    let rtt = r.latency.summary.mean_ns;
    assert!(
        (sum - rtt).abs() <= rtt * 0.002 + 20.0,
        "stack {} + hosts {} != round trip {rtt}",
        stack.summary.mean_ns,
        hosts.summary.mean_ns
    );
}

#[test]
fn loopback_ping_splits_the_round_trip_by_kernel_timestamps() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    for (size, measures) in [("64", "stack_rtt"), ("32", "pinger_stack_rtt")] {
        let json = dir.path().join(format!("{size}.json"));
        let run = wirebench(&["ping", "-v", &target, "-n", "2000", "--size", size, "--json", json.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run:?}");
        let rep = report(&json);
        let r = responder(&rep);
        assert_split(r.kernel.as_ref().expect("kernel timestamps on loopback"), r, measures);
        assert!(
            run.out.contains("kernel timestamps (software TX, software RX, 2000 of 2000 replies): RTT p50"),
            "{}",
            run.out
        );
        let a = rep.attribution.as_ref().unwrap();
        assert_eq!(a.counters.as_ref().unwrap().scope, "host-wide");
        assert_eq!(a.loss.unwrap().missing, 0);
    }
    // serve marked its t2 as its kernel's time: the full form's split takes serve's
    // wake-up out, so it is the smaller
    let stack = |size: &str| {
        let r = report(&dir.path().join(format!("{size}.json")));
        responder(&r).kernel.as_ref().unwrap().stack.as_ref().unwrap().summary.clone()
    };
    assert!(stack("64").at(50.0) < stack("32").at(50.0), "{:?} vs {:?}", stack("64"), stack("32"));
    let off = dir.path().join("off.json");
    let run = wirebench(&["ping", &target, "-n", "100", "--no-timestamps", "--json", off.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(responder(&report(&off)).kernel.is_none());
    assert!(!run.out.contains("kernel timestamps"), "{}", run.out);
    // busy-polling kept them (`--timestamps`): the same split, read without blocking (RX
    // stamps with each non-blocking recvmsg, TX stamps from the error queue between polls)
    let spin = dir.path().join("spin.json");
    let args =
        ["ping", &target, "-n", "2000", "--size", "64", "--spin", "--timestamps", "--json", spin.to_str().unwrap()];
    let run = wirebench(&args);
    assert_eq!(run.code, 0, "{run:?}");
    let rep = report(&spin);
    let r = responder(&rep);
    assert_split(r.kernel.as_ref().expect("kernel timestamps with --spin --timestamps"), r, "stack_rtt");
    assert!(rep.attribution.as_ref().unwrap().hiccup.is_none(), "busy-poll: no stall meter unless kept");
    // busy-polling by default: neither, and the report says so, in the text and the JSON
    let run = wirebench(&["ping", &target, "-n", "200", "--spin", "--json", spin.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let rep = report(&spin);
    assert!(responder(&rep).kernel.is_none());
    let a = rep.attribution.as_ref().unwrap();
    assert!(a.hiccup.is_none());
    for words in ["busy-poll: kernel timestamps off", "busy-poll: the stall meter off"] {
        assert!(a.notes.iter().any(|n| n.starts_with(words)), "{:?}", a.notes);
        assert!(run.out.contains(&format!("note: {words}")), "{}", run.out);
    }
}

#[test]
fn tcp_probes_run_with_a_note_that_they_have_no_kernel_timestamps() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tcp.json");
    let target = srv.local_addr().to_string();
    let run = wirebench(&["ping", &target, "--proto", "tcp", "-n", "200", "--json", json.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let rep = report(&json);
    assert!(responder(&rep).kernel.is_none());
    let notes = &rep.attribution.as_ref().unwrap().notes;
    assert!(notes.iter().any(|n| n.contains("TCP probes have none")), "{notes:?}");
    assert!(run.out.contains("note: kernel timestamps: TCP probes have none"), "{}", run.out);
}

#[test]
fn a_tcp_ping_reports_the_kernels_tcp_info_and_a_udp_ping_does_not() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let target = srv.local_addr().to_string();
    let json = dir.path().join("tcp.json");
    let run = wirebench(&["ping", "-v", &target, "--proto", "tcp", "-n", "500", "--json", json.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let rep = report(&json);
    let t = rep.attribution.as_ref().unwrap().tcp_info.expect("TCP_INFO of the probe connection");
    assert_eq!((t.retransmits, t.lost), (0, 0), "nothing is lost on loopback: {t:?}");
    assert!(t.srtt_us > 0, "the kernel has an RTT estimate after 500 round trips: {t:?}");
    // the kernel's estimate and the probes' own round trips measure the same path: the
    // kernel's smoothed RTT is no higher than the slowest probe (plus one delayed ACK at most)
    let max_us = responder(&rep).latency.summary.max_ns / 1000;
    assert!(u64::from(t.srtt_us) <= max_us + 40_000, "srtt {} us vs probe max {max_us} us", t.srtt_us);
    // the text line carries the JSON's integers
    let line = format!(
        "TCP_INFO (the probe connection at the end of the run): kernel srtt {} us (rttvar {} us), 0 retransmits, 0 lost, reordering {}",
        t.srtt_us, t.rttvar_us, t.reordering
    );
    assert!(run.out.contains(&line), "{line} not in {}", run.out);
    let udp = dir.path().join("udp.json");
    let run = wirebench(&["ping", "-v", &target, "-n", "100", "--json", udp.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(report(&udp).attribution.as_ref().unwrap().tcp_info.is_none());
    assert!(read_json(&udp)["attribution"].get("tcp_info").is_none());
    assert!(!run.out.contains("TCP_INFO"), "{}", run.out);
}

/// A UDP transport whose TX timestamps never come (as on a device that gives none).
struct NoTx(UdpProbeIo);

impl ProbeIo for NoTx {
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.send(buf)
    }
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> std::io::Result<Option<Received>> {
        self.0.recv_until(buf, deadline_ns)
    }
    fn tx_stamp(&mut self, _seq: u64) -> Option<Stamp> {
        None
    }
    fn timestamps(&self) -> Support {
        Support { rx: true, tx: false }
    }
}

#[test]
fn without_tx_timestamps_the_run_goes_on_with_a_note() {
    let srv = serve();
    let mut udp = UdpProbeIo::unicast(srv.local_addr(), Wait::Block, Duration::from_secs(1)).unwrap();
    udp.enable_timestamps().unwrap();
    let mut io = NoTx(udp);
    let args: wirebench::ping::Args =
        wirebench::flags::parse_mode("ping", &[&srv.local_addr().to_string(), "-n", "300"]).unwrap();
    let cfg = wirebench::ping::Config::from_args(&args).unwrap();
    let ecfg = EngineConfig {
        size: 32,
        flags: 0,
        session: 7,
        pacing: Pacing::Closed,
        warmup: Stop::default(),
        stop: Stop { max_count: Some(300), deadline: None },
        timeout_ns: 1_000_000_000,
        multicast: false,
        expect_responders: None,
        wall_minus_mono: 0,
        silence_ns: 5_000_000_000,
        intervals: false,
        cpu_probe: wirebench_net::pin::current_cpu,
        stamp: None,
    };
    let out = engine::run(&mut io, &MonoClock::default(), &ecfg, &AtomicBool::new(false)).unwrap();
    let results = wirebench::ping::results::build(&cfg, &out);
    let r = &results.responders[0];
    let k = r.kernel.as_ref().expect("RX stamps still came");
    assert_eq!((k.tx.as_str(), k.rx.as_str(), k.tx_stamps, k.rx_stamps), ("none", "software", 0, r.received));
    assert!(k.stack.is_none() && k.hosts.is_none());
    assert!(wirebench_report::attribution::kernel_line(k, &r.latency).contains("no round trip could be split"));
    let snap = wirebench_net::counters::snapshot(&[]);
    let a = wirebench::ping::results::attribution(&out, 0, &snap, &snap, None);
    assert!(a.notes.iter().any(|n| n.contains("TX timestamps unavailable")), "{:?}", a.notes);
    // a counter file that could not be read (no IPv6, no /proc/net/softnet_stat in a
    // container): the split is still made from the rest, and a note names what is missing
    let mut gone = snap.clone();
    (gone.udp6, gone.softnet) = (None, None);
    let a = wirebench::ping::results::attribution(&out, 3, &gone, &snap, None);
    for what in ["/proc/net/snmp6 Udp6", "/proc/net/softnet_stat"] {
        assert!(
            a.notes.iter().any(|n| n.starts_with("counter unavailable: ") && n.contains(what)),
            "{what}: {:?}",
            a.notes
        );
    }
    assert_eq!(a.loss.unwrap().missing, 3);
    srv.stop();
}

#[cfg(feature = "netns-tests")]
#[test]
fn kernel_timestamps_split_the_round_trip_across_a_veth_pair() {
    use crate::lab::Lab;
    let mut lab = Lab::new("kts");
    let a = lab.ns("a");
    let b = lab.ns("b");
    Lab::link(&a, "eth0", "10.77.71.1/24", &b, "eth0", Some("10.77.71.2/24"));
    lab.serve(&b, &["serve", "--listen", "10.77.71.2:7878"]);
    let dir = tempfile::tempdir().unwrap();
    for (size, measures) in [("64", "stack_rtt"), ("32", "pinger_stack_rtt")] {
        let json = dir.path().join(format!("{size}.json"));
        let out = Lab::run(
            &a,
            &["ping", "-v", "10.77.71.2:7878", "-n", "2000", "--size", size, "--json", json.to_str().unwrap()],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rep = report(&json);
        let r = responder(&rep);
        assert_split(r.kernel.as_ref().expect("veth gives software timestamps"), r, measures);
        assert!(text.contains("kernel timestamps (software TX, software RX"), "{text}");
        assert!(text.contains("stack to stack p50"), "{text}");
        // the interface toward the target is the one whose counters were read
        let c = rep.attribution.as_ref().unwrap().counters.as_ref().unwrap();
        assert_eq!(c.interfaces.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(), ["eth0"]);
        // veth has no hardware stamping: detected and said
        let notes = &rep.attribution.as_ref().unwrap().notes;
        assert!(
            notes.iter().any(|n| n == "hardware timestamps: eth0 has none (software timestamps used)"),
            "{notes:?}"
        );
    }
}

/// Packets counted by the rule `rule` (1-based) of `chain` in `ns`'s filter table.
#[cfg(feature = "netns-tests")]
fn iptables_packets(ns: &str, chain: &str, rule: usize) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-L", chain, "-v", "-x", "-n", "--line-numbers"])
        .output()
        .expect("iptables is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(&rule.to_string())).expect("the rule");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[cfg(feature = "netns-tests")]
#[test]
fn probes_dropped_at_the_far_end_are_attributed_elsewhere_and_match_its_drop_counter() {
    use crate::lab::{Lab, sh};
    let mut lab = Lab::new("kloss");
    let a = lab.ns("a");
    let b = lab.ns("b");
    Lab::link(&a, "eth0", "10.77.72.1/24", &b, "eth0", Some("10.77.72.2/24"));
    // The far end drops every 10th probe before any socket sees it: nothing on the
    // pinger's host counts it, so all of the loss is "elsewhere". Rule 1 counts every
    // datagram to serve's port (the measured probes and the few before them), rule 2 drops.
    let ipt = ["ip", "netns", "exec", &b, "iptables", "-A", "INPUT", "-p", "udp", "--dport", "7878"];
    sh(&ipt);
    let nth = ["-m", "statistic", "--mode", "nth", "--every", "10", "--packet", "0", "-j", "DROP"];
    sh(&[&ipt[..], &nth[..]].concat());
    lab.serve(&b, &["serve", "--listen", "10.77.72.2:7878"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("loss.json");
    let args = ["ping", "-v", "10.77.72.2:7878", "-n", "1000", "--warmup", "0", "--rate", "2000", "--timeout", "200ms"];
    let out = Lab::run(&a, &[&args[..], &["--json", json.to_str().unwrap()]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (arrived, dropped) = (iptables_packets(&b, "INPUT", 1), iptables_packets(&b, "INPUT", 2));
    let rep = report(&json);
    let r = responder(&rep);
    // The pinger's loss is what the far end dropped, within the datagrams that were not
    // measured probes (the responder's discovery).
    let unmeasured = arrived.checked_sub(1000).expect("every probe arrived at the far end's host");
    assert!(unmeasured <= 5, "{arrived} datagrams for 1000 probes");
    assert!(
        r.lost <= dropped && r.lost + unmeasured >= dropped,
        "lost {} dropped {dropped} ({unmeasured} unmeasured)",
        r.lost
    );
    assert!(r.lost >= 99, "every 10th of 1000 probes: {}", r.lost);
    let split = rep.attribution.as_ref().unwrap().loss.unwrap();
    assert_eq!((split.missing, split.elsewhere), (r.lost, r.lost), "{split:?}");
    assert_eq!((split.send_buffer, split.socket, split.nic), (0, 0, 0), "{split:?}");
    let line = format!(
        "of {0} probes lost: 0 never left this host (dropped after the send: SndbufErrors +0, egress qdisc drops +0: \
         the larger, they overlap), 0 refused by a socket on this host (InErrors, RcvbufErrors among them), 0 \
         dropped by the NIC or softnet here, {0} elsewhere on the path",
        r.lost
    );
    assert!(text.contains(&line), "{text}");
}

/// A tbf with a one-packet burst on the pinger's own veth and an open-loop ping far faster
/// than it passes: the pinger's qdisc drops most probes before the wire. The report carries
/// the qdisc's drop count (the delta `tc -s qdisc` shows around the run), names it in the
/// counters line and the split, and puts the lost probes on this host, none elsewhere.
#[cfg(feature = "netns-tests")]
#[test]
fn probes_the_pingers_own_qdisc_dropped_are_this_hosts_and_match_tc() {
    use crate::lab::{Lab, sh};
    let mut lab = Lab::new("pqd");
    let pinger = lab.ns("a");
    let far = lab.ns("b");
    Lab::link(&pinger, "eth0", "10.77.233.1/24", &far, "eth0", Some("10.77.233.2/24"));
    sh(&[
        "ip", "netns", "exec", &pinger, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit", "burst",
        "1600", "limit", "1600",
    ]);
    lab.serve(&far, &["serve", "--listen", "10.77.233.2:7933"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("qdisc.json");
    let q0 = crate::lab::qdisc_counter(&pinger, "eth0", "dropped");
    let args =
        ["ping", "-v", "10.77.233.2:7933", "-n", "3000", "--warmup", "0", "--rate", "50k/s", "--timeout", "200ms"];
    let out = Lab::run(&pinger, &[&args[..], &["--no-hiccup", "--json", json.to_str().unwrap()]].concat());
    let dropped = crate::lab::qdisc_counter(&pinger, "eth0", "dropped") - q0;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved = read_json(&json);
    // the qdisc's count in the report is tc's, read around the run (tc's window is the
    // wider: an ARP or IPv6 neighbour packet leaving by the same qdisc may count in it)
    let report_q = saved["attribution"]["counters"]["qdisc_drops"].as_u64();
    assert!(
        report_q.is_some_and(|q| q <= dropped && dropped <= q + 4),
        "report {report_q:?}, tc {dropped}: {}",
        saved["attribution"]
    );
    let rep = report(&json);
    let r = responder(&rep);
    assert!(r.lost >= 2_000, "a 1 Mbit/s tbf passes few of 50k probes/s: lost {}", r.lost);
    assert!(report_q.unwrap_or(0) >= r.lost, "every lost probe was the qdisc's: lost {} dropped {report_q:?}", r.lost);
    let split = rep.attribution.as_ref().unwrap().loss.unwrap();
    assert_eq!((split.missing, split.send_buffer, split.elsewhere), (r.lost, r.lost, 0), "{split:?}");
    let counted = report_q.unwrap();
    assert!(text.contains(&format!("egress qdisc drops +{counted}")), "{text}");
    assert!(
        text.contains(&format!(
            "of {} probes lost: {} never left this host (dropped after the send: SndbufErrors +",
            r.lost, r.lost
        )) && text.contains(&format!(
            "egress qdisc drops +{}: the larger, they overlap)",
            wirebench_report::words::grouped(counted)
        )),
        "{text}"
    );
}
