//! Multi-host tests in network namespaces this test creates and always removes (root and
//! iproute2 needed; behind the `netns-tests` feature so a laptop run does not silently skip
//! them). Each test has its own namespace names (with the process id) and subnet.

#![cfg(feature = "netns-tests")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use wirebench_core::report::{Report, Results};

const BIN: &str = env!("CARGO_BIN_EXE_wirebench");

/// Namespaces and processes that are removed on drop, failure included.
struct Lab {
    tag: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().expect("iproute2 is installed");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Lab {
    fn new(test: &str) -> Self {
        Self { tag: format!("wb{}{test}", std::process::id()), namespaces: Vec::new(), children: Vec::new() }
    }

    /// Creates namespace `name` (prefixed) with loopback up; returns its full name.
    fn ns(&mut self, name: &str) -> String {
        let full = format!("{}-{name}", self.tag);
        let _ = Command::new("ip").args(["netns", "del", &full]).output();
        sh(&["ip", "netns", "add", &full]);
        self.namespaces.push(full.clone());
        sh(&["ip", "-n", &full, "link", "set", "lo", "up"]);
        full
    }

    /// A veth pair between two namespaces, addressed and up.
    fn link(a: &str, a_if: &str, a_ip: &str, b: &str, b_if: &str, b_ip: Option<&str>) {
        sh(&["ip", "link", "add", a_if, "netns", a, "type", "veth", "peer", "name", b_if, "netns", b]);
        sh(&["ip", "-n", a, "addr", "add", a_ip, "dev", a_if]);
        sh(&["ip", "-n", a, "link", "set", a_if, "up"]);
        if let Some(ip) = b_ip {
            sh(&["ip", "-n", b, "addr", "add", ip, "dev", b_if]);
        }
        sh(&["ip", "-n", b, "link", "set", b_if, "up"]);
    }

    /// Starts `wirebench ARGS` in `ns` and waits for its "listening" line.
    fn serve(&mut self, ns: &str, args: &[&str]) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "serve in {ns} did not start: {line:?}");
        self.children.push(child);
    }

    /// Runs `wirebench ARGS` in `ns` to completion.
    fn run(ns: &str, args: &[&str]) -> std::process::Output {
        Command::new("ip").args(["netns", "exec", ns, BIN]).args(args).output().expect("run wirebench")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

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
        let Results::Ping(p) = report(&json).results else { panic!("ping results") };
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
    let sw = lab.ns("sw");
    let hosts: Vec<String> = (1..=3).map(|i| lab.ns(&format!("h{i}"))).collect();
    sh(&["ip", "-n", &sw, "link", "add", "br0", "type", "bridge"]);
    sh(&["ip", "-n", &sw, "link", "set", "br0", "up"]);
    for (i, h) in hosts.iter().enumerate() {
        let port = format!("p{i}");
        Lab::link(h, "eth0", &format!("10.77.2.{}/24", i + 1), &sw, &port, None);
        sh(&["ip", "-n", &sw, "link", "set", &port, "master", "br0"]);
    }
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
        let Results::Ping(p) = report(&json).results else { panic!("ping results") };
        let mut addrs: Vec<&str> = p.responders.iter().map(|r| r.addr.as_str()).collect();
        addrs.sort_unstable();
        assert_eq!(addrs, ["10.77.2.2:7878", "10.77.2.3:7878"], "{reply_group:?}");
        for r in &p.responders {
            assert_eq!((r.received, r.lost), (1000, 0), "{reply_group:?} {}", r.addr);
        }
        assert_eq!(p.combined.expect("a combined view").summary.count, 2000);
    }
}
