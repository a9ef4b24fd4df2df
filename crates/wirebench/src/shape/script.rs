//! The tc and iptables commands for a shaping plan, as argv lists: pure, so the printed
//! script is tested exactly and `--apply` runs the very same commands.
//!
//! Shape: an HTB root on the device; per client a class at its rate (rate = ceil, no
//! borrowing), a leaf for the delay (netem where the kernel has it; otherwise a tbf that
//! bounds the queue to 100 ms and no delay), and u32 filters on the client's address (as
//! destination and as source). For clients behind a NAT gateway, whose address is rewritten
//! before tc sees the packet, an iptables mangle chain in FORWARD (which sees the original
//! addresses; OUTPUT too, for the gateway's own traffic to them), entered only for packets
//! leaving by the shaped device, sets their class with CLASSIFY: HTB takes a packet whose
//! priority names one of its classes before any filter. (No fw classifier is needed, which
//! some kernels lack, and no `u32 match mark`, which kernels without CONFIG_CLS_U32_MARK
//! accept and then match every packet with.)

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use wirebench_core::units::{BitRate, humanize_ns};

/// One client's link (or the default class's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Rate.
    pub rate: BitRate,
    /// Added delay, ns.
    pub delay_ns: u64,
}

/// What to shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The device whose egress is shaped.
    pub dev: String,
    /// Clients by address.
    pub clients: Vec<(Ipv4Addr, Link)>,
    /// Everyone else (unshaped when absent).
    pub default: Option<Link>,
    /// Use netem for the delays.
    pub netem: bool,
}

/// A command line.
pub type Cmd = Vec<String>;

/// The commands, in the order they must run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Root, classes, leaves and address filters.
    pub tc: Vec<Cmd>,
    /// The mangle chain that classifies NATed clients (needs iptables).
    pub iptables: Vec<Cmd>,
}

/// The root qdisc's handle (`1:`): what `--clear` recognises as shape's own.
pub const ROOT_HANDLE: &str = "1:";
/// Class minor (hex in tc) of the default class.
const DEFAULT_MINOR: u32 = 0xffff;
/// The first client's class minor; then one up per client.
const FIRST_MINOR: u32 = 0x10;
/// The most clients one plan shapes.
pub const MAX_CLIENTS: usize = 4096;
/// The queue bound of a tbf leaf.
const TBF_LATENCY: &str = "100ms";

fn cmd(s: &str) -> Cmd {
    s.split_whitespace().map(str::to_owned).collect()
}

/// A rate as tc writes it, exactly: `60760kbit`, `1gbit`.
pub fn tc_rate(r: BitRate) -> String {
    let b = r.bps();
    match () {
        () if b.is_multiple_of(1_000_000_000) => format!("{}gbit", b / 1_000_000_000),
        () if b.is_multiple_of(1_000_000) => format!("{}mbit", b / 1_000_000),
        () if b.is_multiple_of(1_000) => format!("{}kbit", b / 1_000),
        () => format!("{b}bit"),
    }
}

/// The iptables chain of a device.
pub fn chain(dev: &str) -> String {
    format!("WB-SHAPE-{dev}")
}

fn class(dev: &str, minor: u32, link: Link, netem: bool) -> Vec<Cmd> {
    let rate = tc_rate(link.rate);
    let mut v = vec![cmd(&format!("tc class add dev {dev} parent 1: classid 1:{minor:x} htb rate {rate} ceil {rate}"))];
    let leaf = if netem && link.delay_ns > 0 {
        format!("netem delay {} limit 100000", humanize_ns(u128::from(link.delay_ns)))
    } else {
        // 10 ms at the rate, at least two frames: tbf needs a burst of at least rate / HZ.
        let burst = (link.rate.bps() / 8 / 100).max(3028);
        format!("tbf rate {rate} burst {burst} latency {TBF_LATENCY}")
    };
    v.push(cmd(&format!("tc qdisc add dev {dev} parent 1:{minor:x} handle {minor:x}: {leaf}")));
    v
}

/// The commands that set `plan` up.
pub fn apply(plan: &Plan) -> Script {
    let dev = &plan.dev;
    let mut s = Script::default();
    let default = if plan.default.is_some() { format!(" default {DEFAULT_MINOR:x}") } else { String::new() };
    s.tc.push(cmd(&format!("tc qdisc add dev {dev} root handle 1: htb{default}")));
    let ch = chain(dev);
    if !plan.clients.is_empty() {
        s.iptables.push(cmd(&format!("iptables -t mangle -N {ch}")));
        s.iptables.push(cmd(&format!("iptables -t mangle -A FORWARD -o {dev} -j {ch}")));
        s.iptables.push(cmd(&format!("iptables -t mangle -A OUTPUT -o {dev} -j {ch}")));
    }
    for (minor, (ip, link)) in (FIRST_MINOR..).zip(&plan.clients) {
        s.tc.extend(class(dev, minor, *link, plan.netem));
        for dir in ["dst", "src"] {
            s.tc.push(cmd(&format!(
                "tc filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip {dir} {ip}/32 flowid 1:{minor:x}"
            )));
        }
        for flag in ["-s", "-d"] {
            s.iptables
                .push(cmd(&format!("iptables -t mangle -A {ch} {flag} {ip} -j CLASSIFY --set-class 1:{minor:x}")));
        }
    }
    if let Some(link) = plan.default {
        s.tc.extend(class(dev, DEFAULT_MINOR, link, plan.netem));
    }
    s
}

/// The commands that remove what [`apply`] set up (each may fail when already gone).
pub fn clear(dev: &str) -> Script {
    let ch = chain(dev);
    Script {
        tc: vec![cmd(&format!("tc qdisc del dev {dev} root"))],
        iptables: vec![
            cmd(&format!("iptables -t mangle -D FORWARD -o {dev} -j {ch}")),
            cmd(&format!("iptables -t mangle -D OUTPUT -o {dev} -j {ch}")),
            cmd(&format!("iptables -t mangle -F {ch}")),
            cmd(&format!("iptables -t mangle -X {ch}")),
        ],
    }
}

/// The root qdisc of a device as `tc qdisc show dev DEV` prints it: kind and handle
/// (`("htb", "1:")`); `None` when the device has only the kernel's default (handle `0:`:
/// noqueue, pfifo_fast, mq, ...), which adding a root replaces harmlessly.
pub fn root_qdisc(tc_show: &str) -> Option<(String, String)> {
    tc_show.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["qdisc", kind, handle, "root", ..] if *handle != "0:" => Some(((*kind).to_owned(), (*handle).to_owned())),
            _ => None,
        }
    })
}

/// The script as text: comment lines (`notes`), the tc part, then the NAT part with its
/// own comment.
pub fn render(notes: &[String], s: &Script) -> String {
    let mut out = String::new();
    for n in notes {
        let _ = writeln!(out, "# {n}");
    }
    for c in &s.tc {
        let _ = writeln!(out, "{}", c.join(" "));
    }
    if !s.iptables.is_empty() {
        out.push_str(
            "# Clients behind a NAT gateway: their address is rewritten before tc sees it, so classify\n\
             # them in iptables' mangle table (FORWARD sees the original addresses):\n",
        );
    }
    for c in &s.iptables {
        let _ = writeln!(out, "{}", c.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(netem: bool) -> Plan {
        let link = |r: &str, d: u64| Link { rate: r.parse().unwrap(), delay_ns: d };
        Plan {
            dev: "eth1".into(),
            clients: vec![
                ("10.0.0.11".parse().unwrap(), link("60.76mbit", 10_000_000)),
                ("10.0.0.12".parse().unwrap(), link("100mbit", 0)),
            ],
            default: Some(link("1gbit", 0)),
            netem,
        }
    }

    #[test]
    fn the_script_for_a_known_plan() {
        let want = "\
tc qdisc add dev eth1 root handle 1: htb default ffff
tc class add dev eth1 parent 1: classid 1:10 htb rate 60760kbit ceil 60760kbit
tc qdisc add dev eth1 parent 1:10 handle 10: netem delay 10ms limit 100000
tc filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.11/32 flowid 1:10
tc filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.11/32 flowid 1:10
tc class add dev eth1 parent 1: classid 1:11 htb rate 100mbit ceil 100mbit
tc qdisc add dev eth1 parent 1:11 handle 11: tbf rate 100mbit burst 125000 latency 100ms
tc filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.12/32 flowid 1:11
tc filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.12/32 flowid 1:11
tc class add dev eth1 parent 1: classid 1:ffff htb rate 1gbit ceil 1gbit
tc qdisc add dev eth1 parent 1:ffff handle ffff: tbf rate 1gbit burst 1250000 latency 100ms
# Clients behind a NAT gateway: their address is rewritten before tc sees it, so classify
# them in iptables' mangle table (FORWARD sees the original addresses):
iptables -t mangle -N WB-SHAPE-eth1
iptables -t mangle -A FORWARD -o eth1 -j WB-SHAPE-eth1
iptables -t mangle -A OUTPUT -o eth1 -j WB-SHAPE-eth1
iptables -t mangle -A WB-SHAPE-eth1 -s 10.0.0.11 -j CLASSIFY --set-class 1:10
iptables -t mangle -A WB-SHAPE-eth1 -d 10.0.0.11 -j CLASSIFY --set-class 1:10
iptables -t mangle -A WB-SHAPE-eth1 -s 10.0.0.12 -j CLASSIFY --set-class 1:11
iptables -t mangle -A WB-SHAPE-eth1 -d 10.0.0.12 -j CLASSIFY --set-class 1:11
";
        assert_eq!(render(&[], &apply(&plan(true))), want);
    }

    #[test]
    fn without_netem_the_delay_leaf_is_a_tbf() {
        let s = render(&[], &apply(&plan(false)));
        assert!(s.contains("handle 10: tbf rate 60760kbit burst 75950 latency 100ms"), "{s}");
        assert!(!s.contains("netem"));
    }

    #[test]
    fn rates_in_tc_units() {
        let r = |s: &str| tc_rate(s.parse().unwrap());
        assert_eq!(
            (r("60.76mbit"), r("1gbit"), r("1.5kbit"), r("100MB/s")),
            ("60760kbit".into(), "1gbit".into(), "1500bit".into(), "800mbit".into())
        );
    }

    #[test]
    fn the_root_qdisc_that_is_not_the_kernels_default() {
        let cases = [
            ("qdisc noqueue 0: root refcnt 2 \n", None),
            ("qdisc mq 0: root \nqdisc pfifo_fast 0: parent :1 bands 3\n", None),
            (
                "qdisc htb 1: root refcnt 2 r2q 10 default 0xffff direct_packets_stat 0\nqdisc tbf 10: parent 1:10 rate 1Mbit\n",
                Some(("htb", "1:")),
            ),
            ("qdisc tbf 8001: root refcnt 2 rate 1Mbit burst 1600b lat 50ms\n", Some(("tbf", "8001:"))),
            ("", None),
        ];
        for (text, want) in cases {
            let got = root_qdisc(text);
            assert_eq!(got.as_ref().map(|(k, h)| (k.as_str(), h.as_str())), want, "{text}");
        }
    }

    #[test]
    fn clear_removes_the_root_and_the_chain() {
        let s = render(&[], &clear("eth1"));
        assert!(s.starts_with("tc qdisc del dev eth1 root\n"));
        assert!(s.ends_with("iptables -t mangle -X WB-SHAPE-eth1\n"));
    }
}
