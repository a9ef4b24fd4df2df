//! A stream's missing datagrams attributed by the kernel counters, in namespaces (whose
//! `/proc/net/snmp` is their own, so the counters see only the test's traffic): a receiver
//! with a tiny receive buffer behind a flat-out sender loses to `RcvbufErrors`, and a
//! router's tbf drops are "elsewhere on the path" and match the qdisc's own drop counter,
//! and a tbf on the sender's own link drops on the sending host, by its drop counter.
//! Each datagram crosses alone (GSO off on the sender's link), so every counter counts
//! datagrams, not GSO batches; but for the sender's own tbf, whose gap is in GSO batches,
//! and a stream on one host's loopback, whose socket counts GRO runs.

use wirebench_core::counters::LossSplit;
use wirebench_core::report::{ReceiverResult, Report, Results, StreamResults};
use wirebench_core::snmp::Snmp;

use crate::lab::{Lab, qdisc_counter, sh};
use crate::support::{assert_valid_report, read_json};

fn stream_results(path: &std::path::Path) -> StreamResults {
    let v = read_json(path);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v).unwrap();
    let Results::Stream(s) = r.results else { panic!("a stream report") };
    s
}

/// `/proc/net/snmp` of namespace `ns`.
fn snmp_in(ns: &str) -> Snmp {
    let out = std::process::Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]).output().unwrap();
    Snmp::parse(&String::from_utf8_lossy(&out.stdout)).unwrap()
}

fn rose(before: &Snmp, after: &Snmp, table: &str, field: &str) -> u64 {
    u64::try_from(after.get(table, field).unwrap() - before.get(table, field).unwrap()).unwrap()
}

/// Each datagram alone on the wire: no GSO on the sender's link, no GRO on the receiver's.
fn one_by_one(snd: &str, rcv: &str) {
    sh(&["ip", "netns", "exec", snd, "ethtool", "-K", "eth0", "gso", "off", "tx-udp-segmentation", "off"]);
    sh(&["ip", "netns", "exec", rcv, "ethtool", "-K", "eth0", "gro", "off"]);
}

/// `wirebench` with `args` in `ns`, quiet, its JSON report checked against the schema: the
/// stream results and what it printed.
pub(crate) fn run(ns: &str, args: &[&str]) -> (StreamResults, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut all = args.to_vec();
    all.extend(["-v", "--json", json.to_str().unwrap()]);
    let out = Lab::run(ns, &all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (stream_results(&json), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn receiver(s: &StreamResults) -> &ReceiverResult {
    assert_eq!(s.receivers.len(), 1);
    &s.receivers[0]
}

#[test]
fn a_tiny_receive_buffer_is_blamed_on_rcvbuf_errors() {
    let mut lab = Lab::new("rbuf");
    let snd = lab.ns("snd");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.181.1/24", &rcv, "eth0", Some("10.77.181.2/24"));
    one_by_one(&snd, &rcv);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let before = snmp_in(&rcv);
    let (s, text) = run(&snd, &["stream", "10.77.181.2:7878", "--rcvbuf", "4k", "-n", "30000"]);
    let after = snmp_in(&rcv);
    let r = receiver(&s);
    let split = r.loss_split.expect("a loss split");
    let missing = r.sent - r.total.received;
    assert_eq!(r.sent, 30_000);
    assert!(missing > 3_000, "a 4 KB buffer behind a flat-out sender loses: {missing} missing");
    assert_eq!(split.missing, missing);
    // the namespace's own counter, read by the test around the run, is the report's
    let rcvbuf = rose(&before, &after, "Udp", "RcvbufErrors");
    assert_eq!(r.rcvbuf_errors(), Some(i64::try_from(rcvbuf).unwrap()), "{:?}", r.kernel);
    assert_eq!(split.socket, rcvbuf.min(missing));
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let off = missing.abs_diff(split.socket) as f64 / missing as f64;
    assert!(off < 0.01, "missing {missing}, RcvbufErrors {rcvbuf}: {split:?}");
    assert_eq!(split.send_buffer + split.socket + split.nic + split.elsewhere, missing);
    assert_eq!(s.sender.unwrap().sndbuf_errors, Some(split.send_buffer));
    assert!(
        text.contains(&format!(
            "of {} missing, {} dropped by the receiving host's socket buffers (Udp InErrors",
            wirebench_report::words::grouped(missing),
            wirebench_report::words::grouped(split.socket)
        )),
        "{text}"
    );
    assert!(text.contains("sysctl -w net.core.rmem_max="), "{text}");
}

/// A default flat-out stream on one host's loopback (a namespace's own, whose
/// `/proc/net/snmp` counts only this run) into a 64 KB receive buffer: GSO batches cross
/// loopback whole and the full buffer refuses them whole, one `RcvbufErrors` count each.
/// The split takes each count as the GRO runs the receiver read, so on a path that is one
/// host nothing is "elsewhere on the path" beyond what the split says it is unsure of; and
/// the namespace's own counters, read by the test around the run, agree: the missing
/// datagrams are `RcvbufErrors` runs of the sizes read, and `InDatagrams` counted the runs.
#[test]
fn a_loopback_streams_socket_drops_are_counted_in_datagrams() {
    let mut lab = Lab::new("lodg");
    let ns = lab.ns("h");
    lab.serve(&ns, &["serve", "--listen", "127.0.0.1:7878", "--open"]);
    let before = snmp_in(&ns);
    let (s, text) = run(&ns, &["stream", "127.0.0.1:7878", "--rcvbuf", "64k", "-d", "1s", "--no-hiccup"]);
    let after = snmp_in(&ns);
    let r = receiver(&s);
    let split = r.loss_split.expect("a loss split");
    let missing = r.sent - r.total.received;
    let rcvbuf = rose(&before, &after, "Udp", "RcvbufErrors");
    assert!(rcvbuf > 0 && missing > 0, "a 64 KB buffer behind a flat-out sender loses: {missing} missing");
    assert_eq!(r.rcvbuf_errors(), Some(i64::try_from(rcvbuf).unwrap()), "{:?}", r.kernel);
    let w = r.wake.expect("the receiver's reads");
    assert!(w.run_max > 1, "GSO batches crossed loopback whole: {w:?}");
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let off = w.runs.abs_diff(rose(&before, &after, "Udp", "InDatagrams")) as f64 / w.runs as f64;
    assert!(off < 0.01, "InDatagrams counts the runs read: {w:?}");
    // every missing datagram is in a refused run of a size the receiver read
    assert!(
        rcvbuf * w.run_min <= missing && missing <= rcvbuf * w.run_max,
        "{missing} missing, {rcvbuf} refused, {w:?}"
    );
    assert_eq!((split.missing, split.send_buffer, split.nic), (missing, 0, 0), "{split:?}");
    assert!(split.elsewhere <= split.uncertain, "nothing elsewhere on one host beyond the uncertainty: {split:?}");
    assert!(split.uncertain <= rcvbuf * (w.run_max - w.run_min), "{split:?} {w:?}");
    assert!(
        text.contains(&format!(
            "of {} missing, {} dropped by the receiving host's socket buffers (Udp InErrors",
            wirebench_report::words::grouped(missing),
            wirebench_report::words::grouped(split.socket)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} elsewhere on the path", wirebench_report::words::grouped(split.elsewhere))),
        "{text}"
    );
    let rows = r.intervals.iter().map(|x| x.loss_split.expect("every row has its split"));
    assert_eq!(
        rows.fold(wirebench_core::counters::LossSplit::default(), wirebench_core::counters::LossSplit::plus),
        split,
        "rows add up"
    );
}

/// A paced stream (2k/s of 200 bytes) into a 64 KB buffer (room for tens of milliseconds of
/// it, so a busy test machine's short stalls lose little) whose serve is stopped for 500 ms
/// (SIGSTOP) right after the first interval row: the datagrams the full buffer refused meanwhile are
/// missing in the second row, and that row's split puts them on `RcvbufErrors`; the rows'
/// splits add up to the run's, in the JSON and in the text.
#[test]
fn a_burst_into_a_tiny_buffer_is_that_intervals_rcvbuf_errors() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::io::{BufRead, BufReader};
    let mut lab = Lab::new("ibuf");
    let snd = lab.ns("snd");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.187.1/24", &rcv, "eth0", Some("10.77.187.2/24"));
    one_by_one(&snd, &rcv);
    let serve = lab.next_index();
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let pid = Pid::from_raw(i32::try_from(lab.pid(serve)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &snd, crate::lab::BIN, "stream", "10.77.187.2:7878", "--rcvbuf", "64k"])
        .args(["--size", "200", "--rate", "2k/s", "-d", "4s", "--no-hiccup", "-v", "--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no interval row: {text}");
        text.push_str(&line);
        if line.starts_with('[') && line.contains("s] 10.77.187.2:7878") {
            break;
        }
    }
    kill(pid, Signal::SIGSTOP).unwrap();
    // The stimulus: serve stays stopped this long (nothing here waits on it).
    std::thread::sleep(std::time::Duration::from_millis(500));
    kill(pid, Signal::SIGCONT).unwrap();
    std::io::Read::read_to_string(&mut out, &mut text).unwrap();
    assert!(child.wait().unwrap().success(), "{text}");
    let s = stream_results(&json);
    let r = receiver(&s);
    let split = r.loss_split.expect("a loss split");
    let missing = r.sent - r.total.received;
    assert!(missing > 300, "500 ms at 2k/s into a stopped receiver's 64 KB buffer: {missing} missing");
    let rows: Vec<_> = r.intervals.iter().map(|x| x.loss_split.expect("every row has its split")).collect();
    let sum = rows.iter().fold(wirebench_core::counters::LossSplit::default(), |a, &b| a.plus(b));
    assert_eq!(sum, split, "the rows add up to the run");
    // the burst: the second row, all of it the buffer's
    let burst = rows.iter().enumerate().max_by_key(|(_, x)| x.missing).unwrap();
    assert_eq!(burst.0, 1, "the row after the first: {rows:?}");
    assert!(burst.1.missing * 2 > missing, "{rows:?}");
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let off = burst.1.missing.abs_diff(burst.1.socket) as f64 / burst.1.missing as f64;
    assert!(off < 0.01, "{:?}", burst.1);
    assert_eq!(burst.1.send_buffer + burst.1.nic, 0, "{:?}", burst.1);
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let end_s = r.intervals[1].at_ns as f64 / 1e9;
    let want = format!(
        "interval to {end_s:.3} s: of {} missing, {} socket buffers",
        wirebench_report::words::grouped(burst.1.missing),
        wirebench_report::words::grouped(burst.1.socket)
    );
    assert!(text.contains(&want), "{want}\n{text}");
}

/// The router (`net.ipv4.ip_forward=1`) shapes toward the receiver with tbf; the sender
/// offers three times the rate. The receiving host drops nothing, so the loss is
/// "elsewhere on the path" and equals the qdisc's drops, give or take what else crossed
/// that qdisc: the client's control segments (the run's TCP OutSegs, bounded and read) and
/// a few neighbour and router messages of the link.
#[test]
fn a_routers_drops_are_elsewhere_on_the_path_and_match_its_qdisc() {
    let mut lab = Lab::new("rtbf");
    let snd = lab.ns("snd");
    let rtr = lab.ns("rtr");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.182.1/24", &rtr, "eth0", Some("10.77.182.254/24"));
    Lab::link(&rtr, "eth1", "10.77.183.254/24", &rcv, "eth0", Some("10.77.183.2/24"));
    sh(&["ip", "-n", &snd, "route", "add", "default", "via", "10.77.182.254"]);
    sh(&["ip", "-n", &rcv, "route", "add", "default", "via", "10.77.183.254"]);
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    one_by_one(&snd, &rcv);
    sh(&[
        "ip", "netns", "exec", &rtr, "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "20mbit", "burst",
        "32kb", "limit", "64kb",
    ]);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let (snd0, rcv0, q0) = (snmp_in(&snd), snmp_in(&rcv), qdisc_counter(&rtr, "eth1", "dropped"));
    let (s, text) = run(&snd, &["stream", "10.77.183.2:7878", "--rate", "60mbit", "-d", "2s"]);
    let (snd1, rcv1, q1) = (snmp_in(&snd), snmp_in(&rcv), qdisc_counter(&rtr, "eth1", "dropped"));
    let r = receiver(&s);
    let split = r.loss_split.expect("a loss split");
    let missing = r.sent - r.total.received;
    assert!(missing > 1_000, "three times the limit loses: {missing} missing of {}", r.sent);
    assert_eq!((split.missing, split.socket, split.nic), (missing, 0, 0), "{split:?}");
    assert_eq!(rose(&rcv0, &rcv1, "Udp", "RcvbufErrors"), 0);
    assert_eq!(split.elsewhere, missing - split.send_buffer);
    let dropped = q1 - q0;
    let control = rose(&snd0, &snd1, "Tcp", "OutSegs");
    // datagrams still queued when the receiver closed arrive to no port: missing, not dropped
    let late = rose(&rcv0, &rcv1, "Udp", "NoPorts");
    assert!(
        split.elsewhere <= dropped + late && dropped <= split.elsewhere + control + 8,
        "elsewhere {} vs the qdisc's {dropped} drops (control segments {control}, late {late})",
        split.elsewhere
    );
    assert!(
        text.contains(&format!("{} elsewhere on the path", wirebench_report::words::grouped(split.elsewhere))),
        "{text}"
    );
}

/// `listen` in `rcv` with a 4 KB buffer behind a flat-out `stream --no-control` from
/// `snd` (10.77.`net`.0/24): the report's loss split, the missing datagrams, the
/// namespace's own `RcvbufErrors` over the run and what listen printed.
fn listen_behind_a_small_buffer(lab: &mut Lab, net: u8, gro: bool) -> (LossSplit, u64, u64, String) {
    use std::io::{BufRead, BufReader};
    let snd = lab.ns("snd");
    let rcv = lab.ns("rcv");
    let (snd_ip, rcv_ip) = (format!("10.77.{net}.1/24"), format!("10.77.{net}.2/24"));
    Lab::link(&snd, "eth0", &snd_ip, &rcv, "eth0", Some(&rcv_ip));
    if !gro {
        one_by_one(&snd, &rcv);
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("l.json");
    let before = snmp_in(&rcv);
    let mut listen = std::process::Command::new("ip")
        .args(["netns", "exec", &rcv, crate::lab::BIN, "listen", "--listen", "0.0.0.0:7879", "--rcvbuf", "4k"])
        .args(["--duration", "4s", "--no-hiccup", "--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(listen.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("receiving on"), "{line}");
    let to = format!("10.77.{net}.2:7879");
    let sent = Lab::run(&snd, &["stream", &to, "--no-control", "-n", "30000", "-q", "--no-hiccup"]);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut out, &mut text).unwrap();
    assert!(listen.wait().unwrap().success());
    let after = snmp_in(&rcv);
    let v = read_json(&json);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v).unwrap();
    let a = r.attribution.expect("an attribution section");
    let rcvbuf = rose(&before, &after, "Udp", "RcvbufErrors");
    assert_eq!(a.counters.unwrap().udp.unwrap().rcvbuf_errors, rcvbuf);
    let Results::Stream(s) = &r.results else { panic!("a stream report") };
    let missing: u64 = s.receivers.iter().map(|x| x.total.expected - x.total.received).sum();
    (a.loss.expect("a loss split"), missing, rcvbuf, text)
}

/// One datagram per packet: the missing datagrams (the gaps listen saw) are all this host's
/// sockets', by the namespace's own `RcvbufErrors`; what the counter saw beyond them
/// (datagrams lost after the last one that arrived, which listen cannot see missing) is the
/// split's `excess`.
#[test]
fn listen_blames_its_own_small_buffer() {
    let mut lab = Lab::new("lrbuf");
    let (split, missing, rcvbuf, text) = listen_behind_a_small_buffer(&mut lab, 185, false);
    assert!(missing > 1_000, "{missing} missing");
    assert_eq!((split.missing, split.socket, split.nic, split.elsewhere), (missing, missing, 0, 0), "{split:?}");
    assert_eq!(split.excess, rcvbuf - missing);
    // listen does not run on the sender: it claims none of the sender's drops
    assert!(
        text.contains(&format!("of {missing} missing: the sender's own drops not seen (this host did not send")),
        "{text}"
    );
}

/// GSO batches crossing the veth whole: the socket counts a refused run of up to 64
/// datagrams once, and listen takes each count at the mean run it read, so the loss stays
/// this host's socket's instead of reading "elsewhere on the path" (a count per run put
/// some 600 of 20,000 missing on the socket).
#[test]
fn listen_counts_a_refused_gro_run_in_datagrams() {
    let mut lab = Lab::new("lrgro");
    let (split, missing, rcvbuf, _) = listen_behind_a_small_buffer(&mut lab, 186, true);
    assert!(missing > 1_000, "{missing} missing");
    assert!(rcvbuf * 4 < missing, "runs of several datagrams refused whole: {rcvbuf} counts, {missing} missing");
    assert_eq!(split.socket + split.nic + split.elsewhere, missing, "{split:?}");
    assert!(split.elsewhere <= split.uncertain, "what is left is within the runs' range: {split:?}");
    assert!(split.socket * 10 >= missing * 9, "{split:?}");
}

/// A tbf (small burst) on the sender's own veth and a multicast stream flat out into it:
/// the sender's qdisc drops what it cannot pass. Whole refused packets count in the
/// sender's `SndbufErrors` too, but GSO batches tbf splits and drops in part count only in
/// the qdisc, so before, most of the loss read "elsewhere on the path". Now the report
/// carries the qdisc's drops (the count `tc -s qdisc` prints, read by the test around the
/// run) and puts the loss on the sending host. GSO stays on: the gap is in GSO batches.
#[test]
fn the_senders_own_qdisc_drops_are_the_sending_hosts_and_match_tc() {
    let mut lab = Lab::new("sqd");
    let snd = lab.ns("snd");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.219.1/24", &rcv, "eth0", Some("10.77.219.2/24"));
    sh(&[
        "ip", "netns", "exec", &snd, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "20mbit", "burst",
        "16kb", "limit", "32kb",
    ]);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open", "--interface", "10.77.219.2"]);
    let (snd0, rcv0, q0) = (snmp_in(&snd), snmp_in(&rcv), qdisc_counter(&snd, "eth0", "dropped"));
    let (s, text) = run(
        &snd,
        &["stream", "10.77.219.2:7878", "--group", "239.255.79.1:5079", "--interface", "10.77.219.1", "-d", "1s"],
    );
    let (snd1, rcv1, q1) = (snmp_in(&snd), snmp_in(&rcv), qdisc_counter(&snd, "eth0", "dropped"));
    let r = receiver(&s);
    let split = r.loss_split.expect("a loss split");
    let missing = r.sent - r.total.received;
    let dropped = q1 - q0;
    let sndbuf = rose(&snd0, &snd1, "Udp", "SndbufErrors");
    assert!(missing > 10_000, "flat out into 20 Mbit/s loses: {missing} missing of {}", r.sent);
    assert_eq!(rose(&rcv0, &rcv1, "Udp", "RcvbufErrors"), 0);
    let sender = s.sender.expect("a sender");
    // the report's counts are the namespace's own, read by the test around the run (the
    // client's control segments leave by the same qdisc: a few of them may be dropped too)
    assert_eq!(sender.sndbuf_errors, Some(sndbuf));
    let q = sender.qdisc_drops.expect("the sender's qdisc drops");
    assert!(q <= dropped && dropped <= q + 8, "report {q}, tc {dropped}");
    assert!(dropped > sndbuf, "the qdisc saw drops SndbufErrors did not: {dropped} vs {sndbuf}");
    // the loss is the sending host's: all of it, nothing elsewhere
    assert_eq!(split.send_buffer, q.min(missing), "{split:?}");
    assert!(split.elsewhere * 100 <= missing, "{split:?}");
    assert_eq!(split.send_buffer + split.socket + split.nic + split.elsewhere, missing);
    assert!(
        text.contains(&format!(
            "{} by the sending host after the send (SndbufErrors +{}, egress qdisc drops +{}",
            wirebench_report::words::grouped(split.send_buffer),
            wirebench_report::words::grouped(sndbuf),
            wirebench_report::words::grouped(q)
        )),
        "{text}"
    );
}
