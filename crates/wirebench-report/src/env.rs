//! The environment of a run (`Report.meta`): as rows for tables, as one line, and the
//! differences between two runs that change results.

use wirebench_core::report::{Meta, Report};

/// Sysctls whose difference between two runs matters for a comparison.
pub use wirebench_core::report::SOCKET_SYSCTLS as COMPARED_SYSCTLS;

/// The role of an interface listed because it has the default route, not because the run's
/// traffic crossed it.
pub const DEFAULT_ROUTE: &str = "default route";

/// `eth0 (MTU 1500, default route)` for each interface, joined.
pub fn interfaces(m: &Meta) -> String {
    let all: Vec<String> = m
        .host
        .interfaces
        .iter()
        .map(|i| {
            let mtu = i.mtu.map_or_else(|| "MTU ?".to_owned(), |m| format!("MTU {m}"));
            format!("{} ({mtu}, {})", i.name, i.role)
        })
        .collect();
    if all.is_empty() { "-".into() } else { all.join("; ") }
}

/// The tool's version with its commit: `0.1.0 (a071b60)`.
pub fn version(m: &Meta) -> String {
    match &m.git_commit {
        Some(c) => format!("{} ({})", m.version, c.get(..12).unwrap_or(c)),
        None => m.version.clone(),
    }
}

/// Name and value rows: host, kernel, CPU, clocksource, interfaces, sysctls, version,
/// command line, start and duration.
pub fn rows(r: &Report) -> Vec<(String, String)> {
    let m = &r.meta;
    let h = &m.host;
    let mut rows = vec![
        ("host".to_owned(), h.hostname.clone()),
        ("kernel".to_owned(), h.kernel.clone()),
        ("CPU".to_owned(), format!("{} x {}", h.cpu_model, h.cpus)),
        ("clocksource".to_owned(), h.clocksource.clone()),
        ("interfaces".to_owned(), interfaces(m)),
    ];
    rows.extend(h.sysctls.iter().map(|(k, v)| (k.clone(), v.split_whitespace().collect::<Vec<_>>().join(" "))));
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let secs = m.duration_ns as f64 / 1e9;
    rows.extend([
        ("wirebench".to_owned(), version(m)),
        ("command line".to_owned(), m.command_line.join(" ")),
        ("started".to_owned(), m.started_at.clone()),
        ("took".to_owned(), format!("{secs:.2} s")),
    ]);
    rows
}

/// `vm: Linux 6.18.44, AMD EPYC x 2, tsc, lo (MTU 65536, route to ...), wirebench 0.1.0`.
pub fn one_line(r: &Report) -> String {
    let m = &r.meta;
    let h = &m.host;
    format!(
        "{}: kernel {}, {} x {}, clocksource {}, {}, wirebench {}, started {}",
        h.hostname,
        h.kernel,
        h.cpu_model,
        h.cpus,
        h.clocksource,
        interfaces(m),
        version(m),
        m.started_at
    )
}

/// One setting that differs between a baseline run and another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// What differs (`kernel`, `net.core.rmem_max`, ...).
    pub what: String,
    /// The baseline's value.
    pub baseline: String,
    /// The other run's value.
    pub other: String,
}

/// The settings that change results and differ between `base` and `other`: kernel, CPU
/// model and count, clocksource, the socket sysctls, interface MTU, tool version and commit.
/// The host name is not one of them (comparing two hosts is a reason to compare).
pub fn differences(base: &Meta, other: &Meta) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut check = |what: &str, a: String, b: String| {
        if a != b {
            out.push(Difference { what: what.to_owned(), baseline: a, other: b });
        }
    };
    let (a, b) = (&base.host, &other.host);
    check("kernel", a.kernel.clone(), b.kernel.clone());
    check("CPU model", a.cpu_model.clone(), b.cpu_model.clone());
    check("CPU count", a.cpus.to_string(), b.cpus.to_string());
    check("clocksource", a.clocksource.clone(), b.clocksource.clone());
    for name in COMPARED_SYSCTLS {
        let get = |h: &wirebench_core::report::Host| h.sysctls.get(name).cloned().unwrap_or_else(|| "?".into());
        check(name, get(a), get(b));
    }
    // The MTU of the interface that carried the traffic: the default route's is listed only
    // for reference (older proxy and load reports had nothing else), so it is not compared.
    let carried = |m: &Meta| m.host.interfaces.iter().find(|i| i.role != DEFAULT_ROUTE).map(|i| i.mtu);
    if let (Some(x), Some(y)) = (carried(base), carried(other)) {
        let show = |v: Option<u32>| v.map_or_else(|| "?".into(), |v| v.to_string());
        check("interface MTU", show(x), show(y));
    }
    check("wirebench version", version(base), version(other));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::meta;

    #[test]
    fn only_what_matters_differs() {
        let a = meta();
        let mut b = meta();
        b.host.hostname = "b".into();
        b.started_at = "later".into();
        assert!(differences(&a, &b).is_empty(), "host name and time do not matter");
        b.host.kernel = "6.1".into();
        b.host.sysctls.insert("net.core.rmem_max".into(), "212992".into());
        b.git_commit = None;
        let d: Vec<String> = differences(&a, &b).into_iter().map(|d| d.what).collect();
        assert_eq!(d, ["kernel", "net.core.rmem_max", "wirebench version"]);
    }

    /// Proxy and load reports recorded only the default route's interface (eth0, MTU 1400)
    /// after running on loopback: that is not the traffic's interface and must not warn.
    #[test]
    fn the_default_routes_interface_is_not_compared() {
        let a = meta();
        let mut b = meta();
        b.host.interfaces = vec![wirebench_core::report::NetInterface {
            name: "eth0".into(),
            mtu: Some(1400),
            role: DEFAULT_ROUTE.into(),
        }];
        assert!(differences(&a, &b).is_empty(), "{:?}", differences(&a, &b));
        b.host.interfaces.insert(
            0,
            wirebench_core::report::NetInterface { name: "veth0".into(), mtu: Some(1400), role: "route to y".into() },
        );
        let d: Vec<String> = differences(&a, &b).into_iter().map(|d| d.what).collect();
        assert_eq!(d, ["interface MTU"]);
    }

    #[test]
    fn version_shows_the_commit() {
        assert_eq!(version(&meta()), "0.1.0 (a071b60d5d4e)");
        assert_eq!(interfaces(&meta()), "lo (MTU 65536, route to x)");
    }
}
