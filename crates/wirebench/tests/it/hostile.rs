//! The adversarial suite for `serve`, what runs in seconds: hostile numbers on
//! the wire, caps and budgets, spoofed knocks, tokens, stalls, slowloris, non-reading
//! clients, the connection cap's refusal, and a stop under each (within a second).
//! `bench/adversarial.sh` has the floods and soaks.

mod raw;
mod signals;

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use wirebench::control;
use wirebench_core::units::StreamRate;
use wirebench_core::wire::control::{Control, Direction, LEGACY_VERSION, StreamProto};
use wirebench_core::wire::probe;

use self::raw::{hello, refusal, request, serve_with, start, start_reverse, stop_within, until};
use crate::support::wirebench;

const SECOND: Duration = Duration::from_secs(1);

/// Rates that went flat out (or overflowed the schedule) are refused,
/// with the reason, before anything is allocated.
#[test]
fn hostile_rates_on_the_wire_are_refused_with_a_reason() {
    let srv = serve_with(|_| {});
    for bad in ["0", "-1", "1e-300", "5e-324", "1e-5"] {
        let (mut c, m) = hello(srv.local_addr());
        let Control::Challenge { .. } = m else { panic!("{m:?}") };
        let body = format!(
            r#"{{"type":"start","session":1,"proto":"udp","size":64,"direction":"reverse","publishers":64,"rate_per_s":{bad},"duration_ns":1000000000,"count":null,"group":null}}"#
        );
        let mut f = wirebench_core::wire::control::header(body.len()).to_vec();
        f.extend_from_slice(body.as_bytes());
        c.write_all(&f).unwrap();
        let m = control::recv(&mut c).unwrap();
        assert!(refusal(&m).contains("rate"), "rate {bad}: {m:?}");
    }
    let c = srv.stop();
    assert_eq!((c.control_errors, c.streams), (5, 0));
}

/// `--max-rate` caps the session's total, whatever the publishers.
#[test]
fn the_rate_cap_is_on_the_session_total() {
    let srv = serve_with(|c| c.max_rate = Some(StreamRate::Bits(10e6)));
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for (pubs, asked) in [(64, None), (64, Some(1e9)), (1, None)] {
        let (_c, m) = start_reverse(srv.local_addr(), &request(Direction::Reverse, StreamProto::Udp, pubs, asked), &rx);
        let Control::Ready { granted, .. } = m else { panic!("{m:?}") };
        let total_bits = granted.rate_per_s.expect("capped") * f64::from(pubs) * 64.0 * 8.0;
        assert!((total_bits - 10e6).abs() < 1.0, "{pubs} publishers asking {asked:?}: {total_bits} bit/s");
    }
    drop(srv);
}

/// A client capped by serve is told so (the run's warnings), not left to wonder.
#[test]
fn a_capped_client_is_told_the_granted_rate() {
    let srv = serve_with(|c| c.max_rate = Some(StreamRate::Bits(10e6)));
    let target = srv.local_addr().to_string();
    let r = wirebench(&["stream", &target, "--reverse", "--count", "100", "--rate", "10k/s", "--size", "1250"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("sends at most 1.0k msg/s per publisher, 10.0 Mbit/s of payload in all"), "{}", r.out);
    // TCP too (it said nothing: 4 connections read 400 Mbit/s from a default serve, its cap,
    // with no word of it), once however many connections share the grant.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let r = wirebench(&[
        "stream",
        &target,
        "--proto",
        "tcp",
        "--reverse",
        "-P",
        "2",
        "--count",
        "100",
        "--rate",
        "10k/s",
        "--size",
        "1250",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let said = "sends at most 1.0k msg/s per publisher, 10.0 Mbit/s of payload in all";
    assert_eq!(r.out.matches(said).count(), 1, "{}", r.out);
    let v = crate::support::read_json(&json);
    let warnings = v["results"]["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("sends at most 1.0k msg/s"))), "{v}");
    drop(srv);
}

/// A reverse run that serve ends early (its `--max-duration`) says why it ended there, over
/// UDP and TCP (it said nothing: a 4 s run against a 2 s cap read 2 s and stopped).
#[test]
fn a_client_cut_short_by_serve_is_told() {
    let srv = serve_with(|c| c.max_duration = Duration::from_millis(300));
    let target = srv.local_addr().to_string();
    for proto in ["udp", "tcp"] {
        let r = wirebench(&[
            "stream",
            "-v",
            &target,
            "--proto",
            proto,
            "--reverse",
            "-d",
            "1s",
            "--rate",
            "1k/s",
            "--size",
            "100",
        ]);
        assert_eq!(r.code, 0, "{r:?}");
        let said = "sends for at most 0.3 s (its --max-duration; the run needs 1.0 s): the run ends there";
        assert_eq!(r.out.matches(said).count(), 1, "{proto}: {}", r.out);
    }
    // A counted run is cut only if its count at its rate takes longer than the grant (its
    // duration, an hour by default, is only a deadline): 100 at 1k/s needs 0.1 s, 600 needs 0.6 s.
    for (count, said) in [("100", 0), ("600", 1)] {
        let r = wirebench(&["stream", "-v", &target, "--reverse", "--count", count, "--rate", "1k/s", "--size", "100"]);
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(r.out.matches("its --max-duration; the run needs 0.6 s").count(), said, "{count}: {}", r.out);
    }
    drop(srv);
}

/// The CLI's defaults cap anonymous sessions (100 Mbit/s, 64 sessions, 16
/// per address, 256 MiB) and serve streams only on loopback without a token or `--open`.
#[test]
fn the_defaults_are_safe() {
    let cli = <wirebench::Cli as clap::Parser>::try_parse_from(["wirebench", "serve"]).unwrap();
    let wirebench::Command::Serve(a) = cli.command else { panic!() };
    let cfg = wirebench::serve::Config::from_args(&a).unwrap();
    assert_eq!(cfg.max_rate, Some(StreamRate::Bits(100e6)));
    assert_eq!(cfg.max_rate_token, None);
    assert_eq!((cfg.budget.sessions, cfg.budget.per_source, cfg.budget.bytes), (64, 16, 256 << 20));
    assert!(!cfg.streams_allowed(), "0.0.0.0 without --token or --open");
}

/// On a non-loopback address, streams need a token or `--open`; the
/// probe echo stays open.
#[test]
fn a_non_loopback_serve_without_token_or_open_answers_only_the_echo() {
    let srv = serve_with(|c| c.listen = "0.0.0.0:0".parse().unwrap());
    let addr = ([127, 0, 0, 1], srv.local_addr().port()).into();
    let (_c, m) = hello(addr);
    assert!(refusal(&m).contains("--open"), "{m:?}");
    let r = wirebench(&["ping", &addr.to_string(), "--count", "5", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    drop(srv);
    let srv = serve_with(|c| {
        c.listen = "0.0.0.0:0".parse().unwrap();
        c.open = true;
    });
    let addr = ([127, 0, 0, 1], srv.local_addr().port()).into();
    assert!(matches!(hello(addr).1, Control::Challenge { auth: false, .. }));
    drop(srv);
}

/// A cap on concurrent sessions per source address, told in words.
#[test]
fn sessions_per_source_are_capped() {
    let srv = serve_with(|c| c.budget.per_source = 2);
    let req = request(Direction::Forward, StreamProto::Udp, 1, None);
    let held: Vec<_> = (0..2).map(|_| start(srv.local_addr(), &req, None)).collect();
    assert!(held.iter().all(|(_, m)| matches!(m, Control::Ready { .. })));
    let (_c, m) = start(srv.local_addr(), &req, None);
    assert!(refusal(&m).contains("already has 2 sessions"), "{m:?}");
    drop(held);
    // Released at the end of a session: the slot comes back.
    until("a slot freed", 10 * SECOND, || matches!(start(srv.local_addr(), &req, None).1, Control::Ready { .. }));
    assert!(srv.stop().refused_sessions >= 1);
}

/// Serve's memory budget refuses what would not fit (64 publishers'
/// windows each), and counts it.
#[test]
fn the_memory_budget_refuses_sessions() {
    let srv = serve_with(|c| {
        c.budget.per_source = 100;
        c.budget.bytes = 16 << 20; // one 64-publisher session (9.1 MiB), not two
    });
    let req = request(Direction::Forward, StreamProto::Udp, 64, None);
    let (_a, m) = start(srv.local_addr(), &req, None);
    assert!(matches!(m, Control::Ready { .. }), "{m:?}");
    let (_b, m) = start(srv.local_addr(), &req, None);
    assert!(refusal(&m).contains("memory budget"), "{m:?}");
    drop(srv);
}

/// Reverse data goes only to the control connection's address and the
/// port a datagram with the session's secret came from; a spoofed knock is counted and
/// ignored, and a port the client names is never used.
#[test]
fn reverse_udp_goes_only_to_the_port_that_knocked_with_the_secret() {
    let srv = serve_with(|_| {});
    let mine = UdpSocket::bind("127.0.0.1:0").unwrap();
    let named = UdpSocket::bind("127.0.0.1:0").unwrap();
    mine.set_read_timeout(Some(5 * SECOND)).unwrap();
    named.set_nonblocking(true).unwrap();
    let mut req = request(Direction::Reverse, StreamProto::Udp, 1, Some(10_000.0));
    req.count = Some(100);
    req.client_port = Some(named.local_addr().unwrap().port());
    let (mut c, m) = start(srv.local_addr(), &req, None);
    let Control::Knock { port, secret } = m else { panic!("{m:?}") };
    // A knock with the wrong secret, from the socket the attacker wants flooded.
    named.send_to(&wirebench_core::wire::handshake::knock(&[0; 16]), ("127.0.0.1", port)).unwrap();
    let s: [u8; 16] = wirebench_core::wire::handshake::unhex(&secret).unwrap().try_into().unwrap();
    mine.send_to(&wirebench_core::wire::handshake::knock(&s), ("127.0.0.1", port)).unwrap();
    assert!(matches!(control::recv(&mut c).unwrap(), Control::Ready { .. }));
    let mut buf = [0u8; 128];
    let mut got = 0;
    while got < 100 && mine.recv(&mut buf).is_ok() {
        got += 1;
    }
    assert_eq!(got, 100, "the knocking port received everything");
    assert!(named.recv(&mut buf).is_err(), "nothing went to the named port");
    control::send(&mut c, &Control::Finish { sent: vec![] }).unwrap();
    assert!(matches!(control::recv(&mut c).unwrap(), Control::Result { .. }));
    assert_eq!(srv.stop().bad_knocks, 1);
}

/// The token is proved by HMAC, the client first; a wrong proof or none is refused and
/// counted. Serve's challenge carries nothing that depends on the token (it was an offline
/// oracle: `hunter2` fell in 6 guesses from one `hello`), and its proof comes only to a
/// client that proved, in `welcome`, made with the derived (PBKDF2) key.
#[test]
fn the_token_is_a_challenge_response() {
    use wirebench_core::auth::Key;
    use wirebench_core::wire::handshake::{client_tag, verify_serve};
    let srv = serve_with(|c| c.token = Some("s3cret".into()));
    let (_c, m) = hello(srv.local_addr());
    let Control::Challenge { auth: true, salt: Some(salt), .. } = &m else { panic!("{m:?}") };
    let json = serde_json::to_string(&m).unwrap();
    assert!(!json.contains("proof"), "no proof before the client's: {json}");
    // A wrong tag: refused, and no proof comes back.
    let (mut c, _) = hello(srv.local_addr());
    control::send(&mut c, &Control::Auth { tag: "00".repeat(32) }).unwrap();
    let answer = control::recv(&mut c).unwrap();
    assert!(matches!(answer, Control::Error { .. }), "{answer:?}");
    // The right tag: serve's proof, with the derived key (not the plain token's).
    let (mut c, m) = hello(srv.local_addr());
    let Control::Challenge { nonce, .. } = m else { panic!() };
    let key = Key::derive(b"s3cret", salt.as_bytes());
    control::send(&mut c, &Control::Auth { tag: client_tag(&key, raw::NC, &nonce) }).unwrap();
    let Control::Welcome { proof } = control::recv(&mut c).unwrap() else { panic!("no welcome") };
    assert!(verify_serve(&key, raw::NC, &nonce, &proof));
    assert!(!verify_serve(&Key::new(b"s3cret"), raw::NC, &nonce, &proof));
    drop(c);
    let req = request(Direction::Forward, StreamProto::Udp, 1, None);
    assert!(refusal(&start(srv.local_addr(), &req, Some("wrong")).1).contains("does not match"));
    assert!(refusal(&start(srv.local_addr(), &req, None).1).contains("needs a token"));
    assert!(matches!(start(srv.local_addr(), &req, Some("s3cret")).1, Control::Ready { .. }));
    assert_eq!(srv.stop().auth_failures, 3);
}

/// A `wirebench stream` without the token leaves after serve's challenge, one with another
/// token is refused at its tag: serve counts both as token failures, not as
/// control errors, so its stop line says what happened. A client that leaves there when
/// serve has no token is still a control error.
#[test]
fn clients_without_the_token_count_as_token_failures() {
    let srv = serve_with(|c| c.token = Some("s3cret".into()));
    let target = srv.local_addr().to_string();
    let r = wirebench(&["stream", &target, "--count", "10", "-q", "--no-hiccup"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("needs a token"), "{}", r.err);
    let r = wirebench(&["stream", &target, "--count", "10", "-q", "--no-hiccup", "--token", "wrong", "--weak-token"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("refused the token: this serve's token does not match yours"), "{}", r.err);
    until("both clients counted", 10 * SECOND, || srv.counters().auth_failures == 2);
    let c = srv.stop();
    assert_eq!((c.auth_failures, c.control_errors), (2, 0));
    assert!(c.to_string().contains("; 2 token failures"), "{c}");

    let open = serve_with(|_| {});
    let (conn, m) = hello(open.local_addr());
    assert!(matches!(m, Control::Challenge { auth: false, .. }), "{m:?}");
    drop(conn);
    until("the early close counted", 10 * SECOND, || open.counters().control_errors == 1);
    assert_eq!(open.stop().auth_failures, 0);
}

/// An old (control version 1 or 2) client is told to upgrade, in the framing it reads, in
/// one line naming both versions.
#[test]
fn an_old_client_is_told_to_upgrade() {
    let srv = serve_with(|_| {});
    for (v, body) in [
        (LEGACY_VERSION, &br#"{"type":"start","session":1}"#[..]),
        (2, &br#"{"type":"hello","nonce":"000102030405060708090a0b0c0d0e0f"}"#[..]),
    ] {
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        c.set_read_timeout(Some(5 * SECOND)).unwrap();
        let mut f = vec![0x57, 0x42, v, 4];
        f.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        f.extend_from_slice(body);
        c.write_all(&f).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        assert_eq!(&got[..4], &[0x57, 0x42, v, 4], "a frame of the client's version");
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.contains(&format!("control version 3 (the client proves the token first), this client {v}: upgrade")),
            "{text}"
        );
    }
    assert_eq!(srv.stop().old_clients, 2);
}

/// A header declaring more than a first frame may hold is refused at
/// once, before any body: serve holds nothing for it.
#[test]
fn a_header_declaring_a_big_body_is_refused_before_the_body() {
    let srv = serve_with(|_| {});
    let mut c = TcpStream::connect(srv.local_addr()).unwrap();
    c.set_read_timeout(Some(5 * SECOND)).unwrap();
    let mut h = wirebench_core::wire::control::header(0);
    h[4..8].copy_from_slice(&(1u32 << 20).to_be_bytes());
    c.write_all(&h).unwrap();
    let m = control::recv(&mut c).unwrap();
    assert!(refusal(&m).contains("length"), "{m:?}");
    assert_eq!(srv.stop().control_errors, 1);
}

/// A reverse stream at the slowest rate allowed holds nothing past a stop
/// (UDP and TCP).
#[test]
fn a_tiny_rate_reverse_stream_stops_within_a_second() {
    let srv = serve_with(|_| {});
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rate = Some(wirebench_core::wire::control::MIN_RATE_PER_S);
    let (_u, m) = start_reverse(srv.local_addr(), &request(Direction::Reverse, StreamProto::Udp, 4, rate), &rx);
    assert!(matches!(m, Control::Ready { .. }), "{m:?}");
    let (_t, m) = start(srv.local_addr(), &request(Direction::Reverse, StreamProto::Tcp, 1, rate), None);
    assert!(matches!(m, Control::Ready { .. }), "{m:?}");
    // The first message of each publisher goes at once; the second is 1,000 s away.
    let mut b = [0u8; 128];
    rx.set_read_timeout(Some(5 * SECOND)).unwrap();
    assert!(rx.recv(&mut b).is_ok());
    stop_within(srv, SECOND);
}

/// A control frame stalled part-way, a probe client that never reads its
/// replies, and forward TCP sessions holding one byte of a frame or part of a finish: a stop
/// ends serve within a second with all of them held.
#[test]
fn stalled_clients_do_not_hold_a_stop() {
    let srv = serve_with(|_| {});
    let addr = srv.local_addr();
    // 1: a control header declaring 30 bytes, then 3 of them.
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled.write_all(&wirebench_core::wire::control::header(30)).unwrap();
    stalled.write_all(b"{\"t").unwrap();
    // 2: probes of 64 KB, never read: serve's writes fill both buffers and block.
    let mut deaf = TcpStream::connect(addr).unwrap();
    let deaf_at = deaf.local_addr().unwrap();
    assert!(!raw::blocked_sending(std::process::id(), addr, deaf_at), "nothing asked of serve yet");
    let mut p = vec![0u8; probe::MAX_LEN];
    probe::init(&mut p, 1, 0);
    let writer = {
        let mut d = deaf.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..200 {
                if d.write_all(&p).is_err() {
                    return;
                }
            }
        })
    };
    // 3: a forward TCP session, then one byte of a data frame; 4: another, then the first
    // bytes of a control frame (its finish) and nothing more.
    let (mut one, m) = start(addr, &request(Direction::Forward, StreamProto::Tcp, 1, None), None);
    assert!(matches!(m, Control::Ready { .. }), "{m:?}");
    one.write_all(&[0x57]).unwrap();
    let (mut cut, m) = start(addr, &request(Direction::Forward, StreamProto::Tcp, 1, None), None);
    assert!(matches!(m, Control::Ready { .. }), "{m:?}");
    cut.write_all(&wirebench_core::wire::control::header(20)[..5]).unwrap();
    // Serve is stuck writing to the deaf client: one of its threads is in a send to it.
    until("serve blocked on the deaf client", 20 * SECOND, || raw::blocked_sending(std::process::id(), addr, deaf_at));
    assert!(srv.counters().tcp_probes > 0, "it answered some before the buffers filled");
    stop_within(srv, SECOND);
    let _ = deaf.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    let _ = deaf.flush();
}

/// A connection that sends nothing (or dribbles a partial frame) is
/// closed at the first-frame timeout, an idle probe connection at the idle timeout.
#[test]
fn slowloris_and_idle_connections_time_out() {
    let srv = serve_with(|c| {
        c.first_frame_timeout = Duration::from_millis(300);
        c.idle_timeout = Duration::from_millis(600);
    });
    let addr = srv.local_addr();
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut dribble = TcpStream::connect(addr).unwrap();
    let mut idle = TcpStream::connect(addr).unwrap();
    let mut p = [0u8; 32];
    probe::init(&mut p, 1, 0);
    idle.write_all(&p).unwrap();
    for c in [&mut silent, &mut dribble, &mut idle] {
        c.set_read_timeout(Some(10 * SECOND)).unwrap();
    }
    let mut reply = [0u8; 32];
    idle.read_exact(&mut reply).unwrap();
    // One byte every 100 ms never completes a frame.
    for b in &p[..3] {
        dribble.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut b = [0u8; 1];
    for (name, c) in [("silent", &mut silent), ("dribble", &mut dribble), ("idle", &mut idle)] {
        assert!(matches!(c.read(&mut b), Ok(0)), "{name}: serve closed it");
    }
    assert_eq!(srv.stop().timed_out, 3);
}

/// A client turned away at the connection cap is told why: `ping` and
/// `stream` print the reason instead of "is serve running?".
#[test]
fn a_refused_client_is_told_why() {
    let srv = serve_with(|c| c.max_connections = 2);
    let addr = srv.local_addr();
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    until("both connections accepted", 10 * SECOND, || srv.counters().tcp_connections == 2);
    let target = addr.to_string();
    let r = wirebench(&["ping", &target, "--proto", "tcp", "--count", "3", "-q"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("connection limit"), "{}", r.err);
    let r = wirebench(&["stream", &target, "--count", "10", "-q"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("connection limit"), "{}", r.err);
    drop(held);
    assert!(srv.stop().refused_connections >= 2);
}

/// `--ttl 0` and `--ttl 256` are usage errors, and so are limits of 0.
#[test]
fn serve_refuses_ttl_0_and_256_and_zero_limits() {
    for bad in [
        &["--ttl", "0"][..],
        &["--ttl", "256"],
        &["--max-duration", "0s"],
        &["--idle-timeout", "0s"],
        &["--max-sessions", "0"],
        &["--max-connections", "0"],
        &["--max-connections-per-source", "0"],
        &["--token", ""],
        &["--token", "hunter2"],
    ] {
        let r = wirebench(&[&["serve", "--listen", "127.0.0.1:0"][..], bad].concat());
        assert_eq!(r.code, 2, "{bad:?}: {r:?}");
        assert_eq!(r.err.trim().lines().count(), 1, "{bad:?}: {}", r.err);
    }
    let r = wirebench(&["serve", "--listen", "127.0.0.1:0", "--token", "hunter2"]);
    assert!(r.err.contains("about 27 bits of entropy, under 128"), "{}", r.err);
    assert!(r.err.contains("--weak-token"), "{}", r.err);
}

/// A client meeting an older serve (control version 2) says so in one line naming both
/// versions (a stand-in serve answers its hello as a version-2 serve did: an error frame).
#[test]
fn a_client_meeting_an_older_serve_names_its_version() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap().to_string();
    let old = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut h = [0u8; 8];
        c.read_exact(&mut h).unwrap();
        let _ = c.write_all(&wirebench_core::wire::control::legacy_refusal(
            2,
            "bad control frame: unsupported wire version 3",
        ));
    });
    let r = wirebench(&["stream", &target, "--count", "10", "-q", "--no-hiccup"]);
    old.join().unwrap();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("speaks control version 2, this client 3"), "{}", r.err);
    assert_eq!(r.err.trim().lines().count(), 1, "{}", r.err);
}

/// One source cannot take the port: past its share of connections it is told why, and a
/// client from another address is still answered (one source holding all 1,024 connections
/// left TCP pings 0 of 20 answered and streams refused).
#[test]
fn one_source_cannot_hold_every_connection() {
    let srv = serve_with(|c| {
        c.max_connections = 32;
        c.max_connections_per_source = 8;
    });
    let addr = srv.local_addr();
    let from = |last: u8| connect_from(last, addr);
    let mut held: Vec<TcpStream> = (0..32).map(|_| from(2)).collect();
    until("its share accepted", 10 * SECOND, || srv.counters().tcp_connections == 8);
    let mut got = Vec::new();
    let _ = held[31].read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("127.0.0.2 already has 8 connections to this serve"), "{text}");
    let r = wirebench(&["ping", &addr.to_string(), "--proto", "tcp", "--count", "5", "-q"]);
    assert_eq!(r.code, 0, "another source is answered: {r:?}");
    drop(held);
    assert!(srv.stop().refused_connections >= 24);
}

/// A TCP connection to `addr` from the loopback address 127.0.0.`last` (5 s read timeout).
fn connect_from(last: u8, addr: std::net::SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, last], 0)).into()).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(5 * SECOND)).unwrap();
    s
}

/// A mesh agent's serve keeps a quarter of its connections for the fleet's own agents:
/// strangers from any number of addresses stop short of it, and a peer still gets in.
#[test]
fn strangers_cannot_take_the_places_kept_for_the_fleet() {
    let known = wirebench::accept::Known::default();
    known.set([std::net::IpAddr::from([127, 0, 0, 1])].into());
    let srv = serve_with(|c| {
        c.max_connections = 16;
        c.known_sources = Some(known.clone());
    });
    let addr = srv.local_addr();
    let from = |last: u8| connect_from(last, addr);
    // Twelve strangers from four addresses, then a thirteenth.
    let mut held: Vec<TcpStream> = (0..13).map(|i| from(2 + i % 4)).collect();
    until("the strangers' places taken", 10 * SECOND, || srv.counters().tcp_connections == 12);
    let mut got = Vec::new();
    let _ = held[12].read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("at its limit for connections from outside its fleet (12 of 16)"), "{text}");
    // 127.0.0.1 is a known peer: its TCP probes are answered.
    let r = wirebench(&["ping", &addr.to_string(), "--proto", "tcp", "--count", "5", "-q"]);
    assert_eq!(r.code, 0, "a peer is answered: {r:?}");
    drop(held);
    assert_eq!(srv.stop().refused_connections, 1);
}
