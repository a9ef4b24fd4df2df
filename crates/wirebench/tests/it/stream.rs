//! `wirebench stream` and `wirebench listen` on loopback against an in-process serve:
//! bounded streams arrive complete, both sides are reported, reverse data only ever goes
//! to the control connection's address, foreign datagrams are counted apart.

use std::net::UdpSocket;
use std::time::Duration;

use wirebench::Shutdown;
use wirebench_core::report::{Outcome, Report, Results, StreamResults};

use crate::support::{assert_valid_report, read_json, serve, wirebench, wirebench_with};

fn stream_report(path: &std::path::Path) -> StreamResults {
    let v = read_json(path);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v).unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let Results::Stream(s) = r.results else { panic!("a stream report") };
    s
}

fn run_stream(extra: &[&str]) -> StreamResults {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let target = srv.local_addr().to_string();
    let mut args = vec!["stream", &target, "--json", json.to_str().unwrap(), "-q"];
    args.extend_from_slice(extra);
    let r = wirebench(&args);
    assert_eq!(r.code, 0, "{r:?}");
    let c = srv.stop();
    assert_eq!(c.control_errors, 0, "{c:?}");
    stream_report(&json)
}

#[test]
fn a_bounded_udp_stream_arrives_complete() {
    let s = run_stream(&["--count", "20000", "--rate", "20k/s", "--size", "512", "-P", "2"]);
    let sender = s.sender.expect("sender side");
    assert_eq!(sender.messages, 40_000);
    let r = &s.receivers[0];
    assert_eq!((r.sent, r.total.received, r.total.missing(), r.total.duplicates), (40_000, 40_000, 0, 0));
    assert_eq!(r.publishers.len(), 2);
    assert!(r.publishers.iter().all(|p| p.received == 20_000));
    assert_eq!(r.total.bytes, 40_000 * 512);
}

#[test]
fn a_bounded_tcp_stream_arrives_complete() {
    let s = run_stream(&["--proto", "tcp", "--count", "3000", "--size", "16384"]);
    let r = &s.receivers[0];
    assert_eq!((r.sent, r.total.received, r.total.missing()), (3000, 3000, 0));
    assert_eq!(r.total.bytes, 3000 * 16384);
    assert!(s.sender.unwrap().retransmits.is_some());
}

#[test]
fn reverse_and_both_ways() {
    let s = run_stream(&["--reverse", "--count", "5000", "--rate", "10k/s", "--size", "100"]);
    let r = &s.receivers[0];
    assert_eq!(r.direction, wirebench_core::report::StreamDirection::Reverse);
    assert_eq!((r.sent, r.total.received), (5000, 5000));
    let s = run_stream(&["--bidir", "--count", "3000", "--rate", "10k/s", "--size", "100"]);
    let dirs: Vec<(&str, u64, u64)> =
        s.receivers.iter().map(|r| (r.direction.as_str(), r.sent, r.total.received)).collect();
    assert_eq!(dirs, [("forward", 3000, 3000), ("reverse", 3000, 3000)]);
    let s = run_stream(&["--proto", "tcp", "--reverse", "--count", "500", "--size", "8192"]);
    assert_eq!((s.receivers[0].sent, s.receivers[0].total.received), (500, 500));
}

#[test]
fn a_token_is_enforced() {
    // A salt of this deployment's own: the client derives its key with the salt serve sends.
    let cfg = wirebench::serve::Config {
        token: Some("s3cret".into()),
        salt: "deploy-7".into(),
        ..wirebench::serve::Config::loopback()
    };
    let srv = wirebench::serve::Server::start(&cfg, Shutdown::new()).unwrap();
    let target = srv.local_addr().to_string();
    let r = wirebench(&["stream", &target, "--count", "10", "-q"]);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("token"), "{}", r.err);
    let r = wirebench(&["stream", &target, "--count", "10", "-q", "--token", "s3cret"]);
    assert_eq!(r.code, 2, "a weak token is refused on the client too: {r:?}");
    assert!(r.err.contains("bits of entropy"), "{}", r.err);
    let r = wirebench(&["stream", &target, "--count", "10", "-q", "--token", "s3cret", "--weak-token"]);
    assert_eq!(r.code, 0, "{r:?}");
    srv.stop();
}

#[test]
fn wirebench_token_makes_a_token_every_command_takes() {
    let r = wirebench(&["token"]);
    assert_eq!(r.code, 0, "{r:?}");
    let t = r.out.trim();
    assert_eq!(r.out.lines().count(), 1, "{r:?}");
    assert!(wirebench_core::auth::token_bits(t) >= wirebench_core::auth::MIN_TOKEN_BITS, "{t}");
    assert_ne!(wirebench(&["token"]).out.trim(), t, "a fresh token each time");
    let srv = wirebench::serve::Server::start(
        &wirebench::serve::Config { token: Some(t.to_owned()), ..wirebench::serve::Config::loopback() },
        Shutdown::new(),
    )
    .unwrap();
    let r = wirebench(&["stream", &srv.local_addr().to_string(), "--count", "10", "-q", "--token", t]);
    assert_eq!(r.code, 0, "{r:?}");
    srv.stop();
    let r = wirebench(&["token", "--bytes", "8"]);
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn sizes_and_the_loss_free_search_report_rows() {
    let s = run_stream(&["--sizes", "64,1024", "--trial", "200ms", "--rate", "5k/s"]);
    assert_eq!(s.sweep.iter().map(|r| r.size).collect::<Vec<_>>(), [64, 1024]);
    assert!(s.sweep.iter().all(|r| r.loss < 0.01 && r.per_s > 0.0), "{:?}", s.sweep);
    let s = run_stream(&["--find-max-rate", "--trial", "200ms", "--rate", "20k/s", "--size", "256"]);
    let search = s.search.expect("a search");
    // Loopback carries 20k/s of 256 B without loss: the first trial passes and ends it, at
    // the rate asked or (a busy machine) at what the sender sent.
    assert_eq!(search.trials.len(), 1, "{search:?}");
    let t = search.trials[0];
    let at = |r: f64| (search.best_per_s - r).abs() < 1e-6;
    match search.ending.as_str() {
        "top_passed" => assert!(at(20_000.0) || (at(t.sent_per_s) && t.sent_per_s < 20_000.0), "{search:?}"),
        "sender_limited" => assert!((search.best_per_s - t.sent_per_s).abs() < 1e-6, "{search:?}"),
        other => panic!("{other}: {search:?}"),
    }
}

#[test]
fn listen_counts_publishers_and_ignores_foreign_datagrams() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("l.json");
    let log = dir.path().join("l.tsv");
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let listen = format!("127.0.0.1:{port}");
    let stop = Shutdown::new();
    let (r, s) = std::thread::scope(|sc| {
        let l = sc.spawn(|| {
            wirebench_with(
                &[
                    "listen",
                    "-v",
                    "--listen",
                    &listen,
                    "--count",
                    "3000",
                    "--json",
                    json.to_str().unwrap(),
                    "--log",
                    log.to_str().unwrap(),
                ],
                stop.clone(),
            )
        });
        // Until listen is bound, a datagram to its port draws an ICMP port unreachable,
        // which on loopback is queued before `send` returns: no timing involved.
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        junk.connect(&listen).unwrap();
        junk.set_nonblocking(true).unwrap();
        let t0 = std::time::Instant::now();
        loop {
            let _ = junk.send(b"not a stream message at all, just bytes");
            let mut b = [0u8; 8];
            match junk.recv(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    assert!(t0.elapsed() < Duration::from_secs(20), "listen never bound");
                    std::thread::yield_now();
                }
                _ => break,
            }
        }
        // Foreign datagrams, then a stream; listen stops at 3000 stream messages.
        for _ in 0..50 {
            let _ = junk.send(b"not a stream message at all, just bytes");
        }
        let s = wirebench(&[
            "stream",
            &listen,
            "--no-control",
            "--count",
            "3000",
            "--rate",
            "30k/s",
            "--size",
            "100",
            "-q",
        ]);
        // A datagram can be dropped on a busy loopback; do not wait forever for it.
        let t0 = std::time::Instant::now();
        while !l.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::park_timeout(Duration::from_millis(20));
        }
        stop.trigger();
        (l.join().unwrap(), s)
    });
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("Lifetime:") && r.out.contains("Now:"), "{}", r.out);
    let ignored: u64 = r
        .out
        .lines()
        .find_map(|l| l.strip_prefix("ignored ")?.split(' ').next()?.parse().ok())
        .expect("foreign datagrams counted");
    assert!(ignored >= 51, "{ignored}");
    let st = stream_report_any(&json);
    assert_eq!(st.receivers.len(), 1, "one publisher");
    assert_eq!(st.receivers[0].total.received, 3000);
    assert!(std::fs::read_to_string(&log).unwrap().lines().count() >= 3);
}

fn stream_report_any(path: &std::path::Path) -> StreamResults {
    let v = read_json(path);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v).unwrap();
    let Results::Stream(s) = r.results else { panic!("a stream report") };
    s
}

#[test]
fn a_receiver_that_disappears_gives_exit_1_and_a_partial_report() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gone.json");
    let target = srv.local_addr().to_string();
    let r = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            wirebench(&[
                "stream",
                &target,
                "--duration",
                "30s",
                "--rate",
                "10k/s",
                "-q",
                "--json",
                json.to_str().unwrap(),
            ])
        });
        let t0 = std::time::Instant::now();
        while srv.counters().streams == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20));
            std::thread::yield_now();
        }
        srv.stop();
        h.join().unwrap()
    });
    assert_eq!(r.code, 1, "{r:?}");
    let v = read_json(&json);
    assert_valid_report(&v);
    assert_eq!(v["outcome"], "peer_silent");
}

#[test]
fn bad_stream_input_exits_2() {
    for (args, want) in [
        (&["stream", "127.0.0.1:7878", "--size", "70000"][..], "outside"),
        (&["stream", "127.0.0.1:7878", "--rate", "0"][..], "rate"),
        (&["stream", "127.0.0.1:7878", "--group", "1.2.3.4:5"][..], "not a multicast group"),
    ] {
        let r = wirebench(args);
        assert_eq!(r.code, 2, "{args:?} {r:?}");
        assert!(r.err.contains(want), "{args:?}: {}", r.err);
    }
}
