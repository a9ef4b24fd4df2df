//! `wirebench shape tc`: the printed script, and (behind `netns-tests`, root) `--apply` and
//! `--clear` on devices in namespaces this module makes: the tree is there and gone again,
//! a root qdisc it did not create is never removed (apply and clear refuse with the command
//! that would), a failed apply takes back only its own, and a client behind a NAT gateway
//! lands in its class through the iptables part (iptables is required here, not skipped).

use crate::support::wirebench;

#[test]
fn shape_tc_prints_the_script_and_what_it_cannot_do() {
    let args = ["shape", "tc", "--dev", "eth1", "--client", "10.0.0.11=60.76mbit/10ms", "--default", "1gbit"];
    let r = wirebench(&[&args[..], &["--netem", "yes"]].concat());
    assert_eq!(r.code, 0, "{r:?}");
    let want_head = "\
# wirebench shape tc: 1 client(s) on eth1, others 1gbit
tc qdisc add dev eth1 root handle 1: htb default ffff
tc class add dev eth1 parent 1: classid 1:10 htb rate 60760kbit ceil 60760kbit
tc qdisc add dev eth1 parent 1:10 handle 10: netem delay 10ms limit 100000
tc filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.11/32 flowid 1:10
";
    assert!(r.out.starts_with(want_head), "{}", r.out);
    assert!(r.out.contains("iptables -t mangle -A FORWARD -o eth1 -j WB-SHAPE-eth1\n"), "{}", r.out);
    assert!(r.out.contains("iptables -t mangle -A WB-SHAPE-eth1 -s 10.0.0.11 -j CLASSIFY --set-class 1:10\n"));
    assert!(!r.out.contains(" fw ") && !r.out.contains("match mark"), "no fw classifier, no u32 mark match");
    let r = wirebench(&[&args[..], &["--netem", "no"]].concat());
    assert!(r.out.contains("delays (10.0.0.11 10ms) are NOT applied"), "{}", r.out);
    assert!(r.out.contains("wirebench proxy --listen ADDR --upstream ADDR --delay 10ms"), "{}", r.out);
    assert!(r.out.contains("handle 10: tbf rate 60760kbit"), "{}", r.out);
    // clients of two delays: a proxy each, not one at the larger delay for all
    let two = ["--client", "10.0.0.12=10mbit/40ms", "--client", "10.0.0.13=10mbit/10ms", "--netem", "no"];
    let r = wirebench(&[&args[..], &two[..]].concat());
    assert!(r.out.contains("--delay 10ms (for 10.0.0.11, 10.0.0.13)\n"), "{}", r.out);
    assert!(r.out.contains("--delay 40ms (for 10.0.0.12)\n"), "{}", r.out);
    let r = wirebench(&["shape", "tc", "--dev", "eth1"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = wirebench(&["shape", "tc", "--dev", "eth1", "--client", "10.0.0.1=fast"]);
    assert_eq!((r.code, r.err.lines().count()), (2, 1), "{r:?}");
}

#[cfg(feature = "netns-tests")]
mod netns {
    use std::process::{Command, Output};

    use crate::lab::{Lab, sh};

    /// `cmd ARGS` in `ns`, its stdout (it must succeed).
    fn out(ns: &str, args: &[&str]) -> String {
        let o = Command::new("ip").args(["netns", "exec", ns]).args(args).output().expect("runs");
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn shape(ns: &str, dev: &str, extra: &[&str]) -> Output {
        Lab::run(ns, &[&["shape", "tc", "--dev", dev][..], extra].concat())
    }

    fn text(o: &Output) -> (String, String) {
        (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    }

    fn iptables_is_installed() {
        let found =
            std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("iptables").is_file()));
        assert!(found, "the namespace tests need iptables (.ci/run installs it): its part is not skipped");
    }

    /// Apply, then clear: the tree is there (the NAT chain too), then gone; a second clear
    /// finds nothing and says so.
    #[test]
    fn apply_then_clear() {
        iptables_is_installed();
        let mut lab = Lab::new("shp");
        let ns = lab.ns("g");
        let peer = lab.ns("p");
        Lab::link(&ns, "wbv0", "10.77.163.1/24", &peer, "wbv1", Some("10.77.163.2/24"));
        let o = shape(&ns, "wbv0", &["--client", "10.77.163.2=60.76mbit/10ms", "--default", "1gbit", "--apply"]);
        assert!(o.status.success(), "{:?}", text(&o));
        assert!(out(&ns, &["tc", "qdisc", "show", "dev", "wbv0"]).contains("qdisc htb 1: root"));
        let classes = out(&ns, &["tc", "class", "show", "dev", "wbv0"]);
        assert!(classes.contains("1:10") && classes.contains("60760Kbit"), "{classes}");
        assert!(out(&ns, &["tc", "filter", "show", "dev", "wbv0"]).contains("0a4da302/ffffffff"));
        let rules = out(&ns, &["iptables", "-t", "mangle", "-S"]);
        assert!(rules.contains("-A FORWARD -o wbv0 -j WB-SHAPE-wbv0"), "{rules}");
        assert!(rules.contains("-A WB-SHAPE-wbv0 -s 10.77.163.2/32 -j CLASSIFY --set-class 0001:0010"), "{rules}");
        let o = shape(&ns, "wbv0", &["--clear"]);
        assert!(o.status.success(), "{:?}", text(&o));
        let qdiscs = out(&ns, &["tc", "qdisc", "show", "dev", "wbv0"]);
        assert!(!qdiscs.contains("htb") && !qdiscs.contains("tbf"), "{qdiscs}");
        assert!(!out(&ns, &["iptables", "-t", "mangle", "-S"]).contains("WB-SHAPE"), "the chain is gone");
        assert!(text(&shape(&ns, "wbv0", &["--clear"])).0.contains("nothing to remove"));
    }

    /// A second --apply removed the first's tree (its root add failed, and the rollback
    /// deleted whatever root was there); a root someone else made was deleted the same way.
    /// Now both are refused with the exact command, and nothing is touched.
    #[test]
    fn what_apply_did_not_create_is_never_removed() {
        let mut lab = Lab::new("shpown");
        let ns = lab.ns("g");
        let peer = lab.ns("p");
        Lab::link(&ns, "wbv0", "10.77.164.1/24", &peer, "wbv1", Some("10.77.164.2/24"));
        let args = ["--client", "10.77.164.2=10mbit", "--netem", "no", "--apply"];
        assert!(shape(&ns, "wbv0", &args).status.success());
        let o = shape(&ns, "wbv0", &args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("already has a root qdisc (htb 1:)") && err.contains("`tc qdisc del dev wbv0 root`"),
            "{err}"
        );
        assert!(out(&ns, &["tc", "class", "show", "dev", "wbv0"]).contains("1:10"), "the first tree is intact");
        assert!(shape(&ns, "wbv0", &["--clear"]).status.success());

        sh(&[
            "ip", "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "wbv0", "root", "handle", "8001:", "tbf", "rate",
            "1mbit", "burst", "3000", "latency", "50ms",
        ]);
        let o = shape(&ns, "wbv0", &args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("(tbf 8001:)") && err.contains("`tc qdisc del dev wbv0 root`"), "{err}");
        let o = shape(&ns, "wbv0", &["--clear"]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("left alone"), "{err}");
        assert!(out(&ns, &["tc", "qdisc", "show", "dev", "wbv0"]).contains("qdisc tbf 8001: root"), "still there");
    }

    /// An --apply that fails part way (netem asked for on a kernel without it; or, with
    /// netem, no failure) leaves the device as it found it or fully shaped, never half.
    #[test]
    fn a_failed_apply_takes_back_only_its_own() {
        let mut lab = Lab::new("shpfail");
        let ns = lab.ns("g");
        let peer = lab.ns("p");
        Lab::link(&ns, "wbv0", "10.77.165.1/24", &peer, "wbv1", Some("10.77.165.2/24"));
        let o = shape(&ns, "wbv0", &["--client", "10.77.165.2=10mbit/10ms", "--netem", "yes", "--apply"]);
        let qdiscs = out(&ns, &["tc", "qdisc", "show", "dev", "wbv0"]);
        if o.status.success() {
            assert!(qdiscs.contains("netem"), "{qdiscs}");
        } else {
            let (_, err) = text(&o);
            assert!(err.contains("rolled back what --apply added"), "{err}");
            assert!(!qdiscs.contains("htb"), "nothing half-made left: {qdiscs}");
        }
    }

    /// client (10.77.161.11) -> gateway (NAT out of wbs0) -> server: on wbs0 the packets carry
    /// the gateway's address, so only the iptables part can put them in the client's class.
    /// The class's packet counter says they got there.
    #[test]
    fn a_client_behind_nat_lands_in_its_class() {
        iptables_is_installed();
        let mut lab = Lab::new("shpnat");
        let client = lab.ns("c");
        let gw = lab.ns("g");
        let server = lab.ns("s");
        Lab::link(&client, "eth0", "10.77.161.11/24", &gw, "wbc0", Some("10.77.161.1/24"));
        Lab::link(&gw, "wbs0", "10.77.162.1/24", &server, "eth0", Some("10.77.162.2/24"));
        sh(&["ip", "netns", "exec", &gw, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        sh(&["ip", "-n", &client, "route", "add", "default", "via", "10.77.161.1"]);
        sh(&[
            "ip",
            "netns",
            "exec",
            &gw,
            "iptables",
            "-t",
            "nat",
            "-A",
            "POSTROUTING",
            "-o",
            "wbs0",
            "-j",
            "MASQUERADE",
        ]);
        lab.serve(&server, &["serve", "--listen", "10.77.162.2:7878"]);
        let o =
            shape(&gw, "wbs0", &["--client", "10.77.161.11=50mbit", "--default", "1gbit", "--netem", "no", "--apply"]);
        let (stdout, err) = text(&o);
        assert!(o.status.success(), "{stdout} {err}");
        assert!(!stdout.contains("NAT part skipped"), "{stdout}");
        let o = Lab::run(&client, &["ping", "10.77.162.2:7878", "--count", "50", "--warmup", "0", "-q"]);
        assert!(o.status.success(), "{:?}", text(&o));
        let stats = out(&gw, &["tc", "-s", "class", "show", "dev", "wbs0", "classid", "1:10"]);
        let sent: u64 = stats
            .split_whitespace()
            .skip_while(|w| *w != "bytes")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no packet count in {stats}"));
        assert!(sent >= 50, "the client's 50 probes went through its class (1:10): {stats}");
    }
}
