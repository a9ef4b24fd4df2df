//! `wirebench ping`: round-trip latency over UDP (unicast or multicast) or TCP.
//!
//! Method. Each probe carries its send time t1 (monotonic ns, read just before the send
//! syscall); the reply's receive time t4 is read just after the receive syscall returns.
//! Closed loop (the default, Aeron's Ping) records `t4 - t1` and sends the next probe when
//! the reply arrived or the timeout passed. Open loop (`--rate`) gives probe n the intended
//! send time `start + n / rate` and records `t4 - intended` (coordinated omission
//! corrected) beside the uncorrected `t4 - t1`, and reports requested vs achieved rate and
//! send slip. A probe without a reply within `--timeout` is lost, never a large latency; a
//! reply after its timeout is counted late. Warm-up probes go to their own histogram.
//! Probes of 48 bytes or more carry the responder's receive and send times: its dwell time
//! is subtracted for a network round trip, and clock offset and one-way delays are estimated
//! with their bound (see `wirebench_core::clocksync`).

pub mod config;
pub mod engine;
pub mod results;

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use wirebench_core::units::nanos;

use anyhow::{Context as _, anyhow};
pub use config::{Config, Target};
use wirebench_core::latency::Interval;
use wirebench_core::report::{Report, Results};
use wirebench_core::units::{ByteSize, Count, CountOrSpan, MsgRate, Span};
use wirebench_core::wire::probe::FLAG_REPLY_GROUP;
use wirebench_net::clock::{MonoClock, wall_minus_mono};
use wirebench_net::io::ProbeIo;
use wirebench_net::multicast::SenderOpts;
use wirebench_net::tcp::TcpProbeIo;
use wirebench_net::udp::{UdpProbeIo, Wait};

use self::engine::{EngineConfig, EngineError, EngineOutput};
use crate::addr::Proto;
use crate::ctx::Ctx;
use crate::progress::Shown;

/// `wirebench ping` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("spin", |a| a.help("Busy-poll (no blocking syscall on the hot path)")),
    mut_arg("cpu", |a| a.help("Pin the measuring thread to this CPU")),
    mut_arg("quiet", |a| a.help("Print only the summary line, one per responder")),
    mut_arg("verbose", |a| a.help("Print the details too: every figure of each view, the kernel timestamps' split, the warm-up, every kernel counter"))
)]
pub struct Args {
    /// host:port of a `wirebench serve`, a multicast group:port, or stamp://host[:port] of a
    /// STAMP reflector (a router, `serve --stamp`; port 862 by default)
    pub target: String,
    /// Transport (stamp: RFC 8762 test packets over UDP).
    #[arg(long, value_enum, default_value = "udp")]
    pub proto: Proto,
    /// Probe size in bytes: 32 is round trip only, 48 and more adds the responder's
    /// timestamps (dwell, clock offset, one-way delay). STAMP: 44 (112 authenticated), or
    /// 4 or more bytes longer for an Extra Padding TLV [default: 32, STAMP 44].
    #[arg(long, short = 'l', visible_aliases = ["len", "msg-size"])]
    pub size: Option<ByteSize>,
    /// UDP (the default; as iperf3's -u).
    #[arg(short = 'u', long = "udp", conflicts_with = "proto")]
    pub udp: bool,
    /// Measured probes [default: 100000 closed loop].
    #[arg(long, short = 'n')]
    pub count: Option<Count>,
    /// Measure for this long (with --count, whichever comes first) [default: 10s open loop].
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time")]
    pub duration: Option<Span>,
    /// Warm-up probes (a count) or time, excluded from the results [default: 1000 or 1s].
    #[arg(long)]
    pub warmup: Option<CountOrSpan>,
    /// A reply later than this is lost (and counted late).
    #[arg(long, default_value = "1s")]
    pub timeout: Span,
    /// Give up when nothing at all came back for this long (timeouts alone never end a
    /// run; an unreachable target or a closed connection does at once).
    #[arg(long, value_name = "SPAN", default_value = "30s")]
    pub give_up_after: Span,
    /// Open loop at this rate (e.g. 10k/s): latency from the intended send time.
    #[arg(long, visible_alias = "mps")]
    pub rate: Option<MsgRate>,
    /// With --rate: Poisson sampling (RFC 2330 §11.1.1): exponential gaps between intended
    /// send times, mean 1/rate, so the probes cannot phase-lock to periodic host events.
    #[arg(long)]
    pub poisson: bool,
    /// Busy-poll and the CPU the measuring thread runs on.
    #[command(flatten)]
    pub pin: crate::flags::PinArgs,
    /// Multicast: the interface the probes go by, and their TTL.
    #[command(flatten)]
    pub mcast: crate::flags::MulticastArgs,
    /// Multicast: let this host's own responders hear the probes.
    #[arg(long = "loop")]
    pub multicast_loop: bool,
    /// Multicast: ask responders to answer on this group (Aeron's pong channel); serve must
    /// have the same --reply-group.
    #[arg(long, value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub reply_group: Option<SocketAddrV4>,
    /// Multicast: stop waiting for responders once this many answered.
    #[arg(long)]
    pub responders: Option<Count>,
    /// Print the full percentile distribution (HdrHistogram layout, microseconds).
    #[arg(long)]
    pub table: bool,
    /// Percentiles for the summary, e.g. 50,96,99.99.
    #[arg(long, value_delimiter = ',')]
    pub percentiles: Option<Vec<f64>>,
    /// Write the percentile distribution (.hgrm, microseconds).
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,
    /// Write an HdrHistogram interval log (one histogram a second).
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
    /// No kernel timestamps (`SO_TIMESTAMPING`): the round trip is then not split into
    /// stack to stack and the hosts' own share.
    #[arg(long, help_heading = "Attribution")]
    pub no_timestamps: bool,
    /// With --spin: kernel timestamps on all the same (off by default there: reading each
    /// probe's TX stamp is a system call per round trip, and a busy-polling thread has no
    /// wake-up to take out).
    #[arg(long, help_heading = "Attribution", conflicts_with = "no_timestamps")]
    pub timestamps: bool,
    /// With --spin: the stall meter on all the same (off by default there: each of its
    /// wake-ups takes a spinning thread's CPU, and shows in the tail it measures).
    #[arg(long, help_heading = "Attribution", conflicts_with = "no_hiccup")]
    pub hiccup: bool,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub meter: crate::stall::HiccupArgs,
    /// STAMP authenticated mode (RFC 8762 §4.4): the HMAC-SHA-256 key, hex, 16 bytes or
    /// more (as stamp-suite's --hmac-key).
    #[arg(long, env = "WIREBENCH_STAMP_KEY", hide_env_values = true, help_heading = "STAMP")]
    #[arg(conflicts_with = "stamp_key_file")]
    pub stamp_key: Option<String>,
    /// The STAMP key from a file (hex).
    #[arg(long, value_name = "FILE", help_heading = "STAMP")]
    pub stamp_key_file: Option<PathBuf>,
    /// The format of the STAMP sender's timestamps (the reflector states its own).
    #[arg(long, value_enum, default_value = "ntp", help_heading = "STAMP")]
    pub stamp_format: crate::stamp::FormatArg,
    /// The STAMP session id (RFC 8972 SSID) [default: random, not 0].
    #[arg(long, help_heading = "STAMP")]
    pub stamp_session_id: Option<u16>,
}

/// `wirebench ping`: measure, print, save.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let cfg = Config::from_args(args)?;
    let m = measure(&cfg, ctx)?;
    print(&cfg, &m.report, ctx)?;
    save(&cfg, &m)?;
    Ok(m.report)
}

/// A finished (or stopped) run: the report, and the per-second histograms for `--hlog`.
#[derive(Debug)]
pub struct Measured {
    /// The report.
    pub report: Report,
    /// One histogram per second of the main view, all responders merged (`--hlog` only).
    pub intervals: Vec<Interval>,
}

/// The engine's settings for `cfg`.
fn engine_config(cfg: &Config, clock: &MonoClock) -> EngineConfig {
    EngineConfig {
        size: cfg.size,
        flags: if cfg.reply_group.is_some() { FLAG_REPLY_GROUP } else { 0 },
        session: crate::ctx::session_id(),
        pacing: cfg.pacing,
        warmup: cfg.warmup,
        stop: cfg.stop,
        timeout_ns: nanos(cfg.timeout),
        multicast: matches!(cfg.target, Target::Multicast(_)),
        expect_responders: cfg.responders,
        wall_minus_mono: wall_minus_mono(clock),
        silence_ns: nanos(cfg.give_up_after),
        intervals: cfg.hlog.is_some(),
        cpu_probe: wirebench_net::pin::current_cpu,
        stamp: cfg.stamp.as_ref().map(config::StampCfg::sender),
    }
}

/// What one probe run measured: the engine's output, a note on kernel timestamps, and a
/// TCP run's `TCP_INFO`.
type Probed = (EngineOutput, Option<String>, Option<wirebench_core::report::TcpInfo>);

/// Opens the probe socket for the protocol and target, and drives the engine on it.
fn probe(
    cfg: &Config,
    clock: &MonoClock,
    ecfg: &EngineConfig,
    shutdown: &crate::shutdown::Shutdown,
    shown: &Shown,
) -> anyhow::Result<Probed> {
    let wait = if cfg.spin { Wait::Spin } else { Wait::Block };
    match (cfg.proto, cfg.target) {
        (Proto::Udp, Target::Unicast(a)) => {
            let mut io = UdpProbeIo::unicast(a, wait, cfg.timeout)?;
            let note = timestamps_on(&mut io, cfg);
            drive(&mut io, clock, ecfg, shutdown, cfg, shown).map(|o| (o, note, None))
        }
        (Proto::Udp, Target::Multicast(g)) => {
            let interface = cfg.interface.as_deref().map(wirebench_net::iface::ipv4_of).transpose()?;
            let opts = SenderOpts { interface, ttl: cfg.ttl, loopback: cfg.multicast_loop };
            let mut io = UdpProbeIo::multicast(g, &opts, cfg.reply_group, wait, cfg.timeout)?;
            let note = timestamps_on(&mut io, cfg);
            drive(&mut io, clock, ecfg, shutdown, cfg, shown).map(|o| (o, note, None))
        }
        (Proto::Tcp, Target::Unicast(a)) => {
            let mut io = TcpProbeIo::connect(a, wait, cfg.timeout).map_err(|e| {
                anyhow!("{e}: is `wirebench serve` running there? (start one with `wirebench serve --listen {a}`)")
            })?;
            let note = (!cfg.no_timestamps).then(|| "kernel timestamps: TCP probes have none (UDP only)".into());
            let o = drive(&mut io, clock, ecfg, shutdown, cfg, shown)?;
            // the kernel's own view of the connection, read before it closes
            Ok((o, note, io.tcp_stats().map(tcp_info)))
        }
        (Proto::Stamp, Target::Unicast(a)) => {
            let mut io = UdpProbeIo::unicast(a, wait, cfg.timeout)?;
            // As routers' senders do: the reflector reads the hops taken from it.
            io.set_ttl(255)?;
            let note = timestamps_on(&mut io, cfg);
            drive(&mut io, clock, ecfg, shutdown, cfg, shown).map(|o| (o, note, None))
        }
        (Proto::Tcp | Proto::Stamp, Target::Multicast(_)) => unreachable!("refused by Config"),
    }
}

/// Runs the measurement on its own thread (so pinning stays on it) and builds the report.
pub fn measure(cfg: &Config, ctx: &Ctx<'_>) -> anyhow::Result<Measured> {
    let meter = crate::stall::Meter::start(&cfg.hiccup)?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    let clock = MonoClock::default();
    let ecfg = engine_config(cfg, &clock);
    let shutdown = ctx.shutdown.clone();
    let ifaces = counted_interfaces(cfg);
    let before = wirebench_net::counters::snapshot(&ifaces);
    let shown = Arc::new(Shown::default());
    let progress = progress_total(cfg, &shown).map(|total| {
        let label = crate::progress::label("ping", cfg.target.addr());
        crate::progress::Progress::start(label, total, Arc::clone(&shown.sent), cfg.quiet)
    });
    let shown = &*shown;
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            // The open loop waits for send times: the default 50 us slack would make every
            // probe leave late (a failure here leaves the default; the lateness is reported).
            let _ = wirebench_net::timer::set_timer_slack(1);
            if let Some(c) = cfg.cpu {
                wirebench_net::pin::pin_current_thread(c).with_context(|| format!("cannot pin to cpu {c}"))?;
            }
            probe(cfg, &clock, &ecfg, &shutdown, shown)
        })
        .join()
        .map_err(|_| anyhow!("the measuring thread panicked"))?
    })?;
    let (out, stamp_note, tcp_info) = out;
    drop(progress);
    let results = results::build(cfg, &out);
    let after = wirebench_net::counters::snapshot(&ifaces);
    let lost: u64 = results.responders.iter().map(|r| r.lost).sum();
    let mut attribution = results::attribution(&out, lost, &before, &after, stamp_note);
    attribution.notes.extend(cfg.spin_off.notes());
    attribution.tcp_info = tcp_info;
    if cfg.proto == Proto::Tcp && tcp_info.is_none() {
        attribution.notes.push("TCP_INFO unavailable: the kernel refused getsockopt(TCP_INFO)".into());
    }
    if out.timestamps.rx {
        // whether the interface toward the target could give hardware stamps, and does
        attribution.notes.extend(ifaces.first().map(|i| wirebench_net::hwstamp::note(i)));
    }
    let duration_ns = nanos(t0.elapsed());
    let mut report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta_to(&ctx.argv, started, duration_ns, Some(cfg.target.addr()), cfg.interface.as_deref()),
        config: cfg.to_json(),
        outcome: out.outcome,
        results: Results::Ping(results),
        attribution: Some(attribution),
    };
    crate::stall::attach(&mut report, meter);
    Ok(Measured { report, intervals: out.intervals })
}

fn tcp_info(t: wirebench_net::tcpinfo::TcpStats) -> wirebench_core::report::TcpInfo {
    wirebench_core::report::TcpInfo {
        srtt_us: t.rtt_us,
        rttvar_us: t.rttvar_us,
        retransmits: t.retransmits,
        lost: t.lost,
        reordering: t.reordering,
    }
}

/// Turns kernel timestamps on unless `--no-timestamps`; a note when they cannot be had.
fn timestamps_on(io: &mut UdpProbeIo, cfg: &Config) -> Option<String> {
    if cfg.no_timestamps {
        return None;
    }
    io.enable_timestamps().err().map(|e| format!("kernel timestamps unavailable: {e}"))
}

/// The interfaces whose counters a run reads: the one toward the target, and `--interface`.
fn counted_interfaces(cfg: &Config) -> Vec<String> {
    counted(
        crate::host::net::interface_towards(cfg.target.addr()),
        cfg.interface.as_deref().and_then(crate::host::net::interface_name),
        matches!(cfg.target, config::Target::Multicast(_)),
    )
}

/// A multicast group's probes leave by `--interface`, not by the route toward the group
/// (the default route's interface): that one alone is counted. Unicast: the route's
/// interface first, then `--interface`.
fn counted(towards: Option<String>, interface: Option<String>, multicast: bool) -> Vec<String> {
    if multicast && let Some(i) = interface {
        return vec![i];
    }
    let mut v: Vec<String> = towards.into_iter().collect();
    if let Some(i) = interface
        && !v.contains(&i)
    {
        v.push(i);
    }
    v
}

#[cfg(test)]
mod counted_tests {
    #[test]
    fn multicast_counts_the_interface_it_was_given() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(super::counted(s("eth0"), s("lo"), true), ["lo"]);
        assert_eq!(super::counted(s("eth0"), None, true), ["eth0"]);
        assert_eq!(super::counted(s("eth0"), s("lo"), false), ["eth0", "lo"]);
        assert_eq!(super::counted(s("lo"), s("lo"), false), ["lo"]);
    }
}

fn drive<I: ProbeIo>(
    io: &mut I,
    clock: &MonoClock,
    ecfg: &EngineConfig,
    shutdown: &crate::shutdown::Shutdown,
    cfg: &Config,
    shown: &Shown,
) -> anyhow::Result<EngineOutput> {
    engine::run_shown(io, clock, ecfg, shutdown.flag(), shown).map_err(|e| match e {
        EngineError::NoResponder { refused } => {
            let addr = cfg.target.addr();
            let what = if refused {
                format!("{addr} refused the probes (port closed)")
            } else {
                format!("no reply from {addr} within {}", wirebench_core::units::Span(cfg.timeout))
            };
            let hint = match cfg.target {
                Target::Unicast(_) if cfg.proto == Proto::Stamp => {
                    format!("is a STAMP reflector answering there (`wirebench serve --stamp {addr}`), in the same authentication mode?")
                }
                Target::Unicast(_) => {
                    format!("is `wirebench serve` running there? (start one with `wirebench serve --listen {addr}`)")
                }
                Target::Multicast(g) => format!("did a `wirebench serve --join {g}` join the group on this network?"),
            };
            anyhow!("{what}: {hint}")
        }
        EngineError::Io(e) => anyhow!("{} {}: {e}", cfg.proto.name(), cfg.target.addr()),
    })
}

/// What the progress display counts toward: probes (warm-up included) when the run stops
/// at a count, else time (the warm-up's too). Until the warm-up ends the total counts its
/// bound (its count, or its deadline, or its count at the rate); then what it took, as the
/// engine shows it (a warm-up with a count and a deadline ends by whichever comes first).
fn progress_total(cfg: &Config, shown: &Arc<Shown>) -> Option<crate::progress::Total> {
    use crate::progress::Total;
    let shown = Arc::clone(shown);
    match (cfg.stop.max_count, cfg.stop.deadline) {
        (Some(n), _) => Some(Total::ProbesAfterWarmup { n, bound: cfg.warmup.max_count.unwrap_or(0), shown }),
        (None, Some(d)) => {
            #[expect(clippy::cast_precision_loss, reason = "an estimate for display")]
            let at_rate = match (cfg.warmup.max_count, cfg.pacing.rate()) {
                (Some(w), Some(r)) => Some(std::time::Duration::from_secs_f64(w as f64 / r.per_sec())),
                (Some(_), None) => Some(std::time::Duration::ZERO),
                (None, _) => None,
            };
            let guess = match (at_rate, cfg.warmup.deadline) {
                (Some(a), Some(w)) => a.min(w),
                (a, w) => a.or(w).unwrap_or_default(),
            };
            Some(Total::TimeAfterWarmup { d, guess, shown })
        }
        (None, None) => None,
    }
}

fn print(cfg: &Config, report: &Report, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let detail = wirebench_report::screen::Detail::of(cfg.quiet, cfg.verbose);
    wirebench_report::render_text(report, ctx.out, detail, cfg.table)?;
    wirebench_report::attribution::text_at(ctx.out, report, detail)?;
    Ok(())
}

/// Writes the files asked for. Called for partial reports too.
pub fn save(cfg: &Config, m: &Measured) -> anyhow::Result<()> {
    let report = &m.report;
    let Results::Ping(p) = &report.results else { return Ok(()) };
    if let Some(path) = &cfg.json {
        crate::output::write_json(path, report)?;
    }
    if let Some(path) = &cfg.hgrm {
        let view = p.combined.as_ref().or_else(|| p.responders.first().map(|r| &r.latency));
        let h = match view {
            Some(v) => wirebench_core::report::decode_histogram(&v.histogram)?,
            None => wirebench_core::latency::histogram(),
        };
        crate::output::write_atomic(path, |w| wirebench_report::distribution::write(&h, 1000.0, w))?;
    }
    if let Some(path) = &cfg.hlog {
        let started = humantime::parse_rfc3339(&report.meta.started_at).unwrap_or_else(|_| SystemTime::now());
        let comment = format!("wirebench {} {}", report.meta.version, report.meta.command_line.join(" "));
        crate::output::write_atomic(path, |w| wirebench_report::hlog::write(&m.intervals, started, &comment, w))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use wirebench_core::report::Outcome;
    use wirebench_net::fake::{FakeClock, FakeLink, FakeResponder};

    use super::*;

    /// `ping` with `flags` over a fake 20 ms round trip (virtual clock): the probes its
    /// warm-up took, and the progress's status at the end of the run, 3 s in.
    fn progress_at_the_end(flags: &[&str]) -> (u64, (u64, u64, String)) {
        let args = [&["127.0.0.1:7878"], flags].concat();
        let a: Args = crate::flags::parse_mode("ping", &args).expect("flags parse");
        let cfg = Config::from_args(&a).expect("a valid config");
        let clock = FakeClock::default();
        clock.advance_to(1_000_000);
        let peer = FakeResponder {
            addr: "10.0.0.1:7878".parse().unwrap(),
            forward_ns: 10_000_000,
            reverse_ns: 10_000_000,
            dwell_ns: 0,
            clock_offset_ns: 0,
        };
        let mut link = FakeLink::new(clock.clone(), 0, vec![peer], 1);
        let ecfg = EngineConfig {
            size: cfg.size,
            flags: 0,
            session: 1,
            pacing: cfg.pacing,
            warmup: cfg.warmup,
            stop: cfg.stop,
            timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap(),
            multicast: false,
            expect_responders: None,
            wall_minus_mono: 0,
            silence_ns: u64::MAX,
            intervals: false,
            cpu_probe: || None,
            stamp: None,
        };
        let shown = Arc::new(Shown::default());
        let total = progress_total(&cfg, &shown).expect("a bounded run shows progress");
        let out = engine::run_shown(&mut link, &clock, &ecfg, &AtomicBool::new(false), &shown).expect("the run starts");
        assert_eq!(out.outcome, Outcome::Completed);
        let sent = shown.sent.load(Ordering::Relaxed);
        assert_eq!(sent, out.warmup_sent + out.sent, "the probes shown are those sent after discovery");
        (out.warmup_sent, crate::progress::status(&total, sent, Duration::from_secs(3)))
    }

    /// The progress total counts the warm-up the run took (before: its whole count, so a
    /// warm-up ended by its deadline left the last line short, "150/1100 probes"), whether it
    /// ends by its deadline, by its count, or is off; a completed run reaches its total.
    #[test]
    fn the_progress_total_counts_the_warmup_the_run_took() {
        // The default warm-up (1,000 probes or 1 s, whichever first) ends by its deadline:
        // 50 round trips of 20 ms.
        let (w, s) = progress_at_the_end(&["--count", "100"]);
        assert!((45..=55).contains(&w), "{w}");
        assert_eq!(s, (100 + w, 100 + w, format!("{0}/{0} probes, 3.0 s", 100 + w)));
        let (w, s) = progress_at_the_end(&["--count", "100", "--warmup", "10"]);
        assert_eq!((w, s), (10, (110, 110, "110/110 probes, 3.0 s".into())));
        let (w, s) = progress_at_the_end(&["--count", "100", "--warmup", "0"]);
        assert_eq!((w, s), (0, (100, 100, "100/100 probes, 3.0 s".into())));
        // By time: a closed loop's warm-up by count was guessed to take no time; it took 1 s.
        let (w, s) = progress_at_the_end(&["--duration", "2s"]);
        assert!((45..=55).contains(&w), "{w}");
        assert_eq!(s, (3000, 3000, "3.0/3.0 s".into()));
    }
}
