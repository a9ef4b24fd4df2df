//! `serve --stamp` on loopback, driven packet by packet: stateful numbering per session, the
//! allow-list, the per-source rate cap, authentication and malformed packets, each refusal
//! counted by its cause and never answered.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use wirebench::serve::{Config, CounterSnapshot, Server};
use wirebench::shutdown::Shutdown;
use wirebench::stamp::StampConfig;
use wirebench_core::reflect::Prefix;
use wirebench_core::wire::stamp::{ErrorEstimate, Key, Reflected, Sender, TsFormat};

fn reflector(stateful: bool, allow: &[&str], max_rate: Option<f64>, key: Option<Key>) -> Server {
    let cfg = Config {
        stamp: Some(StampConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            key,
            stateful,
            format: TsFormat::Ntp,
            allow: allow.iter().map(|p| p.parse::<Prefix>().unwrap()).collect(),
            max_rate,
        }),
        ..Config::loopback()
    };
    Server::start(&cfg, Shutdown::new()).unwrap()
}

fn sender(key: Option<Key>, ssid: u16) -> Sender {
    Sender { key, format: TsFormat::Ntp, error: ErrorEstimate(1), ssid }
}

/// Sends test packet `seq` from `sock` and reads the reflection.
fn exchange(sock: &UdpSocket, s: &Sender, seq: u32) -> Reflected {
    let mut pkt = vec![0u8; if s.key.is_some() { 112 } else { 44 }];
    s.init(&mut pkt);
    s.stamp(&mut pkt, seq, 1_795_910_400_000_000_000);
    sock.send(&pkt).unwrap();
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("a reflection within the read timeout");
    s.parse(&buf[..n]).unwrap()
}

fn client(srv: &Server, from: &str) -> UdpSocket {
    let sock = UdpSocket::bind(from).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    sock.connect(srv.stamp_addr().unwrap()).unwrap();
    sock
}

/// Waits until `pred` holds for serve's counters (each refusal is counted by the reflector
/// thread after the packet arrives, with no reply to wait for).
fn counted(srv: &Server, pred: impl Fn(&CounterSnapshot) -> bool) -> CounterSnapshot {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = srv.counters();
        if pred(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "not counted: {c}");
        std::thread::park_timeout(Duration::from_millis(2));
    }
}

#[test]
fn stateful_mode_numbers_each_session_itself_and_stateless_echoes() {
    let srv = reflector(true, &[], None, None);
    let (a, b) = (client(&srv, "127.0.0.1:0"), client(&srv, "127.0.0.1:0"));
    let s1 = sender(None, 1);
    let got: Vec<(u32, u32)> =
        [100, 200, 300].iter().map(|&q| exchange(&a, &s1, q)).map(|r| (r.seq, r.sender_seq)).collect();
    assert_eq!(got, [(0, 100), (1, 200), (2, 300)], "the reflector's own count, the sender's number copied");
    assert_eq!(exchange(&a, &sender(None, 2), 7).seq, 0, "another SSID is another session");
    assert_eq!(exchange(&b, &s1, 7).seq, 0, "another source port is another session");
    assert_eq!(exchange(&a, &s1, 400).seq, 3);
    srv.stop();
    let srv = reflector(false, &[], None, None);
    let a = client(&srv, "127.0.0.1:0");
    assert_eq!(exchange(&a, &s1, 100).seq, 100, "stateless echoes the sender's number");
    srv.stop();
}

#[test]
fn sources_outside_the_allow_list_and_over_their_rate_are_counted_not_answered() {
    let srv = reflector(false, &["127.0.0.2"], None, None);
    let ok = client(&srv, "127.0.0.2:0");
    let s = sender(None, 1);
    assert_eq!(exchange(&ok, &s, 1).sender_seq, 1);
    let other = client(&srv, "127.0.0.1:0");
    let mut pkt = [0u8; 44];
    s.init(&mut pkt);
    other.send(&pkt).unwrap();
    let c = counted(&srv, |c| c.stamp_not_allowed == 1);
    assert_eq!(c.stamp_reflected, 1);
    srv.stop();

    // 10/s: a burst of 10 answered, the rest of 50 sent at once refused.
    let srv = reflector(false, &[], Some(10.0), None);
    let sock = client(&srv, "127.0.0.1:0");
    for _ in 0..50 {
        sock.send(&pkt).unwrap();
    }
    let c = counted(&srv, |c| c.stamp_reflected + c.stamp_over_rate == 50);
    assert!((10..=11).contains(&c.stamp_reflected), "{c}");
    srv.stop();
}

#[test]
fn authenticated_mode_drops_wrong_keys_and_short_packets() {
    let key = Key::new(&[3u8; 16]).unwrap();
    let srv = reflector(false, &[], None, Some(key.clone()));
    let sock = client(&srv, "127.0.0.1:0");
    let r = exchange(&sock, &sender(Some(key), 5), 9);
    assert_eq!((r.sender_seq, r.ssid, r.len), (9, 5, 112));
    let wrong = sender(Key::new(&[4u8; 16]), 5);
    let mut pkt = [0u8; 112];
    wrong.init(&mut pkt);
    wrong.stamp(&mut pkt, 1, 0);
    sock.send(&pkt).unwrap();
    sock.send(&pkt[..44]).unwrap();
    let c = counted(&srv, |c| c.stamp_auth_failures == 1 && c.stamp_malformed == 1);
    assert_eq!(c.stamp_reflected, 1);
    assert!(c.to_string().contains("1 STAMP authentication failure"), "{c}");
    srv.stop();
}

/// `ping stamp://` against the reflector: the report says `proto: stamp` and fits the
/// schema (which once knew only `udp` and `tcp`).
#[test]
fn a_stamp_ping_report_fits_the_schema() {
    let srv = reflector(false, &[], None, None);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stamp.json");
    let target = format!("stamp://{}", srv.stamp_addr().unwrap());
    let r = crate::support::wirebench(&[
        "ping",
        &target,
        "--count",
        "20",
        "--no-hiccup",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = crate::support::read_json(&json);
    crate::support::assert_valid_report(&v);
    assert_eq!(v["results"]["proto"], "stamp");
    assert_eq!(v["results"]["responders"][0]["received"], 20);
    srv.stop();
}
