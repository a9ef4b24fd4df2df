//! `wirebench listen` against hand-made datagrams on loopback: DatagramTest's gap lines
//! with exact counts, and the publisher budget (refused and counted, never grown).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use wirebench::Shutdown;
use wirebench_core::report::{Report, Results, StreamResults};
use wirebench_core::wire::stream;

use crate::support::{Run, assert_valid_report, read_json, wirebench_with};

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
    let mut all = vec!["listen", "--listen", &at, "--json", json.to_str().unwrap()];
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
