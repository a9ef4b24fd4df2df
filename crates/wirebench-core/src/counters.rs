//! The kernel's own drop counters, parsed and differenced: what a run can blame its losses
//! on. A snapshot is taken before and after a run (the binary reads the files; this module
//! only parses text), and [`Delta::split_loss`] divides a run's missing packets among the
//! places the counters can see.
//!
//! Sources (all host-wide: they count every process and every socket on the host, so a
//! busy host's other traffic shows here too, and reports say so):
//! - `/proc/net/snmp`, `Udp:` and `Tcp:` lines: UDP `InDatagrams`, `NoPorts`, `InErrors`
//!   (every datagram a socket refused, `RcvbufErrors` and checksum errors included),
//!   `OutDatagrams`, `RcvbufErrors` (a socket's receive buffer was full), `SndbufErrors`
//!   (a send found the send buffer full), `InCsumErrors`; TCP `RetransSegs`.
//! - `/proc/net/snmp6`: the same UDP counters for IPv6 (`Udp6InErrors` ...).
//! - `/proc/net/softnet_stat`: per CPU, packets dropped because the backlog queue was full
//!   (column 2) and the times the receive softirq ran out of budget (`time_squeeze`,
//!   column 3): a host too busy to take packets off the NIC.
//! - `/sys/class/net/IF/statistics/`: the interface's `rx_dropped`, `rx_errors`,
//!   `rx_missed_errors`, `tx_dropped`, `tx_errors`.
//! - netlink `RTM_GETQDISC` (streams' sending hosts): the root qdiscs' drops on the
//!   interfaces that carry the stream ([`qdisc`]).

use serde::{Deserialize, Serialize};

use crate::snmp::Snmp;

mod interval_loss;
pub mod qdisc;
mod stream_loss;
pub use interval_loss::{Reading, split_rows, spread_uncertain};
pub use stream_loss::{
    NIC, QDISC, ReceiveDrops, RunSizes, SOFTNET, add_below_socket_tables, add_qdisc_table, reading, sender_drops,
    split_stream, whole,
};

/// The UDP counters of one protocol family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Udp {
    /// Datagrams delivered to sockets.
    pub in_datagrams: u64,
    /// Datagrams to a port nobody listened on.
    pub no_ports: u64,
    /// Datagrams a socket refused (includes `rcvbuf_errors` and `in_csum_errors`).
    pub in_errors: u64,
    /// Datagrams sent.
    pub out_datagrams: u64,
    /// Refused because the socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// Sends that found the socket's send buffer full.
    pub sndbuf_errors: u64,
    /// Bad checksums.
    pub in_csum_errors: u64,
}

/// `softnet_stat`, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Softnet {
    /// Packets dropped: the per-CPU backlog was full.
    pub dropped: u64,
    /// The receive softirq ran out of budget with work left.
    pub time_squeeze: u64,
}

/// One interface's error and drop counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iface {
    /// Interface name.
    pub name: String,
    /// Received packets the kernel or driver dropped.
    pub rx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Packets the NIC missed (its ring was full).
    pub rx_missed_errors: u64,
    /// Packets dropped on the way out.
    pub tx_dropped: u64,
    /// Transmit errors.
    pub tx_errors: u64,
}

/// One reading of every counter that could be read (`None`: the file was missing or did
/// not parse, e.g. no IPv6 or a container without `/proc/net`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// IPv4 UDP (`/proc/net/snmp`).
    pub udp: Option<Udp>,
    /// IPv6 UDP (`/proc/net/snmp6`).
    pub udp6: Option<Udp>,
    /// TCP segments retransmitted (`/proc/net/snmp`).
    pub tcp_retrans_segs: Option<u64>,
    /// `/proc/net/softnet_stat`.
    pub softnet: Option<Softnet>,
    /// The interfaces the run used.
    pub interfaces: Vec<Iface>,
    /// The root qdiscs' drops on those interfaces, summed (netlink `RTM_GETQDISC`, what
    /// `tc -s qdisc` prints as `dropped`: [`qdisc`]); `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_drops: Option<u64>,
}

fn udp_from(get: impl Fn(&str) -> Option<u64>) -> Option<Udp> {
    Some(Udp {
        in_datagrams: get("InDatagrams")?,
        no_ports: get("NoPorts")?,
        in_errors: get("InErrors")?,
        out_datagrams: get("OutDatagrams")?,
        rcvbuf_errors: get("RcvbufErrors")?,
        sndbuf_errors: get("SndbufErrors")?,
        // absent on kernels before 3.10
        in_csum_errors: get("InCsumErrors").unwrap_or(0),
    })
}

/// One counter of a parsed `/proc/net/snmp` (never negative: a counter).
fn snmp_field(snmp: &Snmp, table: &str, name: &str) -> Option<u64> {
    snmp.get(table, name).and_then(|v| u64::try_from(v).ok())
}

/// The `Udp:` counters of `/proc/net/snmp` (parsed by [`crate::snmp::Snmp`]).
pub fn parse_snmp_udp(text: &str) -> Option<Udp> {
    let snmp = Snmp::parse(text).ok()?;
    udp_from(|n| snmp_field(&snmp, "Udp", n))
}

/// `RetransSegs` of the `Tcp:` lines of `/proc/net/snmp`.
pub fn parse_snmp_tcp_retrans(text: &str) -> Option<u64> {
    snmp_field(&Snmp::parse(text).ok()?, "Tcp", "RetransSegs")
}

/// The `Udp6*` counters of `/proc/net/snmp6` (`name value` lines).
pub fn parse_snmp6_udp(text: &str) -> Option<Udp> {
    let get = |name: &str| {
        let key = format!("Udp6{name}");
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(key.as_str())).then(|| w.next()?.parse().ok()).flatten()
        })
    };
    udp_from(get)
}

/// `/proc/net/softnet_stat`: one line per CPU of hexadecimal columns; sums the second
/// (dropped) and third (time_squeeze).
pub fn parse_softnet(text: &str) -> Option<Softnet> {
    let mut total = Softnet::default();
    let mut rows = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.split_whitespace().map(|c| u64::from_str_radix(c, 16));
        let (Some(Ok(_)), Some(Ok(d)), Some(Ok(s))) = (cols.next(), cols.next(), cols.next()) else {
            return None;
        };
        total.dropped = total.dropped.saturating_add(d);
        total.time_squeeze = total.time_squeeze.saturating_add(s);
        rows += 1;
    }
    (rows > 0).then_some(total)
}

/// One sysfs counter file (`123\n`).
pub fn parse_count(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// How much each counter rose during a run (counters that could be read both times).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    /// Always `host-wide`: every counter here counts the whole host, not only this run.
    pub scope: String,
    /// IPv4 UDP.
    pub udp: Option<Udp>,
    /// IPv6 UDP.
    pub udp6: Option<Udp>,
    /// TCP retransmissions.
    pub tcp_retrans_segs: Option<u64>,
    /// softnet drops and squeezes.
    pub softnet: Option<Softnet>,
    /// Per interface (those read both times).
    pub interfaces: Vec<Iface>,
    /// Packets the root qdiscs of those interfaces dropped on the way out (this host's
    /// egress: a probe its own tbf refused). They overlap `SndbufErrors` (a packet refused
    /// whole counts in both), so the loss split takes the larger ([`Delta::sender_drops`]).
    /// Absent when not read both times, and in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_drops: Option<u64>,
    /// Counters that could not be read, in words (`/proc/net/snmp6 missing`).
    pub missing: Vec<String>,
}

fn udp_delta(a: &Udp, b: &Udp) -> Udp {
    Udp {
        in_datagrams: b.in_datagrams.saturating_sub(a.in_datagrams),
        no_ports: b.no_ports.saturating_sub(a.no_ports),
        in_errors: b.in_errors.saturating_sub(a.in_errors),
        out_datagrams: b.out_datagrams.saturating_sub(a.out_datagrams),
        rcvbuf_errors: b.rcvbuf_errors.saturating_sub(a.rcvbuf_errors),
        sndbuf_errors: b.sndbuf_errors.saturating_sub(a.sndbuf_errors),
        in_csum_errors: b.in_csum_errors.saturating_sub(a.in_csum_errors),
    }
}

fn both<T>(a: Option<&T>, b: Option<&T>, f: impl Fn(&T, &T) -> T, what: &str, missing: &mut Vec<String>) -> Option<T> {
    if let (Some(a), Some(b)) = (a, b) {
        Some(f(a, b))
    } else {
        missing.push(what.to_owned());
        None
    }
}

impl Snapshot {
    /// What rose from `self` (before) to `after`. A counter that went down (a wrap, or an
    /// interface that was recreated) counts as 0.
    pub fn delta(&self, after: &Self) -> Delta {
        let mut missing = Vec::new();
        let udp = both(self.udp.as_ref(), after.udp.as_ref(), udp_delta, "/proc/net/snmp Udp", &mut missing);
        let udp6 = both(self.udp6.as_ref(), after.udp6.as_ref(), udp_delta, "/proc/net/snmp6 Udp6", &mut missing);
        let tcp = both(
            self.tcp_retrans_segs.as_ref(),
            after.tcp_retrans_segs.as_ref(),
            |a, b| b.saturating_sub(*a),
            "/proc/net/snmp Tcp",
            &mut missing,
        );
        let softnet = both(
            self.softnet.as_ref(),
            after.softnet.as_ref(),
            |a, b| Softnet {
                dropped: b.dropped.saturating_sub(a.dropped),
                time_squeeze: b.time_squeeze.saturating_sub(a.time_squeeze),
            },
            "/proc/net/softnet_stat",
            &mut missing,
        );
        let mut interfaces = Vec::new();
        for a in &self.interfaces {
            match after.interfaces.iter().find(|b| b.name == a.name) {
                Some(b) => interfaces.push(Iface {
                    name: a.name.clone(),
                    rx_dropped: b.rx_dropped.saturating_sub(a.rx_dropped),
                    rx_errors: b.rx_errors.saturating_sub(a.rx_errors),
                    rx_missed_errors: b.rx_missed_errors.saturating_sub(a.rx_missed_errors),
                    tx_dropped: b.tx_dropped.saturating_sub(a.tx_dropped),
                    tx_errors: b.tx_errors.saturating_sub(a.tx_errors),
                }),
                None => missing.push(format!("/sys/class/net/{}/statistics", a.name)),
            }
        }
        // a count that went down (a qdisc replaced) is 0; interfaces with no qdisc to read
        // (none named) are no missing counter
        let qdisc_drops = match (self.qdisc_drops, after.qdisc_drops) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            (None, None) if self.interfaces.is_empty() => None,
            _ => {
                missing.push("netlink RTM_GETQDISC (egress qdisc drops)".to_owned());
                None
            }
        };
        Delta { scope: "host-wide".into(), udp, udp6, tcp_retrans_segs: tcp, softnet, interfaces, qdisc_drops, missing }
    }
}

/// Where a run's missing packets went, as far as this host's counters can tell. Each share
/// is capped by what is still unexplained, in this order, so the parts add up to `missing`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossSplit {
    /// Packets the run counts as missing.
    pub missing: u64,
    /// Never left: dropped by the sending host after the application sent them
    /// (`SndbufErrors` or its egress qdiscs' drops, the larger: streams
    /// `counters::sender_drops`, ping [`Delta::sender_drops`]; 0 in listen, which does not
    /// run on the sender).
    pub send_buffer: u64,
    /// Refused by a receiving socket on this host (`InErrors`, which includes
    /// `RcvbufErrors`; a stream's in datagrams: `RunSizes`).
    pub socket: u64,
    /// Dropped below the sockets: the NIC or its driver (`rx_dropped`, `rx_missed_errors`,
    /// `rx_errors`, `tx_dropped`, `tx_errors`) or a full softnet backlog.
    pub nic: u64,
    /// Not seen by this host's counters: elsewhere on the path, or at the far end.
    pub elsewhere: u64,
    /// How much the counters rose beyond what they could explain (host-wide counters:
    /// other traffic on the host). 0 in reports written before it was recorded.
    #[serde(default)]
    pub excess: u64,
    /// How far `socket`, and with it `elsewhere`, may be off either way: a socket counts
    /// a refused packet once, and a stream's packet can be a GRO run of several datagrams
    /// whose size the receiver knows only as a range (`RunSizes`). 0 (absent) where each
    /// count is one datagram or runs all had one size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uncertain: u64,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if signature")]
const fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Delta {
    /// UDP counters of both families added.
    pub fn udp_total(&self) -> Option<Udp> {
        match (self.udp, self.udp6) {
            (Some(a), Some(b)) => Some(Udp {
                in_datagrams: a.in_datagrams + b.in_datagrams,
                no_ports: a.no_ports + b.no_ports,
                in_errors: a.in_errors + b.in_errors,
                out_datagrams: a.out_datagrams + b.out_datagrams,
                rcvbuf_errors: a.rcvbuf_errors + b.rcvbuf_errors,
                sndbuf_errors: a.sndbuf_errors + b.sndbuf_errors,
                in_csum_errors: a.in_csum_errors + b.in_csum_errors,
            }),
            (a, b) => a.or(b),
        }
    }

    /// Drops below the sockets: interfaces and softnet.
    pub fn nic_drops(&self) -> u64 {
        let ifaces: u64 = self
            .interfaces
            .iter()
            .map(|i| i.rx_dropped + i.rx_errors + i.rx_missed_errors + i.tx_dropped + i.tx_errors)
            .sum();
        ifaces + self.softnet.map_or(0, |s| s.dropped)
    }

    /// What this host dropped after the application sent: `SndbufErrors` (a send the
    /// kernel refused with `ENOBUFS`, a full egress qdisc among the causes) and its egress
    /// qdiscs' drops. The two overlap (a packet the qdisc refused whole counts in both), so
    /// the larger, as a stream's sender counts it (`counters::sender_drops`).
    pub fn sender_drops(&self) -> u64 {
        let sndbuf = self.udp_total().map_or(0, |u| u.sndbuf_errors);
        sndbuf.max(self.qdisc_drops.unwrap_or(0))
    }

    /// Splits `missing` packets: first those this host dropped after the send
    /// ([`Self::sender_drops`]), then those a socket refused, then the NIC's and softnet's
    /// drops; the rest happened elsewhere. The counters are host-wide, so a share is an
    /// upper bound on this run's part in it.
    pub fn split_loss(&self, missing: u64) -> LossSplit {
        let udp = self.udp_total().unwrap_or_default();
        LossSplit::of(missing, self.sender_drops(), udp.in_errors, self.nic_drops())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 1234\n\
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
Tcp: 1 200 120000 -1 10 5 0 1 2 5000 6000 42 0 3 0\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 1000 7 120 900 100 3 20 0 0\n\
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
UdpLite: 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn snmp_udp_and_tcp_by_column_name() {
        let u = parse_snmp_udp(SNMP).unwrap();
        assert_eq!(
            u,
            Udp {
                in_datagrams: 1000,
                no_ports: 7,
                in_errors: 120,
                out_datagrams: 900,
                rcvbuf_errors: 100,
                sndbuf_errors: 3,
                in_csum_errors: 20
            }
        );
        assert_eq!(parse_snmp_tcp_retrans(SNMP), Some(42));
        // UdpLite's identical header is not mistaken for Udp's
        assert!(parse_snmp_udp("UdpLite: InDatagrams\nUdpLite: 5\n").is_none());
        assert!(parse_snmp_udp("").is_none());
        assert!(parse_snmp_udp("Udp: InDatagrams NoPorts\nUdp: x y\n").is_none());
    }

    #[test]
    fn snmp6_name_value_lines() {
        let text = "Ip6InReceives 5\nUdp6InDatagrams 50\nUdp6NoPorts 1\nUdp6InErrors 4\nUdp6OutDatagrams 60\n\
Udp6RcvbufErrors 2\nUdp6SndbufErrors 0\nUdp6InCsumErrors 0\nUdp6IgnoredMulti 0\n";
        let u = parse_snmp6_udp(text).unwrap();
        assert_eq!((u.in_datagrams, u.in_errors, u.rcvbuf_errors, u.out_datagrams), (50, 4, 2, 60));
        assert!(parse_snmp6_udp("Udp6InDatagrams 50\n").is_none());
    }

    #[test]
    fn softnet_sums_hex_columns_over_cpus() {
        let text = "0000a000 00000002 00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
0000b000 0000000f 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n";
        assert_eq!(parse_softnet(text), Some(Softnet { dropped: 17, time_squeeze: 17 }));
        assert_eq!(parse_softnet(""), None);
        assert_eq!(parse_softnet("zz 1 2\n"), None);
    }

    fn snap(in_errors: u64, sndbuf: u64, rx_dropped: u64, softnet_dropped: u64) -> Snapshot {
        Snapshot {
            udp: Some(Udp { in_errors, rcvbuf_errors: in_errors, sndbuf_errors: sndbuf, ..Udp::default() }),
            udp6: None,
            tcp_retrans_segs: Some(0),
            softnet: Some(Softnet { dropped: softnet_dropped, time_squeeze: 0 }),
            interfaces: vec![Iface { name: "veth0".into(), rx_dropped, ..Iface::default() }],
            qdisc_drops: Some(0),
        }
    }

    #[test]
    fn delta_and_what_could_not_be_read() {
        let d = snap(10, 0, 1, 0).delta(&snap(30, 2, 4, 5));
        assert_eq!(d.udp.unwrap().in_errors, 20);
        assert_eq!(d.udp.unwrap().sndbuf_errors, 2);
        assert_eq!(d.interfaces[0].rx_dropped, 3);
        assert_eq!(d.nic_drops(), 3 + 5);
        assert_eq!(d.missing, ["/proc/net/snmp6 Udp6"]);
        assert_eq!(d.scope, "host-wide");
        // a counter that went down counts as 0
        assert_eq!(snap(30, 0, 0, 0).delta(&snap(10, 0, 0, 0)).udp.unwrap().in_errors, 0);
        let mut gone = snap(0, 0, 0, 0);
        gone.interfaces.clear();
        assert!(snap(0, 0, 0, 0).delta(&gone).missing.iter().any(|m| m.contains("veth0")));
    }

    /// A probe this host's own egress qdisc dropped: `SndbufErrors` and the qdisc's count
    /// overlap, so the larger is this host's share, never their sum; a qdisc read only
    /// once is named missing and adds nothing.
    #[test]
    fn this_hosts_qdisc_drops_join_sndbuf_errors_the_larger() {
        let mut after = snap(0, 40, 0, 0);
        after.qdisc_drops = Some(100);
        let d = snap(0, 0, 0, 0).delta(&after);
        assert_eq!(d.qdisc_drops, Some(100));
        assert_eq!(d.sender_drops(), 100);
        let s = d.split_loss(150);
        assert_eq!((s.send_buffer, s.elsewhere), (100, 50));
        after.qdisc_drops = Some(10);
        assert_eq!(snap(0, 0, 0, 0).delta(&after).split_loss(150).send_buffer, 40);
        after.qdisc_drops = None;
        let once = snap(0, 0, 0, 0).delta(&after);
        assert_eq!((once.qdisc_drops, once.sender_drops()), (None, 40));
        assert!(once.missing.iter().any(|m| m.contains("qdisc")), "{:?}", once.missing);
        // no interfaces, nothing read either time: nothing missing
        assert!(Snapshot::default().delta(&Snapshot::default()).missing.iter().all(|m| !m.contains("qdisc")));
        // interfaces named but their qdiscs unread both times: missing
        let mut unread = snap(0, 0, 0, 0);
        unread.qdisc_drops = None;
        let d = unread.delta(&unread.clone());
        assert_eq!(d.qdisc_drops, None);
        assert!(d.missing.iter().any(|m| m.contains("qdisc")), "{:?}", d.missing);
    }

    fn udp(base: u64) -> Udp {
        Udp {
            in_datagrams: base,
            no_ports: 2 * base,
            in_errors: 3 * base,
            out_datagrams: 4 * base,
            rcvbuf_errors: 5 * base,
            sndbuf_errors: 6 * base,
            in_csum_errors: 7 * base,
        }
    }

    fn iface(name: &str, base: u64) -> Iface {
        Iface {
            name: name.into(),
            rx_dropped: base,
            rx_errors: 2 * base,
            rx_missed_errors: 4 * base,
            tx_dropped: 8 * base,
            tx_errors: 16 * base,
        }
    }

    /// Every counter read both times rises by its own amount; an interface read only
    /// before is named missing.
    #[test]
    fn every_counter_of_a_delta() {
        let before = Snapshot {
            udp: Some(udp(1)),
            udp6: Some(udp(10)),
            tcp_retrans_segs: Some(5),
            softnet: Some(Softnet { dropped: 1, time_squeeze: 2 }),
            interfaces: vec![iface("eth0", 1), iface("eth1", 3)],
            qdisc_drops: Some(3),
        };
        let after = Snapshot {
            udp: Some(udp(3)),
            udp6: Some(udp(15)),
            tcp_retrans_segs: Some(12),
            softnet: Some(Softnet { dropped: 4, time_squeeze: 10 }),
            interfaces: vec![iface("eth0", 2)],
            qdisc_drops: Some(9),
        };
        let d = before.delta(&after);
        assert_eq!(
            d,
            Delta {
                scope: "host-wide".into(),
                udp: Some(udp(2)),
                udp6: Some(udp(5)),
                tcp_retrans_segs: Some(7),
                softnet: Some(Softnet { dropped: 3, time_squeeze: 8 }),
                interfaces: vec![iface("eth0", 1)],
                qdisc_drops: Some(6),
                missing: vec!["/sys/class/net/eth1/statistics".into()],
            }
        );
        // both families add up, field by field; one alone is itself
        assert_eq!(d.udp_total(), Some(udp(7)));
        assert_eq!(Delta { udp6: None, ..d.clone() }.udp_total(), Some(udp(2)));
        assert_eq!(Delta { udp: None, ..d.clone() }.udp_total(), Some(udp(5)));
        assert_eq!(Delta::default().udp_total(), None);
        // every interface counter and the softnet drops: 1 + 2 + 4 + 8 + 16, and 3
        assert_eq!(d.nic_drops(), 31 + 3);
        // both families' send-buffer errors (12 + 30) beat the qdisc's 6
        assert_eq!(d.sender_drops(), 42);
        let nothing = Snapshot::default();
        let d = nothing.delta(&nothing);
        assert_eq!((d.udp, d.udp6, d.tcp_retrans_segs, d.softnet), (None, None, None, None));
        assert_eq!(d.missing.len(), 4, "{:?}", d.missing);
    }

    #[test]
    fn a_sysfs_count() {
        assert_eq!(parse_count("123\n"), Some(123));
        assert_eq!(parse_count(" 0 "), Some(0));
        assert_eq!(parse_count(""), None);
        assert_eq!(parse_count("-1\n"), None);
    }

    /// A negative counter in /proc/net/snmp is not a count; `uncertain` is left out of a
    /// split's JSON only when 0.
    #[test]
    fn a_negative_counter_and_a_zero_uncertainty() {
        let text = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 1 2 -3 4 5 6\n";
        assert_eq!(parse_snmp_udp(text), None);
        let text = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 1 2 3 4 5 6\n";
        assert_eq!(parse_snmp_udp(text), Some(Udp { in_csum_errors: 0, ..udp(1) }), "before 3.10: no InCsumErrors");
        let json = |s: LossSplit| serde_json::to_value(s).unwrap();
        assert!(json(LossSplit::default()).get("uncertain").is_none());
        assert_eq!(json(LossSplit { uncertain: 3, ..LossSplit::default() })["uncertain"], 3);
    }

    #[test]
    fn loss_is_split_in_order_and_adds_up() {
        let d = snap(0, 0, 0, 0).delta(&snap(12_001, 5, 0, 0));
        let s = d.split_loss(12_345);
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere), (5, 12_001, 0, 339));
        // counters that rose more than the run lost (host-wide) never exceed it
        let s = d.split_loss(100);
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere), (5, 95, 0, 0));
        let nic = snap(0, 0, 0, 0).delta(&snap(0, 0, 7, 3));
        let s = nic.split_loss(20);
        assert_eq!((s.socket, s.nic, s.elsewhere), (0, 10, 10));
        for m in [0, 1, 50, 20_000] {
            let s = d.split_loss(m);
            assert_eq!(s.send_buffer + s.socket + s.nic + s.elsewhere, m);
        }
    }
}
