//! `wirebench listen`: a standalone receiver, as Coherence's DatagramTest listener. It
//! accounts every publisher that sends it stream messages (keyed by source address, session
//! and publisher index) and prints DatagramTest's "Now" (since the last report) and
//! "Lifetime" blocks per publisher, gaps included; `--log` writes the same columns as TSV.
//!
//! Time base: this listener's own clock. "Now" covers the time since the last report;
//! "Lifetime" the publisher's first to last arrival (DatagramTest's "elapsed"). No sender
//! clock is known here, so a publisher whose datagrams mostly never arrived shows the rate
//! of those that did.
//!
//! Budget (it takes anyone's datagrams): at most `--max-publishers` tracked at once (each a
//! sequence window of 128 bytes growing with its own arrivals to 128 KiB); a publisher
//! silent for `--idle-expiry` is reported one last time and forgotten; datagrams of new
//! publishers while the table is full are refused and counted. See docs/security.md.

mod print;

use std::io::Write;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
use wirebench_core::units::nanos;

use anyhow::Context as _;
use socket2::{Domain, Protocol, Socket, Type};
use wirebench_core::counters::{LossSplit, RunSizes, Snapshot};
use wirebench_core::report::{
    Attribution, ListenTotals, Outcome, ReceiverResult, Report, Results, StreamDirection, StreamResults, Transport,
};
use wirebench_core::stream::StreamCounts;
use wirebench_core::stream::table::{Budget, Table};
use wirebench_core::stream::wake::WakeRecorder;
use wirebench_core::units::{Count, Span};
use wirebench_core::wire::stream;
use wirebench_net::batch::{Batch, SLOT, SLOTS, UdpBatchReceiver, size_buffers};
use wirebench_net::clock::{Clock, MonoClock, wall_now_ns};
use wirebench_report::screen::Detail;

use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::flow::STREAM_BUFFER;

/// Publishers tracked at once by default.
pub const DEFAULT_MAX_PUBLISHERS: usize = 256;

/// `wirebench listen` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("json", |a| a.help("Write the JSON report at the end")),
    mut_arg("quiet", |a| a.help("Print only each publisher's lifetime line at the end")),
    mut_arg("verbose", |a| a.help("Print DatagramTest's full Now and Lifetime blocks, and the receiver's wake-up times and every kernel counter at the end"))
)]
pub struct Args {
    /// Address to receive on.
    #[arg(long, default_value = "0.0.0.0:7879", env = "WIREBENCH_LISTEN")]
    pub listen: String,
    /// Join this multicast group (its port must be the listen port); repeatable.
    #[arg(long = "join", value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub join: Vec<SocketAddrV4>,
    /// The interface for the joins.
    #[command(flatten)]
    pub interface: crate::flags::InterfaceArg,
    /// Receive buffer to ask for, e.g. 4k: to see what a smaller buffer loses [default: 16MiB].
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<wirebench_core::units::ByteSize>,
    /// Report every this many messages (per publisher) instead of every interval.
    #[arg(long)]
    pub report_every: Option<Count>,
    /// Report interval, at least 100ms [default: 1s; a --duration of more than ten seconds
    /// reports each tenth of it, -v each second].
    #[arg(long)]
    pub interval: Option<Span>,
    /// Stop after this long.
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time")]
    pub duration: Option<Span>,
    /// Stop after this many messages in total.
    #[arg(long, short = 'n')]
    pub count: Option<Count>,
    /// Publishers tracked at once; datagrams of more are refused and counted.
    #[arg(long, default_value_t = Count(DEFAULT_MAX_PUBLISHERS as u64))]
    pub max_publishers: Count,
    /// Forget a publisher silent this long (after a last report).
    #[arg(long, default_value = "30s")]
    pub idle_expiry: Span,
    /// Write every report as a TSV row.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
    /// Share the port with other sockets that ask for it too (SO_REUSEADDR and
    /// SO_REUSEPORT): several receivers of one group on one host, or one beside a relay.
    /// Without it a port another socket holds is refused.
    #[arg(long)]
    pub reuse_port: bool,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::stall::HiccupArgs,
}

/// A publisher: who sent it, its session and its index.
pub(crate) type Key = (SocketAddr, u64, u16);

fn bind(a: &Args) -> anyhow::Result<UdpSocket> {
    let addr = crate::addr::resolve(&a.listen)?;
    if let Some(g) = a.join.iter().find(|g| !g.ip().is_multicast() || g.port() != addr.port()) {
        return Err(UsageError(format!("--join {g}: a multicast group on the listen port {}", addr.port())).into());
    }
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Only when asked: a second receiver sharing a unicast port silently takes the
    // datagrams meant for the first, which then hears nothing.
    if a.reuse_port {
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
    }
    s.bind(&addr.into()).map_err(|e| bind_error(addr, &e))?;
    let sock: UdpSocket = s.into();
    let iface = a.interface.ipv4()?;
    for g in &a.join {
        wirebench_net::multicast::join(&sock, *g, iface)?;
    }
    Ok(sock)
}

/// One line: the port and the kernel's reason, and for a port in use what holds such
/// ports and how to share one on purpose.
fn bind_error(addr: SocketAddr, e: &std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        anyhow::anyhow!(
            "cannot bind {addr}: {e}: another socket holds that port (another listen, a serve, a relay of a group on it): \
             stop it, choose another --listen port, or give --reuse-port to every receiver that should share it"
        )
    } else {
        anyhow::anyhow!("cannot bind {addr}: {e}")
    }
}

/// The report interval: `--interval`, else a second, or a tenth of a longer `--duration`
/// (so the lines of a bounded run fit a screen) unless `-v` asks for every second.
fn interval(a: &Args) -> Duration {
    let second = Duration::from_secs(1);
    match (a.interval, a.duration) {
        (Some(i), _) => i.0,
        (None, Some(d)) if !a.output.verbose => {
            second * u32::try_from(wirebench_report::screen::intervals_per_line(d.0, second)).unwrap_or(u32::MAX)
        }
        (None, _) => second,
    }
}

fn check(a: &Args) -> Result<Budget, UsageError> {
    if a.report_every == Some(Count(0)) {
        return Err(UsageError("--report-every must be at least 1".into()));
    }
    if a.interval.is_some_and(|i| i.0 < Duration::from_millis(100)) {
        return Err(UsageError("--interval must be at least 100ms".into()));
    }
    if a.duration.is_some_and(|d| d.0.is_zero()) {
        return Err(UsageError("--duration must be above 0".into()));
    }
    if a.count == Some(Count(0)) {
        return Err(UsageError("--count must be at least 1".into()));
    }
    if !(1..=65_536).contains(&a.max_publishers.0) {
        return Err(UsageError("--max-publishers must be 1..=65536".into()));
    }
    if a.rcvbuf.is_some_and(|b| b.0 == 0 || b.0 > STREAM_BUFFER as u64) {
        return Err(UsageError(format!(
            "--rcvbuf must be 1 B..={}",
            wirebench_core::units::ByteSize(STREAM_BUFFER as u64)
        )));
    }
    if a.idle_expiry.0 < Duration::from_secs(1) {
        return Err(UsageError("--idle-expiry must be at least 1s".into()));
    }
    Ok(Budget {
        max_live: a.max_publishers.as_usize(),
        max_finished: a.max_publishers.as_usize(),
        idle_ns: nanos(a.idle_expiry.0),
    })
}

/// Sizes the socket's receive buffer and times its reads; says where it listens, and a
/// receive buffer the kernel capped.
fn say_ready(a: &Args, ctx: &mut Ctx<'_>, sock: &UdpSocket, local: SocketAddr) -> anyhow::Result<()> {
    let asked = a.rcvbuf.map_or(STREAM_BUFFER, |b| usize::try_from(b.0).unwrap_or(STREAM_BUFFER));
    let (granted, _) = size_buffers(sock, asked);
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    if !a.output.quiet {
        writeln!(ctx.out, "wirebench listen: receiving on {local} (Ctrl-C to stop)")?;
    }
    if granted.capped() {
        writeln!(
            ctx.out,
            "warning: receive buffer capped at {} bytes: sysctl -w net.core.rmem_max={}",
            granted.granted, granted.asked
        )?;
    }
    Ok(())
}

/// The totals (unless `-q`), and with `-v` the receiver's wake-up delay.
fn say_totals(a: &Args, ctx: &mut Ctx<'_>, totals: &ListenTotals) -> std::io::Result<()> {
    if !a.output.quiet {
        wirebench_report::text::listen::totals(ctx.out, totals, a.max_publishers.as_usize())?;
    }
    if let Some(w) = totals.wake.as_ref().filter(|_| a.output.detail().verbose()) {
        writeln!(ctx.out, "{}", wirebench_report::stream_wake::words("listen", w))?;
    }
    Ok(())
}

/// Says when nothing was heard, then where the loss went.
fn say_attribution(ctx: &mut Ctx<'_>, report: &Report, detail: Detail) -> std::io::Result<()> {
    if let Some(line) = wirebench_report::text::stream::listen_nothing_line(report) {
        writeln!(ctx.out, "{line}")?;
    }
    wirebench_report::attribution::text_at(ctx.out, report, detail)
}

/// A log file for `--log`, with its header written.
fn open_log(a: &Args) -> anyhow::Result<Option<std::io::BufWriter<std::fs::File>>> {
    let Some(p) = &a.log else { return Ok(None) };
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?);
    print::tsv_header(&mut f)?;
    Ok(Some(f))
}

/// What the listener has taken in: the publishers' table, the datagrams that were not a
/// stream's, and the stream datagrams counted.
struct Received {
    table: Table<Key>,
    foreign: u64,
    total: u64,
}

impl Received {
    /// An interval's end: a line per publisher heard in it (unless `--report-every`), and
    /// the publishers idle past `--idle-expiry` retired with their lifetime line.
    fn on_interval(&mut self, a: &Args, printer: &mut print::Printer<'_>, now: u64) -> std::io::Result<()> {
        if a.report_every.is_none() {
            printer.round(self.table.live_mut(), now);
        }
        let idle = a.idle_expiry;
        self.table.expire(now, |e| printer.report(e, now, Some(idle)));
        printer.out.flush()
    }

    /// Every publisher's lifetime counts, and the listener's totals.
    fn finish(self, wake: &WakeRecorder) -> (Vec<(Key, StreamCounts, usize)>, ListenTotals) {
        let (done, tally) = self.table.into_results();
        let totals = ListenTotals {
            publishers_seen: tally.seen,
            expired: tally.expired,
            not_kept: tally.not_kept,
            refused_datagrams: tally.refused,
            foreign: self.foreign,
            wake: Some(wake.summary()),
        };
        (done, totals)
    }

    /// The datagrams `msgs` of one read (a GRO run is several) from `from`, read at `now`;
    /// with `--report-every N` a publisher's line every N of its messages.
    fn on_datagrams<'m>(
        &mut self,
        from: SocketAddr,
        msgs: impl Iterator<Item = &'m [u8]>,
        now: u64,
        report_every: Option<Count>,
        printer: &mut print::Printer<'_>,
    ) -> std::io::Result<()> {
        for m in msgs {
            let Ok(h) = stream::parse_datagram(m) else {
                self.foreign += 1;
                continue;
            };
            let Some(i) = self.table.on_datagram((from, h.session, h.publisher), h.seq, m.len(), h.sent_ns, now) else {
                continue;
            };
            self.total += 1;
            if let Some(Count(every)) = report_every {
                let e = &mut self.table.live_mut()[i];
                if e.rx.counts().received.is_multiple_of(every) {
                    printer.report(e, now, None);
                    printer.out.flush()?;
                }
            }
        }
        Ok(())
    }
}

/// The listen report (attribution still to come): a receiver row per publisher.
fn report_of(
    a: &Args,
    ctx: &Ctx<'_>,
    done: &[(Key, StreamCounts, usize)],
    totals: ListenTotals,
    (interval_ns, idle_ns): (u64, u64),
    started: SystemTime,
    elapsed_ns: u64,
) -> Report {
    let receivers = done
        .iter()
        .map(|(key, c, _)| ReceiverResult {
            addr: format!("{} session {:016x} publisher {}", key.0, key.1, key.2),
            direction: StreamDirection::Listen,
            sent: c.expected,
            total: *c,
            publishers: vec![*c],
            intervals: Vec::new(),
            send_ns: 0,
            recv_ns: 0,
            foreign: 0,
            kernel: None,
            loss_split: None,
            wake: None,
        })
        .collect();
    Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, elapsed_ns),
        config: serde_json::json!({
            "listen": a.listen, "join": a.join, "interval_ns": interval_ns,
            "max_publishers": a.max_publishers.0, "idle_expiry_ns": idle_ns,
        }),
        outcome: if ctx.shutdown.is_set() { Outcome::Interrupted } else { Outcome::Completed },
        results: Results::Stream(StreamResults {
            proto: Transport::Udp,
            direction: StreamDirection::Listen,
            size: done.first().map_or(0, |d| d.2),
            publishers: u16::try_from(done.len()).unwrap_or(u16::MAX),
            rate_per_s: None,
            sender: None,
            receivers,
            search: None,
            sweep: Vec::new(),
            warnings: Vec::new(),
            listen: Some(totals),
            generator: None,
        }),
        attribution: None,
    }
}

/// `wirebench listen`: receive until Ctrl-C, `--duration` or `--count`. A run at which
/// nothing arrived says so (the caller exits 1: `wirebench_core::report::receivers_failed`).
pub fn run(a: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    let budget = check(a)?;
    let sock = bind(a)?;
    let local = sock.local_addr()?;
    // Before the line that tells a sender to start: every drop of the run is after it.
    let ifaces = wirebench_net::iface::receiving(local.ip());
    let kernel_before = wirebench_net::counters::snapshot(&ifaces);
    say_ready(a, ctx, &sock, local)?;
    let mut log = open_log(a)?;
    let meter = crate::stall::Meter::start(&a.hiccup)?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    let clock = MonoClock::default();
    let start_ns = clock.now_ns();
    let mut rx = UdpBatchReceiver::new(sock);
    let mut wake = WakeRecorder::new(crate::flow::recv::stamp_rx(&mut rx));
    let mut buf = vec![0u8; SLOTS * SLOT];
    let mut slots = [Batch::EMPTY; SLOTS];
    let mut rx_state = Received { table: Table::new(budget), foreign: 0, total: 0 };
    let interval_ns = nanos(interval(a));
    let mut next_report = start_ns + interval_ns;
    let detail = a.output.detail();
    let log_to = log.as_mut().map(|f| f as &mut dyn Write);
    // Lines go out a buffer at a time, flushed after each burst: a round of thousands of
    // publishers is a few writes, not a write per line (35,000 publishers took 2 s to stop).
    let mut screen = std::io::BufWriter::with_capacity(64 << 10, &mut *ctx.out);
    let mut printer = print::Printer { out: &mut screen, log: log_to, start_ns, local, detail, closing: false };
    loop {
        let over = ctx.shutdown.is_set()
            || a.duration.is_some_and(|d| t0.elapsed() >= d.0)
            || a.count.is_some_and(|n| rx_state.total >= n.0);
        if over {
            break;
        }
        let filled = rx.recv_many(&mut buf, &mut slots)?;
        let now = clock.now_ns();
        // the application's receive time on the kernel stamps' clock (CLOCK_REALTIME)
        let read_ns = if filled > 0 { wall_now_ns() } else { 0 };
        for (k, b) in slots[..filled].iter().enumerate() {
            wake.record(read_ns, b.rx_ns, b.len.div_ceil(b.seg) as u64);
            let from = b.from.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            rx_state.on_datagrams(
                from,
                buf[k * SLOT..k * SLOT + b.len].chunks(b.seg),
                now,
                a.report_every,
                &mut printer,
            )?;
        }
        if now >= next_report {
            rx_state.on_interval(a, &mut printer, now)?;
            next_report = now + interval_ns;
        }
    }
    let now = clock.now_ns();
    let kernel_after = wirebench_net::counters::snapshot(&ifaces);
    printer.closing = true;
    printer.round(rx_state.table.live_mut(), now);
    printer.out.flush()?;
    drop(screen);
    if let Some(f) = log.as_mut() {
        f.flush()?;
    }
    let (done, totals) = rx_state.finish(&wake);
    let runs = totals.wake.as_ref().and_then(RunSizes::of);
    say_totals(a, ctx, &totals)?;
    let elapsed_ns = nanos(t0.elapsed());
    let report = report_of(a, ctx, &done, totals, (interval_ns, budget.idle_ns), started, elapsed_ns);
    let missing = done.iter().map(|(_, c, _)| c.expected.saturating_sub(c.received)).sum();
    let mut attribution = crate::stall::attribution(meter).unwrap_or_default();
    kernel_attribution(&mut attribution, &kernel_before, &kernel_after, missing, runs);
    let report = Report { attribution: Some(attribution), ..report };
    say_attribution(ctx, &report, detail)?;
    if let Some(path) = &a.output.json {
        crate::output::write_json(path, &report)?;
    }
    Ok(report)
}

/// This host's counters across the run, and the publishers' missing datagrams split by
/// them. listen sends nothing and knows no sender: its host's `SndbufErrors` are not this
/// run's, so the split starts at the sockets (`InErrors`), then the NIC and softnet. The
/// socket counts a refused GRO run once: its count is taken in datagrams by the runs this
/// receiver read (`runs`), as stream's split does, with the range that leaves.
fn kernel_attribution(
    into: &mut Attribution,
    before: &Snapshot,
    after: &Snapshot,
    missing: u64,
    runs: Option<RunSizes>,
) {
    let counters = before.delta(after);
    let udp = counters.udp_total().unwrap_or_default();
    let socket = runs.map_or(udp.in_errors, |z| z.datagrams(udp.in_errors));
    let mut split = LossSplit::of(missing, 0, socket, counters.nic_drops());
    if let Some(z) = runs {
        split = split.with_socket_range(z.range(udp.in_errors));
    }
    into.loss = Some(split);
    into.notes.extend(counters.missing.iter().map(|m| format!("counter unavailable: {m}")));
    into.counters = Some(counters);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Budget, String> {
        let a: Args = crate::flags::parse_mode("listen", v).map_err(|e| e.to_string())?;
        check(&a).map_err(|e| e.0)
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        for (v, want) in [
            (&["--interval", "0s"][..], "--interval must be at least 100ms"),
            (&["--duration", "0s"][..], "--duration must be above 0"),
            (&["--report-every", "0"][..], "--report-every"),
            (&["--count", "0"][..], "--count"),
            (&["--max-publishers", "0"][..], "--max-publishers"),
            (&["--idle-expiry", "10ms"][..], "--idle-expiry"),
        ] {
            let e = args(v).expect_err(want);
            assert!(e.contains(want), "{v:?}: {e}");
        }
        let b = args(&[]).unwrap();
        assert_eq!((b.max_live, b.idle_ns), (DEFAULT_MAX_PUBLISHERS, 30_000_000_000));
    }

    #[test]
    fn a_long_bounded_run_reports_each_tenth_of_it() {
        let every = |v: &[&str]| interval(&crate::flags::parse_mode::<Args>("listen", v).unwrap()).as_millis();
        assert_eq!(every(&[]), 1000, "until stopped: each second");
        assert_eq!(every(&["--duration", "10s"]), 1000);
        assert_eq!(every(&["--duration", "60s"]), 6000);
        assert_eq!(every(&["--duration", "60s", "-v"]), 1000, "-v: each second");
        assert_eq!(every(&["--duration", "60s", "--interval", "500ms"]), 500, "as asked");
    }
}
