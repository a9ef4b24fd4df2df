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
//! One time base per protocol. UDP: every rate of a run, sent and received, is over the
//! **sending time**: from the first send to the end of the last, on the sender's clock (this
//! client's in forward runs, serve's in reverse runs). A receiver that got 64 of 10 million
//! datagrams in 37 µs received 32 a second of a two-second run, not 1.7 million. TCP: a
//! receiver's rates are over the **receiving time** (`ReceiverResult::recv_ns`: its first to
//! last arrival, each connection's start one mean gap before its first message), because a
//! TCP sender's last write returns while its socket buffers and the path's queues still hold
//! what it wrote; the sender's own rate is its write rate, over its writing time. Interval
//! rows are on this client's clock from the start of sending; each ends when its counts
//! were taken.
//!
//! What the receiving host dropped: the receiver snapshots the kernel's `/proc/net/snmp`
//! before and after (serve for forward runs, this client for reverse) and the result says
//! how often its UDP receive buffers overflowed (host-wide). The receive thread asks for a
//! higher priority (nice -10, root or `CAP_SYS_NICE`) and a flat-out sender whose receiver
//! may share the host yields (nice +5), so a receiver does not lose the CPU to the sender
//! it measures.
//!
//! `--find-max-rate` runs trials (`--trial` long) in the search of `wirebench_core::ratesearch`
//! (the top, a geometric descent, then bisection) for the highest rate whose loss stays
//! within `--loss-target`; `--sizes` runs one trial per size.

mod config;
mod health;
mod search;
mod session;
mod tcp;
mod udp;

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Instant, SystemTime};
use wirebench_core::units::nanos;

pub use config::Config;
use wirebench_core::report::{Outcome, Report, Results, StreamDirection, StreamResults, Transport};
use wirebench_core::units::{ByteSize, Count, Span, StreamRate};
use wirebench_core::wire::control::{Direction, StreamProto};

use self::session::{Live, RunOut, RunSpec};
use crate::addr::Proto;
use crate::ctx::Ctx;
use crate::progress::{Progress, Total};

/// `wirebench stream` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("quiet", |a| a.help("One line per receiver: what arrived of what was sent (a search: what it found)")),
    mut_arg("verbose", |a| a.help("The details too: the generator's health, the receivers' wake-up times, how rates are reckoned, per-interval loss splits, every kernel counter"))
)]
pub struct Args {
    /// Each `wirebench serve` (host:port) to stream to; with --no-control, where to send.
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub proto: Proto,
    /// UDP (the default; as iperf3's -u).
    #[arg(short = 'u', long = "udp", conflicts_with = "proto")]
    pub udp: bool,
    /// Message size in bytes [default: 1468 UDP, 65535 TCP].
    #[arg(long, short = 'l', visible_aliases = ["len", "msg-size"])]
    pub size: Option<ByteSize>,
    /// Rate per publisher: max, 800mbit, 100Mbps, 100MB/s, 50k/s (docs/units.md).
    #[arg(long, default_value = "max")]
    pub rate: StreamRate,
    /// Bit rate per publisher, as iperf3's -b: a bare 100M is 100 Mbit/s.
    #[arg(short = 'b', long = "bitrate", conflicts_with = "rate")]
    pub bitrate: Option<wirebench_core::units::BitRate>,
    /// Messages per publisher.
    #[arg(long, short = 'n')]
    pub count: Option<Count>,
    /// How long [default: 10s].
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time")]
    pub duration: Option<Span>,
    /// Interval of the lines, and of the rows this client measures itself (reverse); serve
    /// reports each second [default: 1s; a run of more than ten intervals prints a line per
    /// tenth of it, -v every interval].
    #[arg(long)]
    pub interval: Option<Span>,
    /// Parallel publishers (UDP: streams with their own socket; TCP: connections).
    #[arg(long, short = 'P', default_value_t = 1)]
    pub parallel: u16,
    /// Serve sends, this client receives (only ever to this client's address).
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Both directions at once (UDP).
    #[arg(long)]
    pub bidir: bool,
    /// With --bidir: this client starts sending only once it hears serve's data, so both
    /// sides measure the same window (DatagramTest's -polite).
    #[arg(long)]
    pub polite: bool,
    /// UDP multicast: every TARGET serve joins this group and this client sends to it.
    #[arg(long, value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub group: Option<SocketAddrV4>,
    /// Just send to the TARGETs (e.g. a `wirebench listen`), with no serve to ask.
    #[arg(long)]
    pub no_control: bool,
    /// Multicast: the interface to send from, and the TTL.
    #[command(flatten)]
    pub mcast: crate::flags::MulticastArgs,
    /// The token a serve started with --token wants.
    #[command(flatten)]
    pub token: crate::auth::TokenArgs,
    /// Find the highest rate whose loss stays within --loss-target.
    #[arg(long)]
    pub find_max_rate: bool,
    /// Loss allowed by --find-max-rate: 0, 0.1%, 0.001.
    #[arg(long, default_value = "0")]
    pub loss_target: String,
    /// Length of each --find-max-rate or --sizes trial (100ms to 60s).
    #[arg(long, default_value = "2s")]
    pub trial: Span,
    /// Sweep these message sizes, e.g. 64,256,1024,1468,8192.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<ByteSize>>,
    /// Receive buffer of the receiving socket (serve's, or this client's with --reverse), e.g.
    /// 4k: to see what a smaller buffer loses [default: 16MiB].
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<wirebench_core::units::ByteSize>,
    /// Write interval rows as TSV.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::stall::HiccupArgs,
}

/// `wirebench stream`: measure, print, save. A serve that goes away mid-run ends it with
/// the results so far (exit 1).
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let cfg = Config::from_args(args)?;
    let meter = crate::stall::Meter::start(&args.hiccup)?;
    let mut report = measure(&cfg, ctx)?;
    crate::stall::attach(&mut report, meter);
    let detail = args.output.detail();
    wirebench_report::text::stream::summary_at(ctx.out, &report, detail)?;
    wirebench_report::attribution::text_at(ctx.out, &report, detail)?;
    save(&cfg, &report)?;
    Ok(report)
}

/// Runs the measurement `cfg` describes (search, sweep or one run) and builds the report.
pub fn measure(cfg: &Config, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let mut results = StreamResults {
        proto: if cfg.proto == StreamProto::Tcp { Transport::Tcp } else { Transport::Udp },
        direction: match cfg.direction {
            Direction::Forward => StreamDirection::Forward,
            Direction::Reverse => StreamDirection::Reverse,
            Direction::Both => StreamDirection::Both,
        },
        size: cfg.size,
        publishers: cfg.parallel,
        rate_per_s: cfg.rate.per_sec(cfg.size),
        sender: None,
        receivers: Vec::new(),
        search: None,
        sweep: Vec::new(),
        warnings: Vec::new(),
        listen: None,
        generator: None,
    };
    let mut outcome = Outcome::Completed;
    let last = if cfg.find_max_rate {
        search::find_max_rate(cfg, ctx, &mut results)
    } else if !cfg.sizes.is_empty() {
        search::sweep(cfg, ctx, &mut results)
    } else {
        let spec = RunSpec {
            size: cfg.size,
            rate: cfg.rate.per_sec(cfg.size),
            count: cfg.count,
            duration: cfg.duration,
            behind: crate::flow::send::Behind::CatchUp,
        };
        let live = live_for_run(cfg);
        once(cfg, &spec, ctx, &live)
    };
    let last = match last {
        Ok(l) => l,
        // Stopped before the run began (serve had not answered yet): a report all the same,
        // interrupted, with nothing measured, as ping saves one.
        Err(e) if ctx.shutdown.is_set() => RunOut { warnings: vec![format!("{e:#}")], ..RunOut::default() },
        Err(e) => return Err(e),
    };
    if let Some(why) = &last.peer_lost {
        outcome = Outcome::PeerSilent;
        results.warnings.push(why.clone());
    } else if ctx.shutdown.is_set() {
        outcome = Outcome::Interrupted;
    }
    results.sender = last.sender;
    results.generator = last.generator;
    results.receivers = last.receivers;
    results.warnings.extend(last.warnings);
    let report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta_to(
            &ctx.argv,
            started,
            nanos(t0.elapsed()),
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

/// The progress of one run: interval lines unless quiet, and a bar (after two seconds, on a
/// terminal) toward the duration, or toward the messages of a counted run.
fn live_for_run(cfg: &Config) -> Live {
    let done = Arc::new(AtomicU64::new(0));
    let receivers = if cfg.no_control { 0 } else { cfg.targets.len() as u64 };
    let total = match cfg.count {
        Some(n) if receivers > 0 => {
            let ways = if cfg.direction == Direction::Both { 2 } else { 1 };
            Total::CountOf(
                n.saturating_mul(u64::from(cfg.parallel)).saturating_mul(receivers * ways),
                "messages received",
            )
        }
        _ => Total::Time(cfg.duration),
    };
    let label = crate::progress::label("stream", cfg.group.map_or(cfg.targets[0], SocketAddr::V4));
    Live {
        lines: !cfg.quiet,
        every: cfg.line_every,
        bar: Some(Progress::start(label, total, Arc::clone(&done), cfg.quiet)),
        done,
    }
}

/// One run with `spec`.
fn once(cfg: &Config, spec: &RunSpec, ctx: &mut Ctx<'_>, live: &Live) -> anyhow::Result<RunOut> {
    let session = crate::ctx::session_id();
    if cfg.no_control {
        return udp::publish_only(cfg, spec, session, ctx);
    }
    match cfg.proto {
        StreamProto::Udp => udp::run(cfg, spec, session, ctx, live),
        StreamProto::Tcp => tcp::run(cfg, spec, session, ctx, live),
    }
}

/// Writes the files asked for.
pub fn save(cfg: &Config, report: &Report) -> anyhow::Result<()> {
    if let Some(p) = &cfg.json {
        crate::output::write_json(p, report)?;
    }
    if let Some(p) = &cfg.log {
        crate::output::write_atomic(p, |w| wirebench_report::text::stream::tsv(w, report))?;
    }
    Ok(())
}
