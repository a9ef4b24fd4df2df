//! `wirebench doctor`: verdicts on loopback (path MTU to an in-process serve, a dead target
//! FAILs with exit 3), bad flags exit 2; and, in network namespaces (root, the `netns-tests`
//! feature), the verdicts for settings the test makes: a veth MTU of 1400 with no multicast
//! route, and a router whose far side has MTU 1400 (path MTU below the first hop's).

use std::net::UdpSocket;

use crate::support::{read_json, serve, wirebench};

fn check<'a>(findings: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    findings["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check"))
}

#[test]
fn path_mtu_to_a_loopback_serve() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("doctor.json");
    let target = srv.local_addr().to_string();
    let r = wirebench(&["doctor", "--target", &target, "--json", json.to_str().unwrap()]);
    assert_eq!(r.code, 0, "nothing FAILs on loopback: {r:?}");
    assert!(wirebench_report::screen::unfold(&r.out).contains("interface lo (route to 127.0.0.1:"), "{}", r.out);
    let v = read_json(&json);
    assert_eq!(v["interface"], "lo");
    let p = check(&v, "path MTU");
    assert_eq!(p["verdict"], "OK", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("via lo: 65535, largest safe UDP payload 65507"), "{p}");
    let lo_mtu = check(&v, "MTU");
    assert_eq!(lo_mtu["detail"], "lo: 65536, largest UDP payload without fragmenting 65507", "not 65508: {lo_mtu}");
    for name in [
        "net.core.rmem_max",
        "net.core.wmem_max",
        "MTU",
        "multicast route",
        "IGMP version",
        "rp_filter",
        "CPUs",
        "clocksource",
    ] {
        let c = check(&v, name);
        assert!(["OK", "WARN"].contains(&c["verdict"].as_str().unwrap()), "{c}");
        if c["verdict"] == "WARN" {
            assert!(c["fix"].is_string(), "a WARN says how to fix it: {c}");
        }
    }
    assert!(srv.stop().udp_probes >= 2, "the probes went to serve");
}

#[test]
fn the_stall_meter_check_reports_its_figures_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("doctor.json");
    let r = wirebench(&["doctor", "--stall-check", "300ms", "-v", "--json", json.to_str().unwrap()]);
    assert_ne!(r.code, 2, "{r:?}");
    let v = read_json(&json);
    let stalls = &v["stalls"];
    let n = |k: &str| stalls[k].as_u64().unwrap_or_else(|| panic!("stalls.{k} in {stalls}"));
    assert_eq!(n("interval_ns"), 1_000_000);
    // the meter stops at its last wake-up due within the span, so up to one interval short
    // of it (CI saw 299.87 ms for 300 ms)
    assert!(n("duration_ns") >= 300_000_000 - 1_000_000, "{stalls}");
    // at most one wake-up per elapsed interval (the loop sleeps to due times 1 ms apart)
    assert!(n("wakeups") >= 1 && n("wakeups") <= n("duration_ns") / 1_000_000 + 1, "{stalls}");
    assert!(n("p99_ns") <= n("p999_ns") && n("p999_ns") <= n("max_ns"), "{stalls}");
    let found = check(&v, "stalls");
    let detail = found["detail"].as_str().unwrap();
    assert!(detail.starts_with("a thread woken every 1.0 ms for 0."), "{found}");
    assert!(detail.contains(&format!(" {} wake-ups", n("wakeups"))), "{found}");
    let over = n("p999_ns") > 200_000 || n("max_ns") > 2_000_000;
    assert_eq!(found["verdict"], if over { "WARN" } else { "OK" }, "{found}");
    if over {
        assert!(found["fix"].as_str().unwrap().contains("isolcpus="), "{found}");
    }
    // the stalls line with the lines its detail folded onto (the fix is a line of its own)
    let lines: Vec<&str> = r.out.lines().collect();
    let at = lines.iter().position(|l| l.contains("  stalls  ")).expect("a stalls line");
    let mut line = lines[at].to_owned();
    for l in lines[at + 1..].iter().take_while(|l| l.starts_with(' ') && !l.trim_start().starts_with("fix: ")) {
        line.push(' ');
        line.push_str(l.trim_start());
    }
    assert!(line.ends_with(detail), "{line}");
    // 0s leaves it out
    let off = dir.path().join("off.json");
    let r = wirebench(&["doctor", "--stall-check", "0s", "--json", off.to_str().unwrap()]);
    assert!(!r.out.contains("  stalls  "), "{}", r.out);
    assert!(read_json(&off).get("stalls").is_none());
}

#[test]
fn a_target_that_does_not_answer_fails_with_exit_3() {
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let r = wirebench(&["doctor", "--target", &closed]);
    assert_eq!(r.code, 3, "{r:?}");
    let line = r.out.lines().find(|l| l.starts_with("FAIL  path MTU")).expect("a FAIL line");
    assert!(line.contains("no echo from"), "{line}");
    assert!(r.out.lines().last().unwrap().starts_with("1 FAIL, "), "{}", r.out);
}

#[test]
fn bad_flags_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["doctor", "--interface", "no-such-if0"], "--interface no-such-if0: no such interface"),
        (&["doctor", "--group", "10.0.0.1"], "not an IPv4 multicast address"),
        (&["doctor", "--target", "nowhere"], "bad address"),
    ];
    for (args, want) in cases {
        let r = wirebench(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: {:?}", r.err);
        assert!(r.err.contains(want), "{args:?}: {:?}", r.err);
    }
}

#[cfg(feature = "netns-tests")]
mod netns {
    //! Doctor's verdicts in namespaces this module creates (`tests/it/lab.rs`).

    use std::process::Command;

    use super::check;
    use crate::lab::{BIN, Lab, sh};

    /// A veth pair `a_if` (in `a`) to `b_if` (in `b`), addressed, with `mtu` on both ends.
    fn link(a: &str, a_if: &str, a_ip: &str, b: &str, b_if: &str, b_ip: &str, mtu: &str) {
        Lab::link(a, a_if, a_ip, b, b_if, Some(b_ip));
        Lab::mtu(a, a_if, mtu);
        Lab::mtu(b, b_if, mtu);
    }

    /// `wirebench doctor ARGS --json` in `ns`: exit code, stdout and the findings.
    fn doctor(ns: &str, args: &[&str]) -> (Option<i32>, String, serde_json::Value) {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("d.json");
        let out = Command::new("ip")
            .args(["netns", "exec", ns, BIN, "doctor", "--json", json.to_str().unwrap()])
            .args(args)
            .output()
            .expect("run doctor");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(json.exists(), "{text} {}", String::from_utf8_lossy(&out.stderr));
        (out.status.code(), text, crate::support::read_json(&json))
    }

    #[test]
    fn a_1400_mtu_veth_without_a_multicast_route() {
        let mut lab = Lab::new("dmtu");
        let a = lab.ns("a");
        let b = lab.ns("b");
        link(&a, "veth0", "10.77.11.1/24", &b, "veth0", "10.77.11.2/24", "1400");
        let (code, text, v) = doctor(&a, &["--interface", "veth0"]);
        assert_eq!(code, Some(0), "WARNs only: {text}");
        let mtu = check(&v, "MTU");
        assert_eq!(mtu["verdict"], "WARN", "{mtu}");
        assert!(mtu["detail"].as_str().unwrap().starts_with("veth0: 1400 is below 1500"), "{mtu}");
        assert_eq!(mtu["fix"], "use --size 1372 (or ip link set dev veth0 mtu 1500 if the network carries it)");
        let route = check(&v, "multicast route");
        assert_eq!(route["verdict"], "WARN", "{route}");
        assert!(route["detail"].as_str().unwrap().starts_with("no route for 239.255.0.1"), "{route}");
        assert_eq!(route["fix"], "ip route add 224.0.0.0/4 dev veth0");
        assert_eq!(check(&v, "interface")["verdict"], "OK");
        assert_eq!(check(&v, "multicast flag")["verdict"], "OK");

        // A target reached by lo says nothing about veth0's path: not an OK beside it.
        lab.serve(&a, &["serve", "--listen", "127.0.0.1:7878"]);
        let (code, text, v) = doctor(&a, &["--interface", "veth0", "--target", "127.0.0.1:7878"]);
        assert_eq!(code, Some(0), "{text}");
        let p = check(&v, "path MTU");
        assert_eq!(p["verdict"], "WARN", "{p}");
        assert!(p["detail"].as_str().unwrap().starts_with("to 127.0.0.1:7878 via lo: 65535"), "{p}");
        assert!(p["fix"].as_str().unwrap().starts_with("the probes left by lo, not veth0"), "{p}");

        // with the route the fix names, the same check passes
        sh(&["ip", "-n", &a, "route", "add", "224.0.0.0/4", "dev", "veth0"]);
        let (_, _, v) = doctor(&a, &["--interface", "veth0", "--group", "239.1.2.3:5000"]);
        let route = check(&v, "multicast route");
        assert_eq!(route["verdict"], "OK", "{route}");
        assert!(route["detail"].as_str().unwrap().starts_with("239.1.2.3 is routed via veth0"));
    }

    /// a (MTU 1500) -- router -- (MTU 1400) b: the first hop allows 1472-byte payloads, the
    /// path only 1372; the router's "fragmentation needed" (or silence) tells.
    #[test]
    fn path_mtu_below_the_first_hop() {
        let mut lab = Lab::new("dpmtu");
        let a = lab.ns("a");
        let rtr = lab.ns("r");
        let b = lab.ns("b");
        link(&a, "eth0", "10.77.12.1/24", &rtr, "ra", "10.77.12.254/24", "1500");
        link(&rtr, "rb", "10.77.13.254/24", &b, "eth0", "10.77.13.2/24", "1400");
        sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        sh(&["ip", "-n", &a, "route", "add", "default", "via", "10.77.12.254"]);
        sh(&["ip", "-n", &b, "route", "add", "default", "via", "10.77.13.254"]);
        lab.serve(&b, &["serve", "--listen", "10.77.13.2:7878"]);
        let (code, text, found) = doctor(&a, &["--target", "10.77.13.2:7878"]);
        assert_eq!(code, Some(0), "{text}");
        assert_eq!(found["interface"], "eth0");
        assert_eq!(check(&found, "MTU")["verdict"], "OK");
        let p = check(&found, "path MTU");
        assert_eq!(p["verdict"], "WARN", "{p}");
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.starts_with("to 10.77.13.2:7878 via eth0: 1400 (first hop 1500)"), "{detail}");
        assert!(detail.contains("largest safe UDP payload 1372"), "{detail}");
        assert_eq!(p["fix"], "use --size 1372 or smaller");
    }
}
