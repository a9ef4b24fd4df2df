//! Reads the kernel's protocol counters (`/proc/net/snmp`); the parsing is
//! `wirebench_core::snmp`.

use wirebench_core::snmp::Snmp;

/// The counters now, or `None` where `/proc/net/snmp` is missing or unreadable.
pub fn read() -> Option<Snmp> {
    Snmp::parse(&std::fs::read_to_string("/proc/net/snmp").ok()?).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_host_has_udp_counters() {
        let s = super::read().expect("Linux has /proc/net/snmp");
        assert!(s.get("Udp", "RcvbufErrors").is_some() && s.get("Udp", "InDatagrams").is_some());
    }
}
