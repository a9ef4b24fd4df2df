//! Multi-host tests in network namespaces this test creates and always removes (root and
//! iproute2 needed; behind the `netns-tests` feature so a laptop run does not silently skip
//! them). Each test has its own namespace names (with the process id) and subnet.

#![cfg(feature = "netns-tests")]

use wirebench_core::report::{Report, Results};

use crate::lab::{Lab, sh};

fn report(path: &std::path::Path) -> Report {
    let v = crate::support::read_json(path);
    crate::support::assert_valid_report(&v);
    serde_json::from_value(v).unwrap()
}

#[test]
fn ping_across_a_veth_pair() {
    let mut lab = Lab::new("veth");
    let a = lab.ns("a");
    let b = lab.ns("b");
    Lab::link(&a, "eth0", "10.77.1.1/24", &b, "eth0", Some("10.77.1.2/24"));
    lab.serve(&b, &["serve", "--listen", "10.77.1.2:7878"]);
    let dir = tempfile::tempdir().unwrap();
    for proto in ["udp", "tcp"] {
        let json = dir.path().join(format!("{proto}.json"));
        let out = Lab::run(
            &a,
            &[
                "ping",
                "10.77.1.2:7878",
                "--proto",
                proto,
                "--count",
                "2000",
                "--size",
                "64",
                "--json",
                json.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let Results::Ping(p) = report(&json).results else { panic!("a ping report") };
        assert_eq!(p.responders.len(), 1);
        let r = &p.responders[0];
        assert_eq!(r.addr, "10.77.1.2:7878");
        assert_eq!((r.received, r.lost), (2000, 0), "{proto}");
        assert!(r.one_way.is_some());
    }
}

#[test]
fn multicast_across_a_bridge_gives_one_result_per_responder() {
    let mut lab = Lab::new("mc");
    let hosts = lab.bridged_hosts(3, "10.77.2");
    for (i, h) in hosts.iter().enumerate().skip(1) {
        let ip = format!("10.77.2.{}", i + 1);
        lab.serve(
            h,
            &[
                "serve",
                "--listen",
                "0.0.0.0:7878",
                "--join",
                "239.255.77.1:7878",
                "--interface",
                &ip,
                "--reply-group",
                "239.255.77.3:7879",
            ],
        );
    }
    let dir = tempfile::tempdir().unwrap();
    // Replies by unicast (the default), then on the reply group (Aeron's pong channel).
    for reply_group in [None, Some("239.255.77.3:7879")] {
        let json = dir.path().join("mc.json");
        let mut args = vec![
            "ping",
            "239.255.77.1:7878",
            "--interface",
            "10.77.2.1",
            "--responders",
            "2",
            "--count",
            "1000",
            "--json",
            json.to_str().unwrap(),
        ];
        if let Some(g) = reply_group {
            args.extend(["--reply-group", g]);
        }
        let out = Lab::run(&hosts[0], &args);
        assert!(out.status.success(), "{reply_group:?}: {}", String::from_utf8_lossy(&out.stderr));
        let Results::Ping(p) = report(&json).results else { panic!("a ping report") };
        let mut addrs: Vec<&str> = p.responders.iter().map(|r| r.addr.as_str()).collect();
        addrs.sort_unstable();
        assert_eq!(addrs, ["10.77.2.2:7878", "10.77.2.3:7878"], "{reply_group:?}");
        for r in &p.responders {
            assert_eq!((r.received, r.lost), (1000, 0), "{reply_group:?} {}", r.addr);
        }
        assert_eq!(p.combined.expect("a combined view").summary.count, 2000);
    }
}

fn stream_results(path: &std::path::Path) -> wirebench_core::report::StreamResults {
    let Results::Stream(s) = report(path).results else { panic!("a stream report") };
    s
}

/// Sender, router and receiver namespaces; the router shapes its link toward the receiver
/// with tbf at 50 Mbit/s (netem is not in this kernel, and a shaper on the sender's own
/// link only slows the sender): an offer above the limit loses, and the loss-free search
/// lands within 10 % of the limit. (The router's queue, 256 KB, takes a sender's catch-up
/// burst after up to 46 ms descheduled, and lets a 2 s trial pass at most 2.4 % above the
/// limit; with a 20 ms queue a busy host's stalls made the search stop at 17-43 Mbit/s.)
#[test]
fn loss_above_a_router_rate_limit_and_the_loss_free_rate() {
    let mut lab = Lab::new("tbf");
    let snd = lab.ns("snd");
    let rtr = lab.ns("rtr");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.3.1/24", &rtr, "eth0", Some("10.77.3.254/24"));
    Lab::link(&rtr, "eth1", "10.77.4.254/24", &rcv, "eth0", Some("10.77.4.2/24"));
    sh(&["ip", "-n", &snd, "route", "add", "default", "via", "10.77.3.254"]);
    sh(&["ip", "-n", &rcv, "route", "add", "default", "via", "10.77.4.254"]);
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&[
        "ip", "netns", "exec", &rtr, "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "50mbit", "burst",
        "32kb", "limit", "256kb",
    ]);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let dir = tempfile::tempdir().unwrap();

    let over = dir.path().join("over.json");
    let out = Lab::run(
        &snd,
        &["stream", "10.77.4.2:7878", "--rate", "100mbit", "--duration", "2s", "-q", "--json", over.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = stream_results(&over);
    let r = &s.receivers[0];
    let loss = 1.0 - r.total.received as f64 / r.sent as f64;
    assert!(loss > 0.3, "offering twice the limit loses about half: {loss}");

    let search = dir.path().join("search.json");
    let out = Lab::run(
        &snd,
        &[
            "stream",
            "10.77.4.2:7878",
            "--find-max-rate",
            "--rate",
            "100mbit",
            "--trial",
            "2s",
            "-q",
            "--json",
            search.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = stream_results(&search);
    let best = s.search.expect("a search").best_bits_per_s;
    // tbf counts whole frames: 1468 B of payload travel in 1510 B on the wire.
    let limit = 50e6 * 1468.0 / 1510.0;
    assert!((best - limit).abs() / limit < 0.10, "found {best:.0} bit/s, limit {limit:.0}");
}

/// A 5 Mbit/s bottleneck behind a flat-out GSO sender (about 12 Gbit/s here: 0.04 % of it).
/// The first release's search halved down from flat out, ran out of its 12 trials before it
/// got there and said 0 (the issue saw it at 50 Mbit/s behind 15.7 Gbit/s); the descent
/// finds it, within 10 %, in a bounded number of trials. (A trial of T seconds passes up to
/// the rate plus (bucket + queue) / T, here 3 % above it. The queue also absorbs 57 ms of a
/// sender's catch-up burst: with a 3 KB queue, a sender descheduled for 11 ms on a busy CI
/// host made the router drop and the search stop at 3.05 Mbit/s, the path's true answer for
/// such a bursty sender but not what this test is about.)
#[test]
fn the_search_finds_a_bottleneck_far_below_flat_out() {
    let mut lab = Lab::new("deep");
    let snd = lab.ns("snd");
    let rtr = lab.ns("rtr");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.41.1/24", &rtr, "eth0", Some("10.77.41.254/24"));
    Lab::link(&rtr, "eth1", "10.77.42.254/24", &rcv, "eth0", Some("10.77.42.2/24"));
    sh(&["ip", "-n", &snd, "route", "add", "default", "via", "10.77.41.254"]);
    sh(&["ip", "-n", &rcv, "route", "add", "default", "via", "10.77.42.254"]);
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&[
        "ip", "netns", "exec", &rtr, "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "5mbit", "burst",
        "4kb", "limit", "32kb",
    ]);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let dir = tempfile::tempdir().unwrap();
    let search = dir.path().join("search.json");
    let out = Lab::run(
        &snd,
        &["stream", "10.77.42.2:7878", "--find-max-rate", "--trial", "2s", "-q", "--json", search.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = stream_results(&search).search.expect("a search");
    let limit = 5e6 * 1468.0 / 1510.0;
    assert_eq!(s.ending, wirebench_core::report::SearchEnding::Found, "{s:?}");
    assert!((s.best_bits_per_s - limit).abs() / limit < 0.10, "found {:.0} bit/s, limit {limit:.0}", s.best_bits_per_s);
    assert!(s.trials[0].rate_per_s.is_none() && !s.trials[0].passed, "flat out first, and it lost: {s:?}");
    assert!(s.trials.len() <= 16, "{} trials", s.trials.len());
}

#[test]
fn a_multicast_stream_gives_one_row_per_receiver() {
    let mut lab = Lab::new("mcs");
    let hosts = lab.bridged_hosts(3, "10.77.5");
    for (i, h) in hosts.iter().enumerate().skip(1) {
        let ip = format!("10.77.5.{}", i + 1);
        lab.serve(h, &["serve", "--listen", "0.0.0.0:7878", "--open", "--interface", &ip]);
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mcs.json");
    let out = Lab::run(
        &hosts[0],
        &[
            "stream",
            "10.77.5.2:7878",
            "10.77.5.3:7878",
            "--group",
            "239.255.78.1:5078",
            "--interface",
            "10.77.5.1",
            "--count",
            "2000",
            "--rate",
            "20k/s",
            "--size",
            "512",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = stream_results(&json);
    let rows: Vec<(&str, u64, u64)> = s.receivers.iter().map(|r| (r.addr.as_str(), r.sent, r.total.received)).collect();
    assert_eq!(rows, [("10.77.5.2:7878", 2000, 2000), ("10.77.5.3:7878", 2000, 2000)]);
}

/// `serve --join` on a host with no multicast route (a namespace with loopback only): the
/// join fails with one line that names the group, gives the kernel's reason once (it was
/// printed twice) and says how to give the join an interface; exit 1. Both ways serve joins:
/// the listen socket (the group's port is the listen port) and a socket of its own.
#[test]
fn serve_join_without_a_multicast_route_fails_in_one_line() {
    let mut lab = Lab::new("sjoin");
    let ns = lab.ns("a");
    for listen in ["0.0.0.0:5078", "127.0.0.1:0"] {
        // bounded: a serve that did start would run until stopped
        let out = std::process::Command::new("timeout")
            .args(["30", "ip", "netns", "exec", &ns, crate::lab::BIN, "serve", "--listen", listen])
            .args(["--join", "239.1.2.3:5078"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{listen}: {err}");
        assert_eq!(err.lines().count(), 1, "{listen}: {err}");
        assert!(err.starts_with("error: multicast join for 239.1.2.3:5078: No such device (os error 19) "), "{err}");
        assert_eq!(err.matches("No such device").count(), 1, "{err}");
        assert!(err.contains("--interface") && err.contains("ip route add 224.0.0.0/4 dev IF"), "{err}");
    }
}

/// A same-host multicast stream to a serve that joined the group on another interface than
/// the one the stream goes out on: nothing arrives. The report blamed "elsewhere on the path"
/// for 100 % loss and exited 0; the receiver's lines now say nothing arrived and what looks
/// like that (the interfaces of the join and of the sending), and the run exits 1.
#[test]
fn a_multicast_stream_that_reaches_no_receiver_says_why_and_exits_1() {
    let mut lab = Lab::new("mcnone");
    let a = lab.ns("a");
    let b = lab.ns("b");
    Lab::link(&a, "eth0", "10.77.92.1/24", &b, "eth0", Some("10.77.92.2/24"));
    // serve joins on eth0; the stream goes out on loopback
    lab.serve(&a, &["serve", "--listen", "127.0.0.1:7878", "--interface", "10.77.92.1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("none.json");
    let args = ["stream", "127.0.0.1:7878", "--group", "239.255.92.1:5092", "--interface", "127.0.0.1"];
    let rest = ["-n", "2000", "--rate", "20k/s", "--size", "200", "-v", "--json", json.to_str().unwrap()];
    let out = Lab::run(&a, &[&args[..], &rest[..]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("127.0.0.1:7878: received 0 of 2000 sent"), "{text}");
    assert!(
        text.contains(
            "127.0.0.1:7878: nothing arrived of 2000 sent: 239.255.92.1:5092 not heard there: serve joined the group \
             on another interface than the one the stream went out on (serve --interface, stream --interface)"
        ),
        "{text}"
    );
    let Results::Stream(s) = report(&json).results else { panic!("a stream report") };
    assert_eq!((s.receivers[0].sent, s.receivers[0].total.received), (2000, 0));
}

/// Two serves on one host, one multicast stream to both: each serve's session socket is
/// bound to the group's address and shares it, so both hear every datagram; a listen that
/// holds the group's port on every address without sharing it is refused.
#[test]
fn serves_on_one_host_share_a_groups_port_and_a_listen_that_holds_it_is_refused() {
    let mut lab = Lab::new("mcshare");
    let a = lab.ns("a");
    lab.serve(&a, &["serve", "--listen", "127.0.0.1:7878", "--interface", "127.0.0.1"]);
    lab.serve(&a, &["serve", "--listen", "127.0.0.1:7879", "--interface", "127.0.0.1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("two.json");
    let args = ["stream", "127.0.0.1:7878", "127.0.0.1:7879", "--group", "239.255.92.2:5093", "--interface"];
    let rest = ["127.0.0.1", "-n", "2000", "--rate", "20k/s", "--size", "200", "-q", "--json", json.to_str().unwrap()];
    let out = Lab::run(&a, &[&args[..], &rest[..]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let Results::Stream(s) = report(&json).results else { panic!("a stream report") };
    let rows: Vec<(&str, u64)> = s.receivers.iter().map(|r| (r.addr.as_str(), r.total.received)).collect();
    assert_eq!(rows, [("127.0.0.1:7878", 2000), ("127.0.0.1:7879", 2000)]);
    // a serve's --join on the group's port, then a listen on that port: refused, one line
    lab.serve(&a, &["serve", "--listen", "127.0.0.1:7880", "--join", "239.255.92.3:5094", "--interface", "127.0.0.1"]);
    let out = Lab::run(&a, &["listen", "--listen", "0.0.0.0:5094", "-d", "1s", "--no-hiccup"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: cannot bind 0.0.0.0:5094: Address already in use"), "{err}");
}
