//! `wirebench listen` against hand-made datagrams on loopback: DatagramTest's gap lines
//! with exact counts, and the publisher budget (refused and counted, never grown).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use wirebench::Shutdown;
use wirebench_core::report::{Report, Results, StreamResults};
use wirebench_core::wire::stream;

use crate::support::{Run, assert_valid_report, read_json, wirebench, wirebench_with};

/// A free loopback port (bound, then let go).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until `to` is bound: until then a datagram to it draws an ICMP port unreachable,
/// which on loopback is queued before `send` returns (no timing involved).
fn wait_bound(to: &str) {
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.connect(to).unwrap();
    probe.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    loop {
        // Not a stream message: listen counts it as foreign.
        let _ = probe.send(b"hello?");
        let mut b = [0u8; 8];
        match probe.recv(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                assert!(t0.elapsed() < Duration::from_secs(20), "listen never bound");
                std::thread::yield_now();
            }
            _ => return,
        }
    }
}

/// Sends stream messages of `session` numbered as given from `s`.
fn publish_from(s: &UdpSocket, to: &str, session: u64, seqs: impl IntoIterator<Item = u64>) {
    let mut m = vec![0u8; 100];
    stream::init(&mut m, session, 0);
    for (i, seq) in seqs.into_iter().enumerate() {
        stream::stamp(&mut m, seq, i as u64 * 1_000);
        s.send_to(&m, to).unwrap();
    }
}

/// The same from a new socket (a new publisher).
fn publish(to: &str, session: u64, seqs: impl IntoIterator<Item = u64>) {
    publish_from(&UdpSocket::bind("127.0.0.1:0").unwrap(), to, session, seqs);
}

/// Runs listen with `args` while `feed` sends; listen stops at its `--count`.
fn listen_while(args: &[&str], feed: impl FnOnce(&str)) -> (Run, StreamResults) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("l.json");
    let at = format!("127.0.0.1:{}", free_port());
    let stop = Shutdown::new();
    let mut all = vec!["listen", "-v", "--listen", &at, "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let r = std::thread::scope(|sc| {
        let l = sc.spawn(|| wirebench_with(&all, stop.clone()));
        wait_bound(&at);
        feed(&at);
        let t0 = Instant::now();
        while !l.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::park_timeout(Duration::from_millis(20));
        }
        stop.trigger();
        l.join().unwrap()
    });
    assert_eq!(r.code, 0, "{r:?}");
    let v = read_json(&json);
    assert_valid_report(&v);
    let rep: Report = serde_json::from_value(v).unwrap();
    let Results::Stream(s) = rep.results else { panic!("a stream report") };
    (r, s)
}

#[test]
fn blocks_carry_datagramtests_gap_lines() {
    // 0..=9, [10..=14 lost], 15..=19, [20..=29 lost], 30: two gaps of 5 and 10.
    let seqs: Vec<u64> = (0..10).chain(15..20).chain([30]).collect();
    let n = seqs.len().to_string();
    let (r, s) = listen_while(&["--count", &n], |at| publish(at, 7, seqs));
    let c = &s.receivers[0].total;
    assert_eq!((c.received, c.expected, c.gaps, c.gap_datagrams), (16, 31, 2, 15));
    let life = r.out.split("Lifetime:").last().unwrap();
    for want in ["received: 16 of 31", "missing: 15", "gaps: 2", "avg gap size: 7.5", "avg gap time: "] {
        assert!(life.contains(want), "'{want}' in {}", r.out);
    }
    assert!(r.out.contains("to listener: 127.0.0.1:"), "{}", r.out);
}

#[test]
fn publishers_beyond_the_budget_are_refused_and_counted() {
    // Two publishers fill the table; two more are refused (100 datagrams); a last datagram
    // of the first ends the run (listen reads its queue in order).
    let (r, s) = listen_while(&["--max-publishers", "2", "--count", "101"], |at| {
        let first = UdpSocket::bind("127.0.0.1:0").unwrap();
        publish_from(&first, at, 1, 0..50);
        publish(at, 2, 0..50);
        publish(at, 3, 0..50);
        publish(at, 4, 0..50);
        publish_from(&first, at, 1, [50]);
    });
    let t = s.listen.expect("listen totals");
    assert_eq!((t.publishers_seen, t.refused_datagrams), (2, 100), "{t:?}");
    assert_eq!(s.receivers.len(), 2);
    assert!(r.out.contains("refused 100 datagrams from new publishers while 2 were tracked"), "{}", r.out);
}

/// A listen on a port another listen holds is refused in one line (exit 1), and the first
/// one gets the traffic. Before, the second bound the port too (both with `SO_REUSEADDR`),
/// took every datagram, and the first exited 0 having received nothing.
#[test]
fn a_second_listen_on_a_port_in_use_is_refused() {
    let at = format!("127.0.0.1:{}", free_port());
    let stop = Shutdown::new();
    let first = ["listen", "-v", "--listen", at.as_str(), "--count", "10", "--duration", "60s", "--no-hiccup"];
    let (second, first) = std::thread::scope(|sc| {
        let l = sc.spawn(|| wirebench_with(&first, stop.clone()));
        wait_bound(&at);
        let second = wirebench(&["listen", "--listen", &at, "-d", "100ms", "--no-hiccup"]);
        publish(&at, 9, 0..10);
        let t0 = Instant::now();
        while !l.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::park_timeout(Duration::from_millis(20));
        }
        stop.trigger();
        (second, l.join().unwrap())
    });
    assert_eq!(second.code, 1, "{second:?}");
    assert_eq!(second.err.lines().count(), 1, "{}", second.err);
    assert!(
        second.err.starts_with(&format!(
            "error: cannot bind {at}: Address already in use (os error 98): another socket holds that port"
        )),
        "{}",
        second.err
    );
    assert!(second.err.contains("--reuse-port"), "{}", second.err);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.out.contains("received: 10 of 10"), "{}", first.out);
}

/// A listen at which nothing arrived says so, with what would look like that, and exits 1
/// (before: exit 0, and nothing said). Two that both ask for `--reuse-port` share a port.
#[test]
fn a_listen_that_heard_nothing_says_so_and_exits_1() {
    let at = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("none.json");
    let stop = Shutdown::new();
    let args = ["listen", "--listen", at.as_str(), "--reuse-port", "--duration", "60s", "--no-hiccup"];
    let (r, held) = std::thread::scope(|sc| {
        let l = sc.spawn(|| wirebench_with(&args, stop.clone()));
        wait_bound(&at);
        let r = wirebench(&[
            "listen",
            "--listen",
            &at,
            "--reuse-port",
            "-d",
            "200ms",
            "--no-hiccup",
            "--json",
            json.to_str().unwrap(),
        ]);
        stop.trigger();
        (r, l.join().unwrap())
    });
    assert_eq!(r.code, 1, "{r:?}");
    let line = r.out.lines().find(|l| l.starts_with("nothing arrived at ")).expect(&r.out);
    assert!(line.starts_with(&format!("nothing arrived at {at}: no stream message in ")), "{line}");
    assert!(
        line.ends_with("s; a sender sending to another address or port, or a filter on the way (a firewall) would each look like this"),
        "{line}"
    );
    let v = read_json(&json);
    assert_valid_report(&v);
    let rep: Report = serde_json::from_value(v).unwrap();
    assert!(wirebench_core::report::receivers_failed(&rep));
    // `report` of it says the same (it printed only the heading)
    let shown = wirebench(&["report", "-v", json.to_str().unwrap()]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.out.contains(line), "{}", shown.out);
    // the one that held the port first heard only wait_bound's probes, which are not
    // stream messages: nothing arrived there either, and it says what did
    assert_eq!(held.code, 1, "{held:?}");
    assert!(held.out.contains(" datagrams that were not stream messages); "), "{}", held.out);
}
