//! `wirebench listen`: a standalone receiver, as Coherence's DatagramTest listener. It
//! accounts every publisher that sends it stream messages (keyed by source address, session
//! and publisher index) and prints DatagramTest's "Now" (since the last report) and
//! "Lifetime" blocks per publisher; `--log` writes the same columns as TSV.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use socket2::{Domain, Protocol, Socket, Type};
use wirebench_core::report::{Outcome, ReceiverResult, Report, Results, StreamResults};
use wirebench_core::stream::{StreamCounts, StreamRx};
use wirebench_core::units::Span;
use wirebench_core::wire::stream;
use wirebench_net::batch::{Batch, SLOT, SLOTS, UdpBatchReceiver, size_buffers};
use wirebench_net::clock::{Clock, MonoClock};

use crate::Ctx;
use crate::error::UsageError;
use crate::flow::STREAM_BUFFER;

/// `wirebench listen` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address to receive on.
    #[arg(long, default_value = "0.0.0.0:7879", env = "WIREBENCH_LISTEN")]
    pub listen: String,
    /// Join this multicast group (its port must be the listen port); repeatable.
    #[arg(long = "join", value_name = "GROUP:PORT")]
    pub join: Vec<SocketAddrV4>,
    /// Interface (name or IPv4 address) for the joins.
    #[arg(long, env = "WIREBENCH_INTERFACE")]
    pub interface: Option<String>,
    /// Report every this many messages (per publisher) instead of every interval.
    #[arg(long)]
    pub report_every: Option<u64>,
    /// Report interval.
    #[arg(long, default_value = "1s")]
    pub interval: Span,
    /// Stop after this long.
    #[arg(long, short = 'd')]
    pub duration: Option<Span>,
    /// Stop after this many messages in total.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Write every report as a TSV row.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write the JSON report at the end.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::hiccup::HiccupArgs,
}

type Key = (SocketAddr, u64, u16);

struct Publisher {
    key: Key,
    rx: StreamRx,
    at_last_report: StreamCounts,
    last_report_ns: u64,
    size: usize,
}

fn bind(a: &Args) -> anyhow::Result<UdpSocket> {
    let addr = crate::ping::resolve(&a.listen)?;
    if let Some(g) = a.join.iter().find(|g| !g.ip().is_multicast() || g.port() != addr.port()) {
        return Err(UsageError(format!("--join {g}: a multicast group on the listen port {}", addr.port())).into());
    }
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into()).with_context(|| format!("cannot bind {addr}"))?;
    let sock: UdpSocket = s.into();
    let iface =
        a.interface.as_deref().map(wirebench_net::iface::ipv4_of).transpose().map_err(|e| UsageError(e.to_string()))?;
    for g in &a.join {
        wirebench_net::multicast::join(&sock, *g, iface)?;
    }
    Ok(sock)
}

/// `wirebench listen`: receive until Ctrl-C, `--duration` or `--count`.
pub fn run(a: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    if a.report_every == Some(0) {
        return Err(UsageError("--report-every must be at least 1".into()).into());
    }
    let sock = bind(a)?;
    let (granted, _) = size_buffers(&sock, STREAM_BUFFER);
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    writeln!(ctx.out, "wirebench listen: receiving on {} (Ctrl-C to stop)", sock.local_addr()?)?;
    if granted.capped() {
        writeln!(
            ctx.out,
            "warning: receive buffer capped at {} bytes: sysctl -w net.core.rmem_max={}",
            granted.granted, granted.asked
        )?;
    }
    let mut log = match &a.log {
        Some(p) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
            );
            writeln!(
                f,
                "time_s\tpublisher\tblock\telapsed_ms\tsize\tmb_per_s\tpackets_per_s\treceived\texpected\tmissing\tsuccess_rate\tout_of_order\tavg_offset"
            )?;
            Some(f)
        }
        None => None,
    };
    let meter = crate::hiccup::Meter::start(&a.hiccup)?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    let clock = MonoClock::default();
    let start_ns = clock.now_ns();
    let mut rx = UdpBatchReceiver::new(sock);
    let mut buf = vec![0u8; SLOTS * SLOT];
    let mut slots = [Batch { len: 0, seg: 1, from: None }; SLOTS];
    let mut pubs: Vec<Publisher> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut foreign = 0u64;
    let interval_ns = u64::try_from(a.interval.0.as_nanos()).unwrap_or(u64::MAX);
    let mut next_report = start_ns + interval_ns;
    let mut total = 0u64;
    loop {
        let now = clock.now_ns();
        let over = ctx.shutdown.is_set()
            || a.duration.is_some_and(|d| t0.elapsed() >= d.0)
            || a.count.is_some_and(|n| total >= n);
        if over {
            break;
        }
        let filled = rx.recv_many(&mut buf, &mut slots)?;
        for (k, b) in slots[..filled].iter().enumerate() {
            let from = b.from.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            for m in buf[k * SLOT..k * SLOT + b.len].chunks(b.seg) {
                let Ok(h) = stream::parse_datagram(m) else {
                    foreign += 1;
                    continue;
                };
                let key = (from, h.session, h.publisher);
                let i = *index.entry(key).or_insert_with(|| {
                    pubs.push(Publisher {
                        key,
                        rx: StreamRx::new(),
                        at_last_report: StreamCounts::default(),
                        last_report_ns: now,
                        size: m.len(),
                    });
                    pubs.len() - 1
                });
                let p = &mut pubs[i];
                p.rx.on_datagram(h.seq, m.len(), h.sent_ns, now);
                total += 1;
                if let Some(every) = a.report_every
                    && p.rx.counts().received.is_multiple_of(every)
                {
                    report(ctx.out, log.as_mut(), p, start_ns, now);
                }
            }
        }
        if a.report_every.is_none() && now >= next_report {
            for p in &mut pubs {
                report(ctx.out, log.as_mut(), p, start_ns, now);
            }
            next_report = now + interval_ns;
        }
    }
    let now = clock.now_ns();
    for p in &mut pubs {
        report(ctx.out, log.as_mut(), p, start_ns, now);
    }
    if let Some(f) = log.as_mut() {
        f.flush()?;
    }
    if foreign > 0 {
        writeln!(ctx.out, "ignored {foreign} datagrams that were not stream messages")?;
    }
    let receivers = pubs
        .iter()
        .map(|p| ReceiverResult {
            addr: format!("{} session {:016x} publisher {}", p.key.0, p.key.1, p.key.2),
            direction: "listen".into(),
            sent: p.rx.counts().expected,
            total: *p.rx.counts(),
            publishers: vec![*p.rx.counts()],
            intervals: Vec::new(),
        })
        .collect();
    let report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        config: serde_json::json!({ "listen": a.listen, "join": a.join, "interval_ns": interval_ns }),
        outcome: if ctx.shutdown.is_set() { Outcome::Interrupted } else { Outcome::Completed },
        results: Results::Stream(StreamResults {
            proto: "udp".into(),
            direction: "listen".into(),
            size: pubs.first().map_or(0, |p| p.size),
            publishers: u16::try_from(pubs.len()).unwrap_or(u16::MAX),
            rate_per_s: None,
            sender: None,
            receivers,
            search: None,
            sweep: Vec::new(),
            warnings: Vec::new(),
        }),
        attribution: crate::hiccup::attribution(meter),
    };
    wirebench_report::attribution::text(ctx.out, &report)?;
    if let Some(p) = &a.json {
        crate::output::write_json(p, &report)?;
    }
    Ok(report)
}

/// Prints the Now and Lifetime blocks of one publisher, and their TSV rows.
fn report(
    out: &mut dyn Write,
    log: Option<&mut std::io::BufWriter<std::fs::File>>,
    p: &mut Publisher,
    start_ns: u64,
    now: u64,
) {
    let life = *p.rx.counts();
    let now_c = life.since(&p.at_last_report);
    let now_span = now.saturating_sub(p.last_report_ns);
    let life_span = life.span_ns();
    let name = format!("{} (session {:016x}, publisher {})", p.key.0, p.key.1, p.key.2);
    let mut rows = Vec::new();
    for (block, c, span) in [("Now", &now_c, now_span), ("Lifetime", &life, life_span)] {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let mb = c.bytes as f64 / 1e6 / (span as f64 / 1e9).max(1e-9);
        let _ = writeln!(
            out,
            "{block}:\nRx from publisher: {name}\n             elapsed: {}ms\n         packet size: {} bytes\n          throughput: {:.1} MB/sec\n                      {:.0} packets/sec\n            received: {} of {}\n             missing: {}\n        success rate: {:.6}\n        out of order: {}\n          avg offset: {:.1}",
            span / 1_000_000,
            p.size,
            mb,
            c.per_sec(span),
            c.received,
            c.expected,
            c.missing(),
            c.success_rate(),
            c.out_of_order,
            c.avg_offset()
        );
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let t = now.saturating_sub(start_ns) as f64 / 1e9;
        rows.push(format!(
            "{t:.3}\t{name}\t{block}\t{}\t{}\t{mb:.3}\t{:.0}\t{}\t{}\t{}\t{:.6}\t{}\t{:.2}",
            span / 1_000_000,
            p.size,
            c.per_sec(span),
            c.received,
            c.expected,
            c.missing(),
            c.success_rate(),
            c.out_of_order,
            c.avg_offset()
        ));
    }
    if let Some(f) = log {
        for r in rows {
            let _ = writeln!(f, "{r}");
        }
    }
    p.at_last_report = life;
    p.last_report_ns = now;
}
