//! `wirebench suite`: the main job with no setup. Starts `serve` in-process on loopback,
//! runs a short tour of every measurement that exists, prints one table and writes one
//! JSON report per step and an HTML page of them all (`index.html`) to `wirebench-report/`.

use std::path::PathBuf;

use wirebench_core::report::{Report, Results};
use wirebench_report::words::us;

use crate::ctx::Ctx;
use crate::ping::{self, Config as PingConfig};
use crate::serve::{self, Server};
use crate::shutdown::Shutdown;

/// `wirebench suite` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where the reports go.
    #[arg(long, default_value = "wirebench-report")]
    pub out: PathBuf,
    /// Scale every step's probe count (0.1 for a smoke run, 10 for a long one).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

/// One step of the tour.
struct Step {
    name: &'static str,
    args: Vec<String>,
}

/// The stream steps: 3 s each (at least 3 s at any scale), so the per-interval charts have
/// several points (serve reports a forward stream's receive side about once a second), with
/// a quarter-length progress interval.
fn stream_steps(target: &str, scale: f64) -> Vec<Step> {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive durations")]
    let ms = ((3000.0 * scale).round() as u64).max(3000);
    let (d, iv) = (format!("{ms}ms"), format!("{}ms", ms / 4));
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive durations")]
    let trial = format!("{}ms", ((300.0 * scale).round() as u64).max(100));
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    vec![
        Step { name: "stream-udp-1468", args: s(&[target, "--duration", &d, "--interval", &iv, "-q"]) },
        Step { name: "stream-udp-64", args: s(&[target, "--size", "64", "--duration", &d, "--interval", &iv, "-q"]) },
        Step { name: "stream-tcp", args: s(&[target, "--proto", "tcp", "--duration", &d, "--interval", &iv, "-q"]) },
        Step {
            name: "stream-loss-free-64",
            args: s(&[target, "--size", "64", "--find-max-rate", "--trial", &trial, "-q"]),
        },
    ]
}

fn steps(target: &str, scale: f64) -> Vec<Step> {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive counts")]
    let n = |base: f64| ((base * scale).round() as u64).max(10).to_string();
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    vec![
        Step { name: "ping-udp", args: s(&[target, "--count", &n(20_000.0), "--warmup", &n(2_000.0)]) },
        Step {
            name: "ping-udp-full",
            args: s(&[target, "--size", "64", "--count", &n(10_000.0), "--warmup", &n(1_000.0)]),
        },
        Step {
            name: "ping-tcp",
            args: s(&[target, "--proto", "tcp", "--count", &n(20_000.0), "--warmup", &n(2_000.0)]),
        },
        Step {
            name: "ping-udp-open-10k",
            args: s(&[target, "--rate", "10k/s", "--count", &n(20_000.0), "--warmup", &n(1_000.0)]),
        },
    ]
}

/// The one folder wirebench makes: the suite's own, named by --out. Only that folder: a
/// parent that does not exist is a typo, not a tree to build (`/nonexistent/x`).
fn make_out(out: &std::path::Path) -> Result<(), crate::error::UsageError> {
    let shown = out.display();
    if out.is_dir() {
        return Ok(());
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !parent.is_dir() {
        return Err(crate::error::UsageError(format!(
            "--out {shown}: {} is not a folder (the suite makes only the last one)",
            parent.display()
        )));
    }
    std::fs::create_dir(out)
        .map_err(|e| crate::error::UsageError(format!("--out {shown}: cannot create the folder: {e}")))
}

/// The stream steps against `target`: their rows, and the names of the TCP ones.
fn run_streams(
    target: &str,
    args: &Args,
    ctx: &mut Ctx<'_>,
    reports: &mut Vec<Report>,
) -> anyhow::Result<(Vec<Vec<String>>, Vec<&'static str>)> {
    let mut stream_rows = Vec::new();
    let mut tcp_streams = Vec::new();
    for step in stream_steps(target, args.scale) {
        if ctx.shutdown.is_set() {
            break;
        }
        let a = parse_args::<crate::stream::Args>("stream", &step.args)?;
        let mut cfg = crate::stream::Config::from_args(&a)?;
        cfg.json = Some(args.out.join(format!("{}.json", step.name)));
        let r = crate::stream::measure(&cfg, ctx)?;
        crate::stream::save(&cfg, &r)?;
        stream_rows.push(stream_row(step.name, &r));
        if matches!(&r.results, Results::Stream(s) if s.proto == wirebench_core::report::Transport::Tcp) {
            tcp_streams.push(step.name);
        }
        reports.push(r);
    }
    Ok((stream_rows, tcp_streams))
}

/// A ping step whose p50 includes its sender's own lateness says so.
fn say_lateness(ctx: &mut Ctx<'_>, reports: &[Report]) -> std::io::Result<()> {
    for r in reports {
        if let Results::Ping(p) = &r.results
            && let Some(late) =
                p.responders.first().and_then(|x| wirebench_report::text::ping::sender_lateness_p50(p, x))
        {
            writeln!(ctx.out, "{}: its p50 includes the sender's own lateness, p50 {} us", step_name(r), us_u(late))?;
        }
    }
    Ok(())
}

/// Runs the tour; returns the reports in step order (pings, then streams).
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Vec<Report>> {
    if !(args.scale > 0.0 && args.scale <= 100.0) {
        return Err(crate::error::UsageError(format!("--scale {} is not in (0, 100]", args.scale)).into());
    }
    make_out(&args.out)?;
    let server = Server::start(&serve::Config::loopback(), Shutdown::new())?;
    let target = server.local_addr().to_string();
    writeln!(ctx.out, "wirebench suite: serve on {target} (in-process), reports in {}/", args.out.display())?;
    let mut reports = Vec::new();
    let mut rows = Vec::new();
    for step in steps(&target, args.scale) {
        if ctx.shutdown.is_set() {
            break;
        }
        let a = ping_args(&step.args)?;
        let mut cfg = PingConfig::from_args(&a)?;
        // The suite prints its own table: no progress lines from the steps.
        cfg.quiet = true;
        cfg.json = Some(args.out.join(format!("{}.json", step.name)));
        let m = ping::measure(&cfg, ctx)?;
        ping::save(&cfg, &m)?;
        rows.push(row(step.name, &m.report));
        reports.push(m.report);
    }
    let proxy_line =
        if ctx.shutdown.is_set() { None } else { Some(proxy_step(&server, args, ctx, &mut rows, &mut reports)?) };
    let (stream_rows, tcp_streams) = run_streams(&target, args, ctx, &mut reports)?;
    let counters = server.stop();
    #[cfg(all(feature = "load", feature = "room"))]
    let load_line = if ctx.shutdown.is_set() { None } else { Some(load_step(args, ctx, &mut reports)?) };
    #[cfg(not(all(feature = "load", feature = "room")))]
    let load_line = Some("load-ws-200: skipped (this binary is built without the load and room features)".to_owned());
    print_table(ctx, &rows)?;
    say_lateness(ctx, &reports)?;
    if let Some(line) = proxy_line {
        writeln!(ctx.out, "{line}")?;
    }
    print_stream_table(ctx, &stream_rows)?;
    if !tcp_streams.is_empty() {
        // A TCP sender's rate is what it wrote into its socket, not what left the host.
        writeln!(
            ctx.out,
            "{}: sent is what the sender wrote into its socket, received what serve read",
            tcp_streams.join(", ")
        )?;
    }
    if let Some(line) = load_line {
        writeln!(ctx.out, "{line}")?;
    }
    writeln!(ctx.out, "serve: {counters}")?;
    // The HTML page of every step (`wirebench report` renders the same from the JSON), each
    // named after its file.
    let names: Vec<String> = reports.iter().map(step_name).collect();
    let runs: Vec<wirebench_report::Run<'_>> =
        names.iter().zip(&reports).map(|(name, report)| wirebench_report::Run { name, report }).collect();
    let html = args.out.join("index.html");
    crate::report::write_html(&html, "wirebench suite", &runs, false)?;
    writeln!(ctx.out, "report: {}", html.display())?;
    Ok(reports)
}

/// A step's name: the stem of the JSON file it was saved to (`ping-udp`), else its mode.
fn step_name(r: &Report) -> String {
    r.config
        .get("json")
        .and_then(serde_json::Value::as_str)
        .and_then(|p| std::path::Path::new(p).file_stem())
        .map_or_else(|| wirebench_report::compare::mode(r).to_owned(), |s| s.to_string_lossy().into_owned())
}

fn ping_args(args: &[String]) -> anyhow::Result<ping::Args> {
    parse_args::<ping::Args>("ping", args)
}

/// Parses a mode's flags as its subcommand would.
fn parse_args<A: clap::Args>(name: &str, args: &[String]) -> anyhow::Result<A> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(crate::flags::parse_mode(name, &args)?)
}

fn stream_row(name: &str, r: &Report) -> Vec<String> {
    use wirebench_report::words::{bits_words, rate_words};
    let Results::Stream(s) = &r.results else {
        return vec![name.into(), "not a stream".into()];
    };
    let sent = s.sender.map_or_else(|| "-".into(), |x| rate_words(x.per_s));
    let (recv, bits, loss) = s.receivers.first().map_or_else(
        || ("-".into(), "-".into(), "-".into()),
        |x| (rate_words(x.per_s()), bits_words(x.bits_per_s()), format!("{:.3}%", 100.0 * x.loss())),
    );
    let best = s.search.as_ref().map_or_else(|| "-".into(), |x| rate_words(x.best_per_s));
    vec![name.into(), format!("{} {} B", s.proto, s.size), sent, recv, bits, loss, best]
}

fn print_stream_table(ctx: &mut Ctx<'_>, rows: &[Vec<String>]) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let head = ["step", "stream", "sent", "received", "throughput", "loss", "loss-free rate"];
    print_rows(ctx, &head, rows)
}

fn row(name: &str, r: &Report) -> Vec<String> {
    let Results::Ping(p) = &r.results else {
        return vec![name.into(), "not a ping".into()];
    };
    let Some(resp) = p.responders.first() else {
        return vec![name.into(), "no reply".into()];
    };
    let s = &resp.latency.summary;
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let at = |q: f64| s.at(q).map_or_else(|| "-".into(), |v| us(v as f64));
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let max = us(s.max_ns as f64);
    let one_way = resp.one_way.map_or_else(
        || "-".into(),
        |o| format!("{}/{} ±{}", us_u(o.forward.p50_ns), us_u(o.reverse.p50_ns), us_u(o.bound_ns)),
    );
    vec![
        name.into(),
        format!("{} {}", p.proto, p.pacing),
        s.count.to_string(),
        at(50.0),
        at(99.0),
        at(99.9),
        at(99.99),
        max,
        resp.lost.to_string(),
        one_way,
    ]
}

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn us_u(v: u64) -> String {
    us(v as f64)
}

fn print_table(ctx: &mut Ctx<'_>, rows: &[Vec<String>]) -> anyhow::Result<()> {
    let head = ["step", "mode", "count", "p50 us", "p99", "p99.9", "p99.99", "max", "lost", "one-way fwd/rev"];
    print_rows(ctx, &head, rows)
}

fn print_rows(ctx: &mut Ctx<'_>, head: &[&str], rows: &[Vec<String>]) -> anyhow::Result<()> {
    let head: Vec<String> = head.iter().map(|s| (*s).to_owned()).collect();
    let all: Vec<&Vec<String>> = std::iter::once(&head).chain(rows.iter()).collect();
    let widths: Vec<usize> =
        (0..head.len()).map(|i| all.iter().map(|r| r.get(i).map_or(0, String::len)).max().unwrap_or(0)).collect();
    writeln!(ctx.out)?;
    for r in all {
        let cells: Vec<String> = r.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        writeln!(ctx.out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

// ---- proxy step ----

/// The proxy step's delay, each way.
const PROXY_DELAY_NS: u64 = 500_000;

/// Ping through an in-process UDP proxy that adds 500 us each way; saves the ping and the
/// proxy reports and returns the line comparing the measured added round trip (against the
/// first step's direct p50) with the requested one.
fn proxy_step(
    server: &Server,
    args: &Args,
    ctx: &mut Ctx<'_>,
    rows: &mut Vec<Vec<String>>,
    reports: &mut Vec<Report>,
) -> anyhow::Result<String> {
    use wirebench_core::impair::Spec;
    let started = std::time::SystemTime::now();
    let pcfg =
        crate::proxy::Config::loopback(server.local_addr(), Spec { delay_ns: PROXY_DELAY_NS, ..Spec::default() });
    let proxy = crate::proxy::Proxy::start(&pcfg)?;
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive counts")]
    let n = |base: f64| ((base * args.scale).round() as u64).max(10).to_string();
    let via = proxy.local_addr().to_string();
    let a = ping_args(&[via, "--count".into(), n(2_000.0), "--warmup".into(), n(100.0)])?;
    let mut cfg = PingConfig::from_args(&a)?;
    cfg.quiet = true;
    cfg.json = Some(args.out.join("ping-udp-proxy-500us.json"));
    let measured = ping::measure(&cfg, ctx);
    let results = proxy.stop();
    let m = measured?;
    ping::save(&cfg, &m)?;
    let own = |d: &wirebench_core::report::ProxyDirection| d.achieved.added_delay.summary.at(50.0).unwrap_or(0);
    let (up, down) = (own(&results.up), own(&results.down));
    let preport = crate::proxy::report(&pcfg, results, &ctx.argv, started, wirebench_core::report::Outcome::Completed);
    crate::output::write_json(&args.out.join("proxy-udp-500us.json"), &preport)?;
    reports.push(preport);
    let p50 = |r: &Report| {
        if let Results::Ping(p) = &r.results {
            p.responders.first().and_then(|x| x.latency.summary.at(50.0))
        } else {
            None
        }
    };
    let line = match (reports.first().and_then(p50), p50(&m.report)) {
        (Some(direct), Some(through)) => {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let added = through as f64 - direct as f64;
            format!(
                "proxy: requested +{} round trip ({} each way); measured +{} us at p50 (through the proxy {} us, \
                 direct {} us); the proxy's own added delay p50 up {} / down {} us",
                wirebench_core::units::humanize_ns(u128::from(2 * PROXY_DELAY_NS)),
                wirebench_core::units::humanize_ns(u128::from(PROXY_DELAY_NS)),
                us(added),
                us_u(through),
                us_u(direct),
                us_u(up),
                us_u(down)
            )
        }
        _ => "proxy: no round trip measured".to_owned(),
    };
    rows.push(row("ping-udp-proxy-500us", &m.report));
    reports.push(m.report);
    Ok(line)
}

// ---- load step ----

/// 200 WebSocket clients in rooms of 5 at 2 events/s each for 5 s (scaled, at least 3 s, so
/// the per-second charts have points)
/// against an in-process `wirebench room`; saves `load-ws-200.json` and returns its line.
#[cfg(all(feature = "load", feature = "room"))]
fn load_step(args: &Args, ctx: &mut Ctx<'_>, reports: &mut Vec<Report>) -> anyhow::Result<String> {
    let room = crate::room::RoomServer::start(&crate::room::Config::loopback())?;
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive durations")]
    let duration = format!("{}ms", ((5_000.0 * args.scale).round() as u64).max(3_000));
    let url = format!("ws://{}/rooms/suite", room.local_addr());
    let flags = [url, "--clients".into(), "200".into(), "--duration".into(), duration];
    let mut cfg = crate::load::Config::from_args(&parse_args::<crate::load::Args>("load", &flags)?)?;
    cfg.extra_fds = cfg.clients;
    cfg.quiet = true;
    cfg.json = Some(args.out.join("load-ws-200.json"));
    let measured = crate::load::measure(&cfg, ctx, true);
    let counters = room.stop();
    let report = measured?;
    crate::load::save(&cfg, &report)?;
    let line = match &report.results {
        Results::Load(l) => {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let ms = |v: Option<u64>| v.map_or_else(|| "-".into(), |v| format!("{:.3}", v as f64 / 1e6));
            let s = &l.overall.delay.summary;
            format!(
                "load-ws-200: {} clients x {}/s, rooms of {}: sent {:.1}/s of {:.1}, received {:.1}/s, \
                 delay p50 {} ms p99 {} ms max {} ms; room {} relayed, cpu {:.2}s",
                l.clients,
                l.rate_per_client,
                l.room_size,
                l.achieved_send_per_s,
                l.requested_send_per_s,
                l.received_per_s,
                ms(s.at(50.0)),
                ms(s.at(99.0)),
                ms(Some(s.max_ns)),
                counters.sent,
                std::time::Duration::from_nanos(counters.cpu_ns).as_secs_f64(),
            )
        }
        _ => "load-ws-200: no results".into(),
    };
    reports.push(report);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_parses() {
        for s in steps("127.0.0.1:7878", 0.1) {
            let a = ping_args(&s.args).unwrap();
            PingConfig::from_args(&a).unwrap();
        }
        for s in stream_steps("127.0.0.1:7878", 0.1) {
            let a = parse_args::<crate::stream::Args>("stream", &s.args).unwrap();
            crate::stream::Config::from_args(&a).unwrap();
        }
    }

    #[test]
    fn a_ten_second_budget() {
        use std::time::Duration;
        // The suite is the README's first command: keep it short.
        let d: Duration = Duration::from_secs(10);
        let probes: u64 = steps("127.0.0.1:7878", 1.0)
            .iter()
            .map(|s| {
                let i = s.args.iter().position(|a| a == "--count").unwrap();
                s.args[i + 1].parse::<u64>().unwrap()
            })
            .sum();
        // Even at a slow 100 us per blocking round trip the probes fit in the budget.
        assert!(Duration::from_micros(100) * u32::try_from(probes).unwrap() < d);
    }
}
