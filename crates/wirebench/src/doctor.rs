//! `wirebench doctor`: checks this host for what skews or breaks measurements and prints
//! the fix for each problem. It reads `/proc`, `/sys` and the routing table, and sends echo
//! probes only to a `--target` the user names; it never changes anything.
//!
//! Checks: socket buffer maxima against what stream sockets ask for; the interface (up, MTU);
//! with `--target`, the path MTU by Don't-Fragment probes and the largest safe payload;
//! multicast (route for the group, MULTICAST flag, IGMP version, rp_filter); CPU count,
//! frequency governor, clocksource and kernel busy polling; this host's own stalls (the stall
//! meter for `--stall-check`, 1 s by default). Exit 0 when nothing FAILs, 3 when
//! something does (as a failed threshold), 2 for bad flags.

mod checks;
pub mod pmtu;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;
use wirebench_core::units::nanos;

use serde::Serialize;
use wirebench_report::screen::Detail;

use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::host::{self, net};

/// `wirebench doctor` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("json", |a| a.help("Also write the checks as JSON")),
    mut_arg("quiet", |a| a.help("Only the count line, naming what is not OK")),
    mut_arg("verbose", |a| a.help("What every check found, the OK ones too"))
)]
pub struct Args {
    /// A `wirebench serve` (host:port) to find the path MTU to, by Don't-Fragment probes.
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,
    /// Interface (name or IPv4 address) to check [default: the one toward --target, else the
    /// default route's].
    #[arg(long, env = "WIREBENCH_INTERFACE")]
    pub interface: Option<String>,
    /// Multicast group (or group:port) whose route to check.
    #[arg(long, value_name = "GROUP", default_value = "239.255.0.1")]
    pub group: String,
    /// How long to wait for each path MTU echo.
    #[arg(long, default_value = "250ms")]
    pub timeout: wirebench_core::units::Span,
    /// How long the stall meter runs (a thread woken every 1 ms; 0s skips it).
    #[arg(long, value_name = "SPAN", default_value = "1s")]
    pub stall_check: wirebench_core::units::Span,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
}

/// Validated `doctor` settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the path MTU probes go.
    pub target: Option<SocketAddr>,
    /// The interface checked, by name.
    pub interface: String,
    /// How it was chosen.
    pub interface_why: String,
    /// The multicast group.
    pub group: Ipv4Addr,
    /// Echo timeout.
    pub timeout: Duration,
    /// How long the stall meter runs (zero: not at all).
    pub stall_check: Duration,
    /// JSON output.
    pub json: Option<PathBuf>,
}

impl Config {
    /// Resolves the target, the interface (which must exist) and the group.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let target = a.target.as_deref().map(crate::addr::resolve).transpose()?;
        let group = a
            .group
            .parse::<Ipv4Addr>()
            .or_else(|_| a.group.parse::<SocketAddrV4>().map(|s| *s.ip()))
            .ok()
            .filter(Ipv4Addr::is_multicast)
            .ok_or_else(|| UsageError(format!("--group {}: not an IPv4 multicast address (224.0.0.0/4)", a.group)))?;
        let (interface, interface_why) = match (&a.interface, target) {
            (Some(i), _) => {
                let name =
                    net::interface_name(i).ok_or_else(|| UsageError(format!("--interface {i}: no such interface")))?;
                (name, "--interface".to_owned())
            }
            (None, Some(t)) => (net::interface_towards(t).unwrap_or_else(|| "lo".into()), format!("route to {t}")),
            (None, None) => match net::default_route_interface(&net::routes()) {
                Some(d) => (d, "default route".to_owned()),
                None => ("lo".to_owned(), "no default route".to_owned()),
            },
        };
        if a.timeout.0.is_zero() {
            return Err(UsageError("--timeout must be more than 0".into()));
        }
        if a.stall_check.0 > Duration::from_secs(60) {
            return Err(UsageError("--stall-check is at most 60s (`wirebench hiccup` runs longer)".into()));
        }
        Ok(Self {
            target,
            interface,
            interface_why,
            group,
            timeout: a.timeout.0,
            stall_check: a.stall_check.0,
            json: a.output.json.clone(),
        })
    }
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Nothing to do.
    #[serde(rename = "OK")]
    Ok,
    /// Measurements run but may be skewed; the fix says how to tune.
    #[serde(rename = "WARN")]
    Warn,
    /// Something the user asked about does not work.
    #[serde(rename = "FAIL")]
    Fail,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Self::Ok => "OK",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        })
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// The verdict.
    pub verdict: Verdict,
    /// What was found.
    pub detail: String,
    /// The command (or step) that fixes it.
    pub fix: Option<String>,
}

/// What `--json` writes.
#[derive(Debug, Serialize)]
pub struct Findings {
    /// `"wirebench doctor"`.
    pub tool: &'static str,
    /// Crate version.
    pub version: &'static str,
    /// Build commit.
    pub git_commit: Option<&'static str>,
    /// The host, as reports record it.
    pub host: wirebench_core::report::Host,
    /// The interface checked and why.
    pub interface: String,
    /// The path MTU target.
    pub target: Option<String>,
    /// Every check in order.
    pub checks: Vec<Check>,
    /// The stall meter's figures (absent with `--stall-check 0s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalls: Option<Stalls>,
}

/// The stall meter's short run: how late a thread sleeping `interval_ns` at a time woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stalls {
    /// The sleep interval, ns.
    pub interval_ns: u64,
    /// How long it ran, ns.
    pub duration_ns: u64,
    /// Wake-ups.
    pub wakeups: u64,
    /// Wake-ups a stall made it miss (counted as jHiccup does).
    pub corrected: u64,
    /// Lateness at p99, ns.
    pub p99_ns: u64,
    /// At p99.9, ns.
    pub p999_ns: u64,
    /// The latest wake-up, ns.
    pub max_ns: u64,
}

/// Runs the stall meter (`crate::stall`'s loop) on this thread for `d`, at 1 ms; stops
/// early with `stop`.
fn measure_stalls(d: Duration, stop: &std::sync::atomic::AtomicBool) -> Option<Stalls> {
    const INTERVAL_NS: u64 = 1_000_000;
    if d.is_zero() {
        return None;
    }
    let t0 = wirebench_net::timer::mono_now_ns();
    let until = t0.saturating_add(nanos(d));
    let h = crate::stall::record_until(INTERVAL_NS, stop, until).finish();
    // The one percentile definition (HdrHistogram Java's), as `wirebench hiccup` reports.
    let at = |q: f64| wirebench_core::latency::value_at_percentile(&h.histogram, q * 100.0);
    Some(Stalls {
        interval_ns: INTERVAL_NS,
        duration_ns: wirebench_net::timer::mono_now_ns().saturating_sub(t0),
        wakeups: h.wakeups,
        corrected: h.corrected,
        p99_ns: at(0.99),
        p999_ns: at(0.999),
        max_ns: h.histogram.max(),
    })
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Runs every check for `cfg`.
pub fn examine(cfg: &Config) -> Vec<Check> {
    let want = crate::flow::STREAM_BUFFER as u64;
    let num = |name: &str| host::sysctl(name).and_then(|v| v.parse::<u64>().ok());
    let iface = cfg.interface.as_str();
    let flags = net::flags(iface);
    let mut out = vec![
        checks::buffer_max("net.core.rmem_max", num("net.core.rmem_max"), want),
        checks::buffer_max("net.core.wmem_max", num("net.core.wmem_max"), want),
        checks::interface(iface, flags.map(|f| f.up)),
        checks::mtu(iface, net::mtu(iface)),
    ];
    if let Some(t) = cfg.target {
        let via = net::interface_towards(t).unwrap_or_else(|| "?".into());
        let found = pmtu::find(t, cfg.timeout).map_err(|e| e.to_string());
        out.push(checks::path_mtu(&t.to_string(), found, &via, iface));
    }
    out.push(checks::multicast_route(iface, cfg.group, &net::routes()));
    if let Some(f) = flags {
        out.push(checks::multicast_flag(iface, f.multicast, f.loopback));
    }
    let conf = |iface: &str, key: &str| read(&format!("/proc/sys/net/ipv4/conf/{iface}/{key}"));
    let rp = |iface: &str| conf(iface, "rp_filter").and_then(|v| v.parse::<u8>().ok());
    out.push(checks::igmp(iface, conf(iface, "force_igmp_version").as_deref()));
    out.push(checks::rp_filter(iface, rp("all"), rp(iface)));
    let h = host::capture();
    out.push(checks::cpus(h.cpus));
    out.push(checks::governor(&governors()));
    let available = read("/sys/devices/system/clocksource/clocksource0/available_clocksource").unwrap_or_default();
    out.push(checks::clocksource(&h.clocksource, &available));
    out.push(checks::busy_poll(
        host::sysctl("net.core.busy_poll").as_deref(),
        host::sysctl("net.core.busy_read").as_deref(),
    ));
    out
}

fn governors() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else { return Vec::new() };
    let mut cpus: Vec<PathBuf> = dir
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cpu") && n[3..].parse::<u32>().is_ok())
        })
        .collect();
    cpus.sort();
    cpus.iter().filter_map(|p| read(&p.join("cpufreq/scaling_governor").to_string_lossy())).collect()
}

/// Prints the checks, then a count. A WARN or FAIL is a line with its fix indented under it;
/// the OK checks are one line of names (`-v`: a line each with what it found; `-q`: only
/// the count, naming what is not OK). A long detail or fix folds under its own column.
pub fn print(out: &mut dyn std::io::Write, checks: &[Check], detail: Detail) -> std::io::Result<()> {
    use wirebench_report::screen::wrap_at;
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let column = 4 + 2 + width + 2;
    let n = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    if detail == Detail::Quiet {
        let not_ok: Vec<&str> = checks.iter().filter(|c| c.verdict != Verdict::Ok).map(|c| c.name.as_str()).collect();
        let which = if not_ok.is_empty() { String::new() } else { format!(" ({})", not_ok.join(", ")) };
        let line =
            format!("doctor: {} FAIL, {} WARN{which}, {} OK", n(Verdict::Fail), n(Verdict::Warn), n(Verdict::Ok));
        return writeln!(out, "{}", wrap_at(&line, 8));
    }
    for c in checks.iter().filter(|c| c.verdict != Verdict::Ok || detail.verbose()) {
        writeln!(out, "{}", wrap_at(&format!("{:<4}  {:<width$}  {}", c.verdict, c.name, c.detail), column))?;
        if let (Some(fix), true) = (&c.fix, c.verdict != Verdict::Ok) {
            writeln!(out, "{}", wrap_at(&format!("{:<4}  {:<width$}  fix: {fix}", "", ""), column + 5))?;
        }
    }
    let ok: Vec<&str> = checks.iter().filter(|c| c.verdict == Verdict::Ok).map(|c| c.name.as_str()).collect();
    if !detail.verbose() && !ok.is_empty() {
        writeln!(out, "{}", wrap_at(&format!("OK    {} (-v: what each found)", ok.join(", ")), 6))?;
    }
    writeln!(out, "{} FAIL, {} WARN, {} OK; nothing was changed", n(Verdict::Fail), n(Verdict::Warn), n(Verdict::Ok))
}

/// `wirebench doctor`: exit 0 if nothing FAILs, 3 if something does.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    let cfg = Config::from_args(args)?;
    let detail = args.output.detail();
    let h = host::capture();
    if detail != Detail::Quiet {
        writeln!(
            ctx.out,
            "wirebench doctor on {} (kernel {}, {} x {}), interface {} ({})",
            h.hostname, h.kernel, h.cpus, h.cpu_model, cfg.interface, cfg.interface_why
        )?;
    }
    let mut checks = examine(&cfg);
    let stalls = measure_stalls(cfg.stall_check, ctx.shutdown.flag());
    checks.extend(stalls.as_ref().map(checks::stalls));
    print(ctx.out, &checks, detail)?;
    let failed = checks.iter().any(|c| c.verdict == Verdict::Fail);
    if let Some(path) = &cfg.json {
        let findings = Findings {
            tool: "wirebench doctor",
            version: env!("CARGO_PKG_VERSION"),
            git_commit: host::GIT_COMMIT,
            host: h,
            interface: cfg.interface.clone(),
            target: cfg.target.map(|t| t.to_string()),
            checks,
            stalls,
        };
        crate::output::write_atomic(path, |w| {
            serde_json::to_writer_pretty(&mut *w, &findings).map_err(std::io::Error::other)?;
            w.write_all(b"\n")
        })?;
    }
    Ok(if failed { 3 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, verdict: Verdict) -> Check {
        let fix = (verdict != Verdict::Ok).then(|| format!("fix {name}"));
        Check { name: name.into(), verdict, detail: format!("{name} found"), fix }
    }

    fn text(checks: &[Check], detail: Detail) -> String {
        let mut out = Vec::new();
        print(&mut out, checks, detail).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_ok_checks_are_one_line_unless_verbose() {
        let healthy: Vec<Check> = (0..13).map(|i| check(&format!("check {i}"), Verdict::Ok)).collect();
        let t = text(&healthy, Detail::Normal);
        assert_eq!(t.lines().count(), 3, "the names fold once, and the count: {t}");
        assert!(t.starts_with("OK    check 0, check 1, ") && !t.contains("check 0 found"), "{t}");
        assert_eq!(t.lines().last(), Some("0 FAIL, 0 WARN, 13 OK; nothing was changed"));
        let t = text(&healthy, Detail::Verbose);
        assert_eq!(t.lines().count(), 14, "{t}");
        assert!(t.contains("OK    check 12  check 12 found"), "{t}");
        assert_eq!(text(&healthy, Detail::Quiet), "doctor: 0 FAIL, 0 WARN, 13 OK\n");
    }

    #[test]
    fn a_problem_is_shown_in_full_with_its_fix() {
        let checks = [check("a", Verdict::Ok), check("mtu", Verdict::Warn), check("pmtu", Verdict::Fail)];
        let t = text(&checks, Detail::Normal);
        assert_eq!(
            t,
            "WARN  mtu   mtu found\n            fix: fix mtu\nFAIL  pmtu  pmtu found\n            fix: fix pmtu\n\
             OK    a (-v: what each found)\n1 FAIL, 1 WARN, 1 OK; nothing was changed\n"
        );
        assert_eq!(text(&checks, Detail::Quiet), "doctor: 1 FAIL, 1 WARN (mtu, pmtu), 1 OK\n");
    }
}
