//! `wirebench relay` against replays and spoofing, in namespaces: a "seen" captured on the
//! wire and replayed after its carrier stopped does not stop the other relay from taking
//! over; data captured in an earlier run and replayed is refused and counted; 300 spoofed
//! senders do not keep a new sender's datagrams from being re-emitted; re-emissions of an
//! emitting socket closed for a newer sender are not forwarded back.

#![cfg(feature = "netns-tests")]

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use wirebench_core::auth::{DEFAULT_SALT, Key};
use wirebench_core::wire::relay::{self as wire, Header, RelayKind};

use crate::lab::Lab;
use crate::multicast_relay::{Proc, in_ns, relay_args, relay_results, routed_nodes, segment_and_remote, wall_now_ns};

const TOKEN: &str = "relay-freshness-test-token";

/// A raw UDP socket in `ns`: a copy of every UDP datagram the namespace receives, as an
/// eavesdropper on the path would capture it.
fn capture(ns: &str) -> UdpSocket {
    in_ns(ns, || {
        let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::UDP)).unwrap();
        let s: UdpSocket = s.into();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        s
    })
}

/// The next captured datagram sent from `from` (IP and UDP headers removed), passing over
/// others; `None` once nothing more is queued.
fn captured_from(raw: &UdpSocket, from: SocketAddrV4) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 70_000];
    loop {
        let n = raw.recv(&mut buf).ok()?;
        let ihl = usize::from(buf[0] & 0x0f) * 4;
        if n < ihl + 8 {
            continue;
        }
        let src = SocketAddrV4::new(
            Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]),
            u16::from_be_bytes([buf[ihl], buf[ihl + 1]]),
        );
        if src == from {
            return Some(buf[ihl + 8..n].to_vec());
        }
    }
}

fn local_sender(ns: &str, ip: Ipv4Addr, group: SocketAddrV4) -> UdpSocket {
    in_ns(ns, move || {
        let s = UdpSocket::bind((ip, 0)).unwrap();
        let o = wirebench_net::multicast::SenderOpts { interface: Some(ip), ttl: 1, loopback: true };
        wirebench_net::multicast::set_sender(&s, group.into(), &o).unwrap();
        s
    })
}

/// Two relays on a segment with a token: s1 (the lower address) carries the group. A "seen"
/// s1 sent s2 is captured; s1 stops; the capture is replayed to s2 from s1's address every
/// 100 ms. s2 still takes over within the documented 7 s (before: never, it stayed passive
/// and the segment went silent for its peers).
#[test]
fn a_replayed_seen_after_the_carrier_stops_does_not_stop_failover() {
    let mut lab = Lab::new("rlyseen");
    let [s1, s2, z] = segment_and_remote(&mut lab, 146);
    let group = "239.255.146.1:5146";
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let addr = |ip: &str| -> SocketAddrV4 { format!("{ip}:7880").parse().unwrap() };
    let (a1, a2, az) = (addr(&s1.1), addr(&s2.1), addr(&z.1));
    let peers = format!("{a1},{a2},{az}");
    // z runs no relay: a socket on its relay port sees what the segment forwards.
    let z_sock = in_ns(&z.0, move || UdpSocket::bind(az).unwrap());
    z_sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let raw = capture(&s2.0);
    let (j1, j2) = (dir.path().join("s1.json"), dir.path().join("s2.json"));
    let start = |node: &(String, String), json: &std::path::Path| {
        let mut args = relay_args(&node.1, &peers, &[group], json.to_str().unwrap());
        args.extend(["--token", TOKEN, "--weak-token"]);
        Proc::start(&node.0, &args, "relay listening")
    };
    let r1 = start(&s1, &j1);
    let r2 = start(&s2, &j2);
    let local = local_sender(&s2.0, s2.1.parse().unwrap(), gaddr);
    // Capture a "seen" from s1 (its answer to one of s2's probes), and see s1 carry the
    // segment's datagrams to z.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = None;
    let mut carried_by_s1 = false;
    let mut buf = [0u8; 2048];
    let mut i = 0u32;
    while seen.is_none() || !carried_by_s1 {
        assert!(Instant::now() < deadline, "setup: seen {:?}, carried by s1 {carried_by_s1}", seen.is_some());
        while let Some(d) = captured_from(&raw, a1) {
            if wire::decode(&d).is_ok_and(|r| r.header.kind == RelayKind::Seen) {
                seen = Some(d);
            }
        }
        local.send_to(format!("n {i}").as_bytes(), gaddr).unwrap();
        i += 1;
        if let Ok((n, from)) = z_sock.recv_from(&mut buf) {
            let is_data = wire::decode(&buf[..n]).is_ok_and(|r| r.header.kind == RelayKind::Data);
            carried_by_s1 |= is_data && from == std::net::SocketAddr::V4(a1);
            assert!(!(is_data && from == std::net::SocketAddr::V4(a2)), "s2 is passive while s1 carries");
        }
    }
    let seen = seen.unwrap();
    let _ = r1.stop();
    let stopped = Instant::now();
    // The attacker, on s1's address now that s1 is gone.
    let attacker = in_ns(&s1.0, move || UdpSocket::bind(a1).unwrap());
    let mut next_replay = Instant::now();
    let mut replays = 0u32;
    let took_over = loop {
        let now = Instant::now();
        assert!(now < stopped + Duration::from_secs(20), "s2 never took over ({replays} replays of the seen)");
        if now >= next_replay {
            attacker.send_to(&seen, a2).unwrap();
            replays += 1;
            next_replay = now + Duration::from_millis(100);
        }
        local.send_to(format!("n {i}").as_bytes(), gaddr).unwrap();
        i += 1;
        if let Ok((n, from)) = z_sock.recv_from(&mut buf)
            && from == std::net::SocketAddr::V4(a2)
            && wire::decode(&buf[..n]).is_ok_and(|r| r.header.kind == RelayKind::Data)
        {
            break stopped.elapsed();
        }
    };
    // Keep replaying a while after the takeover: it must not make s2 passive again.
    let mut from_s2 = 0u32;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if Instant::now() >= next_replay {
            attacker.send_to(&seen, a2).unwrap();
            replays += 1;
            next_replay = Instant::now() + Duration::from_millis(100);
        }
        local.send_to(format!("n {i}").as_bytes(), gaddr).unwrap();
        i += 1;
        while let Ok((_, from)) = z_sock.recv_from(&mut buf) {
            from_s2 += u32::from(from == std::net::SocketAddr::V4(a2));
        }
    }
    let text = r2.stop();
    eprintln!("failover after {took_over:?} despite {replays} replays; then {from_s2} datagrams from s2 in 3 s");
    assert!(took_over < Duration::from_secs(8), "took over after {took_over:?}: {text}");
    assert!(from_s2 > 50, "s2 kept carrying: {from_s2}\n{text}");
    let r = relay_results(&j2);
    assert!(r.groups[0].carried, "{text}");
    let p1 = r.peers.iter().find(|p| p.addr == a1.to_string()).unwrap();
    assert!(p1.drops.stale > 0, "replays answering old probes are counted stale: {text}");
}

/// Data from a relay run captured on the wire, replayed to the peer's next run 11 s later
/// (outside the 10 s window): none of it is re-emitted, every datagram is counted `stale`,
/// and a fresh one after it is (before: every replayed datagram was re-emitted).
#[test]
fn datagrams_captured_in_an_earlier_run_are_refused_and_counted() {
    let mut lab = Lab::new("rlyold");
    let nodes = routed_nodes(&mut lab, 2, 147);
    let ((na, a_ip), (nb, b_ip)) = (nodes[0].clone(), nodes[1].clone());
    let group = "239.255.146.2:5147";
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb): (SocketAddrV4, SocketAddrV4) =
        (format!("{a_ip}:7880").parse().unwrap(), format!("{b_ip}:7880").parse().unwrap());
    let b_addr: Ipv4Addr = b_ip.parse().unwrap();
    let raw = capture(&nb);
    let listener = in_ns(&nb, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    listener.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let relay = |ns: &str, ip: &str, peer: SocketAddrV4, json: &str| {
        let peer = peer.to_string();
        let mut args = relay_args(ip, &peer, &[group], json);
        args.extend(["--token", TOKEN, "--weak-token"]);
        Proc::start(ns, &args, "relay listening")
    };
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();
    // Run 1: 200 datagrams from A's segment, carried to B and re-emitted; captured on B.
    let (ra, rb) = (relay(&na, &a_ip, pb, &path("a.json")), relay(&nb, &b_ip, pa, &path("b1.json")));
    let local = local_sender(&na, a_ip.parse().unwrap(), gaddr);
    let mut captured = Vec::new();
    let mut heard = 0;
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    while captured.len() < 200 || heard < 200 {
        assert!(Instant::now() < deadline, "run 1: captured {}, heard {heard}", captured.len());
        if sent < 200 {
            local.send_to(format!("old {sent}").as_bytes(), gaddr).unwrap();
            sent += 1;
        }
        while let Some(d) = captured_from(&raw, pa) {
            if wire::decode(&d).is_ok_and(|r| r.header.kind == RelayKind::Data) {
                captured.push(d);
            }
        }
        while let Ok(n) = listener.recv(&mut buf) {
            heard += usize::from(buf[..n].starts_with(b"old "));
        }
    }
    let last_capture = Instant::now();
    let _ = (ra.stop(), rb.stop());
    // Run 2 of B, once the capture is older than the window (the scenario: a later run).
    let rb = relay(&nb, &b_ip, pa, &path("b2.json"));
    let age = Duration::from_secs(11);
    while last_capture.elapsed() < age {
        std::thread::sleep(age.saturating_sub(last_capture.elapsed()));
    }
    let attacker = in_ns(&na, move || UdpSocket::bind(pa).unwrap());
    for d in &captured {
        attacker.send_to(d, pb).unwrap();
    }
    let sender: SocketAddrV4 = format!("{a_ip}:4000").parse().unwrap();
    let fresh = Header { kind: RelayKind::Data, origin: 42, seq: 0, wall_ns: wall_now_ns(), group: gaddr, sender };
    let mut out = [0u8; 256];
    let n = wire::encode(&mut out, &fresh, b"fresh", Some(&Key::derive(TOKEN.as_bytes(), DEFAULT_SALT.as_bytes())))
        .unwrap();
    attacker.send_to(&out[..n], pb).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut replayed = 0;
    loop {
        assert!(Instant::now() < deadline, "the fresh datagram was not re-emitted");
        let Ok(n) = listener.recv(&mut buf) else { continue };
        replayed += usize::from(buf[..n].starts_with(b"old "));
        if &buf[..n] == b"fresh" {
            break;
        }
    }
    let text = rb.stop();
    eprintln!("{} captured datagrams replayed after 11 s: {replayed} re-emitted", captured.len());
    assert_eq!(replayed, 0, "{text}");
    let r = relay_results(std::path::Path::new(&path("b2.json")));
    let p = r.peers.iter().find(|p| p.addr == pa.to_string()).unwrap();
    assert_eq!((p.drops.stale, p.received.datagrams), (captured.len() as u64, 1), "{text}");
    assert!(text.contains(&format!("{} stale", captured.len())), "{text}");
}

/// Node B's relay for one group (plus `extra` arguments), its only peer node A's relay
/// address, where a bare socket plays that peer: `send` gives B a data datagram of an
/// original sender, as A's relay would.
struct FakePeer {
    _lab: Lab,
    _dir: tempfile::TempDir,
    nb: String,
    b_addr: Ipv4Addr,
    group: SocketAddrV4,
    json: std::path::PathBuf,
    relay: Proc,
    sock: UdpSocket,
    to: SocketAddrV4,
    seq: u64,
}

impl FakePeer {
    fn start(name: &str, base: usize, group: &str, extra: &[&str]) -> Self {
        let mut lab = Lab::new(name);
        let nodes = routed_nodes(&mut lab, 2, base);
        let ((na, a_ip), (nb, b_ip)) = (nodes[0].clone(), nodes[1].clone());
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("b.json");
        let (pa, pb): (SocketAddrV4, SocketAddrV4) =
            (format!("{a_ip}:7880").parse().unwrap(), format!("{b_ip}:7880").parse().unwrap());
        let peer = pa.to_string();
        let mut args = relay_args(&b_ip, &peer, &[group], json.to_str().unwrap());
        args.extend(extra);
        let relay = Proc::start(&nb, &args, "relay listening");
        let sock = in_ns(&na, move || UdpSocket::bind(pa).unwrap());
        let b_addr = b_ip.parse().unwrap();
        Self { _lab: lab, _dir: dir, nb, b_addr, group: group.parse().unwrap(), json, relay, sock, to: pb, seq: 0 }
    }

    /// One data datagram of `sender` (relay run `origin`) to B.
    fn send(&mut self, origin: u64, sender: SocketAddrV4, payload: &[u8]) {
        let h =
            Header { kind: RelayKind::Data, origin, seq: self.seq, wall_ns: wall_now_ns(), group: self.group, sender };
        self.seq += 1;
        let mut out = [0u8; 128];
        let n = wire::encode(&mut out, &h, payload, None).unwrap();
        self.sock.send_to(&out[..n], self.to).unwrap();
    }
}

/// Without a token a peer's address can be spoofed, and with it any original sender: 300
/// spoofed senders (in 1 s), then 30 new ones a second while a new real sender sends 1,000
/// datagrams. Every one of the real sender's is re-emitted (before: 0 of 1,000; the table
/// of 256 was full of senders heard within 30 s).
#[test]
fn three_hundred_spoofed_senders_do_not_lock_out_a_new_one() {
    let mut b = FakePeer::start("rlyspf", 149, "239.255.146.3:5149", &[]);
    let (gaddr, b_addr) = (b.group, b.b_addr);
    let listener = in_ns(&b.nb, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    listener.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let counter = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 64];
        let mut real = 0u32;
        while Instant::now() < deadline {
            let Ok(n) = listener.recv(&mut buf) else { continue };
            if buf[..n].starts_with(b"real ") {
                real += 1;
                if &buf[..n] == b"real 999" {
                    break;
                }
            }
        }
        real
    });
    let mut send = |sender: SocketAddrV4, payload: &[u8]| b.send(5, sender, payload);
    let spoofed = |k: u32| SocketAddrV4::new(Ipv4Addr::new(10, 200, (k / 250) as u8, (k % 250 + 1) as u8), 4000);
    // Pacing of the flood (a traffic shape, not a wait for anything).
    for k in 0..300 {
        send(spoofed(k), format!("spoof {k}").as_bytes());
        std::thread::sleep(Duration::from_micros(3_300));
    }
    let real = SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 1), 5000);
    let mut k = 300;
    for i in 0..1000 {
        send(real, format!("real {i}").as_bytes());
        if i % 33 == 0 {
            send(spoofed(k), format!("spoof {k}").as_bytes());
            k += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = counter.join().unwrap();
    let text = b.relay.stop();
    eprintln!("{k} spoofed senders; the real sender's datagrams re-emitted: {got} of 1000");
    assert_eq!(got, 1000, "{text}");
    let r = relay_results(&b.json);
    assert_eq!(r.groups[0].drops.senders_full, 0, "{text}");
}

/// With `--max-senders 1` two original senders take turns on the one emitting socket: each
/// new one closes the other's, often while the closed socket's re-emissions still wait,
/// looped back, in the group socket. Those are still the relay's own (the closed port counts
/// for a second): nothing of them is forwarded back to the peer.
#[test]
fn re_emissions_of_a_closed_emitting_socket_are_not_forwarded_back() {
    let mut b = FakePeer::start("rlyevict", 152, "239.255.146.4:5152", &["--max-senders", "1"]);
    let senders = [1, 2].map(|k| SocketAddrV4::new(Ipv4Addr::new(10, 202, 0, k), 5000));
    // Rounds of four datagrams from one sender, then four from the other, sent at once: the
    // relay reads them in two batches of one wake-up (a first batch after a quiet spell
    // offers four slots), so the second closes the first's socket before the first's
    // loopback copies are read. Paced between rounds (a traffic shape, not a wait).
    for round in 0..300 {
        for &sender in &senders {
            for i in 0..4 {
                b.send(6, sender, format!("r{round} {i}").as_bytes());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let text = b.relay.stop();
    let r = relay_results(&b.json);
    let g = &r.groups[0];
    eprintln!("re-emitted {}, looped {}", g.reemitted.datagrams, g.drops.looped);
    assert!(g.reemitted.datagrams > 0, "{text}");
    assert_eq!((g.local_in.datagrams, g.forwarded.datagrams), (0, 0), "nothing of B's own sent back: {text}");
    // And on the wire: the peer got no data datagram from B.
    b.sock.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    while let Ok(n) = b.sock.recv(&mut buf) {
        let d = wire::decode(&buf[..n]).unwrap();
        assert_ne!(d.header.kind, RelayKind::Data, "B forwarded {:?}", d.header);
    }
}
