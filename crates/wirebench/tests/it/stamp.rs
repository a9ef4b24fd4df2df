//! STAMP against an independent implementation, in a namespace pair: `stamp-suite` 1.0.0's
//! sender against `serve --stamp`, and `ping stamp://` against stamp-suite's reflector, in
//! both authentication modes and both timestamp formats. The packets on the wire are
//! captured and decoded by `stamp_sniff.py` (scapy's STAMP classes; Python's hmac for
//! authenticated mode) and checked field by field. Needs root, `stamp-suite` on the PATH
//! (`cargo install --locked stamp-suite --version 1.0.0`) and python3 with scapy.

#![cfg(feature = "netns-tests")]

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};

use serde_json::Value;
use wirebench_core::report::{Report, Results};

use crate::lab::Lab;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const PROBES: usize = 20;

/// A capture running in a namespace until [`Capture::finish`].
struct Capture(std::process::Child);

impl Capture {
    fn start(ns: &str, port: u16, key: Option<&str>) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/stamp_sniff.py");
        let port = port.to_string();
        let mut args = vec!["netns", "exec", ns, "python3", script, "eth0", &port];
        args.extend(key);
        let mut child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the capture did not start (is scapy installed?)");
        Self(child)
    }

    /// Stops the capture once it has seen `at_least` packets (it reads behind the wire);
    /// every packet it saw, decoded.
    fn finish(mut self, at_least: usize) -> Vec<Value> {
        use std::io::Write as _;
        let mut stdin = self.0.stdin.take().unwrap();
        writeln!(stdin, "{at_least}").unwrap();
        drop(stdin);
        let mut out = String::new();
        self.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(self.0.wait().unwrap().success(), "the capture failed");
        out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
    }
}

/// Pairs each reflected packet with the test packet it answers and checks what the RFC
/// says the reflector copies: the sender's sequence number, timestamp, error estimate and
/// SSID, the TTL it arrived with, and a length no larger than the request's; the reflector's
/// own timestamps come in order and in the format its Z bit states.
fn check_pairs(pkts: &[Value], reflector_z: u64, auth: bool, what: &str) {
    let senders: Vec<&Value> = pkts.iter().filter(|p| p["dir"] == "sender").collect();
    let reflected: Vec<&Value> = pkts.iter().filter(|p| p["dir"] == "reflector").collect();
    assert!(
        senders.len() >= PROBES && reflected.len() >= PROBES,
        "{what}: {} sent, {} reflected",
        senders.len(),
        reflected.len()
    );
    for r in &reflected {
        let s = senders
            .iter()
            .find(|s| s["seq"] == r["seq_sender"])
            .unwrap_or_else(|| panic!("{what}: a reflection of a packet never sent: {r}"));
        assert_eq!(r["ts_sender"], s["ts"], "{what}: T1 copied");
        assert_eq!(r["err_sender"], s["err"], "{what}: the sender's error estimate copied");
        assert_eq!(r["ssid"], s["ssid"], "{what}: SSID echoed");
        assert_eq!(r["ttl_sender"], s["ip_ttl"], "{what}: the TTL the test packet arrived with");
        assert_eq!(r["len"], s["len"], "{what}: a reply as long as its request");
        assert_eq!(r["err"]["Z"], reflector_z, "{what}: the reflector states its own format");
        assert!(r["err"]["multiplier"].as_u64().unwrap() > 0, "{what}: a multiplier is never 0");
        let (t2, t3) = (r["ts_rx"].as_u64().unwrap(), r["ts"].as_u64().unwrap());
        assert!(t2 <= t3, "{what}: T2 {t2} after T3 {t3}");
        if auth {
            assert_eq!(r["hmac_ok"], true, "{what}: the reflection's HMAC");
            assert_eq!(s["hmac_ok"], true, "{what}: the test packet's HMAC");
        }
    }
}

fn stamp_suite(ns: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns, "stamp-suite"])
        .args(args)
        .output()
        .expect("stamp-suite on the PATH (cargo install --locked stamp-suite --version 1.0.0)")
}

#[test]
fn stamp_interoperates_with_stamp_suite_both_ways() {
    let mut lab = Lab::new("stamp");
    let near = lab.ns("a");
    let far = lab.ns("b");
    Lab::link(&near, "eth0", "10.77.86.1/24", &far, "eth0", Some("10.77.86.2/24"));
    let dir = tempfile::tempdir().unwrap();
    for (auth, ptp) in [(false, false), (false, true), (true, false), (true, true)] {
        let what =
            format!("{} {}", if auth { "authenticated" } else { "unauthenticated" }, if ptp { "ptp" } else { "ntp" });
        let key = auth.then_some(KEY);
        let (format, z_bit) = if ptp { ("ptp", 1) } else { ("ntp", 0) };

        // stamp-suite's sender against wirebench's reflector.
        let port: u16 = 18_862 + u16::from(auth) * 2 + u16::from(ptp);
        let listen = format!("10.77.86.2:{}", 17_800 + port % 100);
        let stamp_at = format!("10.77.86.2:{port}");
        let mut serve = vec!["serve", "--listen", &listen, "--stamp", &stamp_at, "--stamp-format", format];
        if let Some(k) = key {
            serve.extend(["--stamp-key", k]);
        }
        let served = lab.next_index();
        lab.serve(&far, &serve);
        let cap = Capture::start(&far, port, key);
        let count = PROBES.to_string();
        let port_s = port.to_string();
        let mut args = vec!["--remote-addr", "10.77.86.2", "--remote-port", &port_s, "--count", &count];
        args.extend(["--send-delay", "10ms", "--timeout", "2", "--ssid", "4242"]);
        if auth {
            args.extend(["--auth-mode", "A", "--hmac-key", KEY]);
        }
        if ptp {
            args.extend(["--clock-source", "PTP"]);
        }
        let out = stamp_suite(&near, &args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{what}: stamp-suite sender: {text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains(&format!("Packets received: {PROBES}")), "{what}: {text}");
        let pkts = cap.finish(2 * PROBES);
        check_pairs(&pkts, z_bit, auth, &format!("wirebench reflector, {what}"));
        assert!(
            pkts.iter().filter(|p| p["dir"] == "reflector").all(|p| p["ip_ttl"] == 255),
            "replies leave with TTL 255"
        );
        lab.kill(served);

        // wirebench's sender against stamp-suite's reflector.
        let port = port + 10;
        let port_s = port.to_string();
        let mut args = vec!["--is-reflector", "--local-addr", "10.77.86.2", "--local-port", &port_s];
        if auth {
            args.extend(["--auth-mode", "A", "--hmac-key", KEY]);
        }
        if ptp {
            args.extend(["--clock-source", "PTP"]);
        }
        let refl = lab.spawn(&far, "stamp-suite", &args);
        let cap = Capture::start(&far, port, key);
        let json = dir.path().join(format!("{auth}-{ptp}.json"));
        let target = format!("stamp://10.77.86.2:{port}");
        let mut ping = vec!["ping", &target, "-n", &count, "--warmup", "0", "--stamp-format", format];
        ping.extend(["--stamp-session-id", "777", "--json", json.to_str().unwrap()]);
        if let Some(k) = key {
            ping.extend(["--stamp-key", k]);
        }
        // The reflector binds after it starts: discovery probes until it answers.
        ping.extend(["--timeout", "200ms", "--give-up-after", "10s"]);
        let out = Lab::run(&near, &ping);
        assert!(out.status.success(), "{what}: ping: {}", String::from_utf8_lossy(&out.stderr));
        let pkts = cap.finish(2 * PROBES);
        lab.kill(refl);
        let rep: Report = serde_json::from_value(crate::support::read_json(&json)).unwrap();
        let Results::Ping(p) = rep.results else { panic!("a ping report") };
        let r = &p.responders[0];
        assert_eq!((r.received, r.lost, p.proto.as_str()), (PROBES as u64, 0, "stamp"), "{what}");
        assert!(r.one_way.is_some() && r.dwell.is_some(), "{what}: the reflector's T2 and T3 were read");
        check_pairs(&pkts, z_bit, auth, &format!("stamp-suite reflector, {what}"));
        let ours: Vec<&Value> = pkts.iter().filter(|p| p["dir"] == "sender").collect();
        for s in &ours {
            assert_eq!(
                (s["ssid"].as_u64(), s["ip_ttl"].as_u64(), s["err"]["Z"].as_u64()),
                (Some(777), Some(255), Some(z_bit)),
                "{what}: {s}"
            );
            assert_eq!(s["len"], if auth { 112 } else { 44 });
        }
    }
}
