//! `wirebench room` against hostile and careless clients: what is a request, HTTP refusals, the message and frame cap,
//! a member that never reads, rooms freed after close, slowloris handshakes, and accept
//! backing off when descriptors run out.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};
use wirebench::room::{self, Counters, RoomServer};

type Client = WebSocket<TcpStream>;

fn start(cfg: room::Config) -> RoomServer {
    RoomServer::start(&cfg).expect("room starts on loopback")
}

fn client(addr: SocketAddr, path: &str) -> Client {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (ws, _) = tungstenite::client(format!("ws://{addr}{path}"), s).expect("handshake");
    ws
}

/// The next data message (text), within the socket's read timeout.
fn next_text(ws: &mut Client) -> String {
    loop {
        match ws.read().expect("a message before the timeout") {
            Message::Close(f) => panic!("closed by the room: {f:?}"),
            Message::Text(t) => return t.as_str().to_owned(),
            Message::Binary(b) => return String::from_utf8_lossy(&b).into_owned(),
            _ => {}
        }
    }
}

/// Reads until the message `last`, returning everything up to it.
fn until(ws: &mut Client, last: &str) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let t = next_text(ws);
        let done = t == last;
        got.push(t);
        if done {
            return got;
        }
    }
}

/// Waits (bounded) until the counters satisfy `f`.
fn wait_for(r: &RoomServer, what: &str, f: impl Fn(&Counters) -> bool) -> Counters {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let c = r.counters();
        if f(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "{what}: {c:?}");
        std::thread::park_timeout(Duration::from_millis(5));
    }
}

/// The room matched the bytes `"req":true`: a request with JSON spacing was relayed, and a
/// relayed message that merely mentioned the bytes in a string was answered.
#[test]
fn requests_are_the_json_req_field() {
    let r = start(room::Config::loopback());
    let (mut a, mut b) = (client(r.local_addr(), "/rooms/req"), client(r.local_addr(), "/rooms/req"));
    let spaced = r#"{ "type": "save", "req" : true }"#;
    let mention = r#"{"type":"cursor","note":"\"req\":true"}"#;
    let (end, mark) = (r#"{"type":"end"}"#, r#"{"type":"mark","req":true}"#);
    for m in [spaced, mention, end, mark] {
        a.send(Message::text(m)).unwrap();
    }
    assert_eq!(until(&mut b, end), [mention, end], "relayed: everything but the requests");
    assert_eq!(until(&mut a, mark), [spaced, mark], "answered: the requests only");
    let c = r.stop();
    assert_eq!((c.received, c.replies, c.sent), (4, 2, 4));
}

fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// tungstenite dropped anything that was not an upgrade without a word.
#[test]
fn non_websocket_requests_get_400_or_426() {
    let r = start(room::Config::loopback());
    let plain = exchange(r.local_addr(), b"GET /rooms/x HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(plain.starts_with("HTTP/1.1 426 Upgrade Required\r\n"), "{plain}");
    assert!(plain.contains("Upgrade: websocket\r\n") && plain.contains("not a WebSocket upgrade"), "{plain}");
    let junk = exchange(r.local_addr(), b"\x16\x03\x01\x00\x05hello\r\n\r\n");
    assert!(junk.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{junk}");
    let post = exchange(r.local_addr(), b"POST /rooms/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 400 "), "{post}");
    let c = r.stop();
    assert_eq!((c.refused_http, c.connections), (3, 0));
}

fn close_code(ws: &mut Client) -> Option<u16> {
    loop {
        match ws.read() {
            Ok(Message::Close(f)) => return f.map(|f| u16::from(f.code)),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// The frame cap was 16 MiB while messages were capped at 1 MiB: a frame header declaring
/// 16 MiB made tungstenite reserve it. Now frames and messages share the cap, and a client
/// over it is closed with 1009.
#[test]
fn over_the_cap_closes_1009_and_frames_are_capped_like_messages() {
    let mut cfg = room::Config::loopback();
    cfg.limits.max_message = 1024;
    let r = start(cfg);
    let mut ws = client(r.local_addr(), "/rooms/big");
    ws.send(Message::text("x".repeat(1024))).unwrap();
    ws.send(Message::text("x".repeat(1025))).unwrap();
    assert_eq!(close_code(&mut ws), Some(u16::from(CloseCode::Size)));
    // A bare header declaring a 16 MiB frame (masked text, 64-bit length), nothing else.
    let mut ws = client(r.local_addr(), "/rooms/big");
    let mut header = vec![0x81, 0xFF];
    header.extend_from_slice(&(16u64 << 20).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    ws.get_mut().write_all(&header).unwrap();
    assert_eq!(close_code(&mut ws), Some(1009), "refused on the header, before any payload");
    let c = wait_for(&r, "both closed", |c| c.open == 0);
    assert_eq!((c.too_big, c.received), (2, 1));
}

/// A member that never reads kept 1,024 messages of up to 1 MiB each in its room (2 GiB).
/// Now its queue has a byte budget: past it, close 1013, and the bytes are given back.
#[test]
fn a_member_that_never_reads_is_dropped_with_1013() {
    let mut cfg = room::Config::loopback();
    (cfg.limits.max_message, cfg.limits.member_backlog) = (16 << 10, 64 << 10);
    let r = start(cfg);
    let addr = r.local_addr();
    let sleeper = client(addr, "/rooms/slow");
    let mut reader = client(addr, "/rooms/slow");
    let mut sender = client(addr, "/rooms/slow");
    let chunk = format!("{{\"type\":\"big\",\"pad\":\"{}\"}}", "x".repeat(16_000));
    // The sleeper's socket buffers take a few MB first; at most 64 MB are sent.
    let mut sent = 0;
    while r.counters().dropped_slow == 0 {
        assert!(sent < 4_000, "never dropped: {:?}", r.counters());
        sender.send(Message::text(chunk.as_str())).unwrap();
        sent += 1;
        // the reader keeps up, and is never dropped
        assert_eq!(next_text(&mut reader).len(), chunk.len());
    }
    let c = wait_for(&r, "the sleeper is gone", |c| c.open == 2);
    assert_eq!(c.dropped_slow, 1);
    assert!(c.backlog_bytes <= 64 << 10, "{c:?}");
    drop(sleeper);
    sender.send(Message::text(r#"{"type":"after"}"#)).unwrap();
    assert_eq!(until(&mut reader, r#"{"type":"after"}"#).last().map(String::as_str), Some(r#"{"type":"after"}"#));
}

/// Many members that never read, each within its own budget, could together queue
/// `connections x member-backlog` bytes; a total cap that drops whichever member a relay
/// would overfill then drops members that read promptly (in any room) as soon as the
/// non-readers have filled it. Now the queues of all members never pass `--max-backlog`, and
/// past it the longest queues are dropped (1013): the non-readers, never a prompt reader.
#[test]
fn all_queues_together_stay_within_max_backlog_and_only_hogs_pay() {
    let mut cfg = room::Config::loopback();
    (cfg.limits.max_message, cfg.limits.member_backlog, cfg.limits.total_backlog) = (16 << 10, 4 << 20, 128 << 10);
    let total = cfg.limits.total_backlog;
    let r = start(cfg);
    let addr = r.local_addr();
    // the reader joins first, so a relay reaches it before the sleepers
    let mut reader = client(addr, "/rooms/hogs");
    let sleepers: Vec<Client> = (0..4).map(|_| client(addr, "/rooms/hogs")).collect();
    let mut sender = client(addr, "/rooms/hogs");
    let (mut alice, mut bob) = (client(addr, "/rooms/bystanders"), client(addr, "/rooms/bystanders"));
    wait_for(&r, "joined", |c| c.open == 8);
    let chunk = format!("{{\"type\":\"big\",\"pad\":\"{}\"}}", "x".repeat(16_000));
    // The sleepers' socket buffers take some first; at most 64 MB are sent. Every sleeper is
    // dropped in turn as relays keep coming, each well within its own 4 MiB.
    let mut sent = 0;
    loop {
        let c = r.counters();
        assert!(c.backlog_bytes <= total, "all queues {} over the budget {total}: {c:?}", c.backlog_bytes);
        if c.dropped_slow == 4 {
            break;
        }
        assert!(sent < 4_000, "not every sleeper dropped: {c:?}");
        sender.send(Message::text(chunk.as_str())).unwrap();
        sent += 1;
        // the prompt reader hears every message, and the bystanders' room works throughout
        assert_eq!(next_text(&mut reader).len(), chunk.len());
        alice.send(Message::text(format!("{{\"type\":\"chat\",\"n\":{sent}}}"))).unwrap();
        assert_eq!(next_text(&mut bob), format!("{{\"type\":\"chat\",\"n\":{sent}}}"));
    }
    let c = wait_for(&r, "the sleepers are gone", |c| c.open == 4);
    assert_eq!(c.dropped_slow, 4, "{c:?}");
    assert!(c.backlog_bytes <= total, "{c:?}");
    drop(sleepers);
    sender.send(Message::text(r#"{"type":"after"}"#)).unwrap();
    assert_eq!(until(&mut reader, r#"{"type":"after"}"#).last().map(String::as_str), Some(r#"{"type":"after"}"#));
}

/// A member that sends nothing and answers no ping held its place forever (no idle
/// timeout). Now it is pinged after half the timeout and closed with 1001 at the timeout.
#[test]
fn a_silent_member_is_closed_at_the_idle_timeout() {
    let mut cfg = room::Config::loopback();
    cfg.idle_timeout = Duration::from_millis(400);
    let r = start(cfg);
    // the client reads only after the room has given up on it (tungstenite answers a ping
    // only when it reads)
    let mut silent = client(r.local_addr(), "/rooms/idle");
    let c = wait_for(&r, "closed as idle, gone", |c| c.idle_closed == 1 && c.open == 0);
    assert_eq!(c.rooms, 0);
    let mut saw_ping = false;
    let code = loop {
        match silent.read() {
            Ok(Message::Ping(_)) => saw_ping = true,
            Ok(Message::Close(f)) => break f.map(|f| u16::from(f.code)),
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    };
    assert!(saw_ping, "pinged before being closed");
    assert_eq!(code, Some(u16::from(CloseCode::Away)));
}

/// Stopping the room tells every member why (close 1001), in a second whatever they do.
#[test]
fn stopping_closes_every_member_with_1001() {
    let r = start(room::Config::loopback());
    let mut ws = client(r.local_addr(), "/rooms/stop");
    let mut deaf = client(r.local_addr(), "/rooms/stop");
    deaf.get_mut().set_nonblocking(true).unwrap();
    wait_for(&r, "joined", |c| c.open == 2);
    let t0 = Instant::now();
    let _ = r.stop();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(close_code(&mut ws), Some(u16::from(CloseCode::Away)));
}

/// Rooms and queued bytes are freed when members leave, however they leave.
#[test]
fn rooms_are_freed_after_close() {
    let r = start(room::Config::loopback());
    let mut members: Vec<Client> = (0..9).map(|i| client(r.local_addr(), &format!("/rooms/free-{}", i % 3))).collect();
    let c = wait_for(&r, "all joined", |c| c.open == 9);
    assert_eq!(c.rooms, 3);
    for (i, m) in members.iter_mut().enumerate() {
        m.send(Message::text(format!("{{\"type\":\"hello\",\"n\":{i}}}"))).unwrap();
    }
    // three leave with a close handshake, three just go, three stay
    for mut m in members.drain(..3) {
        m.close(None).unwrap();
        while m.read().is_ok() {}
    }
    members.drain(..3).for_each(drop);
    let c = wait_for(&r, "six left", |c| c.open == 3);
    assert!(c.rooms >= 1);
    members.clear();
    let c = wait_for(&r, "everyone left", |c| c.open == 0 && c.rooms == 0);
    assert_eq!(c.backlog_bytes, 0);
    assert_eq!(c.closed_clean, 3);
    assert_eq!(c.closed_clean + c.closed_abnormal, 9);
}

/// Connections that open and never finish their handshake held the room (no timeout, no
/// cap). Now: a handshake timeout, a cap, and at the cap the oldest unfinished handshake
/// makes room for the newcomer.
#[test]
fn slowloris_handshakes_cannot_hold_the_room() {
    let mut cfg = room::Config::loopback();
    cfg.limits.max_connections = 64;
    cfg.handshake_timeout = Duration::from_secs(30);
    let r = start(cfg);
    let stalled: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(r.local_addr()).unwrap();
            s.write_all(b"GET /rooms/x HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    let c = wait_for(&r, "every stalled one admitted or refused, the cap held", |c| {
        c.evicted + c.refused_full == 300 - 64 && c.live <= 64
    });
    assert!(c.evicted > 0, "{c:?}");
    let mut a = client(r.local_addr(), "/rooms/real");
    let mut b = client(r.local_addr(), "/rooms/real");
    a.send(Message::text(r#"{"type":"hi"}"#)).unwrap();
    assert_eq!(next_text(&mut b), r#"{"type":"hi"}"#);
    drop(stalled);
    // and a handshake that stalls past the timeout is closed
    let mut cfg = room::Config::loopback();
    cfg.handshake_timeout = Duration::from_millis(200);
    let r = start(cfg);
    let mut slow = TcpStream::connect(r.local_addr()).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    slow.write_all(b"GET /rooms/x HTTP/1.1\r\n").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(slow.read(&mut buf).unwrap_or(0), 0, "closed by the room");
    // The timeout is counted before the connection's guard drops (and `live` falls), so
    // wait for both rather than read `live` at the first.
    let c = wait_for(&r, "timed out and let go", |c| c.handshake_timeouts == 1 && c.live == 0);
    assert_eq!(c.handshake_timeouts, 1);
}

/// At the cap with every connection a member (no handshake to evict), a newcomer is told
/// why (503 with a reason) instead of being cut off; once a member leaves, one can join.
#[test]
fn at_the_connection_cap_a_newcomer_gets_503_and_a_reason() {
    let mut cfg = room::Config::loopback();
    cfg.limits.max_connections = 2;
    let r = start(cfg);
    let a = client(r.local_addr(), "/rooms/full");
    let _b = client(r.local_addr(), "/rooms/full");
    wait_for(&r, "both joined", |c| c.open == 2);
    let answer = exchange(r.local_addr(), b"GET /rooms/full HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
    assert!(answer.ends_with("wirebench room: at its connection limit\r\n"), "{answer}");
    assert_eq!(r.counters().refused_full, 1);
    drop(a);
    wait_for(&r, "one left", |c| c.live == 1);
    let mut c = client(r.local_addr(), "/rooms/full");
    c.send(Message::text(r#"{"type":"in"}"#)).unwrap();
}

/// The connection cap stays below the open-file limit (so accepted connections alone never
/// reach EMFILE), and the queue budgets must each hold what they are for.
#[test]
fn the_connection_cap_stays_below_the_open_file_limit() {
    let args = |a: &[&str]| wirebench::flags::parse_mode::<room::Args>("room", a).unwrap();
    let c = room::Config::from_args(&args(&[]), 1_000).unwrap();
    assert_eq!(c.limits.max_connections, 1_000 - room::SPARE_FDS);
    let c = room::Config::from_args(&args(&[]), 1 << 20).unwrap();
    assert_eq!(c.limits.max_connections, room::DEFAULT_MAX_CONNECTIONS);
    assert_eq!(c.limits.budget_bytes(), 701_988_864, "the 702 MB printed at start");
    let e = room::Config::from_args(&args(&["--max-connections", "1000"]), 1_000).unwrap_err();
    assert!(e.0.contains("this process may open 1000 files, so at most"), "{}", e.0);
    for bad in [
        &["--max-message", "1MiB", "--member-backlog", "512KiB"][..],
        &["--max-backlog", "1KiB"],
        &["--idle-timeout", "0s"],
    ] {
        assert!(room::Config::from_args(&args(bad), 1 << 20).is_err(), "{bad:?}");
    }
    let run = crate::support::wirebench(&["room", "--listen", "127.0.0.1:0", "--max-connections", "999999999"]);
    assert_eq!(run.code, 2, "{}{}", run.out, run.err);
    assert!(run.err.contains("--max-connections 999999999: this process may open"), "{}", run.err);
}

/// On EMFILE the accept loop spun at 100 % CPU. Now it waits `BACKOFF` after each such
/// failure: on a paused clock, 1 s of failures is about 10 attempts. (A loop that does not
/// back off makes 1,000 attempts at once, then this fake stops it.)
#[tokio::test(start_paused = true)]
async fn accept_backs_off_when_descriptors_run_out() {
    let calls = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let t0 = tokio::time::Instant::now();
    let accept = || {
        if calls.fetch_add(1, Ordering::Relaxed) == 1_000 {
            let _ = stop.send(true);
        }
        async { Err::<(), _>(std::io::Error::from_raw_os_error(nix::errno::Errno::EMFILE as i32)) }
    };
    let run = room::accept::accept_loop(accept, |()| {}, &errors, stop_rx);
    let _ = tokio::time::timeout(Duration::from_secs(1), run).await;
    let n = calls.load(Ordering::Relaxed);
    assert!(n <= 1 + 1_000 / room::accept::BACKOFF.as_millis() as u64, "{n} accept calls in {:?}", t0.elapsed());
    assert_eq!(errors.load(Ordering::Relaxed), n);
}
