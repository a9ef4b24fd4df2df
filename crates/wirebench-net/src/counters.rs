//! Reads the kernel's drop counters into a `wirebench_core::counters::Snapshot` (the parsing
//! and the arithmetic are in core). Files that are missing (no IPv6, no `/proc/net` in a
//! container) leave their part empty; the delta then names them.

use wirebench_core::counters::{self, Iface, Snapshot};
use wirebench_core::snmp::Snmp;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// One interface's counters from `/sys/class/net/NAME/statistics/`.
pub fn iface(name: &str) -> Option<Iface> {
    // A name from a route or the user: never a path.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    let get = |c: &str| read(&format!("/sys/class/net/{name}/statistics/{c}")).and_then(|t| counters::parse_count(&t));
    Some(Iface {
        name: name.to_owned(),
        rx_dropped: get("rx_dropped")?,
        rx_errors: get("rx_errors")?,
        rx_missed_errors: get("rx_missed_errors").unwrap_or(0),
        tx_dropped: get("tx_dropped")?,
        tx_errors: get("tx_errors")?,
    })
}

/// Every counter now, with the interfaces named (and their egress qdiscs' drops).
pub fn snapshot(interfaces: &[String]) -> Snapshot {
    let snmp = read("/proc/net/snmp");
    Snapshot {
        udp: snmp.as_deref().and_then(counters::parse_snmp_udp),
        udp6: read("/proc/net/snmp6").as_deref().and_then(counters::parse_snmp6_udp),
        tcp_retrans_segs: snmp.as_deref().and_then(counters::parse_snmp_tcp_retrans),
        softnet: read("/proc/net/softnet_stat").as_deref().and_then(counters::parse_softnet),
        interfaces: interfaces.iter().filter_map(|n| iface(n)).collect(),
        qdisc_drops: crate::qdisc::drops(interfaces),
    }
}

/// What a stream receiver reads before and after its run: `/proc/net/snmp` and the
/// counters below the sockets (softnet, its receiving interfaces).
#[derive(Debug, Clone)]
pub struct Receiving {
    snmp: Option<Snmp>,
    below: Snapshot,
    /// The root qdiscs' drops on the interfaces (a sending end's share: [`crate::qdisc`]).
    qdisc: Option<u64>,
}

impl Receiving {
    /// The counters now, for a stream end on `interfaces` (the receiver's drops below the
    /// sockets, the sender's egress qdiscs' drops).
    pub fn read(interfaces: &[String]) -> Self {
        Self { snmp: crate::snmp::read(), below: snapshot(interfaces), qdisc: crate::qdisc::drops(interfaces) }
    }

    /// What rose from `self` to `after`: the `Udp` and `Tcp` tables of `/proc/net/snmp`,
    /// the `Softnet` and `Nic` tables (`wirebench_core::counters::add_below_socket_tables`)
    /// and the `Qdisc` table (`add_qdisc_table`); `None` without `/proc/net/snmp`.
    pub fn since(&self, after: &Self) -> Option<Snmp> {
        let (a, b) = (self.snmp.as_ref()?, after.snmp.as_ref()?);
        let mut k = b.since(a, &["Udp", "Tcp"]);
        counters::add_below_socket_tables(&mut k, &self.below.delta(&after.below));
        counters::add_qdisc_table(&mut k, self.qdisc, after.qdisc);
        Some(k)
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    #[test]
    fn this_hosts_counters_read_and_count_a_datagram_to_nowhere() {
        let before = snapshot(&["lo".to_owned()]);
        assert!(before.udp.is_some(), "/proc/net/snmp has Udp counters");
        assert_eq!(before.interfaces.len(), 1);
        // a datagram to a closed port: NoPorts rises (host-wide, so by at least one)
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = closed.local_addr().unwrap();
        drop(closed);
        s.send_to(b"x", to).unwrap();
        let d = before.delta(&snapshot(&["lo".to_owned()]));
        assert!(d.udp.unwrap().no_ports >= 1, "{d:?}");
        assert!(iface("../etc").is_none() && iface("").is_none());
    }

    #[test]
    fn a_receivers_difference_has_the_tables_below_the_sockets() {
        let lo = ["lo".to_owned()];
        let a = Receiving::read(&lo);
        let k = a.since(&Receiving::read(&lo)).expect("/proc/net/snmp");
        assert!(k.get("Udp", "RcvbufErrors").is_some());
        assert!(k.get(counters::NIC, "RxDropped").is_some(), "{k:?}");
        assert!(k.get(counters::SOFTNET, "Dropped").is_some(), "{k:?}");
    }
}
