//! The relay's peer table over a relay's life (`wirebench relay --peer-expiry`): 1,024 peers
//! fill it, leave the list and go quiet; 1,024 new ones wait (counted), then take the freed
//! slots and are carried; one old peer comes back with a fresh slot. The report's counters
//! add up: every peer counter is the sum of the live rows and the retired total, and every
//! datagram a peer sent is accepted, a duplicate, or from a non-peer.
//!
//! The peers are sockets on the namespace's loopback (`127.1.x.y` and `127.2.x.y`, port
//! 7881) sending relay datagrams to the relay; a group listener on the relay's interface
//! hears what it re-emits.

#![cfg(feature = "netns-tests")]

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use wirebench_core::report::RelayPeerTotals;
use wirebench_core::wire::relay::{self as wire, Header, RelayKind};

use crate::lab::Lab;
use crate::multicast_relay::{Proc, in_ns, relay_args, relay_results};

const GROUP: &str = "239.255.79.41:5241";
const RELAY_IP: &str = "10.77.191.2";
const PEERS: u32 = 1024;

/// Peer `i` of generation `g` (1 or 2): `127.g.(i / 256).(i % 256):7881` (the relay has
/// 0.0.0.0:7880 in the same namespace).
fn peer(g: u8, i: u32) -> SocketAddrV4 {
    let [_, _, hi, lo] = i.to_be_bytes();
    SocketAddrV4::new(Ipv4Addr::new(127, g, hi, lo), 7881)
}

/// Writes the peers file whole (a rename), so a re-read never sees half of it.
fn peers_file(path: &std::path::Path, list: &[SocketAddrV4]) {
    let text: String = list.iter().fold(String::new(), |mut t, a| {
        use std::fmt::Write as _;
        let _ = writeln!(t, "{a}");
        t
    });
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A relay data datagram of peer `tag` (re-emitted as the payload `tag`), received by its
/// origin now (one host, one clock: the added delay is real).
fn datagram(seq: u64, tag: &str) -> Vec<u8> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let h = Header {
        kind: RelayKind::Data,
        origin: 7,
        seq,
        wall_ns: u64::try_from(now.as_nanos()).unwrap(),
        group: GROUP.parse().unwrap(),
        sender: "10.9.9.9:4000".parse().unwrap(),
    };
    let mut buf = [0u8; 256];
    let n = wire::encode(&mut buf, &h, tag.as_bytes(), None).unwrap();
    buf[..n].to_vec()
}

/// Sends each (peer, seq, tag) from its own socket, in chunks, and waits (10 s at most per
/// chunk) until the listener heard every tag of the chunk.
fn send_and_hear(ns: &str, listener: &UdpSocket, sends: &[(SocketAddrV4, u64, String)]) {
    let relay: SocketAddrV4 = format!("{RELAY_IP}:7880").parse().unwrap();
    for chunk in sends.chunks(128) {
        let chunk = chunk.to_vec();
        let mut want: Vec<String> = chunk.iter().map(|(_, _, t)| t.clone()).collect();
        in_ns(ns, move || {
            for (from, seq, tag) in chunk {
                let s = UdpSocket::bind(from).unwrap();
                s.send_to(&datagram(seq, &tag), relay).unwrap();
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 256];
        while !want.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "not re-emitted within 10 s: {} of them, e.g. {:?}", want.len(), want[0]);
            listener.set_read_timeout(Some(left)).unwrap();
            let Ok((n, _)) = listener.recv_from(&mut buf) else { continue };
            let tag = String::from_utf8_lossy(&buf[..n]).into_owned();
            want.retain(|t| *t != tag);
        }
    }
}

/// Sends datagrams from `from` (seq from `seq0`, one per 20 ms wait) until the listener
/// hears one, 15 s at most: the relay gave it a slot. Returns how many were sent.
fn send_until_carried(ns: &str, listener: &UdpSocket, from: SocketAddrV4, seq0: u64, tag: &str) -> u64 {
    let relay: SocketAddrV4 = format!("{RELAY_IP}:7880").parse().unwrap();
    let sock = in_ns(ns, move || UdpSocket::bind(from).unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    listener.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = [0u8; 256];
    let mut sent = 0;
    loop {
        assert!(Instant::now() < deadline, "{from} never got a slot");
        sock.send_to(&datagram(seq0 + sent, &format!("{tag}-{sent}")), relay).unwrap();
        sent += 1;
        while let Ok((n, _)) = listener.recv_from(&mut buf) {
            if buf[..n].starts_with(tag.as_bytes()) {
                return sent;
            }
        }
    }
}

#[test]
fn peers_that_leave_and_go_quiet_free_their_slots_and_the_counts_add_up() {
    let mut lab = Lab::new("rlys");
    let node = lab.ns("node");
    let far = lab.ns("x");
    Lab::link(&far, "eth0", "10.77.191.1/24", &node, "eth0", Some(&format!("{RELAY_IP}/24")));
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("peers"), dir.path().join("relay.json"));
    let first: Vec<SocketAddrV4> = (0..PEERS).map(|i| peer(1, i)).collect();
    let second: Vec<SocketAddrV4> = (0..PEERS).map(|i| peer(2, i)).collect();
    let a0 = first[0];
    peers_file(&file, &first);
    let mut args = relay_args(RELAY_IP, file.to_str().unwrap(), &[GROUP], json.to_str().unwrap());
    args.extend(["--resolve-every", "1s", "--peer-expiry", "1s"]);
    let relay = Proc::start(&node, &args, "relay listening");
    let gaddr: SocketAddrV4 = GROUP.parse().unwrap();
    let iface: Ipv4Addr = RELAY_IP.parse().unwrap();
    let listener = in_ns(&node, move || {
        let s = wirebench_net::multicast::group_receiver(gaddr, Some(iface)).unwrap();
        wirebench_net::batch::size_buffers(&s, 4 << 20);
        s
    });

    // 1. The first 1,024 fill the table; the first of them also sends a duplicate (judged
    //    before its next datagram, which is heard: one socket, one queue).
    let mut sends: Vec<_> = first.iter().enumerate().map(|(i, &a)| (a, 0, format!("a{i}"))).collect();
    sends.push((first[0], 1, "a0-1".into()));
    send_and_hear(&node, &listener, &sends);
    in_ns(&node, move || {
        let s = UdpSocket::bind(a0).unwrap();
        s.send_to(&datagram(0, "a0-dup"), format!("{RELAY_IP}:7880")).unwrap();
    });
    send_and_hear(&node, &listener, &[(a0, 2, "a0-2".into())]);
    // A local datagram on the group is forwarded to all 1,024 (the first peer's socket
    // hears its copy: by then the relay sent every copy, in one batch).
    let copy = in_ns(&node, move || {
        let p0 = UdpSocket::bind(a0).unwrap();
        p0.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let s = UdpSocket::bind((iface, 0)).unwrap();
        let opts = wirebench_net::multicast::SenderOpts { interface: Some(iface), ttl: 1, loopback: true };
        wirebench_net::multicast::set_sender(&s, gaddr.into(), &opts).unwrap();
        s.send_to(b"local", gaddr).unwrap();
        let mut b = [0u8; 256];
        p0.recv(&mut b).map(|len| wire::decode(&b[..len]).map(|r| r.payload.to_vec()))
    });
    assert_eq!(copy.expect("the first peer got its copy").unwrap(), b"local");

    // 2. The list moves on to 1,024 others: they wait until the first ones, out of the list
    //    and silent, are retired after the expiry; then every one is carried.
    peers_file(&file, &second);
    let b0_sent = send_until_carried(&node, &listener, second[0], 0, "b0");
    let rest: Vec<_> = second.iter().enumerate().skip(1).map(|(i, &a)| (a, 0, format!("b{i}"))).collect();
    send_and_hear(&node, &listener, &rest);

    // 3. The first peer of the first generation comes back (in place of the second's first):
    //    a fresh slot once the one it replaces has gone quiet past the expiry.
    let mut third = second[1..].to_vec();
    third.push(first[0]);
    peers_file(&file, &third);
    let back_sent = send_until_carried(&node, &listener, first[0], 100, "back");

    // A debug build takes seconds to summarise 1,024 peers (a histogram each).
    let text = relay.stop_within(Duration::from_secs(60));
    let r = relay_results(&json);
    // Every datagram the peers sent is accounted once: accepted, duplicate or not a peer's.
    let all_sent = u64::from(PEERS) + 3 + b0_sent + u64::from(PEERS - 1) + back_sent;
    let tot = r.peer_totals.expect("peer totals");
    assert_eq!(tot.received.datagrams + tot.drops.duplicate + r.not_a_peer, all_sent, "{text}");
    assert_eq!((tot.drops.duplicate, r.malformed), (1, 0), "{text}");
    // The totals agree with the groups' own counts...
    let grp = &r.groups[0];
    assert_eq!((grp.reemitted, grp.forwarded), (tot.received, tot.sent), "{text}");
    assert_eq!(tot.sent.datagrams + tot.drops.send_errors, u64::from(PEERS), "one copy to each of the first 1,024");
    // ... and every counter is the live rows plus the retired total.
    let mut sum = RelayPeerTotals::default();
    let rt = &r.retired;
    sum.add(rt.received, rt.sent, &rt.drops, rt.clock_negative);
    for p in &r.peers {
        sum.add(p.received, p.sent, &p.drops, p.clock_negative);
    }
    assert_eq!(sum, tot, "{text}");
    // The first 1,024 and the second's first were retired, with everything they counted.
    assert_eq!(rt.peers, u64::from(PEERS) + 1, "{text}");
    assert_eq!((rt.drops.duplicate, rt.sent.datagrams + rt.drops.send_errors), (1, u64::from(PEERS)));
    assert!(rt.received.datagrams > u64::from(PEERS) + 2, "1,026 of the first, and the second's first: {text}");
    // The second 1,024 waited once each (the table was full of live peers), and so did the
    // returning one; nobody waits at the end.
    assert_eq!((r.peers_refused, r.peers_waiting, r.max_peers), (u64::from(PEERS) + 1, 0, 1024), "{text}");
    // The live rows: the second generation's 1,023 and the returning peer, all listed.
    let mut rows: Vec<SocketAddrV4> = r.peers.iter().map(|p| p.addr.parse().unwrap()).collect();
    rows.sort_unstable();
    let mut want = third.clone();
    want.sort_unstable();
    assert_eq!(rows, want);
    assert!(r.peers.iter().all(|p| p.active));
    for p in r.peers.iter().filter(|p| p.addr != first[0].to_string()) {
        assert_eq!(p.received.datagrams, 1, "{} was carried once: {text}", p.addr);
    }
    // The returning peer starts from zero: none of its old copies, duplicates or datagrams.
    let back = r.peers.iter().find(|p| p.addr == first[0].to_string()).unwrap();
    assert_eq!((back.sent.datagrams, back.drops.duplicate), (0, 0), "{text}");
    assert!((1..=back_sent).contains(&back.received.datagrams), "{text}");
    assert!(text.contains(&format!("retired peers ({}, out of the list and silent)", PEERS + 1)), "{text}");
    assert!(text.contains("1025 listed peers waited for a slot, 0 still waiting"), "{text}");
}
