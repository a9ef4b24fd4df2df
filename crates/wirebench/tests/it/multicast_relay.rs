//! `wirebench relay` in namespaces: nodes routed at L3 through a router with no multicast
//! routing, where native multicast cannot cross and the relays carry it; a segment with two
//! relays; forged datagrams; the native check.

#![cfg(feature = "netns-tests")]

use std::io::{BufRead, BufReader, Read as _};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsFd as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use wirebench_core::auth::{DEFAULT_SALT, Key};
use wirebench_core::report::{RelayResults, Report, Results, StreamResults};
use wirebench_core::wire::relay::{self as wire, Header, RelayKind};

use crate::lab::{BIN, Lab, sh};

/// A wirebench process with its stdout drained on a thread; killed on drop.
pub(crate) struct Proc {
    child: Child,
    rest: Option<mpsc::Receiver<String>>,
    head: String,
}

impl Proc {
    /// Starts `wirebench ARGS` in `ns` and reads its output until a line containing
    /// `ready` (or the end: the process died, and the test fails with what it said).
    pub(crate) fn start(ns: &str, args: &[&str], ready: &str) -> Self {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wirebench");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                let _ = child.wait();
                panic!("{args:?} in {ns} ended before {ready:?}: {head}{err}");
            }
            head.push_str(&line);
            if line.contains(ready) {
                break;
            }
        }
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
            let _ = tx.send(rest);
        });
        Self { child, rest: Some(rx), head }
    }

    /// SIGINT, then its whole output; it must exit 0 within 5 s.
    pub(crate) fn stop(self) -> String {
        self.stop_within(Duration::from_secs(5))
    }

    /// SIGINT, then its whole output; it must exit 0 within `within` (a report of many
    /// peers takes a while to write in a debug build).
    pub(crate) fn stop_within(self, within: Duration) -> String {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        self.wait(within)
    }

    /// Its whole output once it ends by itself (within 60 s); it must exit 0.
    fn finish(self) -> String {
        self.wait(Duration::from_secs(60))
    }

    fn wait(mut self, within: Duration) -> String {
        let rest = self.rest.take().unwrap().recv_timeout(within).expect("exits in time");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit {status}: {}{rest}", self.head);
        format!("{}{rest}", self.head)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wall clock in ns since the Unix epoch, as a relay stamps its datagrams.
pub(crate) fn wall_now_ns() -> u64 {
    u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()).unwrap()
}

fn report(path: &std::path::Path) -> Report {
    let v = crate::support::read_json(path);
    crate::support::assert_valid_report(&v);
    serde_json::from_value(v).unwrap()
}

pub(crate) fn relay_results(path: &std::path::Path) -> RelayResults {
    let Results::Relay(r) = report(path).results else { panic!("a relay report") };
    r
}

fn stream_results(path: &std::path::Path) -> StreamResults {
    let Results::Stream(s) = report(path).results else { panic!("a stream report") };
    s
}

/// Nodes `n1..nN`, node i on its own subnet `10.77.{base+i}.0/24` (address `.2`, router
/// `.1`), all routed by one router namespace that forwards unicast and no multicast.
pub(crate) fn routed_nodes(lab: &mut Lab, n: usize, base: usize) -> Vec<(String, String)> {
    let rtr = lab.ns("rtr");
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    (1..=n)
        .map(|i| {
            let ns = lab.ns(&format!("n{i}"));
            let net = format!("10.77.{}", base + i);
            Lab::link(&rtr, &format!("r{i}"), &format!("{net}.1/24"), &ns, "eth0", Some(&format!("{net}.2/24")));
            sh(&["ip", "-n", &ns, "route", "add", "default", "via", &format!("{net}.1")]);
            (ns, format!("{net}.2"))
        })
        .collect()
}

/// A peer address with no relay behind it (routed toward the router, which has no route).
const DEAD_PEER: &str = "10.77.99.2:7880";

pub(crate) fn relay_args<'a>(ip: &'a str, peers: &'a str, groups: &[&'a str], json: &'a str) -> Vec<&'a str> {
    let mut a = vec!["relay", "--interface", ip, "--peers", peers, "--json", json];
    for g in groups {
        a.extend(["--group", g]);
    }
    a
}

/// The first test: native multicast does not cross the router (ping gets no
/// reply); with a relay on each node, ping gets two responders with nothing lost and a
/// stream to two receivers arrives exactly once at each.
#[test]
fn relays_carry_ping_and_a_stream_across_a_router() {
    let mut lab = Lab::new("rly");
    let nodes = routed_nodes(&mut lab, 3, 60);
    // The probe group's port is not serve's listen port: serve's unicast socket on 7878 has
    // no SO_REUSEADDR, so nothing else may bind that port (docs/modes/relay.md).
    let (probe, reply, data) = ("239.255.79.1:7877", "239.255.79.2:7879", "239.255.79.3:5079");
    let mut serves = Vec::new();
    for (ns, ip) in &nodes[1..] {
        serves.push(Proc::start(
            ns,
            &[
                "serve",
                "--listen",
                "0.0.0.0:7878",
                "--open",
                "--join",
                probe,
                "--interface",
                ip,
                "--reply-group",
                reply,
            ],
            "listening",
        ));
    }
    let (a, a_ip) = &nodes[0];
    let dir = tempfile::tempdir().unwrap();
    let ping = |count: &str| {
        let json = dir.path().join("ping.json");
        let out = Lab::run(
            a,
            &[
                "ping",
                probe,
                "--interface",
                a_ip,
                "--reply-group",
                reply,
                "--loop",
                "--responders",
                "2",
                "--count",
                count,
                "--json",
                json.to_str().unwrap(),
            ],
        );
        (out, json)
    };
    let (out, _) = ping("10");
    assert_eq!(out.status.code(), Some(1), "no multicast routing: nobody answers natively");

    let jsons: Vec<String> =
        (0..3).map(|i| dir.path().join(format!("relay{i}.json")).to_str().unwrap().to_owned()).collect();
    let mut relays = Vec::new();
    for (i, (ns, ip)) in nodes.iter().enumerate() {
        let mut peers: Vec<String> = nodes.iter().filter(|(_, p)| p != ip).map(|(_, p)| format!("{p}:7880")).collect();
        if i == 0 {
            peers.push(DEAD_PEER.into()); // a relay that is gone: it must not stall the others
        }
        let peers = peers.join(",");
        relays.push(Proc::start(ns, &relay_args(ip, &peers, &[probe, reply, data], &jsons[i]), "relay listening"));
    }

    let (out, json) = ping("1000");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let Results::Ping(pinged) = report(&json).results else { panic!("a ping report") };
    assert_eq!(pinged.responders.len(), 2, "one row per far node");
    for r in &pinged.responders {
        assert_eq!((r.received, r.lost), (1000, 0), "{}", r.addr);
        assert!(r.addr.starts_with(&format!("{a_ip}:")), "re-emitted by the relay on A: {}", r.addr);
    }

    // The stream goes to the group with `wirebench listen` on B and C as receivers: each
    // stops at 2,000 messages, however late the relays deliver them on a loaded machine (a
    // serve ends its drain 100 ms after the last message, which a descheduled relay can
    // exceed), and duplicates would count toward the 2,000 and leave one missing.
    let (serve_b, serve_c) = (format!("{}:7878", nodes[1].1), format!("{}:7878", nodes[2].1));
    let listens: Vec<(Proc, std::path::PathBuf)> = nodes[1..]
        .iter()
        .enumerate()
        .map(|(i, (ns, ip))| {
            let json = dir.path().join(format!("listen{i}.json"));
            let args = [
                "listen",
                "--listen",
                "0.0.0.0:5079",
                // the node's relay holds the group's port too
                "--reuse-port",
                "--join",
                data,
                "--interface",
                ip,
                "--count",
                "2000",
                "--duration",
                "60s",
                "--json",
                json.to_str().unwrap(),
            ];
            (Proc::start(ns, &args, "receiving on"), json)
        })
        .collect();
    let out = Lab::run(
        a,
        &[
            "stream",
            data,
            "--no-control",
            "--interface",
            a_ip,
            "--count",
            "2000",
            "--rate",
            "10k/s",
            "--size",
            "512",
            "-q",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<(u64, u64, u64)> = listens
        .into_iter()
        .map(|(p, json)| {
            p.finish();
            let s = stream_results(&json);
            assert_eq!(s.receivers.len(), 1, "one publisher: A's stream, re-emitted by one relay");
            let t = &s.receivers[0].total;
            (t.expected, t.received, t.duplicates)
        })
        .collect();
    let texts: Vec<String> = relays.into_iter().map(Proc::stop).collect();
    assert_eq!(
        rows,
        [(2000, 2000, 0), (2000, 2000, 0)],
        "every datagram once at each; the relays said:\n{}",
        texts.join("\n")
    );
    let ra = relay_results(std::path::Path::new(&jsons[0]));
    let g = |r: &RelayResults, g: &str| r.groups.iter().find(|x| x.group == g).unwrap().clone();
    // A forwarded each probe and each stream datagram to both peers; it counts the
    // pinger as the original sender of the probes.
    assert_eq!(g(&ra, data).local_in.datagrams, 2000, "{}", texts[0]);
    assert_eq!(g(&ra, data).forwarded.datagrams, 6000, "to both live peers and the dead one");
    let probes = g(&ra, probe).local_in.datagrams;
    assert!(probes >= 1000, "discovery probes and 1000 measured ones: {probes}");
    assert_eq!(g(&ra, probe).forwarded.datagrams, 3 * probes);
    let dead = ra.peers.iter().find(|p| p.addr == DEAD_PEER).unwrap();
    assert_eq!((dead.sent.datagrams, dead.received.datagrams), (2000 + probes, 0));
    // Replies came back from both far nodes, each re-emitted once; the relay heard its
    // own re-emissions and did not forward them.
    assert!(g(&ra, reply).reemitted.datagrams >= 2000);
    assert_eq!(g(&ra, reply).forwarded.datagrams, 0, "A has no local replier: nothing of A's to forward");
    assert!(g(&ra, reply).drops.looped >= 2000, "own re-emissions heard back and dropped");
    for p in ra.peers.iter().filter(|p| p.addr != DEAD_PEER) {
        assert_eq!((p.drops.duplicate, p.drops.bad_mac), (0, 0));
        assert!(p.added_delay.is_some());
    }
    let senders: Vec<&str> = ra.senders.iter().filter(|s| s.group == reply).map(|s| s.addr.as_str()).collect();
    assert_eq!(senders, [serve_b.as_str(), serve_c.as_str()], "the replies' original senders are the serves");
    // B re-emitted what A sent, once each.
    let rb = relay_results(std::path::Path::new(&jsons[1]));
    assert_eq!(g(&rb, data).reemitted.datagrams, 2000);
    assert_eq!(g(&rb, probe).reemitted.datagrams, probes);
    assert!(texts[1].contains("group 239.255.79.3:5079"), "{}", texts[1]);
    drop(serves);
}

/// Runs `f` on a thread inside namespace `ns` (setns on that thread only).
pub(crate) fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(path).unwrap();
        nix::sched::setns(fd.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

/// With a token, datagrams with a wrong or missing MAC are dropped and counted, and so are
/// datagrams from an address that is not a peer; only the authentic one is re-emitted.
#[test]
fn forged_and_foreign_relay_datagrams_are_dropped_and_counted() {
    let mut lab = Lab::new("rlyf");
    let nodes = routed_nodes(&mut lab, 2, 67);
    let (a, a_ip) = nodes[0].clone();
    let (b, b_ip) = nodes[1].clone();
    let group = "239.255.79.9:5090";
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let peer = format!("{a_ip}:7880");
    let mut args = relay_args(&b_ip, &peer, &[group], json.to_str().unwrap());
    // Busy-polling changes how the loop waits, not what it decides (and it still stops).
    args.extend(["--token", "right", "--weak-token", "--busy-poll", "200us"]);
    let relay = Proc::start(&b, &args, "relay listening");
    // A listener on B's group, joined before anything is sent, to see what is re-emitted.
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let b_addr = b_ip.parse().unwrap();
    let listener = in_ns(&b, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    let target: SocketAddrV4 = format!("{b_ip}:7880").parse().unwrap();
    let a_ip2 = a_ip.clone();
    in_ns(&a, move || {
        let h = |seq| Header {
            kind: RelayKind::Data,
            origin: 1,
            seq,
            wall_ns: wall_now_ns(),
            group: gaddr,
            sender: format!("{a_ip2}:4000").parse().unwrap(),
        };
        let mut buf = [0u8; 128];
        let peer = UdpSocket::bind(format!("{a_ip2}:7880")).unwrap();
        let stranger = UdpSocket::bind(format!("{a_ip2}:7999")).unwrap();
        let right = Key::derive(b"right", DEFAULT_SALT.as_bytes());
        for (sock, key, seq, payload) in [
            (&peer, Some(Key::new(b"wrong")), 0, &b"forged"[..]),
            (&peer, None, 1, b"unsigned"),
            (&stranger, Some(right.clone()), 2, b"stranger"),
            (&peer, Some(right.clone()), 3, b"genuine"),
        ] {
            let n = wire::encode(&mut buf, &h(seq), payload, key.as_ref()).unwrap();
            sock.send_to(&buf[..n], target).unwrap();
        }
        // The same genuine datagram again (a duplicate), then a last one: once the listener
        // hears the last, the relay has judged everything before it (one queue, in order).
        for (seq, payload) in [(3, &b"genuine"[..]), (4, b"last")] {
            let n = wire::encode(&mut buf, &h(seq), payload, Some(&right)).unwrap();
            peer.send_to(&buf[..n], target).unwrap();
        }
    });
    // Read what the relay re-emitted (its own probes aside) until the last one, within 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut heard = Vec::new();
    let mut buf = [0u8; 128];
    while heard.len() < 2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "re-emitted within 10 s: {heard:?}");
        listener.set_read_timeout(Some(left)).unwrap();
        let Ok((n, _)) = listener.recv_from(&mut buf) else { continue };
        if wire::decode(&buf[..n]).is_err() {
            heard.push(buf[..n].to_vec());
        }
    }
    assert_eq!(heard, [&b"genuine"[..], b"last"], "only the authentic datagrams are re-emitted, once");
    let text = relay.stop();
    assert_eq!(report(&json).config["busy_poll_ns"], 200_000);
    let r = relay_results(&json);
    assert!(r.authenticated);
    assert_eq!(r.not_a_peer, 1, "{text}");
    let p = &r.peers[0];
    assert_eq!((p.drops.bad_mac, p.drops.duplicate, p.received.datagrams), (2, 1, 2), "{text}");
    assert_eq!(r.groups[0].reemitted.datagrams, 2);
    assert!(text.contains("2 bad MAC"), "{text}");
}

/// Batches: with the relay stopped (SIGSTOP), forged, unsigned, foreign, duplicate and
/// genuine peer datagrams and local group datagrams pile up in its sockets, so it reads them
/// in mixed `recvmmsg` batches. Every cause is counted exactly, each genuine datagram is
/// re-emitted once and in order, and each local one reaches the peer once, in order, with a
/// valid MAC (the fan-out's `sendmmsg`).
#[test]
fn a_batch_mixing_forged_and_genuine_datagrams_is_counted_and_carried_exactly() {
    let mut lab = Lab::new("rlyb");
    let nodes = routed_nodes(&mut lab, 2, 88);
    let (na, a_ip) = nodes[0].clone();
    let (nb, b_ip) = nodes[1].clone();
    let group = "239.255.79.12:5093";
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let peer = format!("{a_ip}:7880");
    let mut args = relay_args(&b_ip, &peer, &[group], json.to_str().unwrap());
    args.extend(["--token", "right", "--weak-token"]);
    let relay = Proc::start(&nb, &args, "relay listening");
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let b_addr: std::net::Ipv4Addr = b_ip.parse().unwrap();
    let listener = in_ns(&nb, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    let local = in_ns(&nb, move || {
        let s = UdpSocket::bind((b_addr, 0)).unwrap();
        let o = wirebench_net::multicast::SenderOpts { interface: Some(b_addr), ttl: 1, loopback: true };
        wirebench_net::multicast::set_sender(&s, gaddr.into(), &o).unwrap();
        s
    });
    let a_ip2 = a_ip.clone();
    // The fake peer A (the relay forwards to it) and a stranger, both in A's namespace.
    let (fake_peer, stranger) = in_ns(&na, move || {
        (UdpSocket::bind(format!("{a_ip2}:7880")).unwrap(), UdpSocket::bind(format!("{a_ip2}:7999")).unwrap())
    });
    let pid = nix::unistd::Pid::from_raw(i32::try_from(relay.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let stopped = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WUNTRACED)).unwrap();
    assert!(matches!(stopped, nix::sys::wait::WaitStatus::Stopped(..)), "{stopped:?}");
    let target: SocketAddrV4 = format!("{b_ip}:7880").parse().unwrap();
    let sender: SocketAddrV4 = format!("{a_ip}:4000").parse().unwrap();
    // With a token the time must be fresh (within 10 s of the relay's clock).
    let now = wall_now_ns();
    let head = |seq| Header { kind: RelayKind::Data, origin: 7, seq, wall_ns: now, group: gaddr, sender };
    let (right, wrong) = (Key::derive(b"right", DEFAULT_SALT.as_bytes()), Key::new(b"wrong"));
    let mut buf = [0u8; 128];
    let mut genuine = Vec::new();
    for i in 0..40u64 {
        let (sock, key, seq) = match i % 5 {
            0 => (&fake_peer, Some(&right), i),
            1 => (&fake_peer, Some(&wrong), i),
            2 => (&fake_peer, Some(&right), i - 2), // the genuine one before, again
            3 => (&fake_peer, None, i),
            _ => (&stranger, Some(&right), i),
        };
        let payload = format!("peer {seq}");
        if i % 5 == 0 {
            genuine.push(payload.clone().into_bytes());
        }
        let n = wire::encode(&mut buf, &head(seq), payload.as_bytes(), key).unwrap();
        sock.send_to(&buf[..n], target).unwrap();
        // A local datagram into the group between the peer's (the other socket's batch).
        local.send_to(format!("local {i}").as_bytes(), gaddr).unwrap();
    }
    let n = wire::encode(&mut buf, &head(1000), b"last", Some(&right)).unwrap();
    fake_peer.send_to(&buf[..n], target).unwrap();
    genuine.push(b"last".to_vec());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();

    // Re-emitted (the relay's probes and the local sender's own datagrams aside), up to "last".
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let local_addr = local.local_addr().unwrap();
    let mut heard = Vec::new();
    while heard.last().is_none_or(|l: &Vec<u8>| l != b"last") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "re-emitted within 10 s: {heard:?}");
        listener.set_read_timeout(Some(left)).unwrap();
        let Ok((n, from)) = listener.recv_from(&mut buf) else { continue };
        if from != local_addr && wire::decode(&buf[..n]).is_err() {
            heard.push(buf[..n].to_vec());
        }
    }
    assert_eq!(heard, genuine, "each genuine datagram once, in order");
    // Forwarded to the peer: the 40 local datagrams, once each, in order, authentic.
    let mut forwarded = Vec::new();
    let mut seqs = Vec::new();
    while forwarded.len() < 40 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "forwarded within 10 s: {forwarded:?}");
        fake_peer.set_read_timeout(Some(left)).unwrap();
        let Ok(n) = fake_peer.recv(&mut buf) else { continue };
        let dec = wire::decode(&buf[..n]).unwrap();
        assert!(wire::verify(&buf[..n], &dec, Some(&right)), "a valid MAC");
        if dec.header.kind == RelayKind::Data {
            assert_eq!((dec.header.group, dec.header.sender), (gaddr, SocketAddrV4::new(b_addr, local_addr.port())));
            forwarded.push(String::from_utf8(dec.payload.to_vec()).unwrap());
            seqs.push(dec.header.seq);
        }
    }
    assert_eq!(forwarded, (0..40).map(|i| format!("local {i}")).collect::<Vec<_>>());
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "consecutive sequence numbers: {seqs:?}");
    let text = relay.stop();
    let rep = relay_results(&json);
    assert_eq!(rep.not_a_peer, 8, "{text}");
    let peer_stats = &rep.peers[0];
    assert_eq!(
        (
            peer_stats.drops.bad_mac,
            peer_stats.drops.duplicate,
            peer_stats.received.datagrams,
            peer_stats.sent.datagrams
        ),
        (16, 8, 9, 40),
        "{text}"
    );
    let grp = &rep.groups[0];
    assert_eq!((grp.local_in.datagrams, grp.forwarded.datagrams, grp.reemitted.datagrams), (40, 40, 9), "{text}");
    assert_eq!((grp.drops.send_errors, grp.drops.too_big, grp.drops.rate_cap), (0, 0, 0), "{text}");
    assert_eq!(
        peer_stats.added_delay.as_ref().map(|d| d.summary.count),
        Some(9),
        "one added delay per re-emission: {text}"
    );
}

/// A segment (a bridge) with hosts `s1`, `s2` at `10.77.{net}.1`/`.2`, and a remote node `z`
/// at `10.77.{net+1}.2`, joined by a router (`.254` on the segment) with no multicast
/// routing. Returns (s1, s2, z) as (namespace, address).
pub(crate) fn segment_and_remote(lab: &mut Lab, net: usize) -> [(String, String); 3] {
    let sw = lab.ns("sw");
    let rtr = lab.ns("rtr");
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&["ip", "-n", &sw, "link", "add", "br0", "type", "bridge"]);
    sh(&["ip", "-n", &sw, "link", "set", "br0", "up"]);
    let seg = format!("10.77.{net}");
    let far = format!("10.77.{}", net + 1);
    Lab::link(&rtr, "eth0", &format!("{seg}.254/24"), &sw, "p0", None);
    sh(&["ip", "-n", &sw, "link", "set", "p0", "master", "br0"]);
    let mut hosts = Vec::new();
    for i in 1..=2 {
        let h = lab.ns(&format!("s{i}"));
        let port = format!("p{i}");
        Lab::link(&h, "eth0", &format!("{seg}.{i}/24"), &sw, &port, None);
        sh(&["ip", "-n", &sw, "link", "set", &port, "master", "br0"]);
        sh(&["ip", "-n", &h, "route", "add", "default", "via", &format!("{seg}.254")]);
        hosts.push((h, format!("{seg}.{i}")));
    }
    let z = lab.ns("z");
    Lab::link(&rtr, "eth1", &format!("{far}.1/24"), &z, "eth0", Some(&format!("{far}.2/24")));
    sh(&["ip", "-n", &z, "route", "add", "default", "via", &format!("{far}.1")]);
    let [s1, s2] = <[_; 2]>::try_from(hosts).unwrap();
    [s1, s2, (z, format!("{far}.2"))]
}

/// Two relays on one segment: the one with the lower address carries the group, the other
/// stays passive, so a stream from the remote node arrives once on the segment, and one
/// from the segment once at the remote node.
#[test]
fn two_relays_on_one_segment_do_not_double_traffic() {
    let mut lab = Lab::new("rly2");
    let nodes = segment_and_remote(&mut lab, 70);
    let group = "239.255.79.5:5081";
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<String> = nodes.iter().map(|(_, ip)| format!("{ip}:7880")).collect();
    let peers = all.join(",");
    let jsons: Vec<String> =
        (0..3).map(|i| dir.path().join(format!("r{i}.json")).to_str().unwrap().to_owned()).collect();
    let relays: Vec<Proc> = nodes
        .iter()
        .enumerate()
        .map(|(i, (ns, ip))| Proc::start(ns, &relay_args(ip, &peers, &[group], &jsons[i]), "relay listening"))
        .collect();
    // A stream to the group, received by `wirebench listen` (which stops at 2,000 messages
    // however late they come): one publisher (a second would be a second relay's copy).
    let stream = |from: &(String, String), to: &(String, String), name: &str| {
        let json = dir.path().join(name);
        let args = [
            "listen",
            "--listen",
            "0.0.0.0:5081",
            // the node's relay holds the group's port too
            "--reuse-port",
            "--join",
            group,
            "--interface",
            &to.1,
            "--count",
            "2000",
            "--duration",
            "60s",
            "--json",
            json.to_str().unwrap(),
        ];
        let listen = Proc::start(&to.0, &args, "receiving on");
        let out = Lab::run(
            &from.0,
            &["stream", group, "--no-control", "--interface", &from.1, "--count", "2000", "--rate", "10k/s", "-q"],
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = listen.finish();
        let s = stream_results(&json);
        assert_eq!(s.receivers.len(), 1, "one publisher: {text}");
        let t = &s.receivers[0].total;
        (t.expected, t.received, t.duplicates)
    };
    let inward = stream(&nodes[2], &nodes[0], "in.json");
    let outward = stream(&nodes[1], &nodes[2], "out.json");
    let texts: Vec<String> = relays.into_iter().map(Proc::stop).collect();
    let said = texts.join("\n");
    assert_eq!(inward, (2000, 2000, 0), "remote to segment: once; the relays said:\n{said}");
    assert_eq!(outward, (2000, 2000, 0), "segment to remote: once; the relays said:\n{said}");
    let r: Vec<RelayResults> = jsons.iter().map(|j| relay_results(std::path::Path::new(j))).collect();
    assert!(r[0].groups[0].carried && !r[1].groups[0].carried, "{}\n{}", texts[0], texts[1]);
    assert_eq!(r[0].groups[0].native_peers, [all[1].clone()]);
    assert_eq!(r[1].groups[0].native_peers, [all[0].clone()]);
    assert_eq!((r[0].groups[0].reemitted.datagrams, r[1].groups[0].reemitted.datagrams), (2000, 0));
    assert_eq!((r[0].groups[0].forwarded.datagrams, r[1].groups[0].forwarded.datagrams), (2000, 0));
    assert!(r[1].groups[0].drops.passive >= 2000, "{}", texts[1]);
    // The remote relay sends to both (it cannot know they share a segment); one re-emits.
    assert_eq!(r[2].groups[0].forwarded.datagrams, 4000);
}

/// `--check` says native multicast works to the relay on the same bridge and not to the one
/// across the router; a relay whose every peer hears the group natively refuses (exit 2).
#[test]
fn check_tells_a_bridge_from_a_router() {
    let mut lab = Lab::new("rlyc");
    let nodes = segment_and_remote(&mut lab, 72);
    let group = "239.255.79.6:5082";
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<String> = nodes.iter().map(|(_, ip)| format!("{ip}:7880")).collect();
    let peers = all.join(",");
    let _others: Vec<Proc> = nodes[1..]
        .iter()
        .enumerate()
        .map(|(i, (ns, ip))| {
            let json = dir.path().join(format!("{i}.json"));
            Proc::start(ns, &relay_args(ip, &peers, &[group], json.to_str().unwrap()), "relay listening")
        })
        .collect();
    let json = dir.path().join("check.json");
    let mut args = relay_args(&nodes[0].1, &peers, &[group], json.to_str().unwrap());
    args.push("--check");
    let out = Lab::run(&nodes[0].0, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("{} native multicast works", all[1])), "{text}");
    assert!(text.contains(&format!("{} not reached natively", all[2])), "{text}");
    assert_eq!(relay_results(&json).groups[0].native_peers, [all[1].clone()]);

    let out = Lab::run(&nodes[0].0, &relay_args(&nodes[0].1, &all[1], &[group], json.to_str().unwrap()));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already reaches every peer natively"), "{err}");
}

/// Peers from a file are re-read while the relay runs: a peer added to the file gets the
/// group's datagrams without a restart, and one taken out stops getting them.
#[test]
fn peers_from_a_file_are_picked_up_without_a_restart() {
    let mut lab = Lab::new("rlyp");
    let nodes = routed_nodes(&mut lab, 2, 74);
    let (a, a_ip) = nodes[0].clone();
    let (b, b_ip) = nodes[1].clone();
    let group = "239.255.79.7:5083";
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("peers");
    std::fs::write(&file, format!("# nobody yet\n{DEAD_PEER}\n")).unwrap();
    let (ja, jb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let mut args = relay_args(&a_ip, file.to_str().unwrap(), &[group], ja.to_str().unwrap());
    args.extend(["--resolve-every", "1s"]);
    let ra = Proc::start(&a, &args, "relay listening");
    let rb =
        Proc::start(&b, &relay_args(&b_ip, &format!("{a_ip}:7880"), &[group], jb.to_str().unwrap()), "relay listening");
    let b_addr = b_ip.parse().unwrap();
    let listener = in_ns(&b, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    listener.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let a_addr: std::net::Ipv4Addr = a_ip.parse().unwrap();
    let sender = in_ns(&a, move || {
        let s = UdpSocket::bind((a_addr, 0)).unwrap();
        wirebench_net::multicast::set_sender(
            &s,
            gaddr.into(),
            &wirebench_net::multicast::SenderOpts { interface: Some(a_addr), ttl: 1, loopback: true },
        )
        .unwrap();
        s
    });
    std::fs::write(&file, format!("{DEAD_PEER}\n{b_ip}  # added\n")).unwrap();
    // Send until B re-emits one (the file is re-read within a second), at most 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 64];
    let mut sent = 0u32;
    let first = loop {
        assert!(std::time::Instant::now() < deadline, "B never got the group after joining the file");
        sender.send_to(format!("hello {sent}").as_bytes(), gaddr).unwrap();
        sent += 1;
        if let Ok((n, _)) = listener.recv_from(&mut buf)
            && wire::decode(&buf[..n]).is_err()
        {
            break String::from_utf8_lossy(&buf[..n]).into_owned();
        }
    };
    assert!(first.starts_with("hello "), "{first}");
    let text = ra.stop();
    rb.stop();
    let r = relay_results(&ja);
    let peer_b = r.peers.iter().find(|p| p.addr == format!("{b_ip}:7880")).expect("B was added");
    assert!(peer_b.active && peer_b.sent.datagrams >= 1, "{text}");
    let dead = r.peers.iter().find(|p| p.addr == DEAD_PEER).unwrap();
    assert_eq!(dead.sent.datagrams, u64::from(sent), "the dead peer got every one: {text}");
}

/// The origin relay restarted mid-stream: it comes back as a new run (a new origin id whose
/// sequence starts again at 0), and the far relay re-emits its datagrams again instead of
/// taking them for duplicates of the old run's; no datagram arrives twice.
#[test]
fn a_relay_restarted_mid_stream_delivers_again_without_duplicates() {
    let mut lab = Lab::new("rlyr");
    let nodes = routed_nodes(&mut lab, 2, 76);
    let (a, a_ip) = nodes[0].clone();
    let (b, b_ip) = nodes[1].clone();
    let group = "239.255.79.8:5084";
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ja, ja2, jb) = (dir.path().join("a.json"), dir.path().join("a2.json"), dir.path().join("b.json"));
    let (peer_a, peer_b) = (format!("{a_ip}:7880"), format!("{b_ip}:7880"));
    let start_a = |json: &std::path::Path| {
        let mut args = relay_args(&a_ip, &peer_b, &[group], json.to_str().unwrap());
        args.extend(["--check-wait", "200ms"]);
        Proc::start(&a, &args, "relay listening")
    };
    let ra = start_a(&ja);
    let rb = Proc::start(&b, &relay_args(&b_ip, &peer_a, &[group], jb.to_str().unwrap()), "relay listening");
    let b_addr = b_ip.parse().unwrap();
    let listener = in_ns(&b, move || wirebench_net::multicast::group_receiver(gaddr, Some(b_addr)).unwrap());
    listener.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let a_addr: std::net::Ipv4Addr = a_ip.parse().unwrap();
    let sender = in_ns(&a, move || {
        let s = UdpSocket::bind((a_addr, 0)).unwrap();
        let opts = wirebench_net::multicast::SenderOpts { interface: Some(a_addr), ttl: 1, loopback: true };
        wirebench_net::multicast::set_sender(&s, gaddr.into(), &opts).unwrap();
        s
    });
    let mut next = 0u32;
    let mut got: Vec<u32> = Vec::new();
    let mut buf = [0u8; 64];
    // Sends numbered datagrams until `want` have arrived at B since `since` (bounded).
    let mut pump = |want: usize, since: u32, what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while got.iter().filter(|&&n| n >= since).count() < want {
            assert!(std::time::Instant::now() < deadline, "{what}: {} of {want} arrived", got.len());
            sender.send_to(format!("n {next}").as_bytes(), gaddr).unwrap();
            next += 1;
            while let Ok((n, _)) = listener.recv_from(&mut buf) {
                if let Some(v) = std::str::from_utf8(&buf[..n]).ok().and_then(|t| t.strip_prefix("n ")) {
                    got.push(v.parse().unwrap());
                }
            }
        }
        next
    };
    pump(100, 0, "before the restart");
    let first_run = ra.stop();
    let ra = start_a(&ja2);
    let restarted_at = pump(0, 0, "");
    pump(100, restarted_at, "after the restart");
    let texts = [ra.stop(), rb.stop()];
    let mut seen = std::collections::HashSet::new();
    let dups: Vec<u32> = got.iter().copied().filter(|n| !seen.insert(*n)).collect();
    assert!(dups.is_empty(), "datagrams delivered twice: {dups:?}\n{first_run}\n{}", texts.join("\n"));
    let rb = relay_results(&jb);
    let from_a = rb.peers.iter().find(|p| p.addr == peer_a).unwrap();
    assert_eq!(from_a.drops.duplicate, 0, "the new run's sequence 0.. is not the old run's: {}", texts[1]);
    // (B may have re-emitted the last few after the listener stopped reading.)
    assert!(from_a.received.datagrams >= got.len() as u64, "{}", texts[1]);
    let (r1, r2) = (relay_results(&ja), relay_results(&ja2));
    assert_ne!(r1.relay_id, r2.relay_id, "a restart is a new run");
}
