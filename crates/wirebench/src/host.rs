//! The environment of a run, recorded in every report: host, kernel, CPU, clocksource,
//! the sysctls that change network measurements, the interfaces used and their MTU, and
//! the git commit of the build.

pub mod net;

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::time::SystemTime;

use wirebench_core::report::{Host, Meta, NetInterface, SOCKET_SYSCTLS};

/// The git commit this binary was built from (set by `build.rs` in a git checkout).
pub const GIT_COMMIT: Option<&str> = option_env!("WIREBENCH_GIT_COMMIT");

/// Sysctls recorded in every report besides the socket ones
/// (`wirebench_core::report::SOCKET_SYSCTLS`).
pub const MORE_SYSCTLS: [&str; 2] = ["net.ipv4.udp_mem", "kernel.sched_min_granularity_ns"];

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Reads one sysctl (`net.core.rmem_max` -> `/proc/sys/net/core/rmem_max`).
pub fn sysctl(name: &str) -> Option<String> {
    read_trim(&format!("/proc/sys/{}", name.replace('.', "/")))
}

/// This host, now.
pub fn capture() -> Host {
    let uname = nix::sys::utsname::uname().ok();
    let cpu_model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let sysctls: BTreeMap<String, String> =
        SOCKET_SYSCTLS.iter().chain(&MORE_SYSCTLS).filter_map(|n| sysctl(n).map(|v| ((*n).to_owned(), v))).collect();
    Host {
        hostname: nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default(),
        kernel: uname.map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default(),
        cpu_model,
        cpus: u32::try_from(wirebench_net::pin::cpu_count()).unwrap_or(u32::MAX),
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_default(),
        sysctls,
        interfaces: default_interface().into_iter().collect(),
    }
}

fn default_interface() -> Option<NetInterface> {
    let name = net::default_route_interface(&net::routes())?;
    Some(NetInterface { mtu: net::mtu(&name), name, role: wirebench_report::env::DEFAULT_ROUTE.into() })
}

/// The interfaces a run toward `peer` uses: `interface` (an `--interface` name or address)
/// if given, else the one the kernel routes `peer` by; then the default route's, if it is
/// another.
pub fn interfaces(peer: Option<SocketAddr>, interface: Option<&str>) -> Vec<NetInterface> {
    interfaces_towards(peer.as_slice(), interface)
}

/// The interfaces a run's traffic used: `interface` (an `--interface` name or address) if
/// given, else the one the kernel routes each of `peers` by (each interface once); then the
/// default route's, if it is another (labelled so: it carried nothing of this run).
pub fn interfaces_towards(peers: &[SocketAddr], interface: Option<&str>) -> Vec<NetInterface> {
    let chosen: Vec<(String, String)> = match interface {
        Some(i) => net::interface_name(i).map(|n| (n, "--interface".to_owned())).into_iter().collect(),
        None => peers.iter().filter_map(|p| net::interface_towards(*p).map(|n| (n, format!("route to {p}")))).collect(),
    };
    let mut out: Vec<NetInterface> = Vec::new();
    for (name, role) in chosen {
        if out.iter().all(|o| o.name != name) {
            out.push(NetInterface { mtu: net::mtu(&name), name, role });
        }
    }
    if let Some(d) = default_interface().filter(|d| out.iter().all(|o| o.name != d.name)) {
        out.push(d);
    }
    out
}

/// The command line as a report saves it (reports are shared and committed): the values of
/// `--token`, the values of `--header`/`-H` (`Name: ***`) and `--cookie` (`NAME=***`)
/// hidden, a URL's password shown as `***`.
pub fn command_line(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide: Option<&str> = None;
    for a in argv {
        if let Some(flag) = hide.take() {
            out.push(hidden(flag, a));
            continue;
        }
        let secret = |f: &str| ["--token", "--header", "-H", "--cookie"].contains(&f);
        let shown = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") && secret(f) => format!("{f}={}", hidden(f, v)),
            _ if secret(a) => {
                hide = Some(a);
                a.clone()
            }
            _ if a.starts_with("-H") && a.len() > 2 => format!("-H{}", hidden("-H", &a[2..])),
            _ => wirebench_core::load::vars::mask_password(a),
        };
        out.push(shown);
    }
    out
}

/// A secret flag's value as saved: a header keeps its name, a cookie its name.
fn hidden(flag: &str, v: &str) -> String {
    match flag {
        "--header" | "-H" => v.split_once(':').map_or_else(|| "***".to_owned(), |(n, _)| format!("{n}: ***")),
        "--cookie" => v.split_once('=').map_or_else(|| "***".to_owned(), |(n, _)| format!("{n}=***")),
        _ => "***".to_owned(),
    }
}

/// The report's `meta` for a run that started at `started` and took `duration_ns`.
pub fn meta(argv: &[String], started: SystemTime, duration_ns: u64) -> Meta {
    Meta {
        tool: "wirebench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        command_line: command_line(argv),
        started_at: humantime::format_rfc3339_micros(started).to_string(),
        duration_ns,
        host: capture(),
        git_commit: GIT_COMMIT.map(str::to_owned),
    }
}

/// [`meta`] for a run toward `peer` (and `--interface`, if given): also records the
/// interface the traffic used and its MTU.
pub fn meta_to(
    argv: &[String],
    started: SystemTime,
    duration_ns: u64,
    peer: Option<SocketAddr>,
    interface: Option<&str>,
) -> Meta {
    let mut m = meta(argv, started, duration_ns);
    m.host.interfaces = interfaces(peer, interface);
    m
}

/// [`meta`] for a run whose traffic went to (or came from) `peers`: records the interfaces
/// that carried it (the proxy: its upstream and its first client).
pub fn meta_towards(argv: &[String], started: SystemTime, duration_ns: u64, peers: &[SocketAddr]) -> Meta {
    let mut m = meta(argv, started, duration_ns);
    m.host.interfaces = interfaces_towards(peers, None);
    m
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_saved_command_line_hides_tokens_headers_cookies_and_passwords() {
        let argv: Vec<String> = [
            "wirebench",
            "ping",
            "h:1",
            "--token",
            "s3cret",
            "--token=s3cret",
            "-H",
            "Authorization: Bearer s3cret",
            "-HX-Key: s3cret",
            "--header=X: s3cret",
            "--cookie",
            "session=s3cret",
            "--json",
            "--token.json",
            "ws://ann:s3cret@h/r",
        ]
        .map(str::to_owned)
        .to_vec();
        let saved = super::command_line(&argv);
        assert_eq!(
            saved,
            [
                "wirebench",
                "ping",
                "h:1",
                "--token",
                "***",
                "--token=***",
                "-H",
                "Authorization: ***",
                "-HX-Key: ***",
                "--header=X: ***",
                "--cookie",
                "session=***",
                "--json",
                "--token.json",
                "ws://ann:***@h/r",
            ]
        );
    }
}
