//! A UDP stream run: forward (senders here, receivers in each serve), reverse (serve sends
//! to this client's socket) or both.

use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wirebench_core::counters::{self, Reading};
use wirebench_core::report::{ReceiverResult, SenderResult, StreamDirection};
use wirebench_core::schedule::Stop;
use wirebench_core::stream::StreamCounts;
use wirebench_core::wire::control::{Control, Direction, StreamProto, StreamRequest};
use wirebench_net::batch::{UdpBatchReceiver, UdpBatchSender, size_buffers};
use wirebench_net::clock::{Clock as _, MonoClock};
use wirebench_net::multicast::{self, SenderOpts};

use super::config::Config;
use super::session::{self, Live, RunOut, RunSpec, ServeResult};
use crate::control;
use crate::ctx::Ctx;
use crate::flow::STREAM_BUFFER;
use crate::flow::recv::{self, Accounts, Progress};
use crate::flow::send::{self, SendSpec, Sent};
use crate::shutdown::Shutdown;

type SendJob = JoinHandle<std::io::Result<Sent>>;
type RecvJob = JoinHandle<std::io::Result<Accounts>>;

fn interface(cfg: &Config) -> anyhow::Result<Option<Ipv4Addr>> {
    Ok(cfg.interface.as_deref().map(wirebench_net::iface::ipv4_of).transpose()?)
}

/// Starts the senders of one destination; returns their threads.
fn senders(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    dest: SocketAddr,
    stop: &Shutdown,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<SendJob>> {
    let iface = interface(cfg)?;
    let mut jobs = Vec::new();
    for publisher in 0..cfg.parallel {
        let bind = SocketAddr::new(iface.map_or(Ipv4Addr::UNSPECIFIED, Into::into).into(), 0);
        let sock = UdpSocket::bind(bind).with_context(|| format!("cannot bind {bind}"))?;
        let (_, snd) = size_buffers(&sock, STREAM_BUFFER);
        if snd.capped() && publisher == 0 {
            warnings.push(format!(
                "send buffer capped at {} bytes (asked {}): sysctl -w net.core.wmem_max={}",
                snd.granted, snd.asked, snd.asked
            ));
        }
        if dest.ip().is_multicast() {
            let opts = SenderOpts { interface: iface, ttl: cfg.ttl, loopback: true };
            multicast::set_sender(&sock, dest, &opts)?;
        }
        sock.connect(dest).with_context(|| format!("cannot send to {dest}"))?;
        let s = SendSpec {
            session,
            publisher,
            size: spec.size,
            rate: spec.rate,
            stop: Stop { max_count: spec.count, deadline: Some(spec.duration) },
            ignore_refused: cfg.no_control,
        };
        let (st, behind) = (stop.clone(), spec.behind);
        jobs.push(std::thread::spawn(move || {
            send::run_paced(&mut UdpBatchSender::new(sock, s.size), &s, st.flag(), behind)
        }));
    }
    Ok(jobs)
}

/// A local receiver for reverse data; returns a clone of its socket (to knock from) and its thread.
fn receiver(
    session: u64,
    rcvbuf: Option<usize>,
    publishers: u16,
    p: &Arc<Progress>,
    abort: &Shutdown,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(UdpSocket, RecvJob)> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let (rcv, _) = size_buffers(&sock, rcvbuf.unwrap_or(STREAM_BUFFER));
    if rcv.capped() {
        warnings.push(format!(
            "receive buffer capped at {} bytes (asked {}): sysctl -w net.core.rmem_max={}",
            rcv.granted, rcv.asked, rcv.asked
        ));
    }
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let knock = sock.try_clone()?;
    let (p, a) = (p.clone(), abort.clone());
    // GRO on before serve is told the port: datagrams queued before it would be split.
    let mut rx = UdpBatchReceiver::new(sock);
    let stamped = recv::stamp_rx(&mut rx);
    let job = std::thread::spawn(move || {
        let mut acc = Accounts::new(session, publishers);
        acc.wake = wirebench_core::stream::wake::WakeRecorder::new(stamped);
        recv::udp(&mut rx, &mut acc, &p, a.flag())?;
        Ok(acc)
    });
    Ok((knock, job))
}

/// A receiver of reverse data on this client.
struct Local {
    progress: Arc<Progress>,
    job: RecvJob,
    snaps: Vec<(u64, StreamCounts)>,
    /// This host's counters at each snapshot (`wirebench_core::counters::reading`).
    reads: Vec<Reading>,
}

/// Waits until every local receiver heard its serve (a polite run), the stop, or `wait`.
fn wait_heard(locals: &[Local], wait: Duration, stop: &Shutdown) -> bool {
    let t = Instant::now();
    loop {
        if locals.iter().all(|l| l.progress.heard.load(Ordering::Relaxed)) {
            return true;
        }
        if stop.is_set() || t.elapsed() >= wait {
            return false;
        }
        std::thread::park_timeout(Duration::from_millis(1));
    }
}

/// Runs one UDP stream against every target in `cfg`. Interval times count from the start
/// of sending on this client's clock; rates count over the sending time.
pub(super) fn run(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    ctx: &mut Ctx<'_>,
    live: &Live,
) -> anyhow::Result<RunOut> {
    let mut out = RunOut::default();
    let stop = ctx.shutdown.child();
    let forward = cfg.direction != Direction::Reverse;
    let reverse = cfg.direction != Direction::Forward;
    let (tx, events) = session::channel();
    let mut writers: Vec<TcpStream> = Vec::new();
    let mut locals: Vec<Local> = Vec::new();
    let mut dests: Vec<(usize, SocketAddr)> = Vec::new();
    let mut ready_at: Vec<Instant> = Vec::new();
    // This host's counters across the run: its receivers' drops (reverse) and its
    // senders' SndbufErrors (forward), with the interface toward the first target.
    // A group's interface is the one `--interface` names (a group may have no route).
    let ifaces = match (cfg.group, interface(cfg)?) {
        (Some(_), Some(ip)) => wirebench_net::iface::receiving(ip.into()),
        _ => wirebench_net::iface::toward(cfg.group.map_or(cfg.targets[0], SocketAddr::V4)),
    };
    let kernel_before = wirebench_net::counters::Receiving::read(&ifaces);
    // and its drops after the send (SndbufErrors, its egress qdiscs') at each of serve's intervals
    let sender_now = || {
        let k = kernel_before.since(&wirebench_net::counters::Receiving::read(&ifaces))?;
        counters::sender_drops(&k)
    };
    for (i, &target) in cfg.targets.iter().enumerate() {
        let mut knock_from = None;
        if reverse {
            let p = Arc::new(Progress::default());
            let (sock, job) = receiver(session, cfg.rcvbuf, cfg.parallel, &p, &stop, &mut out.warnings)?;
            knock_from = Some(sock);
            locals.push(Local { progress: p, job, snaps: Vec::new(), reads: Vec::new() });
        }
        let req = StreamRequest {
            session,
            token: cfg.token.clone(),
            proto: StreamProto::Udp,
            size: spec.size,
            direction: cfg.direction,
            publishers: cfg.parallel,
            rate_per_s: spec.rate,
            duration_ns: u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX),
            count: spec.count,
            client_port: None,
            group: cfg.group,
            rcvbuf: cfg.rcvbuf,
        };
        let (conn, data_port, rcvbuf) =
            session::start(target, &req, knock_from.as_ref(), &mut out.warnings, &ctx.shutdown)?;
        ready_at.push(Instant::now());
        let asked = cfg.rcvbuf.unwrap_or(STREAM_BUFFER);
        if forward && rcvbuf > 0 && rcvbuf < asked {
            out.warnings.push(format!(
                "{target}: receive buffer capped at {rcvbuf} bytes (asked {asked}): sysctl -w net.core.rmem_max={asked}"
            ));
        }
        writers.push(conn.try_clone()?);
        session::watch(i, conn, tx.clone())?;
        if forward && cfg.group.is_none() {
            dests.push((i, SocketAddr::new(target.ip(), data_port)));
        }
    }
    if let Some(g) = cfg.group {
        dests.push((usize::MAX, g.into()));
    }
    if !forward {
        // Reverse only: nothing to send here; serve answers this with its results once it
        // has sent everything.
        for w in &mut writers {
            control::send(w, &Control::Finish { sent: Vec::new() })?;
        }
    }
    if cfg.polite && forward && reverse && !wait_heard(&locals, spec.duration + HEAR_WAIT, &stop) {
        out.warnings
            .push(format!("polite: no data from serve within {:?}: this side sent nothing", spec.duration + HEAR_WAIT));
        dests.clear();
    }
    // Sending begins: the origin of every interval time (and the senders' clock then).
    let t0 = Instant::now();
    let t0_mono = MonoClock::default().now_ns();
    let mut jobs: Vec<(usize, Vec<SendJob>)> = Vec::new();
    for (i, d) in dests {
        jobs.push((i, senders(cfg, spec, session, d, &stop, &mut out.warnings)?));
    }
    // While data flows: serve's interval snapshots (forward) and our own (reverse).
    let n = cfg.targets.len();
    let mut snaps: Vec<Vec<(u64, StreamCounts)>> = vec![Vec::new(); n];
    let mut reads: Vec<Vec<Reading>> = vec![Vec::new(); n];
    let mut results: Vec<Option<ServeResult>> = vec![None; n];
    let mut next = cfg.interval;
    // A serve sends one row per interval; more than the run can have (a hostile serve) are
    // ignored and said, so memory stays bounded.
    let cap = rows_cap(spec.duration, cfg.interval);
    let mut ignored_rows = 0u64;
    let sending = |jobs: &Vec<(usize, Vec<SendJob>)>| jobs.iter().any(|(_, j)| j.iter().any(|h| !h.is_finished()));
    let reverse_deadline = spec.duration + Duration::from_secs(5);
    loop {
        let done = if forward && !jobs.is_empty() {
            !sending(&jobs)
        } else {
            results.iter().all(Option::is_some) || stop.is_set() || t0.elapsed() > reverse_deadline
        };
        if done {
            break;
        }
        if let Ok((i, at, m)) = events.recv_timeout(Duration::from_millis(20)) {
            match m {
                Control::Interval { publishers, kernel } if snaps[i].len() < cap => {
                    reads[i].push(counters::reading(sender_now(), kernel.as_ref()));
                    snaps[i].push((session::ns_since(t0, at), session::total(&session::counts_of(&publishers))));
                    live.interval(ctx.out, &cfg.targets[i].to_string(), &snaps[i]);
                }
                Control::Interval { .. } => ignored_rows += 1,
                m @ Control::Result { .. } => {
                    if forward && !jobs.is_empty() {
                        // Before our Finish: serve ended the session (it is shutting down).
                        out.peer_lost = Some(format!("{} ended the session early", cfg.targets[i]));
                        stop.trigger();
                    }
                    results[i] = ServeResult::of(m, at);
                }
                Control::Error { message } => {
                    out.peer_lost = Some(format!("{}: {message}", cfg.targets[i]));
                    stop.trigger();
                }
                _ => {}
            }
        }
        if t0.elapsed() >= next {
            let here = (!locals.is_empty())
                .then(|| kernel_before.since(&wirebench_net::counters::Receiving::read(&ifaces)))
                .flatten();
            let at = session::ns_since(t0, Instant::now());
            for (k, l) in locals.iter_mut().enumerate() {
                l.reads.push(counters::reading(None, here.as_ref()));
                let c = l.progress.snapshot.lock().map(|s| session::total(&s)).unwrap_or_default();
                l.snaps.push((at, c));
                live.interval(ctx.out, &format!("local<-{}", cfg.targets[k]), &l.snaps);
            }
            next += cfg.interval;
        }
        let got: u64 = snaps.iter().filter_map(|s| s.last()).map(|s| s.1.received).sum::<u64>()
            + locals.iter().filter_map(|l| l.snaps.last()).map(|s| s.1.received).sum::<u64>();
        live.done.store(got, Ordering::Relaxed);
    }
    // Senders done (or stopped): tell each serve what it was sent, collect the results.
    let mut sent_to: Vec<Vec<Sent>> = vec![Vec::new(); n];
    let mut all_sent: Vec<Sent> = Vec::new();
    for (i, js) in jobs {
        let s: Vec<Sent> = js
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
            .collect::<anyhow::Result<_>>()?;
        if s.iter().any(|x| x.refused) && out.peer_lost.is_none() {
            out.peer_lost = Some("a receiver's port closed mid-run (ICMP port unreachable)".into());
        }
        if i == usize::MAX {
            for v in &mut sent_to {
                v.clone_from(&s);
            }
        } else {
            sent_to[i].clone_from(&s);
        }
        all_sent.extend(s);
    }
    if forward {
        for (i, w) in writers.iter_mut().enumerate() {
            let counts = if sent_to[i].is_empty() {
                vec![0; usize::from(cfg.parallel)]
            } else {
                sent_to[i].iter().map(|x| x.messages).collect()
            };
            let _ = control::send(w, &Control::Finish { sent: counts });
        }
    }
    if out.peer_lost.is_none() {
        let owed: Vec<usize> = (0..n).filter(|&i| results[i].is_none()).collect();
        if !owed.is_empty() {
            let got = session::collect_results(&events, n, Duration::from_secs(10), |i, at, m| {
                if let Control::Interval { publishers, kernel } = m {
                    if snaps[i].len() < cap {
                        reads[i].push(counters::reading(sender_now(), kernel.as_ref()));
                        snaps[i].push((session::ns_since(t0, at), session::total(&session::counts_of(&publishers))));
                    } else {
                        ignored_rows += 1;
                    }
                }
            });
            match got {
                Ok(r) => {
                    for i in owed {
                        results[i] = Some(r[i].clone());
                    }
                }
                Err(e) => out.peer_lost = Some(e.to_string()),
            }
        }
    }
    if ignored_rows > 0 {
        out.warnings.push(format!(
            "serve sent {ignored_rows} interval rows beyond the {cap} a run of this length can have: ignored"
        ));
    }
    // Reverse: drain our receivers now that serve said what it sent.
    let mut local_rows = Vec::new();
    let mut local_accounts = Vec::new();
    for l in locals {
        let expected = results.get(local_accounts.len()).and_then(|r| r.as_ref()).map_or(0, |r| r.sent.iter().sum());
        l.progress.expected.store(expected, Ordering::Relaxed);
        l.progress.finish.store(true, Ordering::Relaxed);
        let acc = l.job.join().map_err(|_| anyhow::anyhow!("a receiver panicked"))??;
        local_accounts.push((acc, l.snaps, l.reads));
    }
    let kernel_here = kernel_before.since(&wirebench_net::counters::Receiving::read(&ifaces));
    let here = |table: &str, field: &str| {
        kernel_here.as_ref().and_then(|k| k.get(table, field)).map(|v| u64::try_from(v).unwrap_or(0))
    };
    let (sndbuf_here, qdisc_here) = (here("Udp", "SndbufErrors"), here(counters::QDISC, "Dropped"));
    let sender_here = kernel_here.as_ref().and_then(counters::sender_drops);
    for (k, (acc, mut local_snaps, local_reads)) in local_accounts.into_iter().enumerate() {
        let r = results.get(k).and_then(Option::as_ref);
        let counts = acc.counts();
        let total = session::total(&counts);
        // serve's own sending time; from an older serve, its ready to its result here.
        let send_ns = r.map_or(0, |r| {
            if r.send_ns > 0 { r.send_ns } else { r.at.map_or(0, |at| session::ns_since(ready_at[k], at)) }
        });
        let end =
            r.and_then(|r| r.at).map_or_else(|| session::ns_since(t0, Instant::now()), |at| session::ns_since(t0, at));
        session::close_rows(&mut local_snaps, end, total);
        let mut row = ReceiverResult {
            addr: format!("local<-{}", cfg.targets[k]),
            direction: StreamDirection::Reverse,
            sent: r.map_or(0, |r| r.sent.iter().sum()),
            total,
            publishers: counts,
            intervals: session::intervals(&local_snaps),
            send_ns,
            recv_ns: 0,
            foreign: acc.foreign,
            kernel: kernel_here.clone(),
            loss_split: None,
            wake: Some(acc.wake.summary()),
        };
        // serve sent: its host's drops after the send (from a serve that reports them)
        let serve_drops = r.and_then(|r| r.kernel.as_ref()).and_then(counters::sender_drops);
        row.attribute(serve_drops, &local_reads);
        local_rows.push(row);
    }
    if forward {
        for (i, r) in results.into_iter().enumerate() {
            let Some(r) = r else { continue };
            let total = session::total(&r.received);
            let send_ns = send::span_of(&sent_to[i]);
            // the end of this target's sending on the rows' clock (its senders started
            // after t0, the later the more targets before it)
            session::close_rows(&mut snaps[i], send::end_after(&sent_to[i], t0_mono), total);
            let mut row = ReceiverResult {
                addr: cfg.targets[i].to_string(),
                direction: StreamDirection::Forward,
                sent: sent_to[i].iter().map(|x| x.messages).sum(),
                total,
                publishers: r.received,
                intervals: session::intervals(&snaps[i]),
                send_ns,
                recv_ns: 0,
                foreign: r.foreign,
                kernel: r.kernel,
                loss_split: None,
                wake: r.wake,
            };
            row.attribute(sender_here, &reads[i]);
            out.receivers.push(row);
        }
        out.skipped_ns = all_sent.iter().map(|s| s.skipped_ns).max().unwrap_or(0);
        let mut sender = sender_result(&all_sent);
        sender.sndbuf_errors = sndbuf_here;
        sender.qdisc_drops = qdisc_here;
        out.generator = Some(super::health::of(&all_sent, spec.rate, &sender));
        out.sender = Some(sender);
    }
    out.receivers.extend(local_rows);
    Ok(out)
}

/// How long a polite side waits to hear the other beyond the run's duration.
const HEAR_WAIT: Duration = Duration::from_secs(5);

/// Interval rows kept per serve at most: the run's own (one per interval) and some slack for
/// the final partial row and timing, never more than about a million (bounded memory).
fn rows_cap(duration: Duration, interval: Duration) -> usize {
    let rows = duration.as_nanos() / interval.as_nanos().max(1);
    usize::try_from(rows).unwrap_or(usize::MAX).saturating_add(64).min(1 << 20)
}

/// Sums what every publisher sent; rates over the sending time of them all.
pub(super) fn sender_result(s: &[Sent]) -> SenderResult {
    let messages: u64 = s.iter().map(|x| x.messages).sum();
    let bytes: u64 = s.iter().map(|x| x.bytes).sum();
    let span = send::span_of(s);
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let (per_s, bits_per_s) =
        if span == 0 { (0.0, 0.0) } else { (messages as f64 * 1e9 / span as f64, bytes as f64 * 8e9 / span as f64) };
    SenderResult {
        messages,
        bytes,
        per_s,
        bits_per_s,
        send_ns: span,
        slip_mean_ns: s.iter().map(|x| x.slip_mean_ns).max().unwrap_or(0),
        slip_max_ns: s.iter().map(|x| x.slip_max_ns).max().unwrap_or(0),
        gso: s.iter().any(|x| x.gso),
        retransmits: None,
        sndbuf_errors: None,
        qdisc_drops: None,
    }
}

/// `--no-control`: send to each target (unicast or group) with no serve to ask; the
/// receivers (`wirebench listen`) report their own loss.
pub(super) fn publish_only(cfg: &Config, spec: &RunSpec, session: u64, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let stop = ctx.shutdown.child();
    let mut out = RunOut::default();
    let mut jobs = Vec::new();
    for &t in &cfg.targets {
        jobs.extend(senders(cfg, spec, session, t, &stop, &mut out.warnings)?);
    }
    while jobs.iter().any(|j| !j.is_finished()) {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let sent: Vec<Sent> = jobs
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    let sender = sender_result(&sent);
    out.generator = Some(super::health::of(&sent, spec.rate, &sender));
    out.sender = Some(sender);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rows_are_capped_near_the_runs_own() {
        let s = Duration::from_secs;
        assert_eq!(rows_cap(s(10), s(1)), 74, "10 rows and the slack");
        assert_eq!(rows_cap(s(86_400), Duration::from_millis(100)), 864_064);
        assert_eq!(rows_cap(Duration::MAX, Duration::from_millis(100)), 1 << 20, "never more than the ceiling");
        assert_eq!(rows_cap(s(1), Duration::ZERO), 1 << 20, "no division by zero");
    }
}
