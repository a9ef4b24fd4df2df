//! The verdicts: pure functions from what was read on the host to OK, WARN or FAIL with
//! the fix, so every rule is tested with plain values. Thresholds follow what wirebench's
//! modes ask for and the tuning sections of the Aeron and Coherence guides.

use std::net::Ipv4Addr;

use super::{Check, Verdict};
use crate::host::net::Route;

fn check(name: &str, verdict: Verdict, detail: String, fix: Option<String>) -> Check {
    Check { name: name.to_owned(), verdict, detail, fix }
}

fn mib(v: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let m = v as f64 / f64::from(1u32 << 20);
    format!("{m:.1} MiB")
}

/// A socket buffer maximum (`net.core.rmem_max`, `wmem_max`) against the `want` bytes each
/// stream socket asks for: a smaller maximum silently caps the buffer (root is not capped,
/// other users are), and a UDP receiver with a small buffer drops bursts.
pub(super) fn buffer_max(name: &str, value: Option<u64>, want: u64) -> Check {
    let fix = Some(format!("sysctl -w {name}={want}"));
    match value {
        None => check(name, Verdict::Warn, "unreadable".into(), fix),
        Some(v) if v >= want => {
            check(name, Verdict::Ok, format!("{v} ({}), stream sockets ask for {}", mib(v), mib(want)), None)
        }
        Some(v) => check(
            name,
            Verdict::Warn,
            format!(
                "{v} ({}) is below the {} each stream socket asks for: non-root runs get smaller buffers and drop bursts",
                mib(v),
                mib(want)
            ),
            fix,
        ),
    }
}

/// The interface's state: missing or down is a FAIL.
pub(super) fn interface(name: &str, up: Option<bool>) -> Check {
    match up {
        None => check(
            "interface",
            Verdict::Fail,
            format!("{name}: no such interface"),
            Some("pick one from `ip link` with --interface".into()),
        ),
        Some(false) => {
            check("interface", Verdict::Fail, format!("{name} is down"), Some(format!("ip link set dev {name} up")))
        }
        Some(true) => check("interface", Verdict::Ok, format!("{name} is up"), None),
    }
}

/// The largest UDP payload a packet of `mtu` bytes carries: the MTU less the IPv4 and UDP
/// headers, and never past IPv4's 65,535-byte total length (lo's MTU is 65,536, its largest
/// payload 65,507).
pub(super) fn udp_payload(mtu: u32) -> u32 {
    mtu.min(65_535).saturating_sub(super::pmtu::HEADERS)
}

/// The interface MTU: below 1500 the defaults fragment (stream sends 1468-byte payloads).
pub(super) fn mtu(iface: &str, mtu: Option<u32>) -> Check {
    match mtu {
        None => check("MTU", Verdict::Warn, format!("{iface}: unreadable"), None),
        Some(m) if m >= 1500 => check(
            "MTU",
            Verdict::Ok,
            format!("{iface}: {m}, largest UDP payload without fragmenting {}", udp_payload(m)),
            None,
        ),
        Some(m) => check(
            "MTU",
            Verdict::Warn,
            format!(
                "{iface}: {m} is below 1500: UDP payloads above {} fragment (stream's default 1468 does)",
                udp_payload(m)
            ),
            Some(format!(
                "use --size {} (or ip link set dev {iface} mtu 1500 if the network carries it)",
                udp_payload(m)
            )),
        ),
    }
}

/// The path MTU a DF probe search found, against the first hop's. `via` is the interface
/// the probes left by and `checked` the one the other checks are about: when they differ
/// (an `--interface` the route to the target does not use), the figure is not that
/// interface's path MTU, and the verdict says so instead of a bare OK beside it.
pub(super) fn path_mtu(target: &str, found: Result<super::pmtu::Found, String>, via: &str, checked: &str) -> Check {
    let elsewhere = || {
        format!(
            "the probes left by {via}, not {checked}: this is {via}'s path, not {checked}'s; to check {checked}'s, \
             --target a serve reached through it"
        )
    };
    match found {
        Err(e) => check(
            "path MTU",
            Verdict::Fail,
            format!("to {target} via {via}: {e}"),
            Some(format!("start `wirebench serve` on {target}, or open UDP to it")),
        ),
        Ok(f) if f.mtu < f.first_hop.min(65_535) => check(
            "path MTU",
            Verdict::Warn,
            format!(
                "to {target} via {via}: {} (first hop {}): a hop on the path has a smaller MTU; largest safe UDP payload {} ({} probes)",
                f.mtu, f.first_hop, f.payload, f.probes
            ),
            Some(format!("use --size {} or smaller", f.payload)),
        ),
        Ok(f) if via != checked => check(
            "path MTU",
            Verdict::Warn,
            format!("to {target} via {via}: {}, largest safe UDP payload {} ({} probes)", f.mtu, f.payload, f.probes),
            Some(elsewhere()),
        ),
        Ok(f) => check(
            "path MTU",
            Verdict::Ok,
            format!("to {target} via {via}: {}, largest safe UDP payload {} ({} probes)", f.mtu, f.payload, f.probes),
            None,
        ),
    }
}

/// The route multicast to `group` takes. wirebench sets `IP_MULTICAST_IF` when given
/// `--interface`, so a missing route is a WARN: other tools (and wirebench without
/// `--interface`) fail with "Network is unreachable" or leave by the wrong interface.
pub(super) fn multicast_route(iface: &str, group: Ipv4Addr, routes: &[Route]) -> Check {
    let name = "multicast route";
    let fix = Some(format!("ip route add 224.0.0.0/4 dev {iface}"));
    let best = routes.iter().filter(|r| r.covers(group)).max_by_key(|r| u32::from(r.mask).leading_ones());
    match best {
        None => check(
            name,
            Verdict::Warn,
            format!(
                "no route for {group}: senders that do not set IP_MULTICAST_IF get \"Network is unreachable\" (wirebench --interface {iface} sets it)"
            ),
            fix,
        ),
        Some(r) if r.iface != iface => check(
            name,
            Verdict::Warn,
            format!(
                "{group} is routed via {}, not {iface}: senders that do not set IP_MULTICAST_IF use {}",
                r.iface, r.iface
            ),
            fix,
        ),
        Some(r) if r.is_default() => check(
            name,
            Verdict::Warn,
            format!("{group} follows the default route via {iface}: it works until the default route changes"),
            fix,
        ),
        Some(r) => check(
            name,
            Verdict::Ok,
            format!("{group} is routed via {iface} ({}/{})", r.dest, u32::from(r.mask).leading_ones()),
            None,
        ),
    }
}

/// The interface's multicast flag (loopback carries multicast without it).
pub(super) fn multicast_flag(iface: &str, multicast: bool, loopback: bool) -> Check {
    if multicast || loopback {
        check("multicast flag", Verdict::Ok, format!("{iface} carries multicast"), None)
    } else {
        check(
            "multicast flag",
            Verdict::Fail,
            format!("{iface} has no MULTICAST flag: groups cannot be joined or sent to on it"),
            Some(format!("ip link set dev {iface} multicast on")),
        )
    }
}

/// `force_igmp_version`: 0 lets the kernel speak IGMPv3 (v2 once it hears a v2 querier);
/// Aeron's guide and AWS Transit Gateway multicast want v2 forced.
pub(super) fn igmp(iface: &str, value: Option<&str>) -> Check {
    let fix = format!("sysctl -w net.ipv4.conf.{iface}.force_igmp_version=2");
    match value {
        Some("2") => check("IGMP version", Verdict::Ok, format!("{iface}: forced to IGMPv2"), None),
        Some("0") | None => check(
            "IGMP version",
            Verdict::Ok,
            format!(
                "{iface}: automatic (IGMPv3, v2 when a v2 querier answers); networks that need v2 (AWS Transit Gateway, Aeron's guide): {fix}"
            ),
            None,
        ),
        Some("1") => check(
            "IGMP version",
            Verdict::Warn,
            format!("{iface}: forced to IGMPv1 (no leave messages: groups linger on switches)"),
            Some(fix),
        ),
        Some(v) => check("IGMP version", Verdict::Ok, format!("{iface}: forced to IGMPv{v}"), None),
    }
}

/// Reverse-path filtering: strict mode (1) drops multicast (and unicast) whose source is not
/// routed back out of the receiving interface. The effective value is the larger of `all`
/// and the interface's.
pub(super) fn rp_filter(iface: &str, all: Option<u8>, own: Option<u8>) -> Check {
    let v = all.unwrap_or(0).max(own.unwrap_or(0));
    if v == 1 {
        check(
            "rp_filter",
            Verdict::Warn,
            format!(
                "{iface}: strict (1): datagrams from sources not routed back via {iface} are dropped, multicast included"
            ),
            Some(format!("sysctl -w net.ipv4.conf.all.rp_filter=2; sysctl -w net.ipv4.conf.{iface}.rp_filter=2")),
        )
    } else {
        let words = if v == 0 { "off" } else { "loose" };
        check("rp_filter", Verdict::Ok, format!("{iface}: {words} ({v})"), None)
    }
}

/// Busy-polling both ends of a test takes a core each, plus one for everything else.
pub(super) fn cpus(n: u32) -> Check {
    if n >= 4 {
        check("CPUs", Verdict::Ok, format!("{n}: room for busy-polling both ends (--spin) and the rest"), None)
    } else {
        check(
            "CPUs",
            Verdict::Warn,
            format!(
                "{n}: busy-polling both ends of a same-host test (--spin) takes {} of them; anything else running shows up in the tail",
                n.min(2)
            ),
            Some("busy-poll one end only, pin with --cpu, and run benchmarks alone".into()),
        )
    }
}

/// The CPU frequency governors (none: a VM or fixed frequency).
pub(super) fn governor(governors: &[String]) -> Check {
    let slow: Vec<&String> = governors.iter().filter(|g| *g != "performance").collect();
    if governors.is_empty() {
        check("frequency governor", Verdict::Ok, "no cpufreq (a VM, or a fixed frequency)".into(), None)
    } else if slow.is_empty() {
        check("frequency governor", Verdict::Ok, "performance on every CPU".into(), None)
    } else {
        check(
            "frequency governor",
            Verdict::Warn,
            format!(
                "{} (not performance) on {} of {} CPUs: clock ramps add latency after idle",
                slow[0],
                slow.len(),
                governors.len()
            ),
            Some("cpupower frequency-set -g performance".into()),
        )
    }
}

/// Clocksources whose reads stay in user space (vDSO).
const FAST_CLOCKS: [&str; 4] = ["tsc", "kvm-clock", "arch_sys_counter", "hyperv_clocksource_tsc_page"];

/// The clocksource: timestamps are taken per probe, so a clock read that is a system call
/// (hpet, acpi_pm) adds about a microsecond to each.
pub(super) fn clocksource(current: &str, available: &str) -> Check {
    if FAST_CLOCKS.contains(&current) {
        check("clocksource", Verdict::Ok, format!("{current} (read in user space)"), None)
    } else {
        let fix = available
            .split_whitespace()
            .find(|c| FAST_CLOCKS.contains(c))
            .map(|c| format!("echo {c} > /sys/devices/system/clocksource/clocksource0/current_clocksource"));
        check(
            "clocksource",
            Verdict::Warn,
            format!("{current}: every clock read is a system call (about 1 us per timestamp)"),
            fix,
        )
    }
}

/// Kernel busy polling (`busy_poll`, `busy_read`): informational, wirebench's --spin polls
/// in user space and needs neither.
/// The kernel shows both sysctls only in the host's first network namespace: elsewhere (a
/// container, `ip netns exec`) they are missing, which is said, not shown as `?`.
pub(super) fn busy_poll(poll: Option<&str>, read: Option<&str>) -> Check {
    let detail = match (poll, read) {
        (Some(p), Some(r)) => {
            format!("net.core.busy_poll {p}, busy_read {r} (wirebench --spin polls in user space and needs neither)")
        }
        _ => "net.core.busy_poll and busy_read are not readable in this network namespace (the kernel shows \
              them only in the host's own); wirebench --spin polls in user space and needs neither"
            .to_owned(),
    };
    check("busy poll", Verdict::Ok, detail, None)
}

/// A stall-meter wake-up lateness at p99.9 above which doctor warns, ns.
pub(super) const STALL_WARN_P999_NS: u64 = 200_000;
/// A latest wake-up above which doctor warns, ns.
pub(super) const STALL_WARN_MAX_NS: u64 = 2_000_000;

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn dur(ns: u64) -> String {
    if ns >= 1_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{} us", ns / 1000) }
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The stall meter's short run (`hiccup`): how late a sleeping thread woke. Tails below
/// the p99.9 measured on this host are the host's own, not the network's.
pub(super) fn stalls(s: &super::Stalls) -> Check {
    let detail = format!(
        "a thread woken every {} for {:.1} s: {} wake-ups{}, late p99 {}, p99.9 {}, max {}",
        dur(s.interval_ns),
        secs(s.duration_ns),
        s.wakeups,
        if s.corrected > 0 { format!(" + {} missed in stalls", s.corrected) } else { String::new() },
        dur(s.p99_ns),
        dur(s.p999_ns),
        dur(s.max_ns)
    );
    if s.p999_ns <= STALL_WARN_P999_NS && s.max_ns <= STALL_WARN_MAX_NS {
        return check("stalls", Verdict::Ok, detail, None);
    }
    let fix = format!(
        "latency tails up to {} measured here are this host's own: run on a quieter host, pin the run (--cpu) to a core \
         kept free with isolcpus= nohz_full=, or busy-poll (--spin) so it never sleeps; `wirebench hiccup` watches longer",
        dur(s.p999_ns.max(s.max_ns))
    );
    check("stalls", Verdict::Warn, detail, Some(fix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::net::parse_routes;

    /// In a network namespace of its own the two sysctls do not exist: the line says why,
    /// with no `?` standing for a value.
    #[test]
    fn busy_poll_says_why_it_has_no_values() {
        let here = busy_poll(Some("0"), Some("50"));
        assert_eq!(here.verdict, Verdict::Ok);
        assert!(here.detail.starts_with("net.core.busy_poll 0, busy_read 50 (wirebench --spin"), "{}", here.detail);
        for (p, r) in [(None, None), (Some("0"), None)] {
            let ns = busy_poll(p, r);
            assert_eq!(ns.verdict, Verdict::Ok);
            assert!(!ns.detail.contains('?'), "{}", ns.detail);
            assert!(ns.detail.contains("not readable in this network namespace"), "{}", ns.detail);
        }
    }

    #[test]
    fn stalls_warn_above_the_thresholds() {
        let s = |p999_ns, max_ns| super::super::Stalls {
            interval_ns: 1_000_000,
            duration_ns: 1_000_000_000,
            wakeups: 1000,
            corrected: 0,
            p99_ns: 20_000,
            p999_ns,
            max_ns,
        };
        let ok = stalls(&s(STALL_WARN_P999_NS, STALL_WARN_MAX_NS));
        assert_eq!((ok.verdict, ok.fix), (Verdict::Ok, None));
        assert_eq!(
            ok.detail,
            "a thread woken every 1.0 ms for 1.0 s: 1000 wake-ups, late p99 20 us, p99.9 200 us, max 2.0 ms"
        );
        let tail = stalls(&s(STALL_WARN_P999_NS + 1000, 300_000));
        assert_eq!(tail.verdict, Verdict::Warn);
        assert!(tail.fix.unwrap().starts_with("latency tails up to 300 us measured here are this host's own"));
        let one = stalls(&s(50_000, 74_900_000));
        assert_eq!(one.verdict, Verdict::Warn);
        assert!(one.fix.unwrap().contains("isolcpus="));
    }

    #[test]
    fn buffers_against_sixteen_mib() {
        let want = 16 << 20;
        assert_eq!(buffer_max("net.core.rmem_max", Some(want), want).verdict, Verdict::Ok);
        let c = buffer_max("net.core.rmem_max", Some(4_194_304), want);
        assert_eq!(c.verdict, Verdict::Warn);
        assert_eq!(c.fix.as_deref(), Some("sysctl -w net.core.rmem_max=16777216"));
        assert!(c.detail.starts_with("4194304 (4.0 MiB) is below the 16.0 MiB"), "{}", c.detail);
    }

    #[test]
    fn mtu_and_path_mtu() {
        assert_eq!(mtu("eth0", Some(1500)).verdict, Verdict::Ok);
        let c = mtu("veth0", Some(1400));
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.fix.unwrap().starts_with("use --size 1372"));
        let f = |mtu, first_hop| super::super::pmtu::Found { payload: mtu - 28, mtu, first_hop, probes: 9 };
        assert_eq!(path_mtu("b:7878", Ok(f(1500, 1500)), "eth0", "eth0").verdict, Verdict::Ok);
        let c = path_mtu("b:7878", Ok(f(1400, 1500)), "eth0", "eth0");
        assert_eq!((c.verdict, c.fix.as_deref()), (Verdict::Warn, Some("use --size 1372 or smaller")));
        assert_eq!(path_mtu("b:7878", Err("no echo".into()), "eth0", "eth0").verdict, Verdict::Fail);
    }

    /// lo's MTU is 65,536 but an IPv4 packet is at most 65,535 bytes: the largest payload
    /// is 65,507 (doctor said 65,508), and lo's path MTU of 65,535 is not "a smaller hop".
    #[test]
    fn loopback_payload_is_65507() {
        assert_eq!(udp_payload(65_536), 65_507);
        assert_eq!(udp_payload(1_500), 1_472);
        let c = mtu("lo", Some(65_536));
        assert_eq!(c.detail, "lo: 65536, largest UDP payload without fragmenting 65507");
        let f = super::super::pmtu::Found { payload: 65_507, mtu: 65_535, first_hop: 65_536, probes: 2 };
        assert_eq!(path_mtu("127.0.0.1:7878", Ok(f), "lo", "lo").verdict, Verdict::Ok);
    }

    /// `--interface eth0 --target 127.0.0.1:7878`: the probes go by lo, so lo's path MTU is
    /// not an OK for eth0.
    #[test]
    fn a_path_mtu_by_another_interface_is_not_ok_beside_it() {
        let f = super::super::pmtu::Found { payload: 65_507, mtu: 65_535, first_hop: 65_536, probes: 2 };
        let c = path_mtu("127.0.0.1:7878", Ok(f), "lo", "eth0");
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.detail.starts_with("to 127.0.0.1:7878 via lo: 65535"), "{}", c.detail);
        assert!(c.fix.unwrap().starts_with("the probes left by lo, not eth0"));
    }

    #[test]
    fn multicast_routes() {
        let hdr = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n";
        let default = "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        let mc_lo = "lo\t000000E0\t00000000\t0001\t0\t0\t0\t000000F0\t0\t0\t0\n";
        let g = Ipv4Addr::new(239, 255, 0, 1);
        let routes = parse_routes(&format!("{hdr}{default}{mc_lo}"));
        assert_eq!(multicast_route("lo", g, &routes).verdict, Verdict::Ok);
        let c = multicast_route("eth0", g, &routes);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.detail.contains("routed via lo, not eth0"), "{}", c.detail);
        assert_eq!(c.fix.as_deref(), Some("ip route add 224.0.0.0/4 dev eth0"));
        let only_default = parse_routes(&format!("{hdr}{default}"));
        assert!(multicast_route("eth0", g, &only_default).detail.contains("default route"));
        let none = multicast_route("veth0", g, &[]);
        assert_eq!(none.verdict, Verdict::Warn);
        assert!(none.detail.starts_with("no route for 239.255.0.1"));
    }

    #[test]
    fn multicast_details() {
        assert_eq!(multicast_flag("lo", false, true).verdict, Verdict::Ok);
        assert_eq!(multicast_flag("tun0", false, false).verdict, Verdict::Fail);
        assert_eq!(igmp("eth0", Some("2")).verdict, Verdict::Ok);
        assert_eq!(igmp("eth0", Some("1")).verdict, Verdict::Warn);
        assert!(igmp("eth0", Some("0")).detail.contains("sysctl -w net.ipv4.conf.eth0.force_igmp_version=2"));
        assert_eq!(rp_filter("eth0", Some(0), Some(1)).verdict, Verdict::Warn, "the larger of all and the interface");
        assert_eq!(rp_filter("eth0", Some(2), Some(0)).verdict, Verdict::Ok);
    }

    #[test]
    fn cpus_governor_clocksource() {
        assert_eq!(cpus(2).verdict, Verdict::Warn);
        assert_eq!(cpus(8).verdict, Verdict::Ok);
        assert_eq!(governor(&[]).verdict, Verdict::Ok);
        let c = governor(&["performance".into(), "powersave".into()]);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.detail.starts_with("powersave (not performance) on 1 of 2 CPUs"));
        assert_eq!(clocksource("tsc", "tsc kvm-clock").verdict, Verdict::Ok);
        let c = clocksource("hpet", "hpet acpi_pm tsc");
        assert_eq!(c.verdict, Verdict::Warn);
        assert_eq!(
            c.fix.as_deref(),
            Some("echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource")
        );
    }
}
