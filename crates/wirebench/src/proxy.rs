//! `wirebench proxy`: a UDP or TCP impairment proxy that reports requested against
//! achieved.
//!
//! Method. Every packet (UDP) or read chunk (TCP) is stamped with the monotonic clock when
//! the proxy reads it, decided by its direction's `Impairment` (core, pure, seeded: delay
//! and jitter, random or Gilbert-Elliott loss, reorder, duplicate, token bucket with a
//! queue limit), and released at its due time: the forwarding thread sleeps in `ppoll`
//! (nanosecond timer) until 60 us before it and spins the rest. The "achieved" side is
//! measured, not assumed: added delay is the actual release time minus the arrival stamp
//! of each delivered packet (a latency histogram), loss and drops are counted by cause,
//! reordering is counted at release as the receiver will see it (RFC 4737), and rates are
//! bytes released over time. The delay the kernel adds before the proxy reads a packet
//! (wake-up, a few to tens of microseconds; less with `--spin`) is outside the stamp: the
//! end-to-end test (`ping` through the proxy against `ping` direct) measures it.
//!
//! Layout: [`args`] (flags), [`config`] (validation), [`udp`] (NAT-like event loop),
//! [`tcp`] (acceptor and pumps), [`collect`] (interval and total figures).

mod args;
pub mod collect;
pub mod config;
mod tcp;
mod udp;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use wirebench_core::units::nanos;

use anyhow::Context as _;
pub use args::Args;
pub use config::Config;
use wirebench_core::report::{Outcome, ProxyResults, Report, Results};

use self::collect::Collector;
use crate::addr::Proto;
use crate::ctx::Ctx;
use crate::shutdown::Shutdown;

/// The last stretch before a due time is spun, not slept: `ppoll` wakes up to the timer
/// slack (50 us by default) late.
pub(crate) const SPIN_NS: u64 = 200_000;
/// `--spin` busy-polls until traffic has stopped this long.
pub(crate) const SPIN_IDLE_NS: u64 = 50_000_000;

/// Flows opened and refused, shared by the forwarding threads (touched once per flow), and
/// the bytes TCP pumps hold (the UDP loop keeps its own count).
#[derive(Debug, Default)]
pub struct FlowCounts {
    opened: AtomicU64,
    failed: AtomicU64,
    first_client: OnceLock<SocketAddr>,
    /// Bytes of delayed TCP chunks held by all pumps together (against `--max-held`).
    pub(crate) tcp_held: AtomicUsize,
}

impl FlowCounts {
    fn opened(&self, client: SocketAddr) {
        let _ = self.first_client.set(client);
        self.opened.fetch_add(1, Ordering::Relaxed);
    }
    fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The generators' seeds of flow `index` (0 for UDP's single loop): up and down differ,
/// and every TCP connection gets its own pair.
pub(crate) fn seeds(seed: u64, index: u64) -> (u64, u64) {
    let mut g = wirebench_core::rng::SplitMix64::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (g.next_u64(), g.next_u64())
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    cfg: Config,
    addr: SocketAddr,
    counts: Arc<FlowCounts>,
    collector: Collector,
    shutdown: Shutdown,
    threads: Vec<JoinHandle<()>>,
    t0: Instant,
}

impl Proxy {
    /// Binds (errors here are the user's to fix) and starts forwarding.
    pub fn start(cfg: &Config) -> anyhow::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let counts = Arc::new(FlowCounts::default());
        let shutdown = Shutdown::new();
        let (addr, thread) = match cfg.proto {
            // STAMP is UDP on the wire.
            Proto::Udp | Proto::Stamp => {
                let sock = UdpSocket::bind(cfg.listen).with_context(|| format!("cannot bind udp {}", cfg.listen))?;
                let addr = sock.local_addr()?;
                let engine = udp::Engine::new(cfg, sock, counts.clone(), tx, shutdown.clone())?;
                (addr, std::thread::Builder::new().name("proxy-udp".into()).spawn(move || engine.run())?)
            }
            Proto::Tcp => {
                let listener =
                    TcpListener::bind(cfg.listen).with_context(|| format!("cannot bind tcp {}", cfg.listen))?;
                let addr = listener.local_addr()?;
                let acc = tcp::Acceptor {
                    listener,
                    cfg: cfg.clone(),
                    counts: counts.clone(),
                    tx,
                    shutdown: shutdown.clone(),
                };
                (addr, std::thread::Builder::new().name("proxy-tcp-accept".into()).spawn(move || acc.run())?)
            }
        };
        Ok(Self {
            cfg: cfg.clone(),
            addr,
            counts,
            collector: Collector::new(rx),
            shutdown,
            threads: vec![thread],
            t0: Instant::now(),
        })
    }

    /// The bound address (the real port when the config asked for port 0).
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Time since the start, ns.
    fn elapsed_ns(&self) -> u64 {
        nanos(self.t0.elapsed())
    }

    /// Stops forwarding and returns the results (the last partial interval included when
    /// any interval was closed before).
    pub fn stop(mut self) -> ProxyResults {
        self.shutdown.trigger();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.collector.drain();
        if !self.collector.intervals.is_empty() && !self.collector.interval_is_empty() {
            let now = self.elapsed_ns();
            self.collector.close_interval(now);
        }
        self.results()
    }

    fn results(&self) -> ProxyResults {
        let (up, down) = self.collector.directions(&self.cfg.up, &self.cfg.down);
        ProxyResults {
            proto: self.cfg.proto.name().into(),
            listen: self.addr.to_string(),
            upstream: self.cfg.upstream.to_string(),
            flows: self.counts.opened.load(Ordering::Relaxed),
            first_client: self.counts.first_client.get().map(ToString::to_string),
            flows_failed: self.counts.failed.load(Ordering::Relaxed),
            up,
            down,
            intervals: self.collector.intervals.clone(),
        }
    }
}

/// A seed nobody chose: 64 bits from the OS RNG (the run's session id source).
fn random_seed() -> u64 {
    crate::ctx::session_id()
}

/// The report of a finished (or stopped) proxy run.
pub fn report(cfg: &Config, results: ProxyResults, argv: &[String], started: SystemTime, outcome: Outcome) -> Report {
    let duration_ns = u64::try_from(started.elapsed().map_or(0, |d| d.as_nanos())).unwrap_or(u64::MAX);
    // The interfaces the traffic crossed: toward the upstream, and toward the first client.
    let client = results.first_client.as_deref().and_then(|c| c.parse::<SocketAddr>().ok());
    let peers: Vec<SocketAddr> = std::iter::once(cfg.upstream).chain(client).collect();
    Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta_towards(argv, started, duration_ns, &peers),
        config: serde_json::to_value(cfg).unwrap_or_default(),
        outcome,
        results: Results::Proxy(results),
        attribution: None,
    }
}

/// `wirebench proxy`: forward until `--duration` or Ctrl-C, printing requested vs achieved
/// each interval; then print the totals and save the report.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let cfg = Config::from_args(args, random_seed())?;
    let started = SystemTime::now();
    let mut proxy = Proxy::start(&cfg)?;
    let meter = crate::stall::Meter::start(&args.hiccup)?;
    let detail = wirebench_report::screen::Detail::of(cfg.quiet, cfg.verbose);
    if !cfg.quiet {
        writeln!(
            ctx.out,
            "wirebench proxy: {} {} -> {} (seed {}{}; Ctrl-C to stop)",
            cfg.proto.name(),
            proxy.local_addr(),
            cfg.upstream,
            cfg.seed,
            if cfg.spin { ", busy-poll" } else { "" }
        )?;
        let (up, down) = (collect::requested(&cfg.up), collect::requested(&cfg.down));
        wirebench_report::text::proxy::requested_lines(ctx.out, &up, &down)?;
    }
    ctx.out.flush()?;
    let deadline = cfg.duration.map(|d| Instant::now() + d);
    let mut next_tick = Instant::now() + cfg.interval;
    let mut outcome = Outcome::Completed;
    loop {
        if ctx.shutdown.is_set() {
            outcome = Outcome::Interrupted;
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if now >= next_tick {
            let t = proxy.elapsed_ns();
            let iv = proxy.collector.close_interval(t);
            wirebench_report::text::proxy::interval_at(ctx.out, iv, detail)?;
            ctx.out.flush()?;
            next_tick += cfg.interval;
        }
        let wake = deadline.map_or(next_tick, |d| d.min(next_tick));
        proxy
            .collector
            .pump(wake.saturating_duration_since(now).min(crate::shutdown::POLL).max(Duration::from_millis(1)));
    }
    let results = proxy.stop();
    let mut report = report(&cfg, results, &ctx.argv, started, outcome);
    crate::stall::attach(&mut report, meter);
    wirebench_report::render_text(&report, ctx.out, detail, false)?;
    wirebench_report::attribution::text_at(ctx.out, &report, detail)?;
    if let Some(path) = &cfg.json {
        crate::output::write_json(path, &report)?;
    }
    Ok(report)
}
