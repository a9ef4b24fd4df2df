//! `wirebench stream`: throughput and loss of a sequenced UDP or TCP stream.
//!
//! Method. Every message carries session, publisher, sequence number and send time. The
//! receiver (each `serve` in forward runs, this client in reverse runs) accounts each
//! publisher's stream in `wirebench_core::stream` (received, missing, duplicates, out of
//! order with DatagramTest's average offset, loss gaps, RFC 3550 jitter) and reports once
//! per interval over the control connection; at the end the client tells serve what it sent
//! and serve answers with its lifetime counts, so both sides are printed. Loss is
//! `1 - received / sent` from those two numbers. Rates count message bytes (UDP payload),
//! as iperf does. `--rate` applies per publisher.
//!
//! `--find-max-rate` runs trials (`--trial` long) in an RFC 2544 binary search for the
//! highest rate whose loss stays within `--loss-target`; `--sizes` runs one trial per size.

mod config;
mod print;
mod session;
mod tcp;
mod udp;

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

pub use config::Config;
use wirebench_core::ratesearch::RateSearch;
use wirebench_core::report::{Outcome, Report, Results, SearchResult, StreamResults, SweepRow, TrialRow};
use wirebench_core::units::{Span, StreamRate};
use wirebench_core::wire::control::StreamProto;

use self::session::{RunOut, RunSpec};
use crate::Ctx;
use crate::ping::Proto;

/// `wirebench stream` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Each `wirebench serve` (host:port) to stream to; with --no-control, where to send.
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub proto: Proto,
    /// Message size in bytes [default: 1468 UDP, 131072 TCP].
    #[arg(long)]
    pub size: Option<usize>,
    /// Rate per publisher: max, 800mbit, 100MB/s, 50k/s.
    #[arg(long, default_value = "max")]
    pub rate: StreamRate,
    /// Messages per publisher.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// How long [default: 10s].
    #[arg(long, short = 'd')]
    pub duration: Option<Span>,
    /// Progress line interval.
    #[arg(long, default_value = "1s")]
    pub interval: Span,
    /// Parallel publishers (UDP: streams with their own socket; TCP: connections).
    #[arg(long, short = 'P', default_value_t = 1)]
    pub parallel: u16,
    /// Serve sends, this client receives (only ever to this client's address).
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Both directions at once (UDP).
    #[arg(long)]
    pub bidir: bool,
    /// UDP multicast: every TARGET serve joins this group and this client sends to it.
    #[arg(long, value_name = "GROUP:PORT")]
    pub group: Option<SocketAddrV4>,
    /// Just send to the TARGETs (e.g. a `wirebench listen`), with no serve to ask.
    #[arg(long)]
    pub no_control: bool,
    /// Multicast TTL.
    #[arg(long, default_value_t = 32, env = "WIREBENCH_TTL")]
    pub ttl: u32,
    /// Interface (name or IPv4 address) to send from.
    #[arg(long, env = "WIREBENCH_INTERFACE")]
    pub interface: Option<String>,
    /// Token a serve started with --token wants.
    #[arg(long, env = "WIREBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Find the highest rate whose loss stays within --loss-target.
    #[arg(long)]
    pub find_max_rate: bool,
    /// Loss allowed by --find-max-rate: 0, 0.1%, 0.001.
    #[arg(long, default_value = "0")]
    pub loss_target: String,
    /// Length of each --find-max-rate or --sizes trial.
    #[arg(long, default_value = "2s")]
    pub trial: Span,
    /// Sweep these message sizes, e.g. 64,256,1024,1468,8192.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<usize>>,
    /// Write interval rows as TSV.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write the JSON report.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Only the summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::hiccup::HiccupArgs,
}

/// `wirebench stream`: measure, print, save. A serve that goes away mid-run ends it with
/// the results so far (exit 1).
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let cfg = Config::from_args(args)?;
    let meter = crate::hiccup::Meter::start(&args.hiccup)?;
    let mut report = measure(&cfg, ctx)?;
    crate::hiccup::attach(&mut report, meter);
    wirebench_report::stream_text::summary(ctx.out, &report)?;
    wirebench_report::attribution::text(ctx.out, &report)?;
    save(&cfg, &report)?;
    Ok(report)
}

/// Runs the measurement `cfg` describes (search, sweep or one run) and builds the report.
pub fn measure(cfg: &Config, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let mut results = StreamResults {
        proto: if cfg.proto == StreamProto::Tcp { "tcp" } else { "udp" }.into(),
        direction: config::direction_str(cfg.direction).into(),
        size: cfg.size,
        publishers: cfg.parallel,
        rate_per_s: cfg.rate.per_sec(cfg.size),
        sender: None,
        receivers: Vec::new(),
        search: None,
        sweep: Vec::new(),
        warnings: Vec::new(),
    };
    let mut outcome = Outcome::Completed;
    let last = if cfg.find_max_rate {
        find_max_rate(cfg, ctx, &mut results)?
    } else if !cfg.sizes.is_empty() {
        sweep(cfg, ctx, &mut results)?
    } else {
        let spec = RunSpec {
            size: cfg.size,
            rate: cfg.rate.per_sec(cfg.size),
            count: cfg.count,
            duration: cfg.duration,
            progress: !cfg.quiet,
        };
        once(cfg, &spec, ctx)?
    };
    if let Some(why) = &last.peer_lost {
        outcome = Outcome::PeerSilent;
        results.warnings.push(why.clone());
    } else if ctx.shutdown.is_set() {
        outcome = Outcome::Interrupted;
    }
    results.sender = last.sender;
    results.receivers = last.receivers;
    results.warnings.extend(last.warnings);
    let report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta_to(
            &ctx.argv,
            started,
            u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX),
            cfg.group.map(SocketAddr::V4).or_else(|| cfg.targets.first().copied()),
            cfg.interface.as_deref(),
        ),
        config: serde_json::to_value(cfg).unwrap_or_default(),
        outcome,
        results: Results::Stream(results),
        attribution: None,
    };
    Ok(report)
}

/// One run with `spec`.
fn once(cfg: &Config, spec: &RunSpec, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let session = crate::session_id();
    if cfg.no_control {
        return udp::publish_only(cfg, spec, session, ctx);
    }
    match cfg.proto {
        StreamProto::Udp => udp::run(cfg, spec, session, ctx),
        StreamProto::Tcp => tcp::run(cfg, spec, session, ctx),
    }
}

/// Loss of a run: `1 - received / sent` over every receiver.
fn loss_of(r: &RunOut) -> (u64, u64, f64) {
    let sent: u64 = r.receivers.iter().map(|x| x.sent).sum();
    let got: u64 = r.receivers.iter().map(|x| x.total.received.min(x.sent)).sum();
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    let loss = if sent == 0 { 1.0 } else { 1.0 - got as f64 / sent as f64 };
    (sent, got, loss)
}

fn find_max_rate(cfg: &Config, ctx: &mut Ctx<'_>, results: &mut StreamResults) -> anyhow::Result<RunOut> {
    let trial = |rate: Option<f64>, ctx: &mut Ctx<'_>| {
        let spec = RunSpec { size: cfg.size, rate, count: None, duration: cfg.trial, progress: false };
        once(cfg, &spec, ctx)
    };
    if !cfg.quiet {
        writeln!(
            ctx.out,
            "finding the highest rate with loss <= {:.4}% (up to 12 trials of {})",
            cfg.loss_target * 100.0,
            Span(cfg.trial)
        )?;
    }
    // First trial: the top of the range, flat out or the --rate given.
    let top_rate = cfg.rate.per_sec(cfg.size);
    let first = trial(top_rate, ctx)?;
    let achieved = first.sender.map_or(0.0, |s| s.per_s / f64::from(cfg.parallel));
    let top = top_rate.unwrap_or(achieved);
    let mut search = RateSearch::new(top, cfg.loss_target, 0.02);
    let mut rows = Vec::new();
    let mut record = |r: &RunOut, rate: Option<f64>, s: &mut RateSearch, ctx: &mut Ctx<'_>| {
        let (sent, got, loss) = loss_of(r);
        let achieved = r.sender.map_or(0.0, |x| x.per_s / f64::from(cfg.parallel));
        let t = s.on_result_achieved(rate.unwrap_or(top), achieved, loss);
        let row = TrialRow {
            rate_per_s: rate,
            sent_per_s: r.sender.map_or(0.0, |x| x.per_s),
            sent,
            received: got,
            loss,
            passed: t.passed,
        };
        if !cfg.quiet {
            let _ = wirebench_report::stream_text::trial(ctx.out, &row, cfg.size);
        }
        rows.push(row);
    };
    record(&first, top_rate, &mut search, ctx);
    let mut last = first;
    let mut trials = 1;
    while let Some(rate) = search.next_rate() {
        if ctx.shutdown.is_set() || last.peer_lost.is_some() || trials >= 12 {
            break;
        }
        last = trial(Some(rate), ctx)?;
        record(&last, Some(rate), &mut search, ctx);
        trials += 1;
    }
    let best = search.result();
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let best_bits = best * 8.0 * cfg.size as f64;
    results.search =
        Some(SearchResult { loss_target: cfg.loss_target, trials: rows, best_per_s: best, best_bits_per_s: best_bits });
    Ok(last)
}

fn sweep(cfg: &Config, ctx: &mut Ctx<'_>, results: &mut StreamResults) -> anyhow::Result<RunOut> {
    let mut last = RunOut::default();
    for &size in &cfg.sizes {
        if ctx.shutdown.is_set() || last.peer_lost.is_some() {
            break;
        }
        let spec = RunSpec { size, rate: cfg.rate.per_sec(size), count: None, duration: cfg.trial, progress: false };
        last = once(cfg, &spec, ctx)?;
        let (_, _, loss) = loss_of(&last);
        let span: u64 = last.receivers.iter().map(|r| r.total.span_ns()).max().unwrap_or(0);
        let got: f64 = last.receivers.iter().map(|r| r.total.per_sec(span)).sum();
        let bits: f64 = last.receivers.iter().map(|r| r.total.bits_per_sec(span)).sum();
        let row = SweepRow { size, per_s: got, bits_per_s: bits, loss };
        if !cfg.quiet {
            let _ = wirebench_report::stream_text::sweep_row(ctx.out, &row);
        }
        results.sweep.push(row);
    }
    Ok(last)
}

/// Writes the files asked for.
pub fn save(cfg: &Config, report: &Report) -> anyhow::Result<()> {
    if let Some(p) = &cfg.json {
        crate::output::write_json(p, report)?;
    }
    if let Some(p) = &cfg.log {
        crate::output::write_atomic(p, |w| print::tsv(w, report))?;
    }
    Ok(())
}
