//! `wirebench load`: application load over WebSocket. Many clients in rooms each send an
//! open-loop mix of events; every other member of the room records the delay from the
//! message's departure to its arrival.
//!
//! Method. Client `i` joins room `i / room_size` at `ramp * i / clients`, then sends at its
//! intended times (fixed interval with a random phase, or Poisson): a send that is due goes
//! out however late, and never waits for a reply (open loop). Each message carries its send
//! time and its intended send time (wall clock, µs). A receiver records arrival minus send
//! time (`delay_from_send`, what the app's users see) and arrival minus intended send time
//! (`delay_from_intended_send`, which also counts the generator's own lateness: coordinated
//! omission corrected). A request event is answered to its sender only; the sender records
//! reply arrival minus send time. All clients run in one process (on a worker thread with
//! its own single-threaded runtime: `load/workers.rs`), so sender and receiver clocks are the
//! same clock.
//!
//! Accounting. Every relayed message is expected at every other member that had joined
//! when it was sent, every request back at its sender; the report sets expected against
//! arrived per type and says why the missing ones are missing (dropped while connected,
//! lost with a connection that closed early, not arrived by the end):
//! `wirebench_core::load::delivery`.
//!
//! `--link RATE/DELAY` shapes each client's upload in user space: a frame waits in a token
//! bucket at RATE, then DELAY more, before it is written; the achieved rate and hold are
//! measured at the actual writes. `--link-down` shapes downloads arithmetically: a frame
//! counts as delivered when the shaped link would have delivered it, and every download
//! figure is labelled modelled.

pub mod client;
pub mod config;
pub mod health;
pub mod request;
mod results;
pub mod shard;
pub mod stats;
pub mod workers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wirebench_core::units::nanos;

use anyhow::Context as _;
pub use config::Config;
use tokio::sync::watch;
use wirebench_core::latency::value_at_percentile;
use wirebench_core::load::Link;
use wirebench_core::report::{LoadSecond, Outcome, Report, Results};
use wirebench_core::units::{MsgRate, Span};

use self::client::Plan;
use self::stats::Stats;
use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::limits;

/// `--size TYPE=SIZE`: a message type's size (`chat=512`, `*=1KiB`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSize(pub String, pub wirebench_core::units::ByteSize);

impl std::str::FromStr for TypeSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, size) = s.split_once('=').ok_or_else(|| format!("'{s}' is not TYPE=SIZE (e.g. chat=512)"))?;
        Ok(Self(name.trim().to_owned(), size.parse().map_err(|e| format!("{e}"))?))
    }
}

/// `wirebench load` flags. Flags left out come from `--scenario`, then `--preset`, then
/// the defaults.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(
    mut_arg("json", |a| a.help("Write the JSON report (also on Ctrl-C and when the server dies)")),
    mut_arg("quiet", |a| a.help("One line at the end: deliveries, delay and failed thresholds (no per-second lines)")),
    mut_arg("verbose", |a| a.help("The details too: the per-second lines, the per-type tables, CPU, slip and the generator's health, every kernel counter"))
)]
pub struct Args {
    /// ws://HOST:PORT/PATH of the server; `{room}` in it is replaced by the room number,
    /// otherwise `-N` is appended to the path (e.g. ws://127.0.0.1:8080/rooms/demo).
    pub url: Option<String>,
    /// Simulated users [default: 10; collab-ide: 50].
    #[arg(long, short = 'c', visible_alias = "vus")]
    pub clients: Option<wirebench_core::units::Count>,
    /// Events per second per client [default: 2/s].
    #[arg(long)]
    pub rate: Option<MsgRate>,
    /// How long every client sends, after the ramp [default: 10s; collab-ide: 5m].
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time")]
    pub duration: Option<Span>,
    /// Clients join evenly over this [default: 0s].
    #[arg(long)]
    pub ramp: Option<Span>,
    /// Members per room [default: 5].
    #[arg(long)]
    pub room_size: Option<wirebench_core::units::Count>,
    /// Event mix, NAME=WEIGHT,... (save, open and list are requests) [default: collab-ide's].
    #[arg(long)]
    pub mix: Option<String>,
    /// Message size of a type, TYPE=SIZE (`*` for all; repeatable) [default: 128].
    #[arg(long, value_name = "TYPE=SIZE")]
    pub size: Vec<TypeSize>,
    /// `fixed` (interval with a random phase) or `poisson`.
    #[arg(long)]
    pub arrivals: Option<String>,
    /// A TOML file with any of these settings (see docs/modes/load.md).
    #[arg(long, value_name = "FILE.toml")]
    pub scenario: Option<PathBuf>,
    /// A ready-made scenario: collab-ide (50 clients, 2/s, 5m, rooms of 5, p96).
    #[arg(long)]
    pub preset: Option<String>,
    /// Each client's upload: RATE/DELAY, e.g. 60.76mbit/10ms (0/5ms: delay only).
    #[arg(long, value_name = "RATE/DELAY")]
    pub link: Option<Link>,
    /// Each client's download: RATE/DELAY.
    #[arg(long, value_name = "RATE/DELAY")]
    pub link_down: Option<Link>,
    /// Percentiles to report, e.g. 50,96,99.
    #[arg(long, value_delimiter = ',')]
    pub percentiles: Option<Vec<f64>>,
    /// Fail (exit 3) unless this holds, e.g. 'p96<300ms', 'cursor:p99<50ms', 'reply:max<1s'
    /// (repeatable).
    #[arg(long)]
    pub threshold: Vec<String>,
    /// Message template with {type} {req} {sender} {room} {seq} {ts} {it} {pad}.
    #[arg(long)]
    pub template: Option<String>,
    /// Seed of the clients' random choices.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
    /// Write the per-second series as CSV.
    #[arg(long, value_name = "FILE")]
    pub series: Option<PathBuf>,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::stall::HiccupArgs,

    // -- real apps: TLS, headers, cookies, subprotocols, per-client values
    /// wss://: also trust the CA certificates in this PEM file (besides the system's store).
    #[arg(long, value_name = "FILE.pem")]
    pub ca: Option<PathBuf>,
    /// wss://: do not check the server's certificate at all (test servers only: anyone on the
    /// path could read and change the traffic).
    #[arg(long)]
    pub insecure: bool,
    /// An extra handshake header, 'Name: value' (repeatable); the value may hold {client} and
    /// the --tokens columns, e.g. 'Authorization: Bearer {token}'.
    #[arg(long, short = 'H', value_name = "NAME: VALUE")]
    pub header: Vec<String>,
    /// A cookie, NAME=VALUE (repeatable; sent as one Cookie header; templates as --header).
    #[arg(long, value_name = "NAME=VALUE")]
    pub cookie: Vec<String>,
    /// Offer this WebSocket subprotocol (repeatable, in order of preference); the server
    /// must pick one of them.
    #[arg(long, value_name = "NAME")]
    pub subprotocol: Vec<String>,
    /// Per-client values: a CSV file with a header row; its column names become
    /// placeholders ({token}) in the URL and header values; client i takes row i mod rows.
    #[arg(long, value_name = "FILE.csv")]
    pub tokens: Option<PathBuf>,

    // Sharding over several processes or machines (`load/shard.rs`).
    /// Run only the K-th of N parts of the scenario (whole rooms each, client ids as in the
    /// whole scenario); `auto/N` takes K from $JOB_COMPLETION_INDEX + 1 (Kubernetes).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Start the ramp at TIME (RFC 3339 UTC, e.g. 2026-11-23T04:00:00Z, or unix seconds), so
    /// that shards line up; more than 1 s past is an error.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// `wirebench load`: check, measure, print, save.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let cfg = Config::from_args(args)?;
    let meter = crate::stall::Meter::start(&args.hiccup)?;
    let mut report = measure(&cfg, ctx, false)?;
    crate::stall::attach(&mut report, meter);
    let detail = args.output.detail();
    wirebench_report::text::load::report_at(&cfg.percentiles, &report, ctx.out, detail)?;
    wirebench_report::attribution::text_at(ctx.out, &report, detail)?;
    save(&cfg, &report)?;
    Ok(report)
}

/// The exit code a finished load run asks for: 1 when the server died or nothing it was
/// meant to deliver arrived, 3 when a threshold failed, else 0.
pub fn exit_code(report: &Report) -> u8 {
    if report.outcome == Outcome::PeerSilent {
        return 1;
    }
    match &report.results {
        Results::Load(l) if wirebench_core::load::results::nothing_arrived(l).is_some() => 1,
        Results::Load(l) if l.thresholds.iter().any(|t| !t.passed) => 3,
        _ => 0,
    }
}

/// Refuses a client count the open-file limit cannot hold (after raising it).
pub fn check_fit(cfg: &Config) -> Result<(), UsageError> {
    let soft = limits::raise_nofile();
    let need = cfg.sharding.part.len() + cfg.extra_fds + limits::SPARE_FDS;
    if need > soft {
        return Err(UsageError(format!(
            "{} clients need about {need} open files{}, but this process may open {soft} (hard limit {}): \
             use fewer clients, or split them over several processes (--shard K/N)",
            cfg.sharding.part.len(),
            if cfg.extra_fds > 0 { " (the in-process room's sockets included)" } else { "" },
            limits::nofile_hard()
        )));
    }
    Ok(())
}

/// The run's times: its start (monotonic and wall clock), the end of sending (ramp and
/// duration), and when clients leave (half a second later, and the link's delays both ways
/// twice, for what is still in flight).
fn plan_of(cfg: &Config, started: SystemTime) -> Plan {
    let t0 = Instant::now();
    let wall0_ns =
        u64::try_from(started.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos())).unwrap_or(0);
    let end_ns = nanos(cfg.ramp + cfg.duration);
    let link_delay = cfg.link_up.map_or(0, |l| l.delay_ns) + cfg.link_down.map_or(0, |l| l.delay_ns);
    let quit_ns = end_ns + 500_000_000 + 2 * link_delay;
    Plan { cfg: cfg.clone(), t0, wall0_ns, end_ns, quit_ns }
}

/// The run's first lines: what it does, its shard, and an `--insecure` warning.
fn say_head(cfg: &Config, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if !cfg.quiet {
        let head = format!(
            "wirebench load: {} clients in {} rooms of {}, {} each ({}), {} {}, {}",
            cfg.clients,
            cfg.rooms(),
            cfg.room_size,
            cfg.rate,
            cfg.arrivals.name(),
            Span(cfg.duration),
            if cfg.ramp.is_zero() { "with no ramp".to_owned() } else { format!("after a {} ramp", Span(cfg.ramp)) },
            wirebench_core::load::vars::mask_password(&cfg.url)
        );
        writeln!(out, "{}", wirebench_report::screen::wrap(&head))?;
        if let Some(s) = cfg.sharding.shard {
            let p = &cfg.sharding.part;
            writeln!(
                out,
                "shard {s}: rooms {}..{} ({} clients, ids {}..{})",
                p.rooms.start,
                p.rooms.end,
                p.len(),
                p.clients.start,
                p.clients.end
            )?;
        }
    }
    if cfg.connect.trust == Some(crate::tls::Trust::Insecure) {
        writeln!(
            out,
            "WARNING: --insecure: the server's TLS certificate is NOT checked; anyone on the path can read and change \
             this traffic (test servers only)"
        )?;
    }
    Ok(())
}

/// Second `at_s` of the run: what was sent and received in it, with its delays.
fn second_row(stats: &Stats, seconds: &mut health::Seconds, cpu: &health::RuntimeCpu, at_s: u64) -> LoadSecond {
    let (sent, received, h, slip) = stats.take_second();
    seconds.on_second(at_s, sent, slip, cpu.total());
    LoadSecond {
        at_s,
        sent,
        received,
        delay_p50_ns: value_at_percentile(&h, 50.0),
        delay_p99_ns: value_at_percentile(&h, 99.0),
        delay_histogram: Some(wirebench_core::report::encode_histogram(&h)),
    }
}

/// A run in which no client connected (and that was not stopped) fails with the reason:
/// the server refused the handshake, a TLS, subprotocol or handshake cause (said once), or
/// nothing answering there.
fn no_connection(cfg: &Config, stats: &Stats, outcome: Outcome) -> anyhow::Result<()> {
    let refused = Stats::get(&stats.refused_status);
    if Stats::get(&stats.connected) == 0 && outcome != Outcome::Interrupted && refused != 0 {
        anyhow::bail!(
            "the server at {} refused every WebSocket handshake (last answer: HTTP {refused}{})",
            first_url(cfg).1,
            if refused == 503 { ", full: it is at its connection limit" } else { "" }
        );
    }
    // -- real apps: a TLS, subprotocol or handshake cause, said once
    if Stats::get(&stats.connected) == 0
        && outcome != Outcome::Interrupted
        && let Some((cause, n)) = stats.handshakes.failures().into_iter().next()
    {
        let (client, url) = first_url(cfg);
        anyhow::bail!("no client could connect to {url} (client {client}'s URL; {}): {cause}", attempts(n));
    }
    if Stats::get(&stats.connected) == 0 && outcome != Outcome::Interrupted {
        let (client, url) = first_url(cfg);
        anyhow::bail!(
            "no client could connect to {url} (client {client}'s URL; {} failed): is a WebSocket server running \
             there? (start one with `wirebench room --listen {}`)",
            attempts(Stats::get(&stats.failed)),
            cfg.addr
        );
    }
    Ok(())
}

/// A shard waits for the `--start-at` its coordinator gave (or a stop).
fn wait_start(cfg: &Config, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    if let Some(at) = cfg.sharding.start_at {
        if !cfg.quiet {
            writeln!(ctx.out, "wirebench load: waiting for --start-at {}", humantime::format_rfc3339_millis(at))?;
        }
        shard::wait_until(at, &ctx.shutdown)?;
    }
    Ok(())
}

/// Runs the clients and builds the report (partial on Ctrl-C or a dead server).
pub fn measure(cfg: &Config, ctx: &mut Ctx<'_>, room_in_process: bool) -> anyhow::Result<Report> {
    check_fit(cfg)?;
    wait_start(cfg, ctx)?;
    let started = SystemTime::now();
    let cpu0 = limits::cpu_ns();
    let runtime_cpu = Arc::new(health::RuntimeCpu::default());
    // The clients run on the workers' runtimes; this one only ticks the series.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().context("cannot start the runtime")?;
    let plan = Arc::new(plan_of(cfg, started));
    let end_ns = plan.end_ns;
    let stats = Arc::new(Stats::new(cfg.mix.types().len(), cfg.clients, cfg.room_size, workers::WORKERS));
    let (stop_tx, stop_rx) = watch::channel(false);
    say_head(cfg, &mut *ctx.out)?;
    // A bar on a terminal (plain lines otherwise) from 2 s on, as ping has; the per-second
    // lines are printed with the bar lifted.
    let progress = crate::progress::Progress::start(
        format!("load {}", cfg.url),
        crate::progress::Total::Time(cfg.ramp + cfg.duration),
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
        cfg.quiet,
    );
    let mut series = Vec::new();
    let mut seconds = health::Seconds::default();
    let frame = Frame {
        cfg,
        plan: &plan,
        stats: &stats,
        runtime_cpu: &runtime_cpu,
        started,
        cpu0,
        argv: ctx.argv.clone(),
        room_in_process,
    };
    let out = &mut *ctx.out;
    let shutdown = ctx.shutdown.clone();
    let workers = workers::start(&plan, &stats, &runtime_cpu, &stop_rx)?;
    let outcome = rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut next_second = 1u64;
        let outcome = loop {
            tick.tick().await;
            let now = plan.now_ns();
            if shutdown.is_set() {
                break Outcome::Interrupted;
            }
            if now < end_ns && stats.all_dropped() {
                break Outcome::PeerSilent;
            }
            if now >= next_second * 1_000_000_000 {
                let row = second_row(&stats, &mut seconds, &runtime_cpu, next_second);
                if cfg.verbose {
                    let open = Stats::get(&stats.open);
                    let _ = progress.suspend(|| writeln!(out, "{}", wirebench_report::text::load::second(&row, open)));
                }
                series.push(row);
                next_second += 1;
                // A long run keeps its data if it is killed: the report so far, every 10 s.
                if let Some(path) = cfg.json.as_ref().filter(|_| next_second.is_multiple_of(FLUSH_EVERY_S)) {
                    let _ =
                        crate::output::write_json(path, &frame.report(series.clone(), &seconds, Outcome::Interrupted));
                }
            }
            if Stats::get(&stats.done) == cfg.sharding.part.len() {
                break Outcome::Completed;
            }
        };
        let _ = stop_tx.send(true);
        outcome
    });
    // Bounded: each worker waits at most a few seconds for its clients' close handshakes.
    workers.join();
    drop(progress);
    // -- real apps
    request::summary(&cfg.connect, &stats.handshakes, &mut *ctx.out)?;
    no_connection(cfg, &stats, outcome)?;
    Ok(frame.report(series, &seconds, outcome))
}

/// This process's first client and the URL it tried, for the messages of a run that could
/// not connect: `{client}` and `{room}` expanded (the template alone names no address anyone
/// tried), the `--tokens` columns left as `{name}` and a password masked (they may be
/// secrets: this line reaches terminals and CI logs).
fn first_url(cfg: &Config) -> (u64, String) {
    let client = cfg.sharding.part.clients.start;
    (client, cfg.connect.shown_url(client, client / cfg.room_size.max(1)))
}

/// `1 attempt`, `20 attempts`.
fn attempts(n: u64) -> String {
    wirebench_report::words::counted(n, "attempt", "attempts")
}

/// Seconds between the partial reports a long run writes to `--json`.
const FLUSH_EVERY_S: u64 = 10;

/// What a report needs besides the recordings.
struct Frame<'a> {
    cfg: &'a Config,
    plan: &'a Plan,
    stats: &'a Stats,
    runtime_cpu: &'a health::RuntimeCpu,
    started: SystemTime,
    cpu0: (u64, u64),
    argv: Vec<String>,
    room_in_process: bool,
}

impl Frame<'_> {
    /// The report of what was recorded so far.
    fn report(&self, series: Vec<LoadSecond>, seconds: &health::Seconds, outcome: Outcome) -> Report {
        let cpu1 = limits::cpu_ns();
        let cpu = (cpu1.0.saturating_sub(self.cpu0.0), cpu1.1.saturating_sub(self.cpu0.1));
        let runtime_cpu = self.runtime_cpu.total();
        let elapsed = self.plan.t0.elapsed();
        let mut results = results::results(self.cfg, self.plan, self.stats, series, cpu, elapsed, self.room_in_process);
        let rec = self.stats.merged(self.cfg.mix.types().len());
        let partial = (rec.second_sent, (rec.second_slip_sum, rec.second_slip_max));
        let wall_ns = nanos(elapsed);
        // the measured window: to the end of sending, or the stop
        let (end_ns, ramp_ns) = (self.plan.end_ns, nanos(self.cfg.ramp));
        let account = self.stats.generator.schedule(
            self.cfg.arrivals,
            results.sent,
            results.connections.failed,
            end_ns.min(wall_ns),
        );
        let secs = wirebench_core::load::results::send_secs(end_ns, ramp_ns, wall_ns);
        results.generator = Some(seconds.health(&results, partial, account, runtime_cpu, wall_ns, secs));
        Report {
            schema_version: wirebench_core::report::SCHEMA_VERSION,
            meta: crate::host::meta_to(&self.argv, self.started, nanos(elapsed), Some(self.cfg.addr), None),
            config: self.cfg.to_json(),
            outcome,
            results: Results::Load(results),
            attribution: None,
        }
    }
}

/// Writes the JSON report and the series CSV asked for.
pub fn save(cfg: &Config, report: &Report) -> anyhow::Result<()> {
    if let Some(p) = &cfg.json {
        crate::output::write_json(p, report)?;
    }
    if let (Some(p), Results::Load(l)) = (&cfg.series, &report.results) {
        crate::output::write_atomic(p, |w| {
            writeln!(w, "at_s,sent,received,delay_p50_us,delay_p99_us")?;
            for r in &l.series {
                #[expect(clippy::cast_precision_loss, reason = "display values")]
                let us = |v: u64| v as f64 / 1e3;
                writeln!(
                    w,
                    "{},{},{},{:.1},{:.1}",
                    r.at_s,
                    r.sent,
                    r.received,
                    us(r.delay_p50_ns),
                    us(r.delay_p99_ns)
                )?;
            }
            Ok(())
        })?;
    }
    Ok(())
}
