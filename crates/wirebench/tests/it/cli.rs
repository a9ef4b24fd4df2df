//! The command line as a user meets it: bad input exits 2 with one line; an absent or
//! silent serve exits 1 with a hint; Ctrl-C and a dead peer still print and save.

use std::net::UdpSocket;
use std::time::Instant;

use wirebench::Shutdown;
use wirebench_core::report::{Outcome, Report, Results};

use crate::support::{assert_valid_report, read_json, serve, wirebench, wirebench_with};

#[test]
fn bad_input_exits_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["ping", "not-an-address"], "bad address 'not-an-address'"),
        (&["ping", "127.0.0.1:7878", "--size", "16"], "smallest probe is 32"),
        (&["ping", "127.0.0.1:7878", "--timeout", "3fortnights"], "unknown unit"),
        (&["ping", "127.0.0.1:7878", "--rate", "0"], "rate"),
        (&["ping", "127.0.0.1:7878", "--rate", "100mbit"], "is a bit rate"),
        (&["ping", "127.0.0.1:7878", "--count", "ten"], "not a count"),
        (&["stream", "127.0.0.1:7878", "--rate", "100M"], "100mbit (bits/s) or 100M/s (messages/s)?"),
        (&["serve", "--max-rate", "1g"], "1gbit (bits/s) or 1g/s (messages/s)?"),
        (&["proxy", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--rate", "5k/s"], "is a message rate"),
        (&["ping", "127.0.0.1:7878", "--no-such-flag"], "--no-such-flag"),
        (&["ping"], "TARGET"),
        (&["serve", "--join", "10.0.0.1:5000"], "not a multicast group"),
        (&["serve", "--listen", "nowhere"], "bad address"),
        (&["frobnicate"], "frobnicate"),
        (&["relay", "--peers", "127.0.0.2", "--interface", "127.0.0.1"], "at least one --group"),
        (&["relay", "--group", "10.1.1.1:5000", "--peers", "h", "--interface", "127.0.0.1"], "not a multicast group"),
        (&["relay", "--group", "239.1.1.1:5000", "--interface", "127.0.0.1"], "needs --peers"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "a b", "--interface", "127.0.0.1"], "--peers 'a b'"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "h", "--max-rate", "0"], "rate"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "h", "--interface", "no-such-if0"], "no IPv4 address"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "h", "--interface", "127.0.0.1", "--ttl", "0"], "--ttl"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "h", "--interface", "127.0.0.1", "--token", ""], "--token"),
        (&["relay", "--group", "239.1.1.1:5000", "--peers", "h", "--listen", "127.0.0.1:0"], "needs a port"),
        (&["relay", "--group", "239.255.79.1", "--peers", "h"], "expected host:port"),
        (&["stream", "127.0.0.1:7878", "--group", "239.255.79.1"], "expected host:port"),
        (&["suite", "--out", "/nonexistent-wirebench/x"], "/nonexistent-wirebench is not a folder"),
        (&["room", "--listen", "no-such-host.invalid:8080"], "--listen: unknown host"),
    ];
    for (args, want) in cases {
        let r = wirebench(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: one line, got {:?}", r.err);
        assert!(r.err.contains(want), "{args:?}: {:?} should mention {want}", r.err);
    }
}

#[test]
fn bare_wirebench_prints_the_command_list() {
    let r = wirebench(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.err.contains("Commands:"), "{}", r.err);
    for cmd in ["serve", "ping", "stream", "proxy", "relay", "mesh"] {
        assert!(r.err.lines().any(|l| l.trim_start().starts_with(cmd)), "{cmd}: {}", r.err);
    }
}

#[test]
fn suite_out_under_a_missing_folder_makes_nothing() {
    let r = wirebench(&["suite", "--out", "/nonexistent-wirebench/x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(!std::path::Path::new("/nonexistent-wirebench").exists(), "the suite made a folder at /");
}

#[test]
fn relay_whose_peers_all_fail_exits_1() {
    let t = Instant::now();
    let r = wirebench(&[
        "relay",
        "--group",
        "239.255.79.1:17990",
        "--peers",
        "file:/nonexistent-wirebench/peers",
        "--interface",
        "127.0.0.1",
        "--listen",
        "127.0.0.1:17991",
        "-d",
        "5s",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("every --peers source failed (file:/nonexistent-wirebench/peers)"), "{}", r.err);
    assert!(t.elapsed().as_secs() < 5, "it waited instead of failing: {:?}", t.elapsed());
}

#[test]
fn help_and_version_exit_0() {
    let r = wirebench(&["--help"]);
    assert_eq!(r.code, 0);
    for cmd in ["serve", "ping", "suite"] {
        assert!(r.out.contains(cmd), "{}", r.out);
    }
    let r = wirebench(&["ping", "--help"]);
    assert!(r.out.contains("--rate") && r.out.contains("--reply-group"));
    assert_eq!(wirebench(&["--version"]).code, 0);
}

fn closed_port() -> String {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = s.local_addr().unwrap();
    drop(s);
    a.to_string()
}

#[test]
fn a_closed_udp_port_exits_1_and_names_the_address() {
    let target = closed_port();
    let r = wirebench(&["ping", &target, "--timeout", "300ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains(&target) && r.err.contains("wirebench serve"), "{}", r.err);
    // As docs/modes/ping.md shows it (it once read "the port is closed from ADDR within 300ms").
    assert!(r.err.starts_with(&format!("error: {target} refused the probes (port closed): ")), "{}", r.err);
    assert_eq!(r.err.lines().count(), 1);
}

#[test]
fn a_closed_tcp_port_exits_1() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap().to_string();
    drop(l);
    let r = wirebench(&["ping", &target, "--proto", "tcp", "--timeout", "300ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains(&target) && r.err.contains("wirebench serve"), "{}", r.err);
}

#[test]
fn a_silent_udp_peer_exits_1_after_the_timeout() {
    // Bound, so no ICMP comes back, but it never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = silent.local_addr().unwrap().to_string();
    let t0 = Instant::now();
    let r = wirebench(&["ping", &target, "--timeout", "200ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("no reply from") && r.err.contains("200ms"), "{}", r.err);
    // It gave up (the bound only proves it does not hang; timing claims live in bench/).
    assert!(t0.elapsed().as_secs() < 10);
}

/// Waits (yielding, not sleeping) until serve answered `n` UDP probes.
fn until_answered(srv: &wirebench::serve::Server, n: u64) {
    let t0 = Instant::now();
    while srv.counters().udp_probes < n {
        assert!(t0.elapsed().as_secs() < 30, "serve never reached {n} probes");
        std::thread::yield_now();
    }
}

#[test]
fn ctrl_c_stops_prints_and_saves_what_was_measured() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("partial.json");
    let target = srv.local_addr().to_string();
    let stop = Shutdown::new();
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| {
            wirebench_with(
                &["ping", &target, "--count", "100000000", "--warmup", "0", "--json", json.to_str().unwrap()],
                stop.clone(),
            )
        });
        until_answered(&srv, 3_000);
        stop.trigger();
        h.join().unwrap()
    });
    srv.stop();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("interrupted"), "{}", r.out);
    let report: Report = serde_json::from_value(read_json(&json)).unwrap();
    assert_eq!(report.outcome, Outcome::Interrupted);
    let Results::Ping(p) = report.results else { panic!("a ping report") };
    assert!(p.sent >= 2_000 && p.sent < 100_000_000, "{}", p.sent);
    assert!(p.responders[0].received + 1 >= p.sent);
}

/// A stream stopped while serve has not answered `hello` yet (a serve that accepts and says
/// nothing) ends at the stop, not after its 10 s wait for the answer, and saves an
/// interrupted report with nothing measured, as ping does.
#[test]
fn ctrl_c_before_serve_answers_hello_saves_an_interrupted_stream_report() {
    use std::io::Read as _;
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = mute.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("early.json");
    let stop = Shutdown::new();
    let (r, waited) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            wirebench_with(&["stream", &target, "--duration", "5s", "--json", json.to_str().unwrap()], stop.clone())
        });
        let (mut conn, _) = mute.accept().unwrap();
        // The client's hello has arrived: it now waits for an answer that never comes.
        let mut first = [0u8; 4];
        conn.read_exact(&mut first).unwrap();
        let t0 = Instant::now();
        stop.trigger();
        let r = h.join().unwrap();
        (r, t0.elapsed())
    });
    assert!(waited.as_secs() < 5, "the stop waited {waited:?}: it sat out serve's 10 s answer deadline");
    // No receiver's results: exit 1, as for any stream without them.
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("interrupted") && r.out.contains("not started: stopped before serve answered"), "{}", r.out);
    let report: Report = serde_json::from_value(read_json(&json)).unwrap();
    assert_eq!(report.outcome, Outcome::Interrupted);
    let Results::Stream(st) = report.results else { panic!("a stream report") };
    assert!(st.receivers.is_empty() && st.sender.is_none(), "nothing measured");
    assert!(st.warnings.iter().any(|w| w.contains("interrupted while waiting")), "{:?}", st.warnings);
}

#[test]
fn a_peer_that_dies_mid_run_exits_1_with_a_partial_report() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("dead.json");
    let target = srv.local_addr().to_string();
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| {
            wirebench(&[
                "ping",
                &target,
                "--count",
                "100000000",
                "--warmup",
                "0",
                "--timeout",
                "100ms",
                "--json",
                json.to_str().unwrap(),
            ])
        });
        until_answered(&srv, 3_000);
        srv.stop();
        h.join().unwrap()
    });
    assert_eq!(r.code, 1, "{r:?}");
    // its port closed: the kernel says so (ICMP port unreachable), and that ends the run
    assert!(r.out.contains("the target is unreachable (ICMP unreachable): gave up; results so far"), "{}", r.out);
    let v = read_json(&json);
    assert_valid_report(&v);
    let report: Report = serde_json::from_value(v).unwrap();
    assert_eq!(report.outcome, Outcome::PeerSilent);
    let Results::Ping(p) = report.results else { panic!("a ping report") };
    assert_eq!(p.gave_up, Some(wirebench_core::report::GaveUp::Unreachable));
    let r = &p.responders[0];
    assert!(r.received >= 2_000);
    // what was sent until the end is counted (it used to be 0 when the run ended on the error)
    assert!(p.sent >= r.received, "{} sent, {} received", p.sent, r.received);
    assert_eq!(r.lost, p.sent - r.received);
    // the lost ones are the probes after serve stopped answering, one run at the end (how
    // many depends on how long serve's socket outlived its last answer: a loaded machine
    // stretches that past several 100 ms timeouts)
    assert!(r.lost >= 1, "the probe that met the closed port is sent and lost");
    assert_eq!(r.max_lost_in_a_row, r.lost, "{} lost, at most {} in a row", r.lost, r.max_lost_in_a_row);
}
